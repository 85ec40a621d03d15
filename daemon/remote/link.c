/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "proto/errors.h"
#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/remote/link.h"
#include "daemon/remote/notify_msg.h"

/* Completions taken per turn of the loop at most: a peer that keeps them
 * coming (each callback posts more, which complete at once) would otherwise
 * keep the loop inside one callback (rdma/cq_watch.h). */
#define POLL_TURN_MAX (8 * CQ_WATCH_BATCH)

static void link_fail(struct link *l, enum link_state state, int error, const char *fmt, ...)
	_printf_(4, 5);
static void arm_timer(struct link *l);

/* The loop's time is that of its last turn: a connect's own time is
 * measured by the clock. */
static uint64_t now_msec(void)
{
	return uv_hrtime() / 1000000;
}

const char *link_state_name(enum link_state s)
{
	switch (s) {
	case LINK_CONNECTING:
		return "connecting";
	case LINK_READY:
		return "ready";
	case LINK_ERROR:
		return "error";
	case LINK_CLOSED:
		return "closed";
	}
	return "unknown";
}

const char *link_error_kind_name(enum link_error_kind k)
{
	static const char *const names[LINK_ERR_KINDS] = {
		[LINK_ERR_CONNECT] = "connect",
		[LINK_ERR_REMOTE_ACCESS] = "remote_access",
		[LINK_ERR_LOCAL_ACCESS] = "local_access",
		[LINK_ERR_RETRY] = "retry_exceeded",
		[LINK_ERR_DISCONNECT] = "disconnect",
		[LINK_ERR_STALLED] = "stalled",
		[LINK_ERR_OTHER] = "other",
	};

	return (unsigned)k < LINK_ERR_KINDS ? names[k] : "unknown";
}

/* Why l is failing, for its counters: before link_fail() sets the state. */
static enum link_error_kind error_kind(const struct link *l)
{
	if (l->state == LINK_CONNECTING)
		return LINK_ERR_CONNECT;
	if (!l->has_fail_wc) {
		if (l->error == -ECONNRESET)
			return LINK_ERR_DISCONNECT;
		return l->stalled ? LINK_ERR_STALLED : LINK_ERR_OTHER;
	}
	switch (l->fail_wc.status) {
	case VB_WC_FLUSH_ERR:
		return LINK_ERR_DISCONNECT;
	case VB_WC_REM_ACCESS_ERR:
	case VB_WC_REM_OP_ERR:
		return LINK_ERR_REMOTE_ACCESS;
	case VB_WC_LOC_ACCESS_ERR:
		return LINK_ERR_LOCAL_ACCESS;
	case VB_WC_RETRY_EXC_ERR:
		return LINK_ERR_RETRY;
	default:
		return LINK_ERR_OTHER;
	}
}

static void count(struct xfer_count *x, const struct link_slot *s)
{
	if (s->opcode == VB_WR_RDMA_READ) {
		x->reads++;
		x->bytes_in += s->length;
	} else if (s->opcode != VB_WR_SEND) {
		x->writes++;
		x->bytes_out += s->length;
	}
}

/* The WR in s completed: the link's counters and its device's. */
static void count_done(struct link *l, const struct link_slot *s)
{
	count(&l->stats.done, s);
	count(&l->key.dev->xfer, s);
}

