/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/core/core.h"
#include "daemon/mem/lease.h"
#include "daemon/core/log.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "daemon/mem/region.h"
#include "daemon/core/session.h"
#include "daemon/mem/xfer.h"

static void xfer_acquire_next(struct xfer *x);

static char *host_at(const struct xfer_end *e, uint64_t off)
{
	return (char *)e->region->addr + e->offset + off;
}

static struct region_span span_at(const struct xfer_end *e, uint64_t off)
{
	return (struct region_span){ .region = e->region, .offset = e->offset + off };
}

/* The memory ops of a copy's device side: the destination's when it is not
 * host memory (nor the daemon's buffer), else the source's. */
static const struct region_mem_ops *device_mem(const struct region_span *dst,
					       const struct region_span *src)
{
	return dst->region && !region_is_host(dst->region) ? dst->region->mem : src->region->mem;
}

/*
 * Moves n bytes from src to dst where one of them is memory that is not
 * the daemon's host mapping: that kind's copy does it (through bounce when
 * given). A failure is the client's to hear, in x->err. Pool side.
 */
static int device_copy(struct xfer *x, struct region_span dst, struct region_span src, uint64_t n,
		       void *bounce)
{
	int r = device_mem(&dst, &src)->copy(&dst, &src, n, bounce, &x->err);

	if (r < 0)
		x->result = r;
	return r;
}

/* The start of a Read's reply, up to its base64; returns its length. */
static size_t read_reply_head(uint64_t length, char head[static 80])
{
	return (size_t)snprintf(head, 80, "{\"parameters\":{\"length\":\"%" PRIu64 "\",\"data\":\"",
				length);
}

uint64_t xfer_read_reply_size(uint64_t length)
{
	char head[80];

	/* The head, the base64, "}} and the terminator. */
	return read_reply_head(length, head) + base64_encoded_len(length) + 3 + 1;
}

/*
 * The whole reply of a Read, made where the base64 is (on the pool when
 * large), so that megabytes are neither printed nor copied on the loop:
 * {"parameters":{"length":"N","data":"…"}}. Returns where the base64 goes.
 */
static char *read_reply_alloc(struct xfer *x)
{
	char head[80];
	size_t n = read_reply_head(x->length, head);

	x->out_len = xfer_read_reply_size(x->length) - 1;
	x->out = malloc(x->out_len + 1);
	if (!x->out)
		return NULL;
	memcpy(x->out, head, n);
	memcpy(x->out + x->out_len - 3, "\"}}", 4);
	return x->out + n;
}

/* Encodes n bytes from src into the reply's data, keeping its tail. */
static void read_reply_encode(struct xfer *x, char *data, const void *src)
{
	base64_encode(src, x->length, data);
	/* base64_encode() terminated it where the tail goes. */
	data[base64_encoded_len(x->length)] = '"';
}

static bool xfer_touches_gpu(const struct xfer *x)
{
	return (x->src.region && region_is_gpu(x->src.region)) ||
	       (x->dst.region && region_is_gpu(x->dst.region));
}

/* Moves n bytes at off from the source to the destination; through bounce
 * when given. Pool side. */
static int copy_step(struct xfer *x, uint64_t off, uint64_t n, char *bounce)
{
	if (!xfer_touches_gpu(x)) {
		if (bounce) {
			memcpy(bounce, host_at(&x->src, off), n);
			memcpy(host_at(&x->dst, off), bounce, n);
		} else {
			memcpy(host_at(&x->dst, off), host_at(&x->src, off), n);
		}
		return 0;
	}
	/* Views of one allocation are both of one kind. */
	return device_copy(x, span_at(&x->dst, off), span_at(&x->src, off), n, bounce);
}

/*
 * A copy whose ranges share bytes, with memmove's result, for ends that are
 * different views of the same memory: two mappings of one memfd, or device
 * memory (cuMemcpy does not promise anything for overlapping ranges).
 * memmove() picks its direction by comparing addresses, which says nothing
 * when the addresses belong to different mappings. The direction comes from
 * x->delta instead: front to back when the destination lies before the
 * source, back to front otherwise, in steps that never overlap themselves
 * and never overwrite source bytes not yet read — straight across when the
 * ranges lie at least XFER_ALIAS_STEP apart (a step of that distance), else
 * through a bounce buffer. One thread: parts running side by side would
 * overwrite each other's source.
 */
