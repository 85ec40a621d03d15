/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "daemon/core/offload.h"
#include "daemon/core/session.h"
#include "daemon/mem/lease.h"
#include "daemon/mem/region.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/mreg.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/paths.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/remote.h"
#include "daemon/remote/transfer.h"
#include "proto/errors.h"
#include "proto/json.h"

/* ---- the windows of live links ---- */

static void notice_end(struct transfer_leg *leg, int err, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void notice_post(struct transfer_leg *leg);

static struct transfer_qp *qp_ref(struct transfer_qp *q)
{
	q->n_ref++;
	return q;
}

static void qp_free_maybe(struct transfer_qp *q)
{
	if (q->n_ref || q->busy)
		return;
	window_done(&q->win);
	free(q->scratch);
	q->ctx->n_transfer_qps--;
	free(q);
}

static struct transfer_qp *qp_unref(struct transfer_qp *q)
{
	if (q) {
		q->n_ref--;
		qp_free_maybe(q);
	}
	return NULL;
}

/* Its link failed or closed: out of the list, no new batch; the window
 * fails what is left (nothing is, when the link's final completion came).
 * The link's reference goes; the transfers' references keep the struct. */
static void qp_kill(struct transfer_qp *q, int status)
{
	if (q->dead)
		return;
	q->dead = true;
	q->busy++;
	window_fail(&q->win, status, 0);
	while (!list_empty(&q->notices)) {
		struct transfer_notice *n =
			list_first_entry(&q->notices, struct transfer_notice, node);

		list_del(&n->node);
		notice_end(container_of(n, struct transfer_leg, notice), status,
			   RDMAMEM_ERROR_TRANSFER_FAILED,
			   "the data is in place, but the queue pair closed before the "
			   "notification could be sent: %s",
			   strerror(-status));
	}
	q->busy--;
	list_del(&q->node);
	q->link = link_unref(q->link);
	qp_unref(q);
}

static int qp_post(void *userdata, struct wr *wrs, size_t n)
{
	struct transfer_qp *q = userdata;

	if (q->dead)
		return -ENOTCONN;
	for (size_t i = 0; i < n; i++)
		q->scratch[i] = (struct vb_send_wr){
			.wr_id = wrs[i].wr_id,
			.opcode = wrs[i].opcode == WR_READ ? VB_WR_RDMA_READ : VB_WR_RDMA_WRITE,
			.signaled = wrs[i].signalled,
			.local_addr = wrs[i].local_addr,
			.lkey = wrs[i].lkey,
			.length = wrs[i].length,
			.remote_addr = wrs[i].remote_addr,
			.rkey = wrs[i].rkey,
		};
	return link_post(q->link, &q->user, q->scratch, n);
}

static const struct window_link_ops qp_link_ops = { .post = qp_post };

/* Notifications that found no room, in their order: the link has some
 * now (it retired WRs). The qp is held. */
static void qp_notices_retry(struct transfer_qp *q)
{
	while (!q->dead && !list_empty(&q->notices)) {
		struct transfer_notice *n =
			list_first_entry(&q->notices, struct transfer_notice, node);

		list_del(&n->node);
		notice_post(container_of(n, struct transfer_leg, notice));
		if (n->state == NOTICE_WAITING)
			return;
	}
}

/*
 * The link's completions. RC order: a completion for wr_id says every
 * earlier WR of ours ran. A final one says wr_id did not (its own error,
 * or flushed) nor did any later one: the window retires the earlier ones
 * as done and fails the rest.
 */
static void qp_complete(struct link_user *u, const struct link_completion *c)
{
	struct transfer_qp *q = container_of(u, struct transfer_qp, user);
	struct window_wc wc = { .wr_id = c->wr_id,
				.status = c->status == VB_WC_SUCCESS ? 0 : (int)c->status,
				.vendor_err = c->vendor_err };

	q->busy++;
	if (!c->final)
		qp_notices_retry(q);
	if (!c->final || c->status != VB_WC_FLUSH_ERR) {
		window_complete(&q->win, &wc, 1);
	} else {
		if (c->wr_id > q->win.tail) {
			wc = (struct window_wc){ .wr_id = c->wr_id - 1 };
			window_complete(&q->win, &wc, 1);
		}
		window_fail(&q->win, c->error < 0 ? c->error : -ECONNRESET, 0);
	}
	q->busy--;
	if (c->final)
		qp_kill(q, c->error < 0 ? c->error : -ECONNRESET);
	else
		qp_free_maybe(q);
}

/* The pool's hook: a link left READY. With WRs in flight its final
 * completion comes and kills the window; without, it goes now. */
static void on_link_state(struct link *l, void *userdata)
{
	struct remote_ctx *ctx = userdata;
	struct transfer_qp *q, *n;

	if (l->state != LINK_ERROR && l->state != LINK_CLOSED)
		return;
	list_for_each_entry_safe(q, n, &ctx->transfer_qps, node)
		if (q->link == l && q->user.n_inflight == 0)
			qp_kill(q, l->error < 0 ? l->error : -ECONNRESET);
}

/* The window of READY link l (whose reference the caller passes). */
static int qp_get(struct remote_ctx *ctx, struct link *l, struct transfer_qp **ret)
{
	struct transfer_qp *q;
	/* Room for notifications beside a full window; a send queue too
	 * short for that gives them half (when they find none, they wait
	 * for a completion). */
	uint32_t depth = l->window > 2 * TRANSFER_NOTIFY_RESERVE ?
				 l->window - TRANSFER_NOTIFY_RESERVE :
				 MAX(1U, l->window - l->window / 2);
	int r;

	list_for_each_entry(q, &ctx->transfer_qps, node)
		if (q->link == l) {
			link_unref(l);
			*ret = qp_ref(q);
			return 0;
		}
	q = calloc(1, sizeof(*q));
	if (q)
		q->scratch = calloc(depth, sizeof(*q->scratch));
	if (!q || !q->scratch) {
		free(q);
		link_unref(l);
		return -ENOMEM;
	}
	r = window_init(&q->win,
			&(struct window_params){ .depth = depth,
						 .signal_every =
							 MAX(1U, depth / TRANSFER_SIGNAL_DIV),
						 .post_max = depth },
			&qp_link_ops, q);
	if (r < 0) {
		free(q->scratch);
		free(q);
		link_unref(l);
		return r;
	}
	q->ctx = ctx;
	q->link = l;
	q->user.complete = qp_complete;
	list_init(&q->notices);
	q->n_ref = 2; /* the list's, the caller's */
	list_add_tail(&q->node, &ctx->transfer_qps);
	ctx->n_transfer_qps++;
	*ret = q;
	return 0;
}

void transfer_engine_init(struct remote_ctx *ctx, struct region_registry *regions)
{
	ctx->regions = regions;
	paths_init(&ctx->paths, ctx->core->loop, ctx->rdma, &regions->membw);
	list_init(&ctx->transfer_qps);
	ctx->links.state_changed = on_link_state;
	ctx->links.userdata = ctx;
	ctx->notify_send = link_post_notify;
}

/* ---- outcomes ---- */

static const char *status_text(int status)
{
	static const char *const names[] = {
		[VB_WC_SUCCESS] = "success",
		[VB_WC_FLUSH_ERR] = "work request flushed error",
		[VB_WC_REM_ACCESS_ERR] = "remote access error",
		[VB_WC_LOC_ACCESS_ERR] = "local access error",
		[VB_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[VB_WC_REM_OP_ERR] = "remote operation error",
		[VB_WC_OTHER_ERR] = "other error",
	};

	if (status >= 0 && (size_t)status < ELEMENTSOF(names) && names[status])
		return names[status];
	return "unknown status";
}

/* The named error of a failed op: a completion status (> 0) or an errno. */
static int fail_info(struct transfer *t, struct errinfo *e)
{
	const struct window_status *st = &t->fail_st;
	const char *name = RDMAMEM_ERROR_TRANSFER_FAILED;
	cJSON *p = cJSON_CreateObject();
	const char *what;
	int err = -EIO;

	if (st->outcome == WINDOW_CANCELLED) {
		name = RDMAMEM_ERROR_TRANSFER_CANCELLED;
		err = -ECANCELED;
		what = "cancelled before it was posted (the client went away)";
	} else if (st->status > 0) {
		if (st->status == VB_WC_REM_ACCESS_ERR) {
			name = RDMAMEM_ERROR_REMOTE_ACCESS;
			err = -EACCES;
		} else if (st->status == VB_WC_RETRY_EXC_ERR) {
			name = RDMAMEM_ERROR_PEER_UNREACHABLE;
			err = -EHOSTUNREACH;
		}
		what = st->outcome == WINDOW_WC_ERROR ?
			       "its work request completed with an error" :
			       "flushed: an earlier work request on its queue pair failed";
		if (p && (json_add_string(p, "status", status_text(st->status)) < 0 ||
			  json_add_int(p, "vendor_error", st->vendor_err) < 0))
			p = (cJSON_Delete(p), NULL);
	} else {
		what = "its queue pair failed or closed before it ran";
		if (st->status == -ETIMEDOUT || st->status == -EHOSTUNREACH) {
			name = RDMAMEM_ERROR_PEER_UNREACHABLE;
			err = -EHOSTUNREACH;
		}
	}
	if (p && (json_add_u64(p, "index", t->fail_op) < 0 ||
		  json_add_u64(p, "ops_done", t->progress.ops_done) < 0 ||
		  json_add_u64(p, "ops_failed", t->progress.ops_failed) < 0 ||
		  json_add_u64(p, "bytes_done", t->progress.bytes_done) < 0))
		p = (cJSON_Delete(p), NULL);
	errinfo_set(e, name, err, "op %zu: %s (%s); %" PRIu64 " of %" PRIu64 " ops failed",
		    t->fail_op, what,
		    st->outcome == WINDOW_CANCELLED ? "cancelled" :
		    st->status > 0                  ? status_text(st->status) :
						      strerror(-st->status),
		    t->progress.ops_failed, t->progress.n_ops);
	cJSON_Delete(e->params);
	e->params = p;
	return err;
}

/* The leg is over: its links may go idle. */
static void leg_unhold(struct transfer_leg *leg)
{
	for (uint32_t p = 0; p < leg->n_paths; p++)
		leg->paths[p].held = link_unhold(leg->paths[p].held);
}

static void release_all(struct transfer *t)
{
	/* Locks in reverse order of taking; waiting requests withdrawn. */
	for (uint32_t i = t->n_regions; i-- > 0;) {
		struct transfer_region *tr = &t->regions[t->lock_order[i]];

		if (tr->locked)
			lock_release(&tr->region->lock, &tr->req);
		else if (tr->req.waiting)
			lock_cancel(&tr->region->lock, &tr->req);
		tr->locked = false;
	}
	for (uint32_t i = 0; i < t->n_legs; i++)
		for (uint32_t p = 0; p < t->legs[i]->n_paths; p++) {
			struct transfer_path *path = &t->legs[i]->paths[p];

			if (path->waiting)
				link_waiter_cancel(&path->waiter);
			path->waiting = false;
			path->held = link_unhold(path->held);
			path->qp = qp_unref(path->qp);
		}
}

/* A transfer done: its time and bytes, under each peer its legs reached. */
static void count_peers(struct transfer *t)
{
	struct remote_peer_stats *seen[TRANSFER_LEGS_MAX];
	uint64_t ns = uv_hrtime() - t->started_ns;
	unsigned n_seen = 0;

	for (uint32_t i = 0; i < t->n_legs; i++) {
		struct transfer_leg *leg = t->legs[i];
		struct remote_peer_stats *p;
		uint64_t bytes = 0;
		char peer[64];
		bool again = false;

		if (leg->n_paths == 0)
			continue;
		netaddr_format(&leg->paths[0].key.endpoint, peer, sizeof(peer));
		p = remote_peer_stats(t->ctx, peer);
		if (!p)
			continue;
		for (size_t k = 0; k < leg->n_ops; k++)
			bytes += leg->ops[k].length;
		p->bytes += bytes;
		for (unsigned k = 0; k < n_seen; k++)
			again = again || seen[k] == p;
		if (again)
			continue;
		seen[n_seen++] = p;
		p->transfers++;
		histogram_observe(&p->latency, ns);
	}
}

/* Everything is over (nothing in flight): report, once. */
static void finish(struct transfer *t)
{
	struct errinfo e = {};
	int r = 0;

	if (t->state == TRANSFER_DONE || t->hold)
		return;
	t->state = TRANSFER_DONE;
	release_all(t);
	if (t->fail_err < 0) {
		r = t->fail_err;
		e = t->fail_info;
		t->fail_info = (struct errinfo){};
	} else if (t->failed) {
		r = fail_info(t, &e);
	} else if (t->notice_err < 0) {
		r = t->notice_err;
		e = t->notice_info;
		t->notice_info = (struct errinfo){};
	}
	if (t->cancelled)
		t->ctx->n_transfers_cancelled++;
	else if (r < 0)
		t->ctx->n_transfers_failed++;
	else
		t->ctx->n_transfers_done++;
	if (!t->cancelled && r == 0 && t->started_ns)
		count_peers(t);
	t->cb.done(t->userdata, t, r, &e);
	errinfo_done(&e);
}

/* A failure before any WR went out: recorded, the rest is undone. */
static void fail_early(struct transfer *t, int err, struct errinfo *e)
{
	if (t->fail_err == 0 && !t->failed) {
		t->fail_err = err;
		t->fail_info = *e;
		*e = (struct errinfo){};
	} else {
		errinfo_done(e);
	}
	finish(t);
}

static void progress_maybe(struct transfer *t, bool force)
{
	uint64_t now;

	if (!t->cb.progress || t->state == TRANSFER_DONE)
		return;
	now = uv_now(t->ctx->core->loop);
	if (!force && t->progress.ops_done - t->last_progress_ops < TRANSFER_PROGRESS_OPS &&
	    now - t->last_progress_msec < TRANSFER_PROGRESS_MS)
		return;
	if (t->progress.ops_done == t->last_progress_ops)
		return;
	t->last_progress_ops = t->progress.ops_done;
	t->last_progress_msec = now;
	t->cb.progress(t->userdata, t, &t->progress);
}

static void leg_op_done(void *userdata, struct window_batch *b, uint32_t op,
			const struct window_status *st)
{
	struct transfer_leg *leg = userdata;
	struct transfer *t = leg->t;
	size_t index = leg->ops[op].index;

	(void)b;
	if (st->outcome == WINDOW_OK) {
		t->progress.ops_done++;
		t->progress.bytes_done += leg->ops[op].length;
		progress_maybe(t, false);
		return;
	}
	t->progress.ops_failed++;
	if (!t->failed || index < t->fail_op) {
		t->failed = true;
		t->fail_op = index;
		t->fail_st = *st;
	}
}

/* The leg's batch is done and its notification is not in flight. */
static void leg_end_maybe(struct transfer_leg *leg)
{
	struct transfer *t = leg->t;

	if (leg->done || !leg->batch_done || leg->notice.state == NOTICE_WAITING ||
	    leg->notice.state == NOTICE_POSTED)
		return;
	leg->done = true;
	leg_unhold(leg);
	if (--t->legs_left > 0)
		return;
	progress_maybe(t, true);
	finish(t);
}

/* The notification will not be delivered: said when nothing else failed. */
static void notice_end(struct transfer_leg *leg, int err, const char *name, const char *fmt, ...)
{
	struct transfer *t = leg->t;
	va_list ap;

	leg->notice.state = NOTICE_DONE;
	if (t->notice_err == 0) {
		char msg[256];

		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		t->notice_err = errinfo_set(&t->notice_info, name, err, "%s", msg);
	}
	leg_end_maybe(leg);
}

/* The SEND's completion: delivered (RC: after every earlier WR of the
 * link), or not. */
static void notice_complete(struct link_user *u, const struct link_completion *c)
{
	struct transfer_leg *leg = container_of(u, struct transfer_leg, notice.user);
	struct transfer_qp *q = leg->paths[0].qp;

	if (c->final) {
		notice_end(leg, c->error < 0 ? c->error : -EIO, RDMAMEM_ERROR_TRANSFER_FAILED,
			   "the notification was not delivered: %s (%s)", c->status_name,
			   c->reason ? c->reason : "the queue pair failed");
		return;
	}
	/* Its send queue entry and buffer are free: whoever waited for them. */
	q->busy++;
	qp_notices_retry(q);
	if (!q->dead)
		window_kick(&q->win);
	q->busy--;
	leg->notice.state = NOTICE_DONE;
	leg_end_maybe(leg);
	qp_free_maybe(q);
}

/* Posts the leg's notification on its first path's link, after what the
 * leg posted there. */
static void notice_post(struct transfer_leg *leg)
{
	struct transfer *t = leg->t;
	struct transfer_qp *q = leg->paths[0].qp;
	int r;

	if (t->cancelled) {
		notice_end(leg, -ECANCELED, RDMAMEM_ERROR_TRANSFER_CANCELLED,
			   "the data is in place, but the notification was not sent: the "
			   "client went away");
		return;
	}
	if (q->dead) {
		notice_end(leg, -ENOTCONN, RDMAMEM_ERROR_TRANSFER_FAILED,
			   "the data is in place, but the queue pair closed before the "
			   "notification could be sent");
		return;
	}
	leg->notice.user.complete = notice_complete;
	r = t->ctx->notify_send(q->link, &leg->notice.user, t->notify, t->notify_len,
				leg->remote->desc.id);
	if (r == -EAGAIN) {
		leg->notice.state = NOTICE_WAITING;
		list_add_tail(&leg->notice.node, &q->notices);
	} else if (r < 0) {
		notice_end(leg, r, RDMAMEM_ERROR_TRANSFER_FAILED,
			   "the data is in place, but the notification was not sent: %s",
			   strerror(-r));
	} else {
		leg->notice.state = NOTICE_POSTED;
	}
}

/* Every WR of a single-path leg went to its link: the notification follows. */
static void leg_posted(void *userdata, struct window_batch *b, uint32_t path)
{
	struct transfer_leg *leg = userdata;

	(void)b;
	if (path == 0 && leg->n_paths == 1 && leg->notice.state == NOTICE_ARMED)
		notice_post(leg);
}

static void leg_done(void *userdata, struct window_batch *b)
{
	struct transfer_leg *leg = userdata;

	leg->batch_done = true;
	/* Striped: every link's WRs completed, the notification may go. Not
	 * posted at all: some of the data failed. */
	if (leg->notice.state == NOTICE_ARMED) {
		if (leg->n_paths > 1 && b->progress.ops_failed == 0)
			notice_post(leg);
		else
			leg->notice.state = NOTICE_NONE;
	}
	leg_end_maybe(leg);
}

static const struct window_batch_ops leg_batch_ops = {
	.op_done = leg_op_done,
	.done = leg_done,
	.posted = leg_posted,
};

/* ---- run ---- */

/* On the loop: the leg's plan parameters, from its links. */
static void leg_params(struct transfer_leg *leg)
{
	leg->params =
		(struct wr_plan_params){ .n_paths = leg->n_paths,
					 .max_msg = TRANSFER_PIECE,
					 .stripe_min = leg->n_paths > 1 ? TRANSFER_STRIPE_MIN : 0,
					 .stripe_chunk = TRANSFER_PIECE };
	for (uint32_t p = 0; p < leg->n_paths; p++) {
		struct link *l = leg->paths[p].qp->link;

		if (l && l->max_msg && l->max_msg < leg->params.max_msg)
			leg->params.max_msg = l->max_msg;
	}
}

/* O(ops), pure (the pool may run it): the WR plan and the batch; the WRs
 * are generated as the windows post them. */
static int leg_build(struct transfer_leg *leg)
{
	int r = wr_plan_build(&leg->plan, leg->ops, leg->n_ops, leg->keys, leg->n_regions,
			      &leg->params);

	if (r == 0) {
		r = window_batch_init(&leg->batch, &leg->plan, &leg_batch_ops, leg);
		if (r < 0)
			wr_plan_done(&leg->plan);
	}
	return r;
}

/* On the loop: leg_build()'s result r, named. */
static int leg_start(struct transfer_leg *leg, int r, struct errinfo *e)
{
	if (r == -E2BIG)
		return errinfo_invalid_param(e, "ops", r,
					     "an op may be at most %u times %llu bytes (the work "
					     "request size on its paths) long: split it",
					     WR_OP_WRS_MAX - 1,
					     (unsigned long long)leg->plan.piece);
	if (r < 0)
		return errinfo_set(e, RDMAMEM_ERROR_TRANSFER_FAILED, r,
				   "cannot plan the work requests: %s", strerror(-r));
	if (leg->t->notify)
		leg->notice.state = NOTICE_ARMED;
	return 0;
}

static void run_post(struct transfer *t);
static void job_submit(struct transfer *t, enum transfer_job_kind kind);

/* Every path connected: the WR plans (on the pool past
 * TRANSFER_INLINE_OPS ops), then the posts. */
static void run(struct transfer *t)
{
	for (uint32_t i = 0; i < t->n_legs; i++)
		leg_params(t->legs[i]);
	if (t->n_ops > TRANSFER_INLINE_OPS && t->ctx->core->offload) {
		job_submit(t, TRANSFER_JOB_PLAN);
		return;
	}
	for (uint32_t i = 0; i < t->n_legs; i++)
		t->legs[i]->build_r = leg_build(t->legs[i]);
	run_post(t);
}

/* Before anything was posted: every built batch ends unstarted. */
static void unbuild_all(struct transfer *t)
{
	for (uint32_t j = 0; j < t->n_legs; j++) {
		if (t->legs[j]->started)
			window_batch_fini(&t->legs[j]->batch);
		t->legs[j]->started = false;
	}
}

static void run_post(struct transfer *t)
{
	struct errinfo e = {};
	int r;

	/* A built batch is its leg's to end (here, or transfer_free()). */
	for (uint32_t i = 0; i < t->n_legs; i++)
		t->legs[i]->started = t->legs[i]->build_r == 0;
	for (uint32_t i = 0; i < t->n_legs; i++) {
		r = leg_start(t->legs[i], t->legs[i]->build_r, &e);
		if (r < 0) {
			/* Nothing posted yet: the built batches end unstarted. */
			unbuild_all(t);
			fail_early(t, r, &e);
			return;
		}
	}
	t->state = TRANSFER_RUNNING;
	t->legs_left = t->n_legs;
	t->hold++;
	for (uint32_t i = 0; i < t->n_legs; i++) {
		struct transfer_leg *leg = t->legs[i];
		struct window *wins[WR_PLAN_PATHS_MAX];

		for (uint32_t p = 0; p < leg->n_paths; p++) {
			leg->paths[p].qp->busy++;
			wins[p] = &leg->paths[p].qp->win;
		}
		if (t->cancelled)
			window_batch_cancel(&leg->batch);
		window_batch_start(&leg->batch, wins);
		for (uint32_t p = 0; p < leg->n_paths; p++) {
			leg->paths[p].qp->busy--;
			qp_free_maybe(leg->paths[p].qp);
		}
	}
	t->hold--;
	if (t->legs_left == 0)
		finish(t);
}

static void path_ready(struct link_waiter *w, struct link *l, int error, const char *reason);

/* Each path's link: READY now, or waited for. */
static void connect_all(struct transfer *t)
{
	struct errinfo e = {};

	t->state = TRANSFER_CONNECTING;
	t->hold++;
	for (uint32_t i = 0; i < t->n_legs; i++)
		for (uint32_t p = 0; p < t->legs[i]->n_paths; p++) {
			struct transfer_path *path = &t->legs[i]->paths[p];
			struct link *l = NULL;
			int r;

			path->waiter.ready = path_ready;
			path->waiting = true;
			t->paths_waiting++;
			r = link_get(&t->ctx->links, &path->key, &path->waiter, &l);
			if (r == -EINPROGRESS)
				continue;
			path->waiting = false;
			t->paths_waiting--;
			if (r == 0)
				r = qp_get(t->ctx, l, &path->qp);
			if (r == 0)
				path->held = link_hold(path->qp->link);
			if (r < 0 && t->fail_err == 0) {
				if (link_limit_error(&t->ctx->links, path->key.uid, r, &e) == 0)
					errinfo_set(&e, RDMAMEM_ERROR_PEER_UNREACHABLE, r,
						    "cannot connect to %s on %s: %s",
						    "the remote daemon", path->dev->info.name,
						    strerror(-r));
				t->fail_err = r;
				t->fail_info = e;
				e = (struct errinfo){};
			}
		}
	t->hold--;
	if (t->fail_err < 0 || t->cancelled) {
		if (t->paths_waiting == 0)
			finish(t);
		return;
	}
	if (t->paths_waiting == 0)
		run(t);
}

static void path_ready(struct link_waiter *w, struct link *l, int error, const char *reason)
{
	struct transfer_path *path = container_of(w, struct transfer_path, waiter);
	struct transfer *t = path->leg->t;
	int r = error;

	path->waiting = false;
	t->paths_waiting--;
	if (l) {
		r = qp_get(t->ctx, l, &path->qp);
		if (r < 0)
			reason = NULL;
		else
			path->held = link_hold(path->qp->link);
	}
	if (r < 0 && t->fail_err == 0 && !t->cancelled) {
		struct errinfo e = {};

		errinfo_set(&e, RDMAMEM_ERROR_PEER_UNREACHABLE, r,
			    "cannot connect from %s to the daemon of remote %" PRIu64 ": %s",
			    path->dev->info.name, path->leg->remote->id,
			    reason && *reason ? reason : strerror(-r));
		t->fail_err = r;
		t->fail_info = e;
	}
	if (t->paths_waiting > 0)
		return;
	if (t->fail_err < 0 || t->cancelled)
		finish(t);
	else
		run(t);
}

/* ---- locks ---- */

static void lock_next(struct transfer *t);

static void on_lock_granted(struct lock_request *req)
{
	struct transfer *t = req->userdata;

	t->regions[t->lock_order[t->n_locked]].locked = true;
	t->n_locked++;
	lock_next(t);
}

static void lock_next(struct transfer *t)
{
	while (t->n_locked < t->n_regions) {
		struct transfer_region *tr = &t->regions[t->lock_order[t->n_locked]];
		enum lock_mode mode = tr->written ? LOCK_EXCLUSIVE : LOCK_SHARED;
		int r;

		if (tr->lease) {
			t->n_locked++;
			continue;
		}
		tr->req.userdata = t;
		r = lock_acquire(&tr->region->lock, &tr->req, mode, false, on_lock_granted, t);
		if (r == 0)
			return; /* on_lock_granted() goes on */
		tr->locked = true;
		t->n_locked++;
	}
	connect_all(t);
}

/* ---- resolve ---- */

static int region_slot(struct transfer *t, uint64_t id, uint8_t opcode, uint64_t lease_id,
		       uint32_t *ret, struct errinfo *e)
{
	struct transfer_region *tr = NULL;
	uint32_t i;
	int r;

	for (i = 0; i < t->n_regions; i++)
		if (t->regions[i].region->id == id) {
			tr = &t->regions[i];
			break;
		}
	if (!tr) {
		struct region *reg;

		if (t->n_regions == TRANSFER_REGIONS_MAX)
			return errinfo_invalid_param(e, "ops", -E2BIG,
						     "a transfer names at most %u local regions",
						     TRANSFER_REGIONS_MAX);
		r = region_lookup(t->ctx->regions, id, t->caller, REGION_READ, &reg, e);
		if (r < 0)
			return r;
		tr = &t->regions[t->n_regions++];
		tr->region = reg;
	}
	if (opcode == WR_READ && !tr->written) {
		if (!region_allows(tr->region, t->caller, REGION_WRITE))
			return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "a READ writes region %" PRIu64
					   ", which this connection may only read",
					   id);
		tr->written = true;
	}
	if (lease_id) {
		struct lease *l;

		if (!tr->lease || tr->lease->id != lease_id) {
			if (tr->lease)
				return errinfo_invalid_param(e, "ops", -EINVAL,
							     "two leases named for region %" PRIu64,
							     id);
			r = lease_lookup(t->ctx->regions, lease_id, t->caller, &l, e);
			if (r < 0)
				return r;
			if (l->region != tr->region)
				return errinfo_invalid_param(e, "ops", -EINVAL,
							     "lease %" PRIu64
							     " is not on region %" PRIu64,
							     lease_id, id);
			tr->lease = lease_ref(l);
		}
	}
	*ret = (uint32_t)(tr - t->regions);
	return 0;
}

static int remote_slot(struct transfer *t, struct remote *rem, uint32_t *ret, struct errinfo *e)
{
	for (uint32_t i = 0; i < t->n_remotes; i++)
		if (t->remotes[i] == rem) {
			*ret = i;
			return 0;
		}
	if (t->n_remotes == TRANSFER_REMOTES_MAX)
		return errinfo_invalid_param(e, "ops", -E2BIG,
					     "a transfer names at most %u remotes",
					     TRANSFER_REMOTES_MAX);
	t->remotes[t->n_remotes] = remote_ref(rem);
	*ret = t->n_remotes++;
	return 0;
}

/* The leg of (remote, owner uid); its key set for region slot rs. */
static int leg_slot(struct transfer *t, struct remote *rem, uint32_t rs, uint32_t *ret_leg,
		    uint32_t *ret_keys, struct errinfo *e)
{
	uid_t uid = t->regions[rs].region->owner_uid;
	struct transfer_leg *leg = NULL;
	uint32_t i;

	for (i = 0; i < t->n_legs; i++)
		if (t->legs[i]->remote == rem && t->legs[i]->uid == uid) {
			leg = t->legs[i];
			break;
		}
	if (!leg) {
		if (t->n_legs == TRANSFER_LEGS_MAX)
			return errinfo_invalid_param(e, "ops", -E2BIG,
						     "a transfer spans at most %u pairs of remote "
						     "and local region owner",
						     TRANSFER_LEGS_MAX);
		/* A leg is allocated when first named: most transfers have
		 * one, and the struct stays small enough for the allocator's
		 * small bins. */
		leg = calloc(1, sizeof(*leg));
		if (!leg)
			return -ENOMEM;
		leg->t = t;
		leg->remote = rem;
		leg->uid = uid;
		wr_plan_init(&leg->plan);
		t->legs[t->n_legs++] = leg;
	}
	*ret_leg = i;
	for (i = 0; i < leg->n_regions; i++)
		if (leg->regions[i] == rs) {
			*ret_keys = i;
			return 0;
		}
	leg->regions[leg->n_regions] = rs;
	*ret_keys = leg->n_regions++;
	return 0;
}

struct resolved {
	uint32_t leg, keys;
};

/* Op i's ranges: [offset, +length) inside reg, [remote_offset, +length)
 * inside rem, length above 0. */
static int check_bounds(size_t i, const struct region *reg, uint64_t offset,
			const struct remote *rem, uint64_t remote_offset, uint64_t length,
			struct errinfo *e)
{
	if (length == 0 || offset > reg->size || length > reg->size - offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "op %zu: [%" PRIu64 ", +%" PRIu64
				   ") is not inside region %" PRIu64 " (%" PRIu64 " bytes)%s",
				   i, offset, length, reg->id, reg->size,
				   length == 0 ? "; a length of 0 is refused" : "");
	if (remote_offset > rem->desc.length || length > rem->desc.length - remote_offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "op %zu: [%" PRIu64 ", +%" PRIu64
				   ") is not inside remote %" PRIu64 " (%" PRIu64 " bytes)",
				   i, remote_offset, length, rem->id, rem->desc.length);
	return 0;
}

/* Op i: rights, ranges, its leg and key set. */
static int resolve_op(struct transfer *t, size_t i, uint8_t opcode, uint64_t region,
		      uint64_t offset, uint64_t lease, struct remote *rem, uint64_t remote_offset,
		      uint64_t length, struct resolved *ret, struct errinfo *e)
{
	uint32_t rs = 0, remote;
	uint8_t need = opcode == WR_READ ? DESCRIPTOR_ACCESS_READ : DESCRIPTOR_ACCESS_WRITE;
	int r;

	if (opcode != WR_READ && opcode != WR_WRITE)
		return errinfo_invalid_param(e, "op", -EINVAL, "op %zu: 'read' or 'write'", i);
	r = region_slot(t, region, opcode, lease, &rs, e);
	if (r < 0)
		return r;
	r = check_bounds(i, t->regions[rs].region, offset, rem, remote_offset, length, e);
	if (r < 0)
		return r;
	if (!(rem->desc.access & need))
		return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
				   "op %zu: remote %" PRIu64 " grants no %s access", i, rem->id,
				   opcode == WR_READ ? "read" : "write");
	r = remote_slot(t, rem, &remote, e);
	if (r < 0)
		return r;
	return leg_slot(t, rem, rs, &ret->leg, &ret->keys, e);
}

