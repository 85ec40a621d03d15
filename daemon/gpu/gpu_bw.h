/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef RDMAMEMD_GPU_BW_H
#define RDMAMEMD_GPU_BW_H

#include <stdbool.h>

#include <uv.h>

#include "daemon/gpu/cuda.h"

/* The GPUs the daemon keeps state for, by ordinal: ListGpus shows at most
 * this many, and counts regions and measures copy rates on those. */
#define GPU_LIST_MAX 16

/*
 * Pool: measures device's copy rates (cu_measure_bandwidth(), a few
 * milliseconds), after the first import of its memory succeeded; once per
 * daemon, any later call returns at once.
 */
void gpu_bw_measure_once(int device);

/*
 * Loop: after an import of device's memory made on the loop, which must
 * not spend milliseconds measuring: queues gpu_bw_measure_once() on the
 * pool, unless a measurement of device started already.
 */
void gpu_bw_measure_soon(uv_loop_t *loop, int device);

/*
 * A GPU's copy bandwidth (struct cu_bandwidth), measured by
 * gpu_bw_measure_once(): false until then, or when the measurement
 * failed. Any thread.
 */
bool gpu_bandwidth(int device, struct cu_bandwidth *ret);

#endif
