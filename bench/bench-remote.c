/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transfer engine's own cost on the host, beside a Ping round trip
 * through rdmamemd measured in the same run: the WR plan (daemon/remote/
 * wr_plan.c) and the completion window (window.c) over a fake link that
 * completes every post at once, so what is timed is the daemon's logic per
 * descriptor, no NIC.
 *
 * Rows:
 * - a 256-op prepared post: 256 blocks picked by index from a prepared list
 *   of 4096 (non-adjacent 4 KiB ranges, as a KV cache's blocks), planned,
 *   posted through a window of 128 and retired. Goal: ≤ 2 Ping round trips.
 * - a 100,000-op batch, separate 4 KiB ranges (100,000 WRs) and adjacent
 *   ones (coalesced to a few WRs): accepted (planned) and posted. Goal:
 *   ≤ 10 ms.
 * What is not in these rows: parsing the Transfer call, the locks, verbs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "daemon/remote/window.h"

#define PREPARED 4096
#define POST_OPS 256
#define BIG_OPS 100000

static const char ping_call[] = "{\"method\":\"io.rdmamemd.Ping\"}";
static const char ping_reply[] = "{\"parameters\":{}}";

static int raw_ping(struct bench_worker *w)
{
	return bench_raw_round_trip(w->fd, ping_call, sizeof(ping_call), sizeof(ping_reply));
}

/* The instant link: every post is complete by the time post returns; the
 * completion of its last (signalled) WR is handed in right after. */
struct instant_link {
	uint64_t last;
	int posted;
};

static int instant_post(void *link, struct wr *wrs, size_t n)
{
	struct instant_link *l = link;

	l->last = wrs[n - 1].wr_id;
	l->posted = 1;
	return 0;
}

static const struct window_link_ops instant_ops = { .post = instant_post };

static void op_done(void *userdata, struct window_batch *b, uint32_t op,
		    const struct window_status *st)
{
	(void)userdata;
	(void)b;
	(void)op;
	if (st->outcome != WINDOW_OK) {
		fprintf(stderr, "bench-remote: op %u failed\n", op);
		exit(1);
	}
}

static void batch_done(void *userdata, struct window_batch *b)
{
	(void)b;
	*(int *)userdata = 1;
}

static const struct window_batch_ops batch_ops = { .op_done = op_done, .done = batch_done };

struct engine {
	struct wr_plan plan;
	struct wr_keys keys;
	struct window win;
	struct instant_link link;
};

/* Plans ops[0..n), posts them through e's window and retires them. */
static void engine_run(struct engine *e, const struct wr_op *ops, size_t n)
{
	static const struct wr_plan_params pp = { .max_msg = WR_MSG_MAX, .n_paths = 1 };
	struct window *wins[1] = { &e->win };
	struct window_batch b;
	int done = 0;

	if (wr_plan_build(&e->plan, ops, n, &e->keys, 1, &pp) < 0 ||
	    window_batch_init(&b, &e->plan, &batch_ops, &done) < 0) {
		fprintf(stderr, "bench-remote: plan\n");
		exit(1);
	}
	window_batch_start(&b, wins);
	while (!done) {
		struct window_wc wc = { .wr_id = e->link.last };

		e->link.posted = 0;
		window_complete(&e->win, &wc, 1);
	}
	window_batch_fini(&b);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct bench_result result_of(uint64_t *ns, size_t n)
{
	struct bench_result r = { .n = n };

	qsort(ns, n, sizeof(*ns), cmp_u64);
	r.p50_us = (double)ns[n / 2] / 1e3;
	r.p99_us = (double)ns[n * 99 / 100] / 1e3;
	r.per_sec = r.p50_us > 0 ? 1e6 / r.p50_us : 0;
	return r;
}

static struct wr_op block(size_t i, int adjacent)
{
	uint64_t stride = adjacent ? 4096 : 8192;

	return (struct wr_op){ .local_offset = stride * i,
			       .remote_offset = stride * i,
			       .length = 4096,
			       .index = (uint32_t)i,
			       .opcode = WR_WRITE };
}

int main(int argc, char **argv)
{
	static const struct window_params wp = { .depth = 128, .signal_every = 16 };
	struct bench_args args = { .seconds = 1.0 };
	char daemon_path[128];
	struct bench_op ping_op = { .raw = 1, .run = raw_ping };
	struct bench_result ping, post, big;
	struct wr_op *prepared, *ops;
	struct engine e = { .keys = { .local_addr = 1ULL << 40,
				      .remote_addr = 1ULL << 41,
				      .lkey = 1,
				      .rkey = 2 } };
	size_t iters = 20000, big_iters = 30;
	uint64_t *ns;
	pid_t d;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	snprintf(daemon_path, sizeof(daemon_path), "%s/rdmamemd.sock", bench_dir());
	prepared = calloc(PREPARED, sizeof(*prepared));
	ops = calloc(BIG_OPS, sizeof(*ops));
	ns = calloc(iters, sizeof(*ns));
	if (!prepared || !ops || !ns)
		return 1;
	wr_plan_init(&e.plan);
	if (window_init(&e.win, &wp, &instant_ops, &e.link) < 0)
		return 1;

	printf("== Transfer engine (WR plan + window), fake link completing at once; window %u, "
	       "signal every %u\n",
	       wp.depth, wp.signal_every);
	printf("anchor = Ping round trip through rdmamemd (raw client, 1 client, unpinned), same "
	       "run; the engine rows run in this process\n\n");
	bench_header("engine");

	d = bench_daemon_start(args.daemon, daemon_path, -1, NULL);
	ping_op.path = daemon_path;
	ping = bench_measure(&ping_op, 1, -1, args.seconds);
	bench_stop(d);
	bench_row("anchor", "rdmamemd Ping round trip", &ping, NULL);

	/* 256 blocks by index from the prepared list: every 16th, rotating. */
	for (size_t i = 0; i < PREPARED; i++)
		prepared[i] = block(i, 0);
	for (size_t it = 0; it < iters; it++) {
		uint64_t t0 = bench_now_ns();

		for (size_t k = 0; k < POST_OPS; k++)
			ops[k] = prepared[(k * 16 + it) % PREPARED];
		engine_run(&e, ops, POST_OPS);
		ns[it] = bench_now_ns() - t0;
	}
	post = result_of(ns, iters);
	bench_row("256-op prepared post", "plan + window, 256 WRs", &post, &ping);

	for (int adjacent = 0; adjacent <= 1; adjacent++) {
		for (size_t k = 0; k < BIG_OPS; k++)
			ops[k] = block(k, adjacent);
		for (size_t it = 0; it < big_iters; it++) {
			uint64_t t0 = bench_now_ns();

			engine_run(&e, ops, BIG_OPS);
			ns[it] = bench_now_ns() - t0;
		}
		big = result_of(ns, big_iters);
		bench_row("100,000-op batch",
			  adjacent ? "plan + window, coalesced" : "plan + window, 100,000 WRs",
			  &big, &ping);
		printf("%-22s   %zu WRs: %.2f ms p50, %.1f ns per op; goal <= 10 ms: %.2f of it\n",
		       "", e.plan.n_wrs, big.p50_us / 1e3, big.p50_us * 1e3 / BIG_OPS,
		       big.p50_us / 1e4);
	}
	printf("\n256-op prepared post: %.2f us p50 = %.3f Ping round trips (goal <= 2), "
	       "%.1f ns per op\n",
	       post.p50_us, post.p50_us / ping.p50_us, post.p50_us * 1e3 / POST_OPS);

	window_done(&e.win);
	wr_plan_done(&e.plan);
	free(ns);
	free(ops);
	free(prepared);
	bench_cleanup();
	return 0;
}
