/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/param.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"

#define MAX_SAMPLES (8U * 1024U * 1024U)

static char dir[64];

int bench_parse_args(int argc, char **argv, struct bench_args *args)
{
	static const struct option options[] = {
		{ "daemon", required_argument, NULL, 'd' },
		{ "seconds", required_argument, NULL, 't' },
		{ "device", required_argument, NULL, 'D' },
		{},
	};
	bool takes_device = args->device != NULL;
	int c;

	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'd':
			args->daemon = optarg;
			break;
		case 't':
			args->seconds = atof(optarg);
			break;
		case 'D':
			if (!takes_device) {
				fprintf(stderr, "%s: no --device: it uses no RDMA device\n",
					program_invocation_short_name);
				return 2;
			}
			args->device = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!args->daemon) {
		fprintf(stderr, "Usage: %s --daemon PATH%s [--seconds N]\n",
			program_invocation_short_name, takes_device ? " [--device NAME]" : "");
		return 2;
	}
	return 0;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

double bench_gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0;
}

const char *bench_size_label(uint64_t size, char out[static 24])
{
	if (size >= (1 << 20))
		snprintf(out, 24, "%llu MiB", (unsigned long long)(size >> 20));
	else
		snprintf(out, 24, "%llu KiB", (unsigned long long)(size >> 10));
	return out;
}

void bench_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

void bench_child(int cpu)
{
	/* A benchmark killed (^C, a closed pipe) takes its servers along. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	bench_pin(cpu);
}

const char *bench_dir(void)
{
	if (!dir[0]) {
		strcpy(dir, "/tmp/rdmamem-bench.XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			exit(1);
		}
	}
	return dir;
}

void bench_cleanup(void)
{
	char cmd[128];

	if (!dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: could not remove %s\n", dir);
}

int bench_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

static void anchor_loop(int lfd, size_t reply_len)
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[BENCH_MAX_CLIENTS + 1];
	char *reply = calloc(1, reply_len), buf[65536];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	memset(reply, 'r', reply_len - 1);
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, BENCH_MAX_CLIENTS + 1, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			ssize_t r;

			if (fd == lfd) {
				ev.data.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev);
				continue;
			}
			r = read(fd, buf, sizeof(buf));
			if (r <= 0) {
				close(fd);
				continue;
			}
			for (ssize_t k = 0; k < r; k++)
				if (buf[k] == '\0' &&
				    write(fd, reply, reply_len) != (ssize_t)reply_len)
					break;
		}
	}
}

pid_t bench_anchor_start(const char *path, int cpu, size_t reply_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	unlink(path);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0) {
		perror("anchor");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		bench_child(cpu);
		anchor_loop(lfd, reply_len);
		_exit(0);
	}
	close(lfd);
	return pid;
}

pid_t bench_daemon_start(const char *daemon, const char *path, int cpu, const char *const *extra)
{
	pid_t pid = fork();

	if (pid == 0) {
		const char *argv[32] = { daemon, "--socket", path, "--log-level", "warning" };
		size_t n = 5;

		bool own_config = false;

		for (; extra && *extra && n < 30; extra++) {
			own_config = own_config || strncmp(*extra, "--config", 8) == 0;
			argv[n++] = *extra;
		}
		/* Measured with the built-in defaults, not an installed file. */
		if (!own_config)
			argv[n++] = "--no-config";
		argv[n] = NULL;
		bench_child(cpu);
		execv(daemon, (char *const *)argv);
		_exit(127);
	}
	bench_wait_listening(path, daemon);
	return pid;
}