static void copy_overlapping(struct xfer *x)
{
	uint64_t gap = x->delta < 0 ? -(uint64_t)x->delta : (uint64_t)x->delta;
	_cleanup_free_ char *bounce = NULL;
	uint64_t step = gap, done, n;

	if (gap < XFER_ALIAS_STEP) {
		step = MIN((uint64_t)XFER_ALIAS_STEP, x->length);
		bounce = malloc(step);
		if (!bounce) {
			x->result = -ENOMEM;
			return;
		}
	}
	for (done = 0; done < x->length; done += n) {
		n = MIN(step, x->length - done);
		if (copy_step(x, x->delta < 0 ? done : x->length - done - n, n, bounce) < 0)
			return;
	}
}

/* Moves bytes [begin, end) of the transfer. Runs on a pool thread for large
 * transfers and for every GPU transfer: touches only the mappings (kept
 * alive by references) and x's own buffers. */
static void xfer_execute(struct xfer *x, uint64_t begin, uint64_t end)
{
	_cleanup_free_ char *staging = NULL;
	char *data;
	int r;

	switch (x->kind) {
	case XFER_READ:
		data = read_reply_alloc(x);
		if (!data) {
			x->result = -ENOMEM;
			return;
		}
		if (region_is_gpu(x->src.region)) {
			staging = malloc(x->length ?: 1);
			if (!staging) {
				x->result = -ENOMEM;
				return;
			}
			r = device_copy(x, (struct region_span){ .buf = staging },
					span_at(&x->src, 0), x->length, NULL);
			if (r < 0)
				return;
			read_reply_encode(x, data, staging);
		} else {
			read_reply_encode(x, data, host_at(&x->src, 0));
		}
		break;
	case XFER_WRITE:
		/* Check everything before the first byte lands. */
		if (base64_decoded_len(x->text, x->text_len) != (ssize_t)x->length) {
			x->result = -EINVAL;
			return;
		}
		if (region_is_gpu(x->dst.region)) {
			staging = malloc(x->length ?: 1);
			if (!staging) {
				x->result = -ENOMEM;
				return;
			}
			base64_decode(x->text, x->text_len, staging);
			r = device_copy(x, span_at(&x->dst, 0),
					(struct region_span){ .buf = staging }, x->length, NULL);
			if (r < 0)
				return;
		} else {
			base64_decode(x->text, x->text_len, host_at(&x->dst, 0));
		}
		break;
	case XFER_COPY:
		/* Within one host mapping memmove() gets the direction right;
		 * otherwise overlapping ranges need copy_overlapping() (and are
		 * a single part). */
		if (x->overlap && (x->src.region != x->dst.region || xfer_touches_gpu(x)))
			copy_overlapping(x);
		else if (xfer_touches_gpu(x))
			/* Host memory on the other side is page-locked once,
			 * so this and later copies run at DMA speed. */
			device_copy(x, span_at(&x->dst, begin), span_at(&x->src, begin),
				    end - begin, NULL);
		else
			memmove(host_at(&x->dst, begin), host_at(&x->src, begin), end - begin);
		return;
	}
	x->result = 0;
}

static struct region_registry *xfer_registry(const struct xfer *x)
{
	return (x->kind == XFER_WRITE ? x->dst.region : x->src.region)->registry;
}

static void xfer_release_locks(struct xfer *x)
{
	/* Our own requests only; leases stay with their holders. */
	for (unsigned i = x->n_locks; i-- > 0;) {
		struct lock_request *req = &x->locks[i].req;

		if (req->held)
			lock_release(&x->locks[i].region->lock, req);
		else if (req->waiting)
			lock_cancel(&x->locks[i].region->lock, req);
	}
}

