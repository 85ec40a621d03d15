/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/gpu/cuda.h"
#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu_bw.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "proto/hex.h"
#include "proto/json_out.h"
#include "daemon/mem/region.h"

static const struct gpu_region *gpu_region_of_const(const struct region *r)
{
	return container_of(r, const struct gpu_region, r);
}

/* ---- page-locking host regions that GPU copies touch ---- */

/* A host region's mapping, page-locked with CUDA through ordinal once, so
 * that copies to and from GPUs run at DMA speed instead of through bounce
 * buffers. Unlocked before the mapping goes (the hook's release). */
struct gpu_host_lock {
	struct region_hook hook;
	int ordinal;
};

struct host_lock_args {
	int ordinal;
	int err;
};

static void host_lock_release(struct region_hook *h)
{
	struct gpu_host_lock *l = container_of(h, struct gpu_host_lock, hook);
	struct region *r = h->region;
	int err = cu_host_unregister(r->map_base, l->ordinal);

	if (err < 0)
		log_full_fields(LOG_WARNING, err, LOG_REGION(r), "Region %" PRIu64 ": %s", r->id,
				cu_last_error());
}

static void host_lock_finish(struct region_hook *h)
{
	free(container_of(h, struct gpu_host_lock, hook));
}

static const struct region_hook_ops host_lock_ops = {
	.rank = REGION_HOOK_OTHER,
	.release = host_lock_release,
	.finish = host_lock_finish,
};

/* Under the region's hooks_lock: two copies may touch a fresh region at
 * once, and one registers. A failure attaches nothing: the next copy tries
 * again. */
static struct region_hook *host_lock_make(struct region *r, void *userdata)
{
	struct host_lock_args *a = userdata;
	struct gpu_host_lock *l = calloc(1, sizeof(*l));

	if (!l) {
		a->err = -ENOMEM;
		return NULL;
	}
	a->err = cu_host_register(r->map_base, r->map_len, a->ordinal, !r->writable);
	if (a->err < 0) {
		free(l);
		return NULL;
	}
	l->ordinal = a->ordinal;
	return &l->hook;
}

int gpu_region_host_locked_on(const struct region *r)
{
	struct region_hook *h = region_hook_find(r, &host_lock_ops);

	return h ? container_of(h, struct gpu_host_lock, hook)->ordinal : -1;
}

/* Pool: page-locks host region r through GPU ordinal, once. */
static void host_lock(struct region *r, int ordinal)
{
	struct host_lock_args a = { .ordinal = ordinal };

	if (!region_hook_get(r, &host_lock_ops, host_lock_make, &a))
		log_debug("Region %" PRIu64 ": cuMemHostRegister failed, copying pageable: %s",
			  r->id, a.err == -ENOMEM ? "out of memory" : cu_last_error());
}

/* ---- what both GPU kinds do alike ---- */

static uint64_t dev_at(const struct region_span *s)
{
	return s->region->dptr + s->offset;
}

static void *host_at(const struct region_span *s)
{
	return (char *)s->region->addr + s->offset;
}

/* Pool: copies under the context guard that cuda.c applies to every device
 * address. The other side may be a host region, page-locked on first use. */
static int gpu_copy(const struct region_span *dst, const struct region_span *src, uint64_t n,
		    void *bounce, struct errinfo *e)
{
	const char *what;
	int r;

	if (!src->region) {
		r = cu_copy_htod(dev_at(dst), src->buf, n);
		what = "writing GPU memory failed";
	} else if (!dst->region) {
		r = cu_copy_dtoh(dst->buf, dev_at(src), n);
		what = "reading GPU memory failed";
	} else if (region_is_host(src->region)) {
		host_lock(src->region, dst->region->gpu);
		r = cu_copy_htod(dev_at(dst), host_at(src), n);
		what = "host-to-GPU copy failed";
	} else if (region_is_host(dst->region)) {
		host_lock(dst->region, src->region->gpu);
		r = cu_copy_dtoh(host_at(dst), dev_at(src), n);
		what = "GPU-to-host copy failed";
	} else if (bounce) {
		/* Overlapping views of one allocation: cuMemcpy promises
		 * nothing for overlapping ranges. */
		r = cu_copy_dtoh(bounce, dev_at(src), n);
		if (r >= 0)
			r = cu_copy_htod(dev_at(dst), bounce, n);
		what = "GPU-to-GPU copy through host memory failed";
	} else {
		r = cu_copy_dtod(dev_at(dst), dev_at(src), n);
		what = "GPU-to-GPU copy failed";
	}
	if (r < 0)
		return errinfo_set(e, RDMAMEM_ERROR_CUDA, r, "%s: %s", what, cu_last_error());
	return 0;
}

/*
 * Loop: whether the loop may make the driver call that copies between dst
 * and src, or starts to: a page-locked host region and GPU memory, while no
 * other driver work of the daemon runs, since a copy made from the loop must
 * not queue behind a pool thread's, nor wait for a driver lock an import
 * holds. Never for the daemon's own buffers (Read, Write: pageable, staged
 * by the driver before it returns), a host region not yet page-locked (the
 * first copy locks it, milliseconds), or GPU to GPU (a peer copy may stage
 * through host memory). *ret_dev: the GPU side.
 */