void bench_wait_listening(const char *path, const char *what)
{
	for (int i = 0; i < 500; i++) {
		int fd = bench_connect(path);

		if (fd >= 0) {
			close(fd);
			return;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: %s did not start\n", what);
	exit(1);
}

void bench_stop(pid_t pid)
{
	int status;

	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
}

int bench_raw_round_trip(int fd, const void *req, size_t req_len, size_t reply_len)
{
	char buf[65536];
	size_t got = 0;

	if (write(fd, req, req_len) != (ssize_t)req_len)
		return -EIO;
	while (got < reply_len) {
		ssize_t r = read(fd, buf, MIN(sizeof(buf), reply_len - got));

		if (r <= 0)
			return -EIO;
		got += r;
	}
	return 0;
}

int bench_raw_ping(struct bench_worker *w)
{
	return bench_raw_round_trip(w->fd, BENCH_PING_CALL, sizeof(BENCH_PING_CALL),
				    BENCH_PING_REPLY_SIZE);
}

static pthread_barrier_t start_barrier;
static atomic_bool stop_flag;

void bench_start_wait(void)
{
	pthread_barrier_wait(&start_barrier);
}

bool bench_stopped(void)
{
	return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

uint64_t bench_run_threads(int n, void *(*fn)(void *), void *args, size_t size, double seconds)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	pthread_t threads[BENCH_MAX_CLIENTS];
	uint64_t start, end;

	pthread_barrier_init(&start_barrier, NULL, n + 1);
	atomic_store(&stop_flag, false);
	for (int i = 0; i < n; i++)
		pthread_create(&threads[i], NULL, fn, (char *)args + i * size);
	pthread_barrier_wait(&start_barrier);
	start = bench_now_ns();
	nanosleep(&ts, NULL);
	atomic_store(&stop_flag, true);
	end = bench_now_ns();
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&start_barrier);
	return end - start;
}

static void *worker_main(void *arg)
{
	struct bench_worker *w = arg;
	const struct bench_op *op = w->op;
	int r = 0;

	bench_pin(w->cpu);
	if (op->raw) {
		w->fd = bench_connect(op->path);
		r = w->fd < 0 ? w->fd : 0;
	} else {
		r = rdmamem_client_connect(op->path, &w->client);
	}
	if (r == 0 && op->setup)
		r = op->setup(w);
	bench_start_wait();
	if (r < 0) {
		w->error = r;
		return NULL;
	}
	while (w->n < MAX_SAMPLES && !bench_stopped()) {
		uint64_t t0 = bench_now_ns(), dt;

		r = op->run(w);
		if (r < 0) {
			w->error = r;
			break;
		}
		dt = bench_now_ns() - t0;
		w->samples[w->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
	}
	if (op->teardown)
		op->teardown(w);
	if (op->raw)
		close(w->fd);
	rdmamem_client_close(w->client);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct bench_result bench_measure(const struct bench_op *op, int n_clients, int cpu, double seconds)
{
	static struct bench_worker workers[BENCH_MAX_CLIENTS];
	uint32_t *samples[BENCH_MAX_CLIENTS];
	size_t counts[BENCH_MAX_CLIENTS];
	uint64_t ns;

	for (int i = 0; i < n_clients; i++) {
		struct bench_worker *w = &workers[i];

		*w = (struct bench_worker){ .index = i, .cpu = cpu, .fd = -1, .op = op };
		w->samples = malloc(MAX_SAMPLES * sizeof(uint32_t));
		if (!w->samples)
			exit(1);
	}
	ns = bench_run_threads(n_clients, worker_main, workers, sizeof(workers[0]), seconds);
	for (int i = 0; i < n_clients; i++)
		if (workers[i].error) {
			fprintf(stderr, "bench: client %d failed: %s\n", i,
				strerror(-workers[i].error));
			exit(1);
		}
	for (int i = 0; i < n_clients; i++) {
		samples[i] = workers[i].samples;
		counts[i] = workers[i].n;
	}
	return bench_summarize(samples, counts, n_clients, ns);
}

struct bench_result bench_summarize(uint32_t **samples, const size_t *n, int n_sets, uint64_t ns)
{
	struct bench_result res = {};
	size_t total = 0;
	uint32_t *all;

	for (int i = 0; i < n_sets; i++)
		total += n[i];
	all = malloc((total ? total : 1) * sizeof(uint32_t));
	if (!all)
		exit(1);
	total = 0;
	for (int i = 0; i < n_sets; i++) {
		memcpy(all + total, samples[i], n[i] * sizeof(uint32_t));
		total += n[i];
		free(samples[i]);
	}
	if (total > 0) {
		qsort(all, total, sizeof(uint32_t), cmp_u32);
		res.per_sec = total / (ns / 1e9);
		res.p50_us = all[total / 2] / 1000.0;
		res.p99_us = all[(size_t)(total * 0.99)] / 1000.0;
	}
	res.n = total;
	free(all);
	return res;
}

void bench_header(const char *group_title)
{
	printf("%-22s %-34s %12s %9s %9s   %s\n", group_title, "system", "per s", "p50 us",
	       "p99 us", "ratio per s, p50 (vs anchor)");
}

void bench_row(const char *group, const char *what, const struct bench_result *r,
	       const struct bench_result *anchor)
{
	printf("%-22s %-34s %12.0f %9.1f %9.1f", group, what, r->per_sec, r->p50_us, r->p99_us);
	if (anchor && anchor->per_sec > 0 && anchor->p50_us > 0)
		printf("   %5.2f     %5.2f", r->per_sec / anchor->per_sec,
		       r->p50_us / anchor->p50_us);
	printf("\n");
	fflush(stdout);
}
