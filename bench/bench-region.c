/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host region benchmarks, each beside its anchor measured in the same run:
 *
 * - Copy bandwidth between two regions, 4 KiB to 1 GiB, beside a
 *   single-thread memcpy between the same two memfd mappings in this process.
 * - Read, Write and Copy (between two regions of 1 MiB) round trips at 64 B
 *   and 4 KiB, beside a raw Unix-socket ping-pong of the very same request
 *   and reply sizes.
 * - Lock+Unlock pairs per second, uncontended and with 8 clients contending
 *   for one region, beside two raw ping-pongs of the same sizes per pair.
 * - The floor of both tables: the daemon's Ping through the library (two per
 *   pair), in the same placement: what a call doing nothing reaches.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "benchlib.h"
#include "proto/base64.h"

#define BIG (1ULL << 30)

static struct bench_args args = { .seconds = 1.0 };
static char daemon_path[128], anchor_path[128];

/* A sealed memfd of size bytes, mapped and touched so no page faults are
 * measured. */
static void *memfd_mapped(size_t size, int *ret_fd)
{
	void *addr;

	if (rdmamem_memfd_create("bench", size, ret_fd, &addr) < 0) {
		perror("memfd");
		exit(1);
	}
	memset(addr, 0x5a, size);
	return addr;
}

static void bench_copy(void)
{
	static const uint64_t sizes[] = { 4096, 65536, 1 << 20, 16 << 20, 256 << 20, BIG };
	struct rdmamem_client *c = NULL;
	uint64_t from, to;
	int fa, fb;
	char *a = memfd_mapped(BIG, &fa), *b = memfd_mapped(BIG, &fb);

	if (rdmamem_client_connect(daemon_path, &c) < 0 ||
	    rdmamem_register(c, fa, 0, 0, &from) < 0 || rdmamem_register(c, fb, 0, 0, &to) < 0) {
		fprintf(stderr, "bench: register: %s\n", rdmamem_client_error_message(c));
		exit(1);
	}
	/* The first Copy after Register fills the daemon's page tables for
	 * both mappings: worth knowing, not what the table measures. */
	{
		struct rdmamem_copy cp = { .from_region = from,
					   .to_region = to,
					   .length = BIG,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };
		uint64_t t0 = bench_now_ns();

		if (rdmamem_copy(c, &cp) < 0)
			exit(1);
		printf("\nfirst 1 GiB Copy after Register (daemon page faults): %.2f GB/s\n",
		       bench_gbps(BIG, bench_now_ns() - t0));
	}

	printf("\n== Copy bandwidth between two 1 GiB regions (GB/s = 10^9 B/s), %.1f s per row\n",
	       args.seconds);
	printf("anchor = single-thread memcpy between the same two memfd mappings in one process\n\n");
	printf("%-10s %14s %14s %12s %8s\n", "size", "memcpy GB/s", "Copy GB/s", "Copy calls/s",
	       "ratio");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t size = sizes[i], n_a = 0, n_d = 0, t0, ta, td;
		struct rdmamem_copy cp = { .from_region = from,
					   .to_region = to,
					   .length = size,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };
		char label[32];

		/* Warm up both: page tables, caches, the pool's threads. */
		memcpy(b, a, size);
		if (rdmamem_copy(c, &cp) < 0)
			exit(1);

		t0 = bench_now_ns();
		do {
			memcpy(b, a, size);
			n_a++;
		} while ((ta = bench_now_ns() - t0) < args.seconds * 1e9 || n_a < 3);
		__asm__ volatile("" ::"r"(b) : "memory");

		t0 = bench_now_ns();
		do {
			if (rdmamem_copy(c, &cp) < 0) {
				fprintf(stderr, "bench: copy: %s\n",
					rdmamem_client_error_message(c));
				exit(1);
			}
			n_d++;
		} while ((td = bench_now_ns() - t0) < args.seconds * 1e9 || n_d < 3);

		printf("%-10s %14.2f %14.2f %12.0f %8.2f\n", bench_size_label(size, label),
		       bench_gbps(size * n_a, ta), bench_gbps(size * n_d, td), n_d / (td / 1e9),
		       bench_gbps(size * n_d, td) / bench_gbps(size * n_a, ta));
		fflush(stdout);
	}
	rdmamem_client_close(c);
	munmap(a, BIG);
	munmap(b, BIG);
	close(fa);
	close(fb);
}

enum transfer_kind { T_READ, T_WRITE, T_COPY };

