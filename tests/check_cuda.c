/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA layer without a GPU: how cu_load() fails on a host with no driver,
 * and, against a fake driver installed with cu_set_ops(), the parts that are
 * our own logic: the CUresult table, the context guard's push/pop and
 * primary-context fallback, unwinding of failed imports, retain balance,
 * dma-buf alignment and CLOEXEC. tests/gpu/cuda-smoke.c does the same
 * against the real driver on a GPU machine.
 *
 * Every case relies on CK_FORK: cu_load() runs once per process.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cuda.h"
#include "testlib.h"

START_TEST(test_no_driver)
{
	uint8_t b[4];
	int r;

	if (HAVE_CUDA_H) {
		void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

		/* A driver here: nothing to prove about its absence. */
		if (lib)
			return;
	}
	r = cu_load();
	if (!HAVE_CUDA_H) {
		ck_assert_int_eq(r, -EOPNOTSUPP);
		ck_assert_ptr_nonnull(strstr(cu_last_error(), "without cuda.h"));
		ck_assert_int_eq(cu_copy_dtoh(b, 0x1000, sizeof(b)), -EOPNOTSUPP);
		return;
	}
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "libcuda.so.1 could not be loaded"));
	/* dlerror()'s reason follows. */
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "cannot open shared object file"));
	/* Every entry point reports the same, with the same words. */
	ck_assert_int_eq(cu_load(), -ENOENT);
	ck_assert_int_eq(cu_device_count(), -ENOENT);
	ck_assert_int_eq(cu_copy_dtoh(b, 0x1000, sizeof(b)), -ENOENT);
	ck_assert_int_eq(cu_vmm_import(0, 2 << 20, &(struct cu_vmm_map){}), -ENOENT);
	ck_assert_int_eq(cu_pointer_device(0x1000, NULL), -ENOENT);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "libcuda.so.1"));
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 0);
}
END_TEST

#if HAVE_CUDA_H
#include "daemon/cuda-ops.h"

#define N_DEV 2
#define GRAN (2UL << 20)

struct fake_alloc {
	CUdeviceptr base;
	size_t size;
	CUcontext ctx;		/* NULL: a VMM mapping */
	int device;
	bool used;
};

static int ctx_tags[N_DEV + 1];
#define FAKE_PRIMARY(d) ((CUcontext)&ctx_tags[d])
#define FAKE_OTHER_CTX ((CUcontext)&ctx_tags[N_DEV])

static struct fake_alloc allocs[16];
static int primary_refs[N_DEV];
static int n_handles, n_reserved, n_mapped;
static int fake_version = 13000;
static CUresult fake_init_result, fake_copy_result, fake_map_result;
static CUcontext last_copy_ctx, last_register_ctx;
static unsigned last_register_flags;
static CUdeviceptr last_dmabuf_base;
static size_t last_dmabuf_size;
static __thread CUcontext stack[8];
static __thread int depth;

static struct fake_alloc *find(CUdeviceptr p)
{
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++)
		if (allocs[i].used && p >= allocs[i].base && p < allocs[i].base + allocs[i].size)
			return &allocs[i];
	return NULL;
}

static struct fake_alloc *add(size_t size, CUcontext ctx, int device)
{
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (allocs[i].used)
			continue;
		/* aligned_alloc() wants a multiple of the alignment. */
		allocs[i] = (struct fake_alloc){
			.base = (uintptr_t)aligned_alloc(GRAN, (size + GRAN - 1) / GRAN * GRAN),
			.size = size, .ctx = ctx, .device = device, .used = true };
		return &allocs[i];
	}
	return NULL;
}

static void drop(struct fake_alloc *a)
{
	free((void *)(uintptr_t)a->base);
	a->used = false;
}

static CUcontext current(void)
{
	return depth ? stack[depth - 1] : NULL;
}

static CUresult f_init(unsigned flags)
{
	(void)flags;
	return fake_init_result;
}

