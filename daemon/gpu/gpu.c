/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/gpu_bw.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "proto/hex.h"
#include "daemon/mem/region.h"
#include "daemon/core/session.h"

struct gpu_import {
	gpu_import_done_fn done; /* NULL once cancelled */
	void *userdata;
	struct session *owner; /* a reference */
	struct gpu_ctx *gpu;
	struct gpu_import_params p;
	uint8_t handle[CU_IPC_HANDLE_SIZE];
	struct region *reg;    /* GPU_MEMORY_VMM: prepared before the import */
	struct gpu_ipc *ipc;   /* GPU_MEMORY_IPC: the open it waits for */
	struct list_head link; /* in ipc->waiters */
	uv_work_t work;
	struct gpu_job_clock clock;
	int err;
	bool driver_loaded;
	const char *error_name;
	char error[512];
	char pci[32];
	struct gpu_file_kind file; /* GPU_MEMORY_VMM, on the pool: what fds[0] is */
};

/* Loop: what an import spent where, at debug level. */
static void job_clock_log(const char *what, const struct gpu_job_clock *c, bool on_loop)
{
	uint64_t now = uv_hrtime();

	if (on_loop) {
		log_debug("%s took %.1f us on the loop: %.1f us in the driver's import, %.1f us "
			  "asking the device",
			  what, (double)(now - c->queued) / 1e3,
			  (double)(c->imported - c->started) / 1e3,
			  (double)(c->ended - c->imported) / 1e3);
		return;
	}
	log_debug("%s took %.1f us: %.1f us waiting for a pool thread, %.1f us in the driver's "
		  "import, %.1f us asking the device, %.1f us back to the loop",
		  what, (double)(now - c->queued) / 1e3, (double)(c->started - c->queued) / 1e3,
		  (double)(c->imported - c->started) / 1e3, (double)(c->ended - c->imported) / 1e3,
		  (double)(now - c->ended) / 1e3);
}

/*
 * Loop: whether an import of kind, n allocations of size bytes each, may
 * run right here (gpu.h): the driver is in, none of the daemon's other
 * driver work runs (cu_idle()), and imports like it took at most
 * loop-import-usec. The context and the file are the callers' to check.
 */
static bool import_fits_loop(struct gpu_ctx *g, enum gpu_cost_kind kind, uint64_t size, unsigned n)
{
	unsigned bound = g->regions->core->cfg.loop_import_usec;

	return g->cuda_loaded && bound > 0 && gpu_cost_usec(&g->cost, kind, size) <= bound / n &&
	       cu_idle();
}

/*
 * Loop: an import of kind made it, on the loop or the pool, in ns for each
 * allocation of size bytes (IPC: 0), its memory on device: counted for the
 * metrics and the next imports' estimate, and the device's bandwidth
 * probe sent to the pool where the loop skipped it.
 */
static void import_made(struct gpu_ctx *g, enum gpu_cost_kind kind, uint64_t size, uint64_t ns,
			int device, bool on_loop)
{
	gpu_cost_add(&g->cost, kind, size, ns);
	if (!on_loop) {
		g->imports_on_pool++;
		return;
	}
	g->imports_on_loop++;
	gpu_bw_measure_soon(g->loop, device);
}

/* Any thread: what kind of file fd is. */
static bool file_kind_of(int fd, struct gpu_file_kind *ret)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return false;
	*ret = (struct gpu_file_kind){
		.known = true,
		.type = st.st_mode & S_IFMT,
		.dev = st.st_dev,
		.rdev = st.st_rdev,
	};
	return true;
}

/* Loop: whether every fd of p is a file of the kind the driver imported
 * a VMM allocation from before. */
static bool vmm_files_known(const struct gpu_ctx *g, const struct gpu_import_params *p)
{
	const struct gpu_file_kind *known = &g->vmm_file;
	struct gpu_file_kind k;

	if (!known->known)
		return false;
	for (unsigned i = 0; i < p->n_fds; i++)
		if (!file_kind_of(p->fds[i], &k) || k.type != known->type || k.dev != known->dev ||
		    k.rdev != known->rdev)
			return false;
	return true;
}

