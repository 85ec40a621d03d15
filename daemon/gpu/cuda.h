/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA layer: the daemon's only door to the CUDA driver API.
 *
 * libcuda.so.1 is never linked. cu_load() opens it with dlopen() when the
 * first GPU import arrives, so the daemon runs (and serves host memory) on
 * hosts without a GPU driver, and never creates a CUDA context before it
 * needs one. This header carries no CUDA types: device addresses are
 * uint64_t (what CUdeviceptr is on every 64-bit platform) and driver handles
 * are opaque.
 *
 * Conventions: every int function returns 0 (or a count) on success and a
 * negative errno on failure; out-params are written only on success. After a
 * failure, cu_last_error() describes it on the calling thread ("CUDA_ERROR_X:
 * text (cuCall)", or the loader's or the argument check's reason), so a
 * worker thread can copy it into the client's error before it returns.
 * CUresult maps to errno through one table: OUT_OF_MEMORY -ENOMEM,
 * INVALID_VALUE -EINVAL, NOT_SUPPORTED -EOPNOTSUPP, NO_DEVICE -ENODEV, any
 * other -EIO. Without a driver every call fails with cu_load()'s error;
 * built without cuda.h (HAVE_CUDA_H unset) every call fails -EOPNOTSUPP.
 *
 * Every function may be called from any thread: copies run on libuv pool
 * threads. Nothing here logs above debug.
 */
#ifndef RDMAMEMD_CUDA_H
#define RDMAMEMD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef HAVE_CUDA_H
#define HAVE_CUDA_H 0
#endif

/* Size of a legacy IPC handle (CUipcMemHandle), as it travels on the wire. */
#define CU_IPC_HANDLE_SIZE 64

/*
 * Opens libcuda.so.1, resolves every entry point and calls cuInit(0), once
 * per process; later calls return the first call's result. -ENOENT when the
 * library cannot be loaded, -ENOSYS when the driver is older than CUDA 12.0
 * or lacks an entry point, cuInit's error otherwise (no GPU: -ENODEV).
 */
int cu_load(void);

/* What the last failed cu_* call on this thread said; "" when none failed. */
const char *cu_last_error(void);

/* Number of CUDA devices, or the load error. */
int cu_device_count(void);

struct cu_device_info {
	int ordinal;
	char name[256];
	char pci_bus_id[32]; /* "0000:3b:00.0", to match against RDMA NICs */
	uint64_t total_mem;
	int cc_major, cc_minor;
	bool dma_buf;      /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	bool vmm;          /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
	bool vmm_posix_fd; /* VMM allocations exportable as POSIX fds */
	bool gdr_vmm;      /* GPUDirect RDMA on VMM allocations */
};

int cu_device_info(int ordinal, struct cu_device_info *ret);

/*
 * Retains or releases the primary context of a device. Every retain needs
 * one release; the daemon holds one per device that has imports, so that
 * copies find the context alive instead of creating it (hundreds of
 * milliseconds and hundreds of MiB of device memory) each time.
 */
int cu_primary_ctx_retain(int ordinal);
int cu_primary_ctx_release(int ordinal);
/* How many retains cuda.c holds on a device now (leak checks, status). */
unsigned cu_primary_ctx_refs(int ordinal);

/*
 * The context guard (Monarch's set_ctx_for_ptr): makes ptr's own context
 * current on this thread or, when it has none (VMM imports have none), the
 * primary context of ptr's device, which it retains. Exit restores the
 * thread's previous context and drops the retain. Use it with
 *   _cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
 */
struct cu_ctx_guard {
	void *ctx;   /* pushed context, NULL when none */
	int primary; /* device whose primary context we retained, or -1 */
};
/* clang-format off */
#define CU_CTX_GUARD_INIT { .ctx = NULL, .primary = -1 }
/* clang-format on */

/* -EINVAL when ptr is not device memory. Fills *ret only on success. */
int cu_ctx_guard_enter(uint64_t ptr, struct cu_ctx_guard *ret);
/* Idempotent; a guard that was never entered is fine. */
void cu_ctx_guard_exit(struct cu_ctx_guard *g);

/*
 * 1 when ptr is device memory (its device ordinal in *ret_ordinal, which may
 * be NULL), 0 when CUDA does not know it or it is host memory (registered
 * host memory included), a negative errno when the driver fails otherwise.
 */
int cu_pointer_device(uint64_t ptr, int *ret_ordinal);

/* The allocation that holds ptr, found under the context guard. */
int cu_address_range(uint64_t ptr, uint64_t *ret_base, uint64_t *ret_size);

/*
 * VMM allocations exported by a client as POSIX fds, imported and mapped
 * read-write for their device one after the other in one address range (a
 * tensor of PyTorch's expandable segments spans several allocations of one
 * size), and for every other GPU that copies with this one peer to peer
 * (cu_peer_info). The pointer has no context; the import holds a retain on
 * the device's primary context for copies.
 */
#define CU_VMM_CHUNKS_MAX 64U
struct cu_vmm_map {
	uint64_t dptr;
	uint64_t size;       /* n_chunks * chunk_size */
	uint64_t chunk_size; /* each allocation's */
	int device;
	unsigned n_chunks;
	uint64_t handles[CU_VMM_CHUNKS_MAX]; /* CUmemGenericAllocationHandle */
};

/*
 * For the loop's imports (cu_vmm_import(), cu_ipc_open()): the context
 * they retain must be one the daemon holds already, and no other thread
 * may be changing its count (cu_primary_lock in cuda.c), so that the
 * driver neither makes a context nor waits for the thread that does;
 * -EWOULDBLOCK otherwise, with nothing left behind, and the caller sends
 * the import to the pool.
 */
#define CU_NO_WAIT 1U

/*
 * Imports the n fds (not taken: the caller closes them whenever it likes), all
 * of one device, and maps the first chunk_size bytes of each, in order.
 * chunk_size is the client's word; it must be a non-zero multiple of the
 * device's allocation granularity (-EINVAL otherwise) and no larger than an
 * allocation: driver 580 refuses that map with CUDA_ERROR_NOT_SUPPORTED
 * (-EOPNOTSUPP), and an fd that is no CUDA export with CUDA_ERROR_UNKNOWN
 * (-EIO). n is 1 to CU_VMM_CHUNKS_MAX. flags: 0 or CU_NO_WAIT.
 */
int cu_vmm_import(const int *fds, unsigned n, uint64_t chunk_size, unsigned flags,
		  struct cu_vmm_map *ret);
/* Unmaps, frees the address range, releases the handle and the context
 * retain; every step runs even when one fails (the first error is returned).
 * Zeroes *m; a zeroed map is a no-op. */
int cu_vmm_release(struct cu_vmm_map *m);
/*
 * A legacy cuIpcGetMemHandle allocation, opened in the primary context of the
 * device the caller names (with lazy peer access when the memory lives on
 * another device). The driver maps the whole allocation: dptr is its base.
 * cu_ipc_open()'s flags: 0 or CU_NO_WAIT.
 */
struct cu_ipc_map {
	uint64_t dptr;
	uint64_t size;  /* the whole allocation, from cuMemGetAddressRange */
	int device;     /* where the memory lives */
	int ctx_device; /* whose primary context opened it */
};

int cu_ipc_open(const void *handle, int ordinal, unsigned flags, struct cu_ipc_map *ret);
/* Closes the mapping and drops the context retain; zeroes *m. */
int cu_ipc_close(struct cu_ipc_map *m);

/* Synchronous copies; the device side runs under the context guard. */
int cu_copy_htod(uint64_t dst, const void *src, size_t n);
int cu_copy_dtoh(void *dst, uint64_t src, size_t n);
/*
 * Between two device pointers: cuMemcpyDtoD when both live in one context;
 * otherwise (two GPUs, or an IPC open and a VMM mapping) cuMemcpyPeer with
 * each pointer in its own context, since one device's context cannot reach
 * another device's VMM mapping or IPC open by itself. Which way the bytes
 * went is counted per GPU pair (cu_peer_info) and logged at debug.
 */
int cu_copy_dtod(uint64_t dst, uint64_t src, size_t n);

/*
 * A copy between device memory and page-locked host memory, started and
 * not waited for: the event that follows it on the starting thread's own
 * default stream (CU_STREAM_PER_THREAD, which still orders itself after
 * the legacy stream the synchronous copies use). cu_copy_htod_start() and
 * _dtoh_start() queue the copy (microseconds: the host side must be
 * page-locked, or the driver stages it before returning) and set *ret;
 * n == 0 queues nothing and sets NULL. Until cu_copy_finish(*ret) the copy
 * counts as driver work in flight (cu_idle() is false), so that no copy
 * made on the loop queues behind it. The bytes are in place, and the
 * memory may go, only once cu_copy_finish() returned, which blocks for the
 * rest of the copy (the pool) and frees *ret, also when the copy failed.
 *
 * cu_copy_poll() asks, without waiting, whether the bytes have landed (the
 * loop, each turn): 1 when they have (cu_copy_finish() then waits for
 * nothing), 0 while they move, -EBUSY when the loop should leave the wait
 * to the pool: other driver work of the daemon is in flight beside the
 * started copies, whose driver lock the query could wait for, or the query
 * failed (the copy did, or the bytes may still move), which
 * cu_copy_finish() then reports.
 */
struct cu_copy_pending;
int cu_copy_htod_start(uint64_t dst, const void *src, size_t n, struct cu_copy_pending **ret);
int cu_copy_dtoh_start(void *dst, uint64_t src, size_t n, struct cu_copy_pending **ret);
int cu_copy_poll(struct cu_copy_pending *p);
int cu_copy_finish(struct cu_copy_pending *p);

/* How cu_copy_dtod moves bytes between the memory of two GPUs. */
enum cu_copy_path {
	CU_COPY_SAME_DEVICE, /* one GPU: cuMemcpyDtoD, or cuMemcpyPeer of two contexts */
	CU_COPY_PEER,        /* peer access enabled both ways: NVLink or PCIe P2P */
	CU_COPY_STAGED,      /* no peer access: the driver stages through host memory */
};

/* "same-device", "peer", "staged". */
const char *cu_copy_path_name(enum cu_copy_path path);

/*
 * What GPU ordinal knows of GPU peer: whether it can reach peer's memory
 * (cuDeviceCanAccessPeer), the link's CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK
 * (lower is faster; -1 when the driver does not say), how cu_copy_dtod
 * copies between the two, and how many copies from ordinal's memory to
 * peer's went each way so far.
 *
 * The daemon copies peer to peer when both GPUs can reach each other, and
 * gives every such GPU access to each VMM import too (cuMemSetAccess is per
 * device; cuCtxEnablePeerAccess does not cover VMM mappings). The
 * environment variable RDMAMEMD_CUDA_PEER_COPIES=off, read when the driver
 * loads, makes it stage every copy between GPUs instead and grant nothing
 * to other GPUs: to test that path on machines with NVLink.
 */
struct cu_peer_info {
	int ordinal;
	bool access;
	int performance_rank;
	enum cu_copy_path path;
	uint64_t copies_peer, copies_staged;
};

int cu_peer_info(int ordinal, int peer, struct cu_peer_info *ret);

/*
 * Page-locks host memory for every context (CU_MEMHOSTREGISTER_PORTABLE), so
 * that copies to and from it run at DMA speed instead of through staging
 * buffers. The registration lives in the primary context of device ordinal,
 * which stays retained until cu_host_unregister(): name a device that is
 * already in use, or CUDA creates a context on an idle GPU for it.
 */
int cu_host_register(void *p, size_t n, int ordinal, bool readonly);

/* Copy bandwidth of one GPU, bytes per second (best of a few passes). */
struct cu_bandwidth {
	uint64_t dtod;          /* device memory to device memory */
	uint64_t htod;          /* page-locked host memory to the device */
	uint64_t htod_small_ns; /* one CU_SMALL_COPY-byte copy of that kind, waited for */
};
#define CU_SMALL_COPY 4096U
/* Measures GPU ordinal's copy bandwidth with two device buffers and one
 * page-locked host buffer of size bytes each, all freed before it returns.
 * Pool: blocks for the copies (a few milliseconds on an H200 at 32 MiB). */
int cu_measure_bandwidth(int ordinal, size_t size, struct cu_bandwidth *ret);
/* Whether no driver work of this process runs now, on any thread (copies,
 * imports, releases, page-locking...): a copy started now waits behind
 * none of ours. A snapshot: work may start right after. Any thread. */
bool cu_idle(void);
int cu_host_unregister(void *p, int ordinal);

/*
 * A dma-buf fd (O_CLOEXEC) for [base, base + size), for ibv_reg_dmabuf_mr().
 * Both must be host-page aligned; the range must be one allocation (or fully
 * mapped VMM range) of one device. Seen on an H200 (driver 580): a VMM
 * import and any 2 MiB sub-range of it export fine; a legacy allocation
 * opened with cu_ipc_open() does not (CUDA_ERROR_INVALID_VALUE, -EINVAL, at
 * every length), although the process that allocated it can export it.
 */
int cu_dmabuf_fd(uint64_t base, uint64_t size, int *ret_fd);

/*
 * The same for the whole allocation that holds ptr, as NICs register whole
 * allocations (Monarch, Mooncake): its size is rounded up to the host page.
 * ibv_reg_dmabuf_mr's offset for ptr is ptr - *ret_base. For a VMM range
 * mapped from several allocations the driver reports one segment only: use
 * cu_dmabuf_fd() with the mapping's own range there.
 */
int cu_dmabuf_fd_for(uint64_t ptr, int *ret_fd, uint64_t *ret_base, uint64_t *ret_size);

#endif