static CUresult f_version(int *v)
{
	*v = fake_version;
	return CUDA_SUCCESS;
}

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
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult f_error_string(CUresult res, const char **s)
{
	if (res != CUDA_ERROR_OUT_OF_MEMORY)
		return CUDA_ERROR_INVALID_VALUE;
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

static CUresult f_retain(CUcontext *ctx, CUdevice d)
{
	primary_refs[d]++;
	*ctx = FAKE_PRIMARY(d);
	return CUDA_SUCCESS;
}

static CUresult f_release(CUdevice d)
{
	ck_assert_int_gt(primary_refs[d], 0);
	primary_refs[d]--;
	return CUDA_SUCCESS;
}

static CUresult f_push(CUcontext c)
{
	ck_assert_int_lt(depth, 8);
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
	*c = current();
	return CUDA_SUCCESS;
}

static CUresult f_attr(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
	struct fake_alloc *a = find(p);

	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = a->ctx;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a->device;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(CUmemorytype *)data = CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

static CUresult f_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct fake_alloc *a = find(p);

	/* The driver's behaviour with another device's context current. */
	if (!a || (a->ctx && current() != a->ctx) || (!a->ctx && !current()))
		return CUDA_ERROR_NOT_FOUND;
	*base = a->base;
	*size = a->size;
	return CUDA_SUCCESS;
}

/* Copies need a context, as with the real driver. */
static CUresult copy(void *dst, const void *src, size_t n)
{
	if (!current())
		return CUDA_ERROR_INVALID_CONTEXT;
	last_copy_ctx = current();
	if (fake_copy_result != CUDA_SUCCESS)
		return fake_copy_result;
	memcpy(dst, src, n);
	return CUDA_SUCCESS;
}

static CUresult f_htod(CUdeviceptr dst, const void *src, size_t n)
{
	return copy((void *)(uintptr_t)dst, src, n);
}

static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t n)
{
	return copy(dst, (const void *)(uintptr_t)src, n);
}

static CUresult f_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
}

static CUresult f_host_register(void *p, size_t n, unsigned flags)
{
	(void)p;
	(void)n;
	last_register_ctx = current();
	last_register_flags = flags;
	return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_host_unregister(void *p)
{
	(void)p;
	return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	struct fake_alloc *a;

	ck_assert_uint_eq(flags, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (!current())
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((unsigned char)h.reserved[0] == 0x5a)
		return CUDA_ERROR_INVALID_VALUE;
	/* The allocation lives on the device named in the handle's byte 1. */
	a = add(1 << 20, current(), h.reserved[1]);
	*p = a->base;
	return CUDA_SUCCESS;
}

static CUresult f_ipc_close(CUdeviceptr p)
{
	struct fake_alloc *a = find(p);

	if (!a || a->ctx != current())
		return CUDA_ERROR_INVALID_CONTEXT;
	drop(a);
	return CUDA_SUCCESS;
}

static CUresult f_import(CUmemGenericAllocationHandle *h, void *fd,
			 CUmemAllocationHandleType type)
{
	if ((intptr_t)fd < 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	n_handles++;
	*h = 0x1000 + (CUmemGenericAllocationHandle)n_handles;
	return CUDA_SUCCESS;
}

static CUresult f_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
	(void)h;
	*prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				       .location = { CU_MEM_LOCATION_TYPE_DEVICE, 1 } };
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
	(void)align;
	(void)addr;
	(void)flags;
	*p = (uintptr_t)aligned_alloc(GRAN, (size + GRAN - 1) / GRAN * GRAN);
	n_reserved++;
	return CUDA_SUCCESS;
}

static CUresult f_free(CUdeviceptr p, size_t size)
{
	(void)size;
	free((void *)(uintptr_t)p);
	n_reserved--;
	return CUDA_SUCCESS;
}

static CUresult f_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	(void)offset;
	(void)h;
	(void)flags;
	if (fake_map_result != CUDA_SUCCESS)
		return fake_map_result;
	/* Track the range as context-less device memory of device 1. */
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (allocs[i].used)
			continue;
		allocs[i] = (struct fake_alloc){ .base = p, .size = size, .device = 1,
						 .used = true };
		break;
	}
	n_mapped++;
	return CUDA_SUCCESS;
}

static CUresult f_unmap(CUdeviceptr p, size_t size)
{
	struct fake_alloc *a = find(p);

	(void)size;
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	a->used = false;	/* the reservation's memory goes with f_free */
	n_mapped--;
	return CUDA_SUCCESS;
}