void link_pool_init(struct link_pool *pool, uv_loop_t *loop, const struct link_pool_config *cfg)
{
	memset(pool, 0, sizeof(*pool));
	pool->loop = loop;
	if (cfg)
		pool->cfg = *cfg;
	if (!pool->cfg.window)
		pool->cfg.window = LINK_WINDOW_DEFAULT;
	if (!pool->cfg.idle_sec)
		pool->cfg.idle_sec = LINK_IDLE_SEC_DEFAULT;
	if (!pool->cfg.connect_timeout_ms)
		pool->cfg.connect_timeout_ms = LINK_CONNECT_TIMEOUT_MS_DEFAULT;
	if (!pool->cfg.ack_timeout)
		pool->cfg.ack_timeout = LINK_ACK_TIMEOUT_DEFAULT;
	pool->cfg.ack_timeout = MIN(pool->cfg.ack_timeout, 31U);
	if (!cfg || !cfg->retry_count)
		pool->cfg.retry_count = LINK_RETRY_COUNT;
	pool->cfg.retry_count = MIN(pool->cfg.retry_count, LINK_RETRY_COUNT);
	if (!pool->cfg.stall_sec)
		pool->cfg.stall_sec = LINK_STALL_SEC_DEFAULT;
	if (!pool->cfg.drain_ms)
		pool->cfg.drain_ms = LINK_DRAIN_MS_DEFAULT;
	if (!pool->cfg.max_links)
		pool->cfg.max_links = LINK_MAX_DEFAULT;
	if (!pool->cfg.max_links_per_uid)
		pool->cfg.max_links_per_uid = LINK_MAX_PER_UID_DEFAULT;
	list_init(&pool->links);
	idseq_init(&pool->order);
}

uint64_t link_silent_peer_ms(const struct link_pool_config *cfg)
{
	uint64_t timeout_ns = UINT64_C(4096) << cfg->ack_timeout;

	return 4 * (1 + cfg->retry_count) * timeout_ns / 1000000;
}

static bool same_sockaddr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

static bool key_equal(const struct link_key *a, const struct link_key *b)
{
	return a->dev == b->dev && a->uid == b->uid && same_sockaddr(&a->endpoint, &b->endpoint) &&
	       memcmp(a->token, b->token, TOKEN_BYTES) == 0;
}

static void set_state(struct link *l, enum link_state s)
{
	l->state = s;
	if (l->pool->state_changed)
		l->pool->state_changed(l, l->pool->userdata);
}

static void link_free(struct link *l)
{
	list_del(&l->node);
	idseq_remove(&l->pool->order, &l->order);
	l->pool->n_links--;
	free(l->notify_buf);
	free(l->ring);
	free(l->scratch);
	free(l);
}

struct link *link_ref(struct link *l)
{
	if (l)
		l->n_ref++;
	return l;
}

struct link *link_unref(struct link *l)
{
	if (!l || --l->n_ref > 0)
		return NULL;
	if (l->finished)
		link_free(l);
	else if (!l->closing)
		link_fail(l, LINK_CLOSED, 0, "no longer used");
	return NULL;
}

struct link *link_hold(struct link *l)
{
	if (!l)
		return NULL;
	l->n_hold++;
	if (l->state == LINK_READY)
		arm_timer(l);
	return link_ref(l);
}

struct link *link_unhold(struct link *l)
{
	if (!l)
		return NULL;
	if (--l->n_hold == 0 && l->state == LINK_READY)
		arm_timer(l);
	return link_unref(l);
}

unsigned link_space(const struct link *l)
{
	if (l->state != LINK_READY)
		return 0;
	return l->window - (unsigned)(l->tail_seq - l->head_seq);
}

/*
 * The failure walk, once the QP is gone: each user with WRs in flight
 * hears once, at its first WR from the failure point on (or, when all of
 * its WRs lie before it, at its last: those completed).
 */
static void flush_users(struct link *l)
{
	struct list_head told = LIST_HEAD_INIT(told);
	struct link_user *u, *n;

	for (uint64_t seq = l->head_seq; seq < l->tail_seq; seq++) {
		struct link_slot *s = &l->ring[seq % l->window];

		if (seq < l->fail_seq)
			count_done(l, s);
		else
			l->stats.flushed++;
		u = s->user;
		if (!u->fail_listed) {
			u->fail_listed = true;
			u->fail = (struct link_completion){ .wr_id = s->wr_id,
							    .status = VB_WC_SUCCESS,
							    .status_name = "success" };
			list_add_tail(&u->fail_node, &told);
		}
		if (u->fail.final)
			continue;
		u->fail.wr_id = s->wr_id;
		if (seq < l->fail_seq)
			continue;
		u->fail.final = true;
		u->fail.error = l->error;
		u->fail.reason = l->reason;
		if (l->has_fail_wc && seq == l->fail_seq) {
			u->fail.status = l->fail_wc.status;
			u->fail.status_name = l->fail_wc.status_name;
			u->fail.vendor_err = l->fail_wc.vendor_err;
		} else {
			u->fail.status = VB_WC_FLUSH_ERR;
			u->fail.status_name = "WR_FLUSH_ERR";
		}
	}
	l->head_seq = l->tail_seq;
	/* Every WR is accounted for before anyone hears: a callback may
	 * free its user. */
	list_for_each_entry(u, &told, fail_node)
		u->n_inflight = 0;
	list_for_each_entry_safe(u, n, &told, fail_node) {
		struct link_completion c = u->fail;

		list_del(&u->fail_node);
		u->fail_listed = false;
		u->fail = (struct link_completion){};
		u->complete(u, &c);
	}
}

