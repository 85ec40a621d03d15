/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU model (daemon/gpu/gpu.c, gpu_region.c) against the fake CUDA
 * driver (tests/fakes/fake-cuda.c), without a daemon: a core, the region
 * registry and a gpu_ctx on a loop, a session that imports. What is
 * checked is the GPU kinds' memory ops — describe(), mr_source() with a
 * dma-buf or the bare address, copy() through the driver (page-locking a
 * host region on first use, bouncing overlapping views), same_memory() —
 * and the release order the driver sees through the hooks: registrations,
 * then a host region's page-locking, then the memory; an IPC open shared
 * by two regions is closed once, with the last.
 *
 * The fake is installed wrapped: the calls that touch memory are logged,
 * in the order the driver saw them, next to what the test's own hooks
 * log, so one string tells the order of everything.
 *
 * Every case relies on CK_FORK: cu_load() runs once per process, and the
 * fake's knobs and counts start afresh in each.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/gpu/cuda.h"
#include "tests/testlib.h"

#if HAVE_CUDA_H
#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/gpu_keep.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/mem/keep.h"
#include "daemon/mem/xfer.h"
#include "proto/errors.h"
#include "tests/fakes/fake-cuda.h"
#include "tests/fakes/fake.h"
#include "tests/unit/mem-fixture.h"
#include "tests/unit/store-fixture.h"

#define GRAN FAKE_CUDA_GRAN

/* ---- the driver's log ---- */

/* Written from the pool (releases, the IPC open and close) and the loop. */
static struct {
	pthread_mutex_t lock;
	char text[2048];
	bool fail_dmabuf;  /* cuMemGetHandleForAddressRange refuses */
	int fail_releases; /* cuDevicePrimaryCtxRelease refuses this many more */
	int n_ipc_open, n_ipc_close;
	/* cuMemcpyHtoD waits while hold is set; in_htod counts who waits */
	pthread_cond_t cond;
	bool hold;
	int in_htod;
	/* cuEventQuery says CUDA_ERROR_NOT_READY while moving is set, and
	 * counts those looks */
	bool moving;
	int n_looks;
	/* cuMemImportFromShareableHandle and cuIpcOpenMemHandle calls made
	 * on the thread that runs the loop (loop_thread), and elsewhere */
	int n_import_loop, n_import_pool;
	int n_ipc_open_loop;
	/* cuDevicePrimaryCtxRelease of GPU 0 waits while hold_release is set */
	bool hold_release;
	int in_release;
	/* releases on the loop's thread that left a GPU's context without a
	 * retain (destroyed it, on a real driver) */
	int n_last_release_loop;
	/* an IPC open on the loop's thread starts release_on_open first */
	bool release_in_open;
	pthread_t releaser;
} drv = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static pthread_t loop_thread; /* the test's, which runs the loop */
static struct cu_ops fake;    /* the fake's own entries, called through */
static struct cu_ops logged;  /* installed: the fake's, some wrapped */

static void log_call(const char *what)
{
	pthread_mutex_lock(&drv.lock);
	if (drv.text[0])
		strncat(drv.text, " ", sizeof(drv.text) - strlen(drv.text) - 1);
	strncat(drv.text, what, sizeof(drv.text) - strlen(drv.text) - 1);
	pthread_mutex_unlock(&drv.lock);
}

static void log_clear(void)
{
	pthread_mutex_lock(&drv.lock);
	drv.text[0] = '\0';
	pthread_mutex_unlock(&drv.lock);
}

/* Counts itself in *in while *hold is set, and waits for it to clear. */
static void held(bool *hold, int *in)
{
	pthread_mutex_lock(&drv.lock);
	(*in)++;
	pthread_cond_broadcast(&drv.cond);
	while (*hold)
		pthread_cond_wait(&drv.cond, &drv.lock);
	(*in)--;
	pthread_mutex_unlock(&drv.lock);
}

/* Until the calling thread sees *in at n. */
static void wait_held(int *in, int n)
{
	pthread_mutex_lock(&drv.lock);
	while (*in != n)
		pthread_cond_wait(&drv.cond, &drv.lock);
	pthread_mutex_unlock(&drv.lock);
}

static void hold_set(bool *hold, bool on)
{
	pthread_mutex_lock(&drv.lock);
	*hold = on;
	pthread_cond_broadcast(&drv.cond);
	pthread_mutex_unlock(&drv.lock);
}

static CUresult CUDAAPI l_htod(CUdeviceptr dst, const void *src, size_t n)
{
	log_call("HtoD");
	held(&drv.hold, &drv.in_htod);
	return fake.cuMemcpyHtoD(dst, src, n);
}

static CUresult CUDAAPI l_htod_async(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	log_call("HtoDAsync");
	return fake.cuMemcpyHtoDAsync(dst, src, n, s);
}

static CUresult CUDAAPI l_dtoh_async(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	log_call("DtoHAsync");
	return fake.cuMemcpyDtoHAsync(dst, src, n, s);
}

static CUresult CUDAAPI l_event_sync(CUevent ev)
{
	log_call("EventSync");
	return fake.cuEventSynchronize(ev);
}

/* Logged once it says done; the looks before that are only counted. */
static CUresult CUDAAPI l_event_query(CUevent ev)
{
	bool moving;

	pthread_mutex_lock(&drv.lock);
	moving = drv.moving;
	drv.n_looks += moving;
	pthread_mutex_unlock(&drv.lock);
	if (moving)
		return CUDA_ERROR_NOT_READY;
	log_call("EventQuery");
	return fake.cuEventQuery(ev);
}

static void moving_set(bool on)
{
	pthread_mutex_lock(&drv.lock);
	drv.moving = on;
	drv.n_looks = 0;
	pthread_mutex_unlock(&drv.lock);
}

static CUresult CUDAAPI l_dtoh(void *dst, CUdeviceptr src, size_t n)
{
	log_call("DtoH");
	return fake.cuMemcpyDtoH(dst, src, n);
}

static CUresult CUDAAPI l_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	log_call("DtoD");
	return fake.cuMemcpyDtoD(dst, src, n);
}

static CUresult CUDAAPI l_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
			       CUcontext src_ctx, size_t n)
{
	log_call("Peer");
	return fake.cuMemcpyPeer(dst, dst_ctx, src, src_ctx, n);
}

static CUresult CUDAAPI l_host_register(void *p, size_t n, unsigned flags)
{
	log_call("HostRegister");
	return fake.cuMemHostRegister(p, n, flags);
}

static CUresult CUDAAPI l_host_unregister(void *p)
{
	log_call("HostUnregister");
	return fake.cuMemHostUnregister(p);
}

static CUresult CUDAAPI l_import(CUmemGenericAllocationHandle *h, void *fd,
				 CUmemAllocationHandleType type)
{
	pthread_mutex_lock(&drv.lock);
	if (pthread_equal(pthread_self(), loop_thread))
		drv.n_import_loop++;
	else
		drv.n_import_pool++;
	pthread_mutex_unlock(&drv.lock);
	return fake.cuMemImportFromShareableHandle(h, fd, type);
}

/* Lets go of a retain of GPU 0's context (as the linger does). */
static void *release_on_open(void *unused)
{
	(void)unused;
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	return NULL;
}

static CUresult CUDAAPI l_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	bool on_loop = pthread_equal(pthread_self(), loop_thread);

	pthread_mutex_lock(&drv.lock);
	drv.n_ipc_open++;
	drv.n_ipc_open_loop += on_loop;
	pthread_mutex_unlock(&drv.lock);
	if (on_loop && drv.release_in_open) {
		drv.release_in_open = false;
		ck_assert_int_eq(pthread_create(&drv.releaser, NULL, release_on_open, NULL), 0);
		/* Give it the time to reach the lock, which the loop holds. */
		usleep(20000);
	}
	log_call("IpcOpen");
	return fake.cuIpcOpenMemHandle(p, h, flags);
}

static CUresult CUDAAPI l_ipc_close(CUdeviceptr p)
{
	pthread_mutex_lock(&drv.lock);
	drv.n_ipc_close++;
	pthread_mutex_unlock(&drv.lock);
	log_call("IpcClose");
	return fake.cuIpcCloseMemHandle(p);
}

static CUresult CUDAAPI l_unmap(CUdeviceptr p, size_t size)
{
	log_call("Unmap");
	return fake.cuMemUnmap(p, size);
}

static CUresult CUDAAPI l_address_free(CUdeviceptr p, size_t size)
{
	log_call("AddressFree");
	return fake.cuMemAddressFree(p, size);
}

static CUresult CUDAAPI l_mem_release(CUmemGenericAllocationHandle h)
{
	log_call("MemRelease");
	return fake.cuMemRelease(h);
}

static CUresult CUDAAPI l_ctx_release(CUdevice d)
{
	bool fail;

	if (d == 0)
		held(&drv.hold_release, &drv.in_release);
	CUresult res;

	pthread_mutex_lock(&drv.lock);
	fail = drv.fail_releases > 0;
	drv.fail_releases -= fail;
	pthread_mutex_unlock(&drv.lock);
	res = fail ? CUDA_ERROR_INVALID_CONTEXT : fake.cuDevicePrimaryCtxRelease(d);
	if (res == CUDA_SUCCESS && pthread_equal(pthread_self(), loop_thread) &&
	    fake_cuda.primary_refs[d] == 0) {
		pthread_mutex_lock(&drv.lock);
		drv.n_last_release_loop++;
		pthread_mutex_unlock(&drv.lock);
	}
	return res;
}

static CUresult CUDAAPI l_dmabuf(void *handle, CUdeviceptr p, size_t size,
				 CUmemRangeHandleType type, unsigned long long flags)
{
	bool fail;

	pthread_mutex_lock(&drv.lock);
	fail = drv.fail_dmabuf;
	pthread_mutex_unlock(&drv.lock);
	log_call("DmaBuf");
	if (fail)
		return CUDA_ERROR_INVALID_VALUE;
	return fake.cuMemGetHandleForAddressRange(handle, p, size, type, flags);
}

/* ---- the fixture ---- */

static struct mem_fixture f;
static struct gpu_ctx gpu;

/* What an import's done callback saw. */
struct imported {
	bool done;
	bool drop; /* the owner lets the region go as it comes */
	struct region *r;
	char error[64];
};

static void on_imported(void *userdata, struct region *r, struct errinfo *e)
{
	struct imported *im = userdata;

	ck_assert(!im->done);
	im->done = true;
	im->r = r;
	snprintf(im->error, sizeof(im->error), "%s", e->name ?: "");
	if (im->drop && r) {
		region_drop_owner(r);
		im->r = NULL;
	}
}

