/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A GPU's primary context kept a while after its last region goes.
 *
 * Every import retains its GPU's primary context and every release lets
 * go of it, so the driver destroys the context with the GPU's last region
 * and creates it again with the next one: on an H100, 156 ms for the next
 * Register (the first import's cost, every time) and 60 ms of a pool
 * thread for the release. A client that registers and unregisters one
 * buffer at a time paid that on every pair. So the daemon holds one
 * retain of its own per GPU from its first region on, and gives it back
 * when the GPU has had no region for the linger time (context-linger-sec),
 * or at shutdown; 0 holds none, as before. The context costs device memory
 * while it lives, which is why it is not kept for the daemon's life.
 *
 * Loop only. The retain and the release are driver calls, so they run on
 * the pool; a GPU's state says which of them is in flight, and at most one
 * is: the next step is decided when it reports back.
 */
#ifndef RDMAMEMD_GPU_LINGER_H
#define RDMAMEMD_GPU_LINGER_H

#include <stdbool.h>

#include <uv.h>

#include "daemon/gpu/gpu_bw.h"

enum gpu_linger_state {
	GPU_LINGER_NONE,      /* no retain of ours */
	GPU_LINGER_RETAINING, /* a pool job takes it */
	GPU_LINGER_HELD,      /* held; the timer runs while the GPU has no region */
	GPU_LINGER_RELEASING, /* a pool job gives it back */
};

struct gpu_linger;

struct gpu_linger_gpu {
	struct gpu_linger *linger;
	int ordinal;
	enum gpu_linger_state state;
	bool retain_failed; /* not tried again until the GPU next gets a region */
	bool timer_open;    /* timer initialised and not closed */
	int err;            /* the pool job's result */
	uv_timer_t timer;
	uv_work_t work;
};

struct gpu_linger {
	uv_loop_t *loop;
	const unsigned *regions_on; /* live regions by GPU ordinal: gpu_ctx's count */
	unsigned linger_ms;         /* 0: no retain of ours */
	bool stopped;
	struct gpu_linger_gpu gpus[GPU_LIST_MAX];
};

/* regions_on: the GPU_LIST_MAX region counts the caller keeps, by ordinal. */
void gpu_linger_init(struct gpu_linger *l, uv_loop_t *loop, const unsigned *regions_on,
		     unsigned linger_ms);

/* GPU ordinal's count went from 0 to 1 (its first region), or to 0. */
void gpu_linger_count_changed(struct gpu_linger *l, int ordinal);

/* Shutdown: the timers close and every retain of ours is given back on the
 * pool; the loop ends once those jobs reported back. */
void gpu_linger_stop(struct gpu_linger *l);

/* Whether the daemon holds a retain of ordinal's context of its own. */
bool gpu_linger_held(const struct gpu_linger *l, int ordinal);

#endif
