/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/core/log.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/notify_msg.h"

static uint64_t realtime_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct notify_queue *notify_queue_of(const struct session *s)
{
	const struct session_set *set = &s->sets[SESSION_NOTIFY];

	if (set->n == 0)
		return NULL;
	return container_of(list_first_entry(&set->items, struct session_link, link),
			    struct notify_queue, link);
}

struct notify_queue *notify_queue_get(struct notify_ctx *ctx, struct session *s)
{
	struct notify_queue *q = notify_queue_of(s);

	if (q || s->closed)
		return q;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->ctx = ctx;
	list_init(&q->items);
	session_link_init(&q->link);
	session_add(s, SESSION_NOTIFY, &q->link);
	ctx->n_queues++;
	return q;
}

struct notification *notify_queue_pop(struct notify_queue *q)
{
	struct notification *n;

	if (list_empty(&q->items))
		return NULL;
	n = list_first_entry(&q->items, struct notification, node);
	list_del(&n->node);
	q->n--;
	q->ctx->n_queued--;
	return n;
}

/* The session ended: its notifications go unread. */
static void queue_drop(struct session_link *link)
{
	struct notify_queue *q = container_of(link, struct notify_queue, link);
	struct notify_waiter *w = q->waiter;
	struct notification *n;

	session_remove(&q->link);
	q->waiter = NULL;
	if (w)
		w->gone(w);
	while ((n = notify_queue_pop(q)))
		free(n);
	q->ctx->n_queues--;
	free(q);
}

void notify_received(struct notify_ctx *ctx, struct rconn *c, const uint8_t *data, size_t len)
{
	struct session *owner = c->token->owner_link.session;
	struct notify_header h;
	struct notification *n;
	struct notify_queue *q;
	const char *why = NULL;

	c->notify.received++;
	c->token->notify.received++;
	/* Counted dropped until it is queued. */
	c->notify.dropped++;
	c->token->notify.dropped++;
	if (notify_msg_decode(data, len, &h, &why) < 0 || h.export_id != c->token->export_id) {
		ctx->stats.malformed++;
		log_debug("RDMA connection %" PRIu64 " from %s: dropped %zu bytes: %s", c->id,
			  c->peer, len, why ?: "a notification of another export");
		return;
	}
	q = owner ? notify_queue_get(ctx, owner) : NULL;
	if (!q) {
		ctx->stats.no_owner++;
		return;
	}
	if (q->n >= NOTIFY_QUEUE_MAX) {
		q->dropped++;
		ctx->stats.full++;
		log_debug("Notification of export %" PRIu64 " dropped: session %" PRIu64
			  " holds %u unread",
			  h.export_id, owner->id, q->n);
		return;
	}
	n = malloc(sizeof(*n) + h.length);
	if (!n) {
		ctx->stats.no_owner++;
		return;
	}
	*n = (struct notification){ .export_id = h.export_id,
				    .sender_uid = (uid_t)h.sender_uid,
				    .received_usec = realtime_usec(),
				    .len = h.length };
	memcpy(n->data, data + NOTIFY_HEADER_BYTES, h.length);
	list_add_tail(&n->node, &q->items);
	c->notify.dropped--;
	c->token->notify.dropped--;
	c->notify.queued++;
	c->token->notify.queued++;
	q->n++;
	q->received++;
	ctx->n_queued++;
	ctx->stats.received++;
	if (q->waiter)
		q->waiter->arrived(q->waiter);
}

static void on_received(void *userdata, struct rconn *c, const uint8_t *data, size_t len)
{
	notify_received(userdata, c, data, len);
}

void notify_init(struct notify_ctx *ctx, struct rdma_ctx *rdma)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->rdma = rdma;
	rdma->received = on_received;
	rdma->received_userdata = ctx;
	session_kind_register(SESSION_NOTIFY, queue_drop);
}