/* One region every worker uses (Copy: two), registered by the worker's own
 * connection. */
struct transfer_arg {
	char *request;
	size_t request_len;
	size_t reply_len;
	size_t size;
	enum transfer_kind kind;
};

static int lib_setup(struct bench_worker *w)
{
	struct transfer_arg *t = w->op->arg;
	uint64_t *id = calloc(3, sizeof(uint64_t));
	int fd, r = 0;

	w->state = id;
	for (int i = 0; i < (t->kind == T_COPY ? 2 : 1) && r >= 0; i++) {
		r = rdmamem_memfd_create("bench", 1 << 20, &fd, NULL);
		if (r < 0)
			return r;
		r = rdmamem_register(w->client, fd, 0, 0, &id[i]);
		close(fd);
	}
	id[2] = t->size;
	return r;
}

static int lib_transfer(struct bench_worker *w)
{
	struct transfer_arg *t = w->op->arg;
	uint64_t *id = w->state;
	static __thread char buf[65536];
	struct rdmamem_copy cp = { .from_region = id[0],
				   .to_region = id[1],
				   .length = t->size,
				   .mode = RDMAMEM_LOCK_EXCLUSIVE };

	if (t->kind == T_COPY)
		return rdmamem_copy(w->client, &cp);
	if (t->kind == T_WRITE)
		return rdmamem_write(w->client, id[0], 0, buf, t->size, RDMAMEM_LOCK_EXCLUSIVE, 0);
	return rdmamem_read(w->client, id[0], 0, buf, t->size, 0);
}

static void lib_teardown(struct bench_worker *w)
{
	free(w->state);
}

static int raw_transfer(struct bench_worker *w)
{
	struct transfer_arg *t = w->op->arg;

	return bench_raw_round_trip(w->fd, t->request, t->request_len, t->reply_len);
}

/*
 * The exact request the library sends for a transfer of t->size bytes on
 * region id (same fields, same order), and the size of the daemon's answer,
 * learnt by sending it once.
 */
static void learn_sizes(struct transfer_arg *t, uint64_t id)
{
	size_t got = 0, cap = 1 << 16;
	char *raw = calloc(1, t->size), *data = malloc(base64_encoded_len(t->size) + 1);
	char *reply = malloc(cap);
	int fd = bench_connect(daemon_path), n;

	base64_encode(raw, t->size, data);
	free(raw);
	if (t->kind == T_COPY)
		n = asprintf(
			&t->request,
			"{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{\"region\":"
			"\"%llu\",\"offset\":\"0\"},\"to\":{\"region\":\"%llu\",\"offset\":"
			"\"8192\"},\"length\":\"%zu\",\"mode\":\"exclusive\"}}",
			(unsigned long long)id, (unsigned long long)id, t->size);
	else if (t->kind == T_WRITE)
		n = asprintf(&t->request,
			     "{\"method\":\"io.rdmamemd.Write\",\"parameters\":{\"data\":\"%s\","
			     "\"region\":\"%llu\",\"offset\":\"0\",\"mode\":\"exclusive\"}}",
			     data, (unsigned long long)id);
	else
		n = asprintf(&t->request,
			     "{\"method\":\"io.rdmamemd.Read\",\"parameters\":{\"region\":\"%llu\","
			     "\"offset\":\"0\",\"length\":\"%zu\"}}",
			     (unsigned long long)id, t->size);
	if (n < 0 || fd < 0)
		exit(1);
	t->request_len = (size_t)n + 1;
	if (write(fd, t->request, t->request_len) != (ssize_t)t->request_len)
		exit(1);
	while (got == 0 || reply[got - 1] != '\0') {
		ssize_t r;

		if (got == cap && !(reply = realloc(reply, cap *= 2)))
			exit(1);
		r = read(fd, reply + got, cap - got);

		if (r <= 0)
			exit(1);
		got += r;
	}
	if (strstr(reply, "\"error\"")) {
		fprintf(stderr, "bench: %s\n", reply);
		exit(1);
	}
	t->reply_len = got;
	close(fd);
	free(data);
	free(reply);
}

static int ping_once(struct bench_worker *w)
{
	return rdmamem_ping(w->client);
}

static int ping_twice(struct bench_worker *w)
{
	int r = rdmamem_ping(w->client);

	return r < 0 ? r : rdmamem_ping(w->client);
}

