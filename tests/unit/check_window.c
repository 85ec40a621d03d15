/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion window (daemon/remote/window.c) driven by a scripted fake
 * link that behaves as an RC queue pair: it runs posted WRs in order, puts
 * a CQE for each signalled success, for the WR that fails and for every WR
 * after it (flushed), into a CQ of bounded depth that the test polls in one
 * go or one entry at a time. The WRs are generated as the window posts
 * them; the fake finds each in the plan's WRs generated whole
 * (plan-fixture.h), so it checks they are the plan's, in its order. A
 * seeded random schedule is checked against what the fake saw
 * (WINDOW_SEED=n replays one seed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/window.h"
#include "tests/testlib.h"
#include "tests/unit/plan-fixture.h"

/* Completion statuses as the link would pass them (ibv_wc_status's). */
#define ST_REM_ACCESS 10
#define ST_FLUSH 5
#define ST_CQ_OVERFLOW 99

#define FAKE_MAX 4096

enum wr_fate { FATE_UNPOSTED, FATE_POSTED, FATE_OK, FATE_ERROR, FATE_FLUSHED };

struct fake_link {
	struct window win;
	/* The plan's WRs whole (plan_expand()): what a post may carry. */
	const struct wr *exp;
	const size_t *exp_first;
	size_t n_exp;
	size_t wr_of_seq[FAKE_MAX]; /* exp index of each posted WR */
	bool signalled[FAKE_MAX];
	size_t n_posted, n_run;
	long fail_seq; /* the WR that fails, -1: none */
	bool qp_error;
	int again;      /* the next post calls answer -EAGAIN */
	int post_error; /* the next post call answers this */
	struct window_wc cq[FAKE_MAX];
	size_t cq_head, cq_tail, cq_depth, cq_max;
	bool overflowed;
	enum wr_fate *fate; /* per plan WR, shared by the paths' links */
};

static bool wr_same(const struct wr *a, const struct wr *b)
{
	return a->local_addr == b->local_addr && a->remote_addr == b->remote_addr &&
	       a->lkey == b->lkey && a->rkey == b->rkey && a->length == b->length &&
	       a->first_op == b->first_op && a->n_ops == b->n_ops && a->opcode == b->opcode &&
	       a->path == b->path;
}

/* Which of the plan's WRs w is; posted once, after the one before it on
 * its path. */
static size_t fake_find(const struct fake_link *f, const struct wr *w)
{
	for (size_t i = 0; i < f->n_exp; i++) {
		if (!wr_same(&f->exp[i], w))
			continue;
		ck_assert_int_eq(f->fate[i], FATE_UNPOSTED);
		if (i > f->exp_first[w->path])
			ck_assert_int_ne(f->fate[i - 1], FATE_UNPOSTED);
		return i;
	}
	ck_abort_msg("a WR the plan does not have");
	return 0;
}

static int fake_post(void *link, struct wr *wrs, size_t n)
{
	struct fake_link *f = link;

	ck_assert(f->win.in_post);
	ck_assert_uint_ge(n, 1);
	if (f->again > 0) {
		f->again--;
		return -EAGAIN;
	}
	if (f->post_error) {
		int r = f->post_error;

		f->post_error = 0;
		return r;
	}
	/* The newest WR of every post call is signalled. */
	ck_assert(wrs[n - 1].signalled);
	for (size_t i = 0; i < n; i++) {
		size_t idx = fake_find(f, &wrs[i]);

		ck_assert_uint_lt(f->n_posted, FAKE_MAX);
		ck_assert_uint_eq(wrs[i].wr_id, f->n_posted);
		f->wr_of_seq[f->n_posted] = idx;
		f->signalled[f->n_posted++] = wrs[i].signalled;
		f->fate[idx] = FATE_POSTED;
	}
	return 0;
}

static const struct window_link_ops fake_ops = { .post = fake_post };

static void cq_push(struct fake_link *f, uint64_t seq, int status)
{
	if (f->cq_tail - f->cq_head >= f->cq_depth) {
		f->overflowed = true;
		return;
	}
	f->cq[f->cq_tail++ % FAKE_MAX] = (struct window_wc){ .wr_id = seq,
							     .status = status,
							     .vendor_err = status ? 0x88 : 0 };
	if (f->cq_tail - f->cq_head > f->cq_max)
		f->cq_max = f->cq_tail - f->cq_head;
}

/* The QP runs up to n posted WRs, in order. */
static void fake_run(struct fake_link *f, size_t n)
{
	for (; n && f->n_run < f->n_posted; n--) {
		size_t seq = f->n_run++, idx = f->wr_of_seq[seq];

		if (f->qp_error) {
			f->fate[idx] = FATE_FLUSHED;
			cq_push(f, seq, ST_FLUSH);
		} else if ((long)seq == f->fail_seq) {
			f->fate[idx] = FATE_ERROR;
			f->qp_error = true;
			cq_push(f, seq, ST_REM_ACCESS);
		} else {
			f->fate[idx] = FATE_OK;
			if (f->signalled[seq])
				cq_push(f, seq, 0);
		}
	}
}

/* Polls up to n CQEs into the window in one call. */
static size_t fake_poll(struct fake_link *f, size_t n)
{
	struct window_wc wcs[64];
	size_t k = 0;

	while (k < n && k < ELEMENTSOF(wcs) && f->cq_head < f->cq_tail)
		wcs[k++] = f->cq[f->cq_head++ % FAKE_MAX];
	if (k)
		window_complete(&f->win, wcs, k);
	return k;
}

/* Runs and polls until nothing moves; poll_n CQEs per poll. */
static void fake_drain(struct fake_link *f, size_t poll_n)
{
	while (f->n_run < f->n_posted || f->cq_head < f->cq_tail) {
		fake_run(f, SIZE_MAX);
		fake_poll(f, poll_n);
	}
}

/* The plan whose WRs the link is posted from now on, and their fates. */
static void fake_learn(struct fake_link *f, const struct wr *exp, const size_t *exp_first,
		       size_t n_exp, enum wr_fate *fate)
{
	f->exp = exp;
	f->exp_first = exp_first;
	f->n_exp = n_exp;
	f->fate = fate;
}

static void fake_init(struct fake_link *f, const struct wr *exp, const size_t *exp_first,
		      size_t n_exp, enum wr_fate *fate, uint32_t depth, uint32_t signal_every,
		      uint32_t post_max)
{
	const struct window_params wp = { .depth = depth,
					  .signal_every = signal_every,
					  .post_max = post_max };

	memset(f, 0, sizeof(*f));
	fake_learn(f, exp, exp_first, n_exp, fate);
	f->fail_seq = -1;
	f->cq_depth = FAKE_MAX;
	ck_assert_int_eq(window_init(&f->win, &wp, &fake_ops, f), 0);
}

static void counters_check(const struct window *w)
{
	const struct window_counters *c = &w->c;

	ck_assert_uint_eq(c->posted, c->retired_ok + c->retired_failed + c->outstanding);
	ck_assert_uint_le(c->outstanding, w->params.depth);
	ck_assert_uint_le(c->max_outstanding, w->params.depth);
	ck_assert_uint_le(c->cqes_due, c->outstanding);
}

/* What a batch reported. */
struct rec {
	size_t n_ops;
	int *count;
	struct window_status *st;
	int done;
	bool fini_in_done;
};

static void rec_op_done(void *userdata, _unused_ struct window_batch *b, uint32_t op,
			const struct window_status *st)
{
	struct rec *r = userdata;

	ck_assert_uint_lt(op, r->n_ops);
	ck_assert_int_eq(r->done, 0);
	r->count[op]++;
	r->st[op] = *st;
}

static void rec_done(void *userdata, struct window_batch *b)
{
	struct rec *r = userdata;

	r->done++;
	for (size_t i = 0; i < r->n_ops; i++)
		ck_assert_msg(r->count[i] == 1, "op %zu reported %d times", i, r->count[i]);
	ck_assert_uint_eq(b->in_flight, 0);
	if (r->fini_in_done)
		window_batch_fini(b);
}

static const struct window_batch_ops rec_ops = { .op_done = rec_op_done, .done = rec_done };

static void rec_init(struct rec *r, size_t n_ops)
{
	*r = (struct rec){ .n_ops = n_ops };
	r->count = calloc(n_ops + 1, sizeof(*r->count));
	r->st = calloc(n_ops + 1, sizeof(*r->st));
	ck_assert(r->count && r->st);
}

static void rec_free(struct rec *r)
{
	free(r->count);
	free(r->st);
}

/*
 * A test bed: n_ops ops of len bytes each, adjacent when adjacent (then
 * max_msg cuts them), one path (or n_paths striped in 1-byte... chunks of
 * stripe_chunk), a fake link and window per path, and a recorder.
 */
struct bed {
	struct wr_op *ops;
	struct wr_keys keys[WR_PLAN_PATHS_MAX];
	struct wr_plan plan;
	struct wr *wrs; /* the plan's, whole */
	size_t wrs_first[WR_PLAN_PATHS_MAX + 1];
	enum wr_fate *fate;
	struct fake_link *links;
	struct window *wins[WR_PLAN_PATHS_MAX];
	struct window_batch b;
	struct rec rec;
	uint32_t n_paths;
};

static void bed_init(struct bed *t, size_t n_ops, uint64_t len, bool adjacent,
		     const struct wr_plan_params *pp, uint32_t depth, uint32_t signal_every,
		     uint32_t post_max)
{
	memset(t, 0, sizeof(*t));
	t->ops = calloc(n_ops + 1, sizeof(*t->ops));
	ck_assert_ptr_nonnull(t->ops);
	for (size_t i = 0; i < n_ops; i++)
		t->ops[i] = (struct wr_op){ .local_offset = (adjacent ? len : len + 1) * i,
					    .remote_offset = (adjacent ? len : len + 7) * i,
					    .length = len,
					    .index = (uint32_t)(1000 + i),
					    .opcode = WR_WRITE };
	for (uint32_t p = 0; p < pp->n_paths; p++)
		t->keys[p] = (struct wr_keys){ .local_addr = 0x1000,
					       .remote_addr = 0x9000,
					       .lkey = p + 1,
					       .rkey = p + 11 };
	t->n_paths = pp->n_paths;
	wr_plan_init(&t->plan);
	ck_assert_int_eq(wr_plan_build(&t->plan, t->ops, n_ops, t->keys, 1, pp), 0);
	t->wrs = plan_expand(&t->plan, SIZE_MAX, NULL, t->wrs_first);
	t->fate = calloc(t->plan.n_wrs + 1, sizeof(*t->fate));
	t->links = calloc(pp->n_paths, sizeof(*t->links));
	ck_assert(t->fate && t->links);
	for (uint32_t p = 0; p < pp->n_paths; p++) {
		fake_init(&t->links[p], t->wrs, t->wrs_first, t->plan.n_wrs, t->fate, depth,
			  signal_every, post_max);
		t->wins[p] = &t->links[p].win;
	}
	rec_init(&t->rec, n_ops);
	ck_assert_int_eq(window_batch_init(&t->b, &t->plan, &rec_ops, &t->rec), 0);
}

static void bed_free(struct bed *t)
{
	if (!t->rec.fini_in_done)
		window_batch_fini(&t->b);
	for (uint32_t p = 0; p < t->n_paths; p++) {
		counters_check(&t->links[p].win);
		window_done(&t->links[p].win);
	}
	rec_free(&t->rec);
	wr_plan_done(&t->plan);
	free(t->wrs);
	free(t->links);
	free(t->fate);
	free(t->ops);
}

static const struct wr_plan_params rc = { .max_msg = WR_MSG_MAX, .n_paths = 1 };

/* 10 separate ops, W = 4, S = 2: the window fills, signals every second WR
 * and the last of each post, and retires on the signalled completions. */
START_TEST(test_basic)
{
	struct bed t;
	struct fake_link *f;

	bed_init(&t, 10, 100, false, &rc, 4, 2, 0);
	f = &t.links[0];
	window_batch_start(&t.b, t.wins);
	ck_assert_uint_eq(f->n_posted, 4);
	ck_assert(!f->signalled[0] && f->signalled[1] && !f->signalled[2] && f->signalled[3]);
	ck_assert_uint_eq(f->win.c.outstanding, 4);
	ck_assert_uint_eq(f->win.c.cqes_due, 2);

	/* The first two run: one CQE, for seq 1, retires 0 and 1. */
	fake_run(f, 2);
	ck_assert_uint_eq(fake_poll(f, 1), 1);
	ck_assert_int_eq(t.rec.count[0] + t.rec.count[1], 2);
	ck_assert_int_eq(t.rec.count[2], 0);
	ck_assert_uint_eq(t.b.progress.ops_ok, 2);
	ck_assert_uint_eq(t.b.progress.bytes_done, 200);
	/* Two slots came free: posted at once. */
	ck_assert_uint_eq(f->n_posted, 6);
	counters_check(&f->win);

	fake_drain(f, 1);
	ck_assert_int_eq(t.rec.done, 1);
	for (size_t i = 0; i < 10; i++)
		ck_assert_int_eq(t.rec.st[i].outcome, WINDOW_OK);
	ck_assert_uint_eq(t.b.progress.ops_ok, 10);
	ck_assert_uint_eq(t.b.progress.bytes_done, 1000);
	ck_assert_uint_eq(f->win.c.posted, 10);
	ck_assert_uint_eq(f->win.c.retired_ok, 10);
	ck_assert_uint_eq(f->win.c.max_outstanding, 4);
	ck_assert_uint_eq(f->win.c.stray, 0);
	bed_free(&t);
}
END_TEST

/* The same batch with every CQE in one poll and one by one: same outcome. */
START_TEST(test_poll_sizes)
{
	for (size_t poll_n = 1; poll_n <= 64; poll_n *= 64) {
		struct bed t;

		bed_init(&t, 50, 8, false, &rc, 16, 4, 0);
		window_batch_start(&t.b, t.wins);
		/* Everything posted runs before anything is polled. */
		fake_drain(&t.links[0], poll_n);
		ck_assert_int_eq(t.rec.done, 1);
		ck_assert_uint_eq(t.b.progress.ops_ok, 50);
		ck_assert_uint_eq(t.links[0].win.c.retired_ok, 50);
		ck_assert_uint_le(t.links[0].cq_max, 16);
		bed_free(&t);
	}
}
END_TEST

/* An error on the first, a middle and the last WR: the ones before are
 * done, its op fails with the completion's status and vendor error, the
 * later ones (posted or not) are flushed with that cause; the flush CQEs
 * that follow are counted, not reported again. */
START_TEST(test_error_position)
{
	static const long where[] = { 0, 5, 9 };

	for (size_t k = 0; k < ELEMENTSOF(where); k++) {
		struct bed t;
		struct fake_link *f;

		bed_init(&t, 10, 64, false, &rc, 4, 2, 0);
		f = &t.links[0];
		f->fail_seq = where[k];
		window_batch_start(&t.b, t.wins);
		fake_drain(f, k == 1 ? 64 : 1);
		ck_assert_int_eq(t.rec.done, 1);
		for (long i = 0; i < 10; i++) {
			const struct window_status *st = &t.rec.st[i];

			if (i < where[k])
				ck_assert_int_eq(st->outcome, WINDOW_OK);
			else if (i == where[k])
				ck_assert_int_eq(st->outcome, WINDOW_WC_ERROR);
			else
				ck_assert_int_eq(st->outcome, WINDOW_FLUSHED);
			if (i >= where[k]) {
				ck_assert_int_eq(st->status, ST_REM_ACCESS);
				ck_assert_uint_eq(st->vendor_err, 0x88);
			}
		}
		ck_assert_uint_eq(t.b.progress.ops_ok, (uint64_t)where[k]);
		ck_assert_uint_eq(t.b.progress.ops_failed, 10 - (uint64_t)where[k]);
		ck_assert_uint_eq(t.b.progress.bytes_done, 64 * (uint64_t)where[k]);
		ck_assert(f->win.failed);
		ck_assert_uint_eq(f->win.c.retired_failed, f->win.c.posted - (uint64_t)where[k]);
		/* The flushes of WRs it had already failed came after. */
		ck_assert_uint_eq(f->win.c.after_fail, f->win.c.posted - (uint64_t)where[k] - 1);
		/* Nothing was posted after the error. */
		ck_assert_uint_le(f->win.c.posted, (uint64_t)where[k] + 4);
		bed_free(&t);
	}
}
END_TEST

/* A coalesced WR fails: every op it carries fails with its status. A split
 * op whose second piece fails fails once, though its first piece ran. */
START_TEST(test_error_coalesced_split)
{
	const struct wr_plan_params pp = { .max_msg = 10, .n_paths = 1 };
	struct bed t;

	/* 6 adjacent ops of 4 bytes, pieces of 10: [0,10) ops 0-2, [10,20)
	 * ops 2-4, [20,24) op 5. */
	bed_init(&t, 6, 4, true, &pp, 8, 8, 0);
	ck_assert_uint_eq(t.plan.n_wrs, 3);
	t.links[0].fail_seq = 1;
	window_batch_start(&t.b, t.wins);
	fake_drain(&t.links[0], 64);
	ck_assert_int_eq(t.rec.done, 1);
	ck_assert_int_eq(t.rec.st[0].outcome, WINDOW_OK);
	ck_assert_int_eq(t.rec.st[1].outcome, WINDOW_OK);
	for (size_t i = 2; i <= 4; i++)
		ck_assert_int_eq(t.rec.st[i].outcome, WINDOW_WC_ERROR);
	ck_assert_int_eq(t.rec.st[5].outcome, WINDOW_FLUSHED);
	ck_assert_uint_eq(t.b.progress.bytes_done, 10);
	bed_free(&t);
}
END_TEST

/* S = 1 signals every WR; S = W only the last of each post call; a post
 * call carries at most post_max. */
START_TEST(test_signalling)
{
	struct bed t;
	struct fake_link *f;

	bed_init(&t, 20, 1, false, &rc, 8, 1, 0);
	f = &t.links[0];
	window_batch_start(&t.b, t.wins);
	for (size_t i = 0; i < 8; i++)
		ck_assert(f->signalled[i]);
	fake_drain(f, 64);
	ck_assert_uint_eq(f->win.c.signalled, 20);
	bed_free(&t);

	bed_init(&t, 20, 1, false, &rc, 8, 8, 3);
	f = &t.links[0];
	window_batch_start(&t.b, t.wins);
	/* Three calls: 3 + 3 + 2, each signalling its last. */
	ck_assert_uint_eq(f->win.c.post_calls, 3);
	ck_assert_uint_eq(f->n_posted, 8);
	for (size_t i = 0; i < 8; i++)
		ck_assert(f->signalled[i] == (i == 2 || i == 5 || i == 7));
	/* A full window posts nothing more until a completion. */
	window_kick(&f->win);
	ck_assert_uint_eq(f->n_posted, 8);
	fake_drain(f, 1);
	ck_assert_int_eq(t.rec.done, 1);
	bed_free(&t);
}
END_TEST

/* -EAGAIN posts nothing and is retried on window_kick(); another error
 * fails the window with it. */
START_TEST(test_post_again_and_error)
{
	struct bed t;
	struct fake_link *f;

	bed_init(&t, 6, 10, false, &rc, 4, 2, 0);
	f = &t.links[0];
	f->again = 2;
	window_batch_start(&t.b, t.wins);
	ck_assert_uint_eq(f->n_posted, 0);
	ck_assert_uint_eq(f->win.c.post_again, 1);
	window_kick(&f->win);
	ck_assert_uint_eq(f->n_posted, 0);
	window_kick(&f->win);
	ck_assert_uint_eq(f->n_posted, 4);
	/* Two run; the next post call fails hard. */
	fake_run(f, 2);
	f->post_error = -EIO;
	fake_poll(f, 64);
	ck_assert(f->win.failed);
	ck_assert_int_eq(t.rec.done, 1);
	for (size_t i = 0; i < 6; i++) {
		ck_assert_int_eq(t.rec.st[i].outcome, i < 2 ? WINDOW_OK : WINDOW_FLUSHED);
		if (i >= 2)
			ck_assert_int_eq(t.rec.st[i].status, -EIO);
	}
	bed_free(&t);
}
END_TEST

/* Cancel: the unposted ops are cancelled at once, done waits for the posted
 * WRs; an op split over posted and unposted WRs is cancelled once. */
START_TEST(test_cancel)
{
	const struct wr_plan_params pp = { .max_msg = 10, .n_paths = 1 };
	struct bed t;
	struct fake_link *f;

	/* 5 separate ops of 25 bytes: 3 WRs each; W = 4 posts op 0 and the
	 * first piece of op 1. */
	bed_init(&t, 5, 25, false, &pp, 4, 4, 0);
	f = &t.links[0];
	window_batch_start(&t.b, t.wins);
	ck_assert_uint_eq(f->n_posted, 4);
	window_batch_cancel(&t.b);
	ck_assert_int_eq(t.rec.done, 0);
	for (size_t i = 1; i < 5; i++) {
		ck_assert_int_eq(t.rec.count[i], 1);
		ck_assert_int_eq(t.rec.st[i].outcome, WINDOW_CANCELLED);
	}
	ck_assert_int_eq(t.rec.count[0], 0);
	fake_drain(f, 1);
	ck_assert_int_eq(t.rec.done, 1);
	ck_assert_int_eq(t.rec.st[0].outcome, WINDOW_OK);
	ck_assert_uint_eq(f->win.c.posted, 4);
	ck_assert_uint_eq(t.b.progress.bytes_done, 35);
	/* Twice is once. */
	window_batch_cancel(&t.b);
	ck_assert_int_eq(t.rec.done, 1);
	bed_free(&t);

	/* Before start: nothing is posted, every op is cancelled. */
	bed_init(&t, 5, 25, false, &pp, 4, 4, 0);
	window_batch_cancel(&t.b);
	ck_assert_int_eq(t.rec.done, 0);
	window_batch_start(&t.b, t.wins);
	ck_assert_uint_eq(t.links[0].n_posted, 0);
	ck_assert_int_eq(t.rec.done, 1);
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(t.rec.st[i].outcome, WINDOW_CANCELLED);
	bed_free(&t);
}
END_TEST

/*
 * CQ accounting: with W outstanding at most, the CQ never holds more than W
 * entries, flushes included; a CQ too small overflows (the fake loses
 * entries), the link fails the window, and every op is still reported once.
 */
START_TEST(test_cq_overflow)
{
	struct bed t;
	struct fake_link *f;

	bed_init(&t, 40, 4, false, &rc, 8, 1, 0);
	f = &t.links[0];
	f->cq_depth = 8;
	f->fail_seq = 20;
	window_batch_start(&t.b, t.wins);
	fake_drain(f, 64);
	ck_assert(!f->overflowed);
	ck_assert_uint_le(f->cq_max, 8);
	ck_assert_uint_le(f->win.c.max_cqes_due, 8);
	ck_assert_int_eq(t.rec.done, 1);
	bed_free(&t);

	bed_init(&t, 40, 4, false, &rc, 8, 1, 0);
	f = &t.links[0];
	f->cq_depth = 3;
	window_batch_start(&t.b, t.wins);
	fake_run(f, SIZE_MAX);
	ck_assert(f->overflowed);
	/* The link sees the CQ error and fails the window. */
	window_fail(&f->win, ST_CQ_OVERFLOW, 0);
	fake_poll(f, 64);
	ck_assert_int_eq(t.rec.done, 1);
	ck_assert_uint_eq(f->win.c.after_fail, 3);
	for (size_t i = 8; i < 40; i++) {
		ck_assert_int_eq(t.rec.st[i].outcome, WINDOW_FLUSHED);
		ck_assert_int_eq(t.rec.st[i].status, ST_CQ_OVERFLOW);
	}
	ck_assert_uint_eq(t.b.progress.ops_ok + t.b.progress.ops_failed, 40);
	bed_free(&t);
}
END_TEST

/* A completion naming no outstanding WR changes nothing but a counter. */
START_TEST(test_stray)
{
	struct bed t;
	struct fake_link *f;
	struct window_wc wc = { .wr_id = 77 };

	bed_init(&t, 3, 1, false, &rc, 4, 4, 0);
	f = &t.links[0];
	window_batch_start(&t.b, t.wins);
	window_complete(&f->win, &wc, 1);
	ck_assert_uint_eq(f->win.c.stray, 1);
	ck_assert_uint_eq(f->win.c.outstanding, 3);
	fake_drain(f, 64);
	/* An old one, after it retired. */
	wc.wr_id = 0;
	window_complete(&f->win, &wc, 1);
	ck_assert_uint_eq(f->win.c.stray, 2);
	ck_assert_int_eq(t.rec.done, 1);
	bed_free(&t);
}
END_TEST

/* Nothing to move: done at once; a batch may be finished in its done. */
START_TEST(test_empty_and_fini_in_done)
{
	struct bed t;

	bed_init(&t, 0, 1, false, &rc, 4, 4, 0);
	window_batch_start(&t.b, t.wins);
	ck_assert_int_eq(t.rec.done, 1);
	bed_free(&t);

	bed_init(&t, 3, 1, false, &rc, 4, 4, 0);
	t.rec.fini_in_done = true;
	window_batch_start(&t.b, t.wins);
	fake_drain(&t.links[0], 64);
	ck_assert_int_eq(t.rec.done, 1);
	ck_assert_ptr_null(t.b.op_state);
	bed_free(&t);
}
END_TEST

/* Two batches share one window: they take turns, and one batch's signalled
 * completion retires the other's earlier WRs (RC order on the QP). */
START_TEST(test_shared_window)
{
	struct bed a;
	struct fake_link *f;
	struct wr_op ops[4];
	struct wr_plan plan;
	struct wr *wrs;
	size_t wrs_first[WR_PLAN_PATHS_MAX + 1];
	enum wr_fate fate[4] = { 0 };
	struct window_batch b2;
	struct rec r2;
	struct wr_keys keys = { .lkey = 1, .rkey = 2 };
	struct window *wins[1];

	bed_init(&a, 4, 1, false, &rc, 4, 4, 2);
	f = &a.links[0];
	for (size_t i = 0; i < 4; i++)
		ops[i] = (struct wr_op){ .local_offset = 10 * i,
					 .remote_offset = 10 * i,
					 .length = 1,
					 .opcode = WR_READ };
	wr_plan_init(&plan);
	ck_assert_int_eq(wr_plan_build(&plan, ops, 4, &keys, 1, &rc), 0);
	wrs = plan_expand(&plan, SIZE_MAX, NULL, wrs_first);
	rec_init(&r2, 4);
	ck_assert_int_eq(window_batch_init(&b2, &plan, &rec_ops, &r2), 0);

	window_batch_start(&a.b, a.wins);
	/* a took the whole window in two turns (post_max 2) with no one else. */
	ck_assert_uint_eq(f->n_posted, 4);
	wins[0] = &f->win;
	/* The fake link learns which plan the WRs come from. */
	fake_learn(f, wrs, wrs_first, plan.n_wrs, fate);
	window_batch_start(&b2, wins);
	ck_assert_uint_eq(f->n_posted, 4);
	fake_learn(f, a.wrs, a.wrs_first, a.plan.n_wrs, a.fate);
	/* a's four run; the one CQE (seq 3) frees the window, b2 posts. */
	fake_run(f, 4);
	fake_learn(f, wrs, wrs_first, plan.n_wrs, fate);
	fake_poll(f, 64);
	ck_assert_int_eq(a.rec.done, 1);
	ck_assert_uint_eq(f->n_posted, 8);
	fake_drain(f, 1);
	ck_assert_int_eq(r2.done, 1);
	ck_assert_uint_eq(f->win.c.retired_ok, 8);
	window_batch_fini(&b2);
	rec_free(&r2);
	wr_plan_done(&plan);
	free(wrs);
	bed_free(&a);
}
END_TEST

/* Striped over two windows: path 0's QP fails, path 1's ops still finish. */
START_TEST(test_stripe_two_paths)
{
	const struct wr_plan_params pp = { .max_msg = 64,
					   .n_paths = 2,
					   .stripe_min = 1,
					   .stripe_chunk = 8 };
	struct bed t;

	/* 8 separate ops of 8 bytes: ops 0,2,4,6 on path 0, 1,3,5,7 on 1. */
	bed_init(&t, 8, 8, false, &pp, 2, 2, 0);
	ck_assert_uint_eq(t.plan.path_n[0], 4);
	ck_assert_uint_eq(t.plan.path_n[1], 4);
	t.links[0].fail_seq = 1;
	window_batch_start(&t.b, t.wins);
	for (int round = 0; round < 10; round++) {
		fake_drain(&t.links[0], 1);
		fake_drain(&t.links[1], 64);
	}
	ck_assert_int_eq(t.rec.done, 1);
	for (size_t i = 0; i < 8; i++) {
		enum window_outcome want = i % 2  ? WINDOW_OK :
					   i == 0 ? WINDOW_OK :
					   i == 2 ? WINDOW_WC_ERROR :
						    WINDOW_FLUSHED;

		ck_assert_int_eq(t.rec.st[i].outcome, want);
	}
	ck_assert(!t.links[1].win.failed);
	bed_free(&t);
}
END_TEST

/* A link whose QP runs every post at once: the test hands in the
 * completion of its newest WR (always signalled) when it likes. */
struct instant_link {
	struct window win;
	uint64_t last;
	size_t max_post;
};

static int instant_post(void *link, struct wr *wrs, size_t n)
{
	struct instant_link *l = link;

	l->last = wrs[n - 1].wr_id;
	if (n > l->max_post)
		l->max_post = n;
	return 0;
}

static const struct window_link_ops instant_ops = { .post = instant_post };

/*
 * 100,000 ops of 1 GiB striped over four windows in 1 MiB pieces: 10^8 WRs,
 * generated a post call at a time. Each window holds its depth and no
 * more, each post call post_max at most; after ten rounds of completions
 * the ops whose 1,024 pieces all ran are done (five), a cancel reports every
 * other op once, and done comes after what was posted has drained. What the
 * batch allocated is its op counters; the windows' arrays are their depth.
 */
START_TEST(test_huge)
{
	enum { N = 100000, DEPTH = 128, POST_MAX = 32, ROUNDS = 10 };
	const uint64_t gib = 1ULL << 30, mib = 1ULL << 20;
	const struct window_params wp = { .depth = DEPTH,
					  .signal_every = 16,
					  .post_max = POST_MAX };
	const struct wr_plan_params pp = { .max_msg = WR_MSG_MAX,
					   .n_paths = 4,
					   .stripe_min = 4 * mib,
					   .stripe_chunk = (uint32_t)mib };
	struct wr_op *ops = calloc(N, sizeof(*ops));
	struct instant_link links[4] = { 0 };
	struct window *wins[4];
	struct wr_keys keys[4];
	struct wr_plan plan;
	struct window_batch b;
	struct rec r;

	ck_assert_ptr_nonnull(ops);
	for (size_t i = 0; i < N; i++)
		ops[i] = (struct wr_op){ .local_offset = 2 * gib * i,
					 .remote_offset = 2 * gib * i,
					 .length = gib,
					 .opcode = WR_WRITE };
	for (uint32_t q = 0; q < 4; q++) {
		keys[q] = (struct wr_keys){ .lkey = q + 1, .rkey = q + 11 };
		ck_assert_int_eq(window_init(&links[q].win, &wp, &instant_ops, &links[q]), 0);
		wins[q] = &links[q].win;
	}
	wr_plan_init(&plan);
	ck_assert_int_eq(wr_plan_build(&plan, ops, N, keys, 1, &pp), 0);
	ck_assert_uint_eq(plan.n_wrs, (uint64_t)N * 1024);
	rec_init(&r, N);
	ck_assert_int_eq(window_batch_init(&b, &plan, &rec_ops, &r), 0);
	window_batch_start(&b, wins);
	for (int round = 0; round < ROUNDS; round++)
		for (uint32_t q = 0; q < 4; q++) {
			struct window_wc wc = { .wr_id = links[q].last };

			ck_assert_uint_eq(links[q].win.c.outstanding, DEPTH);
			window_complete(&links[q].win, &wc, 1);
		}
	for (uint32_t q = 0; q < 4; q++) {
		const struct window_counters *c = &links[q].win.c;

		counters_check(&links[q].win);
		ck_assert_uint_eq(c->posted, (ROUNDS + 1) * DEPTH);
		ck_assert_uint_eq(c->retired_ok, ROUNDS * DEPTH);
		ck_assert_uint_eq(c->max_outstanding, DEPTH);
		ck_assert_uint_eq(c->post_calls, (ROUNDS + 1) * DEPTH / POST_MAX);
		ck_assert_uint_le(links[q].max_post, POST_MAX);
	}
	/* Pieces [0, 4 × 1280) ran: ops 0-4 whole; op 5 in part. */
	ck_assert_uint_eq(b.progress.ops_ok, 5);
	ck_assert_uint_eq(b.progress.bytes_done, 4ULL * ROUNDS * DEPTH * mib);
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(r.st[i].outcome, WINDOW_OK);
	ck_assert_int_eq(r.count[5], 0);

	window_batch_cancel(&b);
	ck_assert_uint_eq(b.progress.ops_failed, N - 5);
	for (size_t i = 5; i < N; i++)
		ck_assert_int_eq(r.st[i].outcome, WINDOW_CANCELLED);
	ck_assert_int_eq(r.done, 0);
	for (uint32_t q = 0; q < 4; q++) {
		struct window_wc wc = { .wr_id = links[q].last };

		window_complete(&links[q].win, &wc, 1);
		/* Nothing more was posted after the cancel. */
		ck_assert_uint_eq(links[q].win.c.posted, (ROUNDS + 1) * DEPTH);
	}
	ck_assert_int_eq(r.done, 1);
	window_batch_fini(&b);
	for (uint32_t q = 0; q < 4; q++)
		window_done(&links[q].win);
	rec_free(&r);
	wr_plan_done(&plan);
	free(ops);
}
END_TEST

static uint64_t rng_state;

static uint64_t rng_below(uint64_t n)
{
	return test_rng_below(&rng_state, n);
}

/*
 * Random plans, windows and schedules (runs, polls of random sizes,
 * -EAGAIN, an error WR, a cancel) against what the fake QP did: an op is
 * OK exactly when every WR carrying it ran OK; WC_ERROR only when one of
 * them is the error WR; CANCELLED only when one of them was never posted;
 * FLUSHED only when one did not run OK. Each op once, done once, the bytes
 * done are those of the WRs that ran OK, the counters add up throughout.
 */
START_TEST(test_random)
{
	const char *env = getenv("WINDOW_SEED");
	uint64_t first = env ? strtoull(env, NULL, 0) : 1, last = env ? first : 400;

	for (uint64_t seed = first; seed <= last; seed++) {
		struct wr_plan_params pp;
		struct bed t;
		uint64_t ok_bytes = 0;
		bool cancelled = false;
		int steps = 0;

		rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
		pp = (struct wr_plan_params){
			.max_msg = 1 + (uint32_t)rng_below(16),
			.n_paths = 1 + (uint32_t)rng_below(2),
			.stripe_min = rng_below(2),
			.stripe_chunk = 1 + (uint32_t)rng_below(8),
		};
		{
			uint32_t depth = 1 + (uint32_t)rng_below(8);

			bed_init(&t, rng_below(40), 1 + rng_below(20), rng_below(2), &pp, depth,
				 1 + (uint32_t)rng_below(depth), (uint32_t)rng_below(depth + 1));
		}
		for (uint32_t p = 0; p < pp.n_paths; p++)
			if (rng_below(3) == 0)
				t.links[p].fail_seq = (long)rng_below(t.plan.n_wrs + 1);
		window_batch_start(&t.b, t.wins);
		while (!t.rec.done && steps++ < 10000) {
			struct fake_link *f = &t.links[rng_below(pp.n_paths)];

			switch (rng_below(8)) {
			case 0:
				f->again = (int)rng_below(3);
				window_kick(&f->win);
				break;
			case 1:
				if (!cancelled && rng_below(10) == 0) {
					cancelled = true;
					window_batch_cancel(&t.b);
				}
				break;
			case 2:
			case 3:
			case 4:
				fake_run(f, 1 + rng_below(4));
				break;
			default:
				fake_poll(f, 1 + rng_below(5));
				break;
			}
			for (uint32_t p = 0; p < pp.n_paths; p++) {
				const struct window *w = &t.links[p].win;

				counters_check(w);
				/* The newest outstanding WR is signalled. */
				if (w->c.outstanding)
					ck_assert(t.links[p].signalled[w->head - 1]);
			}
		}
		for (uint32_t p = 0; p < pp.n_paths; p++) {
			t.links[p].again = 0;
			window_kick(&t.links[p].win);
		}
		for (int round = 0; !t.rec.done && round < 1000; round++)
			for (uint32_t p = 0; p < pp.n_paths; p++)
				fake_drain(&t.links[p], 64);
		ck_assert_msg(t.rec.done == 1, "seed %llu: done %d", (unsigned long long)seed,
			      t.rec.done);
		for (size_t i = 0; i < t.plan.n_wrs; i++)
			if (t.fate[i] == FATE_OK)
				ok_bytes += t.wrs[i].length;
		ck_assert_msg(t.b.progress.bytes_done == ok_bytes, "seed %llu",
			      (unsigned long long)seed);
		/* Every op's outcome, justified by the fates of its WRs. */
		for (size_t op = 0; op < t.rec.n_ops; op++) {
			bool all_ok = true, has_err = false, has_unposted = false;

			for (size_t i = 0; i < t.plan.n_wrs; i++) {
				const struct wr *x = &t.wrs[i];

				if (op < x->first_op || op >= (size_t)x->first_op + x->n_ops)
					continue;
				all_ok &= t.fate[i] == FATE_OK;
				has_err |= t.fate[i] == FATE_ERROR;
				has_unposted |= t.fate[i] == FATE_UNPOSTED;
			}
			switch (t.rec.st[op].outcome) {
			case WINDOW_OK:
				ck_assert_msg(all_ok, "seed %llu op %zu", (unsigned long long)seed,
					      op);
				break;
			case WINDOW_WC_ERROR:
				ck_assert_msg(has_err, "seed %llu op %zu", (unsigned long long)seed,
					      op);
				ck_assert_int_eq(t.rec.st[op].status, ST_REM_ACCESS);
				break;
			case WINDOW_CANCELLED:
				ck_assert_msg(cancelled && has_unposted, "seed %llu op %zu",
					      (unsigned long long)seed, op);
				break;
			case WINDOW_FLUSHED:
				ck_assert_msg(!all_ok, "seed %llu op %zu", (unsigned long long)seed,
					      op);
				break;
			}
			if (all_ok)
				ck_assert_int_eq(t.rec.st[op].outcome, WINDOW_OK);
		}
		bed_free(&t);
	}
}
END_TEST

Suite *window_suite(void)
{
	Suite *s = suite_create("window");
	TCase *tc = tcase_create("window");

	tcase_add_test(tc, test_basic);
	tcase_add_test(tc, test_poll_sizes);
	tcase_add_test(tc, test_error_position);
	tcase_add_test(tc, test_error_coalesced_split);
	tcase_add_test(tc, test_signalling);
	tcase_add_test(tc, test_post_again_and_error);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_cq_overflow);
	tcase_add_test(tc, test_stray);
	tcase_add_test(tc, test_empty_and_fini_in_done);
	tcase_add_test(tc, test_shared_window);
	tcase_add_test(tc, test_stripe_two_paths);
	tcase_add_test(tc, test_huge);
	tcase_add_test(tc, test_random);
	suite_add_tcase(s, tc);
	return s;
}
