/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU benchmarks, each beside its anchor measured in the same run (on a GPU
 * machine):
 *
 * - Host↔GPU Copy through the daemon, 4 KiB to 1 GiB, beside bare cuMemcpy
 *   between the same host buffer (a memfd mapping, pageable, then
 *   cuMemHostRegister'ed) and the same device memory, beside the floor
 *   of a call: the bare copy plus one Ping round trip, and beside the same
 *   pinned copy served by a thread on a socket request.
 * - The driver calls a daemon Copy makes, each timed alone.
 * - GPU0↔GPU1 Copy through the daemon, 1 MiB to 1 GiB, beside bare
 *   cuMemcpyPeer and cuMemcpyDtoD between the same two VMM allocations
 *   (skipped, with the reason, on a machine with one GPU).
 * - Import latency of a VMM fd and of a legacy IPC handle through the daemon
 *   (Register + Unregister) beside the bare driver calls, and beside those
 *   calls with what the daemon asks besides, after 500 us asleep (as a
 *   daemon's thread is) and after 500 us spinning (the same time passes,
 *   the CPU stays busy), from a thread with no current context, with 1 GiB
 *   page-locked in the process, and in another process (the daemon's case).
 * - A thread's wake-up from a condition variable after 500 us and 2 ms
 *   asleep: what a pooled import pays twice besides its work.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"
#include "daemon/gpu/cuda.h"
#include "util/sockio.h"

#if HAVE_CUDA_H
#include "daemon/gpu/cuda-ops.h"

#define BIG (1ULL << 30)
#define ROUNDS 20

static const struct cu_ops *cu;
/* The import floors' child process (spawn_import_child()). */
static int to_child[2], from_child[2];
static pid_t ipc_child;
static struct bench_args args = { .seconds = 1.0 };
static char daemon_path[128];
static pid_t daemon_pid;

/* exit() anywhere must not leave the daemon holding our stdout open. */
static void stop_daemon(void)
{
	if (daemon_pid > 0)
		bench_stop(daemon_pid);
	daemon_pid = 0;
}

#define CU_OK(call)                                                                 \
	do {                                                                        \
		CUresult _r = (call);                                               \
		if (_r != CUDA_SUCCESS) {                                           \
			fprintf(stderr, "bench-gpu: %s: CUresult %d\n", #call, _r); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

static CUdeviceptr vmm_alloc_on(int dev, size_t size, int *ret_fd,
				CUmemGenericAllocationHandle *ret_h)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { CU_MEM_LOCATION_TYPE_DEVICE, dev },
		.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
	};
	CUmemAccessDesc access = { .location = prop.location,
				   .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUdeviceptr p;

	CU_OK(cu->cuMemCreate(ret_h, size, &prop, 0));
	CU_OK(cu->cuMemAddressReserve(&p, size, 0, 0, 0));
	CU_OK(cu->cuMemMap(p, size, 0, *ret_h, 0));
	CU_OK(cu->cuMemSetAccess(p, size, &access, 1));
	CU_OK(cu->cuMemExportToShareableHandle(ret_fd, *ret_h,
					       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	return p;
}

static CUdeviceptr vmm_alloc(size_t size, int *ret_fd, CUmemGenericAllocationHandle *ret_h)
{
	return vmm_alloc_on(0, size, ret_fd, ret_h);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* Repeats one copy for args.seconds (at least 3 times); bytes per ns. */
static double timed(int dir_htod, void *host, CUdeviceptr dev, size_t size)
{
	uint64_t t0 = bench_now_ns(), t, n = 0;

	do {
		if (dir_htod)
			CU_OK(cu->cuMemcpyHtoD(dev, host, size));
		else
			CU_OK(cu->cuMemcpyDtoH(host, dev, size));
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	return bench_gbps(size * n, t);
}

static double timed_daemon(struct rdmamem_client *c, const struct rdmamem_copy *cp)
{
	uint64_t t0 = bench_now_ns(), t, n = 0;

	do {
		if (rdmamem_copy(c, cp) < 0) {
			fprintf(stderr, "bench-gpu: %s\n", rdmamem_client_error_message(c));
			exit(1);
		}
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	return bench_gbps(cp->length * n, t);
}

/* The daemon's Ping round trip, p50 of 2000, microseconds. */
static double ping_p50_us(struct rdmamem_client *c)
{
	static double t[2000];

	for (int i = 0; i < 2000; i++) {
		uint64_t t0 = bench_now_ns();

		if (rdmamem_ping(c) < 0)
			exit(1);
		t[i] = (bench_now_ns() - t0) / 1e3;
	}
	return median(t, 2000);
}

/*
 * The floor of a served copy: a thread of this process answers a request
 * on a socket by making the bare pinned copy, as a server that added
 * nothing else would. Beside the copy it pays the server's wake-up on the
 * request and the client's on the answer, after sleeping through the copy:
 * a Ping is measured back to back, with shallower sleeps, so bare + Ping
 * leaves those out.
 */
struct served {
	int fd;
	void *host;
	CUdeviceptr dev;
	CUcontext ctx;
};

struct served_req {
	uint64_t size; /* 0: stop */
	int htod;
};

static void *serve_copies(void *p)
{
	const struct served *s = p;
	struct served_req q;
	char ok = 1;

	CU_OK(cu->cuCtxSetCurrent(s->ctx));
	while (read(s->fd, &q, sizeof(q)) == sizeof(q) && q.size) {
		if (q.htod)
			CU_OK(cu->cuMemcpyHtoD(s->dev, s->host, q.size));
		else
			CU_OK(cu->cuMemcpyDtoH(s->host, s->dev, q.size));
		if (write(s->fd, &ok, 1) != 1)
			break;
	}
	return NULL;
}

/* One copy asked of the serving thread for args.seconds (at least 3
 * times); bytes per ns. */
static double timed_served(int fd, int htod, size_t size)
{
	struct served_req q = { .size = size, .htod = htod };
	uint64_t t0 = bench_now_ns(), t, n = 0;
	char ok;

	do {
		if (write(fd, &q, sizeof(q)) != sizeof(q) || read(fd, &ok, 1) != 1) {
			perror("bench-gpu: the serving thread");
			exit(1);
		}
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	return bench_gbps(size * n, t);
}

/* The served floor at each size, both ways, with host page-locked. */
static void served_rates(void *host, CUdeviceptr dev, const size_t *sizes, size_t n,
			 double (*rates)[n])
{
	struct served s = { .host = host, .dev = dev };
	struct served_req stop = {};
	pthread_t th;
	int sv[2];

	CU_OK(cu->cuCtxGetCurrent(&s.ctx));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("bench-gpu: socketpair");
		exit(1);
	}
	s.fd = sv[1];
	if (pthread_create(&th, NULL, serve_copies, &s) != 0)
		exit(1);
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 2; d++)
			rates[d][i] = timed_served(sv[0], d == 0, sizes[i]);
	if (write(sv[0], &stop, sizeof(stop)) != sizeof(stop))
		exit(1);
	pthread_join(th, NULL);
	close(sv[0]);
	close(sv[1]);
}

/* The host memfd and the whole VMM allocation as regions of c's. */
static void register_both(struct rdmamem_client *c, int hfd, int vfd, uint64_t *h, uint64_t *v)
{
	if (rdmamem_register(c, hfd, 0, 0, h) < 0 ||
	    rdmamem_register_cuda_vmm(c, vfd, BIG, 0, 0, v) < 0) {
		fprintf(stderr, "bench-gpu: register: %s\n", rdmamem_client_error_message(c));
		exit(1);
	}
}

/* The daemon's Copy between regions h (host) and v (GPU) at each of the n
 * sizes, both ways: GB/s into rates[direction][size]. */
static void daemon_copy_rates(struct rdmamem_client *c, uint64_t h, uint64_t v, const size_t *sizes,
			      size_t n, double (*rates)[n])
{
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 2; d++) {
			struct rdmamem_copy cp = {
				.from_region = d == 0 ? h : v,
				.to_region = d == 0 ? v : h,
				.length = sizes[i],
				.mode = RDMAMEM_LOCK_EXCLUSIVE,
			};

			/* The first Copy page-locks the daemon's mapping. */
			if (i == 0 && rdmamem_copy(c, &cp) < 0)
				exit(1);
			rates[d][i] = timed_daemon(c, &cp);
		}
}

/* A second daemon beside the benchmark's, started with extra options, on a
 * socket of its own (name); its pid, and a client of it in *ret. */
static pid_t second_daemon(const char *name, const char *const *extra, struct rdmamem_client **ret)
{
	char path[160];
	pid_t d;

	snprintf(path, sizeof(path), "%s/%s.sock", bench_dir(), name);
	d = bench_daemon_start(args.daemon, path, -1, extra);
	if (rdmamem_client_connect(path, ret) < 0)
		exit(1);
	return d;
}

/*
 * Rows first .. first + LOOP_BOUND_ROWS - 1 of the Copy table (the sizes
 * around loop-work-usec) again, through a second daemon that runs no copy
 * over 20 us on its loop (the bound before it became a setting of 40 us):
 * what the loop saves against the pool's round trip, in the same run.
 */
#define LOOP_BOUND_ROWS 2

static void loop_bound_rows(int hfd, int vfd, const size_t *sizes, size_t n, size_t first,
			    double (*pinned)[n], double (*dmn)[n])
{
	static const char *const bound20[] = { "--loop-work-usec=20", "--max-pinned-bytes-per-uid",
					       "17179869184", NULL };
	double rates[2][LOOP_BOUND_ROWS];
	struct rdmamem_client *c2 = NULL;
	char label[24];
	uint64_t h, v;
	pid_t d2 = second_daemon("bound20", bound20, &c2);

	register_both(c2, hfd, vfd, &h, &v);
	daemon_copy_rates(c2, h, v, sizes + first, LOOP_BOUND_ROWS, rates);
	printf("\nthe same rows through a second daemon with --loop-work-usec=20 (default 40): "
	       "GB/s, of bare pinned, and the default daemon's above\n");
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < LOOP_BOUND_ROWS; i++) {
			size_t row = first + i;

			printf("%-6s %10s %44.2f %9.1f %10.2f   (default daemon %.2f)\n",
			       d == 0 ? "HtoD" : "DtoH", bench_size_label(sizes[row], label),
			       rates[d][i], sizes[row] / rates[d][i] / 1e3,
			       rates[d][i] / pinned[d][row], dmn[d][row] / pinned[d][row]);
		}
	rdmamem_client_close(c2);
	bench_stop(d2);
}

static void bench_copies(struct rdmamem_client *c, void *host, int hfd, CUdeviceptr dev, int vfd)
{
	static const size_t sizes[] = { 4096, 65536, 1 << 20, 16 << 20, 256 << 20, BIG };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	double pageable[2][N], pinned[2][N], served[2][N], daemon[2][N], ping_us;
	uint64_t h, v, t0, cold;

	t0 = bench_now_ns();
	register_both(c, hfd, vfd, &h, &v);
	cold = bench_now_ns() - t0;
	ping_us = ping_p50_us(c);
	for (size_t i = 0; i < N; i++)
		for (int d = 0; d < 2; d++)
			pageable[d][i] = timed(d == 0, host, dev, sizes[i]);
	CU_OK(cu->cuMemHostRegister(host, BIG, CU_MEMHOSTREGISTER_PORTABLE));
	for (size_t i = 0; i < N; i++)
		for (int d = 0; d < 2; d++)
			pinned[d][i] = timed(d == 0, host, dev, sizes[i]);
	served_rates(host, dev, sizes, N, served);
	CU_OK(cu->cuMemHostUnregister(host));
	daemon_copy_rates(c, h, v, sizes, N, daemon);

	printf("first GPU import of the daemon (loads libcuda, cuInit, creates the primary "
	       "context): %.1f ms\n\n",
	       cold / 1e6);
	printf("== Host<->GPU Copy through rdmamemd (GB/s = 10^9 B/s), %.1f s per cell\n",
	       args.seconds);
	printf("anchor = bare cuMemcpy between the same memfd mapping and device memory, in this "
	       "process\n\n");
	printf("floor = the bare pinned copy and one Ping (p50 %.1f us, same run) in turn: what a call\n"
	       "that adds nothing but its round trip would reach\n",
	       ping_us);
	printf("served = the bare pinned copy made by a thread of this process on a socket request,\n"
	       "answered when done: the floor with its two wake-ups after real sleeps, of pinned; the\n"
	       "last column is the daemon's rate over the served one\n\n");
	printf("%-6s %-9s %14s %14s %14s %9s %10s %10s %9s %7s %10s\n", "dir", "size",
	       "bare pageable", "bare pinned", "rdmamemd Copy", "us/Copy", "vs pinned",
	       "vs pageable", "floor", "served", "vs served");
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < N; i++) {
			double bare_us = sizes[i] / pinned[d][i] / 1e3;
			char label[24];

			printf("%-6s %10s %14.2f %14.2f %14.2f %9.1f %10.2f %10.2f %9.2f %7.2f %10.2f\n",
			       d == 0 ? "HtoD" : "DtoH", bench_size_label(sizes[i], label),
			       pageable[d][i], pinned[d][i], daemon[d][i],
			       sizes[i] / daemon[d][i] / 1e3, daemon[d][i] / pinned[d][i],
			       daemon[d][i] / pageable[d][i], bare_us / (bare_us + ping_us),
			       served[d][i] / pinned[d][i], daemon[d][i] / served[d][i]);
		}
	/* 64 KiB and 1 MiB: rows 1 and 2. */
	loop_bound_rows(hfd, vfd, sizes, N, 1, pinned, daemon);
	/* Both stay registered: their import keeps the GPU's primary context,
	 * so the import timings below are those of a device in use. */
}

/* ---- GPU0 <-> GPU1 ---- */

#define N_X2 5

static CUcontext ctxs[2];

/* Waits for both GPUs: a peer copy may return before its bytes land. */
static void sync_both(void)
{
	for (int d = 1; d >= 0; d--) {
		CU_OK(cu->cuCtxSetCurrent(ctxs[d]));
		CU_OK(cu->cuCtxSynchronize());
	}
}

/* Bare copies from src (on GPU from) to dst, repeated for args.seconds (at
 * least 3 times), each waited for as the daemon waits; bytes per ns. */
static double timed_x2(bool peer, int from, CUdeviceptr dst, CUdeviceptr src, size_t size)
{
	uint64_t t0 = bench_now_ns(), t, n = 0;

	do {
		if (peer) {
			CU_OK(cu->cuMemcpyPeer(dst, ctxs[1 - from], src, ctxs[from], size));
		} else {
			/* Unified addressing: issued in the source GPU's context. */
			CU_OK(cu->cuCtxSetCurrent(ctxs[from]));
			CU_OK(cu->cuMemcpyDtoD(dst, src, size));
		}
		sync_both();
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	return bench_gbps(size * n, t);
}

/*
 * Two 1 GiB VMM allocations, one per GPU, registered with the daemon; this
 * process maps each for both GPUs and enables peer access both ways where
 * the GPUs allow it (as the daemon does), so the bare copies take the same
 * path as the daemon's.
 */
static void bench_two_gpus(struct rdmamem_client *c)
{
	static const size_t sizes[N_X2] = { 1 << 20, 16 << 20, 64 << 20, 256 << 20, BIG };
	double bare_peer[2][N_X2], bare_dtod[2][N_X2], daemon[2][N_X2];
	CUmemGenericAllocationHandle h[2];
	CUdeviceptr p[2];
	uint64_t id[2];
	int n = cu_device_count(), can[2] = { 0, 0 }, fd[2];
	bool both;

	if (n < 2) {
		printf("\n== GPU0<->GPU1 Copy: SKIPPED: this machine has %d GPU(s)\n", n);
		return;
	}
	ctxs[0] = NULL;
	CU_OK(cu->cuCtxGetCurrent(&ctxs[0]));
	for (int d = 0; d < 2; d++) {
		CUdevice dev, peer;

		CU_OK(cu->cuDeviceGet(&dev, d));
		CU_OK(cu->cuDeviceGet(&peer, 1 - d));
		if (d == 1)
			CU_OK(cu->cuDevicePrimaryCtxRetain(&ctxs[1], dev));
		CU_OK(cu->cuDeviceCanAccessPeer(&can[d], dev, peer));
	}
	both = can[0] && can[1];
	for (int d = 0; d < 2; d++) {
		CUmemAccessDesc access = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 1 - d },
					   .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
		CUresult res;

		CU_OK(cu->cuCtxSetCurrent(ctxs[d]));
		p[d] = vmm_alloc_on(d, BIG, &fd[d], &h[d]);
		if (both) {
			CU_OK(cu->cuMemSetAccess(p[d], BIG, &access, 1));
			res = cu->cuCtxEnablePeerAccess(ctxs[1 - d], 0);
			if (res != CUDA_SUCCESS && res != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
				CU_OK(res);
		}
		if (rdmamem_register_cuda_vmm(c, fd[d], BIG, 0, 0, &id[d]) < 0) {
			fprintf(stderr, "bench-gpu: register: %s\n",
				rdmamem_client_error_message(c));
			exit(1);
		}
		close(fd[d]);
	}
	for (int from = 0; from < 2; from++)
		for (size_t i = 0; i < N_X2; i++) {
			struct rdmamem_copy cp = {
				.from_region = id[from],
				.to_region = id[1 - from],
				.length = sizes[i],
				.mode = RDMAMEM_LOCK_EXCLUSIVE,
			};

			bare_peer[from][i] = timed_x2(true, from, p[1 - from], p[from], sizes[i]);
			bare_dtod[from][i] = timed_x2(false, from, p[1 - from], p[from], sizes[i]);
			daemon[from][i] = timed_daemon(c, &cp);
		}
	CU_OK(cu->cuCtxSetCurrent(ctxs[0]));

	printf("\n== GPU0<->GPU1 Copy through rdmamemd (GB/s), %.1f s per cell\n", args.seconds);
	printf("cuDeviceCanAccessPeer: GPU 0 -> 1 %d, GPU 1 -> 0 %d: the daemon copies %s "
	       "(ListGpus' copy_path; RDMAMEMD_CUDA_PEER_COPIES=off stages)\n",
	       can[0], can[1], both ? "peer to peer" : "staged through host memory");
	printf("anchors = bare cuMemcpyPeer and cuMemcpyDtoD between the same two VMM "
	       "allocations, in this process, each waited for on both GPUs; goal: rdmamemd >= "
	       "0.95 of cuMemcpyPeer from 64 MiB on\n\n");
	printf("%-6s %-9s %14s %14s %14s %10s %10s\n", "dir", "size", "bare Peer", "bare DtoD",
	       "rdmamemd Copy", "vs Peer", "vs DtoD");
	for (int from = 0; from < 2; from++)
		for (size_t i = 0; i < N_X2; i++)
			printf("%-6s %6zu MiB %14.2f %14.2f %14.2f %10.2f %10.2f\n",
			       from == 0 ? "0->1" : "1->0", sizes[i] >> 20, bare_peer[from][i],
			       bare_dtod[from][i], daemon[from][i],
			       daemon[from][i] / bare_peer[from][i],
			       daemon[from][i] / bare_dtod[from][i]);
	for (int d = 0; d < 2; d++)
		rdmamem_unregister(c, id[d]);
}

/*
 * What one daemon Copy pays the driver besides the bytes, each call timed
 * alone in this process (median of DRIVER_ROUNDS, microseconds): the
 * context lookup and push every copy makes, the wait after it, and the
 * copies themselves at 4 KiB and 1 MiB from page-locked memory.
 */
#define DRIVER_ROUNDS 2000

static void bench_driver_calls(void *host, CUdeviceptr dev)
{
	static double t[DRIVER_ROUNDS];
	static const char *const names[] = {
		"cuPointerGetAttribute(CONTEXT)",   "cuPointerGetAttribute(DEVICE_ORDINAL)",
		"cuDevicePrimaryCtxRetain+Release", "cuCtxPushCurrent+PopCurrent",
		"cuCtxSynchronize (idle)",          "cuMemcpyHtoD 4 KiB (pinned)",
		"cuMemcpyHtoD 1 MiB (pinned)",      "cuMemcpyDtoH 1 MiB (pinned)",
	};
	CUcontext ctx, pctx;
	CUdevice device;
	int ordinal;

	CU_OK(cu->cuCtxGetCurrent(&ctx));
	CU_OK(cu->cuCtxGetDevice(&device));
	CU_OK(cu->cuMemHostRegister(host, 1 << 20, CU_MEMHOSTREGISTER_PORTABLE));
	printf("\n== Driver calls a daemon Copy makes, alone in this process (median of %d, "
	       "microseconds)\n\n",
	       DRIVER_ROUNDS);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		for (int i = 0; i < DRIVER_ROUNDS; i++) {
			uint64_t t0 = bench_now_ns();

			switch (k) {
			case 0:
				CU_OK(cu->cuPointerGetAttribute(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT,
								dev));
				break;
			case 1:
				CU_OK(cu->cuPointerGetAttribute(&ordinal,
								CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
								dev));
				break;
			case 2:
				CU_OK(cu->cuDevicePrimaryCtxRetain(&pctx, device));
				CU_OK(cu->cuDevicePrimaryCtxRelease(device));
				break;
			case 3:
				CU_OK(cu->cuCtxPushCurrent(ctx));
				CU_OK(cu->cuCtxPopCurrent(&pctx));
				break;
			case 4:
				CU_OK(cu->cuCtxSynchronize());
				break;
			case 5:
				CU_OK(cu->cuMemcpyHtoD(dev, host, 4096));
				break;
			case 6:
				CU_OK(cu->cuMemcpyHtoD(dev, host, 1 << 20));
				break;
			default:
				CU_OK(cu->cuMemcpyDtoH(host, dev, 1 << 20));
				break;
			}
			t[i] = (bench_now_ns() - t0) / 1e3;
		}
		printf("%-40s %8.2f\n", names[k], median(t, DRIVER_ROUNDS));
	}
	CU_OK(cu->cuMemHostUnregister(host));
}

/*
 * What a round does before its timed calls: nothing, sleep pause_us (as a
 * daemon's pool thread sleeps between jobs) or spin that long on the CPU.
 * Sleeping and spinning let the same time pass; only sleeping lets the CPU
 * idle and other work take its caches, so the two tell the thread's cold
 * start from whatever the driver does as time passes.
 */
enum pause { PAUSE_NONE, PAUSE_SLEEP, PAUSE_SPIN };

#define PAUSE_US 500

/* Read and write access for GPU 0: what every import here maps. */
static const CUmemAccessDesc gpu0_rw = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
					 .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

static void pause_before(enum pause how)
{
	uint64_t until = bench_now_ns() + PAUSE_US * 1000ULL;

	if (how == PAUSE_SLEEP)
		usleep(PAUSE_US);
	else if (how == PAUSE_SPIN)
		while (bench_now_ns() < until)
			__asm__ volatile("" ::: "memory");
}

/* A 2 MiB VMM allocation imported from an fd and mapped for GPU 0. */
struct vmm_map {
	CUmemGenericAllocationHandle h;
	CUdeviceptr p;
	bool daemon_calls;
};

/* The bare import of fd into *m; daemon_calls adds what the daemon's
 * import asks besides (the allocation's properties and granularity, the
 * primary context's retain, a reserve aligned to it). */
static void vmm_map(int fd, bool daemon_calls, struct vmm_map *m)
{
	CUmemAllocationProp prop = {};
	CUcontext pctx;
	size_t gran = 0;

	m->daemon_calls = daemon_calls;
	CU_OK(cu->cuMemImportFromShareableHandle(&m->h, (void *)(uintptr_t)fd,
						 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	if (daemon_calls) {
		CU_OK(cu->cuMemGetAllocationPropertiesFromHandle(&prop, m->h));
		CU_OK(cu->cuMemGetAllocationGranularity(&gran, &prop,
							CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		CU_OK(cu->cuDevicePrimaryCtxRetain(&pctx, 0));
	}
	CU_OK(cu->cuMemAddressReserve(&m->p, 2 << 20, gran, 0, 0));
	CU_OK(cu->cuMemMap(m->p, 2 << 20, 0, m->h, 0));
	CU_OK(cu->cuMemSetAccess(m->p, 2 << 20, &gpu0_rw, 1));
}

static void vmm_unmap(const struct vmm_map *m)
{
	CU_OK(cu->cuMemUnmap(m->p, 2 << 20));
	CU_OK(cu->cuMemAddressFree(m->p, 2 << 20));
	CU_OK(cu->cuMemRelease(m->h));
	if (m->daemon_calls)
		CU_OK(cu->cuDevicePrimaryCtxRelease(0));
}

/* vmm_map() of vfd, timed ROUNDS times into t. */
static void vmm_bare_rounds(int vfd, bool daemon_calls, double *t, enum pause pause)
{
	for (int i = 0; i < ROUNDS; i++) {
		struct vmm_map m;
		uint64_t t0;

		pause_before(pause);
		t0 = bench_now_ns();
		vmm_map(vfd, daemon_calls, &m);
		t[i] = (bench_now_ns() - t0) / 1e3;
		vmm_unmap(&m);
	}
}

struct vmm_thread_args {
	int vfd;
	double *t;
};

/* The daemon imports on a pool thread with no current context. */
static void *vmm_bare_thread(void *p)
{
	struct vmm_thread_args *a = p;

	vmm_bare_rounds(a->vfd, true, a->t, PAUSE_NONE);
	return NULL;
}

/* Floors for the daemon's import: its calls in this process back to back,
 * after PAUSE_US asleep and spinning, from a thread with no context
 * current, with 1 GiB of host memory page-locked here as the daemon has
 * after the copies above; then in the child process, as the daemon is. */
static void vmm_floors(int vfd, void *host)
{
	double t[ROUNDS];
	struct vmm_thread_args a = { vfd, t };
	pthread_t th;

	vmm_bare_rounds(vfd, true, t, PAUSE_NONE);
	printf("%-10s %34.1f   (bare + the daemon's other calls)\n", "VMM fd", median(t, ROUNDS));
	vmm_bare_rounds(vfd, true, t, PAUSE_SLEEP);
	printf("%-10s %34.1f   (same, each after %d us asleep, as a daemon's thread is)\n",
	       "VMM fd", median(t, ROUNDS), PAUSE_US);
	vmm_bare_rounds(vfd, true, t, PAUSE_SPIN);
	printf("%-10s %34.1f   (same, each after %d us spinning on the CPU)\n", "VMM fd",
	       median(t, ROUNDS), PAUSE_US);
	if (pthread_create(&th, NULL, vmm_bare_thread, &a) == 0 && pthread_join(th, NULL) == 0)
		printf("%-10s %34.1f   (same, on a thread with no current context)\n", "VMM fd",
		       median(t, ROUNDS));
	CU_OK(cu->cuMemHostRegister(host, BIG, CU_MEMHOSTREGISTER_PORTABLE));
	vmm_bare_rounds(vfd, true, t, PAUSE_NONE);
	printf("%-10s %34.1f   (same, current context, 1 GiB page-locked here)\n", "VMM fd",
	       median(t, ROUNDS));
	CU_OK(cu->cuMemHostUnregister(host));
	{
		double child[2];
		char tag = 'V';

		if (sockio_send(to_child[1], &tag, 1, &vfd, 1, 0) != 1 ||
		    read(from_child[0], child, sizeof(child)) != sizeof(child))
			exit(1);
		printf("%-10s %34.1f   (same, in another process: the daemon's case)\n", "VMM fd",
		       child[0]);
		printf("%-10s %34.1f   (same, another process, each after %d us asleep)\n",
		       "VMM fd", child[1], PAUSE_US);
	}
	{
		double served[ROUNDS];
		char tag = 'S';

		for (int i = 0; i < ROUNDS; i++) {
			uint64_t t0 = bench_now_ns();

			if (sockio_send(to_child[1], &tag, 1, &vfd, 1, 0) != 1 ||
			    read(from_child[0], &tag, 1) != 1)
				exit(1);
			served[i] = (bench_now_ns() - t0) / 1e3;
		}
		tag = 'E';
		if (write(to_child[1], &tag, 1) != 1)
			exit(1);
		printf("%-10s %34.1f   (same, served: another process's thread woken by the fd on a "
		       "socket,\n%-10s %34s    answering when mapped, each held: the held row's floor)\n",
		       "VMM fd", median(served, ROUNDS), "", "");
	}
}

/*
 * A thread's wake-up: how long a thread asleep on a condition variable
 * takes to run once signalled by a thread that itself slept pause_us. Each
 * pooled job pays it twice (a pool thread's wake, then the loop's), beside
 * the round trip's own; the bare driver calls, back to back on one thread,
 * pay it never.
 */
struct wake {
	pthread_mutex_t lock;
	pthread_cond_t go, woke;
	unsigned round, seen;
	uint64_t signalled_ns, woke_ns;
	bool quit;
};

static void *wake_waiter(void *p)
{
	struct wake *w = p;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (w->seen == w->round && !w->quit)
			pthread_cond_wait(&w->go, &w->lock);
		if (w->quit)
			break;
		w->woke_ns = bench_now_ns();
		w->seen = w->round;
		pthread_cond_signal(&w->woke);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static double wake_us(unsigned pause_us)
{
	enum { WAKE_ROUNDS = 100 };
	struct wake w = { .lock = PTHREAD_MUTEX_INITIALIZER,
			  .go = PTHREAD_COND_INITIALIZER,
			  .woke = PTHREAD_COND_INITIALIZER };
	double t[WAKE_ROUNDS];
	pthread_t th;

	if (pthread_create(&th, NULL, wake_waiter, &w) != 0)
		exit(1);
	for (int i = 0; i < WAKE_ROUNDS; i++) {
		usleep(pause_us);
		pthread_mutex_lock(&w.lock);
		w.signalled_ns = bench_now_ns();
		w.round++;
		pthread_cond_signal(&w.go);
		while (w.seen != w.round)
			pthread_cond_wait(&w.woke, &w.lock);
		t[i] = (w.woke_ns - w.signalled_ns) / 1e3;
		pthread_mutex_unlock(&w.lock);
	}
	pthread_mutex_lock(&w.lock);
	w.quit = true;
	pthread_cond_signal(&w.go);
	pthread_mutex_unlock(&w.lock);
	pthread_join(th, NULL);
	return median(t, WAKE_ROUNDS);
}

/* A Register of the 2 MiB VMM allocation vfd through c, timed: its id in
 * *id, microseconds returned; a refusal ends the benchmark. */
static double vmm_register_us(struct rdmamem_client *c, int vfd, uint64_t *id)
{
	uint64_t t0 = bench_now_ns();

	if (rdmamem_register_cuda_vmm(c, vfd, 2 << 20, 0, 0, id) < 0) {
		fprintf(stderr, "bench-gpu: %s\n", rdmamem_client_error_message(c));
		exit(1);
	}
	return (bench_now_ns() - t0) / 1e3;
}

/*
 * Prints where the daemon on socket made its GPU imports so far (the
 * metric rdmamemd_gpu_imports_total), through the rdmamemctl beside the
 * daemon's binary: on its loop, or on a pool thread.
 */
static void print_imports_where(const char *socket)
{
	char cmd[1024], line[256], dir[512];
	const char *slash = strrchr(args.daemon, '/');
	long loop = -1, pool = -1;
	FILE *p;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - args.daemon) : 1,
		 slash ? args.daemon : ".");
	snprintf(cmd, sizeof(cmd), "'%s/rdmamemctl' --socket '%s' metrics 2>/dev/null", dir,
		 socket);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p)) {
		sscanf(line, "rdmamemd_gpu_imports_total{on=\"loop\"} %ld", &loop);
		sscanf(line, "rdmamemd_gpu_imports_total{on=\"pool\"} %ld", &pool);
	}
	if (p)
		pclose(p);
	printf("%-10s imports made so far on the daemon's loop: %ld, on its pool: %ld "
	       "(rdmamemd_gpu_imports_total)\n",
	       "", loop, pool);
}

/* ROUNDS imports of vfd through c, each held until all are made (no release
 * beside the next in the daemon): their median, microseconds. */
static double vmm_held_us(struct rdmamem_client *c, int vfd)
{
	double t[ROUNDS];
	uint64_t held[ROUNDS];

	for (int i = 0; i < ROUNDS; i++)
		t[i] = vmm_register_us(c, vfd, &held[i]);
	for (int i = 0; i < ROUNDS; i++)
		rdmamem_unregister(c, held[i]);
	return median(t, ROUNDS);
}

/* A second daemon that makes every import on a pool thread, as rdmamemd
 * did before imports ran on its loop; the caller stops it. */
static pid_t pooled_daemon(struct rdmamem_client **ret)
{
	static const char *const pooled[] = { "--loop-import-usec=0", NULL };

	return second_daemon("pooled", pooled, ret);
}

/*
 * What the daemon's kept context saves: a second daemon that keeps none
 * (--gpu-context-linger-sec=0) and has no other import creates the GPU's
 * primary context at each Register and destroys it at each Unregister.
 * Few rounds: each takes a few hundred milliseconds.
 */
static void vmm_unkept_row(int vfd, double bare)
{
	enum { UNKEPT_ROUNDS = 5 };
	static const char *const unkept[] = { "--gpu-context-linger-sec=0", NULL };
	struct rdmamem_client *c2 = NULL;
	double t[UNKEPT_ROUNDS];
	pid_t d2 = second_daemon("unkept", unkept, &c2);

	for (int i = 0; i < UNKEPT_ROUNDS; i++) {
		uint64_t id;

		t[i] = vmm_register_us(c2, vfd, &id);
		rdmamem_unregister(c2, id);
		/* Its release (destroying the context) runs on the daemon's pool. */
		usleep(200000);
	}
	printf("%-10s %34.1f %24.1f %8.2f   (a daemon that keeps no context and holds no other "
	       "import:\n%-10s %34s %24s %8s    --gpu-context-linger-sec=0, median of %d)\n",
	       "VMM fd", bare, median(t, UNKEPT_ROUNDS), median(t, UNKEPT_ROUNDS) / bare, "", "",
	       "", "", UNKEPT_ROUNDS);
	rdmamem_client_close(c2);
	bench_stop(d2);
}

/* A map must cover the whole allocation (driver 580: CUDA_ERROR_NOT_SUPPORTED
 * otherwise), so imports are timed on an allocation of their own. */
static void bench_vmm_import(struct rdmamem_client *c, void *host)
{
	CUmemGenericAllocationHandle own;
	double bare[ROUNDS], daemon[ROUNDS], held, held_pooled;
	struct rdmamem_client *c2 = NULL;
	pid_t d2;
	int vfd;

	vmm_alloc(2 << 20, &vfd, &own);

	vmm_bare_rounds(vfd, false, bare, PAUSE_NONE);
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t id;

		daemon[i] = vmm_register_us(c, vfd, &id);
		rdmamem_unregister(c, id);
	}
	/* The same imports with no release of the previous one running beside
	 * them in the daemon, as the bare loop has none in its timed part;
	 * then through a daemon that imports on its pool alone (its first
	 * imports teach it nothing: it never imports on its loop). */
	held = vmm_held_us(c, vfd);
	d2 = pooled_daemon(&c2);
	(void)vmm_held_us(c2, vfd);
	held_pooled = vmm_held_us(c2, vfd);
	rdmamem_client_close(c2);
	bench_stop(d2);
	printf("\n== Import latency (median of %d, microseconds), with another import keeping "
	       "the GPU's primary context\n   (or the daemon keeping it between regions: "
	       "--gpu-context-linger-sec, 30 s by default)\n\n",
	       ROUNDS);
	printf("%-10s %34s %24s %8s\n", "handle", "bare (import+reserve+map+access)",
	       "rdmamemd Register", "ratio");
	printf("%-10s %34.1f %24.1f %8.2f\n", "VMM fd", median(bare, ROUNDS),
	       median(daemon, ROUNDS), median(daemon, ROUNDS) / median(bare, ROUNDS));
	printf("%-10s %34.1f %24.1f %8.2f   (each import held: no release beside it)\n", "VMM fd",
	       median(bare, ROUNDS), held, held / median(bare, ROUNDS));
	printf("%-10s %34.1f %24.1f %8.2f   (the same, a daemon importing on its pool alone:\n"
	       "%-10s %34s %24s %8s    --loop-import-usec=0)\n",
	       "VMM fd", median(bare, ROUNDS), held_pooled, held_pooled / median(bare, ROUNDS), "",
	       "", "", "");
	print_imports_where(daemon_path);
	vmm_unkept_row(vfd, median(bare, ROUNDS));
	vmm_floors(vfd, host);
}

/* The open of handle with the daemon's calls around it (cu_ipc_open():
 * the mapping's range and device); the mapping's address. */
static CUdeviceptr ipc_open_as_daemon(CUipcMemHandle handle)
{
	CUdeviceptr q, base;
	size_t size;
	int ordinal;

	CU_OK(cu->cuIpcOpenMemHandle(&q, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	CU_OK(cu->cuMemGetAddressRange(&base, &size, q));
	CU_OK(cu->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, q));
	return q;
}

/* In the IPC child: the open with the daemon's calls around it (the
 * mapping's range and device), then the same with each open after
 * PAUSE_US asleep, then after PAUSE_US spinning: floors[pause]. */
static void ipc_child_floors(CUipcMemHandle handle, double floors[3])
{
	double t[ROUNDS];

	for (enum pause pass = PAUSE_NONE; pass <= PAUSE_SPIN; pass++) {
		for (int i = 0; i < ROUNDS; i++) {
			CUdeviceptr q;
			uint64_t t0;

			pause_before(pass);
			t0 = bench_now_ns();
			q = ipc_open_as_daemon(handle);
			t[i] = (bench_now_ns() - t0) / 1e3;
			CU_OK(cu->cuIpcCloseMemHandle(q));
		}
		floors[pass] = median(t, ROUNDS);
	}
}

/* In the child: the VMM import with the daemon's calls, of an fd another
 * process exported, as the daemon imports it: back to back, then each after
 * PAUSE_US asleep. */
static void vmm_child_floors(int vfd, double floors[2])
{
	double t[ROUNDS];

	vmm_bare_rounds(vfd, true, t, PAUSE_NONE);
	floors[0] = median(t, ROUNDS);
	vmm_bare_rounds(vfd, true, t, PAUSE_SLEEP);
	floors[1] = median(t, ROUNDS);
}

/*
 * In the child: the served import floor. Each request brings the VMM fd
 * (SCM_RIGHTS, as a Register does) to a thread asleep in recvmsg(); it
 * imports it with the daemon's calls, answers a byte and keeps the mapping,
 * as the daemon's held row does; 'E' releases them all and ends.
 */
static void serve_imports(void)
{
	struct vmm_map m[ROUNDS];
	unsigned n = 0;

	for (;;) {
		int fds[SOCKIO_FDS_MAX];
		size_t n_fds = 0;
		char tag = 0;

		if (sockio_recv(to_child[0], &tag, 1, fds, &n_fds, 0) != 1 || tag != 'S' ||
		    n_fds != 1 || n == ROUNDS)
			break;
		vmm_map(fds[0], true, &m[n++]);
		close(fds[0]);
		if (write(from_child[1], &tag, 1) != 1)
			_exit(1);
	}
	while (n-- > 0)
		vmm_unmap(&m[n]);
}

/* A request to serve_ipc_opens(): 'I' and a handle to open, or 'E'. */
struct ipc_req {
	char tag;
	CUipcMemHandle handle;
};

/*
 * In the child: the served IPC floor, as serve_imports() for VMM fds. Each
 * request brings a handle of an allocation of its own to a thread asleep in
 * recv(); it opens it with the daemon's calls (the open, the range and the
 * device), answers a byte and keeps it open, as the daemon's held row does;
 * 'E' closes them all and ends.
 */
static void serve_ipc_opens(void)
{
	CUdeviceptr q[ROUNDS];
	unsigned n = 0;

	for (;;) {
		struct ipc_req req;

		if (recv(to_child[0], &req, sizeof(req), MSG_WAITALL) != sizeof(req) ||
		    req.tag != 'I' || n == ROUNDS)
			break;
		q[n++] = ipc_open_as_daemon(req.handle);
		if (write(from_child[1], &req.tag, 1) != 1)
			_exit(1);
	}
	while (n-- > 0)
		CU_OK(cu->cuIpcCloseMemHandle(q[n]));
}

/*
 * In the parent: the served IPC floor, ROUNDS handles of allocations of
 * their own (into q, which the caller frees once the child is gone), each
 * opened by the child's serving thread; the median, microseconds.
 */
static double ipc_served_us(CUdeviceptr q[ROUNDS])
{
	struct ipc_req req = { .tag = 'I' };
	double t[ROUNDS];
	char tag;

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0;

		CU_OK(cu->cuMemAlloc(&q[i], 2 << 20));
		CU_OK(cu->cuIpcGetMemHandle(&req.handle, q[i]));
		t0 = bench_now_ns();
		if (write(to_child[1], &req, sizeof(req)) != sizeof(req) ||
		    read(from_child[0], &tag, 1) != 1)
			exit(1);
		t[i] = (bench_now_ns() - t0) / 1e3;
	}
	req.tag = 'E';
	if (write(to_child[1], &req, sizeof(req)) != sizeof(req))
		exit(1);
	return median(t, ROUNDS);
}

/*
 * The child process the import floors are measured in: the daemon is
 * another process than the allocation's, and an import of another
 * process's export is what it does. It forks before this process
 * initialises CUDA (CUDA does not survive fork) and starts its own, as an
 * unrelated process would. It takes a VMM fd (SCM_RIGHTS on to_child, a
 * socket pair) and answers two floors, then serves VMM imports (serve_imports()),
 * then takes an IPC handle and answers four floors, then serves IPC opens
 * (serve_ipc_opens()).
 */
static void spawn_import_child(void)
{
	CUipcMemHandle handle;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_child) < 0 ||
	    pipe(from_child) < 0)
		exit(1);
	ipc_child = fork();
	if (ipc_child == 0) {
		double t[ROUNDS];
		int fds[SOCKIO_FDS_MAX];
		size_t n_fds = 0;
		char tag;
		CUcontext ctx;
		CUdevice dev;

		/* Only the parent writes: its exit (no GPU) must end the read. */
		close(to_child[1]);
		if (sockio_recv(to_child[0], &tag, 1, fds, &n_fds, 0) != 1 || n_fds != 1)
			_exit(1);
		if (cu_load() < 0)
			_exit(1);
		cu = cu_get_ops();
		CU_OK(cu->cuDeviceGet(&dev, 0));
		CU_OK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
		CU_OK(cu->cuCtxSetCurrent(ctx));
		vmm_child_floors(fds[0], t);
		close(fds[0]);
		if (write(from_child[1], t, 2 * sizeof(t[0])) != 2 * sizeof(t[0]))
			_exit(1);
		serve_imports();

		if (read(to_child[0], &handle, sizeof(handle)) != sizeof(handle))
			_exit(1);
		for (int i = 0; i < ROUNDS; i++) {
			CUdeviceptr q;
			uint64_t t0 = bench_now_ns();

			CU_OK(cu->cuIpcOpenMemHandle(&q, handle,
						     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
			t[i] = (bench_now_ns() - t0) / 1e3;
			CU_OK(cu->cuIpcCloseMemHandle(q));
		}
		t[0] = median(t, ROUNDS);
		ipc_child_floors(handle, &t[1]);
		if (write(from_child[1], t, 4 * sizeof(t[0])) != 4 * sizeof(t[0]))
			_exit(1);
		serve_ipc_opens();
		_exit(0);
	}
	close(to_child[0]);
}

/*
 * ROUNDS opens through c of handles of allocations of their own, each held:
 * no close of the previous open running beside (or before) the next in the
 * daemon. Their median, microseconds.
 */
static double ipc_held_us(struct rdmamem_client *c)
{
	CUdeviceptr q[ROUNDS];
	uint64_t held[ROUNDS];
	double t[ROUNDS];

	for (int i = 0; i < ROUNDS; i++) {
		CUipcMemHandle hq;
		uint64_t t0;

		CU_OK(cu->cuMemAlloc(&q[i], 2 << 20));
		CU_OK(cu->cuIpcGetMemHandle(&hq, q[i]));
		t0 = bench_now_ns();
		if (rdmamem_register_cuda_ipc(c, &hq, 0, 0, 0, &held[i]) < 0) {
			fprintf(stderr, "bench-gpu: %s\n", rdmamem_client_error_message(c));
			exit(1);
		}
		t[i] = (bench_now_ns() - t0) / 1e3;
	}
	for (int i = 0; i < ROUNDS; i++)
		rdmamem_unregister(c, held[i]);
	usleep(20000);
	for (int i = 0; i < ROUNDS; i++)
		CU_OK(cu->cuMemFree(q[i]));
	return median(t, ROUNDS);
}

static void bench_ipc_import(struct rdmamem_client *c)
{
	double daemon[ROUNDS], ping_after[ROUNDS], bare = 0, floors[4], held, served;
	struct rdmamem_client *c2 = NULL;
	CUdeviceptr p, served_q[ROUNDS];
	CUipcMemHandle handle;
	pid_t d2;
	int status;

	CU_OK(cu->cuMemAlloc(&p, 2 << 20));
	CU_OK(cu->cuIpcGetMemHandle(&handle, p));
	if (write(to_child[1], &handle, sizeof(handle)) != sizeof(handle) ||
	    read(from_child[0], floors, sizeof(floors)) != sizeof(floors))
		exit(1);
	bare = floors[0];
	served = ipc_served_us(served_q);
	waitpid(ipc_child, &status, 0);
	for (int i = 0; i < ROUNDS; i++)
		CU_OK(cu->cuMemFree(served_q[i]));

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0 = bench_now_ns(), id;

		if (rdmamem_register_cuda_ipc(c, &handle, 0, 0, 0, &id) < 0) {
			fprintf(stderr, "bench-gpu: %s\n", rdmamem_client_error_message(c));
			exit(1);
		}
		daemon[i] = (bench_now_ns() - t0) / 1e3;
		rdmamem_unregister(c, id);
		/* Let the asynchronous close finish, so each round opens anew. */
		usleep(2000);
	}
	printf("%-10s %34.1f %24.1f %8.2f\n", "IPC (open)", bare, median(daemon, ROUNDS),
	       median(daemon, ROUNDS) / bare);
	printf("%-10s %34.1f   (bare + the daemon's other calls, in the child)\n", "IPC (open)",
	       floors[1]);
	printf("%-10s %34.1f   (same, each after %d us asleep)\n", "IPC (open)", floors[2],
	       PAUSE_US);
	printf("%-10s %34.1f   (same, each after %d us spinning)\n", "IPC (open)", floors[3],
	       PAUSE_US);
	/* Each round above starts after 2 ms asleep, the daemon's threads
	 * too: what a call that does nothing costs then. */
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0;

		usleep(2000);
		t0 = bench_now_ns();
		if (rdmamem_ping(c) < 0)
			exit(1);
		ping_after[i] = (bench_now_ns() - t0) / 1e3;
	}
	printf("%-10s %34.1f   (a daemon Ping, each after 2000 us asleep as the rounds above)\n",
	       "IPC (open)", median(ping_after, ROUNDS));
	held = ipc_held_us(c);
	printf("%-10s %34.1f %24.1f %8.2f   (a handle of its own each, held)\n", "IPC (open)", bare,
	       held, held / bare);
	printf("%-10s %34.1f   (same, served: another process's thread woken by the handle on a\n"
	       "%-10s %34s    socket, answering when open, each held: the held row's floor)\n",
	       "IPC (open)", served, "", "");
	print_imports_where(daemon_path);
	d2 = pooled_daemon(&c2);
	(void)ipc_held_us(c2);
	held = ipc_held_us(c2);
	printf("%-10s %34.1f %24.1f %8.2f   (the same, a daemon opening on its pool alone)\n",
	       "IPC (open)", bare, held, held / bare);
	rdmamem_client_close(c2);
	bench_stop(d2);
	CU_OK(cu->cuMemFree(p));
}

int main(int argc, char **argv)
{
	/* RDMAMEM_BENCH_DAEMON_DEBUG=1: the daemon logs where each import's
	 * and each copy's time goes (debug level, on this stderr). */
	const char *only = getenv("RDMAMEM_BENCH_GPU_ONLY");
	const char *extra[] = { "--max-pinned-bytes-per-uid", "17179869184",
				getenv("RDMAMEM_BENCH_DAEMON_DEBUG") ? "--log-level" : NULL,
				"debug", NULL };
	CUmemGenericAllocationHandle h;
	struct rdmamem_client *c = NULL;
	CUcontext ctx;
	CUdevice dev;
	CUdeviceptr dptr;
	void *host;
	int hfd, vfd;
	pid_t d;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());
	d = bench_daemon_start(args.daemon, daemon_path, -1, extra);
	daemon_pid = d;
	atexit(stop_daemon);
	if (rdmamem_client_connect(daemon_path, &c) < 0)
		return 1;

	/* The IPC child must fork before this process initialises CUDA. */
	spawn_import_child();
	if (cu_load() < 0) {
		printf("bench-gpu: SKIPPED: no GPU here (%s)\n", cu_last_error());
		stop_daemon();
		bench_cleanup();
		return 0;
	}
	cu = cu_get_ops();
	CU_OK(cu->cuDeviceGet(&dev, 0));
	CU_OK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cu->cuCtxSetCurrent(ctx));
	dptr = vmm_alloc(BIG, &vfd, &h);
	if (rdmamem_memfd_create("bench", BIG, &hfd, &host) < 0)
		return 1;
	memset(host, 0x5a, BIG);

	/* RDMAMEM_BENCH_GPU_ONLY=imports: a daemon that has made no copy
	 * (no host region page-locked, no 1 GiB VMM import held) imports. */
	if (!only || strcmp(only, "imports") != 0) {
		bench_copies(c, host, hfd, dptr, vfd);
		bench_driver_calls((char *)host + BIG / 2, dptr);
		bench_two_gpus(c);
	}
	bench_vmm_import(c, host);
	bench_ipc_import(c);
	printf("\n== A thread's wake-up (median of 100, microseconds): from a signal, by a thread "
	       "that slept\n   as long itself, to the waiting thread running; a pooled import "
	       "pays two\n\n");
	for (unsigned us = 500; us <= 2000; us *= 4)
		printf("after %4u us asleep %10.1f\n", us, wake_us(us));

	rdmamem_client_close(c);
	stop_daemon();
	bench_cleanup();
	return 0;
}

#else

int main(void)
{
	printf("bench-gpu: SKIPPED: built without cuda.h\n");
	return 0;
}

#endif
