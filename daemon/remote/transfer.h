/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfers: one-sided READ and WRITE between the caller's local regions
 * and remote regions (remote.h), posted by this daemon on its own queue
 * pairs to the exporting daemons (link.h). The model of the Transfer
 * method: it answers no call, it reports through its callbacks.
 *
 * The life of a transfer, each step on the loop:
 *
 *   resolve  every op against the caller's rights now (a WRITE reads the
 *            local region: REGION_READ; a READ writes it: REGION_WRITE),
 *            the remote's access bits and both lengths; refusals are
 *            reported before anything starts (transfer_new*() fails);
 *   lock     each local region once, in region id order: shared when the
 *            ops only read it (WRITEs), exclusive when any writes it
 *            (READs) — unless the caller names a lease of its own on it,
 *            which must allow that;
 *   connect  per leg (the ops of one remote and one local owner uid: the
 *            owner's PD holds the lkeys), one path per device pair that
 *            reaches, nearest the local memory first (paths.h: the devices
 *            every region of the leg is registered on, ranked by NUMA
 *            distance or PCIe hops); the pool's link of each (device,
 *            owner uid, endpoint, token);
 *   run      the leg's WR plan (wr_plan.h: coalesced, split in pieces of
 *            TRANSFER_PIECE or the links' max message size if smaller,
 *            striped over the paths past
 *            TRANSFER_STRIPE_MIN) through each link's window (window.h:
 *            TRANSFER_SIGNAL_DIV-th WRs signalled and the last of a post);
 *   report   done(result) once, after every posted WR completed or was
 *            flushed: the regions (their memory) and the leases and locks
 *            stay until then.
 *
 * Each op's outcome is counted; the first failure by op index is what
 * done reports, with its op index, named: RemoteAccessError (the remote
 * refused the rkey, bounds or access: the completion's status and vendor
 * error), PeerUnreachable (no connection: refused with the endpoint's
 * reason, timed out, no route; or the peer stopped answering),
 * TransferCancelled (transfer_cancel() before the op's WRs were posted),
 * TransferFailed (anything else: a local access error, a queue pair that
 * failed or closed under it).
 *
 * transfer_cancel() (the client went away) posts nothing more; what was
 * posted drains, then done comes as for any transfer. One window per live
 * link is shared by every transfer on it (struct transfer_qp); the window
 * dies with its link (an error, idle, the pool's stop), and the next
 * transfer gets a new link. Loop thread only.
 */
#ifndef RDMAMEMD_TRANSFER_H
#define RDMAMEMD_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/core/errinfo.h"
#include "daemon/core/offload.h"
#include "daemon/mem/lock.h"
#include "daemon/remote/link.h"
#include "daemon/remote/window.h"
#include "daemon/remote/wr_plan.h"
#include "proto/ranges.h"

struct lease;
struct mreg;
struct plan;
struct region;
struct region_registry;
struct remote;
struct remote_ctx;
struct session;
struct transfer;

/* Distinct local regions, remotes and legs one transfer may name. */
#define TRANSFER_REGIONS_MAX 64U
#define TRANSFER_REMOTES_MAX 16U
#define TRANSFER_LEGS_MAX 16U
/* A batch of at least this many bytes stripes over several device pairs,
 * in pieces of TRANSFER_PIECE; a smaller one goes on path 0, the device
 * nearest the memory. */
#define TRANSFER_STRIPE_MIN (4ULL << 20)
/*
 * The largest WR a transfer posts, striped or not: a longer op is cut
 * into pieces of this size (or the links' max message size, if smaller).
 * RC allows 2 GiB per WR, but a long WR is a long time without a
 * completion. Soft-RoCE resets a QP's retry counter only when a whole WR
 * is acknowledged (rxe_comp.c: reset_retry_counters() from check_psn()),
 * and goes back to the lost packet on every loss, each loss counting
 * against that one WR: with its largest WRs, 8 MiB, a 512 MiB WRITE on one
 * device pair between two emulated VMs on two busy cores did its first
 * 64 MiB in 20-23 s, where 1 MiB WRs took 8 s; in CI, on slower cores,
 * the 8 MiB WRs ran up their resends and failed the link (RETRY_EXC_ERR)
 * after 80 s without a single op done, and later so did 1 MiB WRs under
 * ASan (81 s). At 256 KiB a WR is two of rxe's windows of 128 unacked
 * packets (MTU 1024), so a loss is rarely charged to a WR that already
 * saw six. An op's bytes count for progress only when its last WR
 * completes, and one WR in TRANSFER_SIGNAL_DIV-th of the window is
 * signalled: smaller WRs also report progress sooner (the two-VM
 * midway cases: first progress of 8 x 16 MiB at 0.85-1.33 s against
 * 1.41-2.84 s with 1 MiB WRs). On hardware a 256 KiB WR still lasts
 * microseconds (the post rate, four WRs per MiB, is nothing: perftest's
 * bandwidth is flat from 64 KiB), and seven timeouts in a row mean a
 * silent peer.
 */
#define TRANSFER_PIECE (256U << 10)
/* One WR in each window / TRANSFER_SIGNAL_DIV is signalled (and the last
 * of each post): completions stay few, and the send queue frees in steps. */
#define TRANSFER_SIGNAL_DIV 4U
/* Progress at most this often: every TRANSFER_PROGRESS_MS or
 * TRANSFER_PROGRESS_OPS ops, whichever comes first. */
#define TRANSFER_PROGRESS_MS 100U
#define TRANSFER_PROGRESS_OPS 4096U
/*
 * Past this many ops, a transfer's O(ops) work runs on the pool (core's
 * offload), not in one turn of the loop: a batch's ranges checked into its
 * op array, and every transfer's WR plans (wr_plan_build(), the batch's op
 * counts). A turn of the loop then does O(TRANSFER_INLINE_OPS) of it at
 * most: 23 µs p50 on the build machine (bench-remote's row "a loop turn's
 * most").
 * A plan post's ops (an index lookup and a copy each, no check) are made
 * on the loop whatever their number: plan.h's ranges may go meanwhile.
 */
#define TRANSFER_INLINE_OPS 4096U
/* The largest notify payload the Transfer method takes. */
#define TRANSFER_NOTIFY_MAX 4096U

/*
 * Notifications: with notify bytes, each leg SENDs them to its remote's
 * owner on its first path's link (link_post_notify(), remote_ctx's
 * notify_send hook; NULL refuses notify bytes up front). RC carries a
 * queue pair's work in order, so the SEND is posted as soon as the leg's
 * last WR went to that link (not after their completions: the remote
 * daemon receives it only after their data is in place, and never when one
 * of them failed, as the queue pair is in error then). A striped leg's
 * other links are not ordered with it: it is posted once every WR of the
 * leg completed. The leg, and so the transfer, ends when the SEND
 * completed too. The SEND has a link user of its own (its completion,
 * wr_id LINK_WR_ID_NOTIFY, never reaches the window), and the window
 * leaves TRANSFER_NOTIFY_RESERVE of the link's send queue to them.
 */
typedef int (*transfer_notify_fn)(struct link *l, struct link_user *u, const void *data, size_t len,
				  uint64_t export_id);
/* Send queue entries of each link the window leaves to notifications. */
#define TRANSFER_NOTIFY_RESERVE LINK_NOTIFY_SLOTS

/* One live link's window, shared by the transfers on it. */
struct transfer_qp {
	struct list_head node; /* in ctx->transfer_qps while its link is live */
	struct remote_ctx *ctx;
	unsigned n_ref;    /* the list's while live, and each transfer's */
	unsigned busy;     /* inside window calls: freeing waits */
	bool dead;         /* its link failed or closed: no new batch */
	struct link *link; /* a reference until dead */
	struct link_user user;
	struct window win;
	struct vb_send_wr *scratch; /* one post's WRs, window depth entries */
	struct list_head notices;   /* struct transfer_notice waiting for room */
};

enum transfer_notice_state {
	NOTICE_NONE,    /* no notify bytes, or dropped: the leg's data failed */
	NOTICE_ARMED,   /* waiting for the leg's WRs to be posted (completed, striped) */
	NOTICE_WAITING, /* in qp->notices: the link had no room */
	NOTICE_POSTED,  /* the SEND is in flight */
	NOTICE_DONE,    /* completed, or failed (the transfer's notice_err) */
};

/* A leg's notification. */
struct transfer_notice {
	struct link_user user; /* the SEND's, apart from the window's */
	struct list_head node; /* in qp->notices while WAITING */
	enum transfer_notice_state state;
};

/* One op as a caller lists it (ids are the caller's session's). */
struct transfer_op {
	uint8_t opcode; /* enum wr_opcode */
	uint64_t region, offset;
	uint64_t lease; /* 0: none */
	uint64_t remote, remote_offset;
	uint64_t length;
};

struct transfer_region {
	struct region *region; /* a reference */
	struct lease *lease;   /* a reference, or NULL: we lock */
	bool written;          /* some op READs into it */
	struct lock_request req;
	bool locked;
};

struct transfer_path {
	struct transfer_leg *leg;
	struct device *dev;
	uint32_t remote_dev; /* in the descriptor */
	struct link_key key;
	struct link_waiter waiter;
	bool waiting;
	struct transfer_qp *qp; /* a reference, once connected */
	/* qp's link, held (link_hold()) from connected until the leg is
	 * over: never closed as idle while the transfer waits or runs. */
	struct link *held;
};

/* The ops of one remote and one local owner uid: one plan, one batch. */
struct transfer_leg {
	struct transfer *t;
	struct remote *remote; /* t's reference */
	uid_t uid;
	uint32_t regions[TRANSFER_REGIONS_MAX]; /* key set k: t->regions index */
	uint32_t n_regions;
	struct wr_op *ops; /* op index: t's op position */
	size_t n_ops;
	struct transfer_path paths[WR_PLAN_PATHS_MAX];
	uint32_t n_paths;
	struct wr_keys *keys;
	struct mreg **mregs;          /* held (mreg_hold()), as keys: until transfer_free() */
	struct wr_plan_params params; /* set on the loop when its links are ready */
	int build_r;                  /* leg_build()'s: the plan and batch (0: made) */
	struct wr_plan plan;
	struct window_batch batch;
	struct transfer_notice notice;
	bool started, batch_done, done; /* done: the batch and the notice */
};

struct transfer_progress {
	uint64_t ops_done, bytes_done; /* succeeded so far */
	uint64_t ops_failed;
	uint64_t n_ops, bytes; /* in all */
};

struct transfer_cb {
	/* Once, at the end: result 0 (every op succeeded), or a negative
	 * errno with e naming the first failure (the callee may take e's
	 * params). The callee frees t with transfer_free(), there or later. */
	void (*done)(void *userdata, struct transfer *t, int result, struct errinfo *e);
	/* Optional: ops completed since the last call (throttled). */
	void (*progress)(void *userdata, struct transfer *t, const struct transfer_progress *p);
};

enum transfer_job_kind {
	TRANSFER_JOB_FILL, /* a batch's ranges checked into its leg's ops */
	TRANSFER_JOB_PLAN, /* the legs' WR plans and batches */
};

enum transfer_state {
	TRANSFER_LOCKING,
	TRANSFER_CONNECTING,
	TRANSFER_RUNNING,
	TRANSFER_DONE,
};

struct transfer {
	struct remote_ctx *ctx;
	struct session *caller; /* a reference */
	enum transfer_state state;
	struct transfer_cb cb;
	void *userdata;

	size_t n_ops;
	struct transfer_region regions[TRANSFER_REGIONS_MAX];
	uint32_t n_regions;
	uint32_t lock_order[TRANSFER_REGIONS_MAX];    /* regions by id */
	uint32_t n_locked;                            /* lock_order's prefix granted */
	struct remote *remotes[TRANSFER_REMOTES_MAX]; /* references */
	uint32_t n_remotes;
	struct transfer_leg *legs[TRANSFER_LEGS_MAX]; /* owned, allocated when named */
	uint32_t n_legs, legs_left, paths_waiting;

	void *notify;
	size_t notify_len;
	/* A notification that failed while the data did not: reported when
	 * nothing else failed. */
	int notice_err;
	struct errinfo notice_info;

	bool cancelled;
	struct transfer_progress progress;
	uint64_t last_progress_ops, last_progress_msec;
	uint64_t started_ns; /* uv_hrtime() at the start: the latency by peer */
	/* The first failure by op index. */
	bool failed;
	size_t fail_op;
	struct window_status fail_st;
	int fail_err; /* before the run: -errno, with fail_info */
	struct errinfo fail_info;
	unsigned hold; /* inside our own calls, or a pool job runs: done waits */

	/* The pool's job (TRANSFER_INLINE_OPS): what it reads, what it says. */
	struct offload_job job;
	enum transfer_job_kind job_kind;
	struct ranges_buf job_ranges; /* FILL: the batch's, taken from the caller */
	const char *job_text;         /* FILL: or its text, to decode first */
	size_t job_text_len;
	const char *job_why; /* the text's fault, static */
	int job_decode_r;
	uint64_t job_region_size;
	uint32_t job_keys;
	uint8_t job_opcode;
	size_t job_bad; /* FILL: the first range out of bounds, or SIZE_MAX */
	struct ranges_item job_bad_item;
	uint64_t job_bytes;
};

/* At daemon start, after remote_ctx_init() and the pool's init. */
void transfer_engine_init(struct remote_ctx *ctx, struct region_registry *regions);

/*
 * A transfer of ops[0..n) (1 ≤ n ≤ the max-transfer-ops limit, the
 * caller's to check) for caller. Refusals answer before it starts, in *e:
 * NoSuchRegion, PermissionDenied, NoSuchRemote, NoSuchLease, OutOfRange,
 * InvalidParameter (too many regions, remotes or legs; a lease that does
 * not cover), NotRegistered (no device both sides are registered on), and
 * then *ret is NULL. Otherwise it runs: cb->done comes once, never from
 * inside this call.
 */
int transfer_start(struct remote_ctx *ctx, struct session *caller, const struct transfer_op *ops,
		   size_t n, const void *notify, size_t notify_len, const struct transfer_cb *cb,
		   void *userdata, struct transfer **ret, struct errinfo *e);
/* The same for ranges indices[0..n) of plan p (n == 0: every range), op
 * READ or WRITE for all; OutOfRange for an index past the plan. */
int transfer_start_plan(struct remote_ctx *ctx, struct session *caller, struct plan *p,
			uint8_t opcode, const uint32_t *indices, size_t n, const void *notify,
			size_t notify_len, const struct transfer_cb *cb, void *userdata,
			struct transfer **ret, struct errinfo *e);

/* A batch: ranges[0..n) between one local region (under lease, or 0: the
 * transfer locks it) and one remote, opcode for all (the compact form,
 * proto/ranges.h). */
struct transfer_batch {
	uint8_t opcode; /* enum wr_opcode */
	uint64_t region, lease, remote;
	const struct ranges_item *ranges;
	size_t n;
	/* Optional: the buffer ranges is in, which the transfer may take
	 * (zeroing *take) to check the ranges after the call returned, on the
	 * pool; then an OutOfRange comes through done. */
	struct ranges_buf *take;
	/* Or (n past TRANSFER_INLINE_OPS): the packed text, not decoded yet
	 * but counted (ranges_count_text()), and valid until done comes (the
	 * call's message); ranges then holds its first range, decoded. The
	 * pool decodes the rest: text that is not base64 comes through done,
	 * InvalidParameter naming "batch". */
	const char *text;
	size_t text_len;
};

/* The same as transfer_start() for a batch (1 ≤ n ≤ the max-transfer-ops
 * limit, the caller's to check). */
int transfer_start_batch(struct remote_ctx *ctx, struct session *caller,
			 const struct transfer_batch *b, const void *notify, size_t notify_len,
			 const struct transfer_cb *cb, void *userdata, struct transfer **ret,
			 struct errinfo *e);

/* The client went away: nothing more is posted, waits end; done comes once
 * what was posted has drained (perhaps from here). */
void transfer_cancel(struct transfer *t);
/* After done. */
void transfer_free(struct transfer *t);

#endif
