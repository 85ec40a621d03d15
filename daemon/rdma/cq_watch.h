/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A completion queue watched from the loop, through its completion
 * channel: the links' CQs (remote/link.c) and the notification receive
 * rings (rdma/recv_ring.c) share it.
 *
 * On readable: take and ack the channel's events, re-arm, then poll (a
 * completion after the poll raises a new event instead of being missed).
 * A turn of the loop takes at most turn_max completions: a peer that keeps
 * completions coming must not keep the loop from its clients. What the cap
 * leaves is taken on the next turns from an idle handle, since re-arming
 * raises no event for completions already queued.
 *
 * The owner embeds the watch. Both handles carry the owner's data
 * pointer, so that the close callback the owner passes finds it; the
 * watch finds itself by container_of. Loop thread only.
 */
#ifndef RDMAMEMD_CQ_WATCH_H
#define RDMAMEMD_CQ_WATCH_H

#include <stdbool.h>

#include <uv.h>

#include "daemon/rdma/verbs.h"

/* Completions taken per poll call. */
#define CQ_WATCH_BATCH 32

struct cq_watch;

struct cq_watch_ops {
	/* One completion. false: take no more, at once (the owner failed
	 * or is going away; what this batch polled besides is dropped). */
	bool (*completion)(struct cq_watch *w, const struct vb_wc *wc);
	/* A turn took completions and the watch still runs (optional). */
	void (*taken)(struct cq_watch *w);
	/* The channel (channel true, error from libuv) or the CQ failed,
	 * as -errno. The watch was stopped first. */
	void (*failed)(struct cq_watch *w, bool channel, int error);
};

struct cq_watch {
	uv_poll_t poll;
	uv_idle_t more; /* active while the CQ holds what a turn's cap left */
	struct vb_cq *cq;
	const struct cq_watch_ops *ops;
	unsigned turn_max;
	/* cq_watch_stop(), or a failure: neither handle wakes the loop, and
	 * a batch being taken ends after its last completion. */
	bool stopped;
};

/* Both handles, or neither on failure; data: the owner's, for both. */
int cq_watch_init(struct cq_watch *w, uv_loop_t *loop, struct vb_cq *cq, unsigned turn_max,
		  const struct cq_watch_ops *ops, void *data);
int cq_watch_start(struct cq_watch *w);
void cq_watch_stop(struct cq_watch *w);
/* Closes both handles (those not closing yet); close_cb runs once for
 * each, with the owner's data. The CQ is the owner's to destroy after. */
void cq_watch_close(struct cq_watch *w, uv_close_cb close_cb);

/* Takes up to turn_max completions now, outside the loop's callbacks:
 * true when the cap ended it and the watch still runs (more may be
 * queued). */
bool cq_watch_take(struct cq_watch *w);

#endif
