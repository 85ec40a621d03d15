/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake CUDA driver (fake-cuda.c) as the unit tests see it: knobs that
 * make calls fail, what the last calls were given, and counts of what the
 * daemon holds. fake.h has the part the fuzzers need, which builds without
 * cuda.h; this part needs it.
 */
#ifndef RDMAMEM_FAKE_CUDA_H
#define RDMAMEM_FAKE_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/gpu/cuda-ops.h"

#define FAKE_CUDA_DEVICES 2
/* VMM granularity, and the alignment of every allocation. */
#define FAKE_CUDA_GRAN (2UL << 20)
/* How much a legacy IPC handle opens. */
#define FAKE_CUDA_IPC_SIZE (1UL << 20)

/*
 * The fake reads and writes these under its lock, so driver calls may race;
 * a test reads or sets them only while none of its calls is in flight.
 */
struct fake_cuda_state {
	/* Knobs: what cuDriverGetVersion says, what cuInit, copies and
	 * cuMemMap return (CUDA_SUCCESS: they work). */
	int version;
	CUresult init_result, copy_result, map_result;
	/* The device VMM fds import on (1 unless set), and whether the two
	 * devices can reach each other (they can unless no_peer). */
	int vmm_device;
	bool no_peer;

	/* Retained primary contexts, imported VMM handles, address
	 * reservations, VMM mappings. */
	int primary_refs[FAKE_CUDA_DEVICES];
	/* Retains that found no reference: the driver would create the
	 * context (156 ms on an H100). */
	int primary_creates[FAKE_CUDA_DEVICES];
	int n_handles, n_reserved, n_mapped;
	/* cuMemExportToShareableHandle calls (each refused). */
	int n_exports;
	/* cuCtxSynchronize calls that found a context current. */
	int n_syncs;
	/* Asynchronous copies queued, and events not destroyed yet. */
	int n_async_copies, n_events;
	/* Peer access enabled from device a to device b's memory, and
	 * cuMemcpyPeer calls: peer to peer (enabled both ways) or staged. */
	bool peer_enabled[FAKE_CUDA_DEVICES][FAKE_CUDA_DEVICES];
	int n_copies_p2p, n_copies_staged;

	/* What the latest calls saw. */
	CUcontext last_copy_ctx, last_register_ctx;
	CUcontext last_peer_dst_ctx, last_peer_src_ctx;
	unsigned last_register_flags, last_ipc_flags;
	CUmemAccessDesc last_access;
	size_t last_access_count;
	CUdeviceptr last_dmabuf_base;
	size_t last_dmabuf_size;
};

extern struct fake_cuda_state fake_cuda;
extern const struct cu_ops fake_cu_ops;

CUcontext fake_cuda_primary(int device);
/* A context that is no device's primary: one a client created itself, on
 * device 0. */
CUcontext fake_cuda_own_ctx(void);
/* The calling thread's context stack. */
CUcontext fake_cuda_current(void);
int fake_cuda_depth(void);

/*
 * Device memory as cuMemAlloc would give it in ctx (NULL: none, as for a
 * VMM mapping that device has access to) on device; kept until the process
 * ends. Aborts when the table is full.
 */
CUdeviceptr fake_cuda_alloc(size_t size, CUcontext ctx, int device);
/* The devices cuMemSetAccess let touch the VMM mapping at p, a bit each (0:
 * none, or no such mapping). */
unsigned fake_cuda_access(CUdeviceptr p);

#endif
