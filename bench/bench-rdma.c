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

static void bench_registration(void)
{
	static const size_t sizes[] = { 4096, 1 << 20, 16 << 20, 64 << 20 };
	struct ibv_pd *pd = bare_pd();
	struct rdmamem_client *c = NULL;

	if (rdmamem_client_connect(daemon_path, &c) < 0)
		exit(1);
	printf("== Register + deregister on %s, %.1f s per row\n", args.device, args.seconds);
	printf("anchor = ibv_reg_mr + ibv_dereg_mr of the same memfd mapping on a PD of this "
	       "process\n");
	printf("rdmamemd = RegisterOn (waits for the MR) + Unregister (deregisters off the loop)\n\n");
	printf("%-10s %14s %14s %8s\n", "size", "bare pairs/s", "daemon pairs/s", "ratio");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		uint64_t t0, n_b = 0, n_d = 0, tb, td;
		struct rdmamem_registration reg;
		void *addr;
		int fd;

		if (rdmamem_memfd_create("bench", size, &fd, &addr) < 0)
			exit(1);
		memset(addr, 1, size);
		t0 = bench_now_ns();
		do {
			struct ibv_mr *mr =
				ibv_reg_mr(pd, addr, size,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_WRITE);

			if (!mr || ibv_dereg_mr(mr)) {
				perror("ibv_reg_mr");
				exit(1);
			}
			n_b++;
		} while ((tb = bench_now_ns() - t0) < args.seconds * 1e9 || n_b < 3);

		t0 = bench_now_ns();
		do {
			uint64_t id;

			if (rdmamem_register(c, fd, 0, 0, &id) < 0 ||
			    rdmamem_register_on(c, id, args.device, &reg) < 0 ||
			    rdmamem_unregister(c, id) < 0) {
				fprintf(stderr, "bench-rdma: %s\n",
					rdmamem_client_error_message(c));
				exit(1);
			}
			n_d++;
		} while ((td = bench_now_ns() - t0) < args.seconds * 1e9 || n_d < 3);

		printf("%-10zu %14.1f %14.1f %8.2f\n", size, n_b / (tb / 1e9), n_d / (td / 1e9),
		       (n_d / (td / 1e9)) / (n_b / (tb / 1e9)));
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
