/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RDMA registration through rdmamemd beside bare ibv_reg_mr/ibv_dereg_mr on a
 * PD of this process, same sizes, same device; and the daemon's Ping latency
 * while it registers a large region. Run inside the Soft-RoCE VM (make
 * vmbench): emulation proves function, so read the ratios, not the times.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "benchlib.h"

static struct bench_args args = { .seconds = 1.0, .device = "rxe0" };
static char daemon_path[128];

static struct ibv_pd *bare_pd(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), args.device) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "bench-rdma: no RDMA device %s\n", args.device);
		exit(1);
	}
	return ibv_alloc_pd(ctx);
}

#define REG_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

/* How a bare pair gets its memory: what the daemon does per Register. */
enum bare_map {
	BARE_SAME,     /* the anchor: one mapping, faulted in once */
	BARE_FRESH,    /* mmap + reg + dereg + munmap: ibv_reg_mr faults it in */
	BARE_POPULATE, /* the same with MAP_POPULATE */
};

static void bare_pair(struct ibv_pd *pd, int fd, void *same, size_t size, enum bare_map how)
{
	void *addr = same;
	struct ibv_mr *mr;

	if (how != BARE_SAME) {
		addr = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_SHARED | (how == BARE_POPULATE ? MAP_POPULATE : 0), fd, 0);
		if (addr == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
	}
	mr = ibv_reg_mr(pd, addr, size, REG_ACCESS);
	if (!mr || ibv_dereg_mr(mr)) {
		perror("ibv_reg_mr");
		exit(1);
	}
	if (how != BARE_SAME)
		munmap(addr, size);
}

/* Pairs per second of the bare kind how. */
static double bare_rate(struct ibv_pd *pd, int fd, void *same, size_t size, enum bare_map how)
{
	uint64_t t0 = bench_now_ns(), n = 0, t;

	do {
		bare_pair(pd, fd, same, size, how);
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	return n / (t / 1e9);
}

/*
 * Register + RegisterOn + Unregister per second; with steps, each call is
 * timed on its own and its mean (us) added to steps[0..2].
 */
static double daemon_rate(struct rdmamem_client *c, int fd, double *steps)
{
	uint64_t t0 = bench_now_ns(), n = 0, t, sum[3] = { 0 };

	do {
		struct rdmamem_registration reg;
		uint64_t id, a, b, d, e;

		a = bench_now_ns();
		if (rdmamem_register(c, fd, 0, 0, &id) < 0)
			goto fail;
		b = bench_now_ns();
		if (rdmamem_register_on(c, id, args.device, &reg) < 0)
			goto fail;
		d = bench_now_ns();
		if (rdmamem_unregister(c, id) < 0)
			goto fail;
		e = bench_now_ns();
		sum[0] += b - a;
		sum[1] += d - b;
		sum[2] += e - d;
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 1e9 || n < 3);
	for (int i = 0; i < 3; i++)
		steps[i] = sum[i] / 1e3 / n;
	return n / (t / 1e9);
fail:
	fprintf(stderr, "bench-rdma: %s\n", rdmamem_client_error_message(c));
	exit(1);
}

static double ping_us(struct rdmamem_client *c)
{
	uint64_t t0 = bench_now_ns(), n = 0, t;

	do {
		if (rdmamem_ping(c) < 0)
			exit(1);
		n++;
	} while ((t = bench_now_ns() - t0) < args.seconds * 0.2e9 || n < 3);
	return t / 1e3 / n;
}

static void bench_registration(void)
{
	static const size_t sizes[] = { 4096, 1 << 20, 16 << 20, 64 << 20 };
	struct ibv_pd *pd = bare_pd();
	struct rdmamem_client *c = NULL;
	double ping;

	if (rdmamem_client_connect(daemon_path, &c) < 0)
		exit(1);
	ping = ping_us(c);
	printf("== Register + deregister on %s, %.1f s per row\n", args.device, args.seconds);
	printf("anchor = ibv_reg_mr + ibv_dereg_mr of the same memfd mapping on a PD of this "
	       "process\n");
	printf("rdmamemd = Register + RegisterOn (waits for the MR) + Unregister (deregisters "
	       "off the loop)\n");
	printf("fresh = mmap + ibv_reg_mr + ibv_dereg_mr + munmap here (what the daemon does "
	       "per Register), populate = the same with MAP_POPULATE\n");
	printf("floor = populate plus three Pings: the most a daemon that maps each Register "
	       "afresh (and unmaps at Unregister) can do; of floor = daemon / floor\n");
	printf("bare+3 Pings = the anchor's own work plus three calls that do nothing: the most "
	       "any daemon can do with three calls over its socket, were it to keep mappings and "
	       "MRs; of bare = that / bare\n");
	printf("Register / RegisterOn / Unregister: mean us of each call; Ping %.1f us at start, "
	       "measured again per row\n\n",
	       ping);
	printf("%-10s %12s %12s %8s %12s %12s %10s %9s %12s %8s %10s %10s %10s\n", "size",
	       "bare pairs/s", "daemon /s", "ratio", "fresh /s", "populate /s", "floor /s",
	       "of floor", "bare+3 Pings", "of bare", "Register", "RegisterOn", "Unregister");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		double bare, fresh, populate, floor, any, dmn, steps[3];
		void *addr;
		int fd;

		if (rdmamem_memfd_create("bench", size, &fd, &addr) < 0)
			exit(1);
		memset(addr, 1, size);
		bare = bare_rate(pd, fd, addr, size, BARE_SAME);
		dmn = daemon_rate(c, fd, steps);
		fresh = bare_rate(pd, fd, addr, size, BARE_FRESH);
		populate = bare_rate(pd, fd, addr, size, BARE_POPULATE);
		ping = ping_us(c); /* the row's own: the first, at start, runs cold */
		floor = 1.0 / (1.0 / populate + 3 * ping / 1e6);
		any = 1.0 / (1.0 / bare + 3 * ping / 1e6);
		printf("%-10zu %12.1f %12.1f %8.2f %12.1f %12.1f %10.1f %9.2f %12.1f %8.2f %10.1f "
		       "%10.1f %10.1f\n",
		       size, bare, dmn, dmn / bare, fresh, populate, floor, dmn / floor, any,
		       any / bare, steps[0], steps[1], steps[2]);
		fflush(stdout);
		munmap(addr, size);
		close(fd);
	}
	rdmamem_client_close(c);
}

