/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A CUDA driver without a GPU, installed with cu_set_ops(), for the fuzzers
 * and the cuda unit suite: two devices whose "device memory" is host heap,
 * so copies are memmove and ASan sees every byte the daemon touches. Legacy
 * IPC handles open 1 MiB on the device named by the handle's byte 1 (byte 0
 * == 0x5a: an invalid handle); VMM fds import as a 2 MiB-granular
 * allocation on device 1 (fake_cuda.vmm_device). Contexts are per thread,
 * as the driver's are: pool threads push and pop.
 *
 * A copy touches only memory its context's device reaches, as on a GPU: a
 * VMM mapping the devices cuMemSetAccess named, an allocation of its own
 * device's contexts, or of another device whose memory peer access
 * (cuCtxEnablePeerAccess) opened; else CUDA_ERROR_ILLEGAL_ADDRESS.
 * cuMemcpyPeer goes peer to peer where access is enabled both ways, and
 * needs both devices to reach both sides then; staged otherwise, where each
 * side needs only its own context.
 *
 * Where a real driver returns an error, so does the fake; what no driver
 * reports but only a bug in the caller causes (a release without a retain,
 * pushes never popped) aborts, so neither a fuzzer nor a test misses it.
 * fake-cuda.h exposes the knobs and counts the unit tests use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/gpu/cuda.h"
#include "fake.h"
#include "util/macro.h"

#if HAVE_CUDA_H
#include "fake-cuda.h"

#define N_DEV FAKE_CUDA_DEVICES
#define GRAN FAKE_CUDA_GRAN

enum alloc_kind {
	ALLOC_MEM,     /* fake_cuda_alloc(): kept to the end */
	ALLOC_IPC,     /* cuIpcOpenMemHandle: freed on close */
	ALLOC_MAPPING, /* cuMemMap: the reservation owns the bytes */
	ALLOC_OWN,     /* cuMemAlloc: the daemon's own (bandwidth measurement) */
};

struct fake_alloc {
	CUdeviceptr base;
	size_t size;
	CUcontext ctx; /* NULL: a VMM mapping (no context) */
	int device;
	unsigned access; /* ctx NULL: devices that may touch it, a bit each */
	enum alloc_kind kind;
	bool used;
};

/* The devices' primary contexts, then one a client created. */
static int ctx_tags[N_DEV + 1];
#define PRIMARY(d) ((CUcontext)&ctx_tags[d])
#define OWN_CTX ((CUcontext)&ctx_tags[N_DEV])

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_alloc allocs[64];
/* cuMemAddressReserve's ranges; size 0: a free slot. */
static struct {
	CUdeviceptr base;
	size_t size;
} reservations[64];
static CUmemGenericAllocationHandle next_handle = 0x1000;
/* The device of each imported handle, by handle % 256. */
static int handle_device[256];
static __thread CUcontext stack[8];
static __thread int depth;

struct fake_cuda_state fake_cuda = { .version = 13000, .vmm_device = 1 };

_printf_(1, 2) static _Noreturn void violation(const char *fmt, ...)
{
	va_list ap;

	fputs("fake CUDA driver: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

CUcontext fake_cuda_primary(int device)
{
	return PRIMARY(device);
}

CUcontext fake_cuda_own_ctx(void)
{
	return OWN_CTX;
}

/* A context's device; -1 for none. */
static int ctx_device(CUcontext c)
{
	for (int d = 0; d < N_DEV; d++)
		if (c == PRIMARY(d))
			return d;
	return c == OWN_CTX ? 0 : -1;
}

CUcontext fake_cuda_current(void)
{
	return depth ? stack[depth - 1] : NULL;
}

int fake_cuda_depth(void)
{
	return depth;
}

/* Aligned as the driver aligns, and not a byte more for ASan to allow. */
static void *heap(size_t size)
{
	void *p;

	return posix_memalign(&p, GRAN, size) == 0 ? p : NULL;
}

/*
 * Device memory of a size the driver rounds to its granularity (an IPC
 * open, a VMM reservation): a GRAN-aligned anonymous mapping between two
 * pages without access, so a byte before or after faults as ASan would have
 * reported it on a heap block, and so does any use after unmap_guarded().
 * Zero-filled, and it costs only the pages touched: a 64 MiB heap block
 * (allocated, poisoned, quarantined on free) was much of what a fuzz input
 * cost.
 */
static void *map_guarded(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), span = size + GRAN + 2 * page;
	uint8_t *raw, *base, *end;

	raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	base = (uint8_t *)(((uintptr_t)raw + page + GRAN - 1) & ~(GRAN - 1));
	end = base + size + page;
	/* Keep one page either side; give the rest of the slack back. */
	if (base - page > raw)
		munmap(raw, (size_t)(base - page - raw));
	if (end < raw + span)
		munmap(end, (size_t)(raw + span - end));
	if (mprotect(base, size, PROT_READ | PROT_WRITE) < 0) {
		munmap(base - page, size + 2 * page);
		return NULL;
	}
	return base;
}

static void unmap_guarded(void *p, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (munmap((uint8_t *)p - page, size + 2 * page) < 0)
		violation("unmapping %zu bytes at %p: %m", size, p);
}

/* Copies the entry under the lock: the table may change meanwhile. */
static bool find(CUdeviceptr p, struct fake_alloc *ret)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++)
		if (allocs[i].used && p >= allocs[i].base && p < allocs[i].base + allocs[i].size) {
			*ret = allocs[i];
			found = true;
			break;
		}
	pthread_mutex_unlock(&lock);
	return found;
}