/* Leases must allow what the ops do to their regions. */
static int check_leases(struct transfer *t, struct errinfo *e)
{
	for (uint32_t i = 0; i < t->n_regions; i++) {
		struct transfer_region *tr = &t->regions[i];

		if (!tr->lease)
			continue;
		if (!lease_is_held(tr->lease))
			return errinfo_set(e, RDMAMEM_ERROR_LEASE_CONFLICT, -EBUSY,
					   "lease %" PRIu64 " is still waiting for its lock",
					   tr->lease->id);
		if (tr->written && tr->lease->mode == LOCK_SHARED)
			return errinfo_set(e, RDMAMEM_ERROR_LEASE_CONFLICT, -EBUSY,
					   "lease %" PRIu64 " is shared, which allows the "
					   "region to be read only; a READ writes it",
					   tr->lease->id);
	}
	return 0;
}

/* ---- paths ---- */

/* The leg's paths (paths.h: nearest the memory first), their links' keys,
 * and per region and path the addresses, keys and the MR held. */
static int leg_paths(struct transfer *t, struct transfer_leg *leg, struct errinfo *e)
{
	const struct descriptor *desc = &leg->remote->desc;
	struct paths_choice choice[PATHS_MAX];
	struct region *regs[TRANSFER_REGIONS_MAX];
	int r;

	for (uint32_t k = 0; k < leg->n_regions; k++)
		regs[k] = t->regions[leg->regions[k]].region;
	r = paths_choose(&t->ctx->paths, regs, leg->n_regions, desc, choice, &leg->n_paths, e);
	if (r < 0)
		return r;
	for (uint32_t p = 0; p < leg->n_paths; p++) {
		struct transfer_path *path = &leg->paths[p];

		*path = (struct transfer_path){ .leg = leg,
						.dev = choice[p].dev,
						.remote_dev = choice[p].remote_dev };
		path->key.dev = choice[p].dev;
		path->key.uid = leg->uid;
		path->key.endpoint = choice[p].endpoint;
		memcpy(path->key.token, desc->token, TOKEN_BYTES);
	}
	leg->keys = calloc((size_t)leg->n_regions * leg->n_paths, sizeof(*leg->keys));
	leg->mregs = calloc((size_t)leg->n_regions * leg->n_paths, sizeof(*leg->mregs));
	if (!leg->keys || !leg->mregs)
		return -ENOMEM;
	for (uint32_t k = 0; k < leg->n_regions; k++) {
		struct region *reg = regs[k];

		for (uint32_t p = 0; p < leg->n_paths; p++) {
			struct mreg *m = mreg_find(reg, leg->paths[p].dev->info.name);
			const struct descriptor_device *rd =
				&desc->devices[leg->paths[p].remote_dev];

			/* The device writes the region for a READ only when its MR
			 * allows local writes (the owner's access list). */
			if (t->regions[leg->regions[k]].written &&
			    !(m->access & VB_ACCESS_LOCAL_WRITE))
				return errinfo_set(
					e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					"a READ writes region %" PRIu64
					", whose registration on %s does not allow local "
					"writes (register it with access local_write)",
					reg->id, leg->paths[p].dev->info.name);

			/* Its MR stays until the transfer is over (mreg.h). The
			 * local address is the one the MR was registered at: the
			 * host mapping, or for GPU memory the device address (a
			 * dma-buf MR's iova, peer memory's own address). */
			leg->mregs[k * leg->n_paths + p] = mreg_hold(m);
			leg->keys[k * leg->n_paths + p] = (struct wr_keys){
				.local_addr = region_address(reg),
				.remote_addr = rd->addr,
				.lkey = m->lkey,
				.rkey = rd->rkey,
			};
		}
	}
	return 0;
}

