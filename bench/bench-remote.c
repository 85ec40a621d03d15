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
 * - 100,000 ops of 1 GiB striped over four paths in 1 MiB pieces: 10^8
 *   WRs, of which a call generates only what the windows take. Timed:
 *   planned, and each path's window filled (the loop's work before the
 *   first completion); then cancelled, which reports every op left.
 * - the most a loop turn plans: TRANSFER_INLINE_OPS ranges checked into
 *   ops and planned (WR plan and batch), the O(ops) work that past this
 *   count runs on the pool (daemon/remote/transfer.h); its p99 is the
 *   bound per turn that header states.
 * What is not in these rows: parsing the Transfer call, the locks, verbs.
 *
 * Then the whole call, beside a Ping round trip of the same daemon: a
 * daemon of this program's own (daemon/ linked in, over the fake verbs of
 * tests/fakes, in a child) that exports a region of its own and imports
 * the descriptor, so that its Transfer goes over its own rdmacm endpoint
 * to itself, every WR a memcpy of the fake device. The client encodes the
 * call (librdmamem), the daemon parses it, resolves, locks, plans and
 * posts, the fake completes, the daemon replies.
 *
 * Each call is timed twice. "posted": from the call into librdmamem until
 * the fake device returned from the last post of the call (it stamps that,
 * fake_verbs_clock, in memory shared with this process), less the time the
 * fake device spent running WRs inside the posts (its copies and
 * completions: a NIC's work, done here on the daemon's thread because the
 * fake runs each WR as it is posted). That is the daemon's cost to accept
 * and post, the goal's measure. "whole call": until the reply is read,
 * the fake's work and the completions and the reply included.
 *
 * Rows:
 * - a 100,000-op batch (Transfer's batch, rdmamem_transfer_ranges(), which
 *   sends ranges this many in a sealed memfd: "packed_fd"), 8-byte ranges
 *   64 bytes apart (100,000 WRs), and the same adjacent (coalesced); goal
 *   <= 10 ms posted; the same batch as base64 text ("packed", a raw call)
 *   for comparison, with where its time goes: the client's encoding and
 *   the daemon's parse and decode run again in this process on the same
 *   bytes, timed apart;
 * - a 256-op prepared post by index (rdmamem_transfer_post()), 64-byte
 *   ranges, goal <= 2 Ping round trips posted.
 */
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchlib.h"
#include "daemon/core/config.h"
#include "daemon/daemon.h"
#include "daemon/core/log.h"
#include "daemon/rdma/verbs.h"
#include "daemon/remote/transfer.h"
#include "daemon/remote/window.h"
#include "proto/json.h"
#include "proto/ranges.h"
#include "proto/varlink.h"
#include "tests/fakes/fake.h"

#define PREPARED 4096
#define POST_OPS 256
#define BIG_OPS 100000
#define HUGE_PATHS 4

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

/* The striped row ends by its cancel: an op is cancelled or done. */
static void huge_op_done(void *userdata, struct window_batch *b, uint32_t op,
			 const struct window_status *st)
{
	(void)userdata;
	(void)b;
	if (st->outcome != WINDOW_OK && st->outcome != WINDOW_CANCELLED) {
		fprintf(stderr, "bench-remote: op %u failed\n", op);
		exit(1);
	}
}

static const struct window_batch_ops huge_ops = { .op_done = huge_op_done, .done = batch_done };

/* The striped row: n ops of 1 GiB over HUGE_PATHS windows; the ns until
 * every window is full, and in *ret_cancel_ns those of the cancel. */
static uint64_t huge_run(struct wr_op *ops, size_t n, struct window *wins,
			 struct instant_link *links, uint64_t *ret_cancel_ns, uint64_t *ret_wrs)
{
	static const struct wr_plan_params pp = { .max_msg = WR_MSG_MAX,
						  .n_paths = HUGE_PATHS,
						  .stripe_min = 4 << 20,
						  .stripe_chunk = 1 << 20 };
	struct window *wp[HUGE_PATHS];
	struct wr_keys keys[HUGE_PATHS] = { 0 };
	struct wr_plan plan;
	struct window_batch b;
	uint64_t t0, t1;
	int done = 0;

