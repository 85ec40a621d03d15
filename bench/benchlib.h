/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the benchmarks share: starting rdmamemd and the raw-socket anchor
 * server, CPU placement, timed round-trip loops over N client threads, and
 * the table rows that put each figure beside its anchor.
 */
#ifndef RDMAMEM_BENCHLIB_H
#define RDMAMEM_BENCHLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rdmamem.h"

#define BENCH_MAX_CLIENTS 64

struct bench_worker {
	int index;
	int cpu;                       /* -1: unpinned */
	int fd;                        /* raw connection, when the op uses one */
	struct rdmamem_client *client; /* library connection, when it uses one */
	void *state;                   /* the op's own */
	const struct bench_op *op;
	uint32_t *samples; /* nanoseconds per round trip */
	size_t n;
	int error;
};

struct bench_op {
	const char *path; /* socket to connect to */
	int raw;          /* 1: w->fd, 0: w->client */
	/* Optional, per worker, before the clock starts. */
	int (*setup)(struct bench_worker *w);
	/* One measured round trip. */
	int (*run)(struct bench_worker *w);
	void (*teardown)(struct bench_worker *w);
	void *arg;
};

struct bench_result {
	double per_sec;
	double p50_us, p99_us;
	size_t n;
};

/*
 * The command line every benchmark takes: --daemon PATH (required),
 * --seconds N per row, and --device NAME where device starts non-NULL (as
 * its default). Returns 0, or 2, the exit status, after printing the usage.
 */
struct bench_args {
	const char *daemon;
	double seconds;
	const char *device;
};
int bench_parse_args(int argc, char **argv, struct bench_args *args);

uint64_t bench_now_ns(void);
/* Bytes per nanosecond (GB/s, 10^9 B/s); 0 when no time passed. */
double bench_gbps(uint64_t bytes, uint64_t ns);
/* "N MiB" from 1 MiB on, else "N KiB", into out; returns out. */
const char *bench_size_label(uint64_t size, char out[static 24]);
void bench_pin(int cpu);
/* In a server the benchmark forked: it ends with the benchmark, on cpu. */
void bench_child(int cpu);

/* A temporary directory for sockets, removed by bench_cleanup(). */
const char *bench_dir(void);
void bench_cleanup(void);

/* rdmamemd on path, pinned to cpu (or not); extra args NULL-terminated. */
pid_t bench_daemon_start(const char *daemon, const char *path, int cpu, const char *const *extra);
/* Returns once path accepts connections; exits, saying what did not
 * start, after 5 s. */
void bench_wait_listening(const char *path, const char *what);
/*
 * The anchor: one epoll loop, like the daemon, answering every NUL-terminated
 * message with reply_len bytes (the last a NUL). No JSON, no work.
 */
pid_t bench_anchor_start(const char *path, int cpu, size_t reply_len);
void bench_stop(pid_t pid);

/* Sends req[0..req_len) and reads reply_len bytes. */
int bench_raw_round_trip(int fd, const void *req, size_t req_len, size_t reply_len);

/* A Ping on the wire and the size of its reply, each with its NUL: what the
 * raw clients send and read, without the library. */
#define BENCH_PING_CALL "{\"method\":\"io.rdmamemd.Ping\"}"
#define BENCH_PING_REPLY_SIZE sizeof("{\"parameters\":{}}")
/* One raw Ping on w's connection (w->fd). */
int bench_raw_ping(struct bench_worker *w);
int bench_connect(const char *path);

/*
 * Runs fn(args + i * size) on n threads (at most BENCH_MAX_CLIENTS). Each
 * calls bench_start_wait() once set up and works until bench_stopped(),
 * which turns true seconds after the last one was ready; returns that
 * window in nanoseconds, once every thread has returned.
 */
uint64_t bench_run_threads(int n, void *(*fn)(void *), void *args, size_t size, double seconds);
void bench_start_wait(void);
bool bench_stopped(void);

/* Runs op on n_clients threads for seconds; each run() is one sample. */
struct bench_result bench_measure(const struct bench_op *op, int n_clients, int cpu,
				  double seconds);

/* per_sec, p50 and p99 of n_sets sets of samples (nanoseconds, each set
 * malloc'ed, freed here) taken over ns nanoseconds. */
struct bench_result bench_summarize(uint32_t **samples, const size_t *n, int n_sets, uint64_t ns);

/* One table row: figures, and their ratio to anchor when not NULL. */
void bench_row(const char *group, const char *what, const struct bench_result *r,
	       const struct bench_result *anchor);
void bench_header(const char *group_title);

#endif
