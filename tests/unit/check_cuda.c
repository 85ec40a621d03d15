/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA layer without a GPU: how cu_load() fails on a host with no driver,
 * and, against the fake driver (tests/fakes/fake-cuda.c) installed
 * with cu_set_ops(), the parts that are our own logic: the CUresult table,
 * the context guard's push/pop and primary-context fallback, unwinding of
 * failed imports, retain balance, dma-buf alignment and CLOEXEC.
 * tests/gpu/cuda-smoke.c does the same against the real driver on a GPU
 * machine.
 *
 * Every case relies on CK_FORK: cu_load() runs once per process, and the
 * fake's knobs and counts start afresh in each.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/gpu/cuda.h"
#include "tests/testlib.h"

START_TEST(test_no_driver)
{
	uint8_t b[4];
	int r;

	if (HAVE_CUDA_H) {
		void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

		/* A driver here: nothing to prove about its absence. */
		if (lib)
			return;
	}
	r = cu_load();
	if (!HAVE_CUDA_H) {
		ck_assert_int_eq(r, -EOPNOTSUPP);
		ck_assert_ptr_nonnull(strstr(cu_last_error(), "without cuda.h"));
		ck_assert_int_eq(cu_copy_dtoh(b, 0x1000, sizeof(b)), -EOPNOTSUPP);
		return;
	}
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "libcuda.so.1 could not be loaded"));
	/* dlerror()'s reason follows. */
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "cannot open shared object file"));
	/* Every entry point reports the same, with the same words. */
	ck_assert_int_eq(cu_load(), -ENOENT);
	ck_assert_int_eq(cu_device_count(), -ENOENT);
	ck_assert_int_eq(cu_copy_dtoh(b, 0x1000, sizeof(b)), -ENOENT);
	ck_assert_int_eq(cu_vmm_import(&(int){ 0 }, 1, 2 << 20, 0, &(struct cu_vmm_map){}),
			 -ENOENT);
	ck_assert_int_eq(cu_pointer_device(0x1000, NULL), -ENOENT);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "libcuda.so.1"));
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 0);
}
END_TEST

#if HAVE_CUDA_H
#include "tests/fakes/fake-cuda.h"
#include "tests/fakes/fake.h"

#define N_DEV FAKE_CUDA_DEVICES
#define GRAN FAKE_CUDA_GRAN

static void fake_setup(void)
{
	ck_assert_int_eq(cu_set_ops(&fake_cu_ops), 0);
}

static void load_fake(void)
{
	ck_assert_int_eq(cu_load(), 0);
	ck_assert_int_eq(cu_device_count(), N_DEV);
}

START_TEST(test_set_ops_after_load)
{
	load_fake();
	ck_assert_int_eq(cu_set_ops(&fake_cu_ops), -EBUSY);
	ck_assert_ptr_nonnull(cu_get_ops());
}
END_TEST

START_TEST(test_old_driver)
{
	fake_cuda.version = 11080;
	ck_assert_int_eq(cu_load(), -ENOSYS);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA 11.8"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "12.0 or later"));
	ck_assert_ptr_null(cu_get_ops());
}
END_TEST

START_TEST(test_no_device)
{
	fake_cuda.init_result = CUDA_ERROR_NO_DEVICE;
	ck_assert_int_eq(cu_load(), -ENODEV);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA_ERROR_NO_DEVICE"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuInit)"));
	ck_assert_int_eq(cu_device_count(), -ENODEV);
}
END_TEST

/* The one table: four named codes, everything else -EIO, with the driver's words. */
START_TEST(test_errno_table)
{
	static const struct {
		CUresult res;
		int err;
	} cases[] = {
		{ CUDA_ERROR_OUT_OF_MEMORY, -ENOMEM },     { CUDA_ERROR_INVALID_VALUE, -EINVAL },
		{ CUDA_ERROR_NOT_SUPPORTED, -EOPNOTSUPP }, { CUDA_ERROR_NO_DEVICE, -ENODEV },
		{ CUDA_ERROR_ECC_UNCORRECTABLE, -EIO },    { CUDA_ERROR_ILLEGAL_ADDRESS, -EIO },
	};
	uint8_t b[8] = {};
	CUdeviceptr p;

	load_fake();
	p = fake_cuda_alloc(GRAN, fake_cuda_own_ctx(), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		fake_cuda.copy_result = cases[i].res;
		ck_assert_int_eq(cu_copy_htod(p, b, sizeof(b)), cases[i].err);
		ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemcpyHtoD)"));
	}
	fake_cuda.copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	cu_copy_htod(p, b, sizeof(b));
	ck_assert_str_eq(cu_last_error(), "CUDA_ERROR_OUT_OF_MEMORY: out of memory (cuMemcpyHtoD)");
	/* A code without a name still says which call and which code. */
	fake_cuda.copy_result = CUDA_ERROR_ECC_UNCORRECTABLE;
	cu_copy_htod(p, b, sizeof(b));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUresult 214 (cuMemcpyHtoD)"));
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