/* The per-GPU counts: a published region counts on its GPU until its
 * owner lets go (the hook's revoke). */
static void counted_revoke(struct region_hook *h)
{
	struct region *r = h->region;
	struct gpu_ctx *g = gpu_region_of(r)->gpu;

	if (r->gpu >= 0 && r->gpu < GPU_LIST_MAX && --g->regions_on[r->gpu] == 0)
		gpu_linger_count_changed(&g->linger, r->gpu);
}

/* Embedded in the region: nothing to free. */
static const struct region_hook_ops counted_ops = {
	.rank = REGION_HOOK_OTHER,
	.revoke = counted_revoke,
};

static struct region_hook *counted_make(struct region *r, void *userdata)
{
	(void)userdata;
	return &gpu_region_of(r)->counted;
}

static void gpu_region_count(struct region *r)
{
	/* Kept up to date here and by the hook: counting them for ListGpus
	 * would walk every region of every client. */
	struct gpu_ctx *g = gpu_region_of(r)->gpu;

	if (r->gpu >= 0 && r->gpu < GPU_LIST_MAX && g->regions_on[r->gpu]++ == 0)
		gpu_linger_count_changed(&g->linger, r->gpu);
	region_hook_get(r, &counted_ops, counted_make, NULL);
}

void gpu_ctx_init(struct gpu_ctx *g, uv_loop_t *loop, struct region_registry *regions,
		  unsigned linger_ms)
{
	*g = (struct gpu_ctx){ .loop = loop, .regions = regions };
	list_init(&g->ipcs);
	gpu_linger_init(&g->linger, loop, g->regions_on, linger_ms);
}

void gpu_ctx_stop(struct gpu_ctx *g)
{
	gpu_linger_stop(&g->linger);
}

/* region_prepare() for GPU memory of kind ops (gpu_vmm_ops, gpu_ipc_ops). */
static int gpu_region_prepare(struct gpu_ctx *g, struct session *owner, uint64_t size,
			      const struct region_mem_ops *ops, struct region **ret,
			      struct errinfo *e)
{
	struct region *r;
	int res;

	res = region_prepare(g->regions, owner, size, ops, sizeof(struct gpu_region), &r, e);
	if (res < 0)
		return res;
	gpu_region_of(r)->gpu = g;
	/* A kind whose release is CUDA calls (a VMM mapping's unmap and
	 * release) releases on the pool. An IPC region's release is none:
	 * its open is shared and closed, on the pool, by the last region's
	 * finish (gpu_ipc_unref()), so its Unregister costs no pool round trip
	 * (a thread's wake-up, 100 us and more on an idle machine). Hooks that
	 * release something (registrations) still send it to the pool. */
	r->release_on_pool = ops->release != NULL;
	r->writable = true;
	*ret = r;
	return 0;
}

/* Pool side: loads the driver the first time a GPU import comes. */
static int load_driver(char *error, size_t size, const char **name)
{
	int r = cu_load();

	if (r < 0) {
		*name = RDMAMEM_ERROR_CUDA_UNAVAILABLE;
		snprintf(error, size, "GPU memory needs the CUDA driver: %s", cu_last_error());
	}
	return r;
}

static void job_fail_pool(struct gpu_import *job, int err, const char *what)
{
	job->err = err;
	job->error_name = RDMAMEM_ERROR_CUDA;
	snprintf(job->error, sizeof(job->error), "%s: %s", what, cu_last_error());
}

void gpu_import_params_close(struct gpu_import_params *p)
{
	for (unsigned i = 0; i < p->n_fds; i++)
		p->fds[i] = safe_close(p->fds[i]);
	p->n_fds = 0;
}

static void job_free(struct gpu_import *job)
{
	gpu_import_params_close(&job->p);
	region_unref(job->reg);
	session_unref(job->owner);
	free(job);
}

/* Tells the waiter, once: the region (published), or why not. */
static void job_done(struct gpu_import *job, struct region *reg, struct errinfo *e)
{
	gpu_import_done_fn done = TAKE_PTR(job->done);

	if (done)
		done(job->userdata, reg, e);
	errinfo_done(e);
}