static bool loop_may_copy(const struct region_span *dst, const struct region_span *src,
			  const struct region **ret_dev)
{
	const struct region *host;

	if (!dst->region || !src->region)
		return false;
	if (region_is_host(src->region)) {
		host = src->region;
		*ret_dev = dst->region;
	} else if (region_is_host(dst->region)) {
		host = dst->region;
		*ret_dev = src->region;
	} else {
		return false;
	}
	return gpu_region_host_locked_on(host) >= 0 && cu_idle();
}

/*
 * Loop: the expected time of a copy the loop may make, from the rates the
 * first import of the device measured: a small copy's time plus the bytes
 * at the bulk rate (device to host taken as fast as host to device, as
 * measured on an H100: 26 and 27 us per MiB). Not for a device not yet
 * measured.
 */
static uint64_t gpu_copy_usec(const struct region_span *dst, const struct region_span *src,
			      uint64_t n)
{
	const struct region *dev;
	struct cu_bandwidth bw;
	uint64_t per_usec;

	if (!loop_may_copy(dst, src, &dev) || !gpu_bandwidth(dev->gpu, &bw))
		return UINT64_MAX;
	per_usec = bw.htod / 1000000U;
	if (per_usec == 0 || bw.htod_small_ns == 0)
		return UINT64_MAX;
	return bw.htod_small_ns / 1000U + n / per_usec;
}

/*
 * Loop: a copy too long for the loop, queued from it all the same where
 * the loop may make the call (the driver takes a page-locked copy in a few
 * microseconds and returns), so that the bytes start to move at once; the
 * loop then looks for their end each turn (gpu_copy_poll()).
 */
static int gpu_copy_start(const struct region_span *dst, const struct region_span *src, uint64_t n,
			  void **ret_pending, struct errinfo *e)
{
	struct cu_copy_pending *p;
	const struct region *dev;
	int r;

	if (!loop_may_copy(dst, src, &dev))
		return 0;
	if (region_is_host(src->region))
		r = cu_copy_htod_start(dev_at(dst), host_at(src), n, &p);
	else
		r = cu_copy_dtoh_start(host_at(dst), dev_at(src), n, &p);
	if (r < 0)
		return errinfo_set(e, RDMAMEM_ERROR_CUDA, r,
				   "starting a copy with GPU %d failed: %s", dev->gpu,
				   cu_last_error());
	*ret_pending = p;
	return 1;
}

/* Loop: whether a gpu_copy_start()'s bytes landed (cu_copy_poll()). */
static int gpu_copy_poll(void *pending)
{
	return cu_copy_poll(pending);
}

/* Pool, or the loop once landed: the rest of a gpu_copy_start(). */
static int gpu_copy_finish(void *pending, struct errinfo *e)
{
	int r = cu_copy_finish(pending);

	if (r < 0)
		return errinfo_set(e, RDMAMEM_ERROR_CUDA, r, "a copy with GPU memory failed: %s",
				   cu_last_error());
	return 0;
}

/*
 * A device region's MR source: the dma-buf fd (taken) of the range that
 * starts at base when err is 0, offset to the region, with the device
 * address as iova so peers use the same addresses as for host memory; the
 * device address itself for peer memory when there is none.
 */
static int device_mr_source(struct region *r, int err, int fd, uint64_t base,
			    struct region_mr_source *ret)
{
	*ret = (struct region_mr_source){
		.addr = (void *)(uintptr_t)r->dptr,
		.device = true,
		.dmabuf_fd = -EBADF,
		.iova = r->dptr,
	};
	if (err == 0) {
		ret->dmabuf_fd = fd;
		ret->dmabuf_offset = r->dptr - base;
	} else {
		snprintf(ret->dmabuf_error, sizeof(ret->dmabuf_error),
			 "no dma-buf for the allocation: %s", cu_last_error());
	}
	return 0;
}

/* Pool: a dma-buf of the whole allocation (NICs register whole
 * allocations; a sub-range of a page may not export). */
static int gpu_mr_source(struct region *r, struct region_mr_source *ret)
{
	uint64_t base = 0, size;
	int fd = -EBADF, err;

	err = cu_dmabuf_fd_for(r->dptr, &fd, &base, &size);
	return device_mr_source(r, err, fd, base, ret);
}

/* ---- cuda-vmm ---- */

/* Pool: a dma-buf of the whole mapped range: the region may span several
 * allocations, each mapped in it in order. */
static int vmm_mr_source(struct region *r, struct region_mr_source *ret)
{
	const struct cu_vmm_map *m = &gpu_region_of(r)->vmm;
	int fd = -EBADF, err;

	err = cu_dmabuf_fd(m->dptr, m->size, &fd);
	return device_mr_source(r, err, fd, m->dptr, ret);
}

