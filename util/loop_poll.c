/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>

#include "util/loop_poll.h"

static void loop_poll_close_if_done(struct loop_poll *p)
{
	if (!list_empty(&p->items))
		return;
	uv_idle_stop(&p->idle);
	if (p->stopping && !uv_is_closing((uv_handle_t *)&p->idle))
		uv_close((uv_handle_t *)&p->idle, NULL);
}

static void on_idle(uv_idle_t *h)
{
	struct loop_poll *p = container_of(h, struct loop_poll, idle);
	struct loop_poll_item *it, *next;

	/* A look that ends its item deletes it first. One that adds an item
	 * adds it at the tail: this turn reaches it unless the adding look was
	 * the last, whose successor was taken before the look. */
	list_for_each_entry_safe(it, next, &p->items, link)
		it->look(it);
	loop_poll_close_if_done(p);
}

void loop_poll_init(struct loop_poll *p, uv_loop_t *loop)
{
	uv_idle_init(loop, &p->idle);
	list_init(&p->items);
	p->stopping = false;
}

int loop_poll_add(struct loop_poll *p, struct loop_poll_item *it, loop_poll_fn look)
{
	if (p->stopping)
		return -ESHUTDOWN;
	it->look = look;
	list_add_tail(&it->link, &p->items);
	uv_idle_start(&p->idle, on_idle);
	return 0;
}

void loop_poll_del(struct loop_poll_item *it)
{
	list_del(&it->link);
}

void loop_poll_stop(struct loop_poll *p)
{
	if (!p->idle.loop || p->stopping)
		return;
	p->stopping = true;
	loop_poll_close_if_done(p);
}
