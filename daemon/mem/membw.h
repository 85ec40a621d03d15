/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How fast the CPU reads and writes host memory, per NUMA node: measured
 * once, on the pool, at start (a memcpy between two buffers bound to the
 * node, the best of a few passes), so that GetRegion can report a host
 * region's direct-access bandwidth and transfers can prefer the nearest
 * device. Nothing is guessed: until the measurement is done, or for a node
 * it could not measure, the figure is 0 ("unknown").
 *
 * Threads: membw_start() and membw_at() on the loop; the measurement writes
 * its own copy on the pool and the loop publishes it when the job is done.
 */
#ifndef RDMAMEMD_MEMBW_H
#define RDMAMEMD_MEMBW_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/core/offload.h"

#define MEMBW_NODES_MAX 64U

struct membw {
	uint64_t node_bps[MEMBW_NODES_MAX]; /* bytes/s, 0: not measured */
	unsigned n_nodes;                   /* nodes online (1 without NUMA) */
	bool numa;                          /* the kernel places pages by node */
	bool done;
	struct offload_job job;
	struct membw_result *pending; /* the pool's, until done */
};

/* Starts the measurement on the pool (a few tens of milliseconds of one
 * thread); size is each buffer's, 0 for the default (32 MiB). */
void membw_start(struct membw *bw, struct offload *o, uint64_t size);
/* Bytes per second for the node holding the page at addr; 0 if unknown. */
uint64_t membw_at(const struct membw *bw, const void *addr);
/* The slowest node's bytes per second, without a syscall; 0 if unknown. */
uint64_t membw_min(const struct membw *bw);

#endif