static void setup(void)
{
	memset(&drv.text, 0, sizeof(drv.text));
	drv.fail_dmabuf = false;
	drv.fail_releases = 0;
	drv.n_ipc_open = drv.n_ipc_close = 0;
	drv.n_import_loop = drv.n_import_pool = drv.n_ipc_open_loop = 0;
	drv.hold_release = false;
	drv.in_release = 0;
	drv.n_last_release_loop = 0;
	drv.release_in_open = false;
	loop_thread = pthread_self();
	drv.hold = drv.moving = false;
	drv.in_htod = drv.n_looks = 0;
	fake = fake_cu_ops;
	logged = fake_cu_ops;
	logged.cuMemcpyHtoD = l_htod;
	logged.cuMemcpyDtoH = l_dtoh;
	logged.cuMemcpyDtoD = l_dtod;
	logged.cuMemcpyPeer = l_peer;
	logged.cuMemcpyHtoDAsync = l_htod_async;
	logged.cuMemcpyDtoHAsync = l_dtoh_async;
	logged.cuEventSynchronize = l_event_sync;
	logged.cuEventQuery = l_event_query;
	logged.cuMemHostRegister = l_host_register;
	logged.cuMemHostUnregister = l_host_unregister;
	logged.cuMemImportFromShareableHandle = l_import;
	logged.cuIpcOpenMemHandle = l_ipc_open;
	logged.cuIpcCloseMemHandle = l_ipc_close;
	logged.cuMemUnmap = l_unmap;
	logged.cuMemAddressFree = l_address_free;
	logged.cuMemRelease = l_mem_release;
	logged.cuMemGetHandleForAddressRange = l_dmabuf;
	logged.cuDevicePrimaryCtxRelease = l_ctx_release;
	ck_assert_int_eq(cu_set_ops(&logged), 0);
	mem_fixture_init(&f);
	gpu_ctx_init(&gpu, &f.loop, &f.regions, 0);
}

/* The sessions close (their regions go), every release and IPC close runs
 * on the pool; then the driver holds nothing of ours. */
static void teardown(void)
{
	mem_fixture_done(&f);
	ck_assert(list_empty(&gpu.ipcs));
	ck_assert_int_eq(fake_cuda_live(), 0);
	ck_assert_int_eq(fake_cuda_depth(), 0);
}

/* Runs the loop until every IPC open is closed (or about 5 s). */
static void run_until_ipcs_closed(void)
{
	for (int i = 0; i < 5000 && !list_empty(&gpu.ipcs); i++) {
		uv_run(&f.loop, UV_RUN_NOWAIT);
		if (!list_empty(&gpu.ipcs))
			usleep(1000);
	}
	ck_assert(list_empty(&gpu.ipcs));
}

/* A VMM import of n allocations of alloc_size bytes each (device 1, as the
 * fake's are), the region from offset on, for f.owner; exported again for
 * the fd store when keep. */
static struct region *import_vmm_chunks(unsigned n, uint64_t alloc_size, uint64_t offset, bool keep)
{
	struct gpu_import_params p = {
		.memory = GPU_MEMORY_VMM,
		.alloc_size = alloc_size,
		.offset = offset,
		.keep = keep,
	};
	struct imported im = {};
	struct gpu_import *job = NULL;
	struct errinfo e = {};

	/* One open file for every allocation, as PyTorch sends one exported
	 * fd per segment: the store must still keep each region's parts. */
	for (; p.n_fds < n; p.n_fds++) {
		p.fds[p.n_fds] = p.n_fds ? fcntl(p.fds[0], F_DUPFD_CLOEXEC, 3) :
					   open("/dev/null", O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(p.fds[p.n_fds], 0);
	}
	ck_assert_int_eq(gpu_import_start(&gpu, f.owner, &p, on_imported, &im, &job, &e), 0);
	ck_assert_ptr_nonnull(job);
	mem_fixture_run_until(&f, &im.done, 5000);
	ck_assert(im.done);
	ck_assert_str_eq(im.error, "");
	ck_assert_ptr_nonnull(im.r);
	return im.r;
}

static struct region *import_vmm(uint64_t alloc_size, uint64_t offset)
{
	return import_vmm_chunks(1, alloc_size, offset, false);
}

static void ipc_hex(char out[2 * CU_IPC_HANDLE_SIZE + 1], uint8_t id, uint8_t device)
{
	memset(out, '0', 2 * CU_IPC_HANDLE_SIZE);
	out[2 * CU_IPC_HANDLE_SIZE] = '\0';
	snprintf(out, 5, "%02x%02x", id, device);
	out[4] = '0';
}

/* Starts an IPC import of handle (opened from GPU 0) for f.owner. */
static void start_ipc(const char *handle, uint64_t offset, uint64_t length, struct imported *im)
{
	struct gpu_import_params p = {
		.memory = GPU_MEMORY_IPC,
		.ipc_handle = handle,
		.gpu = 0,
		.offset = offset,
		.length = length,
	};
	struct gpu_import *job = NULL;
	struct errinfo e = {};

	ck_assert_int_eq(gpu_import_start(&gpu, f.owner, &p, on_imported, im, &job, &e), 0);
}

static struct region *import_ipc(const char *handle, uint64_t offset, uint64_t length)
{
	struct imported im = {};

	start_ipc(handle, offset, length, &im);
	mem_fixture_run_until(&f, &im.done, 5000);
	ck_assert(im.done);
	ck_assert_str_eq(im.error, "");
	ck_assert_ptr_nonnull(im.r);
	return im.r;
}

static unsigned char *dev_bytes(const struct region *r, uint64_t offset)
{
	/* The fake's device memory is host heap. */
	return (unsigned char *)(uintptr_t)(r->dptr + offset);
}

static const char *describe_str(cJSON *src, const char *name)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(src, name);

	ck_assert_msg(cJSON_IsString(v), "%s is not a string", name);
	return v->valuestring;
}

static int describe_int(cJSON *src, const char *name)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(src, name);

	ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", name);
	return v->valueint;
}

/* describe()'s count of the regions over r's IPC open. */
static int ipc_refs(const struct region *r)
{
	cJSON *src = mem_describe_tree(r);
	int n;

	n = describe_int(src, "regions_sharing_the_open");
	cJSON_Delete(src);
	return n;
}

/* ---- a test hook that logs: registrations, by rank ---- */

static bool test_hook_finished;

static void test_hook_release(struct region_hook *h)
{
	(void)h;
	log_call("registrations");
}

static void test_hook_finish(struct region_hook *h)
{
	(void)h;
	test_hook_finished = true;
}

static const struct region_hook_ops test_hook_ops = {
	.rank = REGION_HOOK_REGISTRATIONS,
	.release = test_hook_release,
	.finish = test_hook_finish,
};

static struct region_hook test_hook;

static struct region_hook *test_hook_make(struct region *r, void *userdata)
{
	(void)r;
	(void)userdata;
	return &test_hook;
}

static void attach_test_hook(struct region *r)
{
	test_hook_finished = false;
	ck_assert_ptr_eq(region_hook_get(r, &test_hook_ops, test_hook_make, NULL), &test_hook);
}

/* r's owner lets go; returns once r's release has run to its end. */
static void drop_and_wait(struct region *r)
{
	attach_test_hook(r);
	region_drop_owner(r);
	mem_fixture_run_until(&f, &test_hook_finished, 5000);
	ck_assert(test_hook_finished);
}

/* A host region's memory release, logged: the memfd kind's ops with its
 * release wrapped (the kind is static to region_memfd.c). */
static struct region_mem_ops logged_memfd;
static void (*memfd_release)(struct region *r);

static void logged_memfd_release(struct region *r)
{
	log_call("munmap");
	memfd_release(r);
}

static void log_host_release(struct region *r)
{
	logged_memfd = *r->mem;
	memfd_release = r->mem->release;
	ck_assert_ptr_nonnull(memfd_release);
	logged_memfd.release = logged_memfd_release;
	r->mem = &logged_memfd;
}

/* ---- the cases ---- */

START_TEST(test_vmm_describe)
{
	struct region *r = import_vmm(4 * GRAN, 4096);
	struct cu_device_info info;
	cJSON *src = NULL;
	char want[32];

	ck_assert_ptr_eq(r->mem, &gpu_vmm_ops);
	ck_assert_str_eq(r->mem->type, "cuda-vmm");
	ck_assert(region_is_gpu(r));
	ck_assert_int_eq(r->gpu, 1);
	ck_assert_uint_eq(r->size, 4 * GRAN - 4096);
	ck_assert_uint_eq(r->dptr, gpu_region_of(r)->vmm.dptr + 4096);
	ck_assert_int_eq(cu_device_info(1, &info), 0);
	ck_assert_str_eq(r->pci_bus_id, info.pci_bus_id);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 1);
	ck_assert(gpu.cuda_loaded);
	/* The first import of device 1 measured its copy rates with buffers of
	 * its own, freed again (the fake copies with memcpy: some rate). */
	{
		struct cu_bandwidth bw;

		ck_assert(gpu_bandwidth(1, &bw));
		ck_assert_uint_gt(bw.dtod, 0);
		ck_assert_uint_gt(bw.htod, 0);
		ck_assert_uint_gt(bw.htod_small_ns, 0);
		ck_assert(!gpu_bandwidth(0, &bw) || bw.dtod > 0);
	}

	src = mem_describe_tree(r);
	ck_assert_str_eq(describe_str(src, "offset"), "4096");
	snprintf(want, sizeof(want), "%lu", 4 * GRAN);
	ck_assert_str_eq(describe_str(src, "allocation_size"), want);
	ck_assert_int_eq(describe_int(src, "primary_context_refs"), 1);
	cJSON_Delete(src);

	/* The owner lets go: the count drops at once, the memory with the
	 * release on the pool. */
	region_drop_owner(r);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 0);
}
END_TEST

