/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Notifications received: what other daemons' links SEND after the data of
 * a transfer (link_post_notify()), on queue pairs this daemon's endpoint
 * admitted with an export's token (ExportRegion). Each is matched to that
 * export — the token that admitted the connection names it, and the
 * message must name the same — and queued for the session that owns the
 * token, which reads them with WaitNotifications (rpc/rpc_notify.c).
 *
 * A session's queue (SESSION_NOTIFY, made at its first notification) holds
 * at most NOTIFY_QUEUE_MAX: past that, arrivals are dropped and counted,
 * not the oldest (what the owner has not read yet was sent first). A
 * message that is not a well-formed notification of that export is dropped
 * and counted too, never queued. The session's end frees its queue; its
 * tokens, and so the connections that could add to it, went first.
 *
 * One reader may wait on a queue (a WaitNotifications stream or a wait
 * with a timeout): arrived() runs on each arrival, after it is queued.
 * Loop thread only.
 */
#ifndef RDMAMEMD_NOTIFY_H
#define RDMAMEMD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/core/session.h"
#include "util/list.h"

struct rdma_ctx;
struct rconn;

/* Notifications queued per session at most. */
#define NOTIFY_QUEUE_MAX 256U

struct notification {
	struct list_head node; /* in queue->items */
	uint64_t export_id;
	uid_t sender_uid;       /* as the sending daemon states it */
	uint64_t received_usec; /* CLOCK_REALTIME */
	uint32_t len;
	uint8_t data[];
};

struct notify_waiter {
	void (*arrived)(struct notify_waiter *w);
	/* The queue is being freed (its session ended): no more arrivals. */
	void (*gone)(struct notify_waiter *w);
};

struct notify_queue {
	struct session_link link; /* SESSION_NOTIFY */
	struct notify_ctx *ctx;
	struct list_head items; /* struct notification, oldest first */
	unsigned n;
	uint64_t received, dropped; /* dropped: the queue was full */
	struct notify_waiter *waiter;
};

struct notify_stats {
	uint64_t received;  /* queued */
	uint64_t full;      /* dropped: the owner's queue was full */
	uint64_t malformed; /* dropped: not a notification of the connection's export */
	uint64_t no_owner;  /* dropped: nobody to queue it for (out of memory) */
};

struct notify_ctx {
	struct rdma_ctx *rdma;
	unsigned n_queues;
	uint64_t n_queued; /* held, across queues */
	struct notify_stats stats;
};

/* At daemon start: the endpoint's receive hook, SESSION_NOTIFY's drop hook. */
void notify_init(struct notify_ctx *ctx, struct rdma_ctx *rdma);

/* A message a peer SENT on c (the endpoint's hook; for the tests too). */
void notify_received(struct notify_ctx *ctx, struct rconn *c, const uint8_t *data, size_t len);

/* s's queue, or NULL when nothing ever arrived for it. */
struct notify_queue *notify_queue_of(const struct session *s);
/* s's queue, made when missing; NULL: out of memory or s is closed. */
struct notify_queue *notify_queue_get(struct notify_ctx *ctx, struct session *s);
/* The oldest notification taken off q (the caller frees it), or NULL. */
struct notification *notify_queue_pop(struct notify_queue *q);

#endif
