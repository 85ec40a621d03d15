/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The WR plan (daemon/remote/wr_plan.c): coalescing, splitting at the max
 * message size, striping over paths, which ops each WR carries, the
 * cursors that generate each path's WRs and drop what is left, the cap on
 * WRs per op; a seeded random comparison with a reference model
 * (WR_PLAN_SEED=n replays one seed); and a plan of 10^8 WRs that is never
 * built (its memory is its extents).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/wr_plan.h"
#include "tests/testlib.h"
#include "tests/unit/plan-fixture.h"

/* Key set k on path p: distinct addresses and keys, so a WR built with the
 * wrong set or path shows. */
static void keys_fill(struct wr_keys *keys, size_t n_keys, uint32_t n_paths)
{
	for (size_t k = 0; k < n_keys; k++)
		for (uint32_t p = 0; p < n_paths; p++)
			keys[k * n_paths + p] = (struct wr_keys){
				.local_addr = 0x100000000ULL * (k + 1) + 0x10000000ULL * p,
				.remote_addr = 0x7000000000ULL * (k + 1) + 0x20000000ULL * p,
				.lkey = (uint32_t)(100 + 10 * k + p),
				.rkey = (uint32_t)(500 + 10 * k + p),
			};
}

static const struct wr_plan_params one_path = { .max_msg = WR_MSG_MAX, .n_paths = 1 };

/* The last plan's WRs, as the window takes them (plan_expand()): each test
 * expands after a build and reads wrs[] and path_first[]. */
static struct wr *wrs;
static size_t path_first[WR_PLAN_PATHS_MAX + 1];

static void expand(const struct wr_plan *p)
{
	free(wrs);
	wrs = plan_expand(p, SIZE_MAX, NULL, path_first);
}

static void unexpand(void)
{
	free(wrs);
	wrs = NULL;
}

static struct wr_op op_rw(uint8_t opcode, uint64_t loff, uint64_t roff, uint64_t len)
{
	return (struct wr_op){ .local_offset = loff,
			       .remote_offset = roff,
			       .length = len,
			       .opcode = opcode };
}

/*
 * What every plan must be, checked from the WRs back to the ops: each WR's
 * bytes are the concatenation of the overlaps of the ops it names, in order,
 * each mapped the op's way (same opcode, key set on the WR's path, the same
 * local-to-remote shift); every op's bytes are carried exactly once; pieces
 * are at most piece bytes; each path's WRs are in op order; paths follow
 * each other.
 */
static void plan_verify(const struct wr_plan *p, const struct wr_op *ops, size_t n_ops,
			const struct wr_keys *keys, uint32_t n_paths, uint64_t piece)
{
	uint64_t *covered = calloc(n_ops ? n_ops : 1, sizeof(*covered));
	uint32_t *carriers = calloc(n_ops ? n_ops : 1, sizeof(*carriers));
	uint32_t *counted = calloc(n_ops ? n_ops : 1, sizeof(*counted));
	uint64_t total = 0;

	ck_assert(covered && carriers && counted);
	ck_assert_uint_eq(p->n_ops, n_ops);
	ck_assert_uint_eq(path_first[n_paths], p->n_wrs);
	for (uint32_t q = 0; q < n_paths; q++) {
		uint64_t prev_op = 0, prev_end = 0;

		for (size_t i = path_first[q]; i < path_first[q + 1]; i++) {
			const struct wr *w = &wrs[i];
			uint64_t pos = w->local_addr, end = w->local_addr + w->length;

			ck_assert_uint_eq(w->path, q);
			ck_assert_uint_ge(w->length, 1);
			ck_assert_uint_le(w->length, piece);
			ck_assert_uint_ge(w->n_ops, 1);
			ck_assert_uint_le((uint64_t)w->first_op + w->n_ops, n_ops);
			/* Op order within a path. */
			ck_assert_uint_ge(w->first_op, prev_op);
			if (i > path_first[q] && w->first_op == prev_op)
				ck_assert_uint_ge(w->local_addr, prev_end);
			prev_op = w->first_op + w->n_ops - 1;
			prev_end = end;
			for (uint32_t j = w->first_op; j < w->first_op + w->n_ops; j++) {
				const struct wr_op *o = &ops[j];
				const struct wr_keys *k = &keys[(size_t)o->keys * n_paths + q];
				uint64_t a = k->local_addr + o->local_offset, b = a + o->length;

				ck_assert_uint_eq(w->opcode, o->opcode);
				ck_assert_uint_eq(w->lkey, k->lkey);
				ck_assert_uint_eq(w->rkey, k->rkey);
				ck_assert_uint_eq(w->remote_addr - w->local_addr,
						  k->remote_addr + o->remote_offset - a);
				/* The overlap starts where the previous ended. */
				ck_assert(a <= pos && pos < b);
				covered[j] += (b < end ? b : end) - pos;
				carriers[j]++;
				pos = b < end ? b : end;
			}
			ck_assert_uint_eq(pos, end);
			total += w->length;
		}
	}
	/* What the window counts per op, without the WRs. */
	wr_plan_op_wrs(p, counted);
	for (size_t j = 0; j < n_ops; j++) {
		ck_assert_uint_eq(covered[j], ops[j].length);
		ck_assert_uint_eq(counted[j], carriers[j]);
	}
	ck_assert_uint_eq(total, p->bytes);
	free(counted);
	free(carriers);
	free(covered);
}