static void notify_waiters(struct link *l, struct link *ready, int error, const char *reason)
{
	while (!list_empty(&l->waiters)) {
		struct link_waiter *w = list_first_entry(&l->waiters, struct link_waiter, node);

		list_del(&w->node);
		w->link = NULL;
		w->ready(w, link_ref(ready), error, reason);
	}
}

/* Every handle closed: the QP goes (no DMA after), then the CQ, then the
 * users and waiters hear. */
static void finish(struct link *l)
{
	vb->conn_destroy(l->conn);
	l->conn = NULL;
	l->qp = NULL;
	vb->cq_destroy(l->cq);
	l->cq = NULL;
	/* No WR reads the send buffers once the QP is gone. */
	if (l->notify_mr)
		vb->mr_dereg(l->notify_mr);
	l->notify_mr = NULL;
	l->finished = true;
	l->pool->n_live--;

	l->n_ref++; /* the callbacks may drop the last reference */
	flush_users(l);
	notify_waiters(l, NULL, l->error ?: -ECONNABORTED, l->reason);
	log_info("Link %" PRIu64 " (%s, uid %u → %s) %s: %s", l->id, l->key.dev->info.name,
		 (unsigned)l->key.uid, l->peer, link_state_name(l->state), l->reason);
	link_unref(l);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct link *l = h->data;

	if (--l->n_handles == 0)
		finish(l);
}

static void close_handle(uv_handle_t *h)
{
	if (!uv_is_closing(h))
		uv_close(h, on_handle_closed);
}

/*
 * Ends the link: out of the index at once (the next link_get() makes a new
 * one), then the handles close (their fds are the channels', closed only
 * after libuv forgot them) and finish() tears down and tells everyone.
 */
static void link_fail(struct link *l, enum link_state state, int error, const char *fmt, ...)
{
	va_list ap;

	if (l->closing)
		return;
	l->closing = true;
	l->indexed = false;
	l->error = error;
	va_start(ap, fmt);
	vsnprintf(l->reason, sizeof(l->reason), fmt, ap);
	va_end(ap);
	if (!l->has_fail_wc)
		l->fail_seq = l->head_seq;
	if (state == LINK_ERROR) {
		enum link_error_kind k = error_kind(l);

		l->stats.errors[k]++;
		l->pool->errors[k]++;
		if (l->ready_msec == 0)
			l->pool->n_failed++;
	}
	set_state(l, state);
	close_handle((uv_handle_t *)&l->timer);
	close_handle((uv_handle_t *)&l->cm_poll);
	if (l->cq_polling)
		cq_watch_close(&l->cq_watch, on_handle_closed);
}

void link_close(struct link *l, int error, const char *why)
{
	link_fail(l, LINK_CLOSED, error ?: -ECONNABORTED, "%s", why);
}