static void xfer_complete(struct xfer *x)
{
	if (x->started && !x->on_pool && x->clock_ended) {
		log_debug("A GPU copy of %" PRIu64 " bytes started on the loop in %.1f us "
			  "landed %.1f us later (%u looks); %.1f us to here",
			  x->length, (double)(x->clock_queued - x->clock_begun) / 1e3,
			  (double)(x->clock_ended - x->clock_queued) / 1e3, x->n_looks,
			  (double)(uv_hrtime() - x->clock_ended) / 1e3);
	} else if (x->on_pool) {
		uint64_t now = uv_hrtime();

		log_debug("A %s transfer of %" PRIu64
			  " bytes took %.1f us on the pool (%u part%s%s): "
			  "%.1f us waiting for a thread, %.1f us copying, %.1f us back to the loop",
			  xfer_touches_gpu(x) ? "GPU" : "host", x->length,
			  (double)(now - x->clock_queued) / 1e3, x->n_parts,
			  x->n_parts == 1 ? "" : "s", x->started ? ", started on the loop" : "",
			  (double)(x->clock_started - x->clock_queued) / 1e3,
			  (double)(x->clock_ended - x->clock_started) / 1e3,
			  (double)(now - x->clock_ended) / 1e3);
	}
	timeout_disarm(&xfer_registry(x)->timeouts, &x->timeout);
	xfer_release_locks(x);
	/* Every failure but a cancel is told to the client. */
	if (x->result == -EINVAL && !x->err.name)
		errinfo_invalid_param(&x->err, "data", -EINVAL,
				      "parameter 'data' is not valid base64 (RFC 4648, padded, no "
				      "line breaks)");
	else if (x->result < 0 && x->result != -ECANCELED && !x->err.name)
		errinfo_set(&x->err, RDMAMEM_ERROR_INTERNAL, x->result, "transfer failed: %s",
			    strerror(-x->result));
	x->done(x->userdata, x, x->result, &x->err);
}

/* The memory ops of a Copy's device side (x started on the loop). */
static const struct region_mem_ops *copy_device_mem(const struct xfer *x)
{
	struct region_span dst = span_at(&x->dst, 0), src = span_at(&x->src, 0);

	return device_mem(&dst, &src);
}

/* Waits for the bytes of a copy started on the loop: on the pool, or on
 * the loop once it saw them land (or when no pool thread could be asked). */
static void xfer_finish_started(struct xfer *x)
{
	int r = copy_device_mem(x)->copy_finish(TAKE_PTR(x->pending), &x->err);

	if (r < 0)
		x->result = r;
}

static void on_work(uv_work_t *w)
{
	struct xfer_part *part = w->data;
	uint64_t started = uv_hrtime();

	if (part->x->started)
		xfer_finish_started(part->x);
	else
		xfer_execute(part->x, part->begin, part->end);
	if (part == &part->x->parts[0]) {
		part->x->clock_started = started;
		part->x->clock_ended = uv_hrtime();
	}
}

static void on_work_done(uv_work_t *w, int status)
{
	struct xfer *x = ((struct xfer_part *)w->data)->x;

	(void)status;
	if (--x->parts_left == 0)
		xfer_complete(x);
}

/*
 * Whether a copy's two ranges share bytes (then it must stay in one piece,
 * in the right direction), and how far apart they lie. Compared where the
 * bytes live, not by address: two regions over one memfd map the same pages
 * at unrelated addresses. Ranges at distance 0 are the same bytes: copying
 * them over themselves changes nothing, in any order.
 */
static void copy_find_overlap(struct xfer *x)
{
	int64_t base;

	x->overlap = false;
	if (x->kind != XFER_COPY || !region_same_memory(x->src.region, x->dst.region, &base))
		return;
	x->delta = base + (int64_t)(x->dst.offset - x->src.offset);
	x->overlap = x->delta != 0 &&
		     (x->delta < 0 ? -(uint64_t)x->delta : (uint64_t)x->delta) < x->length;
}

static unsigned pool_parts(const struct xfer *x)
{
	static long cpus;
	unsigned n;

	if (x->kind != XFER_COPY || x->length < XFER_SPLIT_MIN || x->overlap ||
	    region_is_gpu(x->src.region) || region_is_gpu(x->dst.region))
		return 1;
	if (!cpus)
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
	n = (unsigned)MIN((long)XFER_PARTS_MAX, MAX(cpus, 1L));
	return (unsigned)MIN((uint64_t)n, x->length / (XFER_SPLIT_MIN / 2));
}

/* How long the loop may spend on one transfer's bytes (xfer.h). */
static uint64_t xfer_loop_usec(const struct xfer *x)
{
	return xfer_registry(x)->core->cfg.loop_work_usec;
}

