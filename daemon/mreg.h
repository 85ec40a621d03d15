/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A region's RDMA registrations, one per device, Monarch's MrEntry: the first
 * registration on a device is the one in force; a failure is recorded with
 * its cause and not retried until an administrator clears it. Requests for a
 * device whose registration is under way wait for that attempt instead of
 * starting another, so one region never has two MRs on one device.
 * Registration runs on the thread pool; the MR is in the region owner's
 * protection domain on that device.
 */
#ifndef RDMAMEMD_MREG_H
#define RDMAMEMD_MREG_H

#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "proto/list.h"
#include "verbs.h"

struct daemon;
struct device;
struct region;

enum mreg_state {
	MREG_PENDING,
	MREG_REGISTERED,
	MREG_FAILED,
};

struct mreg_waiter {
	struct list_head link;	/* in mreg->waiters */
	void (*settled)(struct mreg_waiter *w);
};

struct mreg {
	struct list_head link;	/* in region->mregs */
	struct region *region;
	char device[VB_NAME_MAX];
	struct device *dev;	/* NULL when no such device is open */
	enum mreg_state state;
	struct vb_mr *mr;
	uint32_t lkey, rkey;
	unsigned access;	/* VB_ACCESS_* actually asked for */
	int err;
	char *error;		/* why it failed, for the client */
	uint64_t settled_msec;
	struct list_head waiters;

	uv_work_t work;		/* while pending */
	struct vb_pd *pd;
	const char *how;	/* Registration.via: "host-memory", "dma-buf", "peer-memory" */
	char gpu_error[512];	/* both causes when GPU memory would not register */
};

/* r's registration on the device named so, or NULL. */
struct mreg *mreg_find(struct region *r, const char *device);

/*
 * The registration of r on dev (an open device), started if there is none.
 * When the returned entry is pending and w is given, w->settled runs once it
 * is registered or failed (on the loop). Returns NULL only on OOM. A name
 * that is no open device gets no entry: see mreg_missing_json().
 */
struct mreg *mreg_ensure(struct region *r, struct device *dev, struct mreg_waiter *w);

/* Stops waiting (the caller went away); the attempt itself goes on. */
void mreg_waiter_cancel(struct mreg_waiter *w);

/* RetryRegistration: forgets a recorded failure. -ENOENT if there is none. */
int mreg_forget_failure(struct region *r, const char *device);

/* Deregisters every MR of r. Pool-safe: called by the region's release. */
void mreg_release_all(struct region *r);
/* Loop side of the release: counters, memory. */
void mreg_free_all(struct region *r);

/* {device, backend, state, lkey, rkey, addr, length} or {device, error}. */
cJSON *mreg_to_json(const struct mreg *m, bool recorded);
/* The failure answered for a device that is not open, recorded nowhere. */
cJSON *mreg_missing_json(struct daemon *d, const char *device);

#endif