static void job_fail(struct gpu_import *job, const char *name, int err, const char *text)
{
	struct errinfo e = {};

	/* The driver refusing an import is a registration failure the
	 * operator hears of; a range outside the allocation is the client's
	 * own error, logged at debug like every other. */
	if (strcmp(name, RDMAMEM_ERROR_OUT_OF_RANGE) != 0)
		log_full_fields(LOG_WARNING, err, LOG_CLIENT(&job->owner->cred),
				"GPU memory import failed: %s", text);
	errinfo_set(&e, name, err, "%s", text);
	job_done(job, NULL, &e);
}

/* The region exists: publish it for its owner, hand it over. */
static void job_finish(struct gpu_import *job, struct region *reg)
{
	struct errinfo e = {};
	int r = region_publish_as(reg, job->owner, job->p.id);

	if (r < 0) {
		region_unref(reg);
		if (r == -EEXIST)
			errinfo_set(&e, RDMAMEM_ERROR_INTERNAL, r, "region id %" PRIu64 " is taken",
				    job->p.id);
		else
			errinfo_set(&e, RDMAMEM_ERROR_INTERNAL, r, "out of memory");
		job_done(job, NULL, &e);
		return;
	}
	gpu_region_count(reg);
	job_done(job, reg, &e);
}

void gpu_import_cancel(struct gpu_import *job)
{
	/* The work on the pool cannot be stopped: it cleans up when done. */
	job->done = NULL;
	if (job->ipc && list_linked(&job->link)) {
		list_del(&job->link);
		job_free(job);
	}
}

/* Pool: a device's PCI bus id into out (empty when the driver cannot say),
 * asked of the driver once per device: an import's own copy of it cost
 * 4-15 us of device queries on an H200, and it never changes. */
static void device_pci(int device, char out[static 32])
{
	static struct {
		pthread_mutex_t lock;
		bool known[GPU_LIST_MAX];
		char pci[GPU_LIST_MAX][32];
	} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct cu_device_info info;
	bool known = false;

	out[0] = '\0';
	if (device < 0 || device >= (int)GPU_LIST_MAX)
		return;
	pthread_mutex_lock(&cache.lock);
	if (cache.known[device]) {
		memcpy(out, cache.pci[device], 32);
		known = true;
	}
	pthread_mutex_unlock(&cache.lock);
	if (known || cu_device_info(device, &info) < 0)
		return;
	snprintf(out, 32, "%s", info.pci_bus_id);
	pthread_mutex_lock(&cache.lock);
	memcpy(cache.pci[device], out, 32);
	cache.known[device] = true;
	pthread_mutex_unlock(&cache.lock);
}

/*
 * Pool, or the loop with CU_NO_WAIT: the import itself. On the loop an
 * -EWOULDBLOCK in job->err says that it must go to the pool after all;
 * and the device's bandwidth is measured there (gpu_bw_measure_soon()).
 */
static void vmm_import_run(struct gpu_import *job, unsigned flags)
{
	struct gpu_region *g = gpu_region_of(job->reg);
	int r;

	job->clock.started = uv_hrtime();
	r = load_driver(job->error, sizeof(job->error), &job->error_name);
	if (r < 0) {
		job->err = r;
		return;
	}
	job->driver_loaded = true;
	r = cu_vmm_import(job->p.fds, job->p.n_fds, job->p.alloc_size, flags, &g->vmm);
	job->clock.imported = uv_hrtime();
	if (r < 0) {
		job_fail_pool(job, r, "cannot import the VMM allocation");
		return;
	}
	if (!(flags & CU_NO_WAIT))
		(void)file_kind_of(job->p.fds[0], &job->file);
	/* The client's own fds go to the fd store: the driver refuses to
	 * export an imported allocation again (CUDA_ERROR_INVALID_VALUE on
	 * an H100), and keep.c holds each in a socket of its own, so one
	 * file sent for two regions is kept for both. */
	if (job->p.keep) {
		memcpy(g->kept_fds, job->p.fds, job->p.n_fds * sizeof(int));
		g->n_kept_fds = job->p.n_fds;
		for (unsigned i = 0; i < job->p.n_fds; i++)
			job->p.fds[i] = -EBADF;
	}
	device_pci(g->vmm.device, job->pci);
	if (!(flags & CU_NO_WAIT))
		gpu_bw_measure_once(g->vmm.device);
	job->clock.ended = uv_hrtime();
}