START_TEST(test_contract)
{
	struct wr_keys keys[2];
	struct wr_op op = op_rw(WR_READ, 0, 0, 1);
	struct wr_plan_params bad;
	struct wr_plan p;

	keys_fill(keys, 2, 1);
	wr_plan_init(&p);
	/* Zero-length ops are refused upstream; here they break the contract. */
	op.length = 0;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &one_path), -EINVAL);
	op = op_rw(3, 0, 0, 1);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &one_path), -EINVAL);
	op = op_rw(WR_WRITE, 0, 0, 1);
	op.keys = 2;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &one_path), -EINVAL);
	op = op_rw(WR_WRITE, UINT64_MAX, 0, 1);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &one_path), -EINVAL);
	op = op_rw(WR_WRITE, 0, UINT64_MAX - 1, 2);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &one_path), -EINVAL);
	ck_assert_uint_eq(p.n_wrs, 0);

	op = op_rw(WR_WRITE, 0, 0, 1);
	bad = one_path;
	bad.max_msg = 0;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &bad), -EINVAL);
	bad.max_msg = WR_MSG_MAX + 1U;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &bad), -EINVAL);
	bad = one_path;
	bad.n_paths = 0;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &bad), -EINVAL);
	bad.n_paths = WR_PLAN_PATHS_MAX + 1;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &bad), -EINVAL);
	bad = (struct wr_plan_params){ .max_msg = 64, .n_paths = 2, .stripe_min = 1 };
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 2, &bad), -EINVAL);

	/* No ops: an empty plan. */
	ck_assert_int_eq(wr_plan_build(&p, &op, 0, keys, 2, &one_path), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 0);
	ck_assert_uint_eq(p.bytes, 0);
	unexpand();
	wr_plan_done(&p);
}
END_TEST

START_TEST(test_one_byte)
{
	struct wr_keys keys[2];
	struct wr_op ops[2] = { op_rw(WR_READ, 7, 9, 1), op_rw(WR_READ, 8, 10, 1) };
	struct wr_plan p;

	keys_fill(keys, 2, 1);
	ops[1].keys = 1;
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, 2, keys, 2, &one_path), 0);
	expand(&p);
	/* Adjacent but of two key sets: two WRs. */
	ck_assert_uint_eq(p.n_wrs, 2);
	ck_assert_uint_eq(wrs[0].local_addr, keys[0].local_addr + 7);
	ck_assert_uint_eq(wrs[0].remote_addr, keys[0].remote_addr + 9);
	ck_assert_uint_eq(wrs[0].lkey, keys[0].lkey);
	ck_assert_uint_eq(wrs[0].rkey, keys[0].rkey);
	ck_assert_uint_eq(wrs[0].length, 1);
	ck_assert_uint_eq(wrs[0].opcode, WR_READ);
	ck_assert_uint_eq(wrs[1].local_addr, keys[1].local_addr + 8);
	ck_assert_uint_eq(wrs[1].first_op, 1);
	ck_assert_uint_eq(wrs[1].n_ops, 1);
	plan_verify(&p, ops, 2, keys, 1, WR_MSG_MAX);
	unexpand();
	wr_plan_done(&p);
}
END_TEST

