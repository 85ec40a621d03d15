/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.rdmamemd.WaitNotifications: the notifications other daemons' clients
 * attached to their transfers into the caller's exported regions
 * (daemon/remote/notify.c queues them per session). Three forms:
 *
 *	{}                  what is queued, at once (maybe nothing);
 *	{timeout_ms: t}     the same, but when nothing is queued it waits up
 *	                    to t ms for the first to arrive;
 *	more: true          a stream: what is queued, then each arrival, as
 *	                    replies with "continues", until the client closes
 *	                    the connection (which serves no other call
 *	                    meanwhile: a stream gets a connection of its own).
 *	                    While the connection holds RPC_CONTINUE_ROOM
 *	                    unsent, arrivals wait in the queue (and past its
 *	                    bound are dropped and counted), not in the
 *	                    connection's output.
 *
 * Each reply is {notifications: [...]}, oldest first, and takes what it
 * lists off the queue. Only the caller's session's queue is read: its
 * exports' notifications, never another client's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/remote.h"
#include "daemon/rpc/rpc.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "proto/json.h"

/* A wait without "more" may last this long at most. */
#define WAIT_TIMEOUT_MS_MAX (3600 * 1000)

struct wait_notifications_params {
	int64_t timeout_ms;
	int64_t max;
};

static const struct wait_notifications_params wait_init = { .max = NOTIFY_QUEUE_MAX };