	wr_plan_init(&plan);
	for (size_t i = 0; i < n; i++)
		ops[i] = (struct wr_op){ .local_offset = (2ULL << 30) * i,
					 .remote_offset = (2ULL << 30) * i,
					 .length = 1ULL << 30,
					 .index = (uint32_t)i,
					 .opcode = WR_WRITE };
	for (uint32_t p = 0; p < HUGE_PATHS; p++)
		wp[p] = &wins[p];
	t0 = bench_now_ns();
	if (wr_plan_build(&plan, ops, n, keys, 1, &pp) < 0 ||
	    window_batch_init(&b, &plan, &huge_ops, &done) < 0) {
		fprintf(stderr, "bench-remote: plan\n");
		exit(1);
	}
	window_batch_start(&b, wp);
	t1 = bench_now_ns();
	window_batch_cancel(&b);
	for (uint32_t p = 0; p < HUGE_PATHS; p++) {
		struct window_wc wc = { .wr_id = links[p].last };

		window_complete(&wins[p], &wc, 1);
	}
	*ret_cancel_ns = bench_now_ns() - t1;
	*ret_wrs = plan.n_wrs;
	if (!done) {
		fprintf(stderr, "bench-remote: the striped batch did not end\n");
		exit(1);
	}
	window_batch_fini(&b);
	wr_plan_done(&plan);
	return t1 - t0;
}

/* TRANSFER_INLINE_OPS ranges checked and made ops (as the transfer's fill
 * does), then planned and batched (as its leg_build() does): the ns. */
static uint64_t inline_turn(const struct ranges_item *r, struct wr_op *ops, struct engine *e)
{
	static const struct wr_plan_params pp = { .max_msg = WR_MSG_MAX, .n_paths = 1 };
	const uint64_t size = 1ULL << 40;
	struct window_batch b;
	uint64_t t0 = bench_now_ns();
	int done = 0;

	for (size_t i = 0; i < TRANSFER_INLINE_OPS; i++) {
		if (r[i].length == 0 || r[i].local_offset > size ||
		    r[i].length > size - r[i].local_offset || r[i].remote_offset > size ||
		    r[i].length > size - r[i].remote_offset)
			exit(1);
		ops[i] = (struct wr_op){ .local_offset = r[i].local_offset,
					 .remote_offset = r[i].remote_offset,
					 .length = r[i].length,
					 .index = (uint32_t)i,
					 .opcode = WR_WRITE };
	}
	if (wr_plan_build(&e->plan, ops, TRANSFER_INLINE_OPS, &e->keys, 1, &pp) < 0 ||
	    window_batch_init(&b, &e->plan, &batch_ops, &done) < 0)
		exit(1);
	t0 = bench_now_ns() - t0;
	window_batch_fini(&b);
	return t0;
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

/* ---- the whole call, over the fake verbs ---- */

#define CALL_REGION (8U << 20)
#define FAKE_LISTEN "127.0.0.1:17471"

/* The child: a daemon over the fake verbs, listening on FAKE_LISTEN. */
static pid_t fake_daemon_start(const char *path)
{
	pid_t pid = fork();

	if (pid == 0) {
		char *argv[] = { "rdmamemd",
				 "--socket",
				 (char *)path,
				 "--log-level",
				 "warning",
				 "--rdmacm-listen",
				 FAKE_LISTEN,
				 "--bandwidth-probe-size=0",
				 "--max-transfer-ops=100000",
				 NULL };
		struct daemon_config cfg = {};
		enum config_action action;
		const char *conf = NULL;
		struct daemon *d;
		char err[256];

		/* Gone with the benchmark, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		/* As main() does: large buffers from the heap, not fresh mappings. */
		mallopt(M_MMAP_THRESHOLD, 128 * 1024);
		signal(SIGPIPE, SIG_IGN);
		log_setup();
		vb = &fake_vb_ops;
		if (config_from_args(9, argv, &cfg, &conf, &action, err, sizeof(err)) < 0 ||
		    daemon_new(&cfg, &d) < 0) {
			fprintf(stderr, "bench-remote: the fake daemon: %s\n", err);
			_exit(1);
		}
		_exit(daemon_run(d) < 0);
	}
	bench_wait_listening(path, "the daemon over the fake verbs");
	return pid;
}

static void must(int r, struct rdmamem_client *c, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "bench-remote: %s: %s (%s)\n", what, strerror(-r),
			rdmamem_client_error_message(c) ?: "");
		exit(1);
	}
}