static void on_timer(uv_timer_t *t)
{
	struct link *l = t->data;
	uint64_t now = uv_now(l->pool->loop);

	if (l->state == LINK_CONNECTING) {
		link_fail(l, LINK_ERROR, -ETIMEDOUT, "no connection to %s within %u ms", l->peer,
			  l->pool->cfg.connect_timeout_ms);
		return;
	}
	if (l->state != LINK_READY)
		return;
	if (l->head_seq == l->tail_seq) {
		if (l->n_hold == 0)
			link_fail(l, LINK_CLOSED, -ETIMEDOUT, "idle for %u s",
				  l->pool->cfg.idle_sec);
		return;
	}
	l->stalled = true;
	if (l->draining && now >= l->drain_deadline)
		link_fail(l, LINK_ERROR, -ECANCELED,
			  "work requests of a cancelled transfer still in flight on %s after %u ms",
			  l->peer, l->pool->cfg.drain_ms);
	else
		link_fail(l, LINK_ERROR, -ETIMEDOUT,
			  "stalled: no completion from %s for %u s with %" PRIu64
			  " work requests in flight",
			  l->peer, l->pool->cfg.stall_sec, l->tail_seq - l->head_seq);
}

/* READY: the idle timer when nothing is in flight and nobody holds the
 * link, none while held, else the watchdog. */
static void arm_timer(struct link *l)
{
	uint64_t now = uv_now(l->pool->loop), due;

	if (l->draining && l->head_seq >= l->drain_seq)
		l->draining = false;
	if (l->head_seq == l->tail_seq) {
		if (l->n_hold > 0)
			uv_timer_stop(&l->timer);
		else
			uv_timer_start(&l->timer, on_timer, (uint64_t)l->pool->cfg.idle_sec * 1000,
				       0);
		return;
	}
	due = l->progress_at + (uint64_t)l->pool->cfg.stall_sec * 1000;
	if (l->draining)
		due = MIN(due, l->drain_deadline);
	uv_timer_start(&l->timer, on_timer, due > now ? due - now : 0, 0);
}

void link_drain(struct link *l)
{
	if (l->state != LINK_READY || l->head_seq == l->tail_seq)
		return;
	if (!l->draining)
		l->drain_deadline = uv_now(l->pool->loop) + l->pool->cfg.drain_ms;
	l->draining = true;
	l->drain_seq = l->tail_seq;
	arm_timer(l);
}

/* The WR at seq is done: its user has one fewer in flight, its
 * notification buffer (the oldest in use) is free. */
static struct link_slot *retire(struct link *l, uint64_t seq)
{
	struct link_slot *s = &l->ring[seq % l->window];

	s->user->n_inflight--;
	count_done(l, s);
	if (s->notify)
		l->notify_head++;
	return s;
}

/* One completion of ours, in order. */
static void on_wc(struct link *l, const struct vb_wc *wc)
{
	uint64_t seq = wc->wr_id;
	struct link_completion c;
	struct link_slot *s;

	if (wc->recv)
		return; /* no receives are posted on links (yet) */
	if (seq < l->head_seq || seq >= l->tail_seq) {
		link_fail(l, LINK_ERROR, -EPROTO,
			  "completion for work request %" PRIu64 " not in flight", seq);
		return;
	}
	l->stats.completions++;
	if (wc->status != VB_WC_SUCCESS) {
		/* RC: everything before it completed, it and everything
		 * after it did not. A flush first means the QP went to error
		 * without a WR of ours failing: the connection dropped. */
		l->fail_seq = seq;
		l->fail_wc = *wc;
		l->has_fail_wc = true;
		if (wc->status == VB_WC_FLUSH_ERR)
			link_fail(l, LINK_ERROR, -ECONNRESET,
				  "the connection to %s dropped (work requests flushed)", l->peer);
		else
			link_fail(l, LINK_ERROR,
				  wc->status == VB_WC_RETRY_EXC_ERR ? -EHOSTUNREACH : -EIO,
				  "work request failed on %s: %s (vendor error 0x%x)", l->peer,
				  wc->status_name, wc->vendor_err);
		return;
	}
	/* A signalled completion retires every WR before it. */
	for (; l->head_seq < seq; l->head_seq++)
		retire(l, l->head_seq);
	s = retire(l, seq);
	l->head_seq = seq + 1;
	c = (struct link_completion){ .wr_id = s->wr_id,
				      .status = VB_WC_SUCCESS,
				      .status_name = wc->status_name,
				      .byte_len = wc->byte_len };
	s->user->complete(s->user, &c);
}