/* At, just over, and far over the max message size. */
START_TEST(test_max_msg)
{
	struct wr_keys keys[1];
	struct wr_op op = op_rw(WR_WRITE, 0, 0, 4096);
	struct wr_plan_params pp = { .max_msg = 4096, .n_paths = 1 };
	struct wr_plan p;

	keys_fill(keys, 1, 1);
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 1);
	ck_assert_uint_eq(wrs[0].length, 4096);

	op.length = 4097;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 2);
	ck_assert_uint_eq(wrs[0].length, 4096);
	ck_assert_uint_eq(wrs[1].length, 1);
	ck_assert_uint_eq(wrs[1].local_addr, keys[0].local_addr + 4096);
	ck_assert_uint_eq(wrs[1].remote_addr, keys[0].remote_addr + 4096);
	ck_assert_uint_eq(wrs[1].first_op, 0);
	plan_verify(&p, &op, 1, keys, 1, 4096);

	/* RC's own limit: 2^31 fits one WR, 2^32 + 5 takes three. */
	op.length = WR_MSG_MAX;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &one_path), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 1);
	ck_assert_uint_eq(wrs[0].length, WR_MSG_MAX);
	op.length = (1ULL << 32) + 5;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &one_path), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 3);
	ck_assert_uint_eq(wrs[2].length, 5);
	plan_verify(&p, &op, 1, keys, 1, WR_MSG_MAX);
	unexpand();
	wr_plan_done(&p);
}
END_TEST

/* 10,000 adjacent 4 KiB ops: one WR under RC's limit, 40 at 1 MiB, each
 * carrying 256 ops, from one extent; its array is kept for the next build. */
START_TEST(test_coalesce_many)
{
	enum { N = 10000 };
	struct wr_keys keys[1];
	struct wr_op *ops = calloc(N, sizeof(*ops));
	struct wr_plan_params pp = { .max_msg = 1 << 20, .n_paths = 1 };
	struct wr_plan p;
	struct wr_extent *kept;

	ck_assert_ptr_nonnull(ops);
	keys_fill(keys, 1, 1);
	for (size_t i = 0; i < N; i++)
		ops[i] = op_rw(WR_WRITE, 4096 * i, 1000 + 4096 * i, 4096);
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, N, keys, 1, &one_path), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 1);
	ck_assert_uint_eq(wrs[0].n_ops, N);
	ck_assert_uint_eq(wrs[0].length, 4096 * N);
	ck_assert_uint_eq(p.bytes, 4096ULL * N);
	plan_verify(&p, ops, N, keys, 1, WR_MSG_MAX);

	ck_assert_int_eq(wr_plan_build(&p, ops, N, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, (4096ULL * N + (1 << 20) - 1) >> 20);
	for (size_t i = 0; i + 1 < p.n_wrs; i++) {
		ck_assert_uint_eq(wrs[i].first_op, 256 * i);
		ck_assert_uint_eq(wrs[i].n_ops, 256);
	}
	plan_verify(&p, ops, N, keys, 1, 1 << 20);

	ck_assert_uint_eq(p.n_ext, 1);
	kept = p.ext;
	ck_assert_int_eq(wr_plan_build(&p, ops, N, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_ptr_eq(p.ext, kept);
	unexpand();
	wr_plan_done(&p);
	free(ops);
}
END_TEST

/* What is not merged: a gap on either side, another opcode, another key
 * set; and ops adjacent only out of order. */
START_TEST(test_non_adjacent)
{
	struct wr_keys keys[2];
	struct wr_op ops[] = {
		op_rw(WR_READ, 0, 0, 10),    op_rw(WR_READ, 10, 10, 10), /* merged */
		op_rw(WR_READ, 21, 20, 10),                              /* local gap */
		op_rw(WR_READ, 31, 31, 10),                              /* remote gap */
		op_rw(WR_WRITE, 41, 41, 10),                             /* opcode */
		op_rw(WR_WRITE, 51, 51, 10),                             /* key set 1 */
		op_rw(WR_WRITE, 71, 71, 10), op_rw(WR_WRITE, 61, 61, 10) /* reversed */
	};
	struct wr_plan p;

	keys_fill(keys, 2, 1);
	ops[5].keys = 1;
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, ELEMENTSOF(ops), keys, 2, &one_path), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 7);
	ck_assert_uint_eq(wrs[0].n_ops, 2);
	ck_assert_uint_eq(wrs[0].length, 20);
	for (size_t i = 1; i < 7; i++) {
		ck_assert_uint_eq(wrs[i].first_op, i + 1);
		ck_assert_uint_eq(wrs[i].n_ops, 1);
	}
	plan_verify(&p, ops, ELEMENTSOF(ops), keys, 1, WR_MSG_MAX);
	unexpand();
	wr_plan_done(&p);
}
END_TEST