uint64_t xfer_inline_max(const struct xfer *x)
{
	uint64_t rate = XFER_INLINE_RATE_MIN;

	if (x->kind == XFER_COPY)
		rate = MAX(rate, membw_min(&xfer_registry(x)->membw) / 1000000U);
	return rate * xfer_loop_usec(x);
}

/*
 * The memory ops of a GPU Copy the loop may copy itself or start, with the
 * spans of its ends; NULL when nothing of x may run on the loop: no GPU on
 * either end, not a Copy, overlapping views, or loop-work-usec 0.
 */
static const struct region_mem_ops *loop_device_copy(const struct xfer *x, struct region_span *dst,
						     struct region_span *src)
{
	if (xfer_loop_usec(x) == 0 || !xfer_touches_gpu(x) || x->kind != XFER_COPY || x->overlap)
		return NULL;
	*dst = span_at(&x->dst, 0);
	*src = span_at(&x->src, 0);
	return device_mem(dst, src);
}

/*
 * Whether x runs on the loop: host bytes that move within loop-work-usec
 * at the rate measured for them; a GPU Copy that the kind expects to take
 * no longer, which it says only when no other driver work of the daemon
 * runs (gpu_copy_usec()). A pool round trip costs about as much as such a
 * copy: 13 us to wake a thread and 8 us to wake the loop again at the
 * median, 29 and 10 us on average, beside 8 us for a 4 KiB copy and 31 us
 * for 1 MiB (H100, 16 cores, a VM). Overlapping views go to the pool.
 */
static bool xfer_runs_inline(const struct xfer *x)
{
	struct region_span dst, src;
	const struct region_mem_ops *mem;

	/* 0: nothing on the loop, however short it is expected to be. */
	if (xfer_loop_usec(x) == 0)
		return false;
	if (!xfer_touches_gpu(x))
		return x->length <= xfer_inline_max(x);
	mem = loop_device_copy(x, &dst, &src);
	return mem && mem->copy_usec && mem->copy_usec(&dst, &src, x->length) <= xfer_loop_usec(x);
}

/*
 * A GPU Copy too long for the loop: started from it where the kind can
 * queue it without waiting (gpu_copy_start()), so that the pool thread's
 * wake-up (13 us at the median, 29 on average, above) passes while the
 * bytes move instead of before. 1 when started, 0 when the pool copies it
 * whole, or a negative errno (x->err says why).
 */
static int xfer_start_on_loop(struct xfer *x)
{
	struct region_span dst, src;
	const struct region_mem_ops *mem = loop_device_copy(x, &dst, &src);
	int r;

	if (!mem || !mem->copy_start)
		return 0;
	r = mem->copy_start(&dst, &src, x->length, &x->pending, &x->err);
	x->started = r > 0;
	return r;
}

/*
 * Hands x's bytes to the pool in n parts (page-aligned slices), or, for a
 * copy started on the loop, the wait for them in one. Never block the loop
 * with bulk work.
 */
static void xfer_queue_parts(struct xfer *x, unsigned n)
{
	struct region_registry *registry = xfer_registry(x);

	x->on_pool = true;
	x->result = 0;
	for (unsigned i = 0; i < n; i++) {
		x->parts[i].begin = i == 0 ? 0 : (x->length / n * i) & ~(uint64_t)4095;
		x->parts[i].end = i + 1 == n ? x->length :
					       (x->length / n * (i + 1)) & ~(uint64_t)4095;
		x->parts[i].x = x;
		x->parts[i].work.data = &x->parts[i];
	}
	x->n_parts = x->parts_left = n;
	x->clock_queued = uv_hrtime();
	for (unsigned i = 0; i < n; i++) {
		uv_loop_t *loop = registry->core->loop;

		if (uv_queue_work(loop, &x->parts[i].work, on_work, on_work_done) == 0)
			continue;
		/* Only the first can fail in practice (no pool at all). A
		 * started copy is waited for here then, once. */
		x->result = -ENOMEM;
		if (x->started)
			xfer_finish_started(x);
		x->parts_left -= n - i;
		if (x->parts_left == 0) {
			x->on_pool = false;
			xfer_complete(x);
		}
		return;
	}
}

