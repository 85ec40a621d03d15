/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd Read, Write, Copy, Lock and Unlock. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "daemon.h"
#include "errinfo.h"
#include "lease.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "region.h"
#include "rpc.h"
#include "xfer.h"

/* A region end of a transfer as the client names it. */
struct end_params {
	uint64_t region;
	uint64_t offset;
	uint64_t lease;
	bool has_lease;		/* lease was sent: "0" names no lease, it does not mean none */
};

static const struct json_field end_fields[] = {
	{ "region", JSON_U64, offsetof(struct end_params, region), JSON_MANDATORY },
	{ "offset", JSON_U64, offsetof(struct end_params, offset), 0 },
	{ "lease", JSON_U64, offsetof(struct end_params, lease), 0 },
	{},
};

static int parse_mode(struct rpc_call *call, const char *param, const char *s, bool write,
		      enum lock_mode *ret)
{
	int m;

	if (!s)
		return 0;
	m = lock_mode_from_string(s);
	if (m < 0 || (write && m == LOCK_SHARED))
		return rpc_invalid_param(call, param, "parameter '%s' must be %s, not '%.32s'", param,
					 write ? "\"exclusive\" or \"disjoint\"" :
						 "\"shared\", \"disjoint\" or \"exclusive\"",
					 s);
	*ret = m;
	return 0;
}

static int parse_timeout(struct rpc_call *call, int64_t timeout_ms)
{
	if (timeout_ms < -1)
		return rpc_invalid_param(call, "timeout_ms",
					 "parameter 'timeout_ms' must be -1 (no limit), 0 (do not "
					 "wait) or a number of milliseconds");
	return 0;
}

/*
 * Resolves one end: the region with the right it needs, the range, and the
 * caller's lease. Fills e with new references.
 */
static int resolve_end(struct rpc_call *call, const struct end_params *p, uint64_t length,
		       bool write, enum lock_mode mode, const char *what, struct xfer_end *e)
{
	struct daemon *d = call->daemon;
	struct errinfo err = {};
	struct lease *l = NULL;
	int r;

	r = region_lookup(d, p->region, call->session, write ? REGION_WRITE : REGION_READ, &e->region,
			  &err);
	if (r < 0)
		return rpc_error_info(call, &err);
	e->offset = p->offset;
	e->write = write;
	e->mode = mode;

	if (write && !e->region->writable)
		return rpc_errorf(call, RDMAMEM_ERROR_READ_ONLY,
				  "region %" PRIu64 " was registered from a memfd that cannot be "
				  "written (opened read-only or sealed against writes)",
				  p->region);
	r = region_check_range(e->region, p->offset, length, what, &err);
	if (r < 0)
		return rpc_error_info(call, &err);
	if (p->has_lease) {
		r = lease_lookup(d, p->lease, call->session, &l, &err);
		if (r < 0)
			return rpc_error_info(call, &err);
		e->lease = lease_ref(l);
	}
	return 0;
}

static void xfer_call_cancel(struct rpc_call *call)
{
	xfer_cancel(call->userdata);
}

static void xfer_done(struct xfer *x)
{
	struct rpc_call *call = x->call;
	_cleanup_json_ cJSON *p = NULL;

	call->cancel = NULL;
	if (x->result == -ECANCELED) {
		rpc_call_abandon(call);
		goto out;
	}
	if (x->result < 0) {
		if (x->err.name)
			rpc_error_info(call, &x->err);
		else if (x->result == -EINVAL)
			rpc_invalid_param(call, "data", "parameter 'data' is not valid base64 "
						      "(RFC 4648, padded, no line breaks)");
		else
			rpc_errorf(call, RDMAMEM_ERROR_INTERNAL, "transfer failed: %s",
				   strerror(-x->result));
		goto out;
	}

	if (x->kind == XFER_READ) {
		/* The reply was made with the data. */
		call->daemon->stats.bytes_read += x->length;
		rpc_reply_text(call, TAKE_PTR(x->out), x->out_len);
		goto out;
	}
	p = cJSON_CreateObject();
	if (!p || json_add_u64(p, "length", x->length) < 0) {
		rpc_errorf(call, RDMAMEM_ERROR_INTERNAL, "out of memory");
		goto out;
	}
	if (x->kind == XFER_WRITE)
		call->daemon->stats.bytes_written += x->length;
	else
		call->daemon->stats.bytes_copied += x->length;
	rpc_reply(call, TAKE_PTR(p));
out:
	xfer_free(x);
}

