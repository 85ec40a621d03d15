/* SPDX-License-Identifier: BSD-3-Clause */
/* A GPU's primary context kept after its last region (gpu_linger.h). */
#include "daemon/core/core.h"
#include "daemon/core/log.h"
#include "daemon/gpu/cuda.h"
#include "daemon/gpu/gpu_linger.h"
#include "util/macro.h"

void gpu_linger_init(struct gpu_linger *l, uv_loop_t *loop, const unsigned *regions_on,
		     unsigned linger_ms)
{
	*l = (struct gpu_linger){ .loop = loop, .regions_on = regions_on, .linger_ms = linger_ms };
	for (int i = 0; i < GPU_LIST_MAX; i++) {
		l->gpus[i].linger = l;
		l->gpus[i].ordinal = i;
	}
}

/* Pool: the retain or the release g's state says is in flight (set on the
 * loop before the job was queued, not changed until it reports back). */
static void on_job(uv_work_t *w)
{
	struct gpu_linger_gpu *g = container_of(w, struct gpu_linger_gpu, work);
	bool retain = g->state == GPU_LINGER_RETAINING;

	g->err = retain ? cu_primary_ctx_retain(g->ordinal) : cu_primary_ctx_release(g->ordinal);
	if (g->err < 0)
		log_warning_errno(g->err, "GPU %d: %s: %s", g->ordinal,
				  retain ? "its context is not kept between regions" :
					   "releasing its kept context failed",
				  cu_last_error());
}

static void step(struct gpu_linger_gpu *g);

/* Whether g's GPU has a region. */
static bool in_use(const struct gpu_linger_gpu *g)
{
	return g->linger->regions_on[g->ordinal] > 0;
}

static void on_job_done(uv_work_t *w, int status)
{
	struct gpu_linger_gpu *g = container_of(w, struct gpu_linger_gpu, work);

	(void)status; /* a job is never cancelled */
	if (g->state == GPU_LINGER_RETAINING) {
		g->retain_failed = g->err < 0;
		g->state = g->err < 0 ? GPU_LINGER_NONE : GPU_LINGER_HELD;
	} else if (g->err < 0 && !g->linger->stopped) {
		/* The retain is still ours: tried again after the next linger. */
		g->state = GPU_LINGER_HELD;
	} else {
		/* Released, or given up on at shutdown. */
		if (g->err == 0)
			log_debug("GPU %d: kept context released", g->ordinal);
		g->state = GPU_LINGER_NONE;
	}
	step(g);
}

static void queue(struct gpu_linger_gpu *g, enum gpu_linger_state state)
{
	g->state = state;
	/* uv_queue_work() fails only without a work callback. */
	(void)uv_queue_work(g->linger->loop, &g->work, on_job, on_job_done);
}

static void on_linger_over(uv_timer_t *t)
{
	struct gpu_linger_gpu *g = container_of(t, struct gpu_linger_gpu, timer);

	if (g->state == GPU_LINGER_HELD && !in_use(g))
		queue(g, GPU_LINGER_RELEASING);
}

/* What comes next for g, from its state, its use and the daemon's. */
static void step(struct gpu_linger_gpu *g)
{
	struct gpu_linger *l = g->linger;

	switch (g->state) {
	case GPU_LINGER_NONE:
		if (in_use(g) && !g->retain_failed && !l->stopped && l->linger_ms)
			queue(g, GPU_LINGER_RETAINING);
		break;
	case GPU_LINGER_HELD:
		if (l->stopped) {
			queue(g, GPU_LINGER_RELEASING);
			break;
		}
		if (!g->timer_open) {
			uv_timer_init(l->loop, &g->timer);
			g->timer_open = true;
		}
		if (in_use(g))
			uv_timer_stop(&g->timer);
		else if (!uv_is_active((uv_handle_t *)&g->timer))
			uv_timer_start(&g->timer, on_linger_over, l->linger_ms, 0);
		break;
	case GPU_LINGER_RETAINING:
	case GPU_LINGER_RELEASING:
		break; /* on_job_done() steps again */
	}
}

void gpu_linger_count_changed(struct gpu_linger *l, int ordinal)
{
	struct gpu_linger_gpu *g;

	if (ordinal < 0 || ordinal >= GPU_LIST_MAX)
		return;
	g = &l->gpus[ordinal];
	/* Called on 0 <-> 1 only: a region now is the GPU's first. */
	if (in_use(g))
		g->retain_failed = false;
	step(g);
}

void gpu_linger_stop(struct gpu_linger *l)
{
	if (l->stopped)
		return;
	l->stopped = true;
	for (int i = 0; i < GPU_LIST_MAX; i++) {
		struct gpu_linger_gpu *g = &l->gpus[i];

		if (g->timer_open) {
			core_close_handle((uv_handle_t *)&g->timer);
			g->timer_open = false;
		}
		step(g);
	}
}

bool gpu_linger_held(const struct gpu_linger *l, int ordinal)
{
	if (ordinal < 0 || ordinal >= GPU_LIST_MAX)
		return false;
	return l->gpus[ordinal].state == GPU_LINGER_HELD ||
	       l->gpus[ordinal].state == GPU_LINGER_RELEASING;
}
