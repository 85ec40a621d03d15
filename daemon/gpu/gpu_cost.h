/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What imports cost in the driver, learned from the last few of each kind
 * and allocation size, so that the loop makes an import itself only where
 * one like it took at most loop-import-usec (gpu.c). Nothing is known of a
 * kind and size until one such import ran, on the pool: until then, and
 * where the last few all took longer, imports go to the pool. Loop only.
 */
#ifndef RDMAMEMD_GPU_COST_H
#define RDMAMEMD_GPU_COST_H

#include <stdint.h>

enum gpu_cost_kind {
	GPU_COST_VMM, /* per allocation, by its size */
	GPU_COST_IPC, /* an IPC open: its size is not known before */
	GPU_COST_KINDS,
};

/*
 * Sixteen, not fewer: an import's driver calls take about twice as long on
 * a pool thread just woken as on the loop (123.5 against 56.8 us at the
 * median on an H100), so only the quicker pool times fit the bound, and
 * while none of the last few does, every import stays on the pool. More
 * samples would also keep a slowed driver on the loop for longer.
 */
#define GPU_COST_SAMPLES 16U
#define GPU_COST_SIZES 64U /* by log2 of the allocation's size */

struct gpu_cost {
	/* Nanoseconds of the last imports, newest at next - 1; 0: none. */
	uint64_t ns[GPU_COST_KINDS][GPU_COST_SIZES][GPU_COST_SAMPLES];
	uint8_t next[GPU_COST_KINDS][GPU_COST_SIZES];
};

/* An import of kind took ns in the driver for each allocation of size
 * bytes (IPC: 0). */
void gpu_cost_add(struct gpu_cost *c, enum gpu_cost_kind kind, uint64_t size, uint64_t ns);

/* The least time of the recent imports of kind and size, in
 * microseconds, rounded up; UINT64_MAX when none is known. */
uint64_t gpu_cost_usec(const struct gpu_cost *c, enum gpu_cost_kind kind, uint64_t size);

#endif
