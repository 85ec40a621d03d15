/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Work the loop looks at on every turn, without sleeping, until it ends:
 * a GPU copy started from the loop, whose end the loop asks the driver
 * about instead of waiting for a pool thread to wait for it and then wake
 * the loop. While anything is watched, one uv_idle handle keeps the loop
 * from sleeping in epoll: it still serves every connection between two
 * looks, and spends a CPU on looking for as long as the work lasts.
 *
 * Loop thread only. An item is a list entry embedded in its owner, so
 * watching costs no handle setup and no close callback.
 */
#ifndef RDMAMEMD_LOOP_POLL_H
#define RDMAMEMD_LOOP_POLL_H

#include <stdbool.h>

#include <uv.h>

#include "util/list.h"

struct loop_poll_item;
/* One look at it, on the loop. Calls loop_poll_del(it) when it is done,
 * before anything may free it; may add items. */
typedef void (*loop_poll_fn)(struct loop_poll_item *it);

struct loop_poll_item {
	struct list_head link;
	loop_poll_fn look;
};

struct loop_poll {
	uv_idle_t idle; /* active while items is not empty */
	struct list_head items;
	bool stopping; /* loop_poll_stop() ran: closes once items is empty */
};

void loop_poll_init(struct loop_poll *p, uv_loop_t *loop);
/* Watches it from the next turn on: 0, or -ESHUTDOWN after loop_poll_stop(). */
int loop_poll_add(struct loop_poll *p, struct loop_poll_item *it, loop_poll_fn look);
void loop_poll_del(struct loop_poll_item *it);

/* Whether it is watched: added and not deleted since (zeroed: not). */
static inline bool loop_poll_watched(const struct loop_poll_item *it)
{
	return list_linked(&it->link);
}
/* Shutdown: adds nothing more; the handle closes once nothing is watched. */
void loop_poll_stop(struct loop_poll *p);

#endif
