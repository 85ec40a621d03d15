/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A region's RDMA registrations, one per device, Monarch's MrEntry: the first
 * registration on a device is the one in force; a failure is recorded with
 * its cause and not retried until an administrator clears it. Requests for a
 * device whose registration is under way wait for that attempt instead of
 * starting another, so one region never has two MRs on one device.
 * Registration runs on the thread pool; the MR is in the region owner's
 * protection domain on that device.
 *
 * Registrations live only as long as the owner's hold on the region: when
 * the owner unregisters or disconnects, every MR is deregistered at once
 * (on the pool: unpinning a large MR takes long), and one still being
 * registered is deregistered as soon as it is done. Leases and in-flight
 * operations keep the region's memory, never its rkeys. Each MR holds a
 * reference on the region until it is deregistered, so the memory is
 * unmapped only after every MR over it is gone.
 *
 * One exception, for the daemon's own work requests: a transfer (the
 * engine in remote/) holds the MRs whose lkeys its posted WRs carry
 * (mreg_hold()), as Monarch's "a posted op pins its memory" — a dereg under
 * them would fail them with a local access error, or worse, let the device
 * touch pages that are no longer pinned. When the owner lets go of a held
 * MR, its deregistration waits for the last mreg_release(); a
 * deregistration cannot be partial, so the rkey is stopped another way at
 * once: every remote peer's queue pair in the owner's protection domain on
 * that device is destroyed (rconn_destroy(): the only way a peer reaches an
 * rkey of that PD), and the entry shows "deregistering" from then on. A
 * peer admitted into that PD during the drain could still name the rkey if
 * it had learnt it before; the drain is bounded by the links' timeouts.
 *
 * A region's registrations hang on it as its first hook (struct
 * region_hook, rank REGION_HOOK_REGISTRATIONS): revoked when the owner lets
 * go, freed with the region. What to register comes from the region's
 * memory kind (region_mem_ops.mr_source: an address, or a dma-buf), so
 * mreg never sees CUDA. Threads: the entries are the loop's; the pool runs
 * only ibv_reg_mr/ibv_dereg_mr of one entry (m->work), which is the
 * entry's alone until its completion runs on the loop.
 */
#ifndef RDMAMEMD_MREG_H
#define RDMAMEMD_MREG_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "util/list.h"
#include "daemon/rdma/verbs.h"

struct rdma_ctx;
struct device;
struct errinfo;
struct region;

enum mreg_state {
	MREG_PENDING,
	MREG_REGISTERED,
	MREG_FAILED,
	MREG_DEREGISTERING, /* the owner let go: on the pool, gone once done */
};

struct mreg_waiter {
	struct list_head link; /* in mreg->waiters */
	void (*settled)(struct mreg_waiter *w);
};

struct mreg {
	struct list_head link; /* in its region's set (mreg.c), one per device */
	struct region *region;
	char device[VB_NAME_MAX];
	struct device *dev; /* NULL when no such device is open */
	enum mreg_state state;
	struct vb_mr *mr;
	uint32_t lkey, rkey;
	unsigned access; /* VB_ACCESS_* actually asked for */
	int err;
	char *error; /* why it failed, for the client */
	uint64_t settled_msec;
	uint64_t queued_ns; /* uv_hrtime() when the registration was queued */
	struct list_head waiters;

	unsigned n_hold;  /* mreg_hold()s: the daemon's own WRs carry the lkey */
	bool dereg_waits; /* the owner let go while held: dereg at the last release */
	uv_work_t work;   /* while pending or deregistering */
	struct vb_pd *pd;
	const char *how;     /* Registration.via: "host-memory", "dma-buf", "peer-memory" */
	char gpu_error[512]; /* both causes when GPU memory would not register */
};

/* r's registration on the device named so, or NULL. */
struct mreg *mreg_find(struct region *r, const char *device);

/*
 * Whether r can be registered on this host at all: a read-only memfd
 * region cannot before Linux 6.2. Refused up front, with ReadOnlyRegion in
 * *e, so that nothing is pinned or recorded.
 */
int mreg_check_region(const struct region *r, struct errinfo *e);

/*
 * The registration of r on dev (an open device), started if there is none.
 * When the returned entry is pending and w is given, w->settled runs once it
 * is registered or failed (on the loop). Returns NULL only on OOM. A name
 * that is no open device gets no entry: see mreg_missing_write().
 */
struct mreg *mreg_ensure(struct region *r, struct device *dev, struct mreg_waiter *w);

/* Stops waiting (the caller went away); the attempt itself goes on. */
void mreg_waiter_cancel(struct mreg_waiter *w);

/* RetryRegistration: forgets a recorded failure. -ENOENT if there is none. */
int mreg_forget_failure(struct region *r, const char *device);

/*
 * After region_drop_owner(), which deregisters r's MRs (now or once their
 * registration is done) and forgets recorded failures through the hook
 * mreg attaches to every region it registers: false when no MR of r is
 * left; else true, and w->settled runs on the loop once the last one is
 * deregistered (mreg_waiter_cancel() stops waiting).
 */
bool mreg_wait_revoked(struct region *r, struct mreg_waiter *w);

/* Keeps m's MR (a registered one) while the daemon's own WRs use its lkey. */
struct mreg *mreg_hold(struct mreg *m);
/* The last release of an MR whose owner let go deregisters it. */
void mreg_release(struct mreg *m);

/* Whether r has any entry: an MR in any state, or a recorded failure. */
bool mreg_any(const struct region *r);
/* Writes each of r's entries (mreg_write()) as an element of the array
 * open in o. */
struct json_out;
void mreg_list_write(struct json_out *o, const struct region *r);

/* Calls fn with the name of each device r is registered on, or being
 * registered on. */
void mreg_each_device(const struct region *r, void (*fn)(void *ctx, const char *device), void *ctx);

/* {device, backend, state, lkey, rkey, addr, length} or {device, error},
 * as an element of the array open in o. */
void mreg_write(struct json_out *o, const struct mreg *m, bool recorded);
/* The failure answered for a device that is not open, recorded nowhere. */
void mreg_missing_write(struct json_out *o, struct rdma_ctx *rdma, const char *device);

#endif
