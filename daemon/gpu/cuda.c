/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA layer (see cuda.h). The one file that calls the driver API: every
 * call goes through the table in cuda-ops.h, and every CUresult becomes a
 * negative errno here, with the driver's own words kept for cu_last_error().
 *
 * Built without cuda.h, the second half of this file supplies stubs that
 * fail with -EOPNOTSUPP, so nothing else in the daemon needs an #if.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/gpu/cuda.h"
#include "daemon/core/log.h"

const char *cu_copy_path_name(enum cu_copy_path path)
{
	switch (path) {
	case CU_COPY_SAME_DEVICE:
		return "same-device";
	case CU_COPY_PEER:
		return "peer";
	case CU_COPY_STAGED:
		return "staged";
	}
	return "unknown";
}

#if HAVE_CUDA_H

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#include "daemon/gpu/cuda-ops.h"

#define CU_LIBRARY "libcuda.so.1"
/* cuGetProcAddress_v2, through which every entry point is found, is 12.0's. */
#define CU_DRIVER_MIN 12000
#define CU_ERR_MAX 512

/* A header upgrade that changes an entry point's ABI must break the build,
 * not the call: the table's types have to be cuda.h's prototypes. */
#define CU_OPS_CHECK(name, version)                                                              \
	_Static_assert(__builtin_types_compatible_p(PFN_##name##_v##version, __typeof__(&name)), \
		       "PFN_" #name "_v" #version " is not the ABI cuda.h declares");
CU_OPS_LIST(CU_OPS_CHECK)
#undef CU_OPS_CHECK

_Static_assert(sizeof(CUipcMemHandle) == CU_IPC_HANDLE_SIZE, "CUipcMemHandle changed size");
_Static_assert(sizeof(CUdeviceptr) == sizeof(uint64_t), "CUdeviceptr is not 64 bits");

static const struct cu_sym {
	const char *name;
	int version;
	size_t offset;
} cu_syms[] = {
/* clang-format off */
#define CU_OPS_SYM(name, version) { #name, version, offsetof(struct cu_ops, name) },
	/* clang-format on */
	CU_OPS_LIST(CU_OPS_SYM)
#undef CU_OPS_SYM
};

static struct cu_ops cu;
static bool cu_fake; /* cu_set_ops() installed the table */
static bool cu_load_started;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static int cu_load_result;
static char cu_load_msg[CU_ERR_MAX];
static int cu_n_devices;
static atomic_uint *cu_primary_refs; /* our retains, per device */
/* cuDeviceCanAccessPeer(a, b) at [a * n + b], asked once at load. */
static bool *cu_can_peer;
static bool cu_peer_off; /* RDMAMEMD_CUDA_PEER_COPIES=off */
/* Copies from GPU a's memory to GPU b's at [(a * n + b) * 2]: peer, staged. */
static atomic_uint_fast64_t *cu_peer_copies;

/* Per thread: copies fail on pool threads and report from there. */
static __thread char cu_err[CU_ERR_MAX];

/*
 * Driver work in flight, on any thread: copies, imports, releases, IPC opens
 * and closes, page-locking, the bandwidth probe, dma-buf exports. Each of
 * those functions counts itself for as long as it runs (CU_BUSY), so that
 * cu_idle() can tell the loop that a copy it makes itself would queue
 * behind none of the daemon's own (they share the context's stream) and
 * wait for no driver lock the daemon holds.
 */
static atomic_uint cu_in_flight;

static void cu_busy_leave(_unused_ unsigned *scope)
{
	atomic_fetch_sub(&cu_in_flight, 1);
}

#define CU_BUSY                  \
	_cleanup_(cu_busy_leave) \
		_unused_ unsigned cu_busy_scope = atomic_fetch_add(&cu_in_flight, 1)

bool cu_idle(void)
{
	return atomic_load(&cu_in_flight) == 0;
}

/* Of those, copies started and not finished (cu_copy_htod_start()): while
 * they are all there is, cu_copy_poll() may ask the driver about them. */
static atomic_uint cu_started;

/* The one CUresult to errno table; whatever it does not name is -EIO. */
static const struct {
	CUresult result;
	int err;
} cu_errno_map[] = {
	{ CUDA_ERROR_OUT_OF_MEMORY, ENOMEM },
	{ CUDA_ERROR_INVALID_VALUE, EINVAL },
	{ CUDA_ERROR_NOT_SUPPORTED, EOPNOTSUPP },
	{ CUDA_ERROR_NO_DEVICE, ENODEV },
};

static int cu_result_to_errno(CUresult res)
{
	for (size_t i = 0; i < ELEMENTSOF(cu_errno_map); i++)
		if (cu_errno_map[i].result == res)
			return -cu_errno_map[i].err;
	return -EIO;
}

/* Records a failure that is not a CUresult; returns err. */
_printf_(2, 3) static int cu_errorf(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cu_err, sizeof(cu_err), fmt, ap);
	va_end(ap);
	return log_debug_errno(err, "CUDA: %s", cu_err);
}

/* Records a failed driver call as "CUDA_ERROR_X: text (call)"; returns its errno. */
static int cu_fail(CUresult res, const char *call)
{
	const char *name = NULL, *text = NULL;

	if (cu.cuGetErrorName && cu.cuGetErrorName(res, &name) != CUDA_SUCCESS)
		name = NULL;
	if (cu.cuGetErrorString && cu.cuGetErrorString(res, &text) != CUDA_SUCCESS)
		text = NULL;
	if (name)
		return cu_errorf(cu_result_to_errno(res), "%s: %s (%s)", name,
				 text ? text : "no description", call);
	return cu_errorf(cu_result_to_errno(res), "CUresult %d (%s)", (int)res, call);
}

static int cu_check(CUresult res, const char *call)
{
	return res == CUDA_SUCCESS ? 0 : cu_fail(res, call);
}

/* Calls a driver entry point: 0, or its errno with cu_last_error() set. */
#define CU(fn, ...) cu_check(cu.fn(__VA_ARGS__), #fn)

static uint64_t mono_nsec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Keeps the first failure of a teardown that goes on past failures. */
static void cu_keep_first(int *r, int k, char *first)
{
	if (k < 0 && *r >= 0) {
		*r = k;
		memcpy(first, cu_err, CU_ERR_MAX);
	}
}

/* RDMAMEMD_CUDA_PEER_COPIES=off: stage every copy between GPUs (cuda.h). */
static bool peer_copies_off(void)
{
	const char *v = getenv("RDMAMEMD_CUDA_PEER_COPIES");

	return v && strcmp(v, "off") == 0;
}

static int cu_load_driver(void)
{
	PFN_cuGetProcAddress_v12000 get_proc = NULL;
	int version, n, r;
	void *lib;

	if (!cu_fake) {
		/*
		 * Never closed: the driver starts threads and keeps state that
		 * outlives any handle we could drop.
		 */
		lib = dlopen(CU_LIBRARY, RTLD_NOW | RTLD_LOCAL);
		if (!lib)
			return cu_errorf(
				-ENOENT,
				"%s could not be loaded (is the NVIDIA driver installed?): %s",
				CU_LIBRARY, dlerror());
		/* The bootstrap entry points, unversioned since CUDA 2 and 6. */
		*(void **)&cu.cuInit = dlsym(lib, "cuInit");
		*(void **)&cu.cuDriverGetVersion = dlsym(lib, "cuDriverGetVersion");
		*(void **)&cu.cuGetErrorName = dlsym(lib, "cuGetErrorName");
		*(void **)&cu.cuGetErrorString = dlsym(lib, "cuGetErrorString");
		*(void **)&get_proc = dlsym(lib, "cuGetProcAddress_v2");
		if (!cu.cuInit || !cu.cuDriverGetVersion)
			return cu_errorf(-ENOSYS, "%s has no cuInit or cuDriverGetVersion",
					 CU_LIBRARY);
	}

	r = CU(cuDriverGetVersion, &version);
	if (r < 0)
		return r;
	if (version < CU_DRIVER_MIN || (!cu_fake && !get_proc))
		return cu_errorf(
			-ENOSYS,
			"the NVIDIA driver supports CUDA %d.%d; rdmamemd needs %d.%d or later",
			version / 1000, version % 1000 / 10, CU_DRIVER_MIN / 1000,
			CU_DRIVER_MIN % 1000 / 10);

	r = CU(cuInit, 0);
	if (r < 0)
		return r;

	for (size_t i = 0; !cu_fake && i < ELEMENTSOF(cu_syms); i++) {
		void **slot = (void **)((char *)&cu + cu_syms[i].offset);
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		CUresult res;

		if (*slot)
			continue;
		/* The version the table's type was introduced in: that ABI exactly. */
		res = get_proc(cu_syms[i].name, slot, cu_syms[i].version,
			       CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
		if (res != CUDA_SUCCESS)
			return cu_fail(res, "cuGetProcAddress");
		if (!*slot || status != CU_GET_PROC_ADDRESS_SUCCESS)
			return cu_errorf(
				-ENOSYS,
				"the NVIDIA driver (CUDA %d.%d) has no %s with the CUDA %d.%d ABI",
				version / 1000, version % 1000 / 10, cu_syms[i].name,
				cu_syms[i].version / 1000, cu_syms[i].version % 1000 / 10);
	}

	r = CU(cuDeviceGetCount, &n);
	if (r < 0)
		return r;
	cu_primary_refs = calloc(n > 0 ? n : 1, sizeof(*cu_primary_refs));
	cu_can_peer = calloc(n > 0 ? (size_t)n * n : 1, sizeof(*cu_can_peer));
	cu_peer_copies = calloc(n > 0 ? (size_t)n * n * 2 : 1, sizeof(*cu_peer_copies));
	if (!cu_primary_refs || !cu_can_peer || !cu_peer_copies)
		return cu_errorf(-ENOMEM, "out of memory");
	cu_n_devices = n;
	/* The topology does not change under a running driver: asked once. A
	 * pair the driver cannot answer for is taken to have no peer access,
	 * which only costs speed (copies are staged). */
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			CUdevice da, db;
			int can = 0;

			if (a == b || CU(cuDeviceGet, &da, a) < 0 || CU(cuDeviceGet, &db, b) < 0 ||
			    CU(cuDeviceCanAccessPeer, &can, da, db) < 0)
				continue;
			cu_can_peer[a * n + b] = can;
			log_debug("CUDA: GPU %d %s reach GPU %d's memory (cuDeviceCanAccessPeer)",
				  a, can ? "can" : "cannot", b);
		}
	cu_peer_off = peer_copies_off();
	if (cu_peer_off)
		log_debug("CUDA: RDMAMEMD_CUDA_PEER_COPIES=off: copies between GPUs are staged");
	log_debug("CUDA driver %d.%d loaded, %d device(s)", version / 1000, version % 1000 / 10, n);
	return 0;
}

static void cu_do_load(void)
{
	cu_load_started = true;
	cu_load_result = cu_load_driver();
	if (cu_load_result < 0)
		memcpy(cu_load_msg, cu_err, sizeof(cu_load_msg));
}

int cu_load(void)
{
	pthread_once(&cu_once, cu_do_load);
	if (cu_load_result < 0)
		memcpy(cu_err, cu_load_msg, sizeof(cu_err));
	return cu_load_result;
}

int cu_set_ops(const struct cu_ops *ops)
{
	if (cu_load_started)
		return -EBUSY;
	cu = *ops;
	cu_fake = true;
	return 0;
}

const struct cu_ops *cu_get_ops(void)
{
	return cu_load() < 0 ? NULL : &cu;
}

const char *cu_last_error(void)
{
	return cu_err;
}

int cu_device_count(void)
{
	int r = cu_load();

	return r < 0 ? r : cu_n_devices;
}

static int cu_check_ordinal(int ordinal)
{
	if (ordinal < 0 || ordinal >= cu_n_devices)
		return cu_errorf(-ENODEV, "there is no CUDA device %d (this host has %d)", ordinal,
				 cu_n_devices);
	return 0;
}

/* The counts of copies from GPU a's memory to GPU b's: [0] peer to peer,
 * [1] staged. */
static atomic_uint_fast64_t *peer_copies_of(int a, int b)
{
	return &cu_peer_copies[((size_t)a * cu_n_devices + b) * 2];
}

/*
 * How bytes move between GPU a's memory and GPU b's: peer to peer only when
 * each can reach the other, so that it does not matter which device's copy
 * engine the driver picks, nor which way the bytes go.
 */
static enum cu_copy_path peer_path(int a, int b)
{
	if (a == b)
		return CU_COPY_SAME_DEVICE;
	if (!cu_peer_off && cu_can_peer[a * cu_n_devices + b] && cu_can_peer[b * cu_n_devices + a])
		return CU_COPY_PEER;
	return CU_COPY_STAGED;
}

static int cu_attr(CUdevice dev, CUdevice_attribute attr, int *ret)
{
	return CU(cuDeviceGetAttribute, ret, attr, dev);
}

int cu_device_info(int ordinal, struct cu_device_info *ret)
{
	struct cu_device_info info = { .ordinal = ordinal };
	int dma_buf, vmm, posix_fd, gdr_vmm, r;
	CUdevice dev;
	size_t mem;

	r = cu_load();
	if (r < 0)
		return r;
	r = cu_check_ordinal(ordinal);
	if (r < 0)
		return r;
	r = CU(cuDeviceGet, &dev, ordinal);
	if (r < 0)
		return r;
	r = CU(cuDeviceGetName, info.name, sizeof(info.name), dev);
	if (r < 0)
		return r;
	r = CU(cuDeviceGetPCIBusId, info.pci_bus_id, sizeof(info.pci_bus_id), dev);
	if (r < 0)
		return r;
	/* sysfs spells bus ids in lower case; so will the NIC table. */
	for (char *c = info.pci_bus_id; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	r = CU(cuDeviceTotalMem, &mem, dev);
	if (r < 0)
		return r;
	info.total_mem = mem;

	if ((r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major)) < 0 ||
	    (r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor)) < 0 ||
	    (r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, &dma_buf)) < 0 ||
	    (r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &vmm)) < 0 ||
	    (r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
			 &posix_fd)) < 0 ||
	    (r = cu_attr(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
			 &gdr_vmm)) < 0)
		return r;
	info.dma_buf = dma_buf;
	info.vmm = vmm;
	info.vmm_posix_fd = posix_fd;
	info.gdr_vmm = gdr_vmm;

	*ret = info;
	return 0;
}

