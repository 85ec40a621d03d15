/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/window.h"

/* op_state: the count of WRs carrying the op not yet retired, and whether
 * its outcome went out (then later retirements say nothing). */
#define OP_REPORTED (1U << 31)
#define OP_PIECES (OP_REPORTED - 1)
static_assert(WR_OP_WRS_MAX <= OP_PIECES, "an op's WR count fits below OP_REPORTED");

int window_init(struct window *w, const struct window_params *params,
		const struct window_link_ops *ops, void *link)
{
	uint64_t size = 1;

	if (params->depth < 1 || params->signal_every < 1 || params->signal_every > params->depth ||
	    params->depth > (1U << 24))
		return -EINVAL;
	while (size < params->depth)
		size *= 2;
	*w = (struct window){ .params = *params, .ops = ops, .link = link, .mask = size - 1 };
	if (!w->params.post_max || w->params.post_max > w->params.depth)
		w->params.post_max = w->params.depth;
	w->ring = calloc(size, sizeof(*w->ring));
	w->buf = calloc(w->params.post_max, sizeof(*w->buf));
	if (!w->ring || !w->buf) {
		free(w->ring);
		free(w->buf);
		w->ring = NULL;
		w->buf = NULL;
		return -ENOMEM;
	}
	list_init(&w->queue);
	return 0;
}

void window_done(struct window *w)
{
	window_fail(w, -ESHUTDOWN, 0);
	free(w->ring);
	free(w->buf);
	w->ring = NULL;
	w->buf = NULL;
}

static void batch_finish_maybe(struct window_batch *b)
{
	if (b->hold || b->finished || !b->started || b->ops_left || b->in_flight)
		return;
	b->finished = true;
	/* b may be freed from here: nothing touches it after. */
	b->cb->done(b->userdata, b);
}

static void batch_unqueue(struct window_batch *b)
{
	for (size_t p = 0; p < WR_PLAN_PATHS_MAX; p++)
		if (list_linked(&b->lanes[p].node))
			list_del(&b->lanes[p].node);
}

static void op_report(struct window_batch *b, uint32_t op, const struct window_status *st)
{
	b->op_state[op] |= OP_REPORTED;
	b->ops_left--;
	if (st->outcome == WINDOW_OK)
		b->progress.ops_ok++;
	else
		b->progress.ops_failed++;
	/* Nothing left worth posting once every op has its outcome. */
	if (!b->ops_left)
		batch_unqueue(b);
	b->cb->op_done(b->userdata, b, op, st);
}

/* The WR x of b left the QP (done, failed or flushed). The caller holds b. */
static void batch_wr_end(struct window_batch *b, const struct window_entry *x,
			 const struct window_status *st)
{
	b->in_flight--;
	if (st->outcome == WINDOW_OK) {
		b->progress.bytes_done += x->length;
		b->progress.wrs_done++;
	}
	for (uint32_t op = x->first_op; op < x->first_op + x->n_ops; op++) {
		uint32_t s = b->op_state[op] - 1;

		b->op_state[op] = s;
		if (s & OP_REPORTED)
			continue;
		if (st->outcome != WINDOW_OK || !(s & OP_PIECES))
			op_report(b, op, st);
	}
}

/* The unposted WRs of a lane will never run: their ops fail with st. */
static void lane_drop(struct window_lane *l, const struct window_status *st)
{
	struct window_batch *b = l->b;

	if (list_linked(&l->node))
		list_del(&l->node);
	b->hold++;
	/* The cursor moves past an op before it is reported: a callback that
	 * drops the lane again finds only what is left. */
	for (uint32_t op; wr_cursor_drop(&l->cur, &op);)
		if (!(b->op_state[op] & OP_REPORTED))
			op_report(b, op, st);
	b->hold--;
	batch_finish_maybe(b);
}

/* Retires the oldest outstanding WR with st. */
static void retire_one(struct window *w, const struct window_status *st)
{
	struct window_entry e = w->ring[w->tail & w->mask];
	struct window_batch *b = e.b;

	w->tail++;
	w->c.outstanding--;
	if (e.signalled)
		w->c.cqes_due--;
	if (st->outcome == WINDOW_OK)
		w->c.retired_ok++;
	else
		w->c.retired_failed++;
	b->hold++;
	batch_wr_end(b, &e, st);
	b->hold--;
	batch_finish_maybe(b);
}

void window_fail(struct window *w, int status, uint32_t vendor_err)
{
	if (w->failed)
		return;
	w->failed = true;
	w->cause = (struct window_status){ .outcome = WINDOW_FLUSHED,
					   .status = status,
					   .vendor_err = vendor_err };
	while (w->tail < w->head)
		retire_one(w, &w->cause);
	while (!list_empty(&w->queue))
		lane_drop(list_first_entry(&w->queue, struct window_lane, node), &w->cause);
}

/*
 * Posts from the queued lanes while the window has room, one post call per
 * lane and turn. Each call signals every S-th WR and its last, so the newest
 * outstanding WR is always signalled.
 */
