/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU regions: client GPU memory imported through the CUDA driver — a VMM
 * allocation exported as a POSIX fd, or a legacy 64-byte IPC handle. Every
 * CUDA call runs on the thread pool; the driver is loaded (and cuInit
 * called) when the first GPU import arrives, not before. A legacy handle is
 * opened once and the open shared by every region over that allocation,
 * since the driver maps an IPC allocation only once per process.
 */
#ifndef RDMAMEMD_GPU_H
#define RDMAMEMD_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "cuda.h"
#include "proto/list.h"

struct daemon;
struct region;
struct rpc_call;

enum gpu_ipc_state {
	GPU_IPC_OPENING,
	GPU_IPC_OPEN,
};

/* ListGpus shows at most this many GPUs, and counts regions on those. */
#define GPU_LIST_MAX 16

struct gpu_ipc {
	struct list_head link;		/* in daemon->gpu_ipcs */
	struct daemon *daemon;
	uint8_t handle[CU_IPC_HANDLE_SIZE];
	int ordinal;			/* the device whose context opens it */
	enum gpu_ipc_state state;
	struct cu_ipc_map map;
	char pci_bus_id[32];
	unsigned n_ref;			/* regions over it */
	struct list_head waiters;	/* imports waiting for the open */
	uv_work_t work;
	int err;
	bool driver_loaded;
	const char *error_name;
	char error[512];
};

struct gpu_import_params {
	int memory;			/* enum region_memory */
	int fd;				/* REGION_CUDA_VMM: taken */
	uint64_t alloc_size;		/* REGION_CUDA_VMM: the allocation's size */
	const char *ipc_handle;		/* REGION_CUDA_IPC: 128 hex digits */
	uint32_t gpu;			/* REGION_CUDA_IPC: device to open it with */
	uint64_t offset, length;	/* the region within the allocation; 0: to its end */
	unsigned access;
	const cJSON *devices;		/* RDMA devices to register on, or NULL */
};

/*
 * Register for GPU memory: imports on the pool and answers call with the
 * region (after its RDMA registrations, if devices were named). Returns
 * RPC_PENDING, or a negative errno with call answered or not (rpc rules).
 */
int gpu_import(struct rpc_call *call, struct gpu_import_params *p);

/* A region over a shared IPC open let go of it (loop side). */
void gpu_ipc_unref(struct gpu_ipc *ipc);

/* ListGpus: the driver, the devices and peer-memory support. */
int gpu_list(struct rpc_call *call, bool probe);

/* Whether nvidia_peermem (or the older nv_peer_mem) is loaded. */
bool gpu_peer_memory_loaded(void);

#endif