static int plan_paths(struct transfer *t, struct errinfo *e)
{
	int r = 0;

	for (uint32_t i = 0; i < t->n_legs && r == 0; i++)
		r = leg_paths(t, t->legs[i], e);
	return r;
}

/* ---- the pool's part ---- */

/*
 * A transfer's O(ops) work past TRANSFER_INLINE_OPS ops runs on the pool,
 * one job at a time, the transfer held (t->hold: done waits) and its
 * state unchanged meanwhile: TRANSFER_JOB_FILL (a batch's ranges checked
 * and made its leg's ops, before the locks) and TRANSFER_JOB_PLAN (the
 * legs' WR plans, after the connections). The job reads what the loop
 * handed it and writes only the leg's arrays and its own fields; the loop
 * touches neither until done. A cancel meanwhile is seen when it ends.
 */

/* A batch's ranges into its leg's ops: the first range out of bounds in
 * job_bad (SIZE_MAX: none). */
static void job_fill(struct transfer *t)
{
	struct transfer_leg *leg = t->legs[0];
	const struct ranges_item *r = t->job_ranges.r;
	uint64_t size = t->job_region_size, rlen = t->legs[0]->remote->desc.length, bytes = 0;
	uint32_t keys = t->job_keys;
	uint8_t opcode = t->job_opcode;

	t->job_bad = SIZE_MAX;
	for (size_t i = 0; i < t->n_ops; i++) {
		const struct ranges_item *pr = &r[i];

		if (pr->length == 0 || pr->local_offset > size ||
		    pr->length > size - pr->local_offset || pr->remote_offset > rlen ||
		    pr->length > rlen - pr->remote_offset) {
			t->job_bad = i;
			t->job_bad_item = *pr;
			return;
		}
		leg->ops[i] = (struct wr_op){ .local_offset = pr->local_offset,
					      .remote_offset = pr->remote_offset,
					      .length = pr->length,
					      .index = (uint32_t)i,
					      .keys = keys,
					      .opcode = opcode };
		bytes += pr->length;
	}
	t->job_bytes = bytes;
}