START_TEST(test_ipc_describe_same_memory)
{
	char h[2 * CU_IPC_HANDLE_SIZE + 1], h2[2 * CU_IPC_HANDLE_SIZE + 1];
	struct imported im = {};
	struct region *a, *b, *c, *v;
	int64_t delta = 12345;
	cJSON *src;
	char want[32];

	ipc_hex(h, 1, 1);
	ipc_hex(h2, 2, 1);
	a = import_ipc(h, 0, 8192);
	/* The open is there: a second region over it comes before the
	 * import returns. */
	start_ipc(h, 4096, 0, &im);
	ck_assert(im.done);
	ck_assert_ptr_nonnull(im.r);
	b = im.r;
	c = import_ipc(h2, 0, 0);
	v = import_vmm(GRAN, 0);

	ck_assert_str_eq(a->mem->type, "cuda-ipc");
	ck_assert_ptr_eq(b->mem, &gpu_ipc_ops);
	ck_assert_int_eq(a->gpu, 1); /* lives on 1, opened from 0 */
	ck_assert_uint_eq(a->size, 8192);
	ck_assert_uint_eq(b->size, FAKE_CUDA_IPC_SIZE - 4096);
	ck_assert_ptr_eq(gpu_region_of(a)->ipc, gpu_region_of(b)->ipc);
	ck_assert_ptr_ne(gpu_region_of(a)->ipc, gpu_region_of(c)->ipc);
	ck_assert_int_eq(drv.n_ipc_open, 2);

	src = mem_describe_tree(b);
	ck_assert_str_eq(describe_str(src, "offset"), "4096");
	snprintf(want, sizeof(want), "%lu", FAKE_CUDA_IPC_SIZE);
	ck_assert_str_eq(describe_str(src, "allocation_size"), want);
	ck_assert_int_eq(describe_int(src, "regions_sharing_the_open"), 2);
	cJSON_Delete(src);
	ck_assert_int_eq(ipc_refs(c), 1);

	/* One open: one address range, b 4096 bytes after a. */
	ck_assert(a->mem->same_memory(a, b, &delta));
	ck_assert_int_eq(delta, 4096);
	ck_assert(region_same_memory(b, a, &delta));
	ck_assert_int_eq(delta, -4096);
	/* Another allocation, another kind. */
	delta = 12345;
	ck_assert(!a->mem->same_memory(a, c, &delta));
	ck_assert(!region_same_memory(a, v, &delta));
	ck_assert(!region_same_memory(v, a, &delta));
	ck_assert_int_eq(delta, 12345);
	/* VMM imports are taken to be separate memory: no same_memory. */
	ck_assert_ptr_null(gpu_vmm_ops.same_memory);

	/* An IPC region's release is no driver call: b is finished as its
	 * owner lets go, on the loop, with no pool job to wait for, and the
	 * open stays for a. */
	region_drop_owner(b);
	ck_assert_int_eq(ipc_refs(a), 1);
	ck_assert_int_eq(drv.n_ipc_close, 0);
}
END_TEST

START_TEST(test_mr_source_dmabuf)
{
	struct region *r = import_vmm(4 * GRAN, 4096);
	struct region_mr_source src;

	log_clear();
	ck_assert_int_eq(r->mem->mr_source(r, &src), 0);
	ck_assert_int_ge(src.dmabuf_fd, 0);
	ck_assert_int_eq(fcntl(src.dmabuf_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert(src.device);
	ck_assert_ptr_eq(src.addr, (void *)(uintptr_t)r->dptr);
	ck_assert_uint_eq(src.iova, r->dptr);
	/* The whole allocation, the region 4096 bytes into it. */
	ck_assert_uint_eq(src.dmabuf_offset, 4096);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_base, gpu_region_of(r)->vmm.dptr);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_size, 4 * GRAN);
	ck_assert_str_eq(src.dmabuf_error, "");
	ck_assert_str_eq(drv.text, "DmaBuf");
	close(src.dmabuf_fd);
}
END_TEST

/* A region over three allocations mapped in order: its range runs across
 * them, it describes them, and its dma-buf covers the whole mapped range. */
START_TEST(test_vmm_chunks)
{
	struct region *r = import_vmm_chunks(3, GRAN, GRAN - 100, false);
	struct region_mr_source src;
	cJSON *o;
	char want[32];

	ck_assert_uint_eq(r->size, 2 * GRAN + 100);
	ck_assert_uint_eq(gpu_region_of(r)->vmm.n_chunks, 3);
	ck_assert_uint_eq(fake_cuda.n_mapped, 3);
	memset(dev_bytes(r, 0), 0x5a, r->size); /* the fake's mappings are one heap block */
	o = mem_describe_tree(r);
	snprintf(want, sizeof(want), "%lu", 3 * GRAN);
	ck_assert_str_eq(describe_str(o, "allocation_size"), want);
	ck_assert_int_eq(describe_int(o, "chunks"), 3);
	cJSON_Delete(o);
	ck_assert_int_eq(r->mem->mr_source(r, &src), 0);
	ck_assert_int_ge(src.dmabuf_fd, 0);
	ck_assert_uint_eq(src.dmabuf_offset, GRAN - 100);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_base, gpu_region_of(r)->vmm.dptr);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_size, 3 * GRAN);
	close(src.dmabuf_fd);
	region_drop_owner(r);
}
END_TEST

START_TEST(test_mr_source_address)
{
	char h[2 * CU_IPC_HANDLE_SIZE + 1];
	struct region *r;
	struct region_mr_source src;

	ipc_hex(h, 7, 0);
	r = import_ipc(h, 8192, 4096);
	drv.fail_dmabuf = true;
	ck_assert_int_eq(r->mem->mr_source(r, &src), 0);
	/* No dma-buf: the device address for peer memory, and why. */
	ck_assert_int_eq(src.dmabuf_fd, -EBADF);
	ck_assert(src.device);
	ck_assert_ptr_eq(src.addr, (void *)(uintptr_t)r->dptr);
	ck_assert_uint_eq(src.iova, r->dptr);
	ck_assert_ptr_nonnull(strstr(src.dmabuf_error, "no dma-buf for the allocation"));
	ck_assert_ptr_nonnull(strstr(src.dmabuf_error, "CUDA_ERROR_INVALID_VALUE"));
	ck_assert_ptr_nonnull(strstr(src.dmabuf_error, "(cuMemGetHandleForAddressRange)"));
}
END_TEST

START_TEST(test_copy)
{
	struct region *v = import_vmm(GRAN, 0), *host = mem_fixture_import(&f, 8192);
	char h[2 * CU_IPC_HANDLE_SIZE + 1];
	unsigned char buf[1000], back[1000];
	struct errinfo e = {};
	struct region *ipc;

	ipc_hex(h, 3, 1);
	ipc = import_ipc(h, 0, 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);

	/* The daemon's own buffer to and from GPU memory. */
	log_clear();
	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v, .offset = 100 },
				      &(struct region_span){ .buf = buf }, sizeof(buf), NULL, &e),
			 0);
	ck_assert_mem_eq(dev_bytes(v, 100), buf, sizeof(buf));
	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .buf = back },
				      &(struct region_span){ .region = v, .offset = 100 },
				      sizeof(back), NULL, &e),
			 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	ck_assert_str_eq(drv.text, "HtoD DtoH");
	ck_assert_ptr_eq(fake_cuda.last_copy_ctx, fake_cuda_primary(1));

	/* GPU to GPU: VMM to IPC. Both are GPU 1's memory, but the IPC open
	 * lives in GPU 0's context and the mapping in none (GPU 1's primary):
	 * each side in its own context. */
	log_clear();
	ck_assert_int_eq(ipc->mem->copy(&(struct region_span){ .region = ipc, .offset = 5 },
					&(struct region_span){ .region = v, .offset = 100 },
					sizeof(buf), NULL, &e),
			 0);
	ck_assert_mem_eq(dev_bytes(ipc, 5), buf, sizeof(buf));
	ck_assert_str_eq(drv.text, "Peer");
	ck_assert_ptr_eq(fake_cuda.last_peer_dst_ctx, fake_cuda_primary(0));
	ck_assert_ptr_eq(fake_cuda.last_peer_src_ctx, fake_cuda_primary(1));

	/* Overlapping views of one allocation: through the bounce buffer. */
	log_clear();
	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v, .offset = 150 },
				      &(struct region_span){ .region = v, .offset = 100 },
				      sizeof(buf), back, &e),
			 0);
	ck_assert_mem_eq(dev_bytes(v, 150), buf, sizeof(buf));
	ck_assert_str_eq(drv.text, "DtoH HtoD");

	/* A host region: page-locked through the GPU's context on the first
	 * copy only, then moved by the driver both ways. */
	log_clear();
	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v, .offset = 0 },
				      &(struct region_span){ .region = host, .offset = 10 }, 4000,
				      NULL, &e),
			 0);
	ck_assert_mem_eq(dev_bytes(v, 0), (unsigned char *)host->addr + 10, 4000);
	ck_assert_ptr_eq(fake_cuda.last_register_ctx, fake_cuda_primary(1));
	ck_assert_uint_eq(fake_cuda.last_register_flags, CU_MEMHOSTREGISTER_PORTABLE);
	ck_assert_int_eq(gpu_region_host_locked_on(host), 1);
	ck_assert_int_eq(gpu_region_host_locked_on(v), -1);
	ck_assert_int_eq(ipc->mem->copy(&(struct region_span){ .region = host, .offset = 4096 },
					&(struct region_span){ .region = ipc, .offset = 5 },
					sizeof(buf), NULL, &e),
			 0);
	ck_assert_mem_eq((unsigned char *)host->addr + 4096, buf, sizeof(buf));
	ck_assert_str_eq(drv.text, "HostRegister HtoD DtoH");

	/* The driver refusing: the kind's error, with the driver's words. */
	fake_cuda.copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v },
				      &(struct region_span){ .buf = buf }, 8, NULL, &e),
			 -ENOMEM);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_CUDA);
	ck_assert_ptr_nonnull(strstr(e.message, "writing GPU memory failed"));
	ck_assert_ptr_nonnull(strstr(e.message,
				     "CUDA_ERROR_OUT_OF_MEMORY: out of memory (cuMemcpyHtoD)"));
	errinfo_done(&e);
	fake_cuda.copy_result = CUDA_SUCCESS;
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

/* ---- a Copy on the loop ---- */

static struct {
	unsigned calls;
	int result;
	bool done;
	char error[64];
	char message[512];
} xseen;

static void on_xfer_done(_unused_ void *userdata, struct xfer *x, int result, struct errinfo *e)
{
	xseen.calls++;
	xseen.result = result;
	xseen.done = true;
	snprintf(xseen.error, sizeof(xseen.error), "%s", e->name ?: "");
	snprintf(xseen.message, sizeof(xseen.message), "%s", e->message);
	xfer_free(x);
}