/* false once the link failed: the watch takes no more. */
static bool link_completion(struct cq_watch *w, const struct vb_wc *wc)
{
	struct link *l = container_of(w, struct link, cq_watch);

	on_wc(l, wc);
	return l->state == LINK_READY;
}

/* Completions that leave the link READY retired WRs (links post no
 * receives): progress. */
static void link_taken(struct cq_watch *w)
{
	struct link *l = container_of(w, struct link, cq_watch);

	l->progress_at = uv_now(l->pool->loop);
	arm_timer(l);
}

static void link_cq_failed(struct cq_watch *w, bool channel, int error)
{
	struct link *l = container_of(w, struct link, cq_watch);

	if (channel)
		link_fail(l, LINK_ERROR, error, "completion channel of the link to %s failed: %s",
			  l->peer, uv_strerror(error));
	else
		link_fail(l, LINK_ERROR, error, "completion queue of the link to %s failed: %s",
			  l->peer, error == -EOVERFLOW ? "overflow" : strerror(-error));
}

static const struct cq_watch_ops link_watch_ops = {
	.completion = link_completion,
	.taken = link_taken,
	.failed = link_cq_failed,
};

static const char *reject_reason(int why, int *ret_error)
{
	switch (why) {
	case REJECT_BAD_REQUEST:
		*ret_error = -EPROTO;
		return "it found the connect request malformed";
	case REJECT_BAD_TOKEN:
		*ret_error = -EKEYREJECTED;
		return "no such access token there (never issued, revoked, or its owner "
		       "disconnected)";
	case REJECT_NETWORK:
		*ret_error = -EACCES;
		return "it admits no RDMA peers from this network (allow-networks)";
	case REJECT_LIMIT:
		*ret_error = -EUSERS;
		return "it is at its RDMA connection limit";
	case REJECT_DEVICE:
		*ret_error = -ENODEV;
		return "its device failed or is not open";
	default:
		*ret_error = -ECONNREFUSED;
		return "for a reason this daemon does not know";
	}
}

static void on_rejected(struct link *l, const struct vb_conn_event *ev)
{
	const char *why;
	int error;

	if (ev->private_len >= 5 && memcmp(ev->private_data, ENDPOINT_REJECT_MAGIC, 4) == 0) {
		l->reject = ev->private_data[4];
		why = reject_reason(l->reject, &error);
		link_fail(l, LINK_ERROR, error, "the remote daemon at %s refused the link: %s",
			  l->peer, why);
		return;
	}
	link_fail(l, LINK_ERROR, -ECONNREFUSED,
		  "refused by the RDMA CM at %s (status %d): is an rdmamemd listening there?",
		  l->peer, ev->status);
}

static int on_route(struct link *l)
{
	struct device *dev = l->key.dev;
	uint8_t data[ENDPOINT_REQUEST_LEN] = ENDPOINT_MAGIC;
	struct vb_qp_caps caps;
	struct vb_pd *pd;
	int r;

	r = device_pd(dev, l->key.uid, &pd);
	if (r < 0)
		return r;
	/* Every WR in flight may complete (flushes included) before a poll:
	 * twice the window leaves room for receives later. */
	r = vb->cq_create(dev->vb, l->window * 2, &l->cq);
	if (r < 0)
		return r;
	r = cq_watch_init(&l->cq_watch, l->pool->loop, l->cq, POLL_TURN_MAX, &link_watch_ops, l);
	if (r < 0)
		return r;
	l->cq_polling = true;
	l->n_handles += 2;
	r = cq_watch_start(&l->cq_watch);
	if (r < 0)
		return r;

	l->initiator_depth = (uint8_t)MIN(dev->info.max_qp_init_rd_atom ?: 1U, 16U);
	caps = (struct vb_qp_caps){ .max_send_wr = l->window,
				    .max_recv_wr = 1,
				    .initiator_depth = l->initiator_depth };
	r = vb->conn_qp_create(l->conn, pd, l->cq, &caps, &l->qp);
	if (r < 0)
		return r;
	data[4] = ENDPOINT_VERSION;
	memcpy(data + 8, l->key.token, TOKEN_BYTES);
	return vb->conn_connect(l->conn, &(struct vb_conn_param){
						 .private_data = data,
						 .private_len = sizeof(data),
						 .initiator_depth = l->initiator_depth,
						 .ack_timeout = (uint8_t)l->pool->cfg.ack_timeout,
						 .retry_count = (uint8_t)l->pool->cfg.retry_count,
						 .rnr_retry = LINK_RNR_RETRY });
}