static void job_run(struct offload_job *j)
{
	struct transfer *t = container_of(j, struct transfer, job);

	if (t->job_kind == TRANSFER_JOB_FILL) {
		if (t->job_text) {
			t->job_decode_r = ranges_decode_buf(t->job_text, t->job_text_len, t->n_ops,
							    &t->job_ranges, &t->job_why);
			if (t->job_decode_r == 0 && t->job_ranges.n != t->n_ops)
				t->job_decode_r = -EBADMSG; /* counted: cannot be */
		}
		if (t->job_decode_r == 0)
			job_fill(t);
		/* Unmapped or freed here, not on the loop: a batch's mapping
		 * or decoded copy is O(ops) pages to tear down. */
		ranges_release(&t->job_ranges);
		return;
	}
	for (uint32_t i = 0; i < t->n_legs; i++)
		t->legs[i]->build_r = leg_build(t->legs[i]);
}

static int transfer_go(struct transfer *t, bool later, struct errinfo *e);

static void job_done(struct offload_job *j)
{
	struct transfer *t = container_of(j, struct transfer, job);
	struct errinfo e = {};
	int r;

	t->hold--;
	ranges_release(&t->job_ranges);
	if (t->job_kind == TRANSFER_JOB_PLAN) {
		if (!t->cancelled) {
			run_post(t);
			return;
		}
		/* Cancelled meanwhile: said so already, nothing is posted. */
		for (uint32_t i = 0; i < t->n_legs; i++)
			t->legs[i]->started = t->legs[i]->build_r == 0;
		unbuild_all(t);
		finish(t);
		return;
	}
	if (t->cancelled) {
		finish(t);
		return;
	}
	if (t->job_decode_r == -ENOMEM) {
		fail_early(t,
			   errinfo_set(&e, RDMAMEM_ERROR_TRANSFER_FAILED, -ENOMEM,
				       "out of memory decoding the ranges"),
			   &e);
		return;
	}
	if (t->job_decode_r < 0) {
		fail_early(t,
			   errinfo_invalid_param(&e, "batch", -EINVAL,
						 "parameter 'batch.packed' %s",
						 t->job_why ?: "is not valid"),
			   &e);
		return;
	}
	if (t->job_bad != SIZE_MAX) {
		r = check_bounds(t->job_bad, t->regions[0].region, t->job_bad_item.local_offset,
				 t->legs[0]->remote, t->job_bad_item.remote_offset,
				 t->job_bad_item.length, &e);
		fail_early(t, r, &e);
		return;
	}
	t->progress.bytes += t->job_bytes;
	r = transfer_go(t, true, &e);
	if (r < 0)
		fail_early(t, r, &e);
}