/* Coalesced, then split across op boundaries: each WR names the ops it
 * carries in part. */
START_TEST(test_split_across_ops)
{
	struct wr_keys keys[1];
	struct wr_op ops[] = { op_rw(WR_READ, 0, 0, 3), op_rw(WR_READ, 3, 3, 3),
			       op_rw(WR_READ, 6, 6, 3), op_rw(WR_READ, 9, 9, 1) };
	struct wr_plan_params pp = { .max_msg = 4, .n_paths = 1 };
	struct wr_plan p;

	keys_fill(keys, 1, 1);
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, 4, keys, 1, &pp), 0);
	expand(&p);
	/* [0,4): ops 0-1; [4,8): ops 1-2; [8,10): ops 2-3. */
	ck_assert_uint_eq(p.n_wrs, 3);
	ck_assert_uint_eq(wrs[0].first_op, 0);
	ck_assert_uint_eq(wrs[0].n_ops, 2);
	ck_assert_uint_eq(wrs[1].first_op, 1);
	ck_assert_uint_eq(wrs[1].n_ops, 2);
	ck_assert_uint_eq(wrs[2].first_op, 2);
	ck_assert_uint_eq(wrs[2].n_ops, 2);
	ck_assert_uint_eq(wrs[2].length, 2);
	plan_verify(&p, ops, 4, keys, 1, 4);

	/* A piece ending exactly at an op's end does not name the next op. */
	pp.max_msg = 3;
	ck_assert_int_eq(wr_plan_build(&p, ops, 4, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_uint_eq(p.n_wrs, 4);
	for (size_t i = 0; i < 4; i++) {
		ck_assert_uint_eq(wrs[i].first_op, i);
		ck_assert_uint_eq(wrs[i].n_ops, 1);
	}
	plan_verify(&p, ops, 4, keys, 1, 3);
	unexpand();
	wr_plan_done(&p);
}
END_TEST

START_TEST(test_stripe)
{
	struct wr_keys keys[2];
	struct wr_op op = op_rw(WR_WRITE, 0, 0, 10 << 20);
	struct wr_plan_params pp = { .max_msg = WR_MSG_MAX,
				     .n_paths = 1,
				     .stripe_min = 1 << 20,
				     .stripe_chunk = 1 << 20 };
	struct wr_plan p;

	wr_plan_init(&p);
	/* One path: nothing to stripe over, the op stays whole. */
	keys_fill(keys, 1, 1);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_int_eq(p.striped, 0);
	ck_assert_uint_eq(p.n_wrs, 1);

	/* Two paths: 1 MiB chunks, alternating, grouped path 0 then path 1,
	 * each with its own keys and addresses. */
	pp.n_paths = 2;
	keys_fill(keys, 1, 2);
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_int_eq(p.striped, 1);
	ck_assert_uint_eq(p.n_wrs, 10);
	ck_assert_uint_eq(p.path_n[0], 5);
	ck_assert_uint_eq(p.path_n[1], 5);
	ck_assert_uint_eq(path_first[1], 5);
	for (size_t i = 0; i < 5; i++) {
		ck_assert_uint_eq(wrs[i].local_addr, keys[0].local_addr + (2 * i << 20));
		ck_assert_uint_eq(wrs[5 + i].local_addr, keys[1].local_addr + ((2 * i + 1) << 20));
		ck_assert_uint_eq(wrs[5 + i].rkey, keys[1].rkey);
	}
	plan_verify(&p, &op, 1, keys, 2, 1 << 20);

	/* Under the threshold: everything on path 0, whole. */
	op.length = (1 << 20) - 1;
	ck_assert_int_eq(wr_plan_build(&p, &op, 1, keys, 1, &pp), 0);
	expand(&p);
	ck_assert_int_eq(p.striped, 0);
	ck_assert_uint_eq(p.path_n[0], 1);
	ck_assert_uint_eq(p.path_n[1], 0);
	ck_assert_uint_eq(path_first[1], 1);
	ck_assert_uint_eq(wrs[0].lkey, keys[0].lkey);

	/* Many small non-adjacent ops over the threshold: one each, dealt
	 * round-robin. */
	{
		struct wr_op small[5];

		for (size_t i = 0; i < 5; i++)
			small[i] = op_rw(WR_READ, 1000 * i, 1000 * i, 300 << 10);
		ck_assert_int_eq(wr_plan_build(&p, small, 5, keys, 1, &pp), 0);
		expand(&p);
		ck_assert_uint_eq(p.path_n[0], 3);
		ck_assert_uint_eq(p.path_n[1], 2);
		ck_assert_uint_eq(wrs[3].first_op, 1);
		ck_assert_uint_eq(wrs[4].first_op, 3);
	}
	unexpand();
	wr_plan_done(&p);
}
END_TEST

/*
 * The cap on WRs per op, refused before anything is allocated: an op of L
 * bytes meets at most (L - 1) / piece + 2 pieces, so with 2-byte pieces
 * 2^32 - 4 bytes is the longest (carried by 2^31 - 1 WRs at an odd offset)
 * and a byte more is -E2BIG. Striped, the piece is the stripe chunk.
 */
START_TEST(test_op_cap)
{
	const uint64_t longest = 2ULL * (WR_OP_WRS_MAX - 1);
	struct wr_keys keys[2];
	struct wr_op ops[2] = { op_rw(WR_WRITE, 0, 0, 1), op_rw(WR_WRITE, 1, 1, longest + 1) };
	struct wr_plan_params pp = { .max_msg = 2, .n_paths = 1 };
	struct wr_plan p;
	uint32_t n[2];

	keys_fill(keys, 1, 2);
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, 2, keys, 1, &pp), -E2BIG);
	ck_assert_ptr_null(p.ext);
	ck_assert_uint_eq(p.n_wrs, 0);
	ck_assert_uint_eq(p.n_ops, 0);

	ops[1].length = longest;
	ck_assert_int_eq(wr_plan_build(&p, ops, 2, keys, 1, &pp), 0);
	ck_assert_uint_eq(p.n_ext, 1);
	wr_plan_op_wrs(&p, n);
	ck_assert_uint_eq(n[0], 1);
	ck_assert_uint_eq(n[1], WR_OP_WRS_MAX);
	ck_assert_uint_eq(p.n_wrs, (longest + 2) / 2);

	/* Striped in 2-byte chunks: the same op is too long; unstriped (the
	 * batch under stripe_min), 2^31-byte pieces carry both in two. */
	ops[1].length = longest + 1;
	pp = (struct wr_plan_params){ .max_msg = WR_MSG_MAX,
				      .n_paths = 2,
				      .stripe_min = 1,
				      .stripe_chunk = 2 };
	ck_assert_int_eq(wr_plan_build(&p, ops, 2, keys, 1, &pp), -E2BIG);
	ck_assert_int_eq(p.striped, 0);
	pp.stripe_min = 1ULL << 40;
	ck_assert_int_eq(wr_plan_build(&p, ops, 2, keys, 1, &pp), 0);
	ck_assert_uint_eq(p.n_wrs, 2);
	wr_plan_done(&p);
}
END_TEST