/* A region of CALL_REGION bytes, registered on the fake device. */
static uint64_t fake_region(struct rdmamem_client *c)
{
	struct rdmamem_registration reg;
	uint64_t id;
	int fd;

	must(rdmamem_memfd_create("bench", CALL_REGION, &fd, NULL), c, "memfd");
	must(rdmamem_register(c, fd, 0, 0, &id), c, "Register");
	close(fd);
	must(rdmamem_register_on(c, id, "fake0", &reg), c, "RegisterOn");
	return id;
}

/* Shared with the daemon's process: its fake device's clock. */
static struct fake_verbs_clock *nic;

/* One call's two times (see the top): whole and posted, in ns. */
struct call_time {
	uint64_t whole, posted, nic;
};

static uint64_t t_start, nic_start;

static void call_begin(void)
{
	nic_start = atomic_load(&nic->nic_ns);
	t_start = bench_now_ns();
}

static struct call_time call_end(void)
{
	uint64_t t1 = bench_now_ns(), nic_ns = atomic_load(&nic->nic_ns) - nic_start;

	return (struct call_time){ .whole = t1 - t_start,
				   .posted = atomic_load(&nic->last_post_ns) - t_start - nic_ns,
				   .nic = nic_ns };
}

static struct call_time time_batch(struct rdmamem_client *c, uint64_t local, uint64_t remote,
				   const struct rdmamem_range *r, size_t n)
{
	uint64_t bytes = 0;

	call_begin();
	must(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, local, 0, remote, r, n, NULL,
				     &bytes),
	     c, "Transfer");
	return call_end();
}

/* The same batch as base64 text, a raw call (params: made once, outside). */
static struct call_time time_text_batch(struct rdmamem_client *c, const char *params)
{
	call_begin();
	must(rdmamem_call(c, "io.rdmamemd.Transfer", params, NULL, 0, NULL, NULL, NULL), c,
	     "Transfer (packed text)");
	return call_end();
}

static char *text_batch_params(uint64_t local, uint64_t remote, const struct rdmamem_range *r,
			       size_t n)
{
	size_t len = ranges_encoded_len(n);
	char *text = malloc(len + 1), *params = malloc(len + 256);

	if (!text || !params)
		exit(1);
	ranges_encode((const struct ranges_item *)r, n, text);
	snprintf(params, len + 256,
		 "{\"batch\":{\"op\":\"write\",\"local\":{\"region\":\"%" PRIu64
		 "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"}}",
		 local, remote, text);
	free(text);
	return params;
}

/* The fd form's own stages, in this process: the client's memfd, and the
 * daemon's map, check of the seals and size, and unmap. ns[0..2). */
static void time_fd_stages(const struct rdmamem_range *r, size_t n, uint64_t ns[2])
{
	struct ranges_buf b = {};
	const char *why;
	uint64_t t0 = bench_now_ns();
	int fd;

	if (ranges_memfd((const struct ranges_item *)r, n, &fd) < 0)
		exit(1);
	ns[0] = bench_now_ns() - t0;
	t0 = bench_now_ns();
	if (ranges_map_fd(fd, n, &b, &why) < 0)
		exit(1);
	ranges_release(&b);
	ns[1] = bench_now_ns() - t0;
	close(fd);
}