static void job_submit(struct transfer *t, enum transfer_job_kind kind)
{
	t->job_kind = kind;
	t->hold++;
	t->job = (struct offload_job){ .run = job_run, .done = job_done };
	offload_submit(t->ctx->core->offload, &t->job);
}

/* ---- the transfer ---- */

static struct transfer *transfer_alloc(struct remote_ctx *ctx, struct session *caller, size_t n)
{
	struct transfer *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->ctx = ctx;
	t->caller = session_ref(caller);
	t->n_ops = n;
	t->progress.n_ops = n;
	ctx->n_transfers++;
	return t;
}

void transfer_free(struct transfer *t)
{
	if (!t)
		return;
	release_all(t);
	for (uint32_t i = 0; i < t->n_legs; i++) {
		struct transfer_leg *leg = t->legs[i];

		if (leg->started)
			window_batch_fini(&leg->batch);
		wr_plan_done(&leg->plan);
		free(leg->ops);
		free(leg->keys);
		/* After done: nothing of ours is in flight on them. */
		for (size_t k = 0; leg->mregs && k < (size_t)leg->n_regions * leg->n_paths; k++)
			if (leg->mregs[k])
				mreg_release(leg->mregs[k]);
		free(leg->mregs);
		free(leg);
	}
	for (uint32_t i = 0; i < t->n_regions; i++) {
		lease_unref(t->regions[i].lease);
		region_unref(t->regions[i].region);
	}
	for (uint32_t i = 0; i < t->n_remotes; i++)
		remote_unref(t->remotes[i]);
	errinfo_done(&t->fail_info);
	errinfo_done(&t->notice_info);
	session_unref(t->caller);
	t->ctx->n_transfers--;
	free(t->notify);
	free(t);
}

