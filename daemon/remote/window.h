/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion window of one RC queue pair, and the batches (transfers)
 * that post through it.
 *
 * A window keeps at most depth (W) work requests outstanding on its queue
 * pair, shared by every batch that uses the pair: batches queue in FIFO
 * order and take turns, one post call each. Within a post call every S-th
 * WR is signalled, and always the last, so the newest outstanding WR is
 * always signalled and every outstanding WR is retired by some completion.
 * The wr_id of a WR is its sequence number on the window (< 2^63). RC
 * completes a send queue in order, so a completion for sequence s retires
 * every outstanding WR up to s; an error completion for s retires the ones
 * before s as done, fails s with its status and fails every later one as
 * flushed (the QP is in error: the flush completions the link may deliver
 * afterwards are counted and ignored). So the CQ never owes more than W
 * entries for a window (flushes included): a link's CQ of depth ≥ W per
 * window cannot overflow; counters say what was owed at most.
 *
 * A batch is one plan (wr_plan.h) over one window per path. Its WRs are
 * generated as they are posted, at most a post call's worth at a time (a
 * lane's cursor), and what the window keeps of each outstanding WR is the
 * few words that retire it: memory is O(ops + depth) whatever the plan's
 * WR count, and a turn of the window does O(post_max) WRs. Each op's
 * outcome is reported exactly once, through op_done: done when every WR
 * carrying it has completed, else the first failure among them (the WR's
 * error, a flush, or a cancellation). done comes once, after every op was
 * reported and every WR of the batch that was posted has completed or been
 * flushed: until then the batch's memory may still be read or written by
 * the NIC, so its caller keeps the regions (and the plan) alive.
 *
 * Everything runs on one thread, the loop's: window_complete() takes the
 * link's polled completions, window_kick() says the link has room again.
 * Callbacks run synchronously from window_batch_start(), _cancel(),
 * window_complete(), window_fail() and window_kick(); from them a caller
 * may start, cancel or finish batches and fail windows, but may not call
 * window_complete() or free a window. A batch may be finished
 * (window_batch_fini()) from its own done callback.
 *
 * Pure logic: no verbs, no loop. The link is reached through struct
 * window_link_ops, so tests and benchmarks drive the window with a fake.
 */
#ifndef RDMAMEMD_WINDOW_H
#define RDMAMEMD_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/remote/wr_plan.h"
#include "util/list.h"

enum window_outcome {
	WINDOW_OK,
	/* A WR carrying the op completed with an error: status and vendor_err
	 * are its completion's. */
	WINDOW_WC_ERROR,
	/* The QP failed before the op's WRs ran: status and vendor_err are the
	 * cause's (the error completion that failed the QP, a negative errno
	 * from post, or what window_fail() was given). */
	WINDOW_FLUSHED,
	/* window_batch_cancel() came before every WR carrying the op was posted. */
	WINDOW_CANCELLED,
};

struct window_status {
	enum window_outcome outcome;
	int status; /* the link's completion status (0: success), or a -errno */
	uint32_t vendor_err;
};

/* One completion, as the link polled it. */
struct window_wc {
	uint64_t wr_id;
	int status; /* 0: success */
	uint32_t vendor_err;
};

struct window_link_ops {
	/*
	 * Posts wrs[0..n) on the QP, in order, each with its wr_id and
	 * signalled flag. Returns 0 (all posted), -EAGAIN (none: the send
	 * queue is full; the link calls window_kick() when it has room,
	 * besides the retry after each completion) or another -errno (none:
	 * the QP is unusable; the window fails as by window_fail()). Never
	 * calls back into the window.
	 */
	int (*post)(void *link, struct wr *wrs, size_t n);
};

struct window_params {
	uint32_t depth;        /* W: WRs outstanding at most, ≥ 1 */
	uint32_t signal_every; /* S: 1 .. depth */
	uint32_t post_max;     /* WRs per post call at most; 0: depth */
};