/*
 * The stages of a batch call that are not the daemon's model, run here on
 * the same bytes: the client's encoding (the packed text, the message),
 * and the daemon's parse of the message (text checks and tree, as on its
 * pool) and decoding of the packed text. ns[0..4): encode, format,
 * parse, decode.
 */
static void time_stages(const struct rdmamem_range *r, size_t n, uint64_t ns[4])
{
	char *text = malloc(ranges_encoded_len(n) + 1), *msg = NULL;
	cJSON *p = cJSON_CreateObject(), *b = cJSON_AddObjectToObject(p, "batch"), *tree = NULL;
	struct ranges_item *back = NULL;
	const char *why;
	uint64_t t0 = bench_now_ns();
	size_t len, back_n;

	ranges_encode((const struct ranges_item *)r, n, text);
	ns[0] = bench_now_ns() - t0;
	t0 = bench_now_ns();
	/* As the library adds it: a raw item, the quoted text copied once. */
	{
		cJSON *raw = cJSON_CreateRaw("");

		free(raw->valuestring);
		raw->valuestring = malloc(strlen(text) + 3);
		sprintf(raw->valuestring, "\"%s\"", text);
		cJSON_AddItemToObject(b, "packed", raw);
	}
	if (varlink_call_format("io.rdmamemd.Transfer", p, false, &msg, &len) < 0)
		exit(1);
	ns[1] = bench_now_ns() - t0;
	t0 = bench_now_ns();
	if (json_parse_bounded(msg, len, JSON_VALUES_MAX, &tree, &why) < 0) {
		fprintf(stderr, "bench-remote: the message does not parse: %s\n", why);
		exit(1);
	}
	ns[2] = bench_now_ns() - t0;
	t0 = bench_now_ns();
	if (ranges_decode(text, strlen(text), n, &back, &back_n, &why) < 0)
		exit(1);
	ns[3] = bench_now_ns() - t0;
	free(back);
	cJSON_Delete(tree);
	free(msg);
	cJSON_Delete(p);
	free(text);
}

static double p50_ms(uint64_t *ns, size_t n)
{
	return result_of(ns, n).p50_us / 1e3;
}

/* Prints the posted and whole rows of a[0..iters), beside ping. */
static void call_rows(const char *name, const char *what, struct call_time *a, int iters,
		      const struct bench_result *ping, double goal_us)
{
	uint64_t *posted = calloc(iters, sizeof(uint64_t)),
		 *whole = calloc(iters, sizeof(uint64_t));
	uint64_t *nic_ns = calloc(iters, sizeof(uint64_t));
	struct bench_result rp, rw;
	char label[128];

	if (!posted || !whole || !nic_ns)
		exit(1);
	for (int i = 0; i < iters; i++) {
		posted[i] = a[i].posted;
		whole[i] = a[i].whole;
		nic_ns[i] = a[i].nic;
	}
	rp = result_of(posted, iters);
	rw = result_of(whole, iters);
	snprintf(label, sizeof(label), "%s: accepted and posted", what);
	bench_row(name, label, &rp, ping);
	snprintf(label, sizeof(label), "%s: whole call", what);
	bench_row(name, label, &rw, ping);
	printf("%-22s   posted %.1f us p50 = %.2f Ping round trips (goal <= %.0f us: %.2f of it); "
	       "whole call %.1f us = %.2f Pings, of it the fake NIC's work %.1f us\n",
	       "", rp.p50_us, rp.p50_us / ping->p50_us, goal_us, rp.p50_us / goal_us, rw.p50_us,
	       rw.p50_us / ping->p50_us, result_of(nic_ns, iters).p50_us);
	free(nic_ns);
	free(whole);
	free(posted);
}