unsigned fake_cuda_access(CUdeviceptr p)
{
	struct fake_alloc a;

	return find(p, &a) ? a.access : 0;
}

static bool add(CUdeviceptr base, size_t size, CUcontext ctx, int device, enum alloc_kind kind,
		unsigned access)
{
	bool ok = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (allocs[i].used)
			continue;
		allocs[i] = (struct fake_alloc){ .base = base,
						 .size = size,
						 .ctx = ctx,
						 .device = device,
						 .access = access,
						 .kind = kind,
						 .used = true };
		if (kind == ALLOC_MAPPING)
			fake_cuda.n_mapped++;
		ok = true;
		break;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

/*
 * Only the kind that made it, and only from the base: what cuIpcCloseMemHandle
 * and cuMemUnmap accept. ctx: the context the caller must have current
 * (IPC opens live in the one they were opened in).
 */
static CUresult drop(CUdeviceptr base, enum alloc_kind kind, CUcontext ctx)
{
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (!allocs[i].used || allocs[i].base != base || allocs[i].kind != kind)
			continue;
		if ((kind == ALLOC_IPC || kind == ALLOC_OWN) && allocs[i].ctx != ctx) {
			res = CUDA_ERROR_INVALID_CONTEXT;
			break;
		}
		if (kind == ALLOC_IPC)
			unmap_guarded((void *)(uintptr_t)allocs[i].base, allocs[i].size);
		else if (kind == ALLOC_OWN)
			free((void *)(uintptr_t)allocs[i].base);
		else
			fake_cuda.n_mapped--;
		allocs[i].used = false;
		res = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&lock);
	return res;
}

CUdeviceptr fake_cuda_alloc(size_t size, CUcontext ctx, int device)
{
	void *mem = heap(size);

	if (!mem || !add((uintptr_t)mem, size, ctx, device, ALLOC_MEM, 1U << device))
		violation("no room for a %zu-byte allocation", size);
	return (uintptr_t)mem;
}

/* What the daemon still holds of the driver's, for the fuzzer's leak check. */
int fake_cuda_live(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = fake_cuda.n_handles + fake_cuda.n_reserved + fake_cuda.n_events;
	for (int d = 0; d < N_DEV; d++)
		n += fake_cuda.primary_refs[d];
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++)
		n += allocs[i].used && allocs[i].kind != ALLOC_MEM;
	pthread_mutex_unlock(&lock);
	return n;
}

static CUresult f_init(unsigned flags)
{
	CUresult res;

	(void)flags;
	pthread_mutex_lock(&lock);
	res = fake_cuda.init_result;
	pthread_mutex_unlock(&lock);
	return res;
}