static void on_established(struct link *l)
{
	uv_timer_stop(&l->timer);
	l->ready_msec = now_msec();
	l->pool->n_connected++;
	set_state(l, LINK_READY);
	log_info("Link %" PRIu64 " (%s, uid %u → %s) ready in %" PRIu64 " ms", l->id,
		 l->key.dev->info.name, (unsigned)l->key.uid, l->peer,
		 l->ready_msec - l->created_msec);
	arm_timer(l);
	l->n_ref++; /* a waiter may drop the last reference */
	notify_waiters(l, l, 0, NULL);
	link_unref(l);
}

static void on_cm(uv_poll_t *h, int status, int events)
{
	struct link *l = h->data;
	struct vb_conn_event ev;
	int r;

	(void)events;
	if (status < 0) {
		link_fail(l, LINK_ERROR, status, "event channel failed: %s", uv_strerror(status));
		return;
	}
	while (!l->closing && vb->conn_next_event(l->conn, &ev) == 0) {
		switch (ev.kind) {
		case VB_CONN_ADDR_RESOLVED:
			if (vb->conn_device(l->conn) != l->key.dev->vb) {
				link_fail(l, LINK_ERROR, -EXDEV,
					  "the route to %s does not leave through %s", l->peer,
					  l->key.dev->info.name);
				break;
			}
			r = vb->conn_resolve_route(l->conn, (int)l->pool->cfg.connect_timeout_ms);
			if (r < 0)
				link_fail(l, LINK_ERROR, r, "cannot resolve a route to %s: %s",
					  l->peer, strerror(-r));
			break;
		case VB_CONN_ROUTE_RESOLVED:
			r = on_route(l);
			if (r < 0)
				link_fail(l, LINK_ERROR, r, "cannot connect to %s: %s", l->peer,
					  strerror(-r));
			break;
		case VB_CONN_ESTABLISHED:
			if (l->state == LINK_CONNECTING)
				on_established(l);
			break;
		case VB_CONN_REJECTED:
			on_rejected(l, &ev);
			break;
		case VB_CONN_UNREACHABLE:
			link_fail(l, LINK_ERROR, -EHOSTUNREACH, "%s is unreachable (%s)", l->peer,
				  ev.name);
			break;
		case VB_CONN_DISCONNECTED:
			/* What completed before the peer left still counts
			 * (at most a window's worth: nothing is posted now). */
			if (l->state == LINK_READY) {
				while (cq_watch_take(&l->cq_watch))
					;
				if (l->state != LINK_READY)
					break;
			}
			link_fail(l, LINK_ERROR, -ECONNRESET,
				  "the remote daemon at %s disconnected", l->peer);
			break;
		case VB_CONN_TIMEWAIT_EXIT:
		case VB_CONN_OTHER:
			log_debug("Link %" PRIu64 ": %s", l->id, ev.name);
			break;
		}
	}
}

unsigned link_count_uid(const struct link_pool *pool, uid_t uid)
{
	const struct link *l;
	unsigned n = 0;

	list_for_each_entry(l, &pool->links, node)
		n += !l->finished && l->key.uid == uid;
	return n;
}

