/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/wr_plan.h"

void wr_plan_init(struct wr_plan *p)
{
	*p = (struct wr_plan){ 0 };
}

void wr_plan_done(struct wr_plan *p)
{
	free(p->wrs);
	free(p->scratch);
	wr_plan_init(p);
}

/* Room for n WRs in *a, doubling (at least 64): a build grows its array
 * O(log n) times, and a plan built again grows it never. */
static int reserve(struct wr **a, size_t *cap, size_t n)
{
	struct wr *t;
	size_t c = *cap ? *cap : 64;

	if (n <= *cap)
		return 0;
	while (c < n) {
		if (c > SIZE_MAX / 2 / sizeof(**a))
			return -ENOMEM;
		c *= 2;
	}
	t = realloc(*a, c * sizeof(**a));
	if (!t)
		return -ENOMEM;
	*a = t;
	*cap = c;
	return 0;
}

static bool params_valid(const struct wr_plan_params *pp)
{
	if (pp->max_msg < 1 || pp->max_msg > WR_MSG_MAX)
		return false;
	if (pp->n_paths < 1 || pp->n_paths > WR_PLAN_PATHS_MAX)
		return false;
	if (pp->stripe_min && pp->n_paths > 1 && pp->stripe_chunk < 1)
		return false;
	return true;
}

/* The contract of each op (wr_plan.h); the total bytes in *ret_bytes. */
static int ops_check(const struct wr_op *ops, size_t n_ops, size_t n_keys, uint64_t *ret_bytes)
{
	uint64_t bytes = 0;

	if (n_ops > UINT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n_ops; i++) {
		const struct wr_op *o = &ops[i];

		if (o->length == 0 || (o->opcode != WR_READ && o->opcode != WR_WRITE) ||
		    o->keys >= n_keys || o->local_offset + o->length < o->local_offset ||
		    o->remote_offset + o->length < o->remote_offset || bytes + o->length < bytes)
			return -EINVAL;
		bytes += o->length;
	}
	*ret_bytes = bytes;
	return 0;
}

/* Whether b continues a's extent: same kind, both sides contiguous. */
static bool continues(const struct wr_op *a_first, uint64_t a_len, const struct wr_op *b)
{
	return b->opcode == a_first->opcode && b->keys == a_first->keys &&
	       b->local_offset == a_first->local_offset + a_len &&
	       b->remote_offset == a_first->remote_offset + a_len;
}

/*
 * Cuts the extent ops[first .. last] (coalesced, len bytes from ops[first]'s
 * offsets) into pieces of at most piece bytes, appended to p->wrs with the
 * path *rr (advanced round-robin when n_rr > 1). The op cursor j only moves
 * forward: the cost is O(pieces + ops).
 */
static int emit_extent(struct wr_plan *p, const struct wr_op *ops, size_t first, size_t last,
		       uint64_t len, uint64_t piece, const struct wr_keys *keys, uint32_t n_paths,
		       uint32_t n_rr, uint32_t *rr)
{
	const struct wr_op *head = &ops[first];
	size_t j = first;
	/* Where op j ends, in bytes from the extent's start. */
	uint64_t j_end = ops[first].length;
	int r;

	r = reserve(&p->wrs, &p->cap, p->n_wrs + (len + piece - 1) / piece);
	if (r < 0)
		return r;
	for (uint64_t at = 0; at < len;) {
		uint64_t n = len - at < piece ? len - at : piece;
		uint32_t path = n_rr > 1 ? *rr : 0;
		const struct wr_keys *k = &keys[(size_t)head->keys * n_paths + path];
		struct wr *w = &p->wrs[p->n_wrs++];
		size_t last_j = j;

		/* The last op the piece touches: the one holding its last byte. */
		while (last_j < last && j_end < at + n)
			j_end += ops[++last_j].length;
		*w = (struct wr){
			.local_addr = k->local_addr + head->local_offset + at,
			.remote_addr = k->remote_addr + head->remote_offset + at,
			.lkey = k->lkey,
			.rkey = k->rkey,
			.length = (uint32_t)n,
			.first_op = (uint32_t)j,
			.n_ops = (uint32_t)(last_j - j + 1),
			.opcode = head->opcode,
			.path = (uint8_t)path,
		};
		at += n;
		/* The next piece starts in op last_j, or after it if it ended here. */
		j = last_j;
		if (j_end == at && j < last)
			j_end += ops[++j].length;
		if (n_rr > 1)
			*rr = (*rr + 1) % n_rr;
	}
	return 0;
}

/* Stable counting sort of p->wrs by path, through the scratch array. */
static int group_by_path(struct wr_plan *p)
{
	size_t at[WR_PLAN_PATHS_MAX] = { 0 };
	struct wr *t;
	int r;

	r = reserve(&p->scratch, &p->scratch_cap, p->n_wrs);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_wrs; i++)
		p->path_n[p->wrs[i].path]++;
	for (uint32_t q = 1; q < p->n_paths; q++)
		p->path_first[q] = p->path_first[q - 1] + p->path_n[q - 1];
	for (size_t i = 0; i < p->n_wrs; i++) {
		uint32_t q = p->wrs[i].path;

		p->scratch[p->path_first[q] + at[q]++] = p->wrs[i];
	}
	t = p->wrs;
	p->wrs = p->scratch;
	p->scratch = t;
	/* The capacities swap with the arrays. */
	p->cap ^= p->scratch_cap;
	p->scratch_cap ^= p->cap;
	p->cap ^= p->scratch_cap;
	return 0;
}

int wr_plan_build(struct wr_plan *p, const struct wr_op *ops, size_t n_ops,
		  const struct wr_keys *keys, size_t n_keys, const struct wr_plan_params *params)
{
	uint64_t bytes, piece;
	uint32_t n_rr, rr = 0;
	int r;

	p->n_wrs = 0;
	p->n_ops = 0;
	p->bytes = 0;
	p->striped = 0;
	memset(p->path_first, 0, sizeof(p->path_first));
	memset(p->path_n, 0, sizeof(p->path_n));
	if (!params_valid(params))
		return -EINVAL;
	r = ops_check(ops, n_ops, n_keys, &bytes);
	if (r < 0)
		return r;

	p->n_paths = params->n_paths;
	p->striped = params->n_paths > 1 && params->stripe_min && bytes >= params->stripe_min;
	n_rr = p->striped ? params->n_paths : 1;
	piece = params->max_msg;
	if (p->striped && params->stripe_chunk < piece)
		piece = params->stripe_chunk;

	for (size_t i = 0; i < n_ops;) {
		size_t last = i;
		uint64_t len = ops[i].length;

		while (last + 1 < n_ops && continues(&ops[i], len, &ops[last + 1]))
			len += ops[++last].length;
		r = emit_extent(p, ops, i, last, len, piece, keys, params->n_paths, n_rr, &rr);
		if (r < 0)
			goto fail;
		i = last + 1;
	}
	if (p->striped) {
		r = group_by_path(p);
		if (r < 0)
			goto fail;
	} else {
		p->path_n[0] = p->n_wrs;
		for (uint32_t q = 1; q < p->n_paths; q++)
			p->path_first[q] = p->n_wrs;
	}
	p->n_ops = n_ops;
	p->bytes = bytes;
	return 0;
fail:
	p->n_wrs = 0;
	p->striped = 0;
	memset(p->path_n, 0, sizeof(p->path_n));
	return r;
}