static struct xfer *last_copy; /* start_copy()'s, until done */

/* Starts a Copy of n bytes from src at soff to dst at doff; returns
 * whether it was done before xfer_start() returned (on the loop). */
static bool start_copy(struct region *dst, uint64_t doff, struct region *src, uint64_t soff,
		       uint64_t n)
{
	struct xfer *x = xfer_new(f.owner, XFER_COPY, -1, on_xfer_done, NULL);

	last_copy = x;
	ck_assert_ptr_nonnull(x);
	x->src = (struct xfer_end){ .region = region_ref(src), .offset = soff };
	x->dst = (struct xfer_end){ .region = region_ref(dst),
				    .offset = doff,
				    .write = true,
				    .mode = LOCK_EXCLUSIVE };
	x->length = n;
	xseen.calls = 0;
	xseen.done = false;
	ck_assert_int_eq(xfer_start(x), 0);
	return xseen.calls == 1;
}

static void wait_copy(void)
{
	mem_fixture_run_until(&f, &xseen.done, 10000);
	ck_assert_uint_eq(xseen.calls, 1);
	ck_assert_int_eq(xseen.result, 0);
}

static void *htod_on_thread(void *p)
{
	struct region *v = p;
	unsigned char b[64] = { 1 };
	struct errinfo e = {};

	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v, .offset = 8192 },
				      &(struct region_span){ .buf = b }, sizeof(b), NULL, &e),
			 0);
	return NULL;
}

/*
 * Whether work the fake says takes usec fits a bound of the loop's; when
 * not, a slow run (valgrind, sanitizers) measured the fake slow, which a
 * run whose timing is real must not have: the test prints what it leaves
 * unchecked.
 */
static bool fits_loop(const char *test, const char *what, uint64_t usec, uint64_t bound)
{
	const char *why;

	if (usec <= bound)
		return true;
	ck_assert(!test_timing_is_real(&why));
	printf("%s: the fake takes %" PRIu64 " us for %s (%s): its loop case is not checked\n",
	       test, usec, what, why);
	return false;
}

/*
 * A Copy between GPU memory and a host region runs on the loop when the
 * kind expects it to take at most loop-work-usec at the rates the
 * device's first import measured: only once the host region is
 * page-locked (the first copy locks it, on the pool), never while other
 * driver work of the daemon runs (it would queue behind it), never when it
 * is long, never with loop-work-usec 0.
 */