static void on_vmm_work(uv_work_t *w)
{
	vmm_import_run(container_of(w, struct gpu_import, work), 0);
}

/* Loop: an import ended, on the pool or here (on_loop). */
static void vmm_import_done(struct gpu_import *job, bool on_loop)
{
	struct gpu_ctx *gpu = job->gpu;
	struct region *reg = job->reg;

	/* Any answer but "no driver" means the driver is in. */
	gpu->cuda_loaded = gpu->cuda_loaded || job->err == 0 || job->driver_loaded;
	if (job->err == 0) {
		import_made(gpu, GPU_COST_VMM, job->p.alloc_size,
			    (job->clock.ended - job->clock.started) / job->p.n_fds,
			    gpu_region_of(reg)->vmm.device, on_loop);
		if (!gpu->vmm_file.known)
			gpu->vmm_file = job->file;
	}
	if (!job->done) {
		job_free(job);
		return;
	}
	if (job->err < 0) {
		job_fail(job, job->error_name, job->err, job->error);
		job_free(job);
		return;
	}
	reg->dptr = gpu_region_of(reg)->vmm.dptr + job->p.offset;
	reg->gpu = gpu_region_of(reg)->vmm.device;
	snprintf(reg->pci_bus_id, sizeof(reg->pci_bus_id), "%s", job->pci);
	job_clock_log("A VMM import", &job->clock, on_loop);
	job->reg = NULL;
	job_finish(job, reg);
	job_free(job);
}

static void on_vmm_done(uv_work_t *w, int status)
{
	(void)status;
	vmm_import_done(container_of(w, struct gpu_import, work), false);
}

/*
 * Loop: makes job's import right here where it may (gpu.h); returns
 * whether it did, job then done and freed. False: nothing happened, and
 * job goes to the pool.
 */
static bool vmm_import_here(struct gpu_import *job)
{
	if (!import_fits_loop(job->gpu, GPU_COST_VMM, job->p.alloc_size, job->p.n_fds) ||
	    !vmm_files_known(job->gpu, &job->p))
		return false;
	job->clock.queued = uv_hrtime();
	vmm_import_run(job, CU_NO_WAIT);
	if (job->err == -EWOULDBLOCK) {
		job->err = 0;
		job->error_name = NULL;
		return false;
	}
	vmm_import_done(job, true);
	return true;
}

/* A region over an open IPC allocation: no CUDA call needed. */
static void ipc_import(struct gpu_import *job)
{
	struct gpu_ipc *ipc = job->ipc;
	struct errinfo e = {};
	struct region *reg;
	uint64_t offset = job->p.offset, length = job->p.length;
	int r;

	if (offset > ipc->map.size || (length && length > ipc->map.size - offset) ||
	    (!length && offset == ipc->map.size)) {
		char text[256];

		snprintf(text, sizeof(text),
			 "range [%" PRIu64 ", +%" PRIu64 ") is outside the IPC allocation (%" PRIu64
			 " bytes)",
			 offset, length, ipc->map.size);
		job_fail(job, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE, text);
		return;
	}
	if (!length)
		length = ipc->map.size - offset;
	r = gpu_region_prepare(job->gpu, job->owner, length, &gpu_ipc_ops, &reg, &e);
	if (r < 0) {
		job_done(job, NULL, &e);
		return;
	}
	reg->access = job->p.access;
	gpu_region_of(reg)->ipc = ipc;
	ipc->n_ref++;
	reg->dptr = ipc->map.dptr + offset;
	reg->gpu = ipc->map.device;
	snprintf(reg->pci_bus_id, sizeof(reg->pci_bus_id), "%s", ipc->pci_bus_id);
	job_finish(job, reg);
}

