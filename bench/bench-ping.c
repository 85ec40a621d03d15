/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ping round trips through rdmamemd beside the anchor: a raw Unix-socket
 * ping-pong server and client in C exchanging the very same bytes (the Ping
 * call and its reply), measured in the same run, with the same CPU placement.
 *
 * Rows: anchor (raw client, raw server), rdmamemd with a raw client (the
 * daemon's own cost), rdmamemd through librdmamem (what applications get).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdmamem.h"

static const char ping_call[] = "{\"method\":\"io.rdmamemd.Ping\"}";
static const char ping_reply[] = "{\"parameters\":{}}";
#define CALL_LEN (sizeof(ping_call))	/* with the NUL */
#define REPLY_LEN (sizeof(ping_reply))

#define MAX_CLIENTS 64
#define MAX_SAMPLES (8U * 1024U * 1024U)

static double arg_seconds = 2.0;
static const char *arg_daemon;
static char dir[64], anchor_path[128], daemon_path[128];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void pin_to(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		perror("anchor listen");
		exit(1);
	}
	return fd;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * The anchor server: one epoll loop, like the daemon, answering every
 * complete call (NUL-terminated) with the fixed reply. No JSON.
 */
static void anchor_server(int lfd)
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[MAX_CLIENTS + 1];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, MAX_CLIENTS + 1, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			char buf[4096];
			ssize_t r;

			if (fd == lfd) {
				int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				ev.data.fd = c;
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				continue;
			}
			r = read(fd, buf, sizeof(buf));
			if (r <= 0) {
				close(fd);
				continue;
			}
			for (ssize_t k = 0; k < r; k++)
				if (buf[k] == '\0' && write(fd, ping_reply, REPLY_LEN) != REPLY_LEN)
					break;
		}
	}
}

static pid_t start_anchor(int cpu)
{
	int lfd = listen_at(anchor_path);
	pid_t pid = fork();

	if (pid == 0) {
		pin_to(cpu);
		anchor_server(lfd);
		_exit(0);
	}
	close(lfd);
	return pid;
}