/*
 * Taken around every change of a primary context's retains that might make
 * or destroy the context. Any retain may have the driver make the context
 * (100 ms and more) while holding it; a release may have it destroy one
 * (60 ms).
 *
 * An import with CU_NO_WAIT (the loop's) only tries it, and holds it for
 * the whole call (cu_primary_owned): it retains only a context the daemon
 * holds already, which the driver hands out at once, and no other thread
 * can let go of that context meanwhile, so that undoing the retain when a
 * later step fails is never the last release either.
 *
 * The context guard's retain and release, which the loop's copies make,
 * take no lock (PRIMARY_HELD): the mapping they copy with holds the context
 * throughout, so theirs is never the first retain or the last release.
 */
static pthread_mutex_t cu_primary_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread holds cu_primary_lock for a CU_NO_WAIT call. */
static __thread bool cu_primary_owned;

/* primary_retain_flags(), primary_release_flags(): of a context a live
 * mapping holds, which no retain can make and no release destroy. */
#define PRIMARY_HELD (1U << 8)

/* A retain's or a release's lock (flags as theirs): none for
 * PRIMARY_HELD, nor where this thread owns it already. */
static void primary_lock(unsigned flags)
{
	if (!(flags & PRIMARY_HELD) && !cu_primary_owned)
		pthread_mutex_lock(&cu_primary_lock);
}