/* Pool, or the loop with CU_NO_WAIT (as vmm_import_run()). */
static void ipc_open_run(struct gpu_ipc *ipc, unsigned flags)
{
	int r;

	ipc->clock.started = uv_hrtime();
	r = load_driver(ipc->error, sizeof(ipc->error), &ipc->error_name);
	if (r < 0) {
		ipc->err = r;
		return;
	}
	ipc->driver_loaded = true;
	r = cu_ipc_open(ipc->handle, ipc->ordinal, flags, &ipc->map);
	ipc->clock.imported = uv_hrtime();
	if (r < 0) {
		ipc->err = r;
		ipc->error_name = RDMAMEM_ERROR_CUDA;
		snprintf(ipc->error, sizeof(ipc->error), "cannot open the IPC handle on GPU %d: %s",
			 ipc->ordinal, cu_last_error());
		return;
	}
	device_pci(ipc->map.device, ipc->pci_bus_id);
	if (!(flags & CU_NO_WAIT))
		gpu_bw_measure_once(ipc->map.device);
	ipc->clock.ended = uv_hrtime();
}

static void on_ipc_open(uv_work_t *w)
{
	ipc_open_run(container_of(w, struct gpu_ipc, work), 0);
}

static void on_ipc_close(uv_work_t *w)
{
	struct gpu_ipc *ipc = container_of(w, struct gpu_ipc, work);

	int device = ipc->map.device, r;

	ipc->clock.started = uv_hrtime();
	/* cu_ipc_close() zeroes the map: the device is kept for the message. */
	r = cu_ipc_close(&ipc->map);
	ipc->clock.ended = uv_hrtime();
	if (r < 0)
		log_warning_errno(r, "Closing the CUDA IPC mapping on GPU %d failed: %s", device,
				  cu_last_error());
}

static void ipc_start_open(struct gpu_ipc *ipc);

static void on_ipc_closed(uv_work_t *w, int status)
{
	struct gpu_ipc *ipc = container_of(w, struct gpu_ipc, work);

	uint64_t now = uv_hrtime();

	(void)status;
	log_debug("An IPC close took %.1f us: %.1f us waiting for a pool thread, %.1f us in "
		  "the driver, %.1f us back to the loop%s",
		  (double)(now - ipc->clock.queued) / 1e3,
		  (double)(ipc->clock.started - ipc->clock.queued) / 1e3,
		  (double)(ipc->clock.ended - ipc->clock.started) / 1e3,
		  (double)(now - ipc->clock.ended) / 1e3,
		  list_empty(&ipc->waiters) ? "" : "; imports of the handle waited for it");
	/* Imports of the same handle that came during the close open it anew. */
	if (!list_empty(&ipc->waiters)) {
		ipc_start_open(ipc);
		return;
	}
	list_del(&ipc->link);
	free(ipc);
}

/* Loop: an open ended, on the pool or here (on_loop). */
static void ipc_open_done(struct gpu_ipc *ipc, bool on_loop)
{
	struct gpu_ctx *g = ipc->gpu;
	struct gpu_import *job, *n;

	g->cuda_loaded = g->cuda_loaded || ipc->driver_loaded;
	if (ipc->err == 0) {
		ipc->state = GPU_IPC_OPEN;
		import_made(g, GPU_COST_IPC, 0, ipc->clock.ended - ipc->clock.started,
			    ipc->map.device, on_loop);
		job_clock_log("An IPC open", &ipc->clock, on_loop);
		/* Held while the waiters are served: a region made for one
		 * may go again at once (its client gone, the answer refused)
		 * and, releasing on the loop, drop its reference right here;
		 * the last one must not start the close (on ipc->work) while
		 * other waiters still take references. */
		ipc->n_ref++;
	}
	list_for_each_entry_safe(job, n, &ipc->waiters, link) {
		list_del(&job->link);
		if (ipc->err < 0)
			job_fail(job, ipc->error_name, ipc->err, ipc->error);
		else
			ipc_import(job);
		job_free(job);
	}
	if (ipc->err < 0) {
		list_del(&ipc->link);
		free(ipc);
		return;
	}
	/* Every import was refused (range, quota) or its region went: this
	 * closes it. */
	gpu_ipc_unref(ipc);
}