/* Invariant: posted == retired_ok + retired_failed + outstanding. */
struct window_counters {
	uint64_t posted;
	uint64_t signalled;
	uint64_t post_calls;
	uint64_t post_again; /* post calls answered -EAGAIN */
	uint64_t completions;
	uint64_t retired_ok;
	uint64_t retired_failed; /* the error WR and the flushed ones */
	uint64_t stray;          /* completions naming no outstanding WR */
	uint64_t after_fail;     /* completions after the window failed */
	uint32_t outstanding;
	uint32_t max_outstanding;
	uint32_t cqes_due; /* signalled WRs outstanding: CQEs owed on success */
	uint32_t max_cqes_due;
};

struct window_batch;

/* An outstanding WR: what retiring it needs. */
struct window_entry {
	struct window_batch *b;
	uint32_t first_op, n_ops; /* the ops it carries */
	uint32_t length;
	bool signalled;
};

struct window {
	struct window_params params;
	const struct window_link_ops *ops;
	void *link;
	struct window_entry *ring; /* outstanding seq s at ring[s & mask] */
	uint64_t mask;
	uint64_t tail, head;    /* outstanding: sequences [tail, head) */
	struct list_head queue; /* lanes with WRs to post, the next to post first */
	struct wr *buf;         /* one post call's WRs: post_max */
	bool failed;
	struct window_status cause; /* why it failed */
	bool in_post;
	struct window_counters c;
};

int window_init(struct window *w, const struct window_params *params,
		const struct window_link_ops *ops, void *link);
/* Fails what is still outstanding or queued (FLUSHED, -ESHUTDOWN), frees. */
void window_done(struct window *w);

/* The link's completions, in the order it polled them: one poll or many. */
void window_complete(struct window *w, const struct window_wc *wcs, size_t n);
/* The QP is gone (disconnected, CQ overflow, destroyed): every outstanding
 * and queued WR fails as flushed with this cause; so does anything started
 * on the window later. */
void window_fail(struct window *w, int status, uint32_t vendor_err);
/* The link has room again after -EAGAIN. */
void window_kick(struct window *w);

struct window_batch_ops {
	/* Op position op (its wr_op's index is the caller's name) ended. */
	void (*op_done)(void *userdata, struct window_batch *b, uint32_t op,
			const struct window_status *st);
	/* Every op reported, nothing of the batch outstanding. */
	void (*done)(void *userdata, struct window_batch *b);
	/* Optional: the last WR of path's lane went to the link (every WR of
	 * the lane was posted; never after a cancel or a failure dropped
	 * some). Called from inside the window's posting: it may post on the
	 * link but must not call into the window. */
	void (*posted)(void *userdata, struct window_batch *b, uint32_t path);
};

/* A batch's WRs of one path, and where they stand on that path's window. */
struct window_lane {
	struct list_head node; /* in win->queue while cur is not done and posting goes on */
	struct window_batch *b;
	struct window *win;
	struct wr_cursor cur; /* the WRs not posted yet (zeroed before start: none) */
};

struct window_progress {
	uint64_t ops_ok;
	uint64_t ops_failed; /* error, flushed or cancelled */
	uint64_t bytes_done; /* bytes of WRs completed successfully */
	uint64_t wrs_done;
};

struct window_batch {
	const struct wr_plan *plan; /* the caller's, unchanged until fini */
	uint32_t *op_state;         /* per op: WRs carrying it not retired; OP_REPORTED */
	struct window_lane lanes[WR_PLAN_PATHS_MAX];
	uint64_t in_flight; /* posted, not retired */
	size_t ops_left;    /* not reported */
	struct window_progress progress;
	unsigned hold; /* > 0: inside the window's hands, done waits */
	bool started, cancelled, finished;
	const struct window_batch_ops *cb;
	void *userdata;
};

/* Returns 0 or -ENOMEM. O(ops): the WRs are counted, not built. */
int window_batch_init(struct window_batch *b, const struct wr_plan *plan,
		      const struct window_batch_ops *cb, void *userdata);
/* Queues path p's WRs on wins[p] (p < the plan's n_paths) and posts what
 * fits. An empty plan is done at once. */
void window_batch_start(struct window_batch *b, struct window *const *wins);
/* Stops posting: ops not wholly posted are reported CANCELLED now (before
 * start: when it starts); the posted WRs complete or flush, then done
 * comes. */
void window_batch_cancel(struct window_batch *b);
/* Before start, or after done. */
void window_batch_fini(struct window_batch *b);

#endif
