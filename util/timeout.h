/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deadlines for lock waits, all served by one uv_timer: a timeout is a list
 * entry embedded in its owner, so arming and disarming cost no handle
 * setup and no close callback.
 */
#ifndef RDMAMEMD_TIMEOUT_H
#define RDMAMEMD_TIMEOUT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "util/list.h"

struct timeout;
typedef void (*timeout_fn)(struct timeout *t);

struct timeout {
	struct list_head link; /* sorted by deadline */
	uint64_t deadline;     /* uv_now() milliseconds */
	timeout_fn fire;
	bool armed;
};

struct timeouts {
	uv_loop_t *loop;
	uv_timer_t timer;
	struct list_head armed;
};

void timeouts_init(struct timeouts *ts, uv_loop_t *loop);
/* Closes the timer; every timeout must be disarmed by then. */
void timeouts_close(struct timeouts *ts);

/* Fires t after msec milliseconds unless disarmed first. */
void timeout_arm(struct timeouts *ts, struct timeout *t, uint64_t msec, timeout_fn fire);
void timeout_disarm(struct timeouts *ts, struct timeout *t);

#endif