static void on_ipc_opened(uv_work_t *w, int status)
{
	(void)status;
	ipc_open_done(container_of(w, struct gpu_ipc, work), false);
}

static void ipc_start_open(struct gpu_ipc *ipc)
{
	int r;

	ipc->state = GPU_IPC_OPENING;
	ipc->err = 0;
	ipc->error_name = NULL;
	memset(&ipc->map, 0, sizeof(ipc->map));
	ipc->clock.queued = uv_hrtime();
	if (import_fits_loop(ipc->gpu, GPU_COST_IPC, 0, 1)) {
		ipc_open_run(ipc, CU_NO_WAIT);
		if (ipc->err != -EWOULDBLOCK) {
			ipc_open_done(ipc, true);
			return;
		}
		ipc->err = 0;
		ipc->error_name = NULL;
	}
	r = uv_queue_work(ipc->gpu->loop, &ipc->work, on_ipc_open, on_ipc_opened);
	if (r < 0) {
		ipc->err = -ENOMEM;
		ipc->error_name = RDMAMEM_ERROR_INTERNAL;
		snprintf(ipc->error, sizeof(ipc->error), "cannot queue the open: %s",
			 uv_strerror(r));
		on_ipc_opened(&ipc->work, 0);
	}
}

void gpu_ipc_unref(struct gpu_ipc *ipc)
{
	if (!ipc || --ipc->n_ref > 0)
		return;
	/* Closing is a CUDA call: on the pool. Until it is done, imports of
	 * the same handle wait (the driver maps it once per process). */
	ipc->state = GPU_IPC_OPENING;
	ipc->clock.queued = uv_hrtime();
	if (uv_queue_work(ipc->gpu->loop, &ipc->work, on_ipc_close, on_ipc_closed) < 0) {
		on_ipc_close(&ipc->work);
		on_ipc_closed(&ipc->work, 0);
	}
}

static int parse_handle(const char *hex, uint8_t out[CU_IPC_HANDLE_SIZE])
{
	return hex ? hex_decode(hex, out, CU_IPC_HANDLE_SIZE) : -EINVAL;
}

int gpu_import_start(struct gpu_ctx *g, struct session *owner, struct gpu_import_params *p,
		     gpu_import_done_fn done, void *userdata, struct gpu_import **ret,
		     struct errinfo *e)
{
	struct gpu_import *job;
	struct gpu_ipc *ipc;
	int r;

	job = calloc(1, sizeof(*job));
	if (!job) {
		gpu_import_params_close(p);
		return -ENOMEM;
	}
	job->done = done;
	job->userdata = userdata;
	job->owner = session_ref(owner);
	job->gpu = g;
	job->p = *p;
	p->n_fds = 0; /* taken */
	list_init(&job->link);