static pid_t start_daemon(int cpu)
{
	pid_t pid = fork();

	if (pid == 0) {
		pin_to(cpu);
		execl(arg_daemon, arg_daemon, "--socket", daemon_path, "--log-level", "warning",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = connect_to(daemon_path);

		if (fd >= 0) {
			close(fd);
			return pid;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: %s did not start\n", arg_daemon);
	exit(1);
}

static void stop(pid_t pid)
{
	int status;

	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
}

enum client_kind { RAW, LIBRARY };

struct worker {
	pthread_t thread;
	const char *path;
	enum client_kind kind;
	int cpu;
	uint32_t *samples;	/* nanoseconds, saturated */
	size_t n;
	int error;
};

static pthread_barrier_t start_barrier;
static atomic_bool stop_flag;

static int raw_round_trip(int fd)
{
	char buf[64];
	size_t got = 0;

	if (write(fd, ping_call, CALL_LEN) != (ssize_t)CALL_LEN)
		return -EIO;
	while (got < REPLY_LEN) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - got);

		if (r <= 0)
			return -EIO;
		got += r;
	}
	return got == REPLY_LEN && buf[REPLY_LEN - 1] == '\0' ? 0 : -EPROTO;
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	struct rdmamem_client *c = NULL;
	int fd = -1;

	pin_to(w->cpu);
	if (w->kind == RAW)
		fd = connect_to(w->path);
	else if (rdmamem_client_connect(w->path, &c) < 0)
		fd = -1;
	else
		fd = 0;
	pthread_barrier_wait(&start_barrier);
	if (fd < 0) {
		w->error = -ENOTCONN;
		return NULL;
	}

	while (w->n < MAX_SAMPLES && !atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		uint64_t t0 = now_ns(), dt;
		int r = w->kind == RAW ? raw_round_trip(fd) : rdmamem_ping(c);

		if (r < 0) {
			w->error = r;
			break;
		}
		dt = now_ns() - t0;
		w->samples[w->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
	}
	if (w->kind == RAW)
		close(fd);
	rdmamem_client_close(c);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct result {
	double calls_per_sec;
	double p50_us, p99_us;
};

static struct result measure(const char *path, enum client_kind kind, int n_clients, int cpu)
{
	static struct worker workers[MAX_CLIENTS];
	struct result res = {};
	uint64_t start, end;
	uint32_t *all;
	size_t total = 0;

	pthread_barrier_init(&start_barrier, NULL, n_clients + 1);
	for (int i = 0; i < n_clients; i++) {
		struct worker *w = &workers[i];

		*w = (struct worker){ .path = path, .kind = kind, .cpu = cpu };
		w->samples = malloc(MAX_SAMPLES * sizeof(uint32_t));
		if (!w->samples)
			exit(1);
		pthread_create(&w->thread, NULL, worker_run, w);
	}
	atomic_store(&stop_flag, false);
	pthread_barrier_wait(&start_barrier);
	start = now_ns();
	{
		struct timespec ts = { (time_t)arg_seconds,
				       (long)((arg_seconds - (time_t)arg_seconds) * 1e9) };

		nanosleep(&ts, NULL);
	}
	atomic_store(&stop_flag, true);
	for (int i = 0; i < n_clients; i++) {
		pthread_join(workers[i].thread, NULL);
		if (workers[i].error) {
			fprintf(stderr, "bench: client %d failed: %s\n", i,
				strerror(-workers[i].error));
			exit(1);
		}
		total += workers[i].n;
	}
	end = now_ns();
	pthread_barrier_destroy(&start_barrier);

	all = malloc(total * sizeof(uint32_t));
	total = 0;
	for (int i = 0; i < n_clients; i++) {
		memcpy(all + total, workers[i].samples, workers[i].n * sizeof(uint32_t));
		total += workers[i].n;
		free(workers[i].samples);
	}
	qsort(all, total, sizeof(uint32_t), cmp_u32);
	res.calls_per_sec = total / ((end - start) / 1e9);
	res.p50_us = all[total / 2] / 1000.0;
	res.p99_us = all[(size_t)(total * 0.99)] / 1000.0;
	free(all);
	return res;
}

static void row(const char *placement, int clients, const char *system, struct result r,
		const struct result *anchor)
{
	printf("%-10s %7d  %-28s %10.0f %9.1f %9.1f", placement, clients, system, r.calls_per_sec,
	       r.p50_us, r.p99_us);
	if (anchor)
		printf("   %5.2f     %5.2f", r.calls_per_sec / anchor->calls_per_sec,
		       r.p50_us / anchor->p50_us);
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "daemon", required_argument, NULL, 'd' },
		{ "seconds", required_argument, NULL, 't' },
		{},
	};
	static const int client_counts[] = { 1, 8 };
	static const struct {
		const char *name;
		int cpu;
	} placements[] = { { "cpu0", 0 }, { "unpinned", -1 } };
	int c;

	while ((c = getopt_long(argc, argv, "d:t:", options, NULL)) >= 0) {
		switch (c) {
		case 'd':
			arg_daemon = optarg;
			break;
		case 't':
			arg_seconds = atof(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!arg_daemon) {
		fprintf(stderr, "Usage: bench-ping --daemon PATH [--seconds N]\n");
		return 2;
	}

	strcpy(dir, "/tmp/rdmamem-bench.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(anchor_path, sizeof(anchor_path), "%s/anchor.sock", dir);
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", dir);

	printf("Ping round trip: call %zu B, reply %zu B; %.1f s per row; %ld CPUs online\n",
	       CALL_LEN, REPLY_LEN, arg_seconds, sysconf(_SC_NPROCESSORS_ONLN));
	printf("anchor = raw Unix-socket ping-pong in C (epoll server, same bytes), same run\n");
	printf("placement: cpu0 = server and clients pinned to CPU 0; unpinned = scheduler's choice\n\n");
	printf("%-10s %7s  %-28s %10s %9s %9s   %s\n", "placement", "clients", "system", "calls/s",
	       "p50 us", "p99 us", "ratio calls/s, p50 (vs anchor)");

	for (size_t p = 0; p < sizeof(placements) / sizeof(placements[0]); p++) {
		int cpu = placements[p].cpu;
		pid_t anchor = start_anchor(cpu), daemon = start_daemon(cpu);

		for (size_t k = 0; k < sizeof(client_counts) / sizeof(client_counts[0]); k++) {
			int n = client_counts[k];
			struct result a, d, l;

			a = measure(anchor_path, RAW, n, cpu);
			row(placements[p].name, n, "anchor: raw socket", a, NULL);
			d = measure(daemon_path, RAW, n, cpu);
			row(placements[p].name, n, "rdmamemd, raw client", d, &a);
			l = measure(daemon_path, LIBRARY, n, cpu);
			row(placements[p].name, n, "rdmamemd, librdmamem", l, &a);
		}
		stop(anchor);
		stop(daemon);
	}
	unlink(anchor_path);
	rmdir(dir);
	return 0;
}