/* The notify bytes, copied. */
static int transfer_notify(struct transfer *t, const void *notify, size_t notify_len,
			   struct errinfo *e)
{
	if (notify_len > 0) {
		if (!t->ctx->notify_send)
			return errinfo_invalid_param(e, "notify", -EOPNOTSUPP,
						     "parameter 'notify': this daemon sends no "
						     "notifications yet");
		t->notify = malloc(notify_len);
		if (!t->notify)
			return -ENOMEM;
		memcpy(t->notify, notify, notify_len);
		t->notify_len = notify_len;
	}
	return 0;
}

/*
 * After every op was resolved and the legs' op arrays filled: the paths,
 * the lock order; then the locks are asked for. later: called after the
 * start returned (a pool job's end), where a transfer that ended at once
 * reports through done, not the return.
 */
static int transfer_go(struct transfer *t, bool later, struct errinfo *e)
{
	int r;

	r = check_leases(t, e);
	if (r < 0)
		return r;
	r = plan_paths(t, e);
	if (r < 0)
		return r;
	/* Locks in region id order: transfers (and Copy) never wait in a cycle. */
	for (uint32_t i = 0; i < t->n_regions; i++) {
		uint32_t j = i;

		while (j > 0 &&
		       t->regions[t->lock_order[j - 1]].region->id > t->regions[i].region->id) {
			t->lock_order[j] = t->lock_order[j - 1];
			j--;
		}
		t->lock_order[j] = i;
	}
	t->last_progress_msec = uv_now(t->ctx->core->loop);
	t->started_ns = uv_hrtime();
	t->hold++;
	lock_next(t);
	t->hold--;
	/* Over already (no link could start, the windows had failed): said by
	 * the return, as done never comes from inside the start. */
	if (t->state == TRANSFER_RUNNING ?
		    t->legs_left > 0 :
		    t->fail_err == 0 || t->paths_waiting > 0 || t->n_locked < t->n_regions) {
		/* Started: done comes, and counts it once more. */
		t->ctx->n_transfers_started++;
		return 0;
	}
	if (later) {
		finish(t);
		return 0;
	}
	if (t->fail_err < 0) {
		r = t->fail_err;
		*e = t->fail_info;
		t->fail_info = (struct errinfo){};
	} else {
		r = t->failed ? fail_info(t, e) :
				errinfo_set(e, RDMAMEM_ERROR_TRANSFER_FAILED, -EIO,
					    "the transfer ended before it started");
	}
	return r;
}

