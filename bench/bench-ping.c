/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ping round trips through rdmamemd beside the anchor: a raw Unix-socket
 * ping-pong server and client in C exchanging the very same bytes (the Ping
 * call and its reply), measured in the same run, with the same CPU placement.
 *
 * Rows: anchor (raw client, raw server), rdmamemd with a raw client (the
 * daemon's own cost), the raw client waiting in poll() as librdmamem does,
 * rdmamemd through librdmamem (what applications get).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "benchlib.h"

/* The raw client waiting as librdmamem's blocking calls do: poll() with a
 * timeout, then reads until the reply is in (none after it, since 5b900b9).
 * Tells the library's wait from the rest of its call. */
static int raw_poll_ping(struct bench_worker *w)
{
	struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
	char buf[BENCH_PING_REPLY_SIZE];
	size_t got = 0;

	if (write(w->fd, BENCH_PING_CALL, sizeof(BENCH_PING_CALL)) !=
	    (ssize_t)sizeof(BENCH_PING_CALL))
		return -EIO;
	while (got < BENCH_PING_REPLY_SIZE) {
		ssize_t r;

		if (poll(&pfd, 1, 30000) != 1)
			return -EIO;
		r = recv(w->fd, buf, sizeof(buf) - got, MSG_DONTWAIT);
		if (r <= 0)
			return -EIO;
		got += (size_t)r;
	}
	return 0;
}

static int lib_ping(struct bench_worker *w)
{
	return rdmamem_ping(w->client);
}

int main(int argc, char **argv)
{
	static const int client_counts[] = { 1, 8 };
	static const struct {
		const char *name;
		int server_cpu, client_cpu;
	} placements[] = { { "cpu0", 0, 0 }, { "cpu0/1", 0, 1 }, { "unpinned", -1, -1 } };
	struct bench_args args = { .seconds = 2.0 };
	char anchor_path[128], daemon_path[128];

	if (bench_parse_args(argc, argv, &args))
		return 2;
	snprintf(anchor_path, sizeof(anchor_path), "%s/anchor.sock", bench_dir());
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());

	printf("== Ping round trip: call %zu B, reply %zu B; %.1f s per row; %ld CPUs online\n",
	       sizeof(BENCH_PING_CALL), BENCH_PING_REPLY_SIZE, args.seconds,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("anchor = raw Unix-socket ping-pong in C (epoll server, same bytes), same run\n");
	printf("cpu0 = server and clients pinned to CPU 0; cpu0/1 = server on CPU 0, clients on "
	       "CPU 1;\nunpinned = scheduler's choice\n\n");
	bench_header("placement, clients");

	for (size_t p = 0; p < sizeof(placements) / sizeof(placements[0]); p++) {
		int cpu = placements[p].client_cpu;
		pid_t anchor = bench_anchor_start(anchor_path, placements[p].server_cpu,
						  BENCH_PING_REPLY_SIZE);
		pid_t d = bench_daemon_start(args.daemon, daemon_path, placements[p].server_cpu,
					     NULL);

		for (size_t k = 0; k < sizeof(client_counts) / sizeof(client_counts[0]); k++) {
			const struct bench_op raw_anchor = { .path = anchor_path,
							     .raw = 1,
							     .run = bench_raw_ping };
			const struct bench_op raw_daemon = { .path = daemon_path,
							     .raw = 1,
							     .run = bench_raw_ping };
			const struct bench_op poll_daemon = { .path = daemon_path,
							      .raw = 1,
							      .run = raw_poll_ping };
			const struct bench_op lib_daemon = { .path = daemon_path, .run = lib_ping };
			int n = client_counts[k];
			struct bench_result a, r;
			char group[64];

			snprintf(group, sizeof(group), "%s, %d", placements[p].name, n);
			a = bench_measure(&raw_anchor, n, cpu, args.seconds);
			bench_row(group, "anchor: raw socket", &a, NULL);
			r = bench_measure(&raw_daemon, n, cpu, args.seconds);
			bench_row(group, "rdmamemd Ping, raw client", &r, &a);
			r = bench_measure(&poll_daemon, n, cpu, args.seconds);
			bench_row(group, "rdmamemd Ping, raw, poll() first", &r, &a);
			r = bench_measure(&lib_daemon, n, cpu, args.seconds);
			bench_row(group, "rdmamemd Ping, librdmamem", &r, &a);
		}
		bench_stop(anchor);
		bench_stop(d);
	}
	bench_cleanup();
	return 0;
}
