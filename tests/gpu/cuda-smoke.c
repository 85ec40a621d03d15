/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda-smoke: proves daemon/gpu/cuda.c on a real GPU and driver.
 *
 * A child process plays the client: it allocates a VMM allocation
 * (cuMemCreate, POSIX fd handle) and a legacy cuMemAlloc one, fills both
 * with a known pattern, exports them (fd over SCM_RIGHTS, 64-byte IPC
 * handle) and later checks, in its own mappings, what the parent wrote. The
 * parent plays the daemon through cuda.c alone: imports, copies at odd
 * offsets under the context guard, registers a memfd mapping for pinned
 * copies, asks for dma-buf fds and provokes the errors a client can cause.
 * The child is forked before the parent touches CUDA (CUDA does not survive
 * fork). Every check prints "ok" or "FAIL"; any FAIL makes the exit status 1.
 *
 * Usage: cuda-smoke [-d ORDINAL]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/gpu/cuda-ops.h"
#include "daemon/gpu/cuda.h"
#include "daemon/core/log.h"
#include "util/fdhold.h"

#define VMM_SIZE (64ULL << 20)          /* also the bandwidth test's size */
#define IPC_SIZE ((8ULL << 20) + 12345) /* odd on purpose */
/* Past the bytes the DtoD test copies from, which keep the child's pattern. */
#define VMM_WRITE_AT ((32ULL << 20) + 12345)
#define N_TIMED 20
#define N_BW 5

enum msg_kind { MSG_HELLO = 1, MSG_VERIFY, MSG_RESULT, MSG_DONE };
enum region_kind { REGION_VMM, REGION_IPC };

struct msg {
	uint32_t kind;
	int32_t status; /* HELLO: child's setup errno; RESULT: mismatches or -errno */
	uint64_t vmm_size, ipc_size;
	unsigned char ipc_handle[CU_IPC_HANDLE_SIZE];
	double export_us, ipc_get_us;
	int32_t own_dmabuf[3]; /* CUresults, see DMABUF_PROBES */
	char error[256];
	/* VERIFY */
	uint32_t region, seed;
	uint64_t offset, length;
};

static int failures;
static const struct cu_ops *cu;

_printf_(2, 3) static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		failures++;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void stats(const char *what, double *t, int n)
{
	if (n == 0) {
		printf("time %-44s none completed\n", what);
		return;
	}
	qsort(t, n, sizeof(*t), cmp_double);
	printf("time %-44s min %8.1f us  median %8.1f us  (n=%d)\n", what, t[0], t[n / 2], n);
}

/* The byte at absolute offset o of a region filled with seed. */
static uint8_t pat(uint64_t o, uint32_t seed)
{
	return (uint8_t)(((o + seed) * 0x9E3779B97F4A7C15ULL) >> 56);
}

static void fill(uint8_t *buf, uint64_t offset, uint64_t len, uint32_t seed)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = pat(offset + i, seed);
}

/* Number of bytes that differ from the pattern; the first one is printed. */
static uint64_t mismatches(const uint8_t *buf, uint64_t offset, uint64_t len, uint32_t seed)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < len; i++) {
		if (buf[i] == pat(offset + i, seed))
			continue;
		if (!bad)
			fprintf(stderr, "first mismatch at offset %" PRIu64 ": %#x, expected %#x\n",
				offset + i, buf[i], pat(offset + i, seed));
		bad++;
	}
	return bad;
}

static int send_msg(int sock, const struct msg *m, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = {};
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(*m) ? 0 : negative_errno();
}

static int recv_msg(int sock, struct msg *m, int *ret_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;

	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return negative_errno();
	if (n != (ssize_t)sizeof(*m) || (mh.msg_flags & MSG_CTRUNC))
		return -EPROTO;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		int fd;

		memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (ret_fd)
			*ret_fd = fd;
		else
			close(fd);
	}
	return 0;
}

/* Lengths tried for a dma-buf of a legacy allocation of size n. */
static const char *const probe_names[3] = { "size page-down", "size page-up", "size 2MiB-up" };

static uint64_t probe_len(uint64_t n, int i)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), m = i == 2 ? 2 << 20 : page;

	return i == 0 ? n / page * page : (n + m - 1) / m * m;
}

/* ---- the child: a client that exports GPU memory ---- */