START_TEST(test_copy_on_loop)
{
	const unsigned bound = f.core.cfg.loop_work_usec;
	struct region *v = import_vmm(GRAN, 0), *host = mem_fixture_import(&f, 8192);
	struct region_span vs = { .region = v }, hs = { .region = host };
	unsigned char *h = host->addr;
	struct cu_bandwidth bw;
	uint64_t usec;
	pthread_t th;

	for (int i = 0; i < 8192; i++)
		h[i] = (unsigned char)(i * 13 + 1);
	ck_assert(gpu_bandwidth(1, &bw));
	ck_assert_ptr_nonnull(v->mem->copy_usec);
	/* Not page-locked yet: the pool, which locks it. */
	ck_assert_uint_eq(v->mem->copy_usec(&vs, &hs, 64), UINT64_MAX);
	log_clear();
	ck_assert(!start_copy(v, 0, host, 0, 4096));
	wait_copy();
	ck_assert_str_eq(drv.text, "HostRegister HtoD");
	ck_assert_mem_eq(dev_bytes(v, 0), h, 4096);

	/* Locked: the small-copy time and the bytes at the measured rate. */
	usec = v->mem->copy_usec(&vs, &hs, 64);
	ck_assert_uint_eq(usec, bw.htod_small_ns / 1000 + 64 / (bw.htod / 1000000));
	ck_assert_uint_eq(v->mem->copy_usec(&hs, &vs, 64), usec);
	ck_assert_uint_gt(v->mem->copy_usec(&vs, &hs, 1ULL << 40), bound);
	/* Never the daemon's buffers, never GPU to GPU. */
	ck_assert_uint_eq(v->mem->copy_usec(&vs, &(struct region_span){ .buf = h }, 64),
			  UINT64_MAX);
	ck_assert_uint_eq(v->mem->copy_usec(&vs, &(struct region_span){ .region = v }, 64),
			  UINT64_MAX);
	if (fits_loop("test_copy_on_loop", "a 64-byte copy", usec, bound)) {
		/* Both ways, done before xfer_start() returns. */
		log_clear();
		ck_assert(start_copy(v, 100, host, 4000, 64));
		ck_assert_int_eq(xseen.result, 0);
		ck_assert_mem_eq(dev_bytes(v, 100), h + 4000, 64);
		ck_assert(start_copy(host, 6000, v, 100, 64));
		ck_assert_mem_eq(h + 6000, h + 4000, 64);
		ck_assert_str_eq(drv.text, "HtoD DtoH");
		/* An administrator's 0 sends even these to the pool. */
		f.core.cfg.loop_work_usec = 0;
		ck_assert(!start_copy(v, 100, host, 5000, 64));
		wait_copy();
		ck_assert_mem_eq(dev_bytes(v, 100), h + 5000, 64);
		f.core.cfg.loop_work_usec = bound;
	}

	/* Another driver call running (a copy on another thread, held in
	 * cuMemcpyHtoD): the pool, where it waits its turn. */
	hold_set(&drv.hold, true);
	ck_assert_int_eq(pthread_create(&th, NULL, htod_on_thread, v), 0);
	wait_held(&drv.in_htod, 1);
	ck_assert(!cu_idle());
	ck_assert_uint_eq(v->mem->copy_usec(&vs, &hs, 64), UINT64_MAX);
	log_clear();
	ck_assert(!start_copy(v, 200, host, 300, 64));
	hold_set(&drv.hold, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	wait_copy();
	ck_assert_mem_eq(dev_bytes(v, 200), h + 300, 64);
	ck_assert(cu_idle());
	/* Copied whole on the pool, not started: the loop made no call. */
	ck_assert_str_eq(drv.text, "HtoD");

	/* Longer than the bound at the measured rate: the pool (started on
	 * the loop once locked: test_copy_started_on_loop). */
	{
		uint64_t n = ((bound + 1) * (bw.htod / 1000000) + 4096) & ~4095ULL;
		struct region *big = mem_fixture_import(&f, n);
		struct region *bv = import_vmm((n + GRAN - 1) / GRAN * GRAN, 0);

		memset(big->addr, 0x3c, n);
		ck_assert(!start_copy(bv, 0, big, 0, n));
		wait_copy();
		/* Locked now: still too long for the loop. */
		ck_assert_uint_gt(bv->mem->copy_usec(&(struct region_span){ .region = bv },
						     &(struct region_span){ .region = big }, n),
				  bound);
		ck_assert(!start_copy(bv, 0, big, 0, n));
		wait_copy();
		ck_assert_mem_eq(dev_bytes(bv, n - 64), (unsigned char *)big->addr + n - 64, 64);
	}
}
END_TEST

/* Starts a VMM import of one allocation of size bytes from fd (taken);
 * returns whether it ended before gpu_import_start() returned. */
static bool start_vmm(int fd, uint64_t size, struct imported *im)
{
	struct gpu_import_params p = {
		.memory = GPU_MEMORY_VMM,
		.fds = { fd },
		.n_fds = 1,
		.alloc_size = size,
	};
	struct gpu_import *job = NULL;
	struct errinfo e = {};

	ck_assert_int_ge(fd, 0);
	*im = (struct imported){};
	ck_assert_int_eq(gpu_import_start(&gpu, f.owner, &p, on_imported, im, &job, &e), 0);
	return im->done;
}

/* Drivers calls so far: imports on the loop, on the pool. */
static void imports_seen(int on_loop, int on_pool)
{
	pthread_mutex_lock(&drv.lock);
	ck_assert_int_eq(drv.n_import_loop, on_loop);
	ck_assert_int_eq(drv.n_import_pool, on_pool);
	pthread_mutex_unlock(&drv.lock);
}

static int dev_null(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/*
 * An import runs on the loop, answered before gpu_import_start() returns,
 * only where one of its kind and size took at most loop-import-usec before
 * (the first goes to the pool), no other driver work runs, the file is of
 * the kind the driver imported before, and the context it needs is held
 * already; where the context is not, the loop's attempt leaves nothing
 * behind and the pool imports it. The same for an IPC open.
 */
START_TEST(test_import_on_loop)
{
	/* The fake's calls take microseconds, but on shared cores a pool
	 * thread's may take longer than the default's 100 now and then: a
	 * bound of a millisecond keeps the cases apart from the timing. */
	const unsigned bound = 1000;
	struct region *first, *got[9];
	struct imported im, im2;
	unsigned n_got = 0;
	char h1[2 * CU_IPC_HANDLE_SIZE + 1], h2[2 * CU_IPC_HANDLE_SIZE + 1],
		h3[2 * CU_IPC_HANDLE_SIZE + 1];
	uint64_t usec;
	int fds[2];
	pthread_t th;

	f.core.cfg.loop_import_usec = bound;
	/* Nothing known: the pool. The first import's time counts the
	 * driver's load and the bandwidth probe: a second one (on the pool,
	 * loop-import-usec 0) tells the import's own. */
	ck_assert_uint_eq(gpu_cost_usec(&gpu.cost, GPU_COST_VMM, GRAN), UINT64_MAX);
	first = import_vmm(GRAN, 0);
	imports_seen(0, 1);
	ck_assert_uint_ne(gpu_cost_usec(&gpu.cost, GPU_COST_VMM, GRAN), UINT64_MAX);
	f.core.cfg.loop_import_usec = 0;
	got[n_got++] = import_vmm(GRAN, 0);
	f.core.cfg.loop_import_usec = bound;
	imports_seen(0, 2);
	usec = gpu_cost_usec(&gpu.cost, GPU_COST_VMM, GRAN);
	ck_assert_uint_ne(usec, UINT64_MAX);
	if (!fits_loop("test_import_on_loop", "an import", usec, bound))
		return;

	/* Device 1's context is held (by first): here. */
	ck_assert(start_vmm(dev_null(), GRAN, &im));
	ck_assert_str_eq(im.error, "");
	ck_assert_ptr_nonnull(im.r);
	imports_seen(1, 2);
	ck_assert_uint_eq(im.r->dptr % GRAN, 0);
	got[n_got++] = im.r;

	/* Of a size not seen yet: the pool, which learns it. */
	ck_assert(!start_vmm(dev_null(), 4 * GRAN, &im2));
	mem_fixture_run_until(&f, &im2.done, 5000);
	ck_assert_ptr_nonnull(im2.r);
	got[n_got++] = im2.r;
	imports_seen(1, 3);
	if (!fits_loop("test_import_on_loop", "an import of 8 MiB",
		       gpu_cost_usec(&gpu.cost, GPU_COST_VMM, 4 * GRAN), bound))
		return;
	ck_assert(start_vmm(dev_null(), 4 * GRAN, &im2));
	got[n_got++] = im2.r;
	imports_seen(2, 3);

	/* An administrator's 0: the pool. */
	f.core.cfg.loop_import_usec = 0;
	ck_assert(!start_vmm(dev_null(), GRAN, &im2));
	mem_fixture_run_until(&f, &im2.done, 5000);
	ck_assert_ptr_nonnull(im2.r);
	got[n_got++] = im2.r;
	imports_seen(2, 4);
	f.core.cfg.loop_import_usec = bound;

	/* A file of another kind than the driver took before (a pipe, not
	 * /dev/null): the pool, where the fake takes it all the same. */
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	close(fds[1]);
	ck_assert(!start_vmm(fds[0], GRAN, &im2));
	mem_fixture_run_until(&f, &im2.done, 5000);
	ck_assert_ptr_nonnull(im2.r);
	got[n_got++] = im2.r;
	imports_seen(2, 5);

	/* Other driver work running (a copy held on another thread): the
	 * pool, after it. */
	hold_set(&drv.hold, true);
	ck_assert_int_eq(pthread_create(&th, NULL, htod_on_thread, first), 0);
	wait_held(&drv.in_htod, 1);
	ck_assert(!start_vmm(dev_null(), GRAN, &im2));
	hold_set(&drv.hold, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	mem_fixture_run_until(&f, &im2.done, 5000);
	ck_assert_ptr_nonnull(im2.r);
	got[n_got++] = im2.r;
	imports_seen(2, 6);

	/* No region holds device 1's context any more (nothing lingers
	 * here): the loop tries, the driver's handle goes back, the pool
	 * makes the context and the import. */
	got[n_got++] = first;
	for (unsigned i = 0; i < n_got; i++)
		region_drop_owner(got[i]);
	/* The count drops inside the release's driver work: idle too. */
	for (int i = 0; i < 5000 && (cu_primary_ctx_refs(1) > 0 || !cu_idle()); i++) {
		uv_run(&f.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 0);
	ck_assert(cu_idle());
	ck_assert_int_eq(fake_cuda_live(), 0);
	ck_assert(!start_vmm(dev_null(), GRAN, &im2));
	mem_fixture_run_until(&f, &im2.done, 5000);
	ck_assert_str_eq(im2.error, "");
	ck_assert_ptr_nonnull(im2.r);
	imports_seen(3, 7);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);

	/* IPC: the first opens learn their cost on the pool (the first
	 * probes GPU 0's bandwidth); a third handle, opened while the others
	 * hold GPU 0's context, opens here. */
	ipc_hex(h1, 1, 0);
	ipc_hex(h2, 2, 0);
	ipc_hex(h3, 3, 0);
	import_ipc(h1, 0, 0);
	f.core.cfg.loop_import_usec = 0;
	import_ipc(h2, 0, 0);
	f.core.cfg.loop_import_usec = bound;
	ck_assert_int_eq(drv.n_ipc_open_loop, 0);
	usec = gpu_cost_usec(&gpu.cost, GPU_COST_IPC, 0);
	if (!fits_loop("test_import_on_loop", "an IPC open", usec, bound))
		return;
	im2 = (struct imported){};
	start_ipc(h3, 0, 0, &im2);
	ck_assert(im2.done);
	ck_assert_str_eq(im2.error, "");
	ck_assert_ptr_nonnull(im2.r);
	ck_assert_int_eq(drv.n_ipc_open_loop, 1);
	ck_assert_int_eq(drv.n_ipc_open, 3);
	/* The metrics' counts: two VMM imports and one open here, seven and
	 * two on the pool (the loop's attempt that went there counts there). */
	ck_assert_uint_eq(gpu.imports_on_loop, 2 + 1);
	ck_assert_uint_eq(gpu.imports_on_pool, 7 + 2);
}
END_TEST

/* A pool thread's retain and release of GPU 0's context, the release held
 * in the driver (with cu_primary_lock, as a context's destruction holds it
 * for 60 ms on an H100) while drv.hold_release is set. */
static void *release_on_thread(void *unused)
{
	(void)unused;
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	return NULL;
}

/*
 * While a pool thread is in the driver releasing a context (holding the
 * lock around retains and releases), the loop's copy with GPU memory does
 * not wait for it: the context guard takes no lock, the mapping holding
 * its context. The loop's import does not wait either: it finds the lock
 * taken and goes to the pool, which waits, without a driver call here.
 */
START_TEST(test_primary_lock_not_on_loop)
{
	const unsigned bound = f.core.cfg.loop_work_usec;
	struct region *v, *host = mem_fixture_import(&f, 8192);
	struct region_span vs, hs = { .region = host };
	struct imported im;
	uint64_t usec;
	pthread_t th;

	/* Imports: two on the pool teach their cost (test_import_on_loop). */
	f.core.cfg.loop_import_usec = 0;
	v = import_vmm(GRAN, 0);
	(void)import_vmm(GRAN, 0);
	f.core.cfg.loop_import_usec = 1000;
	imports_seen(0, 2);
	vs = (struct region_span){ .region = v };
	/* The first copy page-locks the host region, on the pool. */
	ck_assert(!start_copy(v, 0, host, 0, 4096));
	wait_copy();
	usec = v->mem->copy_usec(&vs, &hs, 64);
	if (!fits_loop("test_primary_lock_not_on_loop", "a 64-byte copy", usec, bound) ||
	    !fits_loop("test_primary_lock_not_on_loop", "an import",
		       gpu_cost_usec(&gpu.cost, GPU_COST_VMM, GRAN), 1000))
		return;

	hold_set(&drv.hold_release, true);
	ck_assert_int_eq(pthread_create(&th, NULL, release_on_thread, NULL), 0);
	wait_held(&drv.in_release, 1);
	/* Done before xfer_start() returns, on the loop. */
	ck_assert(start_copy(v, 100, host, 4000, 64));
	ck_assert_int_eq(xseen.result, 0);
	ck_assert_mem_eq(dev_bytes(v, 100), (unsigned char *)host->addr + 4000, 64);
	/* The import: handed to the pool, waiting there. */
	ck_assert(!start_vmm(dev_null(), GRAN, &im));
	pthread_mutex_lock(&drv.lock);
	ck_assert_int_eq(drv.n_import_loop, 0);
	pthread_mutex_unlock(&drv.lock);
	hold_set(&drv.hold_release, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	mem_fixture_run_until(&f, &im.done, 5000);
	ck_assert_str_eq(im.error, "");
	ck_assert_ptr_nonnull(im.r);
	imports_seen(0, 3);
}
END_TEST

/*
 * An import on the loop that fails after its retain undoes the retain
 * without waiting and without being the last release: the loop holds the
 * lock around retains and releases for the whole call, so that the holder
 * letting go meanwhile (the linger, on another thread) waits for it and
 * makes the last release itself. And with the lock taken by another
 * thread, the loop makes no driver call: the open goes to the pool.
 */
START_TEST(test_import_on_loop_fails)
{
	char h1[2 * CU_IPC_HANDLE_SIZE + 1], h2[2 * CU_IPC_HANDLE_SIZE + 1],
		bad[2 * CU_IPC_HANDLE_SIZE + 1];
	struct region *a, *b;
	struct imported im = {};
	pthread_t th;

	ipc_hex(h1, 1, 0);
	ipc_hex(h2, 2, 0);
	ipc_hex(bad, 0x5a, 0); /* the fake's handle that does not open */
	f.core.cfg.loop_import_usec = 0;
	a = import_ipc(h1, 0, 0);
	b = import_ipc(h2, 0, 0);
	f.core.cfg.loop_import_usec = 1000;
	if (!fits_loop("test_import_on_loop_fails", "an IPC open",
		       gpu_cost_usec(&gpu.cost, GPU_COST_IPC, 0), 1000))
		return;

	/* Another thread in a release (holding the lock): not here. */
	hold_set(&drv.hold_release, true);
	ck_assert_int_eq(pthread_create(&th, NULL, release_on_thread, NULL), 0);
	wait_held(&drv.in_release, 1);
	start_ipc(bad, 0, 0, &im);
	ck_assert(!im.done);
	ck_assert_int_eq(drv.n_ipc_open_loop, 0);
	hold_set(&drv.hold_release, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	mem_fixture_run_until(&f, &im.done, 5000);
	ck_assert_str_eq(im.error, RDMAMEM_ERROR_CUDA);

	/* GPU 0's context held by one retain alone (the regions gone, the
	 * linger's stand-in keeping it), let go during the loop's open. */
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	region_drop_owner(a);
	region_drop_owner(b);
	run_until_ipcs_closed();
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 1);
	im = (struct imported){};
	drv.release_in_open = true;
	start_ipc(bad, 0, 0, &im);
	ck_assert(im.done);
	ck_assert_str_eq(im.error, RDMAMEM_ERROR_CUDA);
	ck_assert_int_eq(drv.n_ipc_open_loop, 1);
	ck_assert_int_eq(pthread_join(drv.releaser, NULL), 0);
	ck_assert_int_eq(drv.n_last_release_loop, 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
}
END_TEST

/*
 * A host region of the bytes a copy to GPU 1 moves in just over
 * loop-work-usec at the rate its first import measured, filled with fill,
 * its size in *ret_n; *v replaced by a VMM region large enough where it is
 * not.
 */
static struct region *past_loop_bound(struct region **v, unsigned char fill, uint64_t *ret_n)
{
	struct cu_bandwidth bw;
	struct region *big;
	uint64_t n;

	/* Measured at the device's first import. */
	ck_assert(gpu_bandwidth(1, &bw));
	n = ((f.core.cfg.loop_work_usec + 1) * (bw.htod / 1000000) + 4096) & ~4095ULL;
	big = mem_fixture_import(&f, n);
	if (n > GRAN)
		*v = import_vmm((n + GRAN - 1) / GRAN * GRAN, 0);
	memset(big->addr, fill, n);
	*ret_n = n;
	return big;
}

/*
 * The daemon stopping (region_registry_stop(), after its connections went)
 * while a started copy is watched: the loop goes on looking until the
 * bytes land, and answers it. A copy started after the stop is not
 * watched: a pool thread waits for it.
 */
START_TEST(test_stop_while_watched)
{
	struct region *v = import_vmm(GRAN, 0), *big;
	uint64_t n;

	big = past_loop_bound(&v, 0x3d, &n);
	/* The first copy page-locks big, on the pool. */
	ck_assert(!start_copy(v, 0, big, 0, n));
	wait_copy();

	moving_set(true);
	log_clear();
	ck_assert(!start_copy(v, 0, big, 0, n));
	ck_assert_str_eq(drv.text, "HtoDAsync");
	ck_assert(loop_poll_watched(&last_copy->watch));
	region_registry_stop(&f.regions);
	for (int i = 0; i < 3; i++)
		uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(drv.n_looks, 3);
	ck_assert_uint_eq(xseen.calls, 0);
	moving_set(false);
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(xseen.calls, 1);
	ck_assert_int_eq(xseen.result, 0);
	ck_assert_uint_eq(*dev_bytes(v, n - 1), 0x3d);

	/* Started after the stop: the pool waits for it. */
	memset(big->addr, 0x4e, n);
	log_clear();
	ck_assert(!start_copy(v, 0, big, 0, n));
	ck_assert(!loop_poll_watched(&last_copy->watch));
	wait_copy();
	ck_assert_int_eq(xseen.result, 0);
	ck_assert_str_eq(drv.text, "HtoDAsync EventSync");
	ck_assert_uint_eq(*dev_bytes(v, n - 1), 0x4e);
	ck_assert(cu_idle());
}
END_TEST

/* A Copy of n bytes that fails, and the error it was answered with. */
static void copy_fails(struct region *dst, struct region *src, uint64_t n, const char *error)
{
	ck_assert(!start_copy(dst, 0, src, 0, n));
	mem_fixture_run_until(&f, &xseen.done, 10000);
	ck_assert_uint_eq(xseen.calls, 1);
	ck_assert_int_lt(xseen.result, 0);
	ck_assert_str_eq(xseen.error, error);
}

/*
 * A GPU Copy too long for the loop, between GPU memory and a page-locked
 * host region, while no other driver work runs: queued from the loop
 * without waiting, then looked at by the loop each turn, and answered on
 * the turn its bytes landed (the fake moves them when the event is asked
 * about and says done). While it is in flight the driver is not idle, so
 * nothing else copies on the loop behind it. Where other driver work runs
 * beside it, the pool waits for it instead. Never with loop-work-usec 0,
 * never before the host region is locked; a failure is the client's to
 * hear.
 */
START_TEST(test_copy_started_on_loop)
{
	const unsigned bound = f.core.cfg.loop_work_usec;
	struct region *big, *v = import_vmm(GRAN, 0), *other = import_vmm(GRAN, 0);
	pthread_t th;
	uint64_t n;

	big = past_loop_bound(&v, 0x5e, &n);

	/* Not page-locked yet: copied whole on the pool, which locks it. */
	log_clear();
	ck_assert(!start_copy(v, 0, big, 0, n));
	wait_copy();
	ck_assert_str_eq(drv.text, "HostRegister HtoD");

	/* Locked: queued on the loop, which looks for its end each turn. */
	memset(big->addr, 0xa7, n);
	log_clear();
	moving_set(true);
	ck_assert(!start_copy(v, 0, big, 0, n));
	ck_assert_str_eq(drv.text, "HtoDAsync");
	for (int i = 0; i < 3; i++)
		uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(drv.n_looks, 3);
	ck_assert(!cu_idle());
	ck_assert_int_eq(fake_cuda.n_events, 1);
	ck_assert_uint_eq(*dev_bytes(v, n - 1), 0x5e);
	ck_assert_uint_eq(xseen.calls, 0);
	/* It lands: answered on that turn, with no thread asked to wait. */
	moving_set(false);
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(xseen.calls, 1);
	ck_assert_int_eq(xseen.result, 0);
	ck_assert_str_eq(drv.text, "HtoDAsync EventQuery");
	ck_assert_uint_eq(*dev_bytes(v, n - 1), 0xa7);
	ck_assert_mem_eq(dev_bytes(v, 0), big->addr, 64);
	ck_assert(cu_idle());
	ck_assert_int_eq(fake_cuda.n_events, 0);

	/* While one is watched the loop serves other work between looks (a
	 * host Copy, answered on the loop at once), and its client going away
	 * changes nothing: the bytes land and it is answered all the same. */
	{
		struct region *h1 = mem_fixture_import(&f, 4096),
			      *h2 = mem_fixture_import(&f, 4096);
		struct xfer *watched;

		memset(h1->addr, 0x11, 4096);
		moving_set(true);
		ck_assert(!start_copy(v, 0, big, 0, n));
		watched = last_copy;
		uv_run(&f.loop, UV_RUN_NOWAIT);
		xfer_cancel(watched);
		ck_assert(start_copy(h2, 0, h1, 0, 4096));
		ck_assert_int_eq(xseen.result, 0);
		ck_assert_mem_eq(h2->addr, h1->addr, 4096);
		xseen.calls = 0;
		xseen.done = false;
		uv_run(&f.loop, UV_RUN_NOWAIT);
		ck_assert_int_ge(drv.n_looks, 2);
		ck_assert_uint_eq(xseen.calls, 0);
		moving_set(false);
		wait_copy();
		ck_assert(cu_idle());
	}

	/* The other way. */
	memset(big->addr, 0, n);
	log_clear();
	ck_assert(!start_copy(big, 0, v, 0, n));
	wait_copy();
	ck_assert_str_eq(drv.text, "DtoHAsync EventQuery");
	ck_assert_uint_eq(((unsigned char *)big->addr)[n - 1], 0xa7);

	/* Another driver call running beside it (a copy on another thread,
	 * held in cuMemcpyHtoD): the loop stops looking, the pool waits. */
	memset(big->addr, 0x6b, n);
	log_clear();
	moving_set(true);
	ck_assert(!start_copy(v, 0, big, 0, n));
	hold_set(&drv.hold, true);
	ck_assert_int_eq(pthread_create(&th, NULL, htod_on_thread, other), 0);
	wait_held(&drv.in_htod, 1);
	wait_copy();
	ck_assert_str_eq(drv.text, "HtoDAsync HtoD EventSync");
	ck_assert_int_eq(drv.n_looks, 0);
	ck_assert_uint_eq(*dev_bytes(v, n - 1), 0x6b);
	hold_set(&drv.hold, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	moving_set(false);
	ck_assert(cu_idle());
	ck_assert_int_eq(fake_cuda.n_events, 0);

	/* An administrator's 0: the pool copies it, and the loop makes no call. */
	f.core.cfg.loop_work_usec = 0;
	log_clear();
	ck_assert(!start_copy(v, 0, big, 0, n));
	wait_copy();
	ck_assert_str_eq(drv.text, "HtoD");
	f.core.cfg.loop_work_usec = bound;

	/* The copy fails where it is looked at: the pool waits for what may
	 * still move, and the caller hears the look's error. */
	fake_cuda.copy_result = CUDA_ERROR_ILLEGAL_ADDRESS;
	log_clear();
	copy_fails(v, big, n, "io.rdmamemd.CudaError");
	ck_assert_str_eq(drv.text, "HtoDAsync EventQuery EventSync");
	ck_assert_ptr_nonnull(strstr(xseen.message, "(cuEventQuery)"));
	fake_cuda.copy_result = CUDA_SUCCESS;
	ck_assert(cu_idle());
	ck_assert_int_eq(fake_cuda.n_events, 0);
}
END_TEST

/*
 * A host region page-locked by a GPU copy, with a registration attached
 * after the page-lock: the registration goes first all the same (by rank),
 * then the page-lock, then the mapping.
 */
START_TEST(test_release_order_host)
{
	struct region *v = import_vmm(GRAN, 0), *host = mem_fixture_import(&f, 8192);
	struct errinfo e = {};

	ck_assert_int_eq(v->mem->copy(&(struct region_span){ .region = v },
				      &(struct region_span){ .region = host }, 64, NULL, &e),
			 0);
	attach_test_hook(host);
	log_host_release(host);
	/* The VMM import's retain, and the page-lock's. */
	ck_assert_int_eq(fake_cuda.primary_refs[1], 2);

	log_clear();
	region_drop_owner(host);
	mem_fixture_run_until(&f, &test_hook_finished, 5000);
	ck_assert(test_hook_finished);
	ck_assert_str_eq(drv.text, "registrations HostUnregister munmap");
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
}
END_TEST

/* A VMM region: the registration, then the mapping, the range, the memory. */
START_TEST(test_release_order_vmm)
{
	struct region *v = import_vmm(2 * GRAN, GRAN);

	attach_test_hook(v);
	log_clear();
	region_drop_owner(v);
	mem_fixture_run_until(&f, &test_hook_finished, 5000);
	ck_assert(test_hook_finished);
	ck_assert_str_eq(drv.text, "registrations Unmap AddressFree MemRelease");
	ck_assert_int_eq(fake_cuda.n_handles + fake_cuda.n_reserved + fake_cuda.n_mapped, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
}
END_TEST

/*
 * Two regions over one IPC open: the first to go leaves the open (the
 * other's bytes still move), the last closes it, once, after its own
 * registration; a later import opens it anew.
 */
/*
 * Two imports wait for one open; the first one's region goes as it comes (as
 * when its client is gone by then). An IPC region releases on the loop, so
 * its reference drops while the open's completion still serves the second:
 * that must not start the close, which would queue the open's job while the
 * second takes its reference (and queue it twice).
 */
START_TEST(test_ipc_region_gone_while_others_wait)
{
	char h[2 * CU_IPC_HANDLE_SIZE + 1];
	struct imported first = { .drop = true }, second = {};

	ipc_hex(h, 11, 1);
	start_ipc(h, 0, 4096, &first);
	start_ipc(h, 4096, 4096, &second);
	mem_fixture_run_until(&f, &second.done, 5000);
	ck_assert(first.done);
	ck_assert_str_eq(first.error, "");
	ck_assert_ptr_nonnull(second.r);
	ck_assert_int_eq(drv.n_ipc_open, 1);
	ck_assert_int_eq(drv.n_ipc_close, 0);
	ck_assert_int_eq(ipc_refs(second.r), 1);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 1);

	region_drop_owner(second.r);
	run_until_ipcs_closed();
	ck_assert_int_eq(drv.n_ipc_close, 1);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 0);
}
END_TEST

START_TEST(test_ipc_shared_open_closed_with_last)
{
	char h[2 * CU_IPC_HANDLE_SIZE + 1];
	unsigned char buf[16] = "still mapped", back[16] = {};
	struct region *a, *b;
	struct errinfo e = {};

	ipc_hex(h, 9, 1);
	a = import_ipc(h, 0, 4096);
	b = import_ipc(h, 4096, 4096);
	ck_assert_int_eq(drv.n_ipc_open, 1);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 2);

	drop_and_wait(a);
	/* Let anything queued run: nothing may close the open. */
	for (int i = 0; i < 50; i++) {
		uv_run(&f.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	ck_assert_int_eq(drv.n_ipc_close, 0);
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 1);
	ck_assert_int_eq(ipc_refs(b), 1);
	ck_assert_int_eq(b->mem->copy(&(struct region_span){ .region = b },
				      &(struct region_span){ .buf = buf }, sizeof(buf), NULL, &e),
			 0);
	ck_assert_int_eq(b->mem->copy(&(struct region_span){ .buf = back },
				      &(struct region_span){ .region = b }, sizeof(back), NULL, &e),
			 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));

	attach_test_hook(b);
	log_clear();
	region_drop_owner(b);
	run_until_ipcs_closed();
	ck_assert(test_hook_finished);
	ck_assert_int_eq(drv.n_ipc_close, 1);
	ck_assert_str_eq(drv.text, "registrations IpcClose");
	ck_assert_uint_eq(gpu_regions_on(&gpu, 1), 0);
	ck_assert_int_eq(fake_cuda_live(), 0);

	a = import_ipc(h, 0, 0);
	ck_assert_int_eq(drv.n_ipc_open, 2);
	ck_assert_uint_eq(a->size, FAKE_CUDA_IPC_SIZE);
}
END_TEST

/* ---- ListGpus' model ---- */

struct listed {
	bool done;
	struct gpu_list_result res;
};

static void on_listed(void *userdata, const struct gpu_list_result *res)
{
	struct listed *l = userdata;

	l->res = *res;
	l->done = true;
}

static void list_gpus(struct listed *l)
{
	*l = (struct listed){};
	ck_assert_int_eq(gpu_list(&gpu, true, on_listed, l), 0);
	mem_fixture_run_until(&f, &l->done, 5000);
	ck_assert(l->done);
	ck_assert_int_eq(l->res.err, 0);
}

/*
 * Two GPUs, imports on each, a copy from GPU 0's region to GPU 1's: the
 * listing has each GPU's context references (one per import) and the other
 * GPU as its peer, with the path copies take and how many went; the
 * references drop to 0 with each GPU's last import.
 */
START_TEST(test_list_two_gpus)
{
	struct region *a, *b;
	struct errinfo e = {};
	unsigned char buf[777];
	struct listed l;

	fake_cuda.vmm_device = 0;
	a = import_vmm(GRAN, 0);
	fake_cuda.vmm_device = 1;
	b = import_vmm(GRAN, 0);
	ck_assert_int_eq(a->gpu, 0);
	ck_assert_int_eq(b->gpu, 1);
	memset(buf, 0xa5, sizeof(buf));
	ck_assert_int_eq(a->mem->copy(&(struct region_span){ .region = a, .offset = 3 },
				      &(struct region_span){ .buf = buf }, sizeof(buf), NULL, &e),
			 0);
	log_clear();
	ck_assert_int_eq(b->mem->copy(&(struct region_span){ .region = b, .offset = 1001 },
				      &(struct region_span){ .region = a, .offset = 3 },
				      sizeof(buf), NULL, &e),
			 0);
	ck_assert_str_eq(drv.text, "Peer");
	ck_assert_mem_eq(dev_bytes(b, 1001), buf, sizeof(buf));

	list_gpus(&l);
	ck_assert_int_eq(l.res.n, 2);
	for (int i = 0; i < 2; i++) {
		const struct cu_peer_info *pi = &l.res.peers[i][0];

		ck_assert_uint_eq(l.res.refs[i], 1);
		ck_assert_int_eq(l.res.n_peers[i], 1);
		ck_assert_int_eq(pi->ordinal, 1 - i);
		ck_assert(pi->access);
		ck_assert_int_eq(pi->performance_rank, 0);
		ck_assert_int_eq(pi->path, CU_COPY_PEER);
		ck_assert_uint_eq(pi->copies_peer, i == 0 ? 1 : 0);
		ck_assert_uint_eq(pi->copies_staged, 0);
	}

	drop_and_wait(a);
	list_gpus(&l);
	ck_assert_uint_eq(l.res.refs[0], 0);
	ck_assert_uint_eq(l.res.refs[1], 1);
	drop_and_wait(b);
	list_gpus(&l);
	ck_assert_uint_eq(l.res.refs[0], 0);
	ck_assert_uint_eq(l.res.refs[1], 0);
}
END_TEST

/* GPUs that cannot reach each other: listed so, and copies are staged. */
START_TEST(test_list_two_gpus_staged)
{
	struct region *a, *b;
	struct errinfo e = {};
	struct listed l;

	fake_cuda.no_peer = true;
	fake_cuda.vmm_device = 0;
	a = import_vmm(GRAN, 0);
	fake_cuda.vmm_device = 1;
	b = import_vmm(GRAN, 0);
	ck_assert_int_eq(a->mem->copy(&(struct region_span){ .region = a, .offset = 9 },
				      &(struct region_span){ .region = b, .offset = 17 }, 4096,
				      NULL, &e),
			 0);
	ck_assert_int_eq(fake_cuda.n_copies_staged, 1);
	list_gpus(&l);
	ck_assert(!l.res.peers[1][0].access);
	ck_assert_int_eq(l.res.peers[1][0].path, CU_COPY_STAGED);
	ck_assert_uint_eq(l.res.peers[1][0].copies_staged, 1);
	ck_assert_uint_eq(l.res.peers[0][0].copies_staged, 0);
}
END_TEST

/* The loop runs until GPU ordinal's context is kept, or is not (or about
 * 5 s): the retain and the release are pool jobs. */
static void run_until_kept(int ordinal, bool kept)
{
	for (int i = 0; i < 5000 && gpu_linger_held(&gpu.linger, ordinal) != kept; i++) {
		uv_run(&f.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	ck_assert_int_eq(gpu_linger_held(&gpu.linger, ordinal), kept);
}

/*
 * A GPU's context kept between its regions (gpu_linger.c), with a linger
 * of 200 ms: the daemon's own retain comes after the first region's, the
 * region's release leaves the context alive, and an import within the
 * linger creates nothing; the linger's end releases it, and the next
 * import creates it again. At stop a kept context goes at once, though a
 * region still holds its own.
 */
START_TEST(test_context_kept)
{
	struct region *r;
	uint64_t t0;

	gpu_ctx_init(&gpu, &f.loop, &f.regions, 200);
	r = import_vmm(GRAN, 0); /* on device 1 */
	run_until_kept(1, true);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 2);
	ck_assert_int_eq(fake_cuda.primary_creates[1], 1);
	drop_and_wait(r);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	ck_assert(gpu_linger_held(&gpu.linger, 1));

	r = import_vmm(GRAN, 0);
	ck_assert_int_eq(fake_cuda.primary_creates[1], 1);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 2);
	drop_and_wait(r);
	t0 = uv_hrtime();
	run_until_kept(1, false);
	/* Not before the linger ran out. */
	ck_assert_uint_ge(uv_hrtime() - t0, 150 * 1000000ULL);
	mem_fixture_run_until(&f, &(bool){ false }, 50);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);

	r = import_vmm(GRAN, 0);
	ck_assert_int_eq(fake_cuda.primary_creates[1], 2);
	run_until_kept(1, true);
	gpu_ctx_stop(&gpu);
	run_until_kept(1, false);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	drop_and_wait(r);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
}
END_TEST

/* A kept context whose release fails stays the daemon's, and its release is
 * tried again after the next linger: nothing of the driver's is lost. */
START_TEST(test_context_release_fails)
{
	struct region *r;

	gpu_ctx_init(&gpu, &f.loop, &f.regions, 500);
	r = import_vmm(GRAN, 0);
	run_until_kept(1, true);
	/* The region's own release first; then the kept one's fails. */
	drop_and_wait(r);
	pthread_mutex_lock(&drv.lock);
	drv.fail_releases = 1;
	pthread_mutex_unlock(&drv.lock);
	/* The first linger ends in a failed release, the second releases. */
	run_until_kept(1, false);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	pthread_mutex_lock(&drv.lock);
	ck_assert_int_eq(drv.fail_releases, 0);
	pthread_mutex_unlock(&drv.lock);
	/* The linger's timer closes. */
	gpu_ctx_stop(&gpu);
	uv_run(&f.loop, UV_RUN_NOWAIT);
}
END_TEST

/* The same with no linger: nothing of the daemon's own is retained. */
START_TEST(test_context_not_kept)
{
	struct region *r = import_vmm(GRAN, 0);

	mem_fixture_run_until(&f, &(bool){ false }, 20);
	ck_assert(!gpu_linger_held(&gpu.linger, 1));
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	drop_and_wait(r);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	r = import_vmm(GRAN, 0);
	ck_assert_int_eq(fake_cuda.primary_creates[1], 2);
	drop_and_wait(r);
}
END_TEST

/* ---- kept across a restart (keep.h, gpu_keep.c) ---- */

/* The loop runs until every GPU restore of k is done (or about 5 s). */
static void run_until_restored(struct keep_ctx *k)
{
	for (int i = 0; i < 5000 && !list_empty(&k->pending); i++) {
		uv_run(&f.loop, UV_RUN_NOWAIT);
		if (!list_empty(&k->pending))
			usleep(1000);
	}
	ck_assert(list_empty(&k->pending));
}

/* Shuts k down; its timers are closed before the test's frame goes. */
static void keep_end(struct keep_ctx *k)
{
	keep_freeze(k);
	keep_stop(k);
	uv_run(&f.loop, UV_RUN_NOWAIT);
}

/* The daemon after a restart, on a fresh fixture: k restores what s
 * passes with grace_sec; how many regions come back. */
static unsigned restart(struct keep_ctx *k, struct store *s, unsigned grace_sec)
{
	struct keep_passed *passed;
	size_t n = s->n;
	unsigned got;

	keep_freeze(k);
	keep_stop(k);
	mem_fixture_done(&f);
	ck_assert_int_eq(fake_cuda_live(), 0);
	mem_fixture_init(&f);
	gpu_ctx_init(&gpu, &f.loop, &f.regions, 0);
	keep_init(k, &f.regions, &store_ops, s, STORE_FIXTURE_MAX);
	gpu_keep_init(&gpu, k);
	passed = store_pass(s);
	got = keep_restore(k, passed, n, grace_sec);
	passed_free(passed, n);
	return got;
}

static void count_restored(void *userdata)
{
	(*(int *)userdata)++;
}

/*
 * A VMM region of two allocations and an IPC region go into the store as
 * parts (a record, then the client's fds, each held by a socket of its
 * own: nothing is exported); a VMM region imported without keep keeps no
 * fd and is not kept. The next process brings both
 * back on the pool under their ids, with the IPC region's share, waiting
 * for their owner's token; a record that is not one is dropped from the
 * store, and ids given after the restart are above every restored one.
 */
START_TEST(test_keep_restore)
{
	struct store s = {};
	struct keep_ctx k;
	struct region *vmm, *ipc, *plain, *r;
	struct errinfo e = {};
	char handle[2 * CU_IPC_HANDLE_SIZE + 1];
	char vmm_token[KEEP_TOKEN_HEX + 1], ipc_token[KEEP_TOKEN_HEX + 1];
	uint64_t vmm_id, ipc_id, left;
	bool never = false;
	int junk, n_told = 0;

	keep_init(&k, &f.regions, &store_ops, &s, STORE_FIXTURE_MAX);
	gpu_keep_init(&gpu, &k);
	vmm = import_vmm_chunks(2, GRAN, 100, true);
	ck_assert_uint_eq(gpu_region_of(vmm)->n_kept_fds, 2);
	ipc_hex(handle, 7, 0);
	ipc = import_ipc(handle, 4096, 8192);
	plain = import_vmm(GRAN, 0);
	ck_assert_uint_eq(gpu_region_of(plain)->n_kept_fds, 0);
	ck_assert_int_eq(fake_cuda.n_exports, 0);
	ck_assert(keep_region(&k, vmm) && keep_region(&k, ipc));
	ck_assert(!keep_region(&k, plain));
	/* The store holds the fds: the daemon's go (rpc). */
	gpu_region_kept_fds_close(vmm);
	ck_assert_uint_eq(gpu_region_of(vmm)->n_kept_fds, 0);
	/* The VMM region: record and two files; the IPC region: a record. */
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 4);
	ck_assert_uint_eq(k.n_files, 4);
	strcpy(vmm_token, keep_token(vmm));
	strcpy(ipc_token, keep_token(ipc));
	vmm_id = vmm->id;
	ipc_id = ipc->id;
	ck_assert_int_eq(region_share(ipc, false, 4242, true, &e), 0);
	keep_changed(&k);
	mem_fixture_run_until(&f, &never, 3 * KEEP_STATE_DELAY_MSEC);
	ck_assert_uint_eq(store_count(&s, KEEP_STATE_PREFIX), 1);
	/* Not kept: its unregister touches no store entry. */
	region_drop_owner(plain);

	/* A record that is not one, under a name of the form. */
	junk = memfd_create("junk", MFD_CLOEXEC);
	ck_assert_int_ge(junk, 0);
	ck_assert_int_eq(write(junk, "rdmamem-kept 1\nnonsense\n", 24), 24);
	ck_assert_int_eq(store_put(&s, KEEP_KIND_PREFIX "999.0", junk), 0);
	close(junk);

	/* The restart: the old process ends, its imports with it. */
	test_expect("the restore drops a record that is not one (region 999)");
	ck_assert_uint_eq(restart(&k, &s, 5), 2);
	/* The junk is out of the store at once. */
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 4);
	ck_assert_uint_gt(f.regions.next_region_id, MAX(vmm_id, ipc_id));
	/* The daemon holds its clients back until the restores are done. */
	ck_assert(keep_restoring(&k));
	k.on_restored = count_restored;
	k.on_restored_data = &n_told;
	run_until_restored(&k);
	ck_assert_int_eq(n_told, 1);
	ck_assert_uint_eq(k.n_restored, 2);
	ck_assert_uint_eq(k.n_awaiting, 2);

	r = idmap_get(&f.regions.regions, vmm_id);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->mem->type, "cuda-vmm");
	ck_assert_uint_eq(r->size, 2 * GRAN - 100);
	ck_assert_uint_eq(gpu_region_of(r)->vmm.n_chunks, 2);
	ck_assert_uint_eq(r->dptr, gpu_region_of(r)->vmm.dptr + 100);
	ck_assert(keep_awaiting(r, &left));
	ck_assert_int_eq(keep_reclaim(&k, r, f.owner, ipc_token, &e), -EACCES);
	errinfo_done(&e);
	ck_assert_int_eq(keep_reclaim(&k, r, f.owner, vmm_token, &e), 0);
	ck_assert_ptr_eq(r->owner_link.session, f.owner);

	r = idmap_get(&f.regions.regions, ipc_id);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->mem->type, "cuda-ipc");
	ck_assert_uint_eq(r->size, 8192);
	ck_assert_uint_eq(r->n_shares, 1);
	ck_assert(r->shares[0].id == 4242 && r->shares[0].readonly);
	ck_assert_int_eq(keep_reclaim(&k, r, f.owner, ipc_token, &e), 0);
	/* The restored regions are in the listing's order. */
	ck_assert_uint_eq(f.regions.region_order.slots[0].id, MIN(vmm_id, ipc_id));

	/* Let go after the reclaim: every part leaves the store (before the
	 * test's keep context and store go). */
	region_drop_owner(idmap_get(&f.regions.regions, vmm_id));
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 1);
	region_drop_owner(idmap_get(&f.regions.regions, ipc_id));
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 0);
	ck_assert_uint_eq(k.n_kept, 0);
	ck_assert_uint_eq(k.n_files, 0);
	keep_end(&k);
	store_done(&s);
}
END_TEST