/* The listed form's ops, resolved (res[i] for op i), into the legs' op
 * arrays; then transfer_go(). */
static int transfer_begin(struct transfer *t, const struct resolved *res, const struct wr_op *ops,
			  const void *notify, size_t notify_len, struct errinfo *e)
{
	size_t fill[TRANSFER_LEGS_MAX] = {};

	for (size_t i = 0; i < t->n_ops; i++)
		t->legs[res[i].leg]->n_ops++;
	for (uint32_t l = 0; l < t->n_legs; l++) {
		t->legs[l]->ops = calloc(t->legs[l]->n_ops, sizeof(struct wr_op));
		if (!t->legs[l]->ops)
			return -ENOMEM;
	}
	for (size_t i = 0; i < t->n_ops; i++) {
		struct transfer_leg *leg = t->legs[res[i].leg];
		struct wr_op *o = &leg->ops[fill[res[i].leg]++];

		*o = ops[i];
		o->keys = res[i].keys;
		o->index = (uint32_t)i;
		t->progress.bytes += o->length;
	}
	return transfer_notify(t, notify, notify_len, e) ?: transfer_go(t, false, e);
}

static int transfer_setup(struct transfer *t, const struct transfer_cb *cb, void *userdata,
			  struct resolved **ret_res, struct wr_op **ret_ops)
{
	t->cb = *cb;
	t->userdata = userdata;
	*ret_res = calloc(t->n_ops, sizeof(**ret_res));
	*ret_ops = calloc(t->n_ops, sizeof(**ret_ops));
	return *ret_res && *ret_ops ? 0 : -ENOMEM;
}

/* Ends a transfer that did not start, and returns r. */
static int transfer_abandon(struct transfer *t, int r, struct resolved *res, struct wr_op *ops)
{
	free(res);
	free(ops);
	t->state = TRANSFER_DONE;
	transfer_free(t);
	return r;
}

/* Op i of either form: resolved into res[i], and its WR-plan op into ops[i]. */
static int resolve_into(struct transfer *t, size_t i, uint8_t opcode, uint64_t region,
			uint64_t offset, uint64_t lease, struct remote *rem, uint64_t remote_offset,
			uint64_t length, struct resolved *res, struct wr_op *ops, struct errinfo *e)
{
	ops[i] = (struct wr_op){ .local_offset = offset,
				 .remote_offset = remote_offset,
				 .length = length,
				 .opcode = opcode };
	return resolve_op(t, i, opcode, region, offset, lease, rem, remote_offset, length, &res[i],
			  e);
}

/* Both forms' end: begins t when every op resolved (r == 0), else abandons it. */
static int transfer_launch(struct transfer *t, int r, struct resolved *res, struct wr_op *ops,
			   const void *notify, size_t notify_len, struct transfer **ret,
			   struct errinfo *e)
{
	if (r == 0)
		r = transfer_begin(t, res, ops, notify, notify_len, e);
	if (r < 0)
		return transfer_abandon(t, r, res, ops);
	free(res);
	free(ops);
	*ret = t;
	return 0;
}

int transfer_start(struct remote_ctx *ctx, struct session *caller, const struct transfer_op *ops,
		   size_t n, const void *notify, size_t notify_len, const struct transfer_cb *cb,
		   void *userdata, struct transfer **ret, struct errinfo *e)
{
	struct transfer *t = transfer_alloc(ctx, caller, n);
	struct resolved *res = NULL;
	struct wr_op *wops = NULL;
	int r;

	*ret = NULL;
	if (!t)
		return -ENOMEM;
	r = transfer_setup(t, cb, userdata, &res, &wops);
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct transfer_op *o = &ops[i];
		struct remote *rem = remote_lookup(ctx, o->remote, caller);

		if (!rem) {
			r = errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_REMOTE, -ENOENT,
					"op %zu: this connection holds no remote %" PRIu64, i,
					o->remote);
			break;
		}
		r = resolve_into(t, i, o->opcode, o->region, o->offset, o->lease, rem,
				 o->remote_offset, o->length, res, wops, e);
	}
	return transfer_launch(t, r, res, wops, notify, notify_len, ret, e);
}