static CUresult f_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
	(void)p;
	(void)size;
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(d->location.id, 1);
	ck_assert_int_eq(d->flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	return CUDA_SUCCESS;
}

static CUresult f_mem_release(CUmemGenericAllocationHandle h)
{
	(void)h;
	n_handles--;
	return CUDA_SUCCESS;
}

static CUresult f_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
			 unsigned long long flags)
{
	int fds[2];

	(void)flags;
	ck_assert_int_eq(type, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
	last_dmabuf_base = p;
	last_dmabuf_size = size;
	/* Without O_CLOEXEC, as a driver may hand it out. */
	ck_assert_int_eq(pipe(fds), 0);
	close(fds[1]);
	*(int *)handle = fds[0];
	return CUDA_SUCCESS;
}

static const struct cu_ops fake_ops = {
	.cuInit = f_init,
	.cuDriverGetVersion = f_version,
	.cuGetErrorName = f_error_name,
	.cuGetErrorString = f_error_string,
	.cuDeviceGetCount = f_count,
	.cuDeviceGet = f_get,
	.cuDevicePrimaryCtxRetain = f_retain,
	.cuDevicePrimaryCtxRelease = f_release,
	.cuCtxPushCurrent = f_push,
	.cuCtxPopCurrent = f_pop,
	.cuCtxGetCurrent = f_get_current,
	.cuPointerGetAttribute = f_attr,
	.cuMemGetAddressRange = f_range,
	.cuMemcpyHtoD = f_htod,
	.cuMemcpyDtoH = f_dtoh,
	.cuMemcpyDtoD = f_dtod,
	.cuMemHostRegister = f_host_register,
	.cuMemHostUnregister = f_host_unregister,
	.cuIpcOpenMemHandle = f_ipc_open,
	.cuIpcCloseMemHandle = f_ipc_close,
	.cuMemImportFromShareableHandle = f_import,
	.cuMemGetAllocationPropertiesFromHandle = f_props,
	.cuMemGetAllocationGranularity = f_gran,
	.cuMemAddressReserve = f_reserve,
	.cuMemAddressFree = f_free,
	.cuMemMap = f_map,
	.cuMemUnmap = f_unmap,
	.cuMemSetAccess = f_access,
	.cuMemRelease = f_mem_release,
	.cuMemGetHandleForAddressRange = f_dmabuf,
};

static void fake_setup(void)
{
	ck_assert_int_eq(cu_set_ops(&fake_ops), 0);
}

static void load_fake(void)
{
	ck_assert_int_eq(cu_load(), 0);
	ck_assert_int_eq(cu_device_count(), N_DEV);
}

START_TEST(test_set_ops_after_load)
{
	load_fake();
	ck_assert_int_eq(cu_set_ops(&fake_ops), -EBUSY);
	ck_assert_ptr_nonnull(cu_get_ops());
}
END_TEST

START_TEST(test_old_driver)
{
	fake_version = 11080;
	ck_assert_int_eq(cu_load(), -ENOSYS);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA 11.8"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "12.0 or later"));
	ck_assert_ptr_null(cu_get_ops());
}
END_TEST

START_TEST(test_no_device)
{
	fake_init_result = CUDA_ERROR_NO_DEVICE;
	ck_assert_int_eq(cu_load(), -ENODEV);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA_ERROR_NO_DEVICE"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuInit)"));
	ck_assert_int_eq(cu_device_count(), -ENODEV);
}
END_TEST