/*
 * A look at a copy started on the loop, each turn while its bytes move:
 * it is answered on the turn they land, with no pool thread to wake and
 * no wake-up of the loop after it (12.5 us at the median for a 16 MiB
 * copy on the H100, R12). The loop spends a CPU looking meanwhile, as the
 * pool thread did in the driver's spinning wait. Where other driver work
 * runs beside it, a look could wait for a lock that work holds: the pool
 * waits for the bytes then.
 */
static void xfer_look(struct loop_poll_item *it)
{
	struct xfer *x = container_of(it, struct xfer, watch);
	int r = copy_device_mem(x)->copy_poll(x->pending);

	x->n_looks++;
	if (r == 0)
		return;
	loop_poll_del(it);
	if (r == -EBUSY) {
		xfer_queue_parts(x, 1);
		return;
	}
	x->clock_ended = uv_hrtime();
	xfer_finish_started(x);
	xfer_complete(x);
}

/* A copy just started on the loop: watched there when the kind can tell
 * without waiting whether it landed (0), else not (a negative errno). */
static int xfer_watch_started(struct xfer *x)
{
	if (!copy_device_mem(x)->copy_poll)
		return -EOPNOTSUPP;
	return loop_poll_add(&xfer_registry(x)->started, &x->watch, xfer_look);
}

static void xfer_run(struct xfer *x)
{
	int r;

	timeout_disarm(&xfer_registry(x)->timeouts, &x->timeout);
	copy_find_overlap(x);
	if (xfer_runs_inline(x)) {
		xfer_execute(x, 0, x->length);
		xfer_complete(x);
		return;
	}
	x->clock_begun = uv_hrtime();
	r = xfer_start_on_loop(x);
	if (r < 0) {
		x->result = r;
		xfer_complete(x);
		return;
	}
	x->clock_queued = uv_hrtime();
	if (x->started && xfer_watch_started(x) == 0)
		return;
	xfer_queue_parts(x, x->started ? 1 : pool_parts(x));
}

static void on_lock_granted(struct lock_request *req)
{
	struct xfer *x = req->userdata;

	x->n_granted++;
	xfer_acquire_next(x);
}

static void xfer_fail_locks(struct xfer *x, int err)
{
	x->result = err;
	if (err == -ETIMEDOUT)
		errinfo_set(&x->err, RDMAMEM_ERROR_LOCK_TIMEOUT, err,
			    "region %" PRIu64 " stayed locked (%s, %u waiting) past the timeout",
			    x->locks[x->n_granted].region->id,
			    lock_state_to_string(x->locks[x->n_granted].region->lock.state),
			    x->locks[x->n_granted].region->lock.n_waiters);
	xfer_complete(x);
}

/* Rights are checked when the call comes; a transfer that waited for locks
 * meanwhile is checked again before its bytes move (Unshare). */
static int xfer_check_rights(struct xfer *x)
{
	const struct xfer_end *ends[2] = {
		x->kind != XFER_WRITE ? &x->src : NULL,
		x->kind != XFER_READ ? &x->dst : NULL,
	};
	const struct session *c = x->caller;

	for (size_t i = 0; i < ELEMENTSOF(ends); i++)
		if (ends[i] &&
		    !region_allows(ends[i]->region, c, ends[i]->write ? REGION_WRITE : REGION_READ))
			return errinfo_set(&x->err, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "region %" PRIu64 " is no longer shared with uid %u "
					   "for this; nothing was moved",
					   ends[i]->region->id, (unsigned)c->cred.uid);
	return 0;
}

static void xfer_acquire_next(struct xfer *x)
{
	while (x->n_granted < x->n_locks) {
		unsigned i = x->n_granted;
		int r = lock_acquire(&x->locks[i].region->lock, &x->locks[i].req, x->locks[i].mode,
				     x->try_only, on_lock_granted, x);

		if (r == 0)
			return;
		if (r < 0) {
			xfer_fail_locks(x, -ETIMEDOUT);
			return;
		}
		x->n_granted++;
	}
	x->result = xfer_check_rights(x);
	if (x->result < 0) {
		xfer_complete(x);
		return;
	}
	xfer_run(x);
}