/*
 * Starts x for call; answers the call itself when x cannot start. Touches
 * neither once x started: a transfer may finish at once and answer, and the
 * answer frees a call that was pending (one that waited for room for its
 * reply). The dispatcher sees the answer given.
 */
static int start_xfer(struct rpc_call *call, struct xfer *x)
{
	int r;

	call->cancel = xfer_call_cancel;
	call->userdata = x;
	r = xfer_start(x);
	if (r < 0) {
		call->cancel = NULL;
		rpc_error_info(call, &x->err);
		xfer_free(x);
		return r;
	}
	return RPC_PENDING;
}

/* The room for a Read's reply was reserved after a wait. */
static void read_reserved(struct rpc_call *call)
{
	start_xfer(call, call->userdata);
}

/* A new transfer for call; the caller fills in the rest. */
static struct xfer *xfer_new(struct rpc_call *call, enum xfer_kind kind, int64_t timeout_ms)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->call = call;
	x->done = xfer_done;
	x->kind = kind;
	x->timeout_ms = timeout_ms;
	return x;
}

static int method_read(struct rpc_call *call)
{
	struct {
		struct end_params end;
		uint64_t length;
		int64_t timeout_ms;
	} p = { .timeout_ms = -1 };
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), end.region), JSON_MANDATORY },
		{ "offset", JSON_U64, offsetof(__typeof__(p), end.offset), 0 },
		{ "length", JSON_U64, offsetof(__typeof__(p), length), JSON_MANDATORY },
		{ "lease", JSON_U64, offsetof(__typeof__(p), end.lease), 0 },
		{ "timeout_ms", JSON_INT, offsetof(__typeof__(p), timeout_ms), 0 },
		{},
	};
	uint64_t limit = call->daemon->cfg.read_inline_max;
	struct xfer *x;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = parse_timeout(call, p.timeout_ms)) < 0)
		return r;
	p.end.has_lease = json_present(call->vc.parameters, "lease");
	if (p.length > limit)
		return rpc_errorf(call, RDMAMEM_ERROR_TRANSFER_TOO_LARGE,
				  "Read returns at most %" PRIu64 " bytes inline, %" PRIu64
				  " were asked; read in pieces, or Copy into a region of your own "
				  "and use its mapping",
				  limit, p.length);

	x = xfer_new(call, XFER_READ, p.timeout_ms);
	if (!x)
		return -ENOMEM;
	x->length = p.length;
	r = resolve_end(call, &p.end, p.length, false, LOCK_SHARED, "read", &x->src);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	/* Room for the reply first, while no lock is held: its base64 is made
	 * before anything of it can leave. Locks are taken, and rights checked
	 * again, once it is there. */
	if (rpc_reserve_reply(call, xfer_read_reply_size(p.length), read_reserved) == 0) {
		call->cancel = xfer_call_cancel;
		call->userdata = x;
		return RPC_PENDING;
	}
	return start_xfer(call, x);
}

