/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU regions kept across a restart (keep.h): what the next process reads
 * from the fd store — a VMM region's own exports and its allocations' size,
 * an IPC region's handle and GPU — imported again on the pool, under the
 * region's old id, for the uid's holder. Loop only.
 */
#ifndef RDMAMEMD_GPU_KEEP_H
#define RDMAMEMD_GPU_KEEP_H

struct gpu_ctx;
struct keep_ctx;

/* Gives k the GPU kinds' restore; before keep_restore(). */
void gpu_keep_init(struct gpu_ctx *g, struct keep_ctx *k);

#endif