START_TEST(test_guard_own_context)
{
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	CUdeviceptr p;

	load_fake();
	p = fake_cuda_alloc(GRAN, fake_cuda_own_ctx(), 0);
	ck_assert_int_eq(cu_ctx_guard_enter(p + 17, &g), 0);
	ck_assert_ptr_eq(fake_cuda_current(), fake_cuda_own_ctx());
	ck_assert_int_eq(g.primary, -1);
	ck_assert_int_eq(fake_cuda.primary_refs[0] + fake_cuda.primary_refs[1], 0);
	cu_ctx_guard_exit(&g);
	ck_assert_ptr_null(fake_cuda_current());
	cu_ctx_guard_exit(&g); /* idempotent */
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

START_TEST(test_guard_primary_fallback)
{
	_cleanup_(cu_ctx_guard_exit) struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	CUcontext popped;
	CUdeviceptr p;

	load_fake();
	p = fake_cuda_alloc(GRAN, NULL, 1);
	/* Whatever the thread had current comes back. */
	fake_cu_ops.cuCtxPushCurrent(fake_cuda_own_ctx());
	ck_assert_int_eq(cu_ctx_guard_enter(p, &g), 0);
	ck_assert_ptr_eq(fake_cuda_current(), fake_cuda_primary(1));
	ck_assert_int_eq(g.primary, 1);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	cu_ctx_guard_exit(&g);
	ck_assert_ptr_eq(fake_cuda_current(), fake_cuda_own_ctx());
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 0);
	fake_cu_ops.cuCtxPopCurrent(&popped);
}
END_TEST

START_TEST(test_guard_host_pointer)
{
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	int x = 0, dev = 7;

	load_fake();
	ck_assert_int_eq(cu_ctx_guard_enter((uintptr_t)&x, &g), -EINVAL);
	ck_assert_ptr_null(g.ctx);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "is not memory CUDA knows"));
	ck_assert_int_eq(cu_copy_dtoh(&x, (uintptr_t)&x, sizeof(x)), -EINVAL);
	ck_assert_int_eq(cu_pointer_device((uintptr_t)&x, &dev), 0);
	ck_assert_int_eq(dev, 7);
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

struct thread_arg {
	uint64_t dptr;
	int r;
	CUcontext copy_ctx;
	int depth_after;
	char error[64];
};

static void *copy_thread(void *p)
{
	struct thread_arg *t = p;
	char buf[8];

	t->r = cu_copy_dtoh(buf, t->dptr, sizeof(buf));
	t->copy_ctx = fake_cuda.last_copy_ctx;
	t->depth_after = fake_cuda_depth();
	snprintf(t->error, sizeof(t->error), "%s", cu_last_error());
	return NULL;
}

/* A pool thread has no context of its own and its own last error. */
START_TEST(test_guard_other_thread)
{
	struct thread_arg t = {};
	pthread_t th;
	CUdeviceptr p;
	int x;

	load_fake();
	p = fake_cuda_alloc(GRAN, NULL, 1);
	t.dptr = p;
	ck_assert_int_eq(pthread_create(&th, NULL, copy_thread, &t), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(t.r, 0);
	ck_assert_ptr_eq(t.copy_ctx, fake_cuda_primary(1));
	ck_assert_int_eq(t.depth_after, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);

	ck_assert_int_eq(cu_copy_dtoh(&x, (uintptr_t)&x, sizeof(x)), -EINVAL);
	t.dptr = p;
	fake_cuda.copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_create(&th, NULL, copy_thread, &t);
	pthread_join(th, NULL);
	ck_assert_int_eq(t.r, -ENOMEM);
	ck_assert_ptr_nonnull(strstr(t.error, "CUDA_ERROR_OUT_OF_MEMORY"));
	/* This thread's message is still its own. */
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "is not memory CUDA knows"));
}
END_TEST