static int method_write(struct rpc_call *call)
{
	struct {
		struct end_params end;
		const char *data;
		const char *mode;
		int64_t timeout_ms;
	} p = { .timeout_ms = -1 };
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), end.region), JSON_MANDATORY },
		{ "offset", JSON_U64, offsetof(__typeof__(p), end.offset), 0 },
		{ "data", JSON_STRING, offsetof(__typeof__(p), data), JSON_MANDATORY },
		{ "mode", JSON_STRING, offsetof(__typeof__(p), mode), 0 },
		{ "lease", JSON_U64, offsetof(__typeof__(p), end.lease), 0 },
		{ "timeout_ms", JSON_INT, offsetof(__typeof__(p), timeout_ms), 0 },
		{},
	};
	enum lock_mode mode = LOCK_EXCLUSIVE;
	struct xfer *x;
	size_t len;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = parse_timeout(call, p.timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p.mode, true, &mode)) < 0)
		return r;
	p.end.has_lease = json_present(call->vc.parameters, "lease");
	len = rpc_strlen(call, p.data);
	/* The length is known from the text; the full check runs where the
	 * bytes are decoded, before any lands. */
	if (len % 4)
		return rpc_invalid_param(call, "data", "parameter 'data' is not valid base64: its "
						       "length is not a multiple of 4");

	x = xfer_new(call, XFER_WRITE, p.timeout_ms);
	if (!x)
		return -ENOMEM;
	x->text = p.data;
	x->text_len = len;
	x->length = len / 4 * 3 - (len && p.data[len - 1] == '=') - (len > 1 && p.data[len - 2] == '=');
	r = resolve_end(call, &p.end, x->length, true, mode, "write", &x->dst);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	return start_xfer(call, x);
}

static int method_copy(struct rpc_call *call)
{
	struct {
		cJSON *from, *to;
		uint64_t length;
		const char *mode;
		int64_t timeout_ms;
	} p = { .timeout_ms = -1 };
	static const struct json_field fields[] = {
		{ "from", JSON_OBJECT, offsetof(__typeof__(p), from), JSON_MANDATORY },
		{ "to", JSON_OBJECT, offsetof(__typeof__(p), to), JSON_MANDATORY },
		{ "length", JSON_U64, offsetof(__typeof__(p), length), JSON_MANDATORY },
		{ "mode", JSON_STRING, offsetof(__typeof__(p), mode), 0 },
		{ "timeout_ms", JSON_INT, offsetof(__typeof__(p), timeout_ms), 0 },
		{},
	};
	struct end_params from = {}, to = {};
	struct json_dispatch_error err;
	enum lock_mode mode = LOCK_EXCLUSIVE;
	struct xfer *x;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = parse_timeout(call, p.timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p.mode, true, &mode)) < 0)
		return r;
	if (json_dispatch(p.from, end_fields, &from, &err) < 0)
		return rpc_invalid_param(call, "from", "parameter 'from.%.64s' %s", err.field ?: "",
					 err.reason);
	if (json_dispatch(p.to, end_fields, &to, &err) < 0)
		return rpc_invalid_param(call, "to", "parameter 'to.%.64s' %s", err.field ?: "",
					 err.reason);
	from.has_lease = json_present(p.from, "lease");
	to.has_lease = json_present(p.to, "lease");

	x = xfer_new(call, XFER_COPY, p.timeout_ms);
	if (!x)
		return -ENOMEM;
	x->length = p.length;
	r = resolve_end(call, &from, p.length, false, LOCK_SHARED, "source", &x->src);
	if (r >= 0)
		r = resolve_end(call, &to, p.length, true, mode, "destination", &x->dst);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	return start_xfer(call, x);
}

