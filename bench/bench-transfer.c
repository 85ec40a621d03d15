/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's Transfer between two hosts (make vmbench2, on host A of the
 * two-VM bed): a client of this host's rdmamemd with a region registered
 * on one device, and another host's export (its descriptor); the daemon
 * moves the bytes on its own queue pairs. Per size, what perftest measures
 * between the same devices (tests/vm/perftest.sh), so that its figures are
 * put beside ib_write_bw, ib_read_bw and ib_write_lat:
 *
 *   transfer: WRITE|READ BYTES bytes ITERS iters: bw avg MiB/s
 *     one Transfer of ITERS ops of BYTES each (the client's batch, as
 *     perftest's stream of WRs), the whole call timed;
 *   transfer: lat BYTES bytes ITERS iters: lat avg us (median us)
 *     a 1-op WRITE Transfer, call to reply, ITERS times: the round trip a
 *     client waits for (ib_write_lat reports half a ping-pong: the ratio
 *     is against twice that).
 *
 *   bench-transfer --socket PATH --device NAME --descriptor TEXT SIZE...
 *
 * ITERS follows perftest.sh: about 64 MiB a bandwidth run, 5 to 1000 ops,
 * a tenth for latency. The export must be at least the largest SIZE long.
 * Exit status: 0, or 1 naming the step that failed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

static const char *arg_socket, *arg_device, *arg_descriptor;

static size_t iters(size_t size, int bw)
{
	size_t n = (64U << 20) / size;

	if (n > 1000)
		n = 1000;
	if (!bw)
		n /= 10;
	return n < 5 ? 5 : n;
}

/*
 * A counter of the device's port 1 in rxe's hw_counters (0 where there is
 * none): each bandwidth line says how many packets came in and how often
 * the requester's completer had to retry (a response lost or out of
 * order, resent after the queue pair's ack timeout).
 */
static unsigned long long hw_counter(const char *name)
{
	char path[256];
	unsigned long long n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", arg_device,
		 name);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

static int fail(struct rdmamem_client *c, const char *what)
{
	fprintf(stderr, "bench-transfer: %s: %s: %s\n", what, rdmamem_client_error_name(c) ?: "",
		rdmamem_client_error_message(c) ?: "");
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		{ "descriptor", required_argument, NULL, 'D' },
		{},
	};
	struct rdmamem_registration reg;
	struct rdmamem_client *c;
	size_t max = 0;
	uint64_t region, remote;
	void *map;
	int fd, opt;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			arg_socket = optarg;
			break;
		case 'd':
			arg_device = optarg;
			break;
		case 'D':
			arg_descriptor = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!arg_socket || !arg_device || !arg_descriptor || optind == argc) {
		fprintf(stderr,
			"bench-transfer: usage: see the comment at the top of its source\n");
		return 2;
	}
	for (int i = optind; i < argc; i++)
		if (strtoull(argv[i], NULL, 0) > max)
			max = strtoull(argv[i], NULL, 0);

	if (rdmamem_client_connect(arg_socket, &c) < 0) {
		fprintf(stderr, "bench-transfer: cannot connect to %s\n", arg_socket);
		return 1;
	}
	if (rdmamem_memfd_create("bench-transfer", max, &fd, &map) < 0) {
		fprintf(stderr, "bench-transfer: memfd of %zu bytes\n", max);
		return 1;
	}
	memset(map, 0x5a, max);
	if (rdmamem_register(c, fd, 0, 0, &region) < 0)
		return fail(c, "Register");
	if (rdmamem_register_on(c, region, arg_device, &reg) < 0)
		return fail(c, "RegisterOn");
	if (rdmamem_remote_import(c, arg_descriptor, &remote) < 0)
		return fail(c, "ImportRemote");

	for (int kind = 0; kind < 3; kind++) {
		for (int i = optind; i < argc; i++) {
			size_t size = strtoull(argv[i], NULL, 0), n = iters(size, kind < 2);
			struct rdmamem_transfer_op *ops = calloc(n, sizeof(*ops));
			uint64_t *lat = calloc(n, sizeof(*lat)), bytes, t0, sum = 0;

			if (!ops || !lat)
				return 1;
			for (size_t k = 0; k < n; k++)
				ops[k] = (struct rdmamem_transfer_op){
					.op = kind == 1 ? RDMAMEM_TRANSFER_READ :
							  RDMAMEM_TRANSFER_WRITE,
					.region = region,
					.remote = remote,
					.length = size,
				};
			/* The links are up before the clock starts. */
			if (rdmamem_transfer(c, ops, 1, NULL, NULL, &bytes) < 0)
				return fail(c, "Transfer");
			if (kind < 2) {
				unsigned long long retries = hw_counter("completer_retry_err"),
						   pkts = hw_counter("rcvd_pkts");

				t0 = bench_now_ns();
				if (rdmamem_transfer(c, ops, n, NULL, NULL, &bytes) < 0)
					return fail(c, "Transfer");
				printf("transfer: %s %zu bytes %zu iters: bw avg %.2f MiB/s (%llu "
				       "packets in, %llu completer retries)\n",
				       kind ? "READ" : "WRITE", size, n,
				       (double)bytes / (1 << 20) /
					       ((double)(bench_now_ns() - t0) / 1e9),
				       hw_counter("rcvd_pkts") - pkts,
				       hw_counter("completer_retry_err") - retries);
			} else {
				for (size_t k = 0; k < n; k++) {
					t0 = bench_now_ns();
					if (rdmamem_transfer(c, ops, 1, NULL, NULL, &bytes) < 0)
						return fail(c, "Transfer");
					lat[k] = bench_now_ns() - t0;
					sum += lat[k];
				}
				qsort(lat, n, sizeof(*lat), cmp_u64);
				printf("transfer: lat %zu bytes %zu iters: lat avg %.1f us (median "
				       "%.1f)\n",
				       size, n, (double)sum / n / 1e3, (double)lat[n / 2] / 1e3);
			}
			fflush(stdout);
			free(ops);
			free(lat);
		}
	}
	rdmamem_client_close(c);
	return 0;
}
