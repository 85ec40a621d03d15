/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU regions as the memory kinds "cuda-vmm" and "cuda-ipc" (struct
 * region_mem_ops), and the CUDA page-locking of host regions that GPU
 * copies touch. The GPU code's own: region, xfer and mreg reach all of it
 * through the region's ops and hooks, and never see CUDA.
 */
#ifndef RDMAMEMD_GPU_REGION_H
#define RDMAMEMD_GPU_REGION_H

#include <stdint.h>

#include <uv.h>

#include "daemon/gpu/cuda.h"
#include "util/list.h"
#include "daemon/mem/region.h"

struct gpu_ctx;

enum gpu_ipc_state {
	GPU_IPC_OPENING,
	GPU_IPC_OPEN,
};

/*
 * When a pool job for an import was queued, started, returned from the
 * driver's import and ended (uv_hrtime(), ns), and when the loop heard of
 * it: where an import's time goes, in the debug log (gpu.c).
 */
struct gpu_job_clock {
	uint64_t queued, started, imported, ended;
};

/*
 * A legacy IPC handle's open: one per allocation, shared by the regions
 * over it (the driver maps an IPC allocation once per process). Loop only.
 */
struct gpu_ipc {
	struct list_head link; /* in gpu_ctx->ipcs */
	struct gpu_ctx *gpu;
	uint8_t handle[CU_IPC_HANDLE_SIZE];
	int ordinal; /* the device whose context opens it */
	enum gpu_ipc_state state;
	struct cu_ipc_map map;
	char pci_bus_id[32];
	unsigned n_ref;           /* regions over it */
	struct list_head waiters; /* imports waiting for the open */
	uv_work_t work;
	struct gpu_job_clock clock;
	int err;
	bool driver_loaded;
	const char *error_name;
	char error[512];
};

/* A region over a shared IPC open let go of it (loop side: gpu_ipc_ops.finish). */
void gpu_ipc_unref(struct gpu_ipc *ipc);

/* Immutable once published, but for the hook's link. */
struct gpu_region {
	struct region r; /* first: region.c frees the whole */
	struct gpu_ctx *gpu;
	struct region_hook counted; /* counted on its GPU while its owner holds it */
	struct cu_vmm_map vmm;      /* cuda-vmm: the import */
	/* cuda-vmm: the client's fd of each allocation, for the fd store
	 * (when the region is to be kept); closed once the store holds them
	 * (gpu_region_kept_fds_close()). */
	int kept_fds[CU_VMM_CHUNKS_MAX];
	unsigned n_kept_fds;
	struct gpu_ipc *ipc; /* cuda-ipc: the shared open, one of its n_ref */
};

/* The first word of a GPU region's line in the fd store (region_keep's
 * text): "cuda-vmm ALLOCATION_SIZE", "cuda-ipc GPU HANDLE_HEX". */
#define GPU_KEEP_VMM "cuda-vmm"
#define GPU_KEEP_IPC "cuda-ipc"

extern const struct region_mem_ops gpu_vmm_ops;
extern const struct region_mem_ops gpu_ipc_ops;

static inline struct gpu_region *gpu_region_of(struct region *r)
{
	return container_of(r, struct gpu_region, r);
}

/* Closes a VMM region's kept fds once the fd store holds them (or
 * the region was not kept): the daemon does not need them. Loop, or the
 * release. */
void gpu_region_kept_fds_close(struct region *r);

/* The GPU ordinal host region r is page-locked on for copies, or -1. Loop. */
int gpu_region_host_locked_on(const struct region *r);

#endif