int link_limit_error(const struct link_pool *pool, uid_t uid, int r, struct errinfo *e)
{
	if (r == -EDQUOT)
		return errinfo_quota(
			e, "links", pool->cfg.max_links_per_uid, link_count_uid(pool, uid), 1,
			"uid %u has %u queue pairs to other daemons, the limit per uid "
			"(max-links-per-uid)",
			(unsigned)uid, link_count_uid(pool, uid));
	if (r == -EUSERS)
		return errinfo_set(e, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS, r,
				   "the daemon holds %u queue pairs to other daemons, its limit "
				   "(max-links)",
				   pool->n_live);
	return 0;
}

static int link_new(struct link_pool *pool, const struct link_key *key, struct link **ret)
{
	struct link *l;
	int r;

	if (pool->n_live >= pool->cfg.max_links)
		return -EUSERS;
	if (link_count_uid(pool, key->uid) >= pool->cfg.max_links_per_uid)
		return -EDQUOT;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->pool = pool;
	l->id = ++pool->next_id;
	l->key = *key;
	l->window = pool->cfg.window;
	l->max_msg = key->dev->info.n_ports ? key->dev->info.ports[0].max_msg_sz : 0;
	l->ring = calloc(l->window, sizeof(*l->ring));
	l->scratch = calloc(l->window, sizeof(*l->scratch));
	list_init(&l->waiters);
	idseq_node_init(&l->order);
	list_add_tail(&l->node, &pool->links);
	pool->n_links++;
	l->created_msec = now_msec();
	netaddr_format(&key->endpoint, l->peer, sizeof(l->peer));
	if (!l->ring || !l->scratch || idseq_add(&pool->order, l->id, &l->order) < 0) {
		link_free(l);
		return -ENOMEM;
	}
	r = vb->conn_create(&l->conn);
	if (r < 0) {
		link_free(l);
		return r;
	}
	r = uv_poll_init(pool->loop, &l->cm_poll, vb->conn_fd(l->conn));
	if (r < 0) {
		vb->conn_destroy(l->conn);
		link_free(l);
		return r;
	}
	/* Holds fds from here until finish(). */
	pool->n_live++;
	uv_timer_init(pool->loop, &l->timer);
	l->cm_poll.data = l->timer.data = l;
	l->n_handles = 2;
	l->state = LINK_CONNECTING;
	l->indexed = true;
	uv_poll_start(&l->cm_poll, UV_READABLE, on_cm);
	uv_timer_start(&l->timer, on_timer, pool->cfg.connect_timeout_ms, 0);
	r = vb->conn_resolve_addr(l->conn, NULL, (const struct sockaddr *)&key->endpoint,
				  (int)pool->cfg.connect_timeout_ms);
	if (r < 0) {
		/* Torn down like any failure, heard by nobody yet. */
		link_fail(l, LINK_ERROR, r, "cannot resolve %s: %s", l->peer, strerror(-r));
		return r;
	}
	*ret = l;
	return 0;
}

int link_get(struct link_pool *pool, const struct link_key *key, struct link_waiter *w,
	     struct link **ret)
{
	struct link *l;
	int r;

	list_for_each_entry(l, &pool->links, node) {
		if (!l->indexed || !key_equal(&l->key, key))
			continue;
		if (l->state == LINK_READY) {
			*ret = link_ref(l);
			return 0;
		}
		goto wait;
	}
	r = link_new(pool, key, &l);
	if (r < 0)
		return r;
wait:
	w->link = l;
	list_add_tail(&w->node, &l->waiters);
	*ret = NULL;
	return -EINPROGRESS;
}

void link_waiter_cancel(struct link_waiter *w)
{
	struct link *l = w->link;

	if (!l)
		return;
	list_del(&w->node);
	w->link = NULL;
	/* Nobody wants it any more. */
	if (list_empty(&l->waiters) && l->n_ref == 0)
		link_fail(l, LINK_CLOSED, -ECANCELED, "nobody waits for it");
}

