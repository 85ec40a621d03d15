/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver entry points cuda.c calls, as one table. cu_load() fills it from
 * libcuda.so.1; a test installs a fake driver with cu_set_ops() instead.
 * Include this only where <cuda.h> may be used: cuda.c, fakes, and GPU test
 * programs that play the client (they allocate and export through the same
 * table, so nothing but cuda.c ever resolves a cu* symbol).
 *
 * Each entry names the CUDA version that introduced the ABI cuda.h declares
 * (cudaTypedefs.h's PFN_<name>_v<version>). cu_load() asks cuGetProcAddress
 * for exactly that version, so the pointer it gets matches the type it is
 * called through whatever the driver's version; cuda.c checks at compile time
 * that each PFN type still matches cuda.h's prototype.
 */
#ifndef RDMAMEMD_CUDA_OPS_H
#define RDMAMEMD_CUDA_OPS_H

#include <cuda.h>
#include <cudaTypedefs.h>

#define CU_OPS_LIST(X)                                   \
	X(cuInit, 2000)                                  \
	X(cuDriverGetVersion, 2020)                      \
	X(cuGetErrorName, 6000)                          \
	X(cuGetErrorString, 6000)                        \
	X(cuDeviceGetCount, 2000)                        \
	X(cuDeviceGet, 2000)                             \
	X(cuDeviceGetName, 2000)                         \
	X(cuDeviceGetAttribute, 2000)                    \
	X(cuDeviceGetPCIBusId, 4010)                     \
	X(cuDeviceTotalMem, 3020)                        \
	X(cuDevicePrimaryCtxRetain, 7000)                \
	X(cuDevicePrimaryCtxRelease, 11000)              \
	X(cuCtxPushCurrent, 4000)                        \
	X(cuCtxPopCurrent, 4000)                         \
	X(cuCtxGetCurrent, 4000)                         \
	X(cuCtxSetCurrent, 4000)                         \
	X(cuCtxSynchronize, 2000)                        \
	X(cuCtxGetDevice, 2000)                          \
	X(cuCtxEnablePeerAccess, 4000)                   \
	X(cuDeviceCanAccessPeer, 4000)                   \
	X(cuDeviceGetP2PAttribute, 8000)                 \
	X(cuPointerGetAttribute, 4000)                   \
	X(cuMemGetAddressRange, 3020)                    \
	X(cuMemcpyHtoD, 3020)                            \
	X(cuMemcpyDtoH, 3020)                            \
	X(cuMemcpyDtoD, 3020)                            \
	X(cuMemcpyPeer, 4000)                            \
	/* cu_copy_htod_start() and the like */          \
	X(cuMemcpyHtoDAsync, 3020)                       \
	X(cuMemcpyDtoHAsync, 3020)                       \
	X(cuEventCreate, 2000)                           \
	X(cuEventRecord, 2000)                           \
	X(cuEventSynchronize, 2000)                      \
	X(cuEventQuery, 2000)                            \
	X(cuEventDestroy, 4000)                          \
	X(cuMemHostRegister, 6050)                       \
	X(cuMemHostUnregister, 4000)                     \
	X(cuIpcOpenMemHandle, 11000)                     \
	X(cuIpcCloseMemHandle, 4010)                     \
	X(cuMemImportFromShareableHandle, 10020)         \
	X(cuMemGetAllocationPropertiesFromHandle, 10020) \
	X(cuMemGetAllocationGranularity, 10020)          \
	X(cuMemAddressReserve, 10020)                    \
	X(cuMemAddressFree, 10020)                       \
	X(cuMemMap, 10020)                               \
	X(cuMemUnmap, 10020)                             \
	X(cuMemSetAccess, 10020)                         \
	X(cuMemRelease, 10020)                           \
	X(cuMemGetHandleForAddressRange, 11070)          \
	/* cu_measure_bandwidth()'s buffers */           \
	X(cuMemAlloc, 3020)                              \
	X(cuMemFree, 3020)                               \
	/* the client side: for test programs only */    \
	X(cuMemCreate, 10020)                            \
	X(cuMemExportToShareableHandle, 10020)           \
	X(cuIpcGetMemHandle, 4010)

/*
 * Members carry the API's names, so "cu->cuMemMap(…)" reads like the driver
 * API; where cuda.h maps a name to a versioned symbol (cuMemAlloc to
 * cuMemAlloc_v2) the member is renamed the same way, harmlessly.
 */
struct cu_ops {
#define CU_OPS_MEMBER(name, version) PFN_##name##_v##version name;
	CU_OPS_LIST(CU_OPS_MEMBER)
#undef CU_OPS_MEMBER
};

/*
 * Installs ops in place of libcuda.so.1 (copied; unset entries must not be
 * reached). Only before the first cu_load(): -EBUSY afterwards.
 */
int cu_set_ops(const struct cu_ops *ops);

/* The table in use once cu_load() succeeded, for test programs; else NULL. */
const struct cu_ops *cu_get_ops(void);

#endif
