/* SPDX-License-Identifier: BSD-3-Clause */
/* Each GPU's copy rates, measured once per daemon, read by anyone. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "daemon/core/log.h"
#include "daemon/gpu/gpu_bw.h"
#include "util/macro.h"

/* Measured copy bandwidth per GPU ordinal. Written by the pool thread that
 * measures, read by the loop: under the lock. */
#define GPU_BANDWIDTH_SIZE (32U << 20)

static struct {
	pthread_mutex_t lock;
	/* BW_QUEUED: gpu_bw_measure_soon()'s job not run yet; an import on
	 * the pool may measure first. */
	enum { BW_NONE, BW_QUEUED, BW_MEASURING, BW_DONE, BW_FAILED } state[GPU_LIST_MAX];
	struct cu_bandwidth bw[GPU_LIST_MAX];
} gpu_bw = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Pool: measures device's rates unless that started already: for an
 * import (not queued_job), from BW_NONE or BW_QUEUED; for the queued job,
 * only from BW_QUEUED, and only while a context of the device is held
 * (its regions gone already, or the daemon stopping, measuring would make
 * one, 100 ms and more, and destroy it: the next import measures instead).
 */
static void measure(int device, bool queued_job)
{
	struct cu_bandwidth bw;
	bool claimed;
	int r;

	pthread_mutex_lock(&gpu_bw.lock);
	claimed = gpu_bw.state[device] == BW_QUEUED ||
		  (!queued_job && gpu_bw.state[device] == BW_NONE);
	if (claimed && queued_job && cu_primary_ctx_refs(device) == 0) {
		gpu_bw.state[device] = BW_NONE;
		claimed = false;
	}
	if (claimed)
		gpu_bw.state[device] = BW_MEASURING;
	pthread_mutex_unlock(&gpu_bw.lock);
	if (!claimed)
		return;

	r = cu_measure_bandwidth(device, GPU_BANDWIDTH_SIZE, &bw);
	if (r < 0)
		log_warning_errno(r, "GPU %d: copy bandwidth not measured: %s", device,
				  cu_last_error());
	else
		log_info("GPU %d: copy bandwidth %" PRIu64 " MB/s device to device, %" PRIu64
			 " MB/s host to device",
			 device, bw.dtod / 1000000, bw.htod / 1000000);
	pthread_mutex_lock(&gpu_bw.lock);
	gpu_bw.state[device] = r < 0 ? BW_FAILED : BW_DONE;
	gpu_bw.bw[device] = bw;
	pthread_mutex_unlock(&gpu_bw.lock);
}

/* Pool: after an import of device's memory succeeded; the first one
 * measures (a few milliseconds), the rest return at once. */
void gpu_bw_measure_once(int device)
{
	if (device >= 0 && device < (int)GPU_LIST_MAX)
		measure(device, false);
}

struct bw_job {
	uv_work_t work;
	int device;
};

static void bw_job_run(uv_work_t *w)
{
	measure(container_of(w, struct bw_job, work)->device, true);
}

static void bw_job_done(uv_work_t *w, int status)
{
	(void)status;
	free(container_of(w, struct bw_job, work));
}

void gpu_bw_measure_soon(uv_loop_t *loop, int device)
{
	struct bw_job *job;
	bool started;

	if (device < 0 || device >= (int)GPU_LIST_MAX)
		return;
	pthread_mutex_lock(&gpu_bw.lock);
	started = gpu_bw.state[device] != BW_NONE;
	if (!started)
		gpu_bw.state[device] = BW_QUEUED;
	pthread_mutex_unlock(&gpu_bw.lock);
	if (started)
		return;
	/* Without memory or a queue the rate stays unknown, and copies with
	 * device go to the pool, as before the first import; a later import
	 * on the loop queues it again. */
	job = malloc(sizeof(*job));
	if (job) {
		job->device = device;
		if (uv_queue_work(loop, &job->work, bw_job_run, bw_job_done) == 0)
			return;
		free(job);
	}
	pthread_mutex_lock(&gpu_bw.lock);
	if (gpu_bw.state[device] == BW_QUEUED)
		gpu_bw.state[device] = BW_NONE;
	pthread_mutex_unlock(&gpu_bw.lock);
}

bool gpu_bandwidth(int device, struct cu_bandwidth *ret)
{
	bool done;

	if (device < 0 || device >= (int)GPU_LIST_MAX)
		return false;
	pthread_mutex_lock(&gpu_bw.lock);
	done = gpu_bw.state[device] == BW_DONE;
	if (done)
		*ret = gpu_bw.bw[device];
	pthread_mutex_unlock(&gpu_bw.lock);
	return done;
}