static atomic_bool registering;

static void *register_big(void *arg)
{
	struct rdmamem_client *c = NULL;
	struct rdmamem_registration reg;
	size_t size = (size_t)arg;
	uint64_t id;
	int fd;

	if (rdmamem_client_connect(daemon_path, &c) < 0 ||
	    rdmamem_memfd_create("big", size, &fd, NULL) < 0 ||
	    rdmamem_register(c, fd, 0, 0, &id) < 0)
		exit(1);
	while (atomic_load(&registering)) {
		if (rdmamem_register_on(c, id, args.device, &reg) < 0 ||
		    rdmamem_unregister(c, id) < 0 || rdmamem_register(c, fd, 0, 0, &id) < 0) {
			fprintf(stderr, "bench-rdma: %s\n", rdmamem_client_error_message(c));
			exit(1);
		}
	}
	close(fd);
	rdmamem_client_close(c);
	return NULL;
}

static int lib_ping(struct bench_worker *w)
{
	return rdmamem_ping(w->client);
}

static void bench_responsiveness(void)
{
	const struct bench_op ping = { daemon_path, 0, NULL, lib_ping, NULL, NULL };
	struct bench_result idle, busy;
	pthread_t t;

	printf("\n== Ping while 256 MiB regions are registered and deregistered back to back, "
	       "%.1f s per row\n\n",
	       args.seconds * 2);
	bench_header("load");
	idle = bench_measure(&ping, 1, -1, args.seconds * 2);
	bench_row("idle", "Ping", &idle, NULL);
	atomic_store(&registering, true);
	pthread_create(&t, NULL, register_big, (void *)(size_t)(256 << 20));
	usleep(200000);
	busy = bench_measure(&ping, 1, -1, args.seconds * 2);
	atomic_store(&registering, false);
	pthread_join(t, NULL);
	bench_row("registering 256 MiB", "Ping", &busy, &idle);
}

int main(int argc, char **argv)
{
	const char *extra[] = { "--max-pinned-bytes-per-uid", "8589934592", NULL };
	pid_t d;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());
	d = bench_daemon_start(args.daemon, daemon_path, -1, extra);
	bench_registration();
	bench_responsiveness();
	bench_stop(d);
	bench_cleanup();
	return 0;
}