static CUresult f_version(int *v)
{
	pthread_mutex_lock(&lock);
	*v = fake_cuda.version;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* A few codes have no words, so the daemon's fallback for those runs too. */
static CUresult f_error_name(CUresult res, const char **s)
{
	switch (res) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		*s = "CUDA_ERROR_OUT_OF_MEMORY";
		return CUDA_SUCCESS;
	case CUDA_ERROR_INVALID_VALUE:
		*s = "CUDA_ERROR_INVALID_VALUE";
		return CUDA_SUCCESS;
	case CUDA_ERROR_NO_DEVICE:
		*s = "CUDA_ERROR_NO_DEVICE";
		return CUDA_SUCCESS;
	default:
		*s = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult f_error_string(CUresult res, const char **s)
{
	if (res != CUDA_ERROR_OUT_OF_MEMORY) {
		*s = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	*s = "out of memory";
	return CUDA_SUCCESS;
}

static CUresult f_count(int *n)
{
	*n = N_DEV;
	return CUDA_SUCCESS;
}

static CUresult f_get(CUdevice *d, int ordinal)
{
	if (ordinal < 0 || ordinal >= N_DEV)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

static CUresult f_name(char *name, int len, CUdevice d)
{
	snprintf(name, len, "Fake GPU %d", (int)d);
	return CUDA_SUCCESS;
}

static CUresult f_pci(char *bus, int len, CUdevice d)
{
	snprintf(bus, len, "0000:%02X:00.0", 0x10 + (int)d);
	return CUDA_SUCCESS;
}

static CUresult f_total(size_t *bytes, CUdevice d)
{
	(void)d;
	*bytes = (size_t)80 << 30;
	return CUDA_SUCCESS;
}

static CUresult f_attribute(int *v, CUdevice_attribute attr, CUdevice d)
{
	(void)attr;
	(void)d;
	*v = 1;
	return CUDA_SUCCESS;
}

static CUresult f_retain(CUcontext *ctx, CUdevice d)
{
	if (d < 0 || d >= N_DEV)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	if (fake_cuda.primary_refs[d]++ == 0)
		fake_cuda.primary_creates[d]++;
	pthread_mutex_unlock(&lock);
	*ctx = PRIMARY(d);
	return CUDA_SUCCESS;
}

/* One release too many destroys a context someone else still uses. */
static CUresult f_release(CUdevice d)
{
	bool retained;

	if (d < 0 || d >= N_DEV)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	retained = fake_cuda.primary_refs[d] > 0;
	if (retained)
		fake_cuda.primary_refs[d]--;
	pthread_mutex_unlock(&lock);
	if (!retained)
		violation("device %d's primary context released without a retain", (int)d);
	return CUDA_SUCCESS;
}

/* No caller nests this deep: more means pushes without their pops. */
static CUresult f_push(CUcontext c)
{
	if (depth == (int)ELEMENTSOF(stack))
		violation("context stack overflow: pushes without pops");
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

static CUresult f_pop(CUcontext *c)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*c = stack[--depth];
	return CUDA_SUCCESS;
}

static CUresult f_get_current(CUcontext *c)
{
	*c = fake_cuda_current();
	return CUDA_SUCCESS;
}

static CUresult f_set_current(CUcontext c)
{
	if (depth)
		stack[depth - 1] = c;
	else if (c)
		stack[depth++] = c;
	return CUDA_SUCCESS;
}

static CUresult f_attr(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
	struct fake_alloc a;

	if (!find(p, &a))
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = a.ctx;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a.device;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(CUmemorytype *)data = CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* The driver's behaviour with another device's context current. */
static CUresult f_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	CUcontext cur = fake_cuda_current();
	struct fake_alloc a;

	if (!find(p, &a) || !cur || (a.ctx && a.ctx != cur))
		return CUDA_ERROR_NOT_FOUND;
	*base = a.base;
	*size = a.size;
	return CUDA_SUCCESS;
}

/* Whether device may touch device memory p (host memory: always). */
static bool reaches(int device, CUdeviceptr p)
{
	struct fake_alloc a;
	bool ok;
	int owner;

	if (!find(p, &a))
		return true;
	if (!a.ctx)
		return device >= 0 && (a.access & (1U << device));
	owner = ctx_device(a.ctx);
	pthread_mutex_lock(&lock);
	ok = owner == device ||
	     (device >= 0 && owner >= 0 && fake_cuda.peer_enabled[device][owner]);
	pthread_mutex_unlock(&lock);
	return ok;
}

/* Whether the calling thread may copy between dst and src now: a
 * context current, and each device side one its device reaches. */
static CUresult copy_check(const void *dst, const void *src, bool dst_dev, bool src_dev)
{
	int device = ctx_device(fake_cuda_current());

	if (!fake_cuda_current())
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((dst_dev && !reaches(device, (uintptr_t)dst)) ||
	    (src_dev && !reaches(device, (uintptr_t)src)))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	return CUDA_SUCCESS;
}

/* Copies need a context, touch only what its device reaches and stay
 * inside what is allocated, as on a GPU (where the alternative is an MMU
 * fault). dst_dev and src_dev: which sides are device memory. */
static CUresult copy(void *dst, const void *src, size_t n, bool dst_dev, bool src_dev)
{
	CUresult res = copy_check(dst, src, dst_dev, src_dev);

	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&lock);
	fake_cuda.last_copy_ctx = fake_cuda_current();
	res = fake_cuda.copy_result;
	pthread_mutex_unlock(&lock);
	if (res != CUDA_SUCCESS)
		return res;
	memmove(dst, src, n);
	return CUDA_SUCCESS;
}

/*
 * Asynchronous copies land only when waited for, so that a caller that
 * answers before waiting is caught with the old bytes: each thread's
 * per-thread default stream (the only stream the fake takes) holds its
 * copies until an event is recorded behind them; cuEventSynchronize on any
 * thread, or the queuing thread's cuCtxSynchronize, moves them then, and
 * returns copy_result. Live events count in fake_cuda_live().
 */
struct fake_copy {
	void *dst;
	const void *src;
	size_t n;
};
#define FAKE_STREAM_MAX 8
struct CUevent_st {
	struct fake_copy copies[FAKE_STREAM_MAX];
	unsigned n;
	CUcontext ctx;
};
static __thread struct fake_copy stream_copies[FAKE_STREAM_MAX];
static __thread unsigned stream_n;

static CUresult copies_land(const struct fake_copy *c, unsigned n)
{
	CUresult res;

	pthread_mutex_lock(&lock);
	res = fake_cuda.copy_result;
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < n && res == CUDA_SUCCESS; i++)
		memmove(c[i].dst, c[i].src, c[i].n);
	return res;
}

static CUresult copy_async(void *dst, const void *src, size_t n, bool dst_dev, bool src_dev,
			   CUstream stream)
{
	CUresult res = copy_check(dst, src, dst_dev, src_dev);

	if (stream != CU_STREAM_PER_THREAD)
		violation("an asynchronous copy on stream %p, not the thread's own",
			  (void *)stream);
	if (res != CUDA_SUCCESS)
		return res;
	if (stream_n == FAKE_STREAM_MAX)
		violation("%u asynchronous copies queued and never waited for", stream_n);
	stream_copies[stream_n++] = (struct fake_copy){ .dst = dst, .src = src, .n = n };
	pthread_mutex_lock(&lock);
	fake_cuda.last_copy_ctx = fake_cuda_current();
	fake_cuda.n_async_copies++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_htod_async(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	return copy_async((void *)(uintptr_t)dst, src, n, true, false, stream);
}

static CUresult f_dtoh_async(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
	return copy_async(dst, (const void *)(uintptr_t)src, n, false, true, stream);
}

static CUresult f_event_create(CUevent *ev, unsigned flags)
{
	(void)flags;
	if (!fake_cuda_current())
		return CUDA_ERROR_INVALID_CONTEXT;
	*ev = calloc(1, sizeof(**ev));
	if (!*ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*ev)->ctx = fake_cuda_current();
	pthread_mutex_lock(&lock);
	fake_cuda.n_events++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent ev, CUstream stream)
{
	if (stream != CU_STREAM_PER_THREAD)
		violation("an event recorded on stream %p, not the thread's own", (void *)stream);
	if (fake_cuda_current() != ev->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	memcpy(ev->copies, stream_copies, sizeof(stream_copies));
	ev->n = stream_n;
	stream_n = 0;
	return CUDA_SUCCESS;
}

static CUresult f_event_sync(CUevent ev)
{
	unsigned n = ev->n;

	ev->n = 0;
	return copies_land(ev->copies, n);
}

/* Done at once: the copies land now, as for cuEventSynchronize (a test
 * that wants the loop to look again wraps this). */
static CUresult f_event_query(CUevent ev)
{
	return f_event_sync(ev);
}

static CUresult f_event_destroy(CUevent ev)
{
	if (ev->n)
		violation("an event destroyed before the %u copies it follows were waited for",
			  ev->n);
	free(ev);
	pthread_mutex_lock(&lock);
	fake_cuda.n_events--;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_htod(CUdeviceptr dst, const void *src, size_t n)
{
	return copy((void *)(uintptr_t)dst, src, n, true, false);
}

static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t n)
{
	return copy(dst, (const void *)(uintptr_t)src, n, false, true);
}

static CUresult f_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, true, true);
}

/*
 * Each side in its own context. Peer to peer when access is enabled both
 * ways: either device's copy engine may run it, so both must reach both
 * sides (a VMM mapping needs cuMemSetAccess for the other device too).
 * Staged otherwise: through host memory, each side by its own device.
 */
static CUresult f_memcpy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
			      CUcontext src_ctx, size_t n)
{
	int dd = ctx_device(dst_ctx), sd = ctx_device(src_ctx);
	bool p2p;
	CUresult res;

	if (dd < 0 || sd < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	p2p = dd != sd && fake_cuda.peer_enabled[dd][sd] && fake_cuda.peer_enabled[sd][dd];
	pthread_mutex_unlock(&lock);
	if (!reaches(dd, dst) || !reaches(sd, src) ||
	    (p2p && (!reaches(sd, dst) || !reaches(dd, src))))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	pthread_mutex_lock(&lock);
	fake_cuda.last_peer_dst_ctx = dst_ctx;
	fake_cuda.last_peer_src_ctx = src_ctx;
	if (p2p)
		fake_cuda.n_copies_p2p++;
	else
		fake_cuda.n_copies_staged++;
	res = fake_cuda.copy_result;
	pthread_mutex_unlock(&lock);
	if (res != CUDA_SUCCESS)
		return res;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

static CUresult f_ctx_get_device(CUdevice *d)
{
	int device = ctx_device(fake_cuda_current());

	if (device < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = device;
	return CUDA_SUCCESS;
}

static CUresult f_can_access_peer(int *can, CUdevice d, CUdevice peer)
{
	if (d < 0 || d >= N_DEV || peer < 0 || peer >= N_DEV)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	*can = d != peer && !fake_cuda.no_peer;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* The link ranks 0 (the best); other attributes say whether it exists. */
static CUresult f_p2p_attribute(int *v, CUdevice_P2PAttribute attr, CUdevice d, CUdevice peer)
{
	int can;
	CUresult res = f_can_access_peer(&can, d, peer);

	if (res != CUDA_SUCCESS || d == peer)
		return CUDA_ERROR_INVALID_DEVICE;
	*v = attr == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : can;
	return CUDA_SUCCESS;
}

static CUresult f_enable_peer(CUcontext peer, unsigned flags)
{
	int d = ctx_device(fake_cuda_current()), p = ctx_device(peer);
	CUresult res = CUDA_SUCCESS;

	if (d < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (flags || p < 0 || p == d)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (fake_cuda.no_peer)
		res = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	else if (fake_cuda.peer_enabled[d][p])
		res = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	else
		fake_cuda.peer_enabled[d][p] = true;
	pthread_mutex_unlock(&lock);
	return res;
}

static CUresult f_host_register(void *p, size_t n, unsigned flags)
{
	CUcontext cur = fake_cuda_current();

	(void)p;
	(void)n;
	pthread_mutex_lock(&lock);
	fake_cuda.last_register_ctx = cur;
	fake_cuda.last_register_flags = flags;
	pthread_mutex_unlock(&lock);
	return cur ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_host_unregister(void *p)
{
	(void)p;
	return fake_cuda_current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	CUcontext cur = fake_cuda_current();
	int device = (unsigned char)h.reserved[1] % N_DEV;
	void *mem;

	pthread_mutex_lock(&lock);
	fake_cuda.last_ipc_flags = flags;
	pthread_mutex_unlock(&lock);
	if (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
		return CUDA_ERROR_INVALID_VALUE;
	if (!cur)
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((unsigned char)h.reserved[0] == 0x5a)
		return CUDA_ERROR_INVALID_VALUE;
	mem = map_guarded(FAKE_CUDA_IPC_SIZE);
	if (!mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!add((uintptr_t)mem, FAKE_CUDA_IPC_SIZE, cur, device, ALLOC_IPC, 0)) {
		unmap_guarded(mem, FAKE_CUDA_IPC_SIZE);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*p = (uintptr_t)mem;
	return CUDA_SUCCESS;
}

static CUresult f_ipc_close(CUdeviceptr p)
{
	return drop(p, ALLOC_IPC, fake_cuda_current());
}

static CUresult f_import(CUmemGenericAllocationHandle *h, void *fd, CUmemAllocationHandleType type)
{
	if ((intptr_t)fd < 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	fake_cuda.n_handles++;
	handle_device[next_handle % ELEMENTSOF(handle_device)] = fake_cuda.vmm_device;
	*h = next_handle++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
	int device;

	pthread_mutex_lock(&lock);
	device = handle_device[h % ELEMENTSOF(handle_device)];
	pthread_mutex_unlock(&lock);
	*prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				       .location = { CU_MEM_LOCATION_TYPE_DEVICE, device } };
	return CUDA_SUCCESS;
}

static CUresult f_gran(size_t *g, const CUmemAllocationProp *prop,
		       CUmemAllocationGranularity_flags flags)
{
	(void)prop;
	(void)flags;
	*g = GRAN;
	return CUDA_SUCCESS;
}

static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
			  unsigned long long flags)
{
	void *mem;

	(void)align;
	(void)addr;
	(void)flags;
	if (size == 0 || size % GRAN != 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* A real reservation of any size costs nothing; heap does. */
	if (size > (64UL << 20))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mem = map_guarded(size);
	if (!mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(reservations); i++)
		if (!reservations[i].size) {
			reservations[i].base = (uintptr_t)mem;
			reservations[i].size = size;
			fake_cuda.n_reserved++;
			*p = (uintptr_t)mem;
			mem = NULL;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (mem) {
		unmap_guarded(mem, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

/* Only a whole reservation, as the driver frees it. */
static CUresult f_free(CUdeviceptr p, size_t size)
{
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(reservations); i++)
		if (reservations[i].size && reservations[i].base == p) {
			if (reservations[i].size == size) {
				reservations[i].size = 0;
				fake_cuda.n_reserved--;
				res = CUDA_SUCCESS;
			}
			break;
		}
	pthread_mutex_unlock(&lock);
	if (res == CUDA_SUCCESS)
		unmap_guarded((void *)(uintptr_t)p, size);
	return res;
}

/* A mapping is context-less device memory of its handle's device, which
 * no device may touch until cuMemSetAccess. */
static CUresult f_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	CUresult res;

	(void)offset;
	(void)flags;
	pthread_mutex_lock(&lock);
	res = fake_cuda.map_result;
	pthread_mutex_unlock(&lock);
	if (res != CUDA_SUCCESS)
		return res;
	return add(p, size, NULL, handle_device[h % ELEMENTSOF(handle_device)], ALLOC_MAPPING, 0) ?
		       CUDA_SUCCESS :
		       CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_unmap(CUdeviceptr p, size_t size)
{
	(void)size;
	return drop(p, ALLOC_MAPPING, NULL);
}

static CUresult f_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (d[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d[i].location.id < 0 ||
		    d[i].location.id >= N_DEV)
			return CUDA_ERROR_INVALID_DEVICE;
		if (d[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    d[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    d[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&lock);
	fake_cuda.last_access_count = n;
	if (n)
		fake_cuda.last_access = d[0];
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (!allocs[i].used || allocs[i].kind != ALLOC_MAPPING || allocs[i].base < p ||
		    allocs[i].base >= p + size)
			continue;
		for (size_t k = 0; k < n; k++) {
			unsigned bit = 1U << d[k].location.id;

			if (d[k].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
				allocs[i].access &= ~bit;
			else
				allocs[i].access |= bit;
		}
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_mem_release(CUmemGenericAllocationHandle h)
{
	(void)h;
	pthread_mutex_lock(&lock);
	fake_cuda.n_handles--;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Every handle here is imported (the fake has no cuMemCreate), and the
 * driver refuses to export an imported allocation again
 * (CUDA_ERROR_INVALID_VALUE on an H100): so does this; counted. */
static CUresult f_export(void *shareable, CUmemGenericAllocationHandle h,
			 CUmemAllocationHandleType type, unsigned long long flags)
{
	(void)shareable;
	(void)h;
	(void)type;
	(void)flags;
	pthread_mutex_lock(&lock);
	fake_cuda.n_exports++;
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

/* Without O_CLOEXEC, as a driver may hand it out. */
static CUresult f_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
			 unsigned long long flags)
{
	struct fake_alloc a;
	int fds[2];

	(void)flags;
	if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || !find(p, &a))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	fake_cuda.last_dmabuf_base = p;
	fake_cuda.last_dmabuf_size = size;
	pthread_mutex_unlock(&lock);
	if (pipe(fds) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	close(fds[1]);
	*(int *)handle = fds[0];
	return CUDA_SUCCESS;
}

static CUresult f_sync(void)
{
	unsigned n = stream_n;
	CUresult res;

	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	stream_n = 0;
	res = copies_land(stream_copies, n);
	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&lock);
	fake_cuda.n_syncs++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Device memory of the current context's device, as cuMemAlloc makes it. */
static CUresult f_mem_alloc(CUdeviceptr *p, size_t size)
{
	CUcontext ctx = fake_cuda_current();
	void *mem;
	int device = -1;

	for (int d = 0; d < N_DEV; d++)
		if (ctx == PRIMARY(d))
			device = d;
	if (device < 0 || size == 0)
		return device < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_VALUE;
	mem = heap(size);
	if (!mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!add((uintptr_t)mem, size, ctx, device, ALLOC_OWN, 0)) {
		free(mem);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*p = (uintptr_t)mem;
	return CUDA_SUCCESS;
}

static CUresult f_mem_free(CUdeviceptr p)
{
	return drop(p, ALLOC_OWN, fake_cuda_current());
}

const struct cu_ops fake_cu_ops = {
	.cuInit = f_init,
	.cuDriverGetVersion = f_version,
	.cuGetErrorName = f_error_name,
	.cuGetErrorString = f_error_string,
	.cuDeviceGetCount = f_count,
	.cuDeviceGet = f_get,
	.cuDeviceGetName = f_name,
	.cuDeviceGetAttribute = f_attribute,
	.cuDeviceGetPCIBusId = f_pci,
	.cuDeviceTotalMem = f_total,
	.cuDevicePrimaryCtxRetain = f_retain,
	.cuDevicePrimaryCtxRelease = f_release,
	.cuCtxPushCurrent = f_push,
	.cuCtxPopCurrent = f_pop,
	.cuCtxGetCurrent = f_get_current,
	.cuCtxSetCurrent = f_set_current,
	.cuCtxSynchronize = f_sync,
	.cuPointerGetAttribute = f_attr,
	.cuMemGetAddressRange = f_range,
	.cuMemcpyHtoD = f_htod,
	.cuMemcpyDtoH = f_dtoh,
	.cuMemcpyDtoD = f_dtod,
	.cuMemcpyPeer = f_memcpy_peer,
	.cuMemcpyHtoDAsync = f_htod_async,
	.cuMemcpyDtoHAsync = f_dtoh_async,
	.cuEventCreate = f_event_create,
	.cuEventRecord = f_event_record,
	.cuEventSynchronize = f_event_sync,
	.cuEventQuery = f_event_query,
	.cuEventDestroy = f_event_destroy,
	.cuCtxGetDevice = f_ctx_get_device,
	.cuCtxEnablePeerAccess = f_enable_peer,
	.cuDeviceCanAccessPeer = f_can_access_peer,
	.cuDeviceGetP2PAttribute = f_p2p_attribute,
	.cuMemHostRegister = f_host_register,
	.cuMemHostUnregister = f_host_unregister,
	.cuIpcOpenMemHandle = f_ipc_open,
	.cuIpcCloseMemHandle = f_ipc_close,
	.cuMemImportFromShareableHandle = f_import,
	.cuMemExportToShareableHandle = f_export,
	.cuMemGetAllocationPropertiesFromHandle = f_props,
	.cuMemGetAllocationGranularity = f_gran,
	.cuMemAddressReserve = f_reserve,
	.cuMemAddressFree = f_free,
	.cuMemMap = f_map,
	.cuMemUnmap = f_unmap,
	.cuMemSetAccess = f_access,
	.cuMemRelease = f_mem_release,
	.cuMemGetHandleForAddressRange = f_dmabuf,
	.cuMemAlloc = f_mem_alloc,
	.cuMemFree = f_mem_free,
};

void fake_cuda_install(void)
{
	if (cu_set_ops(&fake_cu_ops) < 0)
		abort();
}

#else /* !HAVE_CUDA_H */

void fake_cuda_install(void)
{
}

int fake_cuda_live(void)
{
	return 0;
}

#endif
