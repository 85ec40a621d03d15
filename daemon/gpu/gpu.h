/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU regions: client GPU memory imported through the CUDA driver — a VMM
 * allocation exported as a POSIX fd, or a legacy 64-byte IPC handle. Every
 * CUDA call runs on the thread pool but two. An import (a VMM map or an
 * IPC open) runs on the loop where the driver is in, no other driver work
 * of the daemon runs, the context it needs is held already (CU_NO_WAIT)
 * and imports like it took at most loop-import-usec (gpu_cost.h); for a VMM
 * fd, also only where it is a file of the kind the driver imported before
 * (a file of any other kind might be one whose ioctl a process serves).
 * And a Copy between GPU memory and
 * a page-locked host region while no other driver work of the daemon runs
 * (gpu_region.c) runs on the loop when expected to take at most
 * loop-work-usec (gpu_copy_usec()), and is started there otherwise, the
 * loop looking for its end each turn (gpu_copy_start(), gpu_copy_poll()),
 * or a pool thread waiting for it where other driver work runs beside it.
 * The driver is loaded (and cuInit
 * called) when the first GPU import arrives, not before. A legacy handle is
 * opened once and the open shared by every region over that allocation,
 * since the driver maps an IPC allocation only once per process.
 *
 * The model only: imports and listings report through completion callbacks
 * on the loop; rpc_gpu.c turns them into answers.
 */
#ifndef RDMAMEMD_GPU_H
#define RDMAMEMD_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/gpu/cuda.h"
#include "daemon/gpu/gpu_bw.h"
#include "daemon/gpu/gpu_cost.h"
#include "daemon/gpu/gpu_linger.h"
#include "util/list.h"

struct errinfo;
struct region;
struct region_registry;
struct session;

/*
 * The gpu subsystem's context: the open IPC handles, whether the driver is
 * in, the per-GPU region counts. Loop only: pool work reports back on the
 * loop before any of it changes.
 */
struct gpu_ctx {
	uv_loop_t *loop;
	struct region_registry *regions;   /* where GPU regions are made and published */
	struct list_head ipcs;             /* struct gpu_ipc: open legacy IPC handles */
	unsigned regions_on[GPU_LIST_MAX]; /* live regions by GPU ordinal */
	bool cuda_loaded;                  /* the first GPU import (or a probe) loaded the driver */
	struct gpu_linger linger;          /* each GPU's context kept between its regions */
	struct gpu_cost cost;              /* what recent imports took in the driver */
	uint64_t imports_on_loop;          /* imports and IPC opens made on the loop, */
	uint64_t imports_on_pool;          /* and on a pool thread, since start (metrics) */
	/* What file the driver imported a VMM allocation from (its type and
	 * device numbers), once one was: only such a file is imported on the
	 * loop. */
	struct gpu_file_kind {
		bool known;
		unsigned type;
		uint64_t dev, rdev;
	} vmm_file;
};

/* linger_ms: how long a GPU's primary context is kept after its last
 * region goes (gpu_linger.h); 0: not at all. */
void gpu_ctx_init(struct gpu_ctx *g, uv_loop_t *loop, struct region_registry *regions,
		  unsigned linger_ms);
/* Shutdown, once the connections are gone: kept contexts are released. */
void gpu_ctx_stop(struct gpu_ctx *g);

/* What GPU memory an import is of (Register's "memory"). */
enum gpu_memory {
	GPU_MEMORY_VMM = 1, /* a CUDA VMM allocation exported as a POSIX fd */
	GPU_MEMORY_IPC,     /* a legacy CUDA IPC handle */
};

struct gpu_import_params {
	enum gpu_memory memory;
	int fds[CU_VMM_CHUNKS_MAX]; /* GPU_MEMORY_VMM: the allocations, mapped in order; taken */
	unsigned n_fds;
	uint64_t alloc_size;     /* GPU_MEMORY_VMM: each allocation's size */
	const char *ipc_handle;  /* GPU_MEMORY_IPC: 128 hex digits */
	uint32_t gpu;            /* GPU_MEMORY_IPC: device to open it with */
	uint64_t offset, length; /* the region within the allocation; 0: to its end */
	unsigned access;
	/* GPU_MEMORY_VMM: the fds go on to the fd store (a region to be
	 * kept across a restart: gpu_region's kept_fds). */
	bool keep;
	uint64_t id; /* the region's id after a restart (keep.h); 0: a new one */
};

struct gpu_import;
/*
 * How an import ends, on the loop: r, published for its owner, with the
 * owner's reference (given up with region_drop_owner()); or r NULL and e
 * saying why (the callee may take e's params).
 */
typedef void (*gpu_import_done_fn)(void *userdata, struct region *r, struct errinfo *e);

/*
 * Imports GPU memory for owner, on the pool. Returns 0 with *ret the
 * import, set before done can run: done runs once, on the loop — perhaps
 * before this returns (a second region over an open IPC allocation) —
 * unless gpu_import_cancel() came first; *ret is valid until then. Returns
 * a negative errno when refused at once, with e filled in (a range outside
 * the allocation, a quota, a bad handle; not for -ENOMEM); done does not
 * run then. Takes p->fds.
 */
int gpu_import_start(struct gpu_ctx *g, struct session *owner, struct gpu_import_params *p,
		     gpu_import_done_fn done, void *userdata, struct gpu_import **ret,
		     struct errinfo *e);
/* Its client went away: done will not run (work on the pool finishes and
 * cleans up after itself). */
void gpu_import_cancel(struct gpu_import *job);
/* Closes the fds p holds (an import that never started). */
void gpu_import_params_close(struct gpu_import_params *p);

/* What the driver says of the GPUs (ListGpus). */
struct gpu_list_result {
	bool ran; /* asked the driver (on the pool) */
	int err;  /* the driver would not load or count, error says why */
	char error[512];
	int n;
	struct cu_device_info info[GPU_LIST_MAX];
	unsigned refs[GPU_LIST_MAX]; /* primary context references */
	/* Every other listed GPU as GPU i's peer, in ordinal order. */
	struct cu_peer_info peers[GPU_LIST_MAX][GPU_LIST_MAX - 1];
	int n_peers[GPU_LIST_MAX];
};
typedef void (*gpu_list_done_fn)(void *userdata, const struct gpu_list_result *res);

/*
 * Asks the driver about the GPUs on the pool: when probe (loading it), or
 * when it is loaded already; otherwise done runs at once with res->ran
 * false. done runs once, on the loop. -ENOMEM.
 */
int gpu_list(struct gpu_ctx *g, bool probe, gpu_list_done_fn done, void *userdata);

/* Live regions on GPU ordinal (counted for the first GPU_LIST_MAX). */
unsigned gpu_regions_on(const struct gpu_ctx *g, int ordinal);

/* Whether nvidia_peermem (or the older nv_peer_mem) is loaded. */
bool gpu_peer_memory_loaded(void);

#endif