/* A call's floor through the daemon: a Ping (two per Lock+Unlock pair) through
 * the library, the same placement, the same run. */
static struct bench_result ping_floor(int cpu, int n, bool pair)
{
	const struct bench_op op = { .path = daemon_path, .run = pair ? ping_twice : ping_once };

	return bench_measure(&op, n, cpu, args.seconds);
}

static void bench_transfers(int cpu, const char *placement)
{
	static const size_t sizes[] = { 64, 4096, 65536 };
	struct rdmamem_client *c = NULL;
	uint64_t id;
	int fd;

	if (rdmamem_client_connect(daemon_path, &c) < 0 ||
	    rdmamem_memfd_create("bench", 1 << 20, &fd, NULL) < 0 ||
	    rdmamem_register(c, fd, 0, 0, &id) < 0 || rdmamem_share(c, id, 0, 0) < 0) {
		fprintf(stderr, "bench: setup failed\n");
		exit(1);
	}
	close(fd);

	static const char *const names[] = { "Read", "Write", "Copy" };

	for (enum transfer_kind kind = T_READ; kind <= T_COPY; kind++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			struct transfer_arg t = { .size = sizes[i], .kind = kind };
			struct bench_result a, r;
			char group[64], what[64];
			pid_t anchor;

			if (kind == T_COPY && i == 0) {
				r = ping_floor(cpu, 1, false);
				snprintf(group, sizeof(group), "%s, no payload", placement);
				bench_row(group, "floor: rdmamemd Ping, librdmamem", &r, NULL);
			}
			learn_sizes(&t, id);
			anchor = bench_anchor_start(anchor_path, cpu, t.reply_len);
			{
				const struct bench_op raw_anchor = { .path = anchor_path,
								     .raw = 1,
								     .run = raw_transfer,
								     .arg = &t };
				const struct bench_op lib = { .path = daemon_path,
							      .setup = lib_setup,
							      .run = lib_transfer,
							      .teardown = lib_teardown,
							      .arg = &t };

				snprintf(group, sizeof(group), "%s, %zu B", placement, t.size);
				a = bench_measure(&raw_anchor, 1, cpu, args.seconds);
				snprintf(what, sizeof(what), "anchor: raw %zu B / %zu B",
					 t.request_len, t.reply_len);
				bench_row(group, what, &a, NULL);
				r = bench_measure(&lib, 1, cpu, args.seconds);
				snprintf(what, sizeof(what), "rdmamemd %s, librdmamem",
					 names[kind]);
				bench_row(group, what, &r, &a);
				/* librdmamem stages reads and writes from 4 KiB
				 * on (client/staging.c): the same call with its
				 * bytes as base64, as it was, beside it. */
				if (kind != T_COPY && t.size >= 4096) {
					const struct bench_op base64 = { .path = daemon_path,
									 .raw = 1,
									 .run = raw_transfer,
									 .arg = &t };

					r = bench_measure(&base64, 1, cpu, args.seconds);
					snprintf(what, sizeof(what), "rdmamemd %s, base64 (raw)",
						 names[kind]);
					bench_row(group, what, &r, &a);
				}
			}
			bench_stop(anchor);
			free(t.request);
		}
	rdmamem_client_close(c);
}

/* Lock+Unlock: every worker on one shared region (contended) or its own. */
struct lock_arg {
	uint64_t shared_region; /* 0: each worker registers its own */
	size_t request_len, reply_len;
};

static int lock_setup(struct bench_worker *w)
{
	struct lock_arg *l = w->op->arg;
	uint64_t *id = malloc(sizeof(uint64_t));
	int fd, r;

	w->state = id;
	if (l->shared_region) {
		*id = l->shared_region;
		return 0;
	}
	r = rdmamem_memfd_create("bench", 4096, &fd, NULL);
	if (r < 0)
		return r;
	r = rdmamem_register(w->client, fd, 0, 0, id);
	close(fd);
	return r;
}

static int lock_pair(struct bench_worker *w)
{
	uint64_t lease, *id = w->state;
	int r;

	r = rdmamem_lock(w->client, *id, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease);
	if (r < 0)
		return r;
	return rdmamem_unlock(w->client, lease);
}

static int raw_pair(struct bench_worker *w)
{
	struct lock_arg *l = w->op->arg;
	char req[256];
	int r;

	/* One message: filler, then its terminator. */
	memset(req, 'x', l->request_len - 1);
	req[l->request_len - 1] = '\0';
	r = bench_raw_round_trip(w->fd, req, l->request_len, l->reply_len);
	return r < 0 ? r : bench_raw_round_trip(w->fd, req, l->request_len, l->reply_len);
}

