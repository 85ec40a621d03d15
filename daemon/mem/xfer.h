/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfers: Read, Write and Copy on regions. A transfer takes the access
 * locks it needs (or runs under the caller's leases), moves the bytes — on
 * the loop when that is short (loop-work-usec), on the libuv thread pool
 * when longer, or, for a GPU copy the driver can take without waiting,
 * started on the loop, which looks each turn for its end — gives the locks
 * back and reports through its completion callback (a Read with the whole
 * text of its reply, made where the bytes were read). It answers no call.
 * Locks of two regions are taken in region id order, so transfers cannot
 * deadlock each other.
 *
 * On the pool a transfer touches only x's own buffers and its regions'
 * memory: host mappings with memcpy(), anything else through the kind's
 * region_mem_ops.copy. It knows no driver; the references it holds keep
 * the memory until it reports back on the loop.
 */
#ifndef RDMAMEMD_XFER_H
#define RDMAMEMD_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/core/errinfo.h"
#include "daemon/mem/lock.h"
#include "util/loop_poll.h"
#include "util/timeout.h"

struct lease;
struct region;
struct session;

/*
 * The loop moves a transfer's bytes itself when that takes at most the
 * configuration's loop_work_usec ([daemon] loop-work-usec, 40 by default),
 * and hands longer ones to the pool, whose round trip (a worker woken, its
 * completion handed back to the loop) costs about as much: on the H100
 * host, a VM, 13 + 8 us at the median and 29 + 10 us on average after a
 * 1 MiB GPU copy, and more after a longer sleep. A copy that takes less than
 * that is done sooner on the loop, and another client waits at most that
 * long behind it. The bound is time, not bytes, so that "never block
 * the loop" holds on slow and fast machines alike: bytes = rate x time, the
 * rate being, for a Copy between host regions, the host memory bandwidth
 * measured at start (membw.h; the slowest node's), and otherwise, and until
 * that is measured, XFER_INLINE_RATE_MIN: a constant at or below what base64
 * (Read, Write) and memcpy run at on the CPUs the daemon is built for (on the
 * build machine, a shared 2-core VM: encoding 2.9 GB/s, checking and
 * decoding 1.2 GB/s, memcpy 12 GB/s and more).
 */
#define XFER_INLINE_RATE_MIN 1000U /* bytes per microsecond: 1 GB/s */
/*
 * Copies at least this large are split over several pool threads, in parts
 * of at least half of it. A pool thread copies bytes that are in no cache
 * of its CPU, through a TLB that knows none of their pages, so one thread
 * is slow: on the GPU machine (16 cores) a 1 MiB Copy on one thread spent
 * 97 us copying, where memcpy() of the same bytes back to back takes 45; in
 * four parts the whole call ran at 0.75 of that memcpy, against 0.23-0.28
 * on one thread (8 MiB was the threshold then). At 16 MiB one thread's
 * memcpy does not saturate memory bandwidth either.
 */
#define XFER_SPLIT_MIN (256U * 1024U)
#define XFER_PARTS_MAX 4U
/* A copy between two views of the same bytes whose ranges overlap moves
 * them in steps of at least this much, through a buffer of this size when
 * the ranges lie closer together than that. */
#define XFER_ALIAS_STEP (1U << 20)

enum xfer_kind {
	XFER_READ,  /* region → base64 text */
	XFER_WRITE, /* base64 text → region */
	XFER_COPY,  /* region → region */
};

struct xfer_end {
	struct region *region; /* a reference */
	uint64_t offset;
	struct lease *lease; /* a reference, or NULL */
	bool write;
	enum lock_mode mode; /* for writes without a lease */
};

struct xfer;
/*
 * How x ended, on the loop: result 0, or a negative errno with e saying why
 * for the client (the callee may take e's params), or -ECANCELED after
 * xfer_cancel() (e empty). The callee frees x with xfer_free().
 */
typedef void (*xfer_done_fn)(void *userdata, struct xfer *x, int result, struct errinfo *e);

struct xfer {
	struct session *caller; /* a reference: whose rights it runs with */
	enum xfer_kind kind;
	struct xfer_end src, dst; /* READ uses src, WRITE dst, COPY both */
	uint64_t length;
	int64_t timeout_ms; /* for the locks: < 0 without limit, 0 only if free now */
	const char *text;   /* WRITE: base64 input, the caller's, kept until done */
	size_t text_len;
	char *out;      /* READ: the whole reply, {"parameters":{…}} */
	size_t out_len; /* without its NUL */
	xfer_done_fn done;
	void *userdata;

	/* The locks this transfer takes itself, in region id order. */
	struct {
		struct region *region;
		enum lock_mode mode;
		struct lock_request req;
	} locks[2];
	unsigned n_locks, n_granted;
	struct timeout timeout;
	bool try_only; /* timeout 0: never queue */

	struct xfer_part {
		uv_work_t work;
		struct xfer *x;
		uint64_t begin, end; /* byte range of this part */
	} parts[XFER_PARTS_MAX];
	unsigned n_parts, parts_left;
	/* COPY: the two ranges share bytes (the ends are views of one piece of
	 * memory, region_same_memory()), the destination lying delta bytes
	 * after the source in it (before it when negative). */
	bool overlap;
	int64_t delta;
	bool on_pool;
	/* COPY with GPU memory: started on the loop (region_mem_ops.copy_start);
	 * until it lands, what the loop looks at each turn (watch, on the
	 * registry's started while watched) or, where it cannot look, the pool
	 * waits for. */
	bool started;
	void *pending;
	struct loop_poll_item watch;
	unsigned n_looks;
	/* When its first part was queued (a start: when the loop began to
	 * start it, and when it was started), started and ended (uv_hrtime(),
	 * ns): where a GPU copy's time goes, at debug level. */
	uint64_t clock_begun, clock_queued, clock_started, clock_ended;
	int result;         /* of the byte moving: 0, -EINVAL bad base64 */
	struct errinfo err; /* why it failed, when result < 0 */
};

/* A new transfer for caller, done(userdata, …) when it ends; the caller
 * fills in the rest and passes its references to x. NULL on OOM. */
struct xfer *xfer_new(struct session *caller, enum xfer_kind kind, int64_t timeout_ms,
		      xfer_done_fn done, void *userdata);

/*
 * Starts x. x->done runs exactly once, on the loop (perhaps before this
 * returns). Returns 0, or a negative errno with x->err set when the
 * transfer cannot start (a lease that does not allow it); then done does
 * not run.
 */
int xfer_start(struct xfer *x);

/* The most bytes x moves on the loop (loop-work-usec); more go to the pool. */
uint64_t xfer_inline_max(const struct xfer *x);

/* What a Read of length bytes replies, in bytes: {"parameters":{…}} with
 * the base64 and the terminator. */
uint64_t xfer_read_reply_size(uint64_t length);

/* Stops a transfer not started or still waiting for locks (its client
 * went away); done runs now with -ECANCELED. No effect once the bytes move:
 * done runs when they have. */
void xfer_cancel(struct xfer *x);

void xfer_free(struct xfer *x);

#endif