START_TEST(test_vmm_granularity)
{
	struct cu_vmm_map m = { .dptr = 0xdead };

	load_fake();
	ck_assert_int_eq(cu_vmm_import(&(int){ 3 }, 1, GRAN + 4096, 0, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(),
				     "not a multiple of device 1's VMM granularity"));
	ck_assert_uint_eq(m.dptr, 0xdead); /* untouched on failure */
	ck_assert_int_eq(cu_vmm_import(&(int){ 3 }, 1, 0, 0, &m), -EINVAL);
	ck_assert_int_eq(cu_vmm_import(&(int){ -EBADF }, 1, GRAN, 0, &m), -EBADF);
	ck_assert_int_eq(fake_cuda.n_handles, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
}
END_TEST

START_TEST(test_vmm_map_failure_unwinds)
{
	struct cu_vmm_map m = {};

	load_fake();
	fake_cuda.map_result = CUDA_ERROR_INVALID_VALUE;
	ck_assert_int_eq(cu_vmm_import(&(int){ 3 }, 1, 4 * GRAN, 0, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemMap)"));
	ck_assert_int_eq(fake_cuda.n_handles, 0);
	ck_assert_int_eq(fake_cuda.n_reserved, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 0);
}
END_TEST

START_TEST(test_vmm_import_copy_release)
{
	struct cu_vmm_map m = {};
	char in[] = "through the primary context", out[sizeof(in)] = {};

	load_fake();
	ck_assert_int_eq(cu_vmm_import(&(int){ 3 }, 1, 4 * GRAN, 0, &m), 0);
	ck_assert_int_eq(m.device, 1);
	ck_assert_uint_eq(m.size, 4 * GRAN);
	ck_assert_int_eq(fake_cuda.n_handles, 1);
	ck_assert_int_eq(fake_cuda.n_mapped, 1);
	/* Read and write access for the device the memory lives on, then for
	 * the other, which copies with it peer to peer. */
	ck_assert_uint_eq(fake_cuda.last_access_count, 1);
	ck_assert_int_eq(fake_cuda.last_access.location.id, 0);
	ck_assert_int_eq(fake_cuda.last_access.flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_assert_uint_eq(fake_cuda_access(m.dptr), 1U << 1 | 1U << 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	ck_assert_int_eq(cu_pointer_device(m.dptr + 5, NULL), 1);

	ck_assert_int_eq(cu_copy_htod(m.dptr + 4097, in, sizeof(in)), 0);
	ck_assert_ptr_eq(fake_cuda.last_copy_ctx, fake_cuda_primary(1));
	/* Waited for: the driver may return before the bytes land. */
	ck_assert_int_eq(fake_cuda.n_syncs, 1);
	ck_assert_int_eq(cu_copy_dtod(m.dptr + 8192, m.dptr + 4097, sizeof(in)), 0);
	ck_assert_int_eq(fake_cuda.n_syncs, 2);
	ck_assert_int_eq(cu_copy_dtoh(out, m.dptr + 4097, sizeof(out)), 0);
	ck_assert_int_eq(fake_cuda.n_syncs, 2); /* returns when done */
	ck_assert_str_eq(out, in);
	ck_assert_int_eq(fake_cuda_depth(), 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);

	ck_assert_int_eq(cu_vmm_release(&m), 0);
	ck_assert_uint_eq(m.dptr, 0);
	ck_assert_int_eq(cu_vmm_release(&m), 0); /* a zeroed map is a no-op */
	ck_assert_int_eq(fake_cuda.n_handles + fake_cuda.n_reserved + fake_cuda.n_mapped, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
}
END_TEST

/* Several allocations mapped one after the other as one range, as a tensor
 * of PyTorch's expandable segments needs; each unmapped and released. */
START_TEST(test_vmm_import_chunks)
{
	int fds[3] = { 3, 4, 5 };
	char in[] = "across the chunk boundary", out[sizeof(in)] = {};
	struct cu_vmm_map m = {};

	load_fake();
	ck_assert_int_eq(cu_vmm_import(fds, 3, GRAN, 0, &m), 0);
	ck_assert_uint_eq(m.n_chunks, 3);
	ck_assert_uint_eq(m.chunk_size, GRAN);
	ck_assert_uint_eq(m.size, 3 * GRAN);
	ck_assert_int_eq(fake_cuda.n_handles, 3);
	ck_assert_int_eq(fake_cuda.n_mapped, 3);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	ck_assert_int_eq(cu_pointer_device(m.dptr + 2 * GRAN + 7, NULL), 1);
	ck_assert_int_eq(cu_copy_htod(m.dptr + GRAN + 100, in, sizeof(in)), 0);
	ck_assert_int_eq(cu_copy_dtoh(out, m.dptr + GRAN + 100, sizeof(out)), 0);
	ck_assert_str_eq(out, in);
	ck_assert_int_eq(cu_vmm_release(&m), 0);
	ck_assert_int_eq(fake_cuda.n_handles + fake_cuda.n_reserved + fake_cuda.n_mapped, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);

	/* Counts out of range, a bad fd among good ones, a failing map: nothing
	 * stays held. */
	ck_assert_int_eq(cu_vmm_import(fds, 0, GRAN, 0, &m), -EINVAL);
	ck_assert_int_eq(cu_vmm_import(fds, CU_VMM_CHUNKS_MAX + 1, GRAN, 0, &m), -EINVAL);
	ck_assert_int_eq(cu_vmm_import(fds, 3, UINT64_MAX / 2, 0, &m), -EOVERFLOW);
	fds[2] = -EBADF;
	ck_assert_int_eq(cu_vmm_import(fds, 3, GRAN, 0, &m), -EBADF);
	ck_assert_int_eq(fake_cuda.n_handles, 0);
	fds[2] = 5;
	fake_cuda.map_result = CUDA_ERROR_INVALID_VALUE;
	ck_assert_int_eq(cu_vmm_import(fds, 3, GRAN, 0, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemMap)"));
	ck_assert_int_eq(fake_cuda.n_handles + fake_cuda.n_reserved + fake_cuda.n_mapped, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	ck_assert_uint_eq(m.dptr, 0);
}
END_TEST

START_TEST(test_ipc_open_close)
{
	unsigned char h[CU_IPC_HANDLE_SIZE] = { 0, 1 };
	struct cu_ipc_map m = {};
	uint64_t base, size;
	int dev;

	load_fake();
	ck_assert_int_eq(cu_ipc_open(h, 0, 0, &m), 0);
	ck_assert_uint_eq(fake_cuda.last_ipc_flags, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	ck_assert_int_eq(m.ctx_device, 0);
	ck_assert_int_eq(m.device, 1); /* lives on device 1, opened from 0 */
	ck_assert_uint_eq(m.size, 1 << 20);
	ck_assert_ptr_null(fake_cuda_current());
	ck_assert_int_eq(fake_cuda.primary_refs[0], 1);
	ck_assert_int_eq(cu_pointer_device(m.dptr + 9, &dev), 1);
	ck_assert_int_eq(dev, 1);
	/* The range lookup needs the mapping's own context: the guard's job. */
	ck_assert_int_eq(cu_address_range(m.dptr + 9, &base, &size), 0);
	ck_assert_uint_eq(base, m.dptr);
	ck_assert_uint_eq(size, 1 << 20);

	ck_assert_int_eq(cu_ipc_close(&m), 0);
	ck_assert_uint_eq(m.dptr, 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	ck_assert_int_eq(fake_cuda_depth(), 0);

	h[0] = 0x5a;
	ck_assert_int_eq(cu_ipc_open(h, 0, 0, &m), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "CUDA_ERROR_INVALID_VALUE"));
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuIpcOpenMemHandle)"));
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	ck_assert_int_eq(cu_ipc_open(h, N_DEV, 0, &m), -ENODEV);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "there is no CUDA device 2"));
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

START_TEST(test_dmabuf)
{
	uint64_t base, size;
	CUdeviceptr p;
	int fd = -1;

	load_fake();
	p = fake_cuda_alloc(3 * GRAN - 100, fake_cuda_own_ctx(), 0);
	ck_assert_int_eq(cu_dmabuf_fd(p + 1, GRAN, &fd), -EINVAL);
	ck_assert_int_eq(cu_dmabuf_fd(p, GRAN + 1, &fd), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "not aligned to the host page"));
	ck_assert_int_eq(fd, -1);

	ck_assert_int_eq(cu_dmabuf_fd(p, GRAN, &fd), 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);

	/* The whole allocation, its size rounded up to the page. */
	ck_assert_int_eq(cu_dmabuf_fd_for(p + 12345, &fd, &base, &size), 0);
	ck_assert_uint_eq(base, p);
	ck_assert_uint_eq(size, 3 * GRAN);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_base, p);
	ck_assert_uint_eq(fake_cuda.last_dmabuf_size, 3 * GRAN);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

START_TEST(test_host_register)
{
	static char buf[8192];

	load_fake();
	ck_assert_int_eq(cu_host_register(buf, sizeof(buf), 1, true), 0);
	ck_assert_ptr_eq(fake_cuda.last_register_ctx, fake_cuda_primary(1));
	ck_assert_uint_eq(fake_cuda.last_register_flags,
			  CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY);
	/* The registration lives in that context: it stays retained. */
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	ck_assert_ptr_null(fake_cuda_current());
	ck_assert_int_eq(cu_host_unregister(buf, 1), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);

	ck_assert_int_eq(cu_host_register(buf, sizeof(buf), 0, false), 0);
	ck_assert_uint_eq(fake_cuda.last_register_flags, CU_MEMHOSTREGISTER_PORTABLE);
	ck_assert_int_eq(cu_host_unregister(buf, 0), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	ck_assert_int_eq(fake_cuda_depth(), 0);
}
END_TEST

START_TEST(test_primary_balance)
{
	load_fake();
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 2);
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	ck_assert_int_eq(cu_primary_ctx_release(0), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	/* One release too many would destroy a context someone else uses. */
	ck_assert_int_eq(cu_primary_ctx_release(0), -EINVAL);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	ck_assert_int_eq(cu_primary_ctx_retain(-1), -ENODEV);
	ck_assert_int_eq(cu_primary_ctx_retain(N_DEV), -ENODEV);
}
END_TEST

/* ---- two GPUs ---- */

/* A VMM import of n_gran granules on device. */
static void import_on(int device, size_t n_gran, struct cu_vmm_map *m)
{
	fake_cuda.vmm_device = device;
	ck_assert_int_eq(cu_vmm_import(&(int){ 3 }, 1, n_gran * GRAN, 0, m), 0);
	ck_assert_int_eq(m->device, device);
}

static void pattern(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + seed + i / 253);
}

/*
 * A copy from GPU src's VMM mapping to GPU dst's and back, at odd offsets:
 * the bytes arrive, each side ran in its own device's primary context
 * (cuMemcpyPeer), and the counts say which path.
 */
static void copy_round_trip(struct cu_vmm_map *a, struct cu_vmm_map *b, int want_p2p)
{
	static uint8_t in[100003], out[sizeof(in)];
	int p2p = fake_cuda.n_copies_p2p, staged = fake_cuda.n_copies_staged;
	int syncs = fake_cuda.n_syncs;

	pattern(in, sizeof(in), 7);
	ck_assert_int_eq(cu_copy_htod(a->dptr + 4097, in, sizeof(in)), 0);
	ck_assert_int_eq(cu_copy_dtod(b->dptr + 12345, a->dptr + 4097, sizeof(in)), 0);
	ck_assert_ptr_eq(fake_cuda.last_peer_dst_ctx, fake_cuda_primary(b->device));
	ck_assert_ptr_eq(fake_cuda.last_peer_src_ctx, fake_cuda_primary(a->device));
	/* Waited for on both sides. */
	ck_assert_int_eq(fake_cuda.n_syncs, syncs + 1 + 2);
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(cu_copy_dtoh(out, b->dptr + 12345, sizeof(out)), 0);
	ck_assert_mem_eq(out, in, sizeof(in));

	/* And back, to another odd place. */
	ck_assert_int_eq(cu_copy_dtod(a->dptr + GRAN + 1, b->dptr + 12345, sizeof(in)), 0);
	ck_assert_ptr_eq(fake_cuda.last_peer_dst_ctx, fake_cuda_primary(a->device));
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(cu_copy_dtoh(out, a->dptr + GRAN + 1, sizeof(out)), 0);
	ck_assert_mem_eq(out, in, sizeof(in));
	ck_assert_int_eq(fake_cuda.n_copies_p2p, p2p + 2 * want_p2p);
	ck_assert_int_eq(fake_cuda.n_copies_staged, staged + 2 * !want_p2p);
	ck_assert_int_eq(fake_cuda_depth(), 0);
	/* The guards' retains are gone again: one per import is left. */
	ck_assert_uint_eq(cu_primary_ctx_refs(a->device), 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(b->device), 1);
}

/* Both GPUs reach each other: each import is mapped for the other GPU too,
 * copies go peer to peer with access enabled both ways, and the counts and
 * the path show in cu_peer_info. */
START_TEST(test_two_gpus_peer)
{
	struct cu_vmm_map a = {}, b = {};
	struct cu_peer_info pi;

	load_fake();
	import_on(0, 2, &a);
	ck_assert_uint_eq(fake_cuda_access(a.dptr), 1U << 0 | 1U << 1);
	import_on(1, 2, &b);
	ck_assert_uint_eq(fake_cuda_access(b.dptr), 1U << 1 | 1U << 0);
	copy_round_trip(&a, &b, 1);
	ck_assert(fake_cuda.peer_enabled[0][1] && fake_cuda.peer_enabled[1][0]);
	/* Already enabled the second time round: not an error. */
	copy_round_trip(&b, &a, 1);

	ck_assert_int_eq(cu_peer_info(0, 1, &pi), 0);
	ck_assert_int_eq(pi.ordinal, 1);
	ck_assert(pi.access);
	ck_assert_int_eq(pi.performance_rank, 0);
	ck_assert_int_eq(pi.path, CU_COPY_PEER);
	ck_assert_str_eq(cu_copy_path_name(pi.path), "peer");
	ck_assert_uint_eq(pi.copies_peer, 2);
	ck_assert_uint_eq(pi.copies_staged, 0);
	ck_assert_int_eq(cu_peer_info(1, 0, &pi), 0);
	ck_assert_uint_eq(pi.copies_peer, 2);
	ck_assert_int_eq(cu_peer_info(1, 1, &pi), 0);
	ck_assert_int_eq(pi.path, CU_COPY_SAME_DEVICE);
	ck_assert_int_eq(pi.performance_rank, -1);
	ck_assert_int_eq(cu_peer_info(0, N_DEV, &pi), -ENODEV);

	/* Each device's context goes with its last import. */
	ck_assert_int_eq(cu_vmm_release(&a), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);
	ck_assert_int_eq(cu_vmm_release(&b), 0);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 0);
	ck_assert_int_eq(fake_cuda_live(), 0);
}
END_TEST

/* The GPUs cannot reach each other: nothing is granted across, and the
 * driver stages each copy, each side in its own context. A DtoD issued in
 * one GPU's context would have faulted on the other's mapping. */
START_TEST(test_two_gpus_staged)
{
	struct cu_vmm_map a = {}, b = {};
	struct cu_peer_info pi;
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;

	fake_cuda.no_peer = true;
	load_fake();
	import_on(0, 2, &a);
	import_on(1, 2, &b);
	ck_assert_uint_eq(fake_cuda_access(a.dptr), 1U << 0);
	ck_assert_uint_eq(fake_cuda_access(b.dptr), 1U << 1);
	copy_round_trip(&a, &b, 0);
	ck_assert(!fake_cuda.peer_enabled[0][1] && !fake_cuda.peer_enabled[1][0]);
	ck_assert_int_eq(cu_peer_info(0, 1, &pi), 0);
	ck_assert(!pi.access);
	ck_assert_int_eq(pi.path, CU_COPY_STAGED);
	ck_assert_str_eq(cu_copy_path_name(pi.path), "staged");
	ck_assert_uint_eq(pi.copies_staged, 1);
	ck_assert_uint_eq(pi.copies_peer, 0);

	ck_assert_int_eq(cu_ctx_guard_enter(b.dptr, &g), 0);
	ck_assert_int_eq(fake_cu_ops.cuMemcpyDtoD(a.dptr, b.dptr, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
	cu_ctx_guard_exit(&g);
	ck_assert_int_eq(cu_vmm_release(&a), 0);
	ck_assert_int_eq(cu_vmm_release(&b), 0);
	ck_assert_int_eq(fake_cuda_live(), 0);
}
END_TEST

/* RDMAMEMD_CUDA_PEER_COPIES=off: the driver would allow peer access, the
 * daemon stages all the same and grants nothing across. */
START_TEST(test_two_gpus_peer_copies_off)
{
	struct cu_vmm_map a = {}, b = {};
	struct cu_peer_info pi;

	ck_assert_int_eq(setenv("RDMAMEMD_CUDA_PEER_COPIES", "off", 1), 0);
	load_fake();
	import_on(0, 2, &a);
	import_on(1, 2, &b);
	ck_assert_uint_eq(fake_cuda_access(a.dptr), 1U << 0);
	ck_assert_uint_eq(fake_cuda_access(b.dptr), 1U << 1);
	copy_round_trip(&a, &b, 0);
	ck_assert_int_eq(cu_peer_info(1, 0, &pi), 0);
	ck_assert(pi.access);
	ck_assert_int_eq(pi.path, CU_COPY_STAGED);
	ck_assert_uint_eq(pi.copies_staged, 1);
	ck_assert_int_eq(cu_vmm_release(&a), 0);
	ck_assert_int_eq(cu_vmm_release(&b), 0);
	unsetenv("RDMAMEMD_CUDA_PEER_COPIES");
}
END_TEST

/*
 * An IPC allocation of GPU 1 opened in GPU 0's context, and a VMM mapping
 * of GPU 1: one device's memory, two contexts, so cuMemcpyPeer (a DtoD in
 * GPU 0's context would not reach the mapping: only GPU 1 was granted it
 * when the GPUs cannot reach each other). Two regions of one context copy
 * with a plain DtoD.
 */
START_TEST(test_ipc_other_device_copies)
{
	unsigned char h[CU_IPC_HANDLE_SIZE] = { 0, 1 }, h2[CU_IPC_HANDLE_SIZE] = { 1, 0 };
	struct cu_ipc_map i1 = {}, i0 = {};
	struct cu_vmm_map v = {};
	uint8_t in[4099], out[sizeof(in)];
	struct cu_peer_info pi;

	fake_cuda.no_peer = true;
	load_fake();
	ck_assert_int_eq(cu_ipc_open(h, 0, 0, &i1), 0);
	ck_assert_int_eq(i1.device, 1);
	ck_assert_int_eq(i1.ctx_device, 0);
	ck_assert_int_eq(cu_ipc_open(h2, 0, 0, &i0), 0);
	import_on(1, 1, &v);
	ck_assert_int_eq(fake_cuda.primary_refs[0], 2);
	ck_assert_int_eq(fake_cuda.primary_refs[1], 1);

	pattern(in, sizeof(in), 3);
	ck_assert_int_eq(cu_copy_htod(v.dptr + 3, in, sizeof(in)), 0);
	ck_assert_int_eq(cu_copy_dtod(i1.dptr + 5, v.dptr + 3, sizeof(in)), 0);
	ck_assert_int_eq(fake_cuda.n_copies_staged, 1);
	ck_assert_ptr_eq(fake_cuda.last_peer_dst_ctx, fake_cuda_primary(0));
	ck_assert_ptr_eq(fake_cuda.last_peer_src_ctx, fake_cuda_primary(1));
	/* Counted by the contexts' devices: GPU 1's mapping to GPU 0's open. */
	ck_assert_int_eq(cu_peer_info(1, 0, &pi), 0);
	ck_assert_uint_eq(pi.copies_staged, 1);

	/* One context: DtoD, no peer copy. */
	ck_assert_int_eq(cu_copy_dtod(i0.dptr + 7, i1.dptr + 5, sizeof(in)), 0);
	ck_assert_int_eq(fake_cuda.n_copies_staged + fake_cuda.n_copies_p2p, 1);
	ck_assert_ptr_eq(fake_cuda.last_copy_ctx, fake_cuda_primary(0));
	ck_assert_int_eq(cu_copy_dtoh(out, i0.dptr + 7, sizeof(out)), 0);
	ck_assert_mem_eq(out, in, sizeof(in));
	ck_assert_int_eq(fake_cuda_depth(), 0);

	ck_assert_int_eq(cu_ipc_close(&i1), 0);
	ck_assert_int_eq(cu_ipc_close(&i0), 0);
	ck_assert_int_eq(cu_vmm_release(&v), 0);
	ck_assert_int_eq(fake_cuda_live(), 0);
}
END_TEST

/* A peer copy that fails: the error names cuMemcpyPeer, and no context is
 * left pushed nor retained. */
START_TEST(test_two_gpus_copy_fails)
{
	struct cu_vmm_map a = {}, b = {};

	load_fake();
	import_on(0, 1, &a);
	import_on(1, 1, &b);
	fake_cuda.copy_result = CUDA_ERROR_OUT_OF_MEMORY;
	ck_assert_int_eq(cu_copy_dtod(b.dptr, a.dptr, 100), -ENOMEM);
	ck_assert_ptr_nonnull(strstr(cu_last_error(), "(cuMemcpyPeer)"));
	ck_assert_int_eq(fake_cuda_depth(), 0);
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	fake_cuda.copy_result = CUDA_SUCCESS;
	ck_assert_int_eq(cu_vmm_release(&a), 0);
	ck_assert_int_eq(cu_vmm_release(&b), 0);
}
END_TEST

struct gpu_thread {
	struct cu_vmm_map *own, *other;
	unsigned seed;
	int failures;
};

/* Copies within its own GPU and across to the other, many times, byte-exact,
 * while the other thread does the same the other way round. */
static void *gpu_thread(void *p)
{
	struct gpu_thread *t = p;
	uint8_t in[5000], out[sizeof(in)];

	for (unsigned k = 0; k < 200; k++) {
		uint64_t at = t->own->dptr + 1 + (k * 97) % GRAN;
		uint64_t there = t->other->dptr + GRAN + 3 + (k * 89) % (GRAN / 2);

		pattern(in, sizeof(in), t->seed + k);
		if (cu_copy_htod(at, in, sizeof(in)) < 0 ||
		    cu_copy_dtod(at + GRAN / 4, at, sizeof(in)) < 0 ||
		    cu_copy_dtod(there + (t->seed & 1) * GRAN / 4, at + GRAN / 4, sizeof(in)) < 0 ||
		    cu_copy_dtoh(out, there + (t->seed & 1) * GRAN / 4, sizeof(out)) < 0 ||
		    memcmp(in, out, sizeof(in)) != 0 || fake_cuda_depth() != 0)
			t->failures++;
	}
	return NULL;
}

/* The context guard on two threads at once, one per GPU, crossing over. */
START_TEST(test_two_gpus_two_threads)
{
	struct cu_vmm_map a = {}, b = {};
	struct gpu_thread t[2] = { { &a, &b, 2, 0 }, { &b, &a, 5, 0 } };
	pthread_t th[2];

	load_fake();
	import_on(0, 2, &a);
	import_on(1, 2, &b);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, gpu_thread, &t[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].failures, 0);
	}
	ck_assert_int_eq(fake_cuda.n_copies_p2p, 400);
	ck_assert_uint_eq(cu_primary_ctx_refs(0), 1);
	ck_assert_uint_eq(cu_primary_ctx_refs(1), 1);
	ck_assert_int_eq(cu_vmm_release(&a), 0);
	ck_assert_int_eq(cu_vmm_release(&b), 0);
	ck_assert_int_eq(fake_cuda_live(), 0);
}
END_TEST

#endif /* HAVE_CUDA_H */

Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("nodriver");

	tcase_add_test(tc, test_no_driver);
	suite_add_tcase(s, tc);
#if HAVE_CUDA_H
	tc = tcase_create("fake");
	tcase_add_checked_fixture(tc, fake_setup, NULL);
	tcase_add_test(tc, test_set_ops_after_load);
	tcase_add_test(tc, test_old_driver);
	tcase_add_test(tc, test_no_device);
	tcase_add_test(tc, test_errno_table);
	tcase_add_test(tc, test_guard_own_context);
	tcase_add_test(tc, test_guard_primary_fallback);
	tcase_add_test(tc, test_guard_host_pointer);
	tcase_add_test(tc, test_guard_other_thread);
	tcase_add_test(tc, test_vmm_granularity);
	tcase_add_test(tc, test_vmm_map_failure_unwinds);
	tcase_add_test(tc, test_vmm_import_copy_release);
	tcase_add_test(tc, test_vmm_import_chunks);
	tcase_add_test(tc, test_ipc_open_close);
	tcase_add_test(tc, test_dmabuf);
	tcase_add_test(tc, test_host_register);
	tcase_add_test(tc, test_primary_balance);
	suite_add_tcase(s, tc);

	tc = tcase_create("two-gpus");
	tcase_add_checked_fixture(tc, fake_setup, NULL);
	tcase_add_test(tc, test_two_gpus_peer);
	tcase_add_test(tc, test_two_gpus_staged);
	tcase_add_test(tc, test_two_gpus_peer_copies_off);
	tcase_add_test(tc, test_ipc_other_device_copies);
	tcase_add_test(tc, test_two_gpus_copy_fails);
	tcase_add_test(tc, test_two_gpus_two_threads);
	suite_add_tcase(s, tc);
#else
	test_note_not_built("cuda: the fake driver's cases (tcases fake, two-gpus)", "cuda.h");
#endif
	return s;
}