	if (p->memory == GPU_MEMORY_VMM) {
		unsigned n = job->p.n_fds;
		uint64_t length = p->length, total;

		/* The caller bounds the count and the size (no overflow). */
		total = p->alloc_size * n;
		if (p->offset >= total || (length && length > total - p->offset)) {
			job_free(job);
			return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
					   "range [%" PRIu64 ", +%" PRIu64 ") is outside the VMM "
					   "allocations (%u of %" PRIu64 " bytes)",
					   p->offset, length, n, p->alloc_size);
		}
		if (!length)
			length = total - p->offset;
		r = gpu_region_prepare(g, owner, length, &gpu_vmm_ops, &job->reg, e);
		if (r < 0) {
			job_free(job);
			return r;
		}
		job->reg->access = p->access;
		*ret = job;
		if (vmm_import_here(job))
			return 0;
		job->clock.queued = uv_hrtime();
		r = uv_queue_work(g->loop, &job->work, on_vmm_work, on_vmm_done);
		if (r < 0) {
			job_free(job);
			return -ENOMEM;
		}
		return 0;
	}

	if (parse_handle(p->ipc_handle, job->handle) < 0) {
		job_free(job);
		return errinfo_invalid_param(e, "ipc_handle", -EINVAL,
					     "parameter 'ipc_handle' must be the 64 bytes of a "
					     "CUipcMemHandle as 128 hex digits");
	}
	list_for_each_entry(ipc, &g->ipcs, link)
		if (memcmp(ipc->handle, job->handle, CU_IPC_HANDLE_SIZE) == 0)
			break;
	if (&ipc->link == &g->ipcs) {
		ipc = calloc(1, sizeof(*ipc));
		if (!ipc) {
			job_free(job);
			return -ENOMEM;
		}
		ipc->gpu = g;
		memcpy(ipc->handle, job->handle, CU_IPC_HANDLE_SIZE);
		ipc->ordinal = (int)p->gpu;
		list_init(&ipc->waiters);
		list_add_tail(&ipc->link, &g->ipcs);
		job->ipc = ipc;
		list_add_tail(&job->link, &ipc->waiters);
		*ret = job;
		ipc_start_open(ipc);
	} else if (ipc->state == GPU_IPC_OPEN) {
		/* Already open: a second region over the same allocation, told
		 * before this returns. */
		job->ipc = ipc;
		*ret = job;
		ipc_import(job);
		job_free(job);
	} else {
		job->ipc = ipc;
		list_add_tail(&job->link, &ipc->waiters);
		*ret = job;
	}
	return 0;
}

bool gpu_peer_memory_loaded(void)
{
	FILE *f = fopen("/proc/modules", "re");
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, "nvidia_peermem ", 15) == 0 ||
			strncmp(line, "nv_peer_mem ", 12) == 0;
	fclose(f);
	return found;
}

struct gpu_list_job {
	struct gpu_ctx *gpu;
	gpu_list_done_fn done;
	void *userdata;
	struct gpu_list_result res;
	uv_work_t work;
};

static void on_list_work(uv_work_t *w)
{
	struct gpu_list_job *job = container_of(w, struct gpu_list_job, work);
	struct gpu_list_result *res = &job->res;
	const char *name;
	int n;

	res->ran = true;
	res->err = load_driver(res->error, sizeof(res->error), &name);
	if (res->err < 0)
		return;
	n = cu_device_count();
	if (n < 0) {
		res->err = n;
		snprintf(res->error, sizeof(res->error), "%s", cu_last_error());
		return;
	}
	for (int i = 0; i < n && res->n < GPU_LIST_MAX; i++) {
		int k = res->n;

		if (cu_device_info(i, &res->info[k]) < 0)
			continue;
		res->refs[k] = cu_primary_ctx_refs(i);
		for (int j = 0; j < n && j < GPU_LIST_MAX; j++)
			if (j != i && cu_peer_info(i, j, &res->peers[k][res->n_peers[k]]) == 0)
				res->n_peers[k]++;
		res->n++;
	}
}

unsigned gpu_regions_on(const struct gpu_ctx *g, int ordinal)
{
	/* Kept up to date by gpu_region_count() and its hook. */
	return ordinal >= 0 && ordinal < GPU_LIST_MAX ? g->regions_on[ordinal] : 0;
}

static void on_list_done(uv_work_t *w, int status)
{
	struct gpu_list_job *job = container_of(w, struct gpu_list_job, work);

	(void)status;
	if (job->res.ran && job->res.err == 0)
		job->gpu->cuda_loaded = true;
	job->done(job->userdata, &job->res);
	free(job);
}

int gpu_list(struct gpu_ctx *g, bool probe, gpu_list_done_fn done, void *userdata)
{
	struct gpu_list_job *job = calloc(1, sizeof(*job));

	if (!job)
		return -ENOMEM;
	job->gpu = g;
	job->done = done;
	job->userdata = userdata;
	if (!probe && !g->cuda_loaded) {
		on_list_done(&job->work, 0);
		return 0;
	}
	if (uv_queue_work(g->loop, &job->work, on_list_work, on_list_done) < 0) {
		free(job);
		return -ENOMEM;
	}
	return 0;
}