static void on_timeout(struct timeout *t)
{
	struct xfer *x = container_of(t, struct xfer, timeout);

	xfer_fail_locks(x, -ETIMEDOUT);
}

/* The lease that covers end e (its own, or the other end's on the same region). */
static struct lease *covering_lease(const struct xfer_end *e, const struct xfer_end *other)
{
	if (e->lease)
		return e->lease;
	if (other && other->region == e->region)
		return other->lease;
	return NULL;
}

static int check_lease(const struct xfer_end *e, const struct lease *l, struct errinfo *err)
{
	if (l->region != e->region)
		return errinfo_set(err, RDMAMEM_ERROR_LEASE_CONFLICT, -EINVAL,
				   "lease %" PRIu64 " is on region %" PRIu64
				   ", not on region %" PRIu64,
				   l->id, l->region->id, e->region->id);
	if (!lease_is_held(l))
		return errinfo_set(err, RDMAMEM_ERROR_LEASE_CONFLICT, -EINVAL,
				   "lease %" PRIu64 " is still waiting for its lock", l->id);
	if (e->write && l->mode == LOCK_SHARED)
		return errinfo_set(err, RDMAMEM_ERROR_LEASE_CONFLICT, -EINVAL,
				   "lease %" PRIu64 " is shared, which allows reads only; take a "
				   "disjoint or exclusive lease to write",
				   l->id);
	return 0;
}

static void add_lock(struct xfer *x, struct region *r, enum lock_mode mode)
{
	x->locks[x->n_locks].region = r;
	x->locks[x->n_locks].mode = mode;
	x->n_locks++;
}

int xfer_start(struct xfer *x)
{
	int64_t timeout_ms = x->timeout_ms;
	struct xfer_end *ends[2];
	struct lease *cover[2] = {};
	unsigned n = 0;
	int r;

	if (x->kind != XFER_WRITE)
		ends[n++] = &x->src;
	if (x->kind != XFER_READ)
		ends[n++] = &x->dst;

	for (unsigned i = 0; i < n; i++) {
		cover[i] = covering_lease(ends[i], n == 2 ? ends[1 - i] : NULL);
		if (ends[i]->lease) {
			r = check_lease(ends[i], ends[i]->lease, &x->err);
			if (r < 0)
				return r;
		}
		if (cover[i] && cover[i] != ends[i]->lease) {
			r = check_lease(ends[i], cover[i], &x->err);
			if (r < 0)
				return r;
		}
	}

	if (n == 2 && x->src.region == x->dst.region) {
		if (!cover[0] && !cover[1])
			/* Reading and writing one region: alone. */
			add_lock(x, x->src.region, LOCK_EXCLUSIVE);
	} else {
		for (unsigned i = 0; i < n; i++)
			if (!cover[i])
				add_lock(x, ends[i]->region,
					 ends[i]->write ? ends[i]->mode : LOCK_SHARED);
		if (x->n_locks == 2 && x->locks[0].region->id > x->locks[1].region->id) {
			__typeof__(x->locks[0]) t = x->locks[0];

			x->locks[0] = x->locks[1];
			x->locks[1] = t;
		}
	}

	/* timeout 0: take the locks only if free now. */
	x->try_only = timeout_ms == 0;
	if (timeout_ms > 0 && x->n_locks > 0)
		timeout_arm(&xfer_registry(x)->timeouts, &x->timeout, (uint64_t)timeout_ms,
			    on_timeout);
	xfer_acquire_next(x);
	return 0;
}

void xfer_cancel(struct xfer *x)
{
	if (x->on_pool || loop_poll_watched(&x->watch))
		return;
	x->result = -ECANCELED;
	xfer_complete(x);
}

struct xfer *xfer_new(struct session *caller, enum xfer_kind kind, int64_t timeout_ms,
		      xfer_done_fn done, void *userdata)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->caller = session_ref(caller);
	x->kind = kind;
	x->timeout_ms = timeout_ms;
	x->done = done;
	x->userdata = userdata;
	return x;
}

void xfer_free(struct xfer *x)
{
	if (!x)
		return;
	session_unref(x->caller);
	region_unref(x->src.region);
	region_unref(x->dst.region);
	lease_unref(x->src.lease);
	lease_unref(x->dst.lease);
	free(x->out);
	errinfo_done(&x->err);
	free(x);
}