/* The one table: four named codes, everything else -EIO, with the driver's words. */
START_TEST(test_errno_table)
{
	static const struct {
		CUresult res;
		int err;
	} cases[] = {
		{ CUDA_ERROR_OUT_OF_MEMORY, -ENOMEM },	{ CUDA_ERROR_INVALID_VALUE, -EINVAL },
		{ CUDA_ERROR_NOT_SUPPORTED, -EOPNOTSUPP }, { CUDA_ERROR_NO_DEVICE, -ENODEV },
		{ CUDA_ERROR_ECC_UNCORRECTABLE, -EIO },	{ CUDA_ERROR_ILLEGAL_ADDRESS, -EIO },
	};
	struct fake_alloc *a;
	uint8_t b[8] = {};

	load_fake();
	a = add(GRAN, FAKE_OTHER_CTX, 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		fake_copy_result = cases[i].res;
		ck_assert_int_eq(cu_copy_htod(a->base, b, sizeof(b)), cases[i].err);
		ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemcpyHtoD)"));
	}
	fake_copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	cu_copy_htod(a->base, b, sizeof(b));
	ck_assert_str_eq(cu_last_error(), "CUDA_ERROR_OUT_OF_MEMORY: out of memory (cuMemcpyHtoD)");
	/* A code without a name still says which call and which code. */
	fake_copy_result = CUDA_ERROR_ECC_UNCORRECTABLE;
	cu_copy_htod(a->base, b, sizeof(b));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUresult 214 (cuMemcpyHtoD)"));
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_guard_own_context)
{
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	struct fake_alloc *a;

	load_fake();
	a = add(GRAN, FAKE_OTHER_CTX, 0);
	ck_assert_int_eq(cu_ctx_guard_enter(a->base + 17, &g), 0);
	ck_assert_ptr_eq(current(), FAKE_OTHER_CTX);
	ck_assert_int_eq(g.primary, -1);
	ck_assert_int_eq(primary_refs[0] + primary_refs[1], 0);
	cu_ctx_guard_exit(&g);
	ck_assert_ptr_null(current());
	cu_ctx_guard_exit(&g);	/* idempotent */
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_guard_primary_fallback)
{
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	struct fake_alloc *a;
	CUcontext popped;

	load_fake();
	a = add(GRAN, NULL, 1);
	/* Whatever the thread had current comes back. */
	f_push(FAKE_OTHER_CTX);
	ck_assert_int_eq(cu_ctx_guard_enter(a->base, &g), 0);
	ck_assert_ptr_eq(current(), FAKE_PRIMARY(1));
	ck_assert_int_eq(g.primary, 1);
	ck_assert_int_eq(primary_refs[1], 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	cu_ctx_guard_exit(&g);
	ck_assert_ptr_eq(current(), FAKE_OTHER_CTX);
	ck_assert_int_eq(primary_refs[1], 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 0);
	f_pop(&popped);
}
END_TEST

START_TEST(test_guard_host_pointer)
{
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	int x = 0, dev = 7;

	load_fake();
	ck_assert_int_eq(cu_ctx_guard_enter((uintptr_t)&x, &g), -EINVAL);
	ck_assert_ptr_null(g.ctx);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "is not memory CUDA knows"));
	ck_assert_int_eq(cu_copy_dtoh(&x, (uintptr_t)&x, sizeof(x)), -EINVAL);
	ck_assert_int_eq(cu_pointer_device((uintptr_t)&x, &dev), 0);
	ck_assert_int_eq(dev, 7);
	ck_assert_int_eq(depth, 0);
}
END_TEST

struct thread_arg {
	uint64_t dptr;
	int r;
	CUcontext copy_ctx;
	int depth_after;
	char error[64];
};

static void *copy_thread(void *p)
{
	struct thread_arg *t = p;
	char buf[8];

	t->r = cu_copy_dtoh(buf, t->dptr, sizeof(buf));
	t->copy_ctx = last_copy_ctx;
	t->depth_after = depth;
	snprintf(t->error, sizeof(t->error), "%s", cu_last_error());
	return NULL;
}

/* A pool thread has no context of its own and its own last error. */
START_TEST(test_guard_other_thread)
{
	struct thread_arg t = {};
	struct fake_alloc *a;
	pthread_t th;
	int x;

	load_fake();
	a = add(GRAN, NULL, 1);
	t.dptr = a->base;
	ck_assert_int_eq(pthread_create(&th, NULL, copy_thread, &t), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(t.r, 0);
	ck_assert_ptr_eq(t.copy_ctx, FAKE_PRIMARY(1));
	ck_assert_int_eq(t.depth_after, 0);
	ck_assert_int_eq(primary_refs[1], 0);

	ck_assert_int_eq(cu_copy_dtoh(&x, (uintptr_t)&x, sizeof(x)), -EINVAL);
	t.dptr = a->base;
	fake_copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_create(&th, NULL, copy_thread, &t);
	pthread_join(th, NULL);
	ck_assert_int_eq(t.r, -ENOMEM);
	ck_assert_ptr_nonnull(strstr(t.error, "CUDA_ERROR_OUT_OF_MEMORY"));
	/* This thread's message is still its own. */
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "is not memory CUDA knows"));
}
END_TEST