static void primary_unlock(unsigned flags)
{
	if (!(flags & PRIMARY_HELD) && !cu_primary_owned)
		pthread_mutex_unlock(&cu_primary_lock);
}

/* With CU_NO_WAIT: takes cu_primary_lock for the caller's whole call, if
 * it is free; -EWOULDBLOCK otherwise. */
static int primary_own(unsigned flags)
{
	if (!(flags & CU_NO_WAIT))
		return 0;
	if (pthread_mutex_trylock(&cu_primary_lock) != 0)
		return cu_errorf(-EWOULDBLOCK, "a primary context is changing");
	cu_primary_owned = true;
	return 0;
}

static void primary_disown(unsigned flags)
{
	if (!(flags & CU_NO_WAIT))
		return;
	cu_primary_owned = false;
	pthread_mutex_unlock(&cu_primary_lock);
}

/*
 * The driver counts primary-context retains itself; our own count is for
 * balance checks (a release without a retain would destroy a context that
 * others use), for cu_primary_ctx_refs() and for CU_NO_WAIT's "held".
 * flags: CU_NO_WAIT, PRIMARY_HELD or 0.
 */
static int primary_retain_flags(int ordinal, unsigned flags, CUcontext *ret)
{
	CUcontext ctx;
	CUdevice dev;
	int r;

	r = cu_check_ordinal(ordinal);
	if (r < 0)
		return r;
	r = CU(cuDeviceGet, &dev, ordinal);
	if (r < 0)
		return r;
	/* CU_NO_WAIT: the caller owns the lock (primary_own()). */
	if ((flags & CU_NO_WAIT) && atomic_load(&cu_primary_refs[ordinal]) == 0)
		return cu_errorf(-EWOULDBLOCK, "device %d's primary context is not held", ordinal);
	primary_lock(flags);
	r = CU(cuDevicePrimaryCtxRetain, &ctx, dev);
	if (r >= 0)
		atomic_fetch_add(&cu_primary_refs[ordinal], 1);
	primary_unlock(flags);
	if (r < 0)
		return r;
	*ret = ctx;
	return 0;
}

static int primary_retain(int ordinal, CUcontext *ret)
{
	return primary_retain_flags(ordinal, 0, ret);
}

/* flags: PRIMARY_HELD or 0. */
static int primary_release_flags(int ordinal, unsigned flags)
{
	CUdevice dev;
	int r;

	r = cu_check_ordinal(ordinal);
	if (r < 0)
		return r;
	primary_lock(flags);
	if (atomic_load(&cu_primary_refs[ordinal]) == 0) {
		r = cu_errorf(-EINVAL, "device %d's primary context is not retained", ordinal);
		goto out;
	}
	r = CU(cuDeviceGet, &dev, ordinal);
	if (r >= 0)
		r = CU(cuDevicePrimaryCtxRelease, dev);
	if (r >= 0)
		atomic_fetch_sub(&cu_primary_refs[ordinal], 1);
out:
	primary_unlock(flags);
	return r;
}

static int primary_release(int ordinal)
{
	return primary_release_flags(ordinal, 0);
}

/* For unwinding: a failure here must not replace the one being reported. */
static void primary_release_quiet_flags(int ordinal, unsigned flags)
{
	char saved[CU_ERR_MAX];

	memcpy(saved, cu_err, sizeof(saved));
	if (primary_release_flags(ordinal, flags) < 0)
		memcpy(cu_err, saved, sizeof(saved));
}

static void primary_release_quiet(int ordinal)
{
	primary_release_quiet_flags(ordinal, 0);
}

static void ctx_pop(CUcontext expected)
{
	CUcontext popped = NULL;
	CUresult res = cu.cuCtxPopCurrent(&popped);

	/* Only a push/pop imbalance in our own code gets here. */
	if (res != CUDA_SUCCESS || popped != expected)
		log_debug("CUDA: context stack out of order: popped %p (CUresult %d), expected %p",
			  (void *)popped, (int)res, (void *)expected);
}

int cu_primary_ctx_retain(int ordinal)
{
	CUcontext ctx;
	int r = cu_load();

	return r < 0 ? r : primary_retain(ordinal, &ctx);
}

int cu_primary_ctx_release(int ordinal)
{
	int r = cu_load();

	return r < 0 ? r : primary_release(ordinal);
}

unsigned cu_primary_ctx_refs(int ordinal)
{
	if (cu_load_result < 0 || !cu_primary_refs || ordinal < 0 || ordinal >= cu_n_devices)
		return 0;
	return atomic_load(&cu_primary_refs[ordinal]);
}

/*
 * The driver loaded, then attribute attr of ptr into *data: 1, or 0 when
 * ptr is memory CUDA does not know (CUDA_ERROR_INVALID_VALUE, how the
 * driver answers for a host pointer it never saw), or a negative errno.
 */
static int pointer_attribute(void *data, CUpointer_attribute attr, uint64_t ptr)
{
	CUresult res;
	int r = cu_load();

	if (r < 0)
		return r;
	res = cu.cuPointerGetAttribute(data, attr, ptr);
	if (res == CUDA_ERROR_INVALID_VALUE)
		return 0;
	if (res != CUDA_SUCCESS)
		return cu_fail(res, "cuPointerGetAttribute");
	return 1;
}