/*
 * The ranged forms: ranges[indices[i]] (indices NULL: ranges[i]) for i in
 * [0, n), every one between region (under lease, or 0) and rem, opcode for
 * all. The rights and slots resolve once, on the first range: one region,
 * one remote, one leg, one key set, so each range becomes its leg's op
 * directly. A plan's ranges were checked against both lengths when it was
 * made (checked: a region's size never changes, plan.h), so a post by
 * index checks only that each index is in the plan; a batch's ranges are
 * checked here, each once — on the pool past TRANSFER_INLINE_OPS when the
 * caller lets the transfer take them (take: the buffer ranges is in), and
 * then what is wrong with one comes through done.
 */
static int start_ranged(struct remote_ctx *ctx, struct session *caller, uint8_t opcode,
			uint64_t region, uint64_t lease, struct remote *rem,
			const struct ranges_item *ranges, size_t n_ranges, bool checked,
			struct ranges_buf *take, const char *text, size_t text_len,
			const uint32_t *indices, size_t n, const void *notify, size_t notify_len,
			const struct transfer_cb *cb, void *userdata, struct transfer **ret,
			struct errinfo *e)
{
	struct transfer *t = transfer_alloc(ctx, caller, n);
	const struct ranges_item *pr;
	const struct region *reg;
	struct transfer_leg *leg;
	struct resolved res;
	struct wr_op *o;
	int r;

	*ret = NULL;
	if (!t)
		return -ENOMEM;
	t->cb = *cb;
	t->userdata = userdata;
	if (indices && indices[0] >= n_ranges) {
		r = errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				"index 0: the plan has %zu ranges, not %" PRIu32, n_ranges,
				indices[0] + 1);
		return transfer_abandon(t, r, NULL, NULL);
	}
	pr = &ranges[indices ? indices[0] : 0];
	r = resolve_op(t, 0, opcode, region, pr->local_offset, lease, rem, pr->remote_offset,
		       pr->length, &res, e);
	if (r < 0)
		return transfer_abandon(t, r, NULL, NULL);
	leg = t->legs[res.leg];
	reg = t->regions[0].region;
	leg->ops = malloc(n * sizeof(*leg->ops));
	if (!leg->ops)
		return transfer_abandon(t, -ENOMEM, NULL, NULL);
	leg->n_ops = n;
	/* Text left encoded is for the pool only (the caller's contract). */
	if (text && (n <= TRANSFER_INLINE_OPS || !ctx->core->offload))
		return transfer_abandon(t, -EINVAL, NULL, NULL);
	if ((take || text) && !indices && n > TRANSFER_INLINE_OPS && ctx->core->offload) {
		r = transfer_notify(t, notify, notify_len, e);
		if (r < 0)
			return transfer_abandon(t, r, NULL, NULL);
		if (take) {
			t->job_ranges = *take;
			*take = (struct ranges_buf){};
		}
		t->job_text = text;
		t->job_text_len = text_len;
		t->job_region_size = reg->size;
		t->job_keys = res.keys;
		t->job_opcode = opcode;
		job_submit(t, TRANSFER_JOB_FILL);
		*ret = t;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (!indices) {
			pr = &ranges[i];
		} else if (indices[i] < n_ranges) {
			pr = &ranges[indices[i]];
		} else {
			r = errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
					"index %zu: the plan has %zu ranges, not %" PRIu64, i,
					n_ranges, (uint64_t)indices[i] + 1);
			return transfer_abandon(t, r, NULL, NULL);
		}
		if (!checked) {
			r = check_bounds(i, reg, pr->local_offset, rem, pr->remote_offset,
					 pr->length, e);
			if (r < 0)
				return transfer_abandon(t, r, NULL, NULL);
		}
		o = &leg->ops[i];
		*o = (struct wr_op){ .local_offset = pr->local_offset,
				     .remote_offset = pr->remote_offset,
				     .length = pr->length,
				     .index = (uint32_t)i,
				     .keys = res.keys,
				     .opcode = opcode };
		t->progress.bytes += pr->length;
	}
	r = transfer_notify(t, notify, notify_len, e) ?: transfer_go(t, false, e);
	if (r < 0)
		return transfer_abandon(t, r, NULL, NULL);
	*ret = t;
	return 0;
}

int transfer_start_plan(struct remote_ctx *ctx, struct session *caller, struct plan *p,
			uint8_t opcode, const uint32_t *indices, size_t n, const void *notify,
			size_t notify_len, const struct transfer_cb *cb, void *userdata,
			struct transfer **ret, struct errinfo *e)
{
	return start_ranged(ctx, caller, opcode, p->region, 0, p->remote, p->ranges, p->n_ranges,
			    true, NULL, NULL, 0, n ? indices : NULL, n ? n : p->n_ranges, notify,
			    notify_len, cb, userdata, ret, e);
}

int transfer_start_batch(struct remote_ctx *ctx, struct session *caller,
			 const struct transfer_batch *b, const void *notify, size_t notify_len,
			 const struct transfer_cb *cb, void *userdata, struct transfer **ret,
			 struct errinfo *e)
{
	struct remote *rem = remote_lookup(ctx, b->remote, caller);

	*ret = NULL;
	if (!rem)
		return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_REMOTE, -ENOENT,
				   "this connection holds no remote %" PRIu64, b->remote);
	return start_ranged(ctx, caller, b->opcode, b->region, b->lease, rem, b->ranges, b->n,
			    false, b->take, b->text, b->text_len, NULL, b->n, notify, notify_len,
			    cb, userdata, ret, e);
}

void transfer_cancel(struct transfer *t)
{
	if (t->cancelled || t->state == TRANSFER_DONE)
		return;
	t->cancelled = true;
	switch (t->state) {
	case TRANSFER_LOCKING:
	case TRANSFER_CONNECTING:
		/* Nothing posted: the waits end now. */
		t->fail_st = (struct window_status){ .outcome = WINDOW_CANCELLED };
		t->failed = true;
		t->fail_op = 0;
		t->progress.ops_failed = t->n_ops;
		finish(t);
		break;
	case TRANSFER_RUNNING:
		t->hold++;
		for (uint32_t i = 0; i < t->n_legs; i++) {
			struct transfer_leg *leg = t->legs[i];

			if (!leg->batch_done)
				window_batch_cancel(&leg->batch);
			/* What is posted must still retire before the memory
			 * goes back: within the link's drain deadline, or the
			 * link closes and it flushes. */
			for (uint32_t p = 0; p < leg->n_paths; p++) {
				struct transfer_qp *q = leg->paths[p].qp;

				if (q && !q->dead)
					link_drain(q->link);
			}
			/* Not sent yet: it will not be. */
			if (leg->notice.state == NOTICE_WAITING) {
				list_del(&leg->notice.node);
				notice_post(leg);
			}
		}
		t->hold--;
		if (t->legs_left == 0)
			finish(t);
		break;
	case TRANSFER_DONE:
		break;
	}
}