static void bench_locks(int cpu, const char *placement)
{
	static const char lock_call[] =
		"{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":"
		"\"1\",\"mode\":\"exclusive\",\"timeout_ms\":-1}}";
	static const char lock_reply[] =
		"{\"parameters\":{\"lease\":\"1\",\"mode\":\"exclusive\"}}";
	struct lock_arg own = { .request_len = sizeof(lock_call), .reply_len = sizeof(lock_reply) };
	struct lock_arg shared = own;
	struct rdmamem_client *c = NULL;
	struct bench_result a, r;
	pid_t anchor;
	char group[64];
	int fd;

	if (rdmamem_client_connect(daemon_path, &c) < 0 ||
	    rdmamem_memfd_create("bench", 4096, &fd, NULL) < 0 ||
	    rdmamem_register(c, fd, 0, 0, &shared.shared_region) < 0) {
		fprintf(stderr, "bench: setup failed\n");
		exit(1);
	}
	close(fd);
	anchor = bench_anchor_start(anchor_path, cpu, own.reply_len);

	for (int n = 1; n <= 8; n += 7) {
		const struct bench_op raw_anchor = { anchor_path, 1, NULL, raw_pair, NULL, &own };
		const struct bench_op lib = { .path = daemon_path,
					      .setup = lock_setup,
					      .run = lock_pair,
					      .arg = n == 1 ? &own : &shared };

		snprintf(group, sizeof(group), "%s, %d client%s", placement, n, n > 1 ? "s" : "");
		a = bench_measure(&raw_anchor, n, cpu, args.seconds);
		bench_row(group, "anchor: 2 raw ping-pongs", &a, NULL);
		r = ping_floor(cpu, n, true);
		bench_row(group, "floor: 2 rdmamemd Pings", &r, &a);
		r = bench_measure(&lib, n, cpu, args.seconds);
		bench_row(group, n == 1 ? "Lock+Unlock, uncontended" : "Lock+Unlock, one region",
			  &r, &a);
	}
	bench_stop(anchor);
	rdmamem_client_close(c);
}

int main(int argc, char **argv)
{
	/* RDMAMEM_BENCH_DAEMON_DEBUG=1: the first daemon (the Copy bandwidth
	 * table's) logs where each pooled transfer's time goes (debug level,
	 * on this stderr). */
	const char *debug[] = { "--max-pinned-bytes-per-uid", "8589934592",
				getenv("RDMAMEM_BENCH_DAEMON_DEBUG") ? "--log-level" : NULL,
				"debug", NULL };
	const char *extra[] = { "--max-pinned-bytes-per-uid", "8589934592", NULL };
	pid_t d;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());
	snprintf(anchor_path, sizeof(anchor_path), "%s/anchor.sock", bench_dir());

	d = bench_daemon_start(args.daemon, daemon_path, -1, debug);
	bench_copy();
	bench_stop(d);

	printf("\n== Read, Write and Copy (between two regions) round trips (librdmamem, 1 client), "
	       "%.1f s per row\n",
	       args.seconds);
	printf("anchor = raw Unix-socket ping-pong of the sizes of the call with its payload in "
	       "base64;\nlibrdmamem moves Read and Write payloads of 4 KiB and more through its "
	       "staging region\n(a Copy, no payload on the socket); 'base64 (raw)' is the call as "
	       "the anchor sizes it, sent to the daemon\n\n");
	bench_header("placement, size");
	d = bench_daemon_start(args.daemon, daemon_path, 0, extra);
	bench_transfers(0, "cpu0");
	bench_stop(d);
	d = bench_daemon_start(args.daemon, daemon_path, -1, extra);
	bench_transfers(-1, "unpinned");
	bench_stop(d);

	printf("\n== Lock+Unlock pairs (exclusive), %.1f s per row\n", args.seconds);
	printf("anchor = two raw ping-pongs of the Lock call's sizes per pair\n\n");
	bench_header("placement, clients");
	d = bench_daemon_start(args.daemon, daemon_path, 0, extra);
	bench_locks(0, "cpu0");
	bench_stop(d);
	d = bench_daemon_start(args.daemon, daemon_path, -1, extra);
	bench_locks(-1, "unpinned");
	bench_stop(d);

	bench_cleanup();
	return 0;
}