struct child_state {
	CUdeviceptr vmm_ptr, ipc_ptr;
	uint64_t vmm_size;
};

#define CHILD_TRY(call, what)                                                                      \
	do {                                                                                       \
		CUresult _res = (call);                                                            \
		if (_res != CUDA_SUCCESS) {                                                        \
			const char *_n = NULL;                                                     \
			cu->cuGetErrorName(_res, &_n);                                             \
			snprintf(hello.error, sizeof(hello.error), "%s: %s", what, _n ? _n : "?"); \
			hello.status = -EIO;                                                       \
			goto out_send;                                                             \
		}                                                                                  \
	} while (0)

static int child_verify(struct child_state *st, const struct msg *req)
{
	CUdeviceptr base = req->region == REGION_VMM ? st->vmm_ptr : st->ipc_ptr;
	uint8_t *buf = malloc(req->length);
	int r;

	if (!buf)
		return -ENOMEM;
	/* The child reads its own mapping: what the parent wrote must be there. */
	r = cu_copy_dtoh(buf, base + req->offset, req->length);
	if (r == 0)
		r = (int)MIN(mismatches(buf, req->offset, req->length, req->seed),
			     (uint64_t)INT32_MAX);
	free(buf);
	return r;
}

static int child_main(int sock, int ordinal)
{
	CUmemAllocationProp prop = {};
	CUmemAccessDesc access = {};
	CUmemGenericAllocationHandle h = 0;
	struct child_state st = {};
	struct msg hello = { .kind = MSG_HELLO };
	CUipcMemHandle ipc;
	CUcontext ctx;
	CUdevice dev;
	size_t gran;
	uint8_t *buf = NULL;
	int export_fd = -1, gdr = 0, r;
	double t;

	r = cu_load();
	if (r < 0) {
		snprintf(hello.error, sizeof(hello.error), "%s", cu_last_error());
		hello.status = r;
		goto out_send;
	}
	cu = cu_get_ops();
	CHILD_TRY(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
	CHILD_TRY(cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	CHILD_TRY(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	CHILD_TRY(cu->cuDeviceGetAttribute(
			  &gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev),
		  "cuDeviceGetAttribute");

	/* The allocator side of PyTorch's expandable segments, in short. */
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = ordinal;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.allocFlags.gpuDirectRDMACapable = gdr ? 1 : 0;
	CHILD_TRY(cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		  "cuMemGetAllocationGranularity");
	st.vmm_size = (VMM_SIZE + gran - 1) / gran * gran;
	CHILD_TRY(cu->cuMemCreate(&h, st.vmm_size, &prop, 0), "cuMemCreate");
	CHILD_TRY(cu->cuMemAddressReserve(&st.vmm_ptr, st.vmm_size, gran, 0, 0),
		  "cuMemAddressReserve");
	CHILD_TRY(cu->cuMemMap(st.vmm_ptr, st.vmm_size, 0, h, 0), "cuMemMap");
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHILD_TRY(cu->cuMemSetAccess(st.vmm_ptr, st.vmm_size, &access, 1), "cuMemSetAccess");
	t = now_us();
	CHILD_TRY(cu->cuMemExportToShareableHandle(&export_fd, h,
						   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		  "cuMemExportToShareableHandle");
	hello.export_us = now_us() - t;

	CHILD_TRY(cu->cuMemAlloc(&st.ipc_ptr, IPC_SIZE), "cuMemAlloc");
	t = now_us();
	CHILD_TRY(cu->cuIpcGetMemHandle(&ipc, st.ipc_ptr), "cuIpcGetMemHandle");
	hello.ipc_get_us = now_us() - t;
	/* Is a legacy allocation exportable as dma-buf where it was made, and
	 * with which length? The parent asks the same of its IPC mapping. */
	for (int i = 0; i < 3; i++) {
		int fd = -1;

		hello.own_dmabuf[i] =
			cu->cuMemGetHandleForAddressRange(&fd, st.ipc_ptr, probe_len(IPC_SIZE, i),
							  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
		safe_close(fd);
	}
	memcpy(hello.ipc_handle, &ipc, sizeof(ipc));

	buf = malloc(st.vmm_size);
	if (!buf) {
		hello.status = -ENOMEM;
		goto out_send;
	}
	fill(buf, 0, st.vmm_size, 1);
	CHILD_TRY(cu->cuMemcpyHtoD(st.vmm_ptr, buf, st.vmm_size), "cuMemcpyHtoD");
	fill(buf, 0, IPC_SIZE, 2);
	CHILD_TRY(cu->cuMemcpyHtoD(st.ipc_ptr, buf, IPC_SIZE), "cuMemcpyHtoD");
	hello.vmm_size = st.vmm_size;
	hello.ipc_size = IPC_SIZE;

out_send:
	free(buf);
	r = send_msg(sock, &hello, hello.status == 0 ? export_fd : -1);
	export_fd = safe_close(export_fd);
	if (r < 0 || hello.status < 0)
		return 1;

	for (;;) {
		struct msg req, res = { .kind = MSG_RESULT };

		if (recv_msg(sock, &req, NULL) < 0 || req.kind == MSG_DONE)
			break;
		res.status = child_verify(&st, &req);
		if (send_msg(sock, &res, -1) < 0)
			return 1;
	}
	/* The parent has closed its mappings: free in the client's order. */
	cu->cuMemFree(st.ipc_ptr);
	cu->cuMemUnmap(st.vmm_ptr, st.vmm_size);
	cu->cuMemAddressFree(st.vmm_ptr, st.vmm_size);
	cu->cuMemRelease(h);
	return 0;
}

/* ---- the parent: the daemon's side, through cuda.c ---- */

static int ask_child(int sock, enum region_kind region, uint64_t offset, uint64_t length,
		     uint32_t seed)
{
	struct msg req = { .kind = MSG_VERIFY,
			   .region = region,
			   .offset = offset,
			   .length = length,
			   .seed = seed };
	struct msg res;
	int r;

	r = send_msg(sock, &req, -1);
	if (r == 0)
		r = recv_msg(sock, &res, NULL);
	return r < 0 ? r : res.status;
}

/* Reads [offset, +len) of a device region and compares it with seed's pattern. */
static uint64_t read_and_compare(uint64_t dptr, uint64_t offset, uint64_t len, uint32_t seed)
{
	uint8_t *buf = malloc(len);
	uint64_t bad;
	int r;

	if (!buf)
		return len;
	r = cu_copy_dtoh(buf, dptr + offset, len);
	bad = r < 0 ? len : mismatches(buf, offset, len, seed);
	if (r < 0)
		printf("     cu_copy_dtoh: %s\n", cu_last_error());
	free(buf);
	return bad;
}

static int write_pattern(uint64_t dptr, uint64_t offset, uint64_t len, uint32_t seed)
{
	uint8_t *buf = malloc(len);
	int r;

	if (!buf)
		return -ENOMEM;
	fill(buf, offset, len, seed);
	r = cu_copy_htod(dptr + offset, buf, len);
	free(buf);
	return r;
}

static CUcontext current_ctx(void)
{
	CUcontext c = NULL;

	cu->cuCtxGetCurrent(&c);
	return c;
}

struct thread_check {
	uint64_t dptr;
	CUcontext primary;
	int ok_before, ok_inside, ok_after, copy;
};

/* A libuv pool thread in miniature: no context of its own. */
static void *guard_thread(void *arg)
{
	struct thread_check *tc = arg;
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	uint8_t b[16];

	tc->ok_before = current_ctx() == NULL;
	if (cu_ctx_guard_enter(tc->dptr, &g) == 0) {
		tc->ok_inside = current_ctx() == tc->primary;
		cu_ctx_guard_exit(&g);
	}
	tc->ok_after = current_ctx() == NULL;
	tc->copy = cu_copy_dtoh(b, tc->dptr + 3, sizeof(b));
	if (tc->copy == 0 && mismatches(b, 3, sizeof(b), 1) != 0)
		tc->copy = -EILSEQ;
	tc->ok_after = tc->ok_after && current_ctx() == NULL;
	return NULL;
}

static double copy_gbps(int dir_dtoh, void *host, uint64_t dptr, uint64_t len, double *best)
{
	double sum = 0;

	*best = 0;
	for (int i = 0; i < N_BW; i++) {
		double t = now_us(), gbps;
		int r = dir_dtoh ? cu_copy_dtoh(host, dptr, len) : cu_copy_htod(dptr, host, len);

		if (r < 0) {
			printf("     copy failed: %s\n", cu_last_error());
			return -1;
		}
		gbps = len / ((now_us() - t) * 1e3);
		sum += gbps;
		if (gbps > *best)
			*best = gbps;
	}
	return sum / N_BW;
}

static void bandwidth(uint64_t dptr, uint64_t len, int ordinal)
{
	double mean, best, pg[2][2], pn[2][2];
	uint8_t *map;
	int fd, r;

	/* What the daemon maps for a client's memfd region. */
	fd = memfd_create("cuda-smoke", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		check(0, "memfd of %" PRIu64 " bytes: %m", len);
		return;
	}
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		check(0, "mmap of the memfd: %m");
		return;
	}
	fill(map, 0, len, 5); /* also faults every page in */

	for (int d = 0; d < 2; d++) {
		mean = copy_gbps(d, map, dptr, len, &best);
		pg[d][0] = mean;
		pg[d][1] = best;
	}
	check(mismatches(map, 0, len, 5) == 0,
	      "pageable HtoD then DtoH round trip of %" PRIu64 " MiB is intact", len >> 20);

	{
		double t = now_us();

		r = cu_host_register(map, len, ordinal, false);
		check(r == 0, "cu_host_register of the %" PRIu64 " MiB memfd mapping (%.0f us)%s%s",
		      len >> 20, now_us() - t, r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
	}
	if (r == 0) {
		int dev = -1;

		check(cu_pointer_device((uintptr_t)map, &dev) == 0,
		      "registered host memory still probes as host memory");
		fill(map, 0, len, 6);
		for (int d = 0; d < 2; d++) {
			mean = copy_gbps(d, map, dptr, len, &best);
			pn[d][0] = mean;
			pn[d][1] = best;
		}
		check(mismatches(map, 0, len, 6) == 0,
		      "pinned HtoD then DtoH round trip of %" PRIu64 " MiB is intact", len >> 20);
		printf("bw   DtoH %3" PRIu64 " MiB  pageable %6.1f GB/s (best %6.1f)   "
		       "pinned %6.1f GB/s (best %6.1f)   x%.1f\n",
		       len >> 20, pg[1][0], pg[1][1], pn[1][0], pn[1][1], pn[1][0] / pg[1][0]);
		printf("bw   HtoD %3" PRIu64 " MiB  pageable %6.1f GB/s (best %6.1f)   "
		       "pinned %6.1f GB/s (best %6.1f)   x%.1f\n",
		       len >> 20, pg[0][0], pg[0][1], pn[0][0], pn[0][1], pn[0][0] / pg[0][0]);
		r = cu_host_unregister(map, ordinal);
		check(r == 0, "cu_host_unregister%s%s", r < 0 ? ": " : "",
		      r < 0 ? cu_last_error() : "");
	}
	munmap(map, len);
}

static void dmabuf_report(const char *what, int r, int fd, uint64_t base, uint64_t size)
{
	char link[128] = "?";
	char path[64];
	ssize_t n;
	int flags;

	if (r < 0) {
		printf("dmabuf %-22s FAILED %d (%s): %s\n", what, r, strerror(-r), cu_last_error());
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0)
		link[n] = 0;
	flags = fcntl(fd, F_GETFD);
	printf("dmabuf %-22s OK fd %d -> %s, base 0x%" PRIx64 " size %" PRIu64 "\n", what, fd, link,
	       base, size);
	check(flags >= 0 && (flags & FD_CLOEXEC), "dma-buf fd %d is close-on-exec", fd);
	close(fd);
}

static void expect_fail(int r, int want, const char *what)
{
	check(r < 0 && (want == 0 || r == want), "%s fails: %d (%s): %s", what, r,
	      r < 0 ? strerror(-r) : "succeeded", r < 0 ? cu_last_error() : "");
}

static int parent_main(int sock, int ordinal, pid_t child)
{
	struct cu_device_info info;
	struct cu_vmm_map vmm = {}, vmm2 = {};
	struct cu_ipc_map ipc = {}, ipc2 = {};
	struct cu_ctx_guard g = CU_CTX_GUARD_INIT;
	struct thread_check tc = {};
	struct msg hello = {}, done = { .kind = MSG_DONE };
	double t[N_TIMED], t0;
	CUcontext primary = NULL, ptr_ctx = (CUcontext)1;
	pthread_t thr;
	int vmm_fd = -1, dev = -1, n, n_done, r, status;
	uint64_t base, size;

	r = recv_msg(sock, &hello, &vmm_fd);
	if (r < 0 || hello.status < 0 || vmm_fd < 0) {
		check(0, "child's exports: %s (%s)", r < 0 ? strerror(-r) : "no fd", hello.error);
		return 1;
	}
	printf("child: VMM %" PRIu64 " bytes exported as fd "
	       "(cuMemExportToShareableHandle %.1f us), "
	       "cuMemAlloc %" PRIu64 " bytes (cuIpcGetMemHandle %.1f us)\n",
	       hello.vmm_size, hello.export_us, hello.ipc_size, hello.ipc_get_us);

	t0 = now_us();
	r = cu_load();
	check(r == 0, "cu_load (%.0f us)%s%s", now_us() - t0, r < 0 ? ": " : "",
	      r < 0 ? cu_last_error() : "");
	if (r < 0)
		return 1;
	cu = cu_get_ops();
	n = cu_device_count();
	check(n > ordinal, "cu_device_count = %d", n);
	for (int i = 0; i < n; i++) {
		r = cu_device_info(i, &info);
		check(r == 0, "cu_device_info(%d)%s%s", i, r < 0 ? ": " : "",
		      r < 0 ? cu_last_error() : "");
		if (r == 0)
			printf("gpu%d %s, pci %s, cc %d.%d, %.1f GiB, dma-buf %s, VMM %s, "
			       "VMM POSIX fd %s, GDR on VMM %s\n",
			       i, info.name, info.pci_bus_id, info.cc_major, info.cc_minor,
			       info.total_mem / 1073741824.0, info.dma_buf ? "yes" : "no",
			       info.vmm ? "yes" : "no", info.vmm_posix_fd ? "yes" : "no",
			       info.gdr_vmm ? "yes" : "no");
	}

	/* Context creation apart, so that the import timings are imports. */
	t0 = now_us();
	r = cu_primary_ctx_retain(ordinal);
	check(r == 0, "cu_primary_ctx_retain(%d) (%.0f us, creates the context)", ordinal,
	      now_us() - t0);
	{
		CUdevice d;

		/* The handle only, to compare with what the guard makes current. */
		if (cu->cuDeviceGet(&d, ordinal) == CUDA_SUCCESS &&
		    cu->cuDevicePrimaryCtxRetain(&primary, d) == CUDA_SUCCESS)
			cu->cuDevicePrimaryCtxRelease(d);
	}
	check(current_ctx() == NULL, "the main thread has no current context");

	/* ---- VMM fd import ---- */
	for (n_done = 0; n_done < N_TIMED; n_done++) {
		CUmemGenericAllocationHandle h;
		CUresult res;

		t0 = now_us();
		res = cu->cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)vmm_fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
		t[n_done] = now_us() - t0;
		if (res != CUDA_SUCCESS) {
			check(0, "bare cuMemImportFromShareableHandle: CUresult %d", res);
			break;
		}
		cu->cuMemRelease(h);
	}
	stats("bare cuMemImportFromShareableHandle", t, n_done);
	for (n_done = 0; n_done < N_TIMED; n_done++) {
		t0 = now_us();
		r = cu_vmm_import(&vmm_fd, 1, hello.vmm_size, 0, &vmm);
		t[n_done] = now_us() - t0;
		if (r < 0)
			break;
		cu_vmm_release(&vmm);
	}
	stats("cu_vmm_import (import+reserve+map+access)", t, n_done);
	r = cu_vmm_import(&vmm_fd, 1, hello.vmm_size, 0, &vmm);
	check(r == 0, "cu_vmm_import of %" PRIu64 " bytes at 0x%" PRIx64 " on device %d%s%s",
	      hello.vmm_size, vmm.dptr, vmm.device, r < 0 ? ": " : "",
	      r < 0 ? cu_last_error() : "");
	if (r < 0)
		goto out;

	r = cu->cuPointerGetAttribute(&ptr_ctx, CU_POINTER_ATTRIBUTE_CONTEXT, vmm.dptr);
	check(r == CUDA_SUCCESS && ptr_ctx == NULL,
	      "imported VMM pointer has no context (CU_POINTER_ATTRIBUTE_CONTEXT = %p, rc %d)",
	      (void *)ptr_ctx, r);
	/* The call before the check: check()'s arguments have no order. */
	r = cu_pointer_device(vmm.dptr, &dev);
	check(r == 1 && dev == ordinal, "cu_pointer_device(VMM) = %d, device %d", r, dev);
	check(cu_primary_ctx_refs(ordinal) == 2, "import holds a primary context retain (refs %u)",
	      cu_primary_ctx_refs(ordinal));
	r = cu_ctx_guard_enter(vmm.dptr + 4097, &g);
	check(r == 0 && current_ctx() == primary && g.primary == ordinal &&
		      cu_primary_ctx_refs(ordinal) == 3,
	      "guard on the context-less pointer pushes device %d's primary context", ordinal);
	cu_ctx_guard_exit(&g);
	check(current_ctx() == NULL && cu_primary_ctx_refs(ordinal) == 2,
	      "guard exit restores no context and drops its retain");
	t0 = now_us();
	for (int i = 0; i < 10000; i++) {
		cu_ctx_guard_enter(vmm.dptr, &g);
		cu_ctx_guard_exit(&g);
	}
	printf("time %-44s %8.3f us each\n", "context guard enter+exit (VMM pointer)",
	       (now_us() - t0) / 10000);

	tc.dptr = vmm.dptr;
	tc.primary = primary;
	pthread_create(&thr, NULL, guard_thread, &tc);
	pthread_join(thr, NULL);
	check(tc.ok_before && tc.ok_inside && tc.ok_after && tc.copy == 0,
	      "guard and copy on another thread (before %d, inside %d, after %d, copy %d)",
	      tc.ok_before, tc.ok_inside, tc.ok_after, tc.copy);

	check(read_and_compare(vmm.dptr, 4097, (1 << 20) + 3, 1) == 0,
	      "VMM: child's pattern read at offset 4097, length 1 MiB + 3");
	check(read_and_compare(vmm.dptr, 0, hello.vmm_size, 1) == 0,
	      "VMM: child's pattern read in full (%" PRIu64 " bytes)", hello.vmm_size);
	/* What the fd store keeps of a VMM region: the client's fd held in
	 * flight by a socket of its own (util/fdhold.h, daemon/mem/keep.c),
	 * which a next process peeks and imports again. */
	{
		struct cu_vmm_map again;
		int holder = -1, kept = -1;

		r = fdhold_make(vmm_fd, &holder);
		for (n_done = 0; r == 0 && n_done < N_TIMED; n_done++) {
			t0 = now_us();
			r = fdhold_peek(holder, &kept);
			t[n_done] = now_us() - t0;
			if (r == 0 && n_done + 1 < N_TIMED)
				kept = safe_close(kept);
		}
		stats("fdhold_peek (the fd store's copy)", t, n_done);
		check(r == 0 && fcntl(kept, F_GETFD) == FD_CLOEXEC,
		      "the export fd held in a socket and peeked back, close-on-exec%s%s",
		      r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
		if (r == 0) {
			r = cu_vmm_import(&kept, 1, hello.vmm_size, 0, &again);
			check(r == 0 && again.dptr != vmm.dptr &&
				      read_and_compare(again.dptr, 0, hello.vmm_size, 1) == 0,
			      "VMM: the held fd, imported again, maps the child's pattern%s%s",
			      r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
			if (r == 0)
				cu_vmm_release(&again);
		}
		safe_close(kept);
		safe_close(holder);
	}
	r = write_pattern(vmm.dptr, VMM_WRITE_AT, (3 << 20) + 7, 3);
	check(r == 0, "VMM: write at offset 32 MiB + 12345, length 3 MiB + 7%s%s",
	      r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
	check(read_and_compare(vmm.dptr, VMM_WRITE_AT, (3 << 20) + 7, 3) == 0,
	      "VMM: write reads back");
	r = ask_child(sock, REGION_VMM, VMM_WRITE_AT, (3 << 20) + 7, 3);
	check(r == 0, "VMM: the child sees the parent's write in its own mapping (%d)", r);

	/* ---- legacy IPC handle ---- */
	for (n_done = 0; n_done < N_TIMED; n_done++) {
		CUipcMemHandle h;
		CUcontext popped;
		CUdeviceptr p;
		CUresult res;

		memcpy(&h, hello.ipc_handle, sizeof(h));
		cu->cuCtxPushCurrent(primary);
		t0 = now_us();
		res = cu->cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
		t[n_done] = now_us() - t0;
		if (res == CUDA_SUCCESS)
			cu->cuIpcCloseMemHandle(p);
		cu->cuCtxPopCurrent(&popped);
		if (res != CUDA_SUCCESS) {
			check(0, "bare cuIpcOpenMemHandle: CUresult %d", res);
			break;
		}
	}
	stats("bare cuIpcOpenMemHandle", t, n_done);
	for (n_done = 0; n_done < N_TIMED; n_done++) {
		t0 = now_us();
		r = cu_ipc_open(hello.ipc_handle, ordinal, 0, &ipc);
		t[n_done] = now_us() - t0;
		if (r < 0)
			break;
		cu_ipc_close(&ipc);
	}
	stats("cu_ipc_open (open+range+device)", t, n_done);
	r = cu_ipc_open(hello.ipc_handle, ordinal, 0, &ipc);
	check(r == 0, "cu_ipc_open: 0x%" PRIx64 ", %" PRIu64 " bytes, device %d%s%s", ipc.dptr,
	      ipc.size, ipc.device, r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
	if (r < 0)
		goto out_vmm;
	check(ipc.size >= hello.ipc_size, "IPC allocation size %" PRIu64 " >= the child's %" PRIu64,
	      ipc.size, hello.ipc_size);
	r = cu->cuPointerGetAttribute(&ptr_ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ipc.dptr);
	check(r == CUDA_SUCCESS && ptr_ctx == primary,
	      "IPC pointer belongs to the primary context it was opened in");
	check(current_ctx() == NULL, "cu_ipc_open left no context current");
	check(read_and_compare(ipc.dptr, 333, (1 << 20) + 1, 2) == 0,
	      "IPC: child's pattern read at offset 333, length 1 MiB + 1");
	check(read_and_compare(ipc.dptr, 0, hello.ipc_size, 2) == 0,
	      "IPC: child's pattern read in full (%" PRIu64 " bytes)", hello.ipc_size);
	r = write_pattern(ipc.dptr, 777, (2 << 20) + 5, 4);
	check(r == 0, "IPC: write at offset 777, length 2 MiB + 5");
	r = ask_child(sock, REGION_IPC, 777, (2 << 20) + 5, 4);
	check(r == 0, "IPC: the child sees the parent's write in its own allocation (%d)", r);

	/* ---- device to device, VMM to IPC at odd offsets ---- */
	r = cu_copy_dtod(ipc.dptr + 4001, vmm.dptr + 4001, (1 << 20) + 9);
	check(r == 0, "DtoD: VMM+4001 -> IPC+4001, 1 MiB + 9%s%s", r < 0 ? ": " : "",
	      r < 0 ? cu_last_error() : "");
	check(read_and_compare(ipc.dptr, 4001, (1 << 20) + 9, 1) == 0,
	      "DtoD: the IPC allocation holds the VMM pattern");
	r = ask_child(sock, REGION_IPC, 4001, (1 << 20) + 9, 1);
	check(r == 0, "DtoD: the child sees it too (%d)", r);

	/* ---- the host-pointer probe ---- */
	t0 = now_us();
	for (int i = 0; i < 100000; i++)
		r = cu_pointer_device((uintptr_t)&hello, NULL);
	printf("time %-44s %8.3f us each\n", "cu_pointer_device(host pointer)",
	       (now_us() - t0) / 100000);
	check(r == 0, "a stack address probes as host memory");
	dev = -1;
	r = cu_pointer_device(ipc.dptr + 5, &dev);
	check(r == 1 && dev == ordinal, "cu_pointer_device(IPC) = %d, device %d", r, dev);
	r = cu_address_range(vmm.dptr + 4097, &base, &size);
	printf("     cu_address_range(VMM+4097) = %d: base 0x%" PRIx64 " size %" PRIu64 "%s%s\n", r,
	       r == 0 ? base : 0, r == 0 ? size : 0, r < 0 ? ": " : "",
	       r < 0 ? cu_last_error() : "");

	/* ---- dma-buf for the NICs, no RDMA device here ---- */
	{
		int fd = -1;

		r = cu_dmabuf_fd(vmm.dptr, vmm.size, &fd);
		dmabuf_report("VMM mapping", r, fd, vmm.dptr, vmm.size);
		r = cu_dmabuf_fd_for(vmm.dptr + 4097, &fd, &base, &size);
		dmabuf_report("allocation of VMM+4097", r, fd, base, size);
		r = cu_dmabuf_fd_for(ipc.dptr + 100, &fd, &base, &size);
		dmabuf_report("allocation of IPC+100", r, fd, base, size);
		/* Which lengths a legacy allocation takes, here and in the child. */
		for (int i = 0; i < 3; i++) {
			char what[64];

			snprintf(what, sizeof(what), "IPC base, %s", probe_names[i]);
			r = cu_dmabuf_fd(ipc.dptr, probe_len(ipc.size, i), &fd);
			dmabuf_report(what, r, fd, ipc.dptr, probe_len(ipc.size, i));
			printf("dmabuf %-22s in the child (own cuMemAlloc): CUresult %d\n",
			       probe_names[i], hello.own_dmabuf[i]);
		}
		r = cu_dmabuf_fd(vmm.dptr + (2 << 20), 2 << 20, &fd);
		dmabuf_report("VMM sub-range 2M+2M", r, fd, vmm.dptr + (2 << 20), 2 << 20);
	}

	/* ---- what a client can get wrong ---- */
	expect_fail(cu_vmm_import(&vmm_fd, 1, hello.vmm_size + 4096, 0, &vmm2), -EINVAL,
		    "VMM import with a size off the granularity");
	expect_fail(cu_vmm_import(&vmm_fd, 1, hello.vmm_size * 2, 0, &vmm2), 0,
		    "VMM import with a size beyond the allocation");
	{
		unsigned char junk[CU_IPC_HANDLE_SIZE];

		memset(junk, 0x5a, sizeof(junk));
		expect_fail(cu_ipc_open(junk, ordinal, 0, &ipc2), 0,
			    "cu_ipc_open of a junk handle");
	}
	{
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

		expect_fail(cu_vmm_import(&devnull, 1, hello.vmm_size, 0, &vmm2), 0,
			    "VMM import of /dev/null");
		safe_close(devnull);
	}
	expect_fail(cu_copy_dtoh(&hello, (uintptr_t)&dev, 4), -EINVAL, "DtoH from a host pointer");
	expect_fail(cu_ipc_open(hello.ipc_handle, 99, 0, &ipc2), -ENODEV,
		    "cu_ipc_open on device 99");
	check(cu_primary_ctx_refs(ordinal) == 3,
	      "failed imports leaked no context retain (refs %u)", cu_primary_ctx_refs(ordinal));

	/* ---- pinned versus pageable ---- */
	bandwidth(vmm.dptr, MIN(hello.vmm_size, VMM_SIZE), ordinal);

	r = cu_ipc_close(&ipc);
	check(r == 0, "cu_ipc_close%s%s", r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
out_vmm:
	r = cu_vmm_release(&vmm);
	check(r == 0, "cu_vmm_release%s%s", r < 0 ? ": " : "", r < 0 ? cu_last_error() : "");
	check(cu_primary_ctx_refs(ordinal) == 1, "only the explicit retain is left (refs %u)",
	      cu_primary_ctx_refs(ordinal));
	check(cu_primary_ctx_release(ordinal) == 0 && cu_primary_ctx_refs(ordinal) == 0,
	      "cu_primary_ctx_release");
	expect_fail(cu_primary_ctx_release(ordinal), -EINVAL, "an unbalanced release");
out:
	safe_close(vmm_fd);
	send_msg(sock, &done, -1);
	if (waitpid(child, &status, 0) == child)
		check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited cleanly (%#x)",
		      status);
	return 0;
}

int main(int argc, char **argv)
{
	int sv[2], ordinal = 0, opt;
	pid_t pid;

	while ((opt = getopt(argc, argv, "d:v")) != -1) {
		switch (opt) {
		case 'd':
			ordinal = (int)strtol(optarg, NULL, 10);
			break;
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		default:
			fprintf(stderr, "usage: %s [-d ORDINAL] [-v]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(240);

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		return 1;
	}
	/* Fork before this process touches CUDA. */
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(child_main(sv[1], ordinal));
	}
	close(sv[1]);
	parent_main(sv[0], ordinal, pid);
	close(sv[0]);
	printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
	return failures ? 1 : 0;
}