/*
 * A shutdown while GPU restores are under way cancels them and leaves the
 * store as it is, with the state they came with (a share): the next start
 * restores them with it. Their pool work cleans up after itself (the
 * teardown finds nothing held). With reclaim-grace-sec 0 nothing is
 * restored and every part leaves the store.
 */
START_TEST(test_keep_restore_cancelled)
{
	struct store s = {};
	struct keep_ctx k;
	struct region *ipc;
	struct errinfo e = {};
	char handle[2 * CU_IPC_HANDLE_SIZE + 1];
	uint64_t ipc_id;
	bool never = false;

	keep_init(&k, &f.regions, &store_ops, &s, STORE_FIXTURE_MAX);
	gpu_keep_init(&gpu, &k);
	ck_assert(keep_region(&k, import_vmm_chunks(1, GRAN, 0, true)));
	ipc_hex(handle, 9, 0);
	ipc = import_ipc(handle, 0, 0);
	ck_assert(keep_region(&k, ipc));
	ipc_id = ipc->id;
	ck_assert_int_eq(region_share(ipc, true, 77, false, &e), 0);
	keep_changed(&k);
	mem_fixture_run_until(&f, &never, 3 * KEEP_STATE_DELAY_MSEC);

	ck_assert_uint_eq(restart(&k, &s, 5), 2);
	ck_assert(!list_empty(&k.pending));
	ck_assert_uint_eq(k.n_files, 3);
	/* The shutdown's state still has the share of the region that is
	 * not back yet. */
	keep_freeze(&k);
	ck_assert(list_empty(&k.pending));
	ck_assert_uint_eq(k.n_files, 0);
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 3);
	mem_fixture_run_until(&f, &never, 50);
	run_until_ipcs_closed();
	ck_assert_uint_eq(f.regions.n_regions, 0);

	ck_assert_uint_eq(restart(&k, &s, 5), 2);
	run_until_restored(&k);
	ipc = idmap_get(&f.regions.regions, ipc_id);
	ck_assert_ptr_nonnull(ipc);
	ck_assert_uint_eq(ipc->n_shares, 1);
	ck_assert(ipc->shares[0].is_group && ipc->shares[0].id == 77 && !ipc->shares[0].readonly);
	keep_freeze(&k);
	session_close(f.owner);
	run_until_ipcs_closed();

	test_expect("reclaim-grace-sec 0 drops every part from the store");
	ck_assert_uint_eq(restart(&k, &s, 0), 0);
	ck_assert_uint_eq(store_count(&s, KEEP_KIND_PREFIX), 0);
	ck_assert(list_empty(&k.pending));
	keep_end(&k);
	store_done(&s);
}
END_TEST

