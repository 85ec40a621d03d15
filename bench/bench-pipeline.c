/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined calls beside redis-server, measured in the same run with the same
 * client and the same CPU placement.
 *
 * Each client thread holds one connection and keeps depth calls in flight:
 * it writes depth calls at once, then, whenever a read completes k replies,
 * writes k more in one write. The very same client speaks to rdmamemd (the
 * Ping call, raw Varlink bytes: the daemon's own cost, no library) and to
 * redis-server (PING in RESP, "+PONG" back) on a private Unix socket, so the
 * ratio compares the two servers, not two clients. redis-benchmark's own
 * figure for -P 16 -c 8 PING is printed below each placement as a cross-check.
 *
 * redis-benchmark is a different client: one thread drives all N connections
 * and sends a connection's next D calls only once all D replies of the last
 * batch are in. Its figure comes out higher than our thread-per-client shape
 * gives redis-server, so the same shape is here too ("one-thread batch
 * client", rows N x D for N > 1 and D > 1), again against both servers: that
 * row is the like-for-like comparison with redis-benchmark's figure.
 *
 * Placements: cpu0 (server and clients on CPU 0), cpu0/1+ (server on CPU 0,
 * clients on the other CPUs, round-robin: all on CPU 1 on a 2-CPU machine),
 * unpinned (the scheduler's choice).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"
#include "util/macro.h"

#define DEPTH_MAX 64

#define SAMPLES_MAX (4U * 1024U * 1024U)

struct target {
	const char *name;
	const char *path;
	const char *call; /* one call, its terminator included */
	size_t call_len;
	char reply_end; /* the last byte of every reply */
};

struct placement {
	const char *name;
	int server_cpu;  /* -1: unpinned */
	int client_cpu0; /* first client CPU; clients go round-robin from it */
};

struct worker {
	const struct target *t;
	int cpu, depth;
	int n_conns;       /* > 0: one thread, n_conns connections, batch by batch */
	uint32_t *samples; /* nanoseconds from a call's write to its reply */
	size_t n;
	int error;
};

static struct bench_args args = { .seconds = 1.0 };
static long n_cpus;

static const char resp_ping[] = "PING\r\n";

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One reply's time since its call's write, while there is room. */
static void add_sample(struct worker *w, uint64_t dt)
{
	if (w->n < SAMPLES_MAX)
		w->samples[w->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct target *t = w->t;
	uint64_t sent_at[DEPTH_MAX];
	char calls[DEPTH_MAX * 64], buf[65536];
	unsigned head = 0, in_flight;
	int fd;

	for (int i = 0; i < w->depth; i++)
		memcpy(calls + i * t->call_len, t->call, t->call_len);
	bench_pin(w->cpu);
	fd = bench_connect(t->path);
	bench_start_wait();
	if (fd < 0) {
		w->error = fd;
		return NULL;
	}

	for (int i = 0; i < w->depth; i++)
		sent_at[i] = bench_now_ns();
	in_flight = (unsigned)w->depth;
	if (write_all(fd, calls, w->depth * t->call_len) < 0)
		w->error = -EIO;
	while (!w->error && !bench_stopped()) {
		ssize_t r = read(fd, buf, sizeof(buf));
		unsigned done = 0;
		uint64_t now;

		if (r <= 0) {
			w->error = r < 0 ? -errno : -ECONNRESET;
			break;
		}
		now = bench_now_ns();
		for (ssize_t k = 0; k < r; k++) {
			if (buf[k] != t->reply_end)
				continue;
			add_sample(w, now - sent_at[head]);
			head = (head + 1) % (unsigned)w->depth;
			done++;
		}
		if (done > in_flight) {
			w->error = -EPROTO;
			break;
		}
		/* Always depth in flight: the slots just answered, the ones
		 * before head, are the calls sent next, in order. */
		for (unsigned i = 0; i < done; i++)
			sent_at[(head + in_flight - done + i) % in_flight] = now;
		if (done > 0 && write_all(fd, calls, done * t->call_len) < 0)
			w->error = -EIO;
	}
	close(fd);
	return NULL;
}

/*
 * redis-benchmark's shape: one thread, w->n_conns connections, each sending
 * its next depth calls in one write once every reply of its last batch came.
 * A reply's sample is the time since its batch was written.
 */
static void *batch_main(void *arg)
{
	struct worker *w = arg;
	const struct target *t = w->t;
	int fds[BENCH_MAX_CLIENTS], ep = epoll_create1(EPOLL_CLOEXEC);
	unsigned pending[BENCH_MAX_CLIENTS];
	uint64_t sent_at[BENCH_MAX_CLIENTS];
	char calls[DEPTH_MAX * 64], buf[65536];
	int n = w->n_conns;

	for (int i = 0; i < w->depth; i++)
		memcpy(calls + i * t->call_len, t->call, t->call_len);
	bench_pin(w->cpu);
	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

		fds[i] = bench_connect(t->path);
		if (fds[i] < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0)
			w->error = -EIO;
	}
	bench_start_wait();
	for (int i = 0; i < n && !w->error; i++) {
		pending[i] = (unsigned)w->depth;
		sent_at[i] = bench_now_ns();
		if (write_all(fds[i], calls, w->depth * t->call_len) < 0)
			w->error = -EIO;
	}
	while (!w->error && !bench_stopped()) {
		struct epoll_event evs[BENCH_MAX_CLIENTS];
		int k = epoll_wait(ep, evs, n, 100);

		for (int e = 0; e < k && !w->error; e++) {
			int i = (int)evs[e].data.u32;
			ssize_t r = read(fds[i], buf, sizeof(buf));
			uint64_t now = bench_now_ns();

			if (r <= 0) {
				w->error = r < 0 ? -errno : -ECONNRESET;
				break;
			}
			for (ssize_t b = 0; b < r; b++) {
				if (buf[b] != t->reply_end)
					continue;
				if (pending[i] == 0) {
					w->error = -EPROTO;
					break;
				}
				pending[i]--;
				add_sample(w, now - sent_at[i]);
			}
			if (pending[i] == 0 && !w->error) {
				pending[i] = (unsigned)w->depth;
				sent_at[i] = now;
				if (write_all(fds[i], calls, w->depth * t->call_len) < 0)
					w->error = -EIO;
			}
		}
	}
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (ep >= 0)
		close(ep);
	return NULL;
}

static int client_cpu(const struct placement *p, int i)
{
	if (p->client_cpu0 < 0)
		return -1;
	if (p->client_cpu0 == 0 || n_cpus < 2)
		return 0;
	return 1 + i % (int)(n_cpus - 1);
}

/* n_clients threads of one connection each, or (one_thread) one thread of
 * n_clients connections, batch by batch. */
static struct bench_result measure(const struct target *t, const struct placement *p, int n_clients,
				   int depth, bool one_thread)
{
	static struct worker workers[BENCH_MAX_CLIENTS];
	uint32_t *samples[BENCH_MAX_CLIENTS];
	size_t counts[BENCH_MAX_CLIENTS];
	int n_threads = one_thread ? 1 : n_clients;
	uint64_t ns;

	for (int i = 0; i < n_threads; i++) {
		struct worker *w = &workers[i];

		*w = (struct worker){ .t = t,
				      .cpu = client_cpu(p, i),
				      .depth = depth,
				      .n_conns = one_thread ? n_clients : 0 };
		w->samples = malloc(SAMPLES_MAX * sizeof(uint32_t));
		if (!w->samples)
			exit(1);
	}
	ns = bench_run_threads(n_threads, one_thread ? batch_main : worker_main, workers,
			       sizeof(workers[0]), args.seconds);
	for (int i = 0; i < n_threads; i++) {
		if (workers[i].error) {
			fprintf(stderr, "bench: %s client %d failed: %s\n", t->name, i,
				strerror(-workers[i].error));
			exit(1);
		}
		samples[i] = workers[i].samples;
		counts[i] = workers[i].n;
	}
	/* Replies that came within the timed window, over its length: a
	 * worker stops at its first read after the end. */
	return bench_summarize(samples, counts, n_threads, ns);
}

static bool have_program(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* redis-server on path, no persistence, no TCP, pinned to cpu (or not). */
static pid_t redis_start(const char *path, int cpu)
{
	pid_t pid = fork();

	if (pid == 0) {
		const char *argv[] = { "redis-server", "--port",     "0",
				       "--unixsocket", path,         "--unixsocketperm",
				       "700",          "--save",     "",
				       "--appendonly", "no",         "--daemonize",
				       "no",           "--loglevel", "warning",
				       "--logfile",    "/dev/null",  "--dir",
				       bench_dir(),    NULL };

		bench_child(cpu);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	bench_wait_listening(path, "redis-server");
	return pid;
}

/*
 * redis-benchmark -P 16 -c 8 -t ping on path, pinned to cpu: prints what it
 * measured for PING_INLINE and PING_MBULK.
 */
static void redis_benchmark(const char *path, int cpu, const char *group)
{
	char cmd[512], line[256], pin[32] = "";
	FILE *f;

	if (cpu >= 0)
		snprintf(pin, sizeof(pin), "taskset -c %d ", cpu);
	snprintf(cmd, sizeof(cmd),
		 "%sredis-benchmark -s '%s' -P 16 -c 8 -n %.0f -t ping --csv 2>/dev/null", pin,
		 path, args.seconds * 1000000.0);
	f = popen(cmd, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char test[32];
		double rps;

		if (sscanf(line, "\"%31[^\"]\",\"%lf\"", test, &rps) == 2)
			printf("%-22s %-34s %12.0f\n", group,
			       strcmp(test, "PING_INLINE") == 0 ? "redis-benchmark PING_INLINE" :
								  "redis-benchmark PING_MBULK",
			       rps);
	}
	pclose(f);
}

int main(int argc, char **argv)
{
	static const struct placement placements[] = {
		{ "cpu0", 0, 0 },
		{ "cpu0/1+", 0, 1 },
		{ "unpinned", -1, -1 },
	};
	static const struct {
		int clients, depth;
	} shapes[] = { { 1, 1 }, { 1, 16 }, { 8, 1 }, { 8, 16 } };
	char redis_path[128], daemon_path[128];
	bool redis;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(redis_path, sizeof(redis_path), "%s/redis.sock", bench_dir());
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());
	redis = have_program("redis-server");

	printf("\n== Pipelined calls: N clients, each with D calls in flight; %.1f s per row; "
	       "%ld CPUs online\n",
	       args.seconds, n_cpus);
	printf("anchor = redis-server PING over a Unix socket, the same client, same run\n");
	printf("cpu0 = server and clients on CPU 0; cpu0/1+ = server on CPU 0, clients on the "
	       "others; unpinned = scheduler's\n");
	printf("1-thread batch = one client thread drives all N connections and sends a "
	       "connection's next D calls\nonce its last D replies are in, as redis-benchmark "
	       "does (its figure closes each placement)\n");
	printf("p50/p99: from a call's write to its reply\n\n");
	if (!redis)
		printf("(redis-server not found: no anchor; `make deps` installs it)\n\n");
	bench_header("placement, N x D");

	for (size_t p = 0; p < ELEMENTSOF(placements); p++) {
		const struct placement *pl = &placements[p];
		const struct target rt = { "redis", redis_path, resp_ping, sizeof(resp_ping) - 1,
					   '\n' };
		const struct target dt = { "rdmamemd", daemon_path, BENCH_PING_CALL,
					   sizeof(BENCH_PING_CALL), '\0' };
		pid_t rs = redis ? redis_start(redis_path, pl->server_cpu) : 0;
		pid_t d = bench_daemon_start(args.daemon, daemon_path, pl->server_cpu, NULL);

		for (size_t s = 0; s < ELEMENTSOF(shapes); s++) {
			struct bench_result a = {}, r;
			char group[64];

			snprintf(group, sizeof(group), "%s, %d x %d", pl->name, shapes[s].clients,
				 shapes[s].depth);
			if (redis) {
				a = measure(&rt, pl, shapes[s].clients, shapes[s].depth, false);
				bench_row(group, "anchor: redis-server PING", &a, NULL);
			}
			r = measure(&dt, pl, shapes[s].clients, shapes[s].depth, false);
			bench_row(group, "rdmamemd Ping, raw client", &r, redis ? &a : NULL);
			if (shapes[s].clients == 1 || shapes[s].depth == 1)
				continue;
			if (redis) {
				a = measure(&rt, pl, shapes[s].clients, shapes[s].depth, true);
				bench_row(group, "anchor: redis-server, 1-thread batch", &a, NULL);
			}
			r = measure(&dt, pl, shapes[s].clients, shapes[s].depth, true);
			bench_row(group, "rdmamemd Ping, 1-thread batch", &r, redis ? &a : NULL);
		}
		if (redis && have_program("redis-benchmark")) {
			char group[64];

			snprintf(group, sizeof(group), "%s, -c 8 -P 16", pl->name);
			redis_benchmark(redis_path, client_cpu(pl, 0), group);
		}
		if (redis)
			bench_stop(rs);
		bench_stop(d);
	}
	bench_cleanup();
	return 0;
}