/* clang-format off */
static const struct varlink_symbol rpc_type_Notification = VARLINK_DEFINE_TYPE(
	Notification, "A notification another daemon's client attached to a transfer into one of\n"
	"this connection's exports; it arrived after that transfer's data was in place.",
	VARLINK_FIELD_COMMENT("the export (ExportRegion's id) the sender wrote into"),
	VARLINK_FIELD(export, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("the sending client's uid on its host, as its daemon states it"),
	VARLINK_FIELD(sender_uid, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("the bytes (at most 4096), base64"),
	VARLINK_FIELD(data, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("when this daemon received it: microseconds since the epoch"),
	VARLINK_FIELD(received_usec, VARLINK_U64, 0));

RPC_DEFINE_METHOD(
	WaitNotifications,
	"Takes the notifications queued for this connection's exports, oldest\n"
	"first: at once (maybe none), or, with timeout_ms, waiting up to that long\n"
	"(at most an hour) for the first when none is queued. Called with \"more\",\n"
	"a stream: what is queued, then each arrival, as replies that continue\n"
	"until the connection closes (it serves no other call meanwhile). At most\n"
	"256 wait per connection: later ones are dropped and counted (GetStats).\n"
	"max (1 to 256, default 256): at most this many per reply; the rest stay\n"
	"queued (a stream sends them in further replies).",
	VARLINK_INPUT(struct wait_notifications_params, timeout_ms, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_INPUT(struct wait_notifications_params, max, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_OUTPUT_BY_TYPE(notifications, rpc_type_Notification, VARLINK_ARRAY));
/* clang-format on */

/* {notifications: [...]}: the oldest max that q holds, taken off it. */
static cJSON *take(struct notify_queue *q, int64_t max)
{
	_cleanup_json_ cJSON *reply = cJSON_CreateObject();
	cJSON *list = reply ? cJSON_AddArrayToObject(reply, "notifications") : NULL;
	struct notification *n;

	if (!list)
		return NULL;
	for (int64_t i = 0; q && i < max && (n = notify_queue_pop(q)); i++) {
		_cleanup_free_ _unused_ struct notification *held = n;
		_cleanup_free_ char *data = malloc(base64_encoded_len(n->len) + 1);
		cJSON *o = cJSON_CreateObject();

		if (o)
			cJSON_AddItemToArray(list, o);
		if (!o || !data)
			return NULL;
		base64_encode(n->data, n->len, data);
		if (json_add_u64(o, "export", n->export_id) < 0 ||
		    json_add_int(o, "sender_uid", n->sender_uid) < 0 ||
		    json_add_string(o, "data", data) < 0 ||
		    json_add_u64(o, "received_usec", n->received_usec) < 0)
			return NULL;
	}
	return TAKE_PTR(reply);
}

/* A deferred wait: one reply (timeout_ms) or a stream (more). */
struct notify_wait {
	struct notify_waiter w;
	struct rpc_deferred *d;
	struct notify_queue *q;
	uv_timer_t timer;
	bool more;
	int64_t max;
};

static void wait_free(uv_handle_t *h)
{
	free(h->data);
}

/* Off the queue, the handle ended; freed once the timer is closed. */
static void wait_end(struct notify_wait *nw)
{
	if (nw->q)
		nw->q->waiter = NULL;
	nw->q = NULL;
	uv_close((uv_handle_t *)&nw->timer, wait_free);
}

static void wait_reply(struct notify_wait *nw)
{
	cJSON *reply = take(nw->q, nw->max);
	struct rpc_deferred *d = nw->d;

	wait_end(nw);
	if (reply)
		rpc_deferred_reply(d, reply);
	else
		rpc_deferred_fail(d, -ENOMEM);
}

static void on_room(void *userdata);

/*
 * A stream's replies, one per max, while the connection has room for them.
 * When it has none (the client does not read), the rest stays in the
 * session's queue, whose bound drops and counts what comes past it, and
 * goes when the connection drained (on_room()).
 */
static void stream(struct notify_wait *nw)
{
	cJSON *reply;

	while (nw->q && nw->q->n > 0) {
		if (!rpc_deferred_room(nw->d, on_room))
			return;
		reply = take(nw->q, nw->max);
		if (!reply || rpc_deferred_continue(nw->d, reply) < 0) {
			struct rpc_deferred *d = nw->d;

			wait_end(nw);
			rpc_deferred_fail(d, -ENOMEM);
			return;
		}
	}
}

static void on_room(void *userdata)
{
	stream(userdata);
}

static void on_arrived(struct notify_waiter *w)
{
	struct notify_wait *nw = container_of(w, struct notify_wait, w);

	if (nw->more)
		stream(nw);
	else
		wait_reply(nw);
}

static void on_timeout(uv_timer_t *t)
{
	wait_reply(t->data);
}

/* The session's queue is freed: nobody will read the answer. */
static void on_gone(struct notify_waiter *w)
{
	struct notify_wait *nw = container_of(w, struct notify_wait, w);
	struct rpc_deferred *d = nw->d;

	nw->q = NULL;
	wait_end(nw);
	rpc_deferred_drop(d);
}

static void on_cancel(void *userdata)
{
	struct notify_wait *nw = userdata;
	struct rpc_deferred *d = nw->d;

	wait_end(nw);
	rpc_deferred_drop(d);
}

static int method_wait_notifications(struct rpc_call *call, void *params)
{
	const struct wait_notifications_params *p = params;
	struct notify_ctx *ctx = &call->ctx->remote->notify;
	struct notify_queue *q = notify_queue_get(ctx, call->session);
	struct notify_wait *nw;
	cJSON *reply;

	if (p->max < 1 || p->max > NOTIFY_QUEUE_MAX)
		return rpc_invalid_param(call, "max", "parameter 'max' must be 1 to %u",
					 NOTIFY_QUEUE_MAX);
	if (p->timeout_ms < 0 || p->timeout_ms > WAIT_TIMEOUT_MS_MAX)
		return rpc_invalid_param(call, "timeout_ms",
					 "parameter 'timeout_ms' must be 0 to %d",
					 WAIT_TIMEOUT_MS_MAX);
	if (!q)
		return -ENOMEM;
	if (!call->vc.more && (q->n > 0 || p->timeout_ms == 0)) {
		reply = take(q, p->max);
		return reply ? rpc_reply(call, reply) : -ENOMEM;
	}
	nw = calloc(1, sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	nw->w = (struct notify_waiter){ .arrived = on_arrived, .gone = on_gone };
	nw->q = q;
	nw->more = call->vc.more;
	nw->max = p->max;
	uv_timer_init(call->ctx->core->loop, &nw->timer);
	nw->timer.data = nw;
	nw->d = rpc_defer(call, on_cancel, nw);
	/* One call at a time per connection, one session per connection:
	 * nobody else waits on q. */
	q->waiter = &nw->w;
	if (!nw->more) {
		uv_timer_start(&nw->timer, on_timeout, (uint64_t)p->timeout_ms, 0);
		return 0;
	}
	if (q->n > 0)
		stream(nw);
	return 0;
}

const struct rpc_method rpc_notify_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, WaitNotifications, method_wait_notifications,
		   RPC_PARAMS(struct wait_notifications_params), .params_init = &wait_init),
	{},
};
