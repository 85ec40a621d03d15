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
 *   the plan costs O(ops + WRs) and the ops' order is the WRs' order;
 * - split: an extent is cut into pieces of at most max_msg bytes (2^31 for
 *   RC), or of stripe_chunk bytes when the batch is striped;
 * - stripe: when the batch moves at least stripe_min bytes and has n_paths > 1,
 *   the pieces are dealt round-robin over the paths (the rotation carries on
 *   from one extent to the next, so many small extents spread too);
 *   otherwise every piece goes to path 0, which the caller makes the path
 *   nearest the memory.
 *
 * Each WR remembers the ops it carries: positions [first_op, first_op +
 * n_ops) of the caller's op array, the first and the last possibly only in
 * part (a split op is carried by several WRs, a coalesced WR carries several
 * ops). The window (window.h) counts an op done when every WR carrying it
 * has completed.
 *
 * Addresses: an op gives offsets and a key set; key set k on path p
 * (keys[k * n_paths + p]) gives the addresses of offset 0 on both sides and
 * the keys, so one op list serves every path whatever each device's keys
 * and addresses are.
 *
 * Pure computation on the caller's thread: no verbs, no loop. The plan owns
 * its arrays and keeps them from one build to the next (a prepared transfer
 * posted again allocates nothing); they grow by doubling.
 */
#ifndef RDMAMEMD_WR_PLAN_H
#define RDMAMEMD_WR_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* Device pairs one batch may stripe over. */
#define WR_PLAN_PATHS_MAX 4U
/* The largest RC message (IBTA: 2^31 bytes). */
#define WR_MSG_MAX (1U << 31)

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

/*
 * The output. wrs[path_first[p] .. path_first[p] + path_n[p]) are path p's
 * WRs in op order; paths follow each other, path 0 first (path_first[p] is
 * the sum of path_n[0 .. p), for p < n_paths). n_ops and bytes are the
 * input's; striped says whether the pieces were dealt over the paths.
 */
struct wr_plan {
	struct wr *wrs;
	size_t n_wrs;
	size_t path_first[WR_PLAN_PATHS_MAX];
	size_t path_n[WR_PLAN_PATHS_MAX];
	uint32_t n_paths;
	size_t n_ops;
	uint64_t bytes;
	int striped;

	/* Private: capacities, and the scratch array that groups by path. */
	size_t cap;
	struct wr *scratch;
	size_t scratch_cap;
};

void wr_plan_init(struct wr_plan *p);
void wr_plan_done(struct wr_plan *p);

/*
 * Builds p from ops[0..n_ops) (n_ops ≤ UINT32_MAX) and the key sets
 * keys[0 .. n_keys * params->n_paths). Returns 0, -EINVAL (an op or a
 * parameter breaks the contract: p is left empty) or -ENOMEM.
 */
int wr_plan_build(struct wr_plan *p, const struct wr_op *ops, size_t n_ops,
		  const struct wr_keys *keys, size_t n_keys, const struct wr_plan_params *params);

#endif