/*
 * 100,000 ops of 1 GiB, striped over four paths in 1 MiB pieces: 102,400,000
 * WRs (about 5 GB as struct wr), which the plan never holds. What it
 * allocates is one extent per op, or one in all when the ops are adjacent;
 * a cursor takes WRs from anywhere in the rotation; a drop hands out every
 * op left once. Counted, not timed: every step here is O(ops) or O(WRs
 * taken).
 */
START_TEST(test_huge)
{
	enum { N = 100000 };
	const uint64_t gib = 1ULL << 30, mib = 1ULL << 20;
	struct wr_op *ops = calloc(N, sizeof(*ops));
	uint32_t *n_wrs = calloc(N, sizeof(*n_wrs));
	struct wr_keys keys[4];
	const struct wr_plan_params pp = { .max_msg = WR_MSG_MAX,
					   .n_paths = 4,
					   .stripe_min = 4 * mib,
					   .stripe_chunk = (uint32_t)mib };
	struct wr_plan p;
	struct wr_cursor c;
	struct wr w[128];
	uint32_t op;
	size_t n = 0;

	ck_assert(ops && n_wrs);
	keys_fill(keys, 1, 4);
	/* A gap between ops: nothing coalesces. */
	for (size_t i = 0; i < N; i++)
		ops[i] = op_rw(WR_READ, 2 * gib * i, 3 * gib * i, gib);
	wr_plan_init(&p);
	ck_assert_int_eq(wr_plan_build(&p, ops, N, keys, 1, &pp), 0);
	ck_assert_int_eq(p.striped, 1);
	ck_assert_uint_eq(p.n_wrs, (uint64_t)N * 1024);
	for (uint32_t q = 0; q < 4; q++)
		ck_assert_uint_eq(p.path_n[q], (uint64_t)N * 256);
	ck_assert_uint_eq(p.n_ext, N);
	ck_assert_uint_le(p.ext_cap, 2 * N);
	wr_plan_op_wrs(&p, n_wrs);
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(n_wrs[i], 1024);

	/* Path 2 has pieces 2, 6, 10, …: 256 of each op. */
	wr_cursor_init(&c, &p, 2);
	ck_assert_uint_eq(wr_cursor_take(&c, w, 128), 128);
	for (size_t i = 0; i < 128; i++) {
		ck_assert_uint_eq(w[i].local_addr, keys[2].local_addr + (4 * i + 2) * mib);
		ck_assert_uint_eq(w[i].remote_addr, keys[2].remote_addr + (4 * i + 2) * mib);
		ck_assert_uint_eq(w[i].length, mib);
		ck_assert_uint_eq(w[i].first_op, 0);
		ck_assert_uint_eq(w[i].n_ops, 1);
		ck_assert_uint_eq(w[i].path, 2);
	}
	ck_assert_uint_eq(wr_cursor_take(&c, w, 128), 128);
	ck_assert_uint_eq(w[127].local_addr, keys[2].local_addr + 1022 * mib);
	ck_assert_uint_eq(wr_cursor_take(&c, w, 1), 1);
	ck_assert_uint_eq(w[0].first_op, 1);
	ck_assert_uint_eq(w[0].local_addr, keys[2].local_addr + 2 * gib + 2 * mib);
	ck_assert_uint_eq(w[0].remote_addr, keys[2].remote_addr + 3 * gib + 2 * mib);
	/* Op 1 is taken in part: it and every later op are dropped. */
	while (wr_cursor_drop(&c, &op))
		ck_assert_uint_eq(op, 1 + n++);
	ck_assert_uint_eq(n, N - 1);

	/* Adjacent: one extent of 100,000 GiB, the same WRs in number. */
	for (size_t i = 0; i < N; i++)
		ops[i] = op_rw(WR_WRITE, gib * i, gib * i, gib);
	ck_assert_int_eq(wr_plan_build(&p, ops, N, keys, 1, &pp), 0);
	ck_assert_uint_eq(p.n_ext, 1);
	ck_assert_uint_eq(p.n_wrs, (uint64_t)N * 1024);
	ck_assert_uint_le(p.ext_cap, 2 * N);
	wr_cursor_init(&c, &p, 3);
	ck_assert_uint_eq(wr_cursor_take(&c, w, 128), 128);
	ck_assert_uint_eq(w[127].local_addr, keys[3].local_addr + (4 * 127 + 3) * mib);
	wr_plan_done(&p);
	free(n_wrs);
	free(ops);
}
END_TEST

