/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd Read, Write, Copy, Lock and Unlock. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/mem/lease.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "daemon/mem/region.h"
#include "daemon/rpc/rpc.h"
#include "daemon/mem/xfer.h"

/* A region end of a transfer as the client names it. */
struct end_params {
	uint64_t region;
	uint64_t offset;
	uint64_t lease;
	bool has_lease; /* lease was sent: "0" names no lease, it does not mean none */
};

/* Copy's ends, decoded into struct end_params by the dispatcher. */
/* clang-format off */
static const struct varlink_symbol rpc_type_End = VARLINK_DEFINE_TYPE(
	End, "One end of a Copy.",
	VARLINK_INPUT(struct end_params, region, VARLINK_U64, 0),
	VARLINK_INPUT(struct end_params, offset, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_INPUT_HAS(struct end_params, lease, lease, VARLINK_U64, VARLINK_NULLABLE,
			  has_lease));
/* clang-format on */

static int parse_mode(struct rpc_call *call, const char *param, const char *s, bool write,
		      enum lock_mode *ret)
{
	int m;

	if (!s)
		return 0;
	m = lock_mode_from_string(s);
	if (m < 0 || (write && m == LOCK_SHARED))
		return rpc_invalid_param(call, param, "parameter '%s' must be %s, not '%.32s'",
					 param,
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
	struct region_registry *regions = call->ctx->regions;
	struct errinfo err = {};
	struct lease *l = NULL;
	int r;

	r = region_lookup(regions, p->region, call->session, write ? REGION_WRITE : REGION_READ,
			  &e->region, &err);
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
		r = lease_lookup(regions, p->lease, call->session, &l, &err);
		if (r < 0)
			return rpc_error_info(call, &err);
		e->lease = lease_ref(l);
	}
	return 0;
}

/* The client went away: a transfer not started or waiting for locks ends
 * now, one moving bytes when they are moved (it reads the call's text). */
static void xfer_call_cancel(void *userdata)
{
	xfer_cancel(userdata);
}

static void xfer_finished(void *userdata, struct xfer *x, int result, struct errinfo *e)
{
	struct rpc_deferred *d = userdata;
	struct stats *st = &d->call->ctx->core->stats;

	if (result == -ECANCELED) {
		rpc_deferred_drop(d);
		goto out;
	}
	if (result < 0) {
		rpc_deferred_error(d, e);
		goto out;
	}

	if (x->kind == XFER_READ) {
		/* The reply was made with the data. */
		st->bytes_read += x->length;
		rpc_deferred_reply_text(d, TAKE_PTR(x->out), x->out_len);
		goto out;
	}
	if (x->kind == XFER_WRITE)
		st->bytes_written += x->length;
	else
		st->bytes_copied += x->length;
	rpc_deferred_reply_u64(d, "length", x->length);
out:
	xfer_free(x);
}

/*
 * Starts x, whose call is deferred; answers when x cannot start. Touches
 * neither once x started: a transfer may finish at once, and its answer
 * ends the handle (and frees a call whose handler returned already).
 */
static void start_xfer(void *userdata)
{
	struct xfer *x = userdata;

	if (xfer_start(x) < 0) {
		rpc_deferred_error(x->userdata, &x->err);
		xfer_free(x);
	}
}

/* A new transfer for call, answered through its handle once deferred. */
static struct xfer *new_xfer(struct rpc_call *call, enum xfer_kind kind, int64_t timeout_ms)
{
	return xfer_new(call->session, kind, timeout_ms, xfer_finished, NULL);
}

/* x is filled in and its ends resolved: the call waits for it. */
static struct rpc_deferred *defer_xfer(struct rpc_call *call, struct xfer *x)
{
	x->userdata = rpc_defer(call, xfer_call_cancel, x);
	return x->userdata;
}

struct read_params {
	struct end_params end;
	uint64_t length;
	int64_t timeout_ms;
};

struct write_params {
	struct end_params end;
	struct rpc_string data;
	const char *mode;
	int64_t timeout_ms;
};

struct copy_params {
	struct end_params from, to;
	uint64_t length;
	const char *mode;
	int64_t timeout_ms;
};

struct lock_params {
	uint64_t region;
	const char *mode;
	int64_t timeout_ms;
};

/* timeout_ms is -1 (wait) unless sent. */
static const struct read_params read_params_init = { .timeout_ms = -1 };
static const struct write_params write_params_init = { .timeout_ms = -1 };
static const struct copy_params copy_params_init = { .timeout_ms = -1 };
static const struct lock_params lock_params_init = { .timeout_ms = -1 };

/* clang-format off */
RPC_DEFINE_METHOD(
	Read,
	"length bytes at offset (default 0), base64 (RFC 4648), at most the inline\n"
	"limit (4 MiB by default). timeout_ms bounds the wait for the lock: -1\n"
	"(default) waits, 0 only takes a free lock.",
	VARLINK_INPUT_AT(struct read_params, region, end.region, VARLINK_U64, 0),
	VARLINK_INPUT_AT(struct read_params, offset, end.offset, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_INPUT(struct read_params, length, VARLINK_U64, 0),
	VARLINK_INPUT_HAS(struct read_params, lease, end.lease, VARLINK_U64, VARLINK_NULLABLE,
			  end.has_lease),
	VARLINK_INPUT(struct read_params, timeout_ms, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_OUTPUT(length, VARLINK_U64, 0),
	VARLINK_OUTPUT(data, VARLINK_STRING, 0));
/* clang-format on */

static int method_read(struct rpc_call *call, void *params)
{
	const struct read_params *p = params;
	uint64_t limit = call->ctx->core->cfg.read_inline_max;
	struct xfer *x;
	int r;

	r = parse_timeout(call, p->timeout_ms);
	if (r < 0)
		return r;
	if (p->length > limit)
		return rpc_errorf(call, RDMAMEM_ERROR_TRANSFER_TOO_LARGE,
				  "Read returns at most %" PRIu64 " bytes inline, %" PRIu64
				  " were asked; read in pieces, or Copy into a region of your own "
				  "and use its mapping",
				  limit, p->length);

	x = new_xfer(call, XFER_READ, p->timeout_ms);
	if (!x)
		return -ENOMEM;
	x->length = p->length;
	r = resolve_end(call, &p->end, p->length, false, LOCK_SHARED, "read", &x->src);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	/* Room for the reply first, while no lock is held: its base64 is made
	 * before anything of it can leave. Locks are taken, and rights checked
	 * again, once it is there. */
	if (rpc_deferred_reserve(defer_xfer(call, x), xfer_read_reply_size(p->length), start_xfer))
		start_xfer(x);
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(
	Write,
	"Writes the base64 data at offset. mode \"exclusive\" (default) or\n"
	"\"disjoint\" (the caller promises its range does not overlap other disjoint\n"
	"writers').",
	VARLINK_INPUT_AT(struct write_params, region, end.region, VARLINK_U64, 0),
	VARLINK_INPUT_AT(struct write_params, offset, end.offset, VARLINK_U64, VARLINK_NULLABLE),
	RPC_INPUT_MEASURED(struct write_params, data, 0),
	VARLINK_INPUT(struct write_params, mode, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_INPUT_HAS(struct write_params, lease, end.lease, VARLINK_U64, VARLINK_NULLABLE,
			  end.has_lease),
	VARLINK_INPUT(struct write_params, timeout_ms, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_OUTPUT(length, VARLINK_U64, 0));
/* clang-format on */

static int method_write(struct rpc_call *call, void *params)
{
	const struct write_params *p = params;
	enum lock_mode mode = LOCK_EXCLUSIVE;
	const char *data = p->data.s;
	size_t len = p->data.len;
	struct xfer *x;
	int r;

	if ((r = parse_timeout(call, p->timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p->mode, true, &mode)) < 0)
		return r;
	/* The length is known from the text; the full check runs where the
	 * bytes are decoded, before any lands. */
	if (len % 4)
		return rpc_invalid_param(call, "data",
					 "parameter 'data' is not valid base64: its "
					 "length is not a multiple of 4");

	x = new_xfer(call, XFER_WRITE, p->timeout_ms);
	if (!x)
		return -ENOMEM;
	x->text = data;
	x->text_len = len;
	x->length = len / 4 * 3 - (len && data[len - 1] == '=') - (len > 1 && data[len - 2] == '=');
	r = resolve_end(call, &p->end, x->length, true, mode, "write", &x->dst);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	defer_xfer(call, x);
	start_xfer(x);
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(Copy,
		  "Copies length bytes between two regions (or within one) inside the\n"
		  "daemon: no payload on the socket. mode applies to the destination:\n"
		  "\"exclusive\" (default) or \"disjoint\"; an End's offset defaults to 0.",
		  VARLINK_INPUT_BY_TYPE(struct copy_params, from, from, rpc_type_End, 0),
		  VARLINK_INPUT_BY_TYPE(struct copy_params, to, to, rpc_type_End, 0),
		  VARLINK_INPUT(struct copy_params, length, VARLINK_U64, 0),
		  VARLINK_INPUT(struct copy_params, mode, VARLINK_STRING, VARLINK_NULLABLE),
		  VARLINK_INPUT(struct copy_params, timeout_ms, VARLINK_INT, VARLINK_NULLABLE),
		  VARLINK_OUTPUT(length, VARLINK_U64, 0));
/* clang-format on */

static int method_copy(struct rpc_call *call, void *params)
{
	const struct copy_params *p = params;
	enum lock_mode mode = LOCK_EXCLUSIVE;
	struct xfer *x;
	int r;

	if ((r = parse_timeout(call, p->timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p->mode, true, &mode)) < 0)
		return r;

	x = new_xfer(call, XFER_COPY, p->timeout_ms);
	if (!x)
		return -ENOMEM;
	x->length = p->length;
	r = resolve_end(call, &p->from, p->length, false, LOCK_SHARED, "source", &x->src);
	if (r >= 0)
		r = resolve_end(call, &p->to, p->length, true, mode, "destination", &x->dst);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	defer_xfer(call, x);
	start_xfer(x);
	return 0;
}

/* Lock's answer, {lease, mode}: flat, printed without a tree. */
#define LEASE_FIELDS(l)                                                        \
	{                                                                      \
		{ .name = "lease", .u64 = (l)->id },                           \
		{                                                              \
			.name = "mode", .text = lock_mode_to_string((l)->mode) \
		}                                                              \
	}

static void lock_done(void *userdata, struct lease *l, int result, struct errinfo *e)
{
	struct rpc_deferred *d = userdata;
	const struct rpc_field f[] = LEASE_FIELDS(l);

	if (result < 0) {
		rpc_deferred_error(d, e);
		return;
	}
	rpc_deferred_reply_flat(d, f, ELEMENTSOF(f));
}

/* The client went away: its session releases the lease. */
static void lock_call_cancel(void *userdata)
{
	struct lease *l = userdata;

	lease_wait_cancel(l);
	rpc_deferred_drop(l->userdata);
}

/* clang-format off */
RPC_DEFINE_METHOD(Lock,
		  "Takes a lease on the region's access lock: mode \"shared\", \"disjoint\" or\n"
		  "\"exclusive\". The answer comes when the lock is granted (or timeout_ms\n"
		  "passed: LockTimeout). The lease lasts until Unlock or disconnect.",
		  VARLINK_INPUT(struct lock_params, region, VARLINK_U64, 0),
		  VARLINK_INPUT(struct lock_params, mode, VARLINK_STRING, 0),
		  VARLINK_INPUT(struct lock_params, timeout_ms, VARLINK_INT, VARLINK_NULLABLE),
		  VARLINK_OUTPUT(lease, VARLINK_U64, 0),
		  VARLINK_OUTPUT(mode, VARLINK_STRING, 0));
/* clang-format on */

static int method_lock(struct rpc_call *call, void *params)
{
	const struct lock_params *p = params;
	enum lock_mode mode = LOCK_SHARED;
	struct region *reg = NULL;
	struct errinfo err = {};
	struct lease *l;
	int r;

	if ((r = parse_timeout(call, p->timeout_ms)) < 0 ||
	    (r = parse_mode(call, "mode", p->mode, false, &mode)) < 0)
		return r;
	r = rpc_region_lookup(call, p->region, mode == LOCK_SHARED ? REGION_READ : REGION_WRITE,
			      &reg);
	if (r < 0)
		return r;

	r = lease_new(call->session, reg, mode, &l, &err);
	region_unref(reg);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	r = lease_acquire(l, p->timeout_ms, lock_done, NULL);
	if (r == 1) {
		const struct rpc_field f[] = LEASE_FIELDS(l);

		return rpc_reply_flat(call, f, ELEMENTSOF(f));
	}
	if (r < 0) {
		rpc_errorf(call, RDMAMEM_ERROR_LOCK_TIMEOUT,
			   "region %" PRIu64 " is locked (%s) or has waiters; timeout_ms 0 does "
			   "not wait",
			   reg->id, lock_state_to_string(reg->lock.state));
		lease_release(l);
		return -ETIMEDOUT;
	}
	/* Queued: told how it ends through lock_done. */
	l->userdata = rpc_defer(call, lock_call_cancel, l);
	return 0;
}

struct unlock_params {
	uint64_t lease;
};

/* clang-format off */
RPC_DEFINE_METHOD(Unlock, NULL, VARLINK_INPUT(struct unlock_params, lease, VARLINK_U64, 0));
/* clang-format on */

static int method_unlock(struct rpc_call *call, void *params)
{
	const struct unlock_params *p = params;
	struct errinfo err = {};
	struct lease *l;
	int r;

	r = lease_lookup(call->ctx->regions, p->lease, call->session, &l, &err);
	if (r < 0)
		return rpc_error_info(call, &err);
	lease_release(l);
	return rpc_reply(call, NULL);
}

const struct rpc_method rpc_data_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, Read, method_read, RPC_PARAMS(struct read_params),
		   .params_init = &read_params_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, Write, method_write, RPC_PARAMS(struct write_params),
		   .params_init = &write_params_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, Copy, method_copy, RPC_PARAMS(struct copy_params),
		   .params_init = &copy_params_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, Lock, method_lock, RPC_PARAMS(struct lock_params),
		   .params_init = &lock_params_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, Unlock, method_unlock, RPC_PARAMS(struct unlock_params)),
	{},
};
