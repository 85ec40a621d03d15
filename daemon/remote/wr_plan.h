/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The work-request plan of a transfer: from a list of one-sided ops (READ or
 * WRITE of a length between a local and a remote range) to the work requests
 * that RC queue pairs post, one queue pair per path (a local device and a
 * remote device that reach each other).
 *
 * Three rules, in this order:
 * - coalesce: a run of consecutive ops of the same opcode and key set whose
 *   local and remote ranges both continue where the previous op's ended
 *   becomes one extent. Only neighbours in the list are merged (no sort), so
 *   the ops' order is the WRs' order;
 * - split: an extent is cut into pieces of at most max_msg bytes (2^31 for
 *   RC), or of stripe_chunk bytes when the batch is striped;
 * - stripe: when the batch moves at least stripe_min bytes and has n_paths > 1,
 *   the pieces are dealt round-robin over the paths (the rotation carries on
 *   from one extent to the next, so many small extents spread too);
 *   otherwise every piece goes to path 0, which the caller makes the path
 *   nearest the memory.
 *
 * The plan holds the extents only, never the WRs: a call of 100,000 ops of
 * 1 GiB striped in 1 MiB pieces is 10^8 WRs, which no daemon should build
 * at once. Building costs O(ops) time and memory (an extent per run of
 * coalesced ops); each path's WRs are then generated in order by a cursor
 * (struct wr_cursor) as its queue pair has room, so what a transfer holds
 * is O(ops + window) and what one turn of the loop does is bounded by the
 * window: the WRs it posts, and the ops they carry (a path's cursor walks
 * each op at most once, plus the other paths' pieces it steps over). The
 * loop time a call spends planning is linear in its ops, whatever their
 * lengths: bench-remote's 100,000 ops of 1 GiB striped over four paths
 * (10^8 WRs) plan and fill four windows in under 2 ms, and cancel in as
 * much (a drop walks the ops left, not the WRs).
 *
 * Each WR remembers the ops it carries: positions [first_op, first_op +
 * n_ops) of the caller's op array, the first and the last possibly only in
 * part (a split op is carried by several WRs, a coalesced WR carries several
 * ops). The window (window.h) counts an op done when every WR carrying it
 * has completed; wr_plan_op_wrs() says how many those are, without
 * generating them. An op is carried by at most WR_OP_WRS_MAX WRs (checked
 * when building).
 *
 * Addresses: an op gives offsets and a key set; key set k on path p
 * (keys[k * n_paths + p]) gives the addresses of offset 0 on both sides and
 * the keys, so one op list serves every path whatever each device's keys
 * and addresses are.
 *
 * Pure computation on the caller's thread: no verbs, no loop. The plan
 * points at the caller's ops and keys, which must outlive its use (its
 * cursors'); it owns its extents and keeps their array from one build to
 * the next (a prepared transfer posted again allocates nothing); it grows
 * by doubling.
 */
#ifndef RDMAMEMD_WR_PLAN_H
#define RDMAMEMD_WR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device pairs one batch may stripe over. */
#define WR_PLAN_PATHS_MAX 4U
/* The largest RC message (IBTA: 2^31 bytes). */
#define WR_MSG_MAX (1U << 31)
/* The most WRs one op may be carried by (the window counts them in 31
 * bits): an op of 2^31 pieces or more is refused, -E2BIG. At the 1 MiB
 * stripe chunk that is an op of 2 PiB. */
#define WR_OP_WRS_MAX ((1U << 31) - 1)

enum wr_opcode {
	WR_READ = 1,  /* remote → local */
	WR_WRITE = 2, /* local → remote */
};

/* Key set k on one path: where offset 0 of each side is, and its keys. */
struct wr_keys {
	uint64_t local_addr;
	uint64_t remote_addr;
	uint32_t lkey;
	uint32_t rkey;
};

/*
 * One op. Contract (checked, -EINVAL): length > 0 (zero-length ops are
 * refused where the request is parsed), offset + length does not wrap, a
 * known opcode, keys < n_keys. Whether the ranges lie inside the regions is
 * the caller's to have checked.
 */
struct wr_op {
	uint64_t local_offset;
	uint64_t remote_offset;
	uint64_t length;
	uint32_t keys;  /* key set */
	uint32_t index; /* the caller's name for the op (request or plan index) */
	uint8_t opcode; /* enum wr_opcode */
};

/* One work request, ready for a link to post with one scatter entry. */
struct wr {
	uint64_t local_addr;
	uint64_t remote_addr;
	uint64_t wr_id; /* the window's, set when posted */
	uint32_t lkey;
	uint32_t rkey;
	uint32_t length;   /* 1 .. the piece size */
	uint32_t first_op; /* position of the first op carried */
	uint32_t n_ops;    /* ops carried: [first_op, first_op + n_ops) */
	uint8_t opcode;    /* enum wr_opcode */
	uint8_t path;
	uint8_t signalled; /* the window's, set when posted */
};

struct wr_plan_params {
	uint32_t max_msg;      /* the paths' smallest max message size, 1 .. WR_MSG_MAX */
	uint32_t n_paths;      /* 1 .. WR_PLAN_PATHS_MAX */
	uint64_t stripe_min;   /* batches of at least this many bytes stripe; 0: never */
	uint32_t stripe_chunk; /* piece size when striping, 1 .. (max_msg caps it) */
};

/* Ops [first, last] coalesced: len bytes, cut into the pieces numbered
 * [g, g + ceil(len / piece)) of the batch (piece g goes to path g mod n_rr). */
struct wr_extent {
	uint64_t len;
	uint64_t g;
	uint32_t first, last;
};

/*
 * The output. n_wrs WRs in all, path_n[p] of them on path p; n_ops and
 * bytes are the input's; striped says whether the pieces are dealt over
 * the paths.
 */
struct wr_plan {
	const struct wr_op *ops;    /* the caller's */
	const struct wr_keys *keys; /* the caller's */
	size_t n_ops;
	uint64_t bytes;
	uint64_t n_wrs;
	uint64_t path_n[WR_PLAN_PATHS_MAX];
	uint32_t n_paths;
	int striped;

	/* Private to wr_plan.c and its cursors. */
	uint64_t piece;
	uint32_t n_rr; /* paths the pieces are dealt over: n_paths striped, else 1 */
	struct wr_extent *ext;
	size_t n_ext, ext_cap;
	uint32_t *op_wrs; /* per op: the WRs that carry it */
	size_t op_wrs_cap;
};

/* Whether a batch of bytes stripes over params' paths: the rule
 * wr_plan_build() follows, for a caller that connects only the paths a
 * batch will use. */
bool wr_plan_stripes(const struct wr_plan_params *params, uint64_t bytes);

void wr_plan_init(struct wr_plan *p);
void wr_plan_done(struct wr_plan *p);

/*
 * Builds p from ops[0..n_ops) (n_ops ≤ UINT32_MAX) and the key sets
 * keys[0 .. n_keys * params->n_paths), which p points at from now on.
 * Returns 0, -EINVAL (an op or a parameter breaks the contract), -E2BIG (an
 * op would be carried by more than WR_OP_WRS_MAX WRs) or -ENOMEM; on error
 * p is left empty, and -EINVAL and -E2BIG allocate nothing.
 */
int wr_plan_build(struct wr_plan *p, const struct wr_op *ops, size_t n_ops,
		  const struct wr_keys *keys, size_t n_keys, const struct wr_plan_params *params);

/* ret[i] = how many WRs (all paths) carry op i, for i < p->n_ops; each is
 * 1 .. WR_OP_WRS_MAX. Counted when building: a copy. */
void wr_plan_op_wrs(const struct wr_plan *p, uint32_t *ret);

/*
 * Path path's WRs, in order, taken a few at a time. A cursor is a small
 * value: a caller that takes WRs and then cannot post them puts back the
 * copy it kept. A zeroed cursor is empty (done, drops nothing).
 *
 * Dropping: wr_cursor_drop() hands out, in op order and each once, the ops
 * that an untaken WR of the path carries (the first of them perhaps carried
 * in part by WRs already taken), moving past each before it returns it; once
 * dropping began, nothing more is taken. O(ops left) in all.
 */
struct wr_cursor {
	const struct wr_plan *plan;
	size_t e, n_ext; /* extent of the next piece; n_ext: none left */
	uint64_t k;      /* the next piece's number within extent e */
	uint64_t k_end;  /* extent e's pieces */
	uint64_t j_at;   /* where op j starts, from extent e's start */
	uint32_t j;      /* the op holding the next piece's first byte (dropping: the next op) */
	uint32_t path;
	bool dropping;
};

void wr_cursor_init(struct wr_cursor *c, const struct wr_plan *p, uint32_t path);
/* Whether every WR of the path was taken (or dropped). */
static inline bool wr_cursor_done(const struct wr_cursor *c)
{
	return c->e >= c->n_ext;
}
/* Fills out[0..n) with the path's next n ≤ max WRs (wr_id and signalled
 * zero) and returns n: 0 only when done. */
size_t wr_cursor_take(struct wr_cursor *c, struct wr *out, size_t max);
/* The next op an untaken WR carries, in *ret_op; false when none is left. */
bool wr_cursor_drop(struct wr_cursor *c, uint32_t *ret_op);

#endif