static void whole_call(int iters)
{
	char path[128], *desc = NULL;
	struct bench_op ping_op = { .raw = 1, .run = bench_raw_ping };
	struct bench_result ping;
	struct rdmamem_client *c;
	struct rdmamem_range *r = calloc(BIG_OPS, sizeof(*r));
	struct call_time *ct = calloc(iters * 10, sizeof(*ct));
	uint64_t *stage[6];
	uint64_t local, exported, remote, plan, idx[POST_OPS];
	pid_t d;

	for (int k = 0; k < 6; k++)
		stage[k] = calloc(iters, sizeof(uint64_t));
	nic = mmap(NULL, sizeof(*nic), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!r || !ct || !stage[5] || nic == MAP_FAILED)
		exit(1);
	/* The child's fake device writes here; this process reads. */
	fake_verbs_clock = nic;
	snprintf(path, sizeof(path), "%s/fake.sock", bench_dir());
	d = fake_daemon_start(path);
	fake_verbs_clock = NULL;
	must(rdmamem_client_connect(path, &c), NULL, "connect");
	local = fake_region(c);
	exported = fake_region(c);
	must(rdmamem_region_export(c, exported, NULL, &desc, NULL, NULL), c, "ExportRegion");
	must(rdmamem_remote_import(c, desc, &remote), c, "ImportRemote");

	printf("\n== Transfer through the whole call: librdmamem -> rdmamemd over fake verbs "
	       "(a WR is a memcpy) -> its own endpoint; %d calls a row\n"
	       "   posted: call -> the fake NIC returned from the last post, less the fake NIC's "
	       "work in the posts; whole call: -> the reply read\n\n",
	       iters);
	bench_header("whole call");
	ping_op.path = path;
	ping = bench_measure(&ping_op, 1, -1, 1.0);
	bench_row("anchor", "rdmamemd Ping round trip, same daemon", &ping, NULL);

	for (int adjacent = 0; adjacent <= 1; adjacent++) {
		uint64_t stride = adjacent ? 8 : 64;
		char *params;

		for (size_t k = 0; k < BIG_OPS; k++)
			r[k] = (struct rdmamem_range){ stride * k, stride * k, 8 };
		(void)time_batch(c, local, remote, r, BIG_OPS); /* the link connects */
		for (int it = 0; it < iters; it++) {
			uint64_t st[2];

			ct[it] = time_batch(c, local, remote, r, BIG_OPS);
			time_fd_stages(r, BIG_OPS, st);
			stage[4][it] = st[0];
			stage[5][it] = st[1];
		}
		call_rows("100,000-op batch",
			  adjacent ? "packed_fd, coalesced" : "packed_fd, 100,000 WRs", ct, iters,
			  &ping, 10000);
		printf("%-22s   the fd form's own stages (p50, ms; %zu bytes of records): client "
		       "memfd %.2f; daemon maps, checks, unmaps %.2f\n",
		       "", (size_t)BIG_OPS * RANGES_RECORD, p50_ms(stage[4], iters),
		       p50_ms(stage[5], iters));

		params = text_batch_params(local, remote, r, BIG_OPS);
		for (int it = 0; it < iters; it++) {
			uint64_t st[4];

			ct[it] = time_text_batch(c, params);
			time_stages(r, BIG_OPS, st);
			for (int k = 0; k < 4; k++)
				stage[k][it] = st[k];
		}
		free(params);
		call_rows("100,000-op batch",
			  adjacent ? "packed text, coalesced" : "packed text, 100,000 WRs", ct,
			  iters, &ping, 10000);
		printf("%-22s   its text's stages (p50, ms; %zu bytes of packed text, the raw call "
		       "formatted beforehand): the library would encode %.2f and format %.2f; "
		       "daemon parses %.2f, decodes %.2f\n",
		       "", ranges_encoded_len(BIG_OPS), p50_ms(stage[0], iters),
		       p50_ms(stage[1], iters), p50_ms(stage[2], iters), p50_ms(stage[3], iters));
	}

	/* 256 blocks by index from a prepared list of 4096: 64 bytes each, so
	 * that the fake's memcpy stays small. */
	for (size_t k = 0; k < PREPARED; k++)
		r[k] = (struct rdmamem_range){ 2048 * k, 2048 * k, 64 };
	must(rdmamem_transfer_prepare(c, local, remote, r, PREPARED, &plan), c, "PrepareTransfer");
	for (int it = 0; it < iters * 10; it++) {
		uint64_t bytes;

		for (size_t k = 0; k < POST_OPS; k++)
			idx[k] = (k * 16 + (size_t)it) % PREPARED;
		call_begin();
		must(rdmamem_transfer_post(c, plan, RDMAMEM_TRANSFER_WRITE, idx, POST_OPS, NULL,
					   NULL, &bytes),
		     c, "Transfer plan");
		ct[it] = call_end();
	}
	call_rows("256-op prepared post", "plan by index, 256 WRs of 64 B", ct, iters * 10, &ping,
		  2 * ping.p50_us);

	rdmamem_client_close(c);
	free(desc);
	bench_stop(d);
	for (int k = 0; k < 6; k++)
		free(stage[k]);
	munmap(nic, sizeof(*nic));
	free(ct);
	free(r);
}

