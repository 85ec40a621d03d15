/* SPDX-License-Identifier: BSD-3-Clause */
#include "util/timeout.h"

static void rearm(struct timeouts *ts);

static void on_timer(uv_timer_t *h)
{
	struct timeouts *ts = h->data;
	uint64_t now = uv_now(ts->loop);

	while (!list_empty(&ts->armed)) {
		struct timeout *t = list_first_entry(&ts->armed, struct timeout, link);

		if (t->deadline > now)
			break;
		list_del(&t->link);
		t->armed = false;
		/* May arm or disarm others: take them one at a time. */
		t->fire(t);
	}
	rearm(ts);
}

static void rearm(struct timeouts *ts)
{
	struct timeout *t;
	uint64_t now = uv_now(ts->loop);

	if (list_empty(&ts->armed)) {
		uv_timer_stop(&ts->timer);
		return;
	}
	t = list_first_entry(&ts->armed, struct timeout, link);
	uv_timer_start(&ts->timer, on_timer, t->deadline > now ? t->deadline - now : 0, 0);
}

void timeouts_init(struct timeouts *ts, uv_loop_t *loop)
{
	ts->loop = loop;
	list_init(&ts->armed);
	uv_timer_init(loop, &ts->timer);
	ts->timer.data = ts;
}

void timeouts_close(struct timeouts *ts)
{
	if (!uv_is_closing((uv_handle_t *)&ts->timer))
		uv_close((uv_handle_t *)&ts->timer, NULL);
}

void timeout_arm(struct timeouts *ts, struct timeout *t, uint64_t msec, timeout_fn fire)
{
	struct timeout *pos;

	timeout_disarm(ts, t);
	t->deadline = uv_now(ts->loop) + msec;
	t->fire = fire;
	t->armed = true;
	/* Most waits share one timeout value, so new ones go last: walk
	 * from the tail. */
	for (pos = list_entry(ts->armed.prev, struct timeout, link); &pos->link != &ts->armed;
	     pos = list_entry(pos->link.prev, struct timeout, link))
		if (pos->deadline <= t->deadline)
			break;
	/* Insert after pos (or at the head when none is earlier). */
	t->link.prev = &pos->link;
	t->link.next = pos->link.next;
	pos->link.next->prev = &t->link;
	pos->link.next = &t->link;
	if (ts->armed.next == &t->link)
		rearm(ts);
}

void timeout_disarm(struct timeouts *ts, struct timeout *t)
{
	bool first;

	if (!t->armed)
		return;
	first = ts->armed.next == &t->link;
	list_del(&t->link);
	t->armed = false;
	if (first)
		rearm(ts);
}