int cu_ctx_guard_enter(uint64_t ptr, struct cu_ctx_guard *ret)
{
	CUcontext ctx = NULL;
	int ordinal = -1, r;

	r = pointer_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
	if (r < 0)
		return r;
	if (r == 0)
		return cu_errorf(-EINVAL, "0x%" PRIx64 " is not memory CUDA knows", ptr);
	if (!ctx) {
		/* VMM mappings belong to no context: use their device's
		 * primary, which the mapping holds (cu_vmm_import()). */
		r = CU(cuPointerGetAttribute, &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
		if (r < 0)
			return r;
		r = primary_retain_flags(ordinal, PRIMARY_HELD, &ctx);
		if (r < 0)
			return r;
	}
	r = CU(cuCtxPushCurrent, ctx);
	if (r < 0) {
		if (ordinal >= 0)
			primary_release_quiet_flags(ordinal, PRIMARY_HELD);
		return r;
	}
	ret->ctx = ctx;
	ret->primary = ordinal;
	return 0;
}

void cu_ctx_guard_exit(struct cu_ctx_guard *g)
{
	if (!g || !g->ctx)
		return;
	ctx_pop(g->ctx);
	if (g->primary >= 0)
		primary_release_quiet_flags(g->primary, PRIMARY_HELD);
	g->ctx = NULL;
	g->primary = -1;
}

int cu_pointer_device(uint64_t ptr, int *ret_ordinal)
{
	CUmemorytype type = 0;
	int ordinal, r;

	/* Memory the driver never saw is plain host memory. */
	r = pointer_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
	if (r <= 0)
		return r;
	if (type != CU_MEMORYTYPE_DEVICE)
		return 0;
	r = CU(cuPointerGetAttribute, &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
	if (r < 0)
		return r;
	if (ret_ordinal)
		*ret_ordinal = ordinal;
	return 1;
}

int cu_address_range(uint64_t ptr, uint64_t *ret_base, uint64_t *ret_size)
{
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	CUdeviceptr base;
	size_t size;
	int r;

	/* cuMemGetAddressRange fails with CUDA_ERROR_NOT_FOUND when another
	 * device's context is current (Monarch's domain.rs): hence the guard. */
	r = cu_ctx_guard_enter(ptr, &g);
	if (r < 0)
		return r;
	r = CU(cuMemGetAddressRange, &base, &size, ptr);
	if (r < 0)
		return r;
	*ret_base = base;
	*ret_size = size;
	return 0;
}

/* Imports fd as a VMM handle of device memory; *device and *gran say where
 * it lives and its granularity. On failure nothing is held. */
static int vmm_import_handle(int fd, CUmemGenericAllocationHandle *ret, CUmemAllocationProp *prop,
			     size_t *gran)
{
	CUmemGenericAllocationHandle handle;
	int r;

	if (fd < 0)
		return cu_errorf(-EBADF, "no file descriptor for the VMM allocation");
	/* The driver reads the fd and does not keep it: the caller closes it. */
	r = CU(cuMemImportFromShareableHandle, &handle, (void *)(uintptr_t)fd,
	       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (r < 0)
		return r;
	*prop = (CUmemAllocationProp){};
	r = CU(cuMemGetAllocationPropertiesFromHandle, prop, handle);
	if (r < 0)
		goto err;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
		r = cu_errorf(-EOPNOTSUPP,
			      "the VMM allocation is not GPU memory (location type %d)",
			      (int)prop->location.type);
		goto err;
	}
	r = CU(cuMemGetAllocationGranularity, gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r < 0)
		goto err;
	*ret = handle;
	return 0;
err:
	(void)cu.cuMemRelease(handle);
	return r;
}

/* Unmaps the first n_mapped chunks, frees the range, releases every handle
 * and the context retain (each step runs even when one fails; the first
 * error is returned and kept as cu_last_error()). */
static int vmm_unwind(struct cu_vmm_map *m, unsigned n_mapped, bool retained)
{
	char first[CU_ERR_MAX];
	int r = 0;

	/* A mapping goes as it was made (cuMemUnmap takes whole mappings),
	 * then the range, then the memory, then the context. */
	for (unsigned i = 0; i < n_mapped; i++)
		cu_keep_first(&r, CU(cuMemUnmap, m->dptr + i * m->chunk_size, m->chunk_size),
			      first);
	if (m->dptr)
		cu_keep_first(&r, CU(cuMemAddressFree, m->dptr, m->size), first);
	for (unsigned i = 0; i < m->n_chunks; i++)
		cu_keep_first(&r, CU(cuMemRelease, m->handles[i]), first);
	if (retained)
		cu_keep_first(&r, primary_release(m->device), first);
	if (r < 0)
		memcpy(cu_err, first, sizeof(cu_err));
	*m = (struct cu_vmm_map){};
	return r;
}

static int vmm_import(const int *fds, unsigned n, uint64_t chunk_size, unsigned flags,
		      struct cu_vmm_map *ret)
{
	struct cu_vmm_map m = { .chunk_size = chunk_size };
	char story[CU_ERR_MAX];
	CUmemAllocationProp prop;
	CUmemAccessDesc access = {};
	CUdeviceptr dptr;
	unsigned mapped = 0;
	CUcontext ctx;
	size_t gran = 0; /* set by the first import: n >= 1 */
	/* At debug level: when each step ended, to log where the time went. */
	bool timed = log_get_max_level() >= LOG_DEBUG;
	uint64_t at[6] = {};
	int r;

	if (timed)
		at[0] = mono_nsec();
	r = cu_load();
	if (r < 0)
		return r;
	if (n == 0 || n > CU_VMM_CHUNKS_MAX)
		return cu_errorf(-EINVAL, "a VMM import maps 1 to %u allocations, not %u",
				 CU_VMM_CHUNKS_MAX, n);
	if (chunk_size == 0)
		return cu_errorf(-EINVAL, "a VMM import needs the allocation's size");
	if (chunk_size > UINT64_MAX / n)
		return cu_errorf(-EOVERFLOW, "%u allocations of %" PRIu64 " bytes overflow", n,
				 chunk_size);
	for (; m.n_chunks < n; m.n_chunks++) {
		CUmemGenericAllocationHandle h = 0;
		CUmemAllocationProp p;
		size_t g = 0;

		r = vmm_import_handle(fds[m.n_chunks], &h, &p, &g);
		if (r < 0)
			goto err;
		m.handles[m.n_chunks] = h;
		if (m.n_chunks == 0) {
			prop = p;
			gran = g;
		} else if (p.location.id != prop.location.id) {
			m.n_chunks++;
			r = cu_errorf(-EINVAL,
				      "VMM allocation %u lives on device %d, allocation 0 on %d: "
				      "one region maps memory of one device",
				      m.n_chunks - 1, p.location.id, prop.location.id);
			goto err;
		}
	}
	if (timed)
		at[1] = mono_nsec();
	m.device = prop.location.id;
	m.size = chunk_size * n;
	/* Nothing tells us an allocation's size; a size off the granularity
	 * cannot be one, and a larger one makes cuMemMap fail below. */
	if (chunk_size % gran != 0) {
		r = cu_errorf(-EINVAL,
			      "size %" PRIu64 " is not a multiple of device %d's VMM granularity "
			      "(%zu bytes)",
			      chunk_size, m.device, gran);
		goto err;
	}
	/* Copies need a context and this memory has none: keep the device's
	 * primary alive for as long as the mapping. */
	r = primary_retain_flags(m.device, flags, &ctx);
	if (r < 0)
		goto err;
	if (timed)
		at[2] = mono_nsec();
	r = CU(cuMemAddressReserve, &dptr, m.size, gran, 0, 0);
	if (r < 0)
		goto err_ctx;
	m.dptr = dptr;
	if (timed)
		at[3] = mono_nsec();
	/* One after the other, as the allocator that made them maps them: a
	 * tensor of an expandable segment spans several. */
	for (; mapped < n; mapped++) {
		r = CU(cuMemMap, dptr + mapped * chunk_size, chunk_size, 0, m.handles[mapped], 0);
		if (r < 0)
			goto err_ctx;
	}
	if (timed)
		at[4] = mono_nsec();
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	for (unsigned i = 0; i < n; i++) {
		r = CU(cuMemSetAccess, dptr + i * chunk_size, chunk_size, &access, 1);
		if (r < 0)
			goto err_ctx;
	}
	/*
	 * A copy to or from another GPU runs on one of the two devices, which
	 * must have this memory mapped: VMM access is granted per device, and
	 * cuCtxEnablePeerAccess does not reach VMM mappings. So every GPU that
	 * cu_copy_dtod copies with peer to peer gets it now. A refusal fails
	 * the import: a peer copy into a mapping its device lacks would fault,
	 * and a fault poisons the context every client's copies share.
	 */
	for (int d = 0; d < cu_n_devices; d++) {
		if (peer_path(d, m.device) != CU_COPY_PEER)
			continue;
		access.location.id = d;
		for (unsigned i = 0; i < n; i++) {
			r = CU(cuMemSetAccess, dptr + i * chunk_size, chunk_size, &access, 1);
			if (r < 0) {
				memcpy(story, cu_err, sizeof(story));
				r = cu_errorf(
					r,
					"GPU %d cannot be given access to GPU %d's VMM "
					"mapping for peer copies (RDMAMEMD_CUDA_PEER_COPIES=off "
					"stages them instead): %s",
					d, m.device, story);
				goto err_ctx;
			}
		}
	}
	if (timed) {
		at[5] = mono_nsec();
		log_debug("CUDA: a VMM import of %u allocation(s): %.1f us importing the handles "
			  "and their properties, %.1f us retaining the primary context, %.1f us "
			  "reserving, %.1f us mapping, %.1f us granting access",
			  n, (at[1] - at[0]) / 1e3, (at[2] - at[1]) / 1e3, (at[3] - at[2]) / 1e3,
			  (at[4] - at[3]) / 1e3, (at[5] - at[4]) / 1e3);
	}
	*ret = m;
	return 0;

	/* Unwinding keeps the first error: it is the story. */
err_ctx:
	memcpy(story, cu_err, sizeof(story));
	(void)vmm_unwind(&m, mapped, true);
	memcpy(cu_err, story, sizeof(cu_err));
	return r;
err:
	memcpy(story, cu_err, sizeof(story));
	(void)vmm_unwind(&m, 0, false);
	memcpy(cu_err, story, sizeof(cu_err));
	return r;
}

int cu_vmm_release(struct cu_vmm_map *m)
{
	CU_BUSY;
	if (!m || !m->dptr)
		return 0;
	return vmm_unwind(m, m->n_chunks, true);
}

static int ipc_open(const void *handle, int ordinal, unsigned flags, struct cu_ipc_map *ret)
{
	CUdeviceptr dptr, base;
	CUipcMemHandle h;
	CUcontext ctx;
	int device, r;
	size_t size;

	r = cu_load();
	if (r < 0)
		return r;
	memcpy(&h, handle, sizeof(h));
	r = primary_retain_flags(ordinal, flags, &ctx);
	if (r < 0)
		return r;
	r = CU(cuCtxPushCurrent, ctx);
	if (r < 0)
		goto err_ctx;
	/* Peer access only if the memory lives on another device, and only
	 * enabled when needed: the driver's advice for IPC. */
	r = CU(cuIpcOpenMemHandle, &dptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (r < 0)
		goto err_pop;
	r = CU(cuMemGetAddressRange, &base, &size, dptr);
	if (r < 0)
		goto err_close;
	r = CU(cuPointerGetAttribute, &device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr);
	if (r < 0)
		goto err_close;
	ctx_pop(ctx);

	/* The retain stays with the mapping, which lives in that context. */
	*ret = (struct cu_ipc_map){ .dptr = dptr,
				    .size = base + size - dptr,
				    .device = device,
				    .ctx_device = ordinal };
	return 0;

err_close:
	(void)cu.cuIpcCloseMemHandle(dptr);
err_pop:
	ctx_pop(ctx);
err_ctx:
	primary_release_quiet(ordinal);
	return r;
}

/* The flags primary_own() took the lock with, for the scope's end. */
static void primary_disownp(const unsigned *owned)
{
	primary_disown(*owned);
}

int cu_vmm_import(const int *fds, unsigned n, uint64_t chunk_size, unsigned flags,
		  struct cu_vmm_map *ret)
{
	CU_BUSY;
	int r = primary_own(flags);
	_cleanup_(primary_disownp) _unused_ unsigned owned = r < 0 ? 0 : flags;

	return r < 0 ? r : vmm_import(fds, n, chunk_size, flags, ret);
}

int cu_ipc_open(const void *handle, int ordinal, unsigned flags, struct cu_ipc_map *ret)
{
	CU_BUSY;
	int r = primary_own(flags);
	_cleanup_(primary_disownp) _unused_ unsigned owned = r < 0 ? 0 : flags;

	return r < 0 ? r : ipc_open(handle, ordinal, flags, ret);
}

int cu_ipc_close(struct cu_ipc_map *m)
{
	CU_BUSY;
	char first[CU_ERR_MAX];
	CUcontext ctx;
	int r = 0;

	if (!m || !m->dptr)
		return 0;
	/* A second retain only to learn the context handle (a counter bump). */
	cu_keep_first(&r, primary_retain(m->ctx_device, &ctx), first);
	if (r == 0) {
		cu_keep_first(&r, CU(cuCtxPushCurrent, ctx), first);
		if (r == 0) {
			cu_keep_first(&r, CU(cuIpcCloseMemHandle, m->dptr), first);
			ctx_pop(ctx);
		}
		cu_keep_first(&r, primary_release(m->ctx_device), first);
	}
	cu_keep_first(&r, primary_release(m->ctx_device), first);
	if (r < 0)
		memcpy(cu_err, first, sizeof(cu_err));
	*m = (struct cu_ipc_map){};
	return r;
}

/*
 * A copy's preamble: nothing to do for n == 0 (returns 0); else enters the
 * context of the device behind ptr, the device side of the copy (returns 1),
 * or fails.
 */
static int copy_enter(uint64_t ptr, size_t n, struct cu_ctx_guard *g)
{
	int r;

	if (n == 0)
		return 0;
	r = cu_ctx_guard_enter(ptr, g);
	return r < 0 ? r : 1;
}

/*
 * The driver returns from cuMemcpyHtoD once a pageable source is staged, and
 * from cuMemcpyDtoD at once, before the bytes land (the CUDA "API
 * synchronization behavior"). The daemon answers a Write or a Copy when the
 * bytes are in place, and a region may be unmapped right after: so the
 * copy is waited for. A fault of a copy still in flight into memory unmapped
 * meanwhile would also poison the context every client's GPU work shares
 * (CUDA_ERROR_ILLEGAL_ADDRESS is sticky), seen on an H200 before this wait.
 * Device-to-host copies return when done: no wait.
 */
static int copy_wait(int r)
{
	return r < 0 ? r : CU(cuCtxSynchronize);
}

int cu_copy_htod(uint64_t dst, const void *src, size_t n)
{
	CU_BUSY;
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	int r = copy_enter(dst, n, &g);

	return r <= 0 ? r : copy_wait(CU(cuMemcpyHtoD, dst, src, n));
}

int cu_copy_dtoh(void *dst, uint64_t src, size_t n)
{
	CU_BUSY;
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	int r = copy_enter(src, n, &g);

	return r <= 0 ? r : CU(cuMemcpyDtoH, dst, src, n);
}

struct cu_copy_pending {
	CUevent event;
	CUcontext ctx; /* the event's: current while it is waited for */
	/* cu_copy_poll() saw the bytes land: cu_copy_finish() waits for
	 * nothing. Or it saw the query fail: that error, and why. */
	bool landed;
	int result;
	char err[CU_ERR_MAX];
};

/* A start's event, made before its copy is queued: once the copy is, only
 * the record can still fail (copy_follow()). */
static int pending_new(const struct cu_ctx_guard *g, struct cu_copy_pending **ret)
{
	_cleanup_free_ struct cu_copy_pending *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return cu_errorf(-ENOMEM, "out of memory");
	r = CU(cuEventCreate, &p->event, CU_EVENT_DISABLE_TIMING);
	if (r < 0)
		return r;
	p->ctx = g->ctx;
	*ret = TAKE_PTR(p);
	return 0;
}

/*
 * r: how queueing the copy went. Records p's event behind it; a copy queued
 * but not followed by the event is waited for here, once, so that nothing
 * is left in flight unwaited for. On success the copy counts as driver work
 * in flight until cu_copy_finish(); on failure p is freed.
 */
static int copy_follow(int r, struct cu_copy_pending *p, struct cu_copy_pending **ret)
{
	if (r >= 0) {
		r = CU(cuEventRecord, p->event, CU_STREAM_PER_THREAD);
		if (r < 0)
			(void)cu.cuCtxSynchronize();
	}
	if (r < 0) {
		(void)cu.cuEventDestroy(p->event);
		free(p);
		return r;
	}
	atomic_fetch_add(&cu_in_flight, 1);
	atomic_fetch_add(&cu_started, 1);
	*ret = p;
	return 0;
}

/* A copy between device memory at dev and host memory, to the device when
 * htod: queued on this thread's stream, followed by an event. */
static int copy_start(uint64_t dev, void *host, size_t n, bool htod, struct cu_copy_pending **ret)
{
	CU_BUSY;
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	struct cu_copy_pending *p = NULL;
	int r = copy_enter(dev, n, &g);

	*ret = NULL;
	if (r <= 0)
		return r;
	r = pending_new(&g, &p);
	if (r < 0)
		return r;
	r = htod ? CU(cuMemcpyHtoDAsync, dev, host, n, CU_STREAM_PER_THREAD) :
		   CU(cuMemcpyDtoHAsync, host, dev, n, CU_STREAM_PER_THREAD);
	return copy_follow(r, p, ret);
}

int cu_copy_htod_start(uint64_t dst, const void *src, size_t n, struct cu_copy_pending **ret)
{
	/* Read only: the cast is for copy_start()'s one pointer. */
	return copy_start(dst, (void *)src, n, true, ret);
}

int cu_copy_dtoh_start(void *dst, uint64_t src, size_t n, struct cu_copy_pending **ret)
{
	return copy_start(src, dst, n, false, ret);
}

int cu_copy_poll(struct cu_copy_pending *p)
{
	CUresult res;

	if (p->landed)
		return 1;
	/*
	 * Another thread's driver work could hold a lock the query waits for.
	 * This narrows that, it cannot rule it out: a pool thread may enter
	 * the driver right after the check, and the query then waits as long
	 * as that call holds its lock (the same gap as cu_idle()'s before a
	 * copy on the loop).
	 */
	if (atomic_load(&cu_in_flight) > atomic_load(&cu_started))
		return -EBUSY;
	if (cu.cuCtxPushCurrent(p->ctx) != CUDA_SUCCESS)
		/* cu_copy_finish() knows how to wait without it. */
		return -EBUSY;
	res = cu.cuEventQuery(p->event);
	ctx_pop(p->ctx);
	if (res == CUDA_ERROR_NOT_READY)
		return 0;
	if (res == CUDA_SUCCESS) {
		p->landed = true;
		return 1;
	}
	/*
	 * The copy failed, or the query did, and then the bytes may still
	 * move: the pool waits for them (at once for a failed copy, whose
	 * error the context keeps), and the query's error is the one told.
	 */
	p->result = cu_check(res, "cuEventQuery");
	memcpy(p->err, cu_err, sizeof(p->err));
	return -EBUSY;
}

int cu_copy_finish(struct cu_copy_pending *p)
{
	char first[CU_ERR_MAX];
	int r = 0, pushed;

	if (!p)
		return 0;
	if (p->result < 0) {
		r = p->result;
		memcpy(first, p->err, sizeof(first));
	}
	/* The event's context current, as on the thread that recorded it. */
	pushed = CU(cuCtxPushCurrent, p->ctx);
	cu_keep_first(&r, pushed, first);
	if (pushed == 0) {
		if (!p->landed)
			cu_keep_first(&r, CU(cuEventSynchronize, p->event), first);
		cu_keep_first(&r, CU(cuEventDestroy, p->event), first);
		ctx_pop(p->ctx);
	} else {
		/* No context to wait in: the copy may still run. */
		if (!p->landed)
			(void)cu.cuEventSynchronize(p->event);
		(void)cu.cuEventDestroy(p->event);
	}
	if (r < 0)
		memcpy(cu_err, first, sizeof(cu_err));
	atomic_fetch_sub(&cu_started, 1);
	atomic_fetch_sub(&cu_in_flight, 1);
	free(p);
	return r;
}

/* The device of the context a guard entered (pushed and popped again
 * when it is not the current one). */
static int guard_device(const struct cu_ctx_guard *g, bool current, int *ret)
{
	CUdevice dev;
	int r;

	if (g->primary >= 0) {
		*ret = g->primary;
		return 0;
	}
	if (!current) {
		r = CU(cuCtxPushCurrent, g->ctx);
		if (r < 0)
			return r;
	}
	r = CU(cuCtxGetDevice, &dev);
	if (!current)
		ctx_pop(g->ctx);
	if (r < 0)
		return r;
	*ret = dev;
	return 0;
}

/* Lets ctx reach peer's memory. Already enabled is fine: it is asked before
 * every peer copy, because a primary context released by its last import
 * and made anew forgets it. */
static int peer_enable(CUcontext ctx, CUcontext peer)
{
	CUresult res;
	int r;

	r = CU(cuCtxPushCurrent, ctx);
	if (r < 0)
		return r;
	res = cu.cuCtxEnablePeerAccess(peer, 0);
	ctx_pop(ctx);
	return res == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ?
		       0 :
		       cu_check(res, "cuCtxEnablePeerAccess");
}

/*
 * dst and src live in two contexts: gs's is current, gd's under it. A
 * DtoD in either one would touch memory that context may not have mapped
 * (another GPU's VMM mapping, an IPC open of another context), so the
 * driver gets both contexts. Peer access is enabled both ways first where
 * the GPUs allow it; without it, the driver stages the copy through host
 * memory of its own (the CUDA programming guide's "peer-to-peer memory
 * copy").
 */
static int copy_between(uint64_t dst, const struct cu_ctx_guard *gd, uint64_t src,
			const struct cu_ctx_guard *gs, size_t n)
{
	enum cu_copy_path path;
	int dst_dev, src_dev, r;

	r = guard_device(gs, true, &src_dev);
	if (r < 0)
		return r;
	r = guard_device(gd, false, &dst_dev);
	if (r < 0)
		return r;
	path = peer_path(src_dev, dst_dev);
	if (path == CU_COPY_PEER &&
	    (peer_enable(gd->ctx, gs->ctx) < 0 || peer_enable(gs->ctx, gd->ctx) < 0)) {
		log_debug("CUDA: no peer access between GPU %d and GPU %d, staging: %s", src_dev,
			  dst_dev, cu_err);
		path = CU_COPY_STAGED;
	}
	r = CU(cuMemcpyPeer, dst, gd->ctx, src, gs->ctx, n);
	/* As with cuMemcpyDtoD, the bytes may still be on their way: wait
	 * for both sides. */
	if (r >= 0)
		r = CU(cuCtxSynchronize);
	if (r >= 0) {
		r = CU(cuCtxPushCurrent, gd->ctx);
		if (r >= 0) {
			r = CU(cuCtxSynchronize);
			ctx_pop(gd->ctx);
		}
	}
	if (r < 0)
		return r;
	if (path != CU_COPY_SAME_DEVICE)
		atomic_fetch_add(&peer_copies_of(src_dev, dst_dev)[path == CU_COPY_STAGED], 1);
	log_debug("CUDA: copied %zu bytes from GPU %d to GPU %d: %s", n, src_dev, dst_dev,
		  cu_copy_path_name(path));
	return 0;
}

int cu_copy_dtod(uint64_t dst, uint64_t src, size_t n)
{
	CU_BUSY;
	/* Exited in reverse order: src's context is popped first. */
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard gd = CU_CTX_GUARD_INIT;
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard gs = CU_CTX_GUARD_INIT;
	int r = copy_enter(dst, n, &gd);

	if (r <= 0)
		return r;
	r = cu_ctx_guard_enter(src, &gs);
	if (r < 0)
		return r;
	if (gs.ctx == gd.ctx)
		return copy_wait(CU(cuMemcpyDtoD, dst, src, n));
	return copy_between(dst, &gd, src, &gs, n);
}

int cu_peer_info(int ordinal, int peer, struct cu_peer_info *ret)
{
	struct cu_peer_info info = { .ordinal = peer, .performance_rank = -1 };
	CUdevice a, b;
	int rank, r;

	r = cu_load();
	if (r < 0)
		return r;
	r = cu_check_ordinal(ordinal);
	if (r >= 0)
		r = cu_check_ordinal(peer);
	if (r < 0)
		return r;
	info.path = peer_path(ordinal, peer);
	if (ordinal != peer) {
		info.access = cu_can_peer[ordinal * cu_n_devices + peer];
		/* Only informative: a driver that will not rank the link says -1. */
		if (CU(cuDeviceGet, &a, ordinal) >= 0 && CU(cuDeviceGet, &b, peer) >= 0 &&
		    CU(cuDeviceGetP2PAttribute, &rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, a,
		       b) >= 0)
			info.performance_rank = rank;
		info.copies_peer = atomic_load(&peer_copies_of(ordinal, peer)[0]);
		info.copies_staged = atomic_load(&peer_copies_of(ordinal, peer)[1]);
	}
	*ret = info;
	return 0;
}

int cu_host_register(void *p, size_t n, int ordinal, bool readonly)
{
	CU_BUSY;
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE;
	CUcontext ctx;
	int r;

	r = cu_load();
	if (r < 0)
		return r;
	/* Without READ_ONLY the driver wants write access to the pages. */
	if (readonly)
		flags |= CU_MEMHOSTREGISTER_READ_ONLY;
	r = primary_retain(ordinal, &ctx);
	if (r < 0)
		return r;
	r = CU(cuCtxPushCurrent, ctx);
	if (r < 0) {
		primary_release_quiet(ordinal);
		return r;
	}
	r = CU(cuMemHostRegister, p, n, flags);
	ctx_pop(ctx);
	/* On success the retain stays: the registration dies with its context. */
	if (r < 0)
		primary_release_quiet(ordinal);
	return r;
}

/*
 * The shortest of passes synchronised copies of size bytes, ns; 0 when one
 * fails. A copy from host memory when host is given, else device to device
 * (which returns before it is done, so every pass synchronises). The first
 * pass warms up (lazy mappings, clocks): not counted.
 */
static uint64_t best_ns(CUdeviceptr dst, CUdeviceptr src, const void *host, size_t size, int passes)
{
	uint64_t best = UINT64_MAX;

	for (int pass = 0; pass < passes; pass++) {
		uint64_t t0 = mono_nsec(), dt;
		int r = host ? CU(cuMemcpyHtoD, dst, host, size) : CU(cuMemcpyDtoD, dst, src, size);

		if (r < 0 || CU(cuCtxSynchronize) < 0)
			return 0;
		dt = mono_nsec() - t0;
		if (pass > 0 && dt > 0 && dt < best)
			best = dt;
	}
	return best == UINT64_MAX ? 0 : best;
}

/* The best rate of four such copies, bytes per second; 0 when one fails. */
static uint64_t best_rate(CUdeviceptr dst, CUdeviceptr src, const void *host, size_t size)
{
	uint64_t ns = best_ns(dst, src, host, size, 4);

	return ns ? size * 1000000000ULL / ns : 0;
}

int cu_measure_bandwidth(int ordinal, size_t size, struct cu_bandwidth *ret)
{
	CU_BUSY;
	CUdeviceptr a = 0, b = 0;
	bool host_locked = false;
	void *host;
	CUcontext ctx;
	int r;

	*ret = (struct cu_bandwidth){};
	r = cu_load();
	if (r < 0)
		return r;
	host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED)
		return -errno;
	memset(host, 0x5a, size);
	r = primary_retain(ordinal, &ctx);
	if (r < 0)
		goto unmap;
	r = CU(cuCtxPushCurrent, ctx);
	if (r < 0)
		goto release;
	r = CU(cuMemAlloc, &a, size);
	if (r >= 0)
		r = CU(cuMemAlloc, &b, size);
	if (r >= 0)
		r = CU(cuMemHostRegister, host, size, CU_MEMHOSTREGISTER_PORTABLE);
	host_locked = r >= 0;
	if (r >= 0) {
		ret->htod = best_rate(a, 0, host, size);
		ret->dtod = best_rate(b, a, NULL, size);
		ret->htod_small_ns = best_ns(a, 0, host, CU_SMALL_COPY, 8);
	}
	if (host_locked)
		CU(cuMemHostUnregister, host);
	if (b)
		CU(cuMemFree, b);
	if (a)
		CU(cuMemFree, a);
	ctx_pop(ctx);
release:
	primary_release_quiet(ordinal);
unmap:
	munmap(host, size);
	return r < 0 ? r : 0;
}

int cu_host_unregister(void *p, int ordinal)
{
	CU_BUSY;
	CUcontext ctx;
	int r;

	r = cu_load();
	if (r < 0)
		return r;
	r = primary_retain(ordinal, &ctx);
	if (r < 0)
		return r;
	r = CU(cuCtxPushCurrent, ctx);
	if (r >= 0) {
		r = CU(cuMemHostUnregister, p);
		ctx_pop(ctx);
	}
	primary_release_quiet(ordinal);
	/* Keep register's retain when the driver refused: a context reference
	 * leaked is better than a context destroyed under live registrations. */
	if (r >= 0)
		primary_release_quiet(ordinal);
	return r;
}

int cu_dmabuf_fd(uint64_t base, uint64_t size, int *ret_fd)
{
	CU_BUSY;
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int fd = -EBADF, flags, r;

	r = cu_load();
	if (r < 0)
		return r;
	if (size == 0 || base % page != 0 || size % page != 0)
		return cu_errorf(-EINVAL,
				 "dma-buf range 0x%" PRIx64 "+%" PRIu64
				 " is empty or not aligned to the host page (%" PRIu64 ")",
				 base, size, page);
	r = cu_ctx_guard_enter(base, &g);
	if (r < 0)
		return r;
	r = CU(cuMemGetHandleForAddressRange, &fd, base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
	       0);
	if (r < 0)
		return r;
	/* The driver makes this fd and does not promise O_CLOEXEC. */
	flags = fcntl(fd, F_GETFD);
	if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
		r = negative_errno();
		safe_close(fd);
		return cu_errorf(r, "cannot set FD_CLOEXEC on the dma-buf fd: %s", strerror(-r));
	}
	*ret_fd = fd;
	return 0;
}

int cu_dmabuf_fd_for(uint64_t ptr, int *ret_fd, uint64_t *ret_base, uint64_t *ret_size)
{
	CU_BUSY;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t base, size;
	int fd, r;

	r = cu_address_range(ptr, &base, &size);
	if (r < 0)
		return r;
	/* Allocations start on a page; their size may end inside one. */
	size = (size + page - 1) / page * page;
	r = cu_dmabuf_fd(base, size, &fd);
	if (r < 0)
		return r;
	*ret_fd = fd;
	*ret_base = base;
	*ret_size = size;
	return 0;
}

#else /* !HAVE_CUDA_H */

static const char cu_stub_msg[] =
	"rdmamemd was built without cuda.h: this build cannot import GPU memory";

bool cu_idle(void)
{
	return true;
}

int cu_load(void)
{
	return -EOPNOTSUPP;
}

const char *cu_last_error(void)
{
	return cu_stub_msg;
}

int cu_device_count(void)
{
	return -EOPNOTSUPP;
}

int cu_device_info(_unused_ int ordinal, _unused_ struct cu_device_info *ret)
{
	return -EOPNOTSUPP;
}

int cu_primary_ctx_retain(_unused_ int ordinal)
{
	return -EOPNOTSUPP;
}

int cu_primary_ctx_release(_unused_ int ordinal)
{
	return -EOPNOTSUPP;
}

unsigned cu_primary_ctx_refs(_unused_ int ordinal)
{
	return 0;
}

int cu_ctx_guard_enter(_unused_ uint64_t ptr, _unused_ struct cu_ctx_guard *ret)
{
	return -EOPNOTSUPP;
}

void cu_ctx_guard_exit(_unused_ struct cu_ctx_guard *g)
{
}

int cu_pointer_device(_unused_ uint64_t ptr, _unused_ int *ret_ordinal)
{
	return -EOPNOTSUPP;
}

int cu_address_range(_unused_ uint64_t ptr, _unused_ uint64_t *ret_base,
		     _unused_ uint64_t *ret_size)
{
	return -EOPNOTSUPP;
}

int cu_vmm_import(_unused_ const int *fds, _unused_ unsigned n, _unused_ uint64_t chunk_size,
		  _unused_ unsigned flags, _unused_ struct cu_vmm_map *ret)
{
	return -EOPNOTSUPP;
}

int cu_vmm_release(_unused_ struct cu_vmm_map *m)
{
	return 0;
}

int cu_ipc_open(_unused_ const void *handle, _unused_ int ordinal, _unused_ unsigned flags,
		_unused_ struct cu_ipc_map *ret)
{
	return -EOPNOTSUPP;
}

int cu_ipc_close(_unused_ struct cu_ipc_map *m)
{
	return 0;
}

int cu_copy_htod(_unused_ uint64_t dst, _unused_ const void *src, _unused_ size_t n)
{
	return -EOPNOTSUPP;
}

int cu_copy_dtoh(_unused_ void *dst, _unused_ uint64_t src, _unused_ size_t n)
{
	return -EOPNOTSUPP;
}

int cu_copy_htod_start(_unused_ uint64_t dst, _unused_ const void *src, _unused_ size_t n,
		       struct cu_copy_pending **ret)
{
	*ret = NULL;
	return -EOPNOTSUPP;
}

int cu_copy_dtoh_start(_unused_ void *dst, _unused_ uint64_t src, _unused_ size_t n,
		       struct cu_copy_pending **ret)
{
	*ret = NULL;
	return -EOPNOTSUPP;
}

int cu_copy_poll(_unused_ struct cu_copy_pending *p)
{
	return 1;
}

int cu_copy_finish(_unused_ struct cu_copy_pending *p)
{
	return 0;
}

int cu_copy_dtod(_unused_ uint64_t dst, _unused_ uint64_t src, _unused_ size_t n)
{
	return -EOPNOTSUPP;
}

int cu_peer_info(_unused_ int ordinal, _unused_ int peer, _unused_ struct cu_peer_info *ret)
{
	return -EOPNOTSUPP;
}

int cu_host_register(_unused_ void *p, _unused_ size_t n, _unused_ int ordinal,
		     _unused_ bool readonly)
{
	return -EOPNOTSUPP;
}

int cu_measure_bandwidth(_unused_ int ordinal, _unused_ size_t size, struct cu_bandwidth *ret)
{
	*ret = (struct cu_bandwidth){};
	return -EOPNOTSUPP;
}

int cu_host_unregister(_unused_ void *p, _unused_ int ordinal)
{
	return -EOPNOTSUPP;
}

int cu_dmabuf_fd(_unused_ uint64_t base, _unused_ uint64_t size, _unused_ int *ret_fd)
{
	return -EOPNOTSUPP;
}

int cu_dmabuf_fd_for(_unused_ uint64_t ptr, _unused_ int *ret_fd, _unused_ uint64_t *ret_base,
		     _unused_ uint64_t *ret_size)
{
	return -EOPNOTSUPP;
}

#endif /* HAVE_CUDA_H */