#endif /* HAVE_CUDA_H */

Suite *gpu_unit_suite(void)
{
	Suite *s = suite_create("gpu_unit");
#if HAVE_CUDA_H
	TCase *tc = tcase_create("fake");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_vmm_describe);
	tcase_add_test(tc, test_ipc_describe_same_memory);
	tcase_add_test(tc, test_mr_source_dmabuf);
	tcase_add_test(tc, test_vmm_chunks);
	tcase_add_test(tc, test_mr_source_address);
	tcase_add_test(tc, test_copy);
	tcase_add_test(tc, test_copy_on_loop);
	tcase_add_test(tc, test_copy_started_on_loop);
	tcase_add_test(tc, test_import_on_loop);
	tcase_add_test(tc, test_primary_lock_not_on_loop);
	tcase_add_test(tc, test_import_on_loop_fails);
	tcase_add_test(tc, test_stop_while_watched);
	tcase_add_test(tc, test_release_order_host);
	tcase_add_test(tc, test_release_order_vmm);
	tcase_add_test(tc, test_ipc_shared_open_closed_with_last);
	tcase_add_test(tc, test_ipc_region_gone_while_others_wait);
	tcase_add_test(tc, test_list_two_gpus);
	tcase_add_test(tc, test_list_two_gpus_staged);
	tcase_add_test(tc, test_context_kept);
	tcase_add_test(tc, test_context_release_fails);
	tcase_add_test(tc, test_context_not_kept);
	tcase_add_test(tc, test_keep_restore);
	tcase_add_test(tc, test_keep_restore_cancelled);
	suite_add_tcase(s, tc);
#else
	test_note_not_built("gpu_unit: GPU regions over the fake driver (tcase fake)", "cuda.h");
#endif
	return s;
}