static uint64_t rng_state;

static uint64_t rng_below(uint64_t n)
{
	return test_rng_below(&rng_state, n);
}

/*
 * The reference: the count of WRs per path that the rules give, computed
 * the plain way (extents by pairwise comparison, ceil per extent,
 * round-robin over the global piece number).
 */
static void reference_counts(const struct wr_op *ops, size_t n_ops, const struct wr_plan_params *pp,
			     size_t *ret_n)
{
	uint64_t total = 0, piece = pp->max_msg, g = 0;
	int striped;

	for (size_t i = 0; i < n_ops; i++)
		total += ops[i].length;
	striped = pp->n_paths > 1 && pp->stripe_min && total >= pp->stripe_min;
	if (striped && pp->stripe_chunk < piece)
		piece = pp->stripe_chunk;
	for (size_t i = 0; i < n_ops;) {
		uint64_t len = ops[i].length;
		size_t j = i + 1;

		for (; j < n_ops; j++) {
			const struct wr_op *a = &ops[j - 1], *b = &ops[j];

			if (b->opcode != a->opcode || b->keys != a->keys ||
			    b->local_offset != a->local_offset + a->length ||
			    b->remote_offset != a->remote_offset + a->length)
				break;
			len += b->length;
		}
		for (uint64_t k = 0; k < (len + piece - 1) / piece; k++, g++)
			ret_n[striped ? g % pp->n_paths : 0]++;
		i = j;
	}
}