static int reply_lease(struct rpc_call *call, struct lease *l)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();

	if (!p || json_add_u64(p, "lease", l->id) < 0 ||
	    json_add_string(p, "mode", lock_mode_to_string(l->mode)) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

static void lock_granted(struct lease *l)
{
	struct rpc_call *call = l->call;

	/* The connection is closing: it cancelled this call, then gave back
	 * a lease of its own that this one waited behind. The lease goes
	 * with the connection's others; nobody is left to tell. */
	if (!call)
		return;
	timeout_disarm(&l->daemon->timeouts, &l->timeout);
	l->call = NULL;
	call->cancel = NULL;
	if (reply_lease(call, l) < 0)
		rpc_errorf(call, RDMAMEM_ERROR_INTERNAL, "out of memory");
}

static void lock_timed_out(struct timeout *t)
{
	struct lease *l = container_of(t, struct lease, timeout);
	struct rpc_call *call = l->call;
	struct region *r = l->region;
	uint64_t waited = uv_now(l->daemon->loop) - l->asked_msec;

	l->call = NULL;
	call->cancel = NULL;
	/* Answering lets the connection go on, and if the client has gone
	 * meanwhile close, releasing its leases, this one too: keep it. */
	lease_ref(l);
	rpc_errorf(call, RDMAMEM_ERROR_LOCK_TIMEOUT,
		   "no %s lease on region %" PRIu64 " within %" PRIu64 " ms (lock %s, %u holders, "
		   "%u waiting)",
		   lock_mode_to_string(l->mode), r->id, waited, lock_state_to_string(r->lock.state),
		   r->lock.n_holders, r->lock.n_waiters - 1);
	lease_release(l);
	lease_unref(l);
}

/* Unshare (or a read-only Share) took the waiting holder's right away. */
static void lock_revoked(struct lease *l)
{
	struct rpc_call *call = l->call;

	l->call = NULL;
	call->cancel = NULL;
	/* As in lock_timed_out: the answer may let a closing connection
	 * release its leases, this one too. */
	lease_ref(l);
	rpc_errorf(call, RDMAMEM_ERROR_PERMISSION_DENIED,
		   "region %" PRIu64 " is no longer shared with uid %u for a %s lease; the lease "
		   "request was withdrawn",
		   l->region->id, (unsigned)call->session->cred.uid, lock_mode_to_string(l->mode));
	lease_release(l);
	lease_unref(l);
}

static void lock_call_cancel(struct rpc_call *call)
{
	struct lease *l = call->userdata;

	/* The connection is closing and releases its leases itself. */
	l->call = NULL;
	timeout_disarm(&l->daemon->timeouts, &l->timeout);
	rpc_call_abandon(call);
}

static int method_lock(struct rpc_call *call)
{
	struct {
		uint64_t region;
		const char *mode;
		int64_t timeout_ms;
	} p = { .timeout_ms = -1 };
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{ "mode", JSON_STRING, offsetof(__typeof__(p), mode), JSON_MANDATORY },
		{ "timeout_ms", JSON_INT, offsetof(__typeof__(p), timeout_ms), 0 },
		{},
	};
	enum lock_mode mode = LOCK_SHARED;
	struct region *reg = NULL;
	struct errinfo err = {};
	struct lease *l;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = parse_timeout(call, p.timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p.mode, false, &mode)) < 0)
		return r;
	r = rpc_region_lookup(call, p.region, mode == LOCK_SHARED ? REGION_READ : REGION_WRITE,
			      &reg);
	if (r < 0)
		return r;

	r = lease_new(call->session, reg, mode, &l, &err);
	region_unref(reg);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	l->on_revoked = lock_revoked;
	r = lease_acquire(l, p.timeout_ms == 0, lock_granted);
	if (r == 1)
		return reply_lease(call, l);
	if (r < 0) {
		rpc_errorf(call, RDMAMEM_ERROR_LOCK_TIMEOUT,
			   "region %" PRIu64 " is locked (%s) or has waiters; timeout_ms 0 does "
			   "not wait",
			   reg->id, lock_state_to_string(reg->lock.state));
		lease_release(l);
		return -ETIMEDOUT;
	}
	l->call = call;
	call->userdata = l;
	call->cancel = lock_call_cancel;
	if (p.timeout_ms > 0)
		timeout_arm(&call->daemon->timeouts, &l->timeout, (uint64_t)p.timeout_ms,
			    lock_timed_out);
	return RPC_PENDING;
}

static int method_unlock(struct rpc_call *call)
{
	struct {
		uint64_t lease;
	} p = {};
	static const struct json_field fields[] = {
		{ "lease", JSON_U64, offsetof(__typeof__(p), lease), JSON_MANDATORY },
		{},
	};
	struct errinfo err = {};
	struct lease *l;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	r = lease_lookup(call->daemon, p.lease, call->session, &l, &err);
	if (r < 0)
		return rpc_error_info(call, &err);
	lease_release(l);
	return rpc_reply(call, NULL);
}

const struct rpc_method rpc_data_methods[] = {
	{ "io.rdmamemd.Read", method_read, 0 },
	{ "io.rdmamemd.Write", method_write, 0 },
	{ "io.rdmamemd.Copy", method_copy, 0 },
	{ "io.rdmamemd.Lock", method_lock, 0 },
	{ "io.rdmamemd.Unlock", method_unlock, 0 },
	{},
};