static void vmm_release(struct region *r)
{
	uint64_t t0 = uv_hrtime();
	int err = cu_vmm_release(&gpu_region_of(r)->vmm);

	gpu_region_kept_fds_close(r);

	log_debug("Region %" PRIu64 ": its VMM mapping's release took %.1f us", r->id,
		  (double)(uv_hrtime() - t0) / 1e3);
	if (err < 0)
		log_full_fields(LOG_WARNING, err, LOG_REGION(r), "Region %" PRIu64 ": %s", r->id,
				cu_last_error());
}

static void vmm_describe(const struct region *r, struct json_out *source)
{
	const struct gpu_region *g = gpu_region_of_const(r);

	json_out_u64(source, "offset", r->dptr - g->vmm.dptr);
	json_out_u64(source, "allocation_size", g->vmm.size);
	json_out_int(source, "chunks", (int)g->vmm.n_chunks);
	json_out_int(source, "primary_context_refs", cu_primary_ctx_refs(r->gpu));
}

_Static_assert(CU_VMM_CHUNKS_MAX <= REGION_KEEP_FDS_MAX, "a VMM region's files fit");

void gpu_region_kept_fds_close(struct region *r)
{
	struct gpu_region *g;

	if (r->mem != &gpu_vmm_ops)
		return;
	g = gpu_region_of(r);
	for (unsigned i = 0; i < g->n_kept_fds; i++)
		g->kept_fds[i] = safe_close(g->kept_fds[i]);
	g->n_kept_fds = 0;
}

/* Its kept fds and the allocations' size: gpu_keep.c imports them again. */
static int vmm_keep(const struct region *r, struct region_keep *ret)
{
	const struct gpu_region *g = gpu_region_of_const(r);

	if (g->n_kept_fds == 0)
		return -EOPNOTSUPP;
	memcpy(ret->fds, g->kept_fds, g->n_kept_fds * sizeof(int));
	ret->n_fds = g->n_kept_fds;
	ret->offset = r->dptr - g->vmm.dptr;
	snprintf(ret->text, sizeof(ret->text), GPU_KEEP_VMM " %" PRIu64, g->vmm.chunk_size);
	return 0;
}

/*
 * No same_memory: each import maps the allocation anew, and nothing tells
 * two imports of one allocation apart from two allocations: every exported
 * fd is /dev/nvidiactl, and the handle, buffer id and memory block id differ
 * per import (seen on an H200, driver 580). They are taken to be separate
 * memory.
 */
const struct region_mem_ops gpu_vmm_ops = {
	.type = "cuda-vmm",
	.release = vmm_release,
	.mr_source = vmm_mr_source,
	.keep = vmm_keep,
	.copy = gpu_copy,
	.copy_usec = gpu_copy_usec,
	.copy_start = gpu_copy_start,
	.copy_poll = gpu_copy_poll,
	.copy_finish = gpu_copy_finish,
	.describe = vmm_describe,
};

/* ---- cuda-ipc ---- */

/* Loop: the open is shared; the last region over it closes it. */
static void ipc_finish(struct region *r)
{
	gpu_ipc_unref(gpu_region_of(r)->ipc);
}

static void ipc_describe(const struct region *r, struct json_out *source)
{
	const struct gpu_ipc *ipc = gpu_region_of_const(r)->ipc;

	json_out_u64(source, "offset", r->dptr - ipc->map.dptr);
	json_out_u64(source, "allocation_size", ipc->map.size);
	json_out_int(source, "regions_sharing_the_open", ipc->n_ref);
}

/* The handle and the GPU it was opened with: no file. The allocation lives
 * as long as the exporting client does, which reclaims it. */
static int ipc_keep(const struct region *r, struct region_keep *ret)
{
	const struct gpu_ipc *ipc = gpu_region_of_const(r)->ipc;
	char hex[2 * CU_IPC_HANDLE_SIZE + 1];

	hex_encode(ipc->handle, CU_IPC_HANDLE_SIZE, hex);
	ret->n_fds = 0;
	ret->offset = r->dptr - ipc->map.dptr;
	snprintf(ret->text, sizeof(ret->text), GPU_KEEP_IPC " %d %s", ipc->ordinal, hex);
	return 0;
}

/* One open per allocation: one address range. */
static bool ipc_same_memory(const struct region *a, const struct region *b, int64_t *ret_delta)
{
	if (gpu_region_of_const(a)->ipc != gpu_region_of_const(b)->ipc)
		return false;
	*ret_delta = (int64_t)(b->dptr - a->dptr);
	return true;
}

const struct region_mem_ops gpu_ipc_ops = {
	.type = "cuda-ipc",
	.finish = ipc_finish,
	.mr_source = gpu_mr_source,
	.keep = ipc_keep,
	.copy = gpu_copy,
	.copy_usec = gpu_copy_usec,
	.copy_start = gpu_copy_start,
	.copy_poll = gpu_copy_poll,
	.copy_finish = gpu_copy_finish,
	.describe = ipc_describe,
	.same_memory = ipc_same_memory,
};