/*
 * Path q's cursor after taking the first `taken` of its WRs drops exactly
 * the ops the others carry, in order, each once; then it is done, takes
 * nothing and drops nothing more.
 */
static void drop_check(const struct wr_plan *p, uint32_t q, uint64_t taken)
{
	struct wr_cursor c;
	struct wr w;
	uint32_t op;
	long want = -1;

	wr_cursor_init(&c, p, q);
	for (uint64_t i = 0; i < taken; i++)
		ck_assert_uint_eq(wr_cursor_take(&c, &w, 1), 1);
	for (size_t i = path_first[q] + taken; i < path_first[q + 1]; i++)
		for (uint32_t j = wrs[i].first_op; j < wrs[i].first_op + wrs[i].n_ops; j++) {
			if ((long)j <= want)
				continue;
			want = j;
			ck_assert(wr_cursor_drop(&c, &op));
			ck_assert_uint_eq(op, j);
			ck_assert(wr_cursor_done(&c));
			ck_assert_uint_eq(wr_cursor_take(&c, &w, 1), 0);
		}
	ck_assert(!wr_cursor_drop(&c, &op));
	ck_assert(wr_cursor_done(&c));
}

START_TEST(test_random)
{
	const char *env = getenv("WR_PLAN_SEED");
	uint64_t first = env ? strtoull(env, NULL, 0) : 1, last = env ? first : 300;
	struct wr_plan p;

	wr_plan_init(&p);
	for (uint64_t seed = first; seed <= last; seed++) {
		struct wr_op ops[64];
		struct wr_keys keys[3 * WR_PLAN_PATHS_MAX];
		struct wr_plan_params pp;
		size_t n_ops, ref[WR_PLAN_PATHS_MAX] = { 0 };
		uint64_t piece;

		rng_state = seed * 0x9e3779b97f4a7c15ULL;
		n_ops = rng_below(ELEMENTSOF(ops) + 1);
		pp.max_msg = 1 + (uint32_t)rng_below(64);
		pp.n_paths = 1 + (uint32_t)rng_below(WR_PLAN_PATHS_MAX);
		pp.stripe_min = rng_below(3) ? rng_below(400) : 0;
		pp.stripe_chunk = 1 + (uint32_t)rng_below(32);
		keys_fill(keys, 3, pp.n_paths);
		for (size_t i = 0; i < n_ops; i++) {
			/* Mostly continuing the previous op, so extents form. */
			const struct wr_op *prev = i ? &ops[i - 1] : NULL;
			int cont = prev && rng_below(4) != 0;

			ops[i] = (struct wr_op){
				.local_offset = cont ? prev->local_offset + prev->length :
						       rng_below(4096),
				.remote_offset = cont ? prev->remote_offset + prev->length :
							rng_below(4096),
				.length = 1 + rng_below(rng_below(4) ? 16 : 200),
				.keys = cont && rng_below(8) ? prev->keys : (uint32_t)rng_below(3),
				.opcode = cont && rng_below(8) ? prev->opcode : 1 + rng_below(2),
				.index = (uint32_t)i,
			};
		}
		ck_assert_msg(wr_plan_build(&p, ops, n_ops, keys, 3, &pp) == 0, "seed %llu",
			      (unsigned long long)seed);
		/* Taken a few at a time, as the window does, and whole: the
		 * same WRs. */
		expand(&p);
		{
			size_t pf[WR_PLAN_PATHS_MAX + 1];
			struct wr *bits = plan_expand(&p, 5, &rng_state, pf);

			ck_assert_msg(memcmp(bits, wrs, p.n_wrs * sizeof(*wrs)) == 0, "seed %llu",
				      (unsigned long long)seed);
			free(bits);
		}
		for (uint32_t q = 0; q < pp.n_paths; q++)
			drop_check(&p, q, rng_below(p.path_n[q] + 1));
		piece = pp.max_msg;
		if (p.striped && pp.stripe_chunk < piece)
			piece = pp.stripe_chunk;
		plan_verify(&p, ops, n_ops, keys, pp.n_paths, piece);
		reference_counts(ops, n_ops, &pp, ref);
		for (uint32_t q = 0; q < pp.n_paths; q++)
			ck_assert_msg(p.path_n[q] == ref[q],
				      "seed %llu: path %u: %llu WRs, model %zu",
				      (unsigned long long)seed, q, (unsigned long long)p.path_n[q],
				      ref[q]);
	}
	unexpand();
	unexpand();
	wr_plan_done(&p);
}
END_TEST

Suite *wr_plan_suite(void)
{
	Suite *s = suite_create("wr_plan");
	TCase *tc = tcase_create("plan");

	tcase_add_test(tc, test_contract);
	tcase_add_test(tc, test_one_byte);
	tcase_add_test(tc, test_max_msg);
	tcase_add_test(tc, test_coalesce_many);
	tcase_add_test(tc, test_non_adjacent);
	tcase_add_test(tc, test_split_across_ops);
	tcase_add_test(tc, test_stripe);
	tcase_add_test(tc, test_op_cap);
	tcase_add_test(tc, test_huge);
	tcase_add_test(tc, test_random);
	suite_add_tcase(s, tc);
	return s;
}