int main(int argc, char **argv)
{
	static const struct window_params wp = { .depth = 128, .signal_every = 16 };
	struct bench_args args = { .seconds = 1.0 };
	char daemon_path[128];
	struct bench_op ping_op = { .raw = 1, .run = bench_raw_ping };
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

	{
		struct ranges_item *r = calloc(TRANSFER_INLINE_OPS, sizeof(*r));
		struct bench_result turn;

		if (!r)
			return 1;
		for (size_t k = 0; k < TRANSFER_INLINE_OPS; k++)
			r[k] = (struct ranges_item){ 8192 * k, 8192 * k, 4096 };
		for (size_t it = 0; it < 2000; it++)
			ns[it] = inline_turn(r, ops, &e);
		turn = result_of(ns, 2000);
		bench_row("a loop turn's most", "4096 ranges checked + planned", &turn, &ping);
		printf("%-22s   TRANSFER_INLINE_OPS (%u) ops: %.1f us p50, %.1f us p99 (more go to "
		       "the pool)\n",
		       "", TRANSFER_INLINE_OPS, turn.p50_us, turn.p99_us);
		free(r);
	}

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
		printf("%-22s   %llu WRs: %.2f ms p50, %.1f ns per op; goal <= 10 ms: %.2f of it\n",
		       "", (unsigned long long)e.plan.n_wrs, big.p50_us / 1e3,
		       big.p50_us * 1e3 / BIG_OPS, big.p50_us / 1e4);
	}

	{
		struct window wins[HUGE_PATHS];
		struct instant_link links[HUGE_PATHS] = { 0 };
		uint64_t *cancel_ns = calloc(big_iters, sizeof(*cancel_ns)), wrs = 0;
		struct bench_result cancel;

		if (!cancel_ns)
			return 1;
		for (uint32_t p = 0; p < HUGE_PATHS; p++)
			if (window_init(&wins[p], &wp, &instant_ops, &links[p]) < 0)
				return 1;
		for (size_t it = 0; it < big_iters; it++)
			ns[it] = huge_run(ops, BIG_OPS, wins, links, &cancel_ns[it], &wrs);
		big = result_of(ns, big_iters);
		cancel = result_of(cancel_ns, big_iters);
		bench_row("100,000 x 1 GiB striped", "plan + 4 windows filled", &big, &ping);
		printf("%-22s   %llu WRs, %u generated: %.2f ms p50; the cancel: %.2f ms p50\n", "",
		       (unsigned long long)wrs, HUGE_PATHS * wp.depth, big.p50_us / 1e3,
		       cancel.p50_us / 1e3);
		for (uint32_t p = 0; p < HUGE_PATHS; p++)
			window_done(&wins[p]);
		free(cancel_ns);
	}
	printf("\n256-op prepared post: %.2f us p50 = %.3f Ping round trips (goal <= 2), "
	       "%.1f ns per op\n",
	       post.p50_us, post.p50_us / ping.p50_us, post.p50_us * 1e3 / POST_OPS);

	whole_call(30);

	window_done(&e.win);
	wr_plan_done(&e.plan);
	free(ns);
	free(ops);
	free(prepared);
	bench_cleanup();
	return 0;
}