START_TEST(test_vmm_granularity)
{
	struct cu_vmm_map m = { .dptr = 0xdead };

	load_fake();
	ck_assert_int_eq(cu_vmm_import(3, GRAN + 4096, &m), -EINVAL);
	ck_assert_ptr_nonnull(
		strstr(cu_last_error(), "not a multiple of device 1's VMM granularity"));
	ck_assert_uint_eq(m.dptr, 0xdead);	/* untouched on failure */
	ck_assert_int_eq(cu_vmm_import(3, 0, &m), -EINVAL);
	ck_assert_int_eq(cu_vmm_import(-EBADF, GRAN, &m), -EBADF);
	ck_assert_int_eq(n_handles, 0);
	ck_assert_int_eq(primary_refs[1], 0);
}
END_TEST

START_TEST(test_vmm_map_failure_unwinds)
{
	struct cu_vmm_map m = {};

	load_fake();
	fake_map_result = CUDA_ERROR_INVALID_VALUE;
	ck_assert_int_eq(cu_vmm_import(3, 4 * GRAN, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemMap)"));
	ck_assert_int_eq(n_handles, 0);
	ck_assert_int_eq(n_reserved, 0);
	ck_assert_int_eq(primary_refs[1], 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 0);
}
END_TEST

START_TEST(test_vmm_import_copy_release)
{
	struct cu_vmm_map m = {};
	char in[] = "through the primary context", out[sizeof(in)] = {};

	load_fake();
	ck_assert_int_eq(cu_vmm_import(3, 4 * GRAN, &m), 0);
	ck_assert_int_eq(m.device, 1);
	ck_assert_uint_eq(m.size, 4 * GRAN);
	ck_assert_int_eq(n_handles, 1);
	ck_assert_int_eq(n_mapped, 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	ck_assert_int_eq(cu_pointer_device(m.dptr + 5, NULL), 1);

	ck_assert_int_eq(cu_copy_htod(m.dptr + 4097, in, sizeof(in)), 0);
	ck_assert_ptr_eq(last_copy_ctx, FAKE_PRIMARY(1));
	ck_assert_int_eq(cu_copy_dtoh(out, m.dptr + 4097, sizeof(out)), 0);
	ck_assert_str_eq(out, in);
	ck_assert_int_eq(depth, 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);

	ck_assert_int_eq(cu_vmm_release(&m), 0);
	ck_assert_uint_eq(m.dptr, 0);
	ck_assert_int_eq(cu_vmm_release(&m), 0);	/* a zeroed map is a no-op */
	ck_assert_int_eq(n_handles + n_reserved + n_mapped, 0);
	ck_assert_int_eq(primary_refs[1], 0);
}
END_TEST

START_TEST(test_ipc_open_close)
{
	unsigned char h[CU_IPC_HANDLE_SIZE] = { 0, 1 };
	struct cu_ipc_map m = {};
	uint64_t base, size;
	int dev;

	load_fake();
	ck_assert_int_eq(cu_ipc_open(h, 0, &m), 0);
	ck_assert_int_eq(m.ctx_device, 0);
	ck_assert_int_eq(m.device, 1);	/* lives on device 1, opened from 0 */
	ck_assert_uint_eq(m.size, 1 << 20);
	ck_assert_ptr_null(current());
	ck_assert_int_eq(primary_refs[0], 1);
	ck_assert_int_eq(cu_pointer_device(m.dptr + 9, &dev), 1);
	ck_assert_int_eq(dev, 1);
	/* The range lookup needs the mapping's own context: the guard's job. */
	ck_assert_int_eq(cu_address_range(m.dptr + 9, &base, &size), 0);
	ck_assert_uint_eq(base, m.dptr);
	ck_assert_uint_eq(size, 1 << 20);

	ck_assert_int_eq(cu_ipc_close(&m), 0);
	ck_assert_uint_eq(m.dptr, 0);
	ck_assert_int_eq(primary_refs[0], 0);
	ck_assert_int_eq(depth, 0);

	h[0] = 0x5a;
	ck_assert_int_eq(cu_ipc_open(h, 0, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA_ERROR_INVALID_VALUE"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuIpcOpenMemHandle)"));
	ck_assert_int_eq(primary_refs[0], 0);
	ck_assert_int_eq(cu_ipc_open(h, N_DEV, &m), -ENODEV);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "there is no CUDA device 2"));
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_dmabuf)
{
	struct fake_alloc *a;
	uint64_t base, size;
	int fd = -1;

	load_fake();
	a = add(3 * GRAN, FAKE_OTHER_CTX, 0);
	ck_assert_int_eq(cu_dmabuf_fd(a->base + 1, GRAN, &fd), -EINVAL);
	ck_assert_int_eq(cu_dmabuf_fd(a->base, GRAN + 1, &fd), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "not aligned to the host page"));
	ck_assert_int_eq(fd, -1);

	ck_assert_int_eq(cu_dmabuf_fd(a->base, GRAN, &fd), 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);

	/* The whole allocation, its size rounded up to the page. */
	a->size = 3 * GRAN - 100;
	ck_assert_int_eq(cu_dmabuf_fd_for(a->base + 12345, &fd, &base, &size), 0);
	ck_assert_uint_eq(base, a->base);
	ck_assert_uint_eq(size, 3 * GRAN);
	ck_assert_uint_eq(last_dmabuf_base, a->base);
	ck_assert_uint_eq(last_dmabuf_size, 3 * GRAN);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_host_register)
{
	static char buf[8192];

	load_fake();
	ck_assert_int_eq(cu_host_register(buf, sizeof(buf), 1, true), 0);
	ck_assert_ptr_eq(last_register_ctx, FAKE_PRIMARY(1));
	ck_assert_uint_eq(last_register_flags,
			  CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY);
	/* The registration lives in that context: it stays retained. */
	ck_assert_int_eq(primary_refs[1], 1);
	ck_assert_ptr_null(current());
	ck_assert_int_eq(cu_host_unregister(buf, 1), 0);
	ck_assert_int_eq(primary_refs[1], 0);

	ck_assert_int_eq(cu_host_register(buf, sizeof(buf), 0, false), 0);
	ck_assert_uint_eq(last_register_flags, CU_MEMHOSTREGISTER_PORTABLE);
	ck_assert_int_eq(cu_host_unregister(buf, 0), 0);
	ck_assert_int_eq(primary_refs[0], 0);
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_primary_balance)
{
	load_fake();
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 2);
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	ck_assert_int_eq(primary_refs[0], 0);
	/* One release too many would destroy a context someone else uses. */
	ck_assert_int_eq(cu_primary_ctx_release(0), -EINVAL);
	ck_assert_int_eq(primary_refs[0], 0);
	ck_assert_int_eq(cu_primary_ctx_retain(-1), -ENODEV);
	ck_assert_int_eq(cu_primary_ctx_retain(N_DEV), -ENODEV);
}
END_TEST

#endif /* HAVE_CUDA_H */

Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("nodriver");

	tcase_add_test(tc, test_no_driver);
	suite_add_tcase(s, tc);
#if HAVE_CUDA_H
	tc = tcase_create("fake");
	tcase_add_checked_fixture(tc, fake_setup, NULL);
	tcase_add_test(tc, test_set_ops_after_load);
	tcase_add_test(tc, test_old_driver);
	tcase_add_test(tc, test_no_device);
	tcase_add_test(tc, test_errno_table);
	tcase_add_test(tc, test_guard_own_context);
	tcase_add_test(tc, test_guard_primary_fallback);
	tcase_add_test(tc, test_guard_host_pointer);
	tcase_add_test(tc, test_guard_other_thread);
	tcase_add_test(tc, test_vmm_granularity);
	tcase_add_test(tc, test_vmm_map_failure_unwinds);
	tcase_add_test(tc, test_vmm_import_copy_release);
	tcase_add_test(tc, test_ipc_open_close);
	tcase_add_test(tc, test_dmabuf);
	tcase_add_test(tc, test_host_register);
	tcase_add_test(tc, test_primary_balance);
	suite_add_tcase(s, tc);
#endif
	return s;
}
