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
	enum { BW_NONE, BW_MEASURING, BW_DONE, BW_FAILED } state[GPU_LIST_MAX];
	bool queued[GPU_LIST_MAX]; /* gpu_bw_measure_soon()'s job not run yet */
	struct cu_bandwidth bw[GPU_LIST_MAX];
} gpu_bw = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Pool: after an import of device's memory succeeded; the first one
 * measures (a few milliseconds), the rest return at once. */
void gpu_bw_measure_once(int device)
{
	struct cu_bandwidth bw;
	int r;

	if (device < 0 || device >= (int)GPU_LIST_MAX)
		return;
	pthread_mutex_lock(&gpu_bw.lock);
	if (gpu_bw.state[device] != BW_NONE) {
		pthread_mutex_unlock(&gpu_bw.lock);
		return;
	}
	gpu_bw.state[device] = BW_MEASURING;
	pthread_mutex_unlock(&gpu_bw.lock);

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

struct bw_job {
	uv_work_t work;
	int device;
};

static void bw_job_run(uv_work_t *w)
{
	int device = container_of(w, struct bw_job, work)->device;

	/* Its regions gone already (or the daemon stopping), no context of
	 * the device's is held: measuring would make one (100 ms and more)
	 * and destroy it. The next import measures instead. */
	if (cu_primary_ctx_refs(device) > 0)
		gpu_bw_measure_once(device);
	pthread_mutex_lock(&gpu_bw.lock);
	gpu_bw.queued[device] = false;
	pthread_mutex_unlock(&gpu_bw.lock);
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
	started = gpu_bw.state[device] != BW_NONE || gpu_bw.queued[device];
	gpu_bw.queued[device] = true;
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
	gpu_bw.queued[device] = false;
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