static void pump(struct window *w)
{
	while (!w->failed && !list_empty(&w->queue) && w->c.outstanding < w->params.depth) {
		struct window_lane *l = list_first_entry(&w->queue, struct window_lane, node);
		struct window_batch *b = l->b;
		/* Taken WRs that cannot be posted go back: the copy is put back. */
		struct wr_cursor kept = l->cur;
		struct wr *wrs = w->buf;
		size_t n = w->params.depth - w->c.outstanding;
		uint32_t sig = 0;
		int r;

		if (n > w->params.post_max)
			n = w->params.post_max;
		/* Queued lanes have WRs left: n ≥ 1. */
		n = wr_cursor_take(&l->cur, wrs, n);
		assert(n > 0);
		for (size_t i = 0; i < n; i++) {
			wrs[i].wr_id = w->head + i;
			wrs[i].signalled = (i + 1) % w->params.signal_every == 0 || i + 1 == n;
		}
		w->in_post = true;
		r = w->ops->post(w->link, wrs, n);
		w->in_post = false;
		w->c.post_calls++;
		if (r < 0)
			l->cur = kept;
		if (r == -EAGAIN) {
			w->c.post_again++;
			return;
		}
		if (r < 0) {
			window_fail(w, r, 0);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			w->ring[(w->head + i) & w->mask] =
				(struct window_entry){ .b = b,
						       .first_op = wrs[i].first_op,
						       .n_ops = wrs[i].n_ops,
						       .length = wrs[i].length,
						       .signalled = wrs[i].signalled };
			sig += wrs[i].signalled;
		}
		w->head += n;
		w->c.posted += n;
		w->c.signalled += sig;
		w->c.outstanding += n;
		w->c.cqes_due += sig;
		if (w->c.outstanding > w->c.max_outstanding)
			w->c.max_outstanding = w->c.outstanding;
		if (w->c.cqes_due > w->c.max_cqes_due)
			w->c.max_cqes_due = w->c.cqes_due;
		b->in_flight += n;
		/* Its turn is over: to the back, or off the queue when posted. */
		list_del(&l->node);
		if (!wr_cursor_done(&l->cur))
			list_add_tail(&l->node, &w->queue);
		else if (b->cb->posted)
			b->cb->posted(b->userdata, b, (uint32_t)(l - b->lanes));
	}
}

void window_kick(struct window *w)
{
	pump(w);
}

static void complete_one(struct window *w, const struct window_wc *wc)
{
	struct window_status st;

	w->c.completions++;
	if (w->failed) {
		w->c.after_fail++;
		return;
	}
	if (wc->wr_id < w->tail || wc->wr_id >= w->head) {
		w->c.stray++;
		return;
	}
	/* RC order: everything before it ran. A callback may fail the window. */
	st = (struct window_status){ .outcome = WINDOW_OK };
	while (!w->failed && w->tail < wc->wr_id)
		retire_one(w, &st);
	if (w->failed || w->tail != wc->wr_id)
		return;
	if (wc->status == 0) {
		retire_one(w, &st);
		return;
	}
	st = (struct window_status){ .outcome = WINDOW_WC_ERROR,
				     .status = wc->status,
				     .vendor_err = wc->vendor_err };
	retire_one(w, &st);
	window_fail(w, wc->status, wc->vendor_err);
}

void window_complete(struct window *w, const struct window_wc *wcs, size_t n)
{
	/* The link delivers completions from the loop, never from post. */
	assert(!w->in_post);
	for (size_t i = 0; i < n; i++)
		complete_one(w, &wcs[i]);
	pump(w);
}

int window_batch_init(struct window_batch *b, const struct wr_plan *plan,
		      const struct window_batch_ops *cb, void *userdata)
{
	*b = (struct window_batch){ .plan = plan, .cb = cb, .userdata = userdata };
	b->op_state = malloc((plan->n_ops ? plan->n_ops : 1) * sizeof(*b->op_state));
	if (!b->op_state)
		return -ENOMEM;
	/* Each below WR_OP_WRS_MAX: the plan refused larger. */
	wr_plan_op_wrs(plan, b->op_state);
	b->ops_left = plan->n_ops;
	for (size_t p = 0; p < WR_PLAN_PATHS_MAX; p++) {
		b->lanes[p].b = b;
		list_init(&b->lanes[p].node);
	}
	return 0;
}

static const struct window_status cancelled = { .outcome = WINDOW_CANCELLED };

void window_batch_start(struct window_batch *b, struct window *const *wins)
{
	const struct wr_plan *plan = b->plan;

	assert(!b->started);
	b->started = true;
	b->hold++;
	for (uint32_t p = 0; p < plan->n_paths; p++) {
		struct window_lane *l = &b->lanes[p];

		l->win = wins[p];
		wr_cursor_init(&l->cur, plan, p);
		if (wr_cursor_done(&l->cur) || b->ops_left == 0)
			continue;
		/* Cancelled before it started: nothing goes out. */
		if (b->cancelled) {
			lane_drop(l, &cancelled);
			continue;
		}
		if (l->win->failed) {
			lane_drop(l, &l->win->cause);
			continue;
		}
		list_add_tail(&l->node, &l->win->queue);
	}
	for (uint32_t p = 0; p < plan->n_paths; p++)
		if (list_linked(&b->lanes[p].node))
			pump(b->lanes[p].win);
	b->hold--;
	batch_finish_maybe(b);
}

void window_batch_cancel(struct window_batch *b)
{
	if (b->cancelled || b->finished)
		return;
	b->cancelled = true;
	b->hold++;
	for (uint32_t p = 0; p < b->plan->n_paths; p++)
		lane_drop(&b->lanes[p], &cancelled);
	b->hold--;
	batch_finish_maybe(b);
}

void window_batch_fini(struct window_batch *b)
{
	assert(!b->started || b->finished);
	free(b->op_state);
	b->op_state = NULL;
}