int link_post(struct link *l, struct link_user *u, const struct vb_send_wr *wrs, size_t n)
{
	size_t posted = 0;
	int r;

	if (l->state != LINK_READY)
		return l->error ?: -ENOTCONN;
	if (n == 0)
		return 0;
	if (n > link_space(l))
		return -EAGAIN;
	for (size_t i = 0; i < n; i++) {
		struct vb_send_wr *w = &l->scratch[i];
		uint64_t seq = l->tail_seq + i;

		*w = wrs[i];
		w->wr_id = seq;
		w->signaled = wrs[i].signaled || i + 1 == n;
		l->ring[seq % l->window] = (struct link_slot){ .user = u,
							       .wr_id = wrs[i].wr_id,
							       .length = w->length,
							       .opcode = (uint8_t)w->opcode };
		l->stats.wrs++;
	}
	/* In flight from here on, posted or not: a failed post fails the
	 * link, and the walk tells u about every one of them. */
	if (l->head_seq == l->tail_seq) {
		/* The watchdog counts from the first WR in an empty link. */
		l->progress_at = uv_now(l->pool->loop);
		l->tail_seq += n;
		arm_timer(l);
	} else {
		l->tail_seq += n;
	}
	u->n_inflight += (unsigned)n;
	r = vb->qp_post_send(l->qp, l->scratch, n, &posted);
	if (r < 0)
		link_fail(l, LINK_ERROR, r, "posting to %s failed after %zu of %zu: %s", l->peer,
			  posted, n, strerror(-r));
	return 0;
}

/* The send buffers, registered in the key's PD at the first use. */
static int notify_buffers(struct link *l)
{
	size_t size = (size_t)LINK_NOTIFY_SLOTS * NOTIFY_MSG_MAX;
	struct vb_pd *pd;
	uint32_t rkey;
	int r;

	if (l->notify_mr)
		return 0;
	r = device_pd(l->key.dev, l->key.uid, &pd);
	if (r < 0)
		return r;
	if (!l->notify_buf) {
		l->notify_buf = malloc(size);
		if (!l->notify_buf)
			return -ENOMEM;
	}
	/* A few KiB on the loop: cheaper than a trip to the pool. */
	r = vb->mr_reg(pd, l->notify_buf, size, VB_ACCESS_LOCAL_WRITE, &l->notify_mr);
	if (r < 0)
		return r;
	vb->mr_keys(l->notify_mr, &l->notify_lkey, &rkey);
	return 0;
}

int link_post_notify(struct link *l, struct link_user *u, const void *data, size_t len,
		     uint64_t export_id)
{
	struct vb_send_wr wr = { .wr_id = LINK_WR_ID_NOTIFY,
				 .opcode = VB_WR_SEND,
				 .signaled = true };
	uint8_t *buf;
	int r;

	if (len > NOTIFY_MAX)
		return -EMSGSIZE;
	if (l->state != LINK_READY)
		return l->error ?: -ENOTCONN;
	if (l->notify_tail - l->notify_head == LINK_NOTIFY_SLOTS || link_space(l) == 0)
		return -EAGAIN;
	r = notify_buffers(l);
	if (r < 0)
		return r;
	buf = l->notify_buf + (l->notify_tail % LINK_NOTIFY_SLOTS) * NOTIFY_MSG_MAX;
	wr.length = (uint32_t)notify_msg_encode(buf, export_id, l->key.uid, data, len);
	wr.local_addr = (uint64_t)(uintptr_t)buf;
	wr.lkey = l->notify_lkey;
	r = link_post(l, u, &wr, 1);
	if (r < 0)
		return r;
	/* The slot link_post() just filled holds the buffer until it retires. */
	l->ring[(l->tail_seq - 1) % l->window].notify = true;
	l->notify_tail++;
	l->stats.notifications++;
	return 0;
}

void link_pool_stop(struct link_pool *pool)
{
	struct link *l;

	list_for_each_entry(l, &pool->links, node)
		if (!l->closing)
			link_fail(l, LINK_CLOSED, -ESHUTDOWN, "the daemon is shutting down");
}

int link_pool_done(struct link_pool *pool)
{
	if (!list_empty(&pool->links))
		return -EBUSY;
	idseq_done(&pool->order);
	return 0;
}
