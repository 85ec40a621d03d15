/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A CUDA driver without a GPU for the fuzzers, installed with cu_set_ops():
 * two devices whose "device memory" is host heap, so copies are memcpy and
 * ASan sees every byte the daemon touches. Legacy IPC handles open 1 MiB on
 * the device named by the handle's byte 1 (byte 0 == 0x5a: an invalid
 * handle); VMM fds import as a 2 MiB-granular allocation on device 1.
 * Contexts are per thread, as the driver's are: pool threads push and pop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cuda.h"
#include "fake.h"
#include "proto/macro.h"

#if HAVE_CUDA_H
#include "daemon/cuda-ops.h"

#define N_DEV 2
#define GRAN (2UL << 20)
#define IPC_SIZE (1UL << 20)

struct fake_alloc {
	CUdeviceptr base;
	size_t size;
	CUcontext ctx;		/* NULL: a VMM mapping (no context) */
	int device;
	bool used, owned;	/* owned: freed when dropped (IPC opens) */
};

static int ctx_tags[N_DEV];
#define PRIMARY(d) ((CUcontext)&ctx_tags[d])

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_alloc allocs[64];
static int live;
static __thread CUcontext stack[8];
static __thread int depth;

static CUcontext current(void)
{
	return depth ? stack[depth - 1] : NULL;
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

static bool add(CUdeviceptr base, size_t size, CUcontext ctx, int device, bool owned)
{
	bool ok = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (allocs[i].used)
			continue;
		allocs[i] = (struct fake_alloc){ .base = base, .size = size, .ctx = ctx,
						 .device = device, .used = true, .owned = owned };
		live++;
		ok = true;
		break;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static bool drop(CUdeviceptr base)
{
	bool ok = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ELEMENTSOF(allocs); i++) {
		if (!allocs[i].used || allocs[i].base != base)
			continue;
		if (allocs[i].owned)
			free((void *)(uintptr_t)allocs[i].base);
		allocs[i].used = false;
		live--;
		ok = true;
		break;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

int fake_cuda_live(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = live;
	pthread_mutex_unlock(&lock);
	return n;
}

static CUresult f_init(unsigned flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

static CUresult f_version(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

static CUresult f_error_name(CUresult res, const char **s)
{
	*s = res == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
	return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult res, const char **s)
{
	(void)res;
	*s = "fake driver error";
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
	*ctx = PRIMARY(d);
	return CUDA_SUCCESS;
}

static CUresult f_release(CUdevice d)
{
	(void)d;
	return CUDA_SUCCESS;
}

static CUresult f_push(CUcontext c)
{
	if (depth == (int)ELEMENTSOF(stack))
		return CUDA_ERROR_INVALID_CONTEXT;
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

static CUresult f_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct fake_alloc a;

	if (!find(p, &a) || !current())
		return CUDA_ERROR_NOT_FOUND;
	*base = a.base;
	*size = a.size;
	return CUDA_SUCCESS;
}

/* Copies need a context and stay inside what is allocated, as on a GPU
 * (where the alternative is an MMU fault). */
static CUresult copy(void *dst, const void *src, size_t n)
{
	if (!current())
		return CUDA_ERROR_INVALID_CONTEXT;
	memmove(dst, src, n);
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
	(void)flags;
	return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_host_unregister(void *p)
{
	(void)p;
	return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult f_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	int device = (unsigned char)h.reserved[1] % N_DEV;
	void *mem;

	(void)flags;
	if (!current())
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((unsigned char)h.reserved[0] == 0x5a)
		return CUDA_ERROR_INVALID_VALUE;
	mem = calloc(1, IPC_SIZE);
	if (!mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!add((uintptr_t)mem, IPC_SIZE, current(), device, true)) {
		free(mem);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*p = (uintptr_t)mem;
	return CUDA_SUCCESS;
}

static CUresult f_ipc_close(CUdeviceptr p)
{
	return drop(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_import(CUmemGenericAllocationHandle *h, void *fd,
			 CUmemAllocationHandleType type)
{
	if ((intptr_t)fd < 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	*h = 0x1000;
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
	void *mem;

	(void)align;
	(void)addr;
	(void)flags;
	/* A real reservation of any size costs nothing; heap does. */
	if (size == 0 || size > (64UL << 20))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mem = aligned_alloc(GRAN, (size + GRAN - 1) / GRAN * GRAN);
	if (!mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (uintptr_t)mem;
	return CUDA_SUCCESS;
}

static CUresult f_free(CUdeviceptr p, size_t size)
{
	(void)size;
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

static CUresult f_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	(void)offset;
	(void)h;
	(void)flags;
	return add(p, size, NULL, 1, false) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_unmap(CUdeviceptr p, size_t size)
{
	(void)size;
	return drop(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
	(void)p;
	(void)size;
	(void)d;
	(void)n;
	return CUDA_SUCCESS;
}

static CUresult f_mem_release(CUmemGenericAllocationHandle h)
{
	(void)h;
	return CUDA_SUCCESS;
}

static CUresult f_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
			 unsigned long long flags)
{
	int fds[2];

	(void)p;
	(void)size;
	(void)type;
	(void)flags;
	if (pipe(fds) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	close(fds[1]);
	*(int *)handle = fds[0];
	return CUDA_SUCCESS;
}

static const struct cu_ops fake_cu_ops = {
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
