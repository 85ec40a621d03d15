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
	free(p->ext);
	free(p->op_wrs);
	wr_plan_init(p);
}

/* The array a (of *cap elements of size) with room for n, doubling (at
 * least 64), or NULL (a stays): a build grows its arrays O(log n) times,
 * and a plan built again grows them never. */
static void *reserve(void *a, size_t *cap, size_t n, size_t size)
{
	void *t;
	size_t c = *cap ? *cap : 64;

	if (*cap && n <= *cap)
		return a;
	while (c < n) {
		if (c > SIZE_MAX / 2 / size)
			return NULL;
		c *= 2;
	}
	t = realloc(a, c * size);
	if (t)
		*cap = c;
	return t;
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

/* The contract of each op (wr_plan.h); the total bytes and the longest op. */
static int ops_check(const struct wr_op *ops, size_t n_ops, size_t n_keys, uint64_t *ret_bytes,
		     uint64_t *ret_longest)
{
	uint64_t bytes = 0, longest = 0;

	if (n_ops > UINT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n_ops; i++) {
		const struct wr_op *o = &ops[i];

		if (o->length == 0 || (o->opcode != WR_READ && o->opcode != WR_WRITE) ||
		    o->keys >= n_keys || o->local_offset + o->length < o->local_offset ||
		    o->remote_offset + o->length < o->remote_offset || bytes + o->length < bytes)
			return -EINVAL;
		bytes += o->length;
		if (o->length > longest)
			longest = o->length;
	}
	*ret_bytes = bytes;
	*ret_longest = longest;
	return 0;
}

/* Whether b continues a's extent: same kind, both sides contiguous. */
static bool continues(const struct wr_op *a_first, uint64_t a_len, const struct wr_op *b)
{
	return b->opcode == a_first->opcode && b->keys == a_first->keys &&
	       b->local_offset == a_first->local_offset + a_len &&
	       b->remote_offset == a_first->remote_offset + a_len;
}

/* ceil(len / piece), without overflowing near 2^64; most extents are one
 * piece, which costs no division. */
static uint64_t pieces_of(const struct wr_plan *p, uint64_t len)
{
	if (len <= p->piece)
		return 1;
	return len / p->piece + (len % p->piece != 0);
}

/* The pieces that carry an op of len bytes starting s bytes into a piece
 * (s < piece), and s for the op after it. An op inside one piece costs no
 * division. */
static uint32_t op_pieces(const struct wr_plan *p, uint64_t len, uint64_t *s)
{
	uint64_t n;

	if (len <= p->piece - *s) {
		*s += len;
		if (*s == p->piece)
			*s = 0;
		return 1;
	}
	n = (*s + len - 1) / p->piece + 1;
	*s = (*s + len) % p->piece;
	return (uint32_t)n;
}

/* The piece numbers below g that go to path q: h < g with h mod n_rr == q. */
static uint64_t on_path_below(const struct wr_plan *p, uint64_t g, uint32_t q)
{
	return g / p->n_rr + (g % p->n_rr > q);
}

bool wr_plan_stripes(const struct wr_plan_params *params, uint64_t bytes)
{
	return params->n_paths > 1 && params->stripe_min && bytes >= params->stripe_min;
}

int wr_plan_build(struct wr_plan *p, const struct wr_op *ops, size_t n_ops,
		  const struct wr_keys *keys, size_t n_keys, const struct wr_plan_params *params)
{
	uint64_t bytes, longest, g = 0;
	void *t;
	int r;

	p->ops = ops;
	p->keys = keys;
	p->n_ops = 0;
	p->bytes = 0;
	p->n_wrs = 0;
	p->n_ext = 0;
	p->striped = 0;
	memset(p->path_n, 0, sizeof(p->path_n));
	if (!params_valid(params))
		return -EINVAL;
	r = ops_check(ops, n_ops, n_keys, &bytes, &longest);
	if (r < 0)
		return r;

	p->n_paths = params->n_paths;
	p->striped = wr_plan_stripes(params, bytes);
	p->n_rr = p->striped ? params->n_paths : 1;
	p->piece = params->max_msg;
	if (p->striped && params->stripe_chunk < p->piece)
		p->piece = params->stripe_chunk;
	/* An op of L bytes at any offset meets at most (L - 1) / piece + 2
	 * pieces: refused before anything is allocated when that could pass
	 * WR_OP_WRS_MAX. */
	if (n_ops && (longest - 1) / p->piece > WR_OP_WRS_MAX - 2) {
		p->striped = 0;
		return -E2BIG;
	}

	t = reserve(p->op_wrs, &p->op_wrs_cap, n_ops, sizeof(*p->op_wrs));
	if (!t)
		goto fail;
	p->op_wrs = t;
	/* One pass: the extents, and the pieces each op meets (s: where the
	 * op starts in its piece). */
	for (size_t i = 0; i < n_ops;) {
		struct wr_extent *x;
		size_t last = i;
		uint64_t len = ops[i].length, s = 0;

		p->op_wrs[i] = op_pieces(p, ops[i].length, &s);
		while (last + 1 < n_ops && continues(&ops[i], len, &ops[last + 1])) {
			len += ops[++last].length;
			p->op_wrs[last] = op_pieces(p, ops[last].length, &s);
		}
		t = reserve(p->ext, &p->ext_cap, p->n_ext + 1, sizeof(*p->ext));
		if (!t)
			goto fail;
		p->ext = t;
		x = &p->ext[p->n_ext++];
		*x = (struct wr_extent){ .len = len,
					 .g = g,
					 .first = (uint32_t)i,
					 .last = (uint32_t)last };
		g += pieces_of(p, len);
		i = last + 1;
	}
	/* The pieces are numbered on from extent to extent: path q has those
	 * below g that are q mod n_rr. */
	for (uint32_t q = 0; q < p->n_rr; q++)
		p->path_n[q] = on_path_below(p, g, q);
	p->n_wrs = g;
	p->n_ops = n_ops;
	p->bytes = bytes;
	return 0;
fail:
	p->n_ext = 0;
	p->striped = 0;
	return -ENOMEM;
}

void wr_plan_op_wrs(const struct wr_plan *p, uint32_t *ret)
{
	if (p->n_ops)
		memcpy(ret, p->op_wrs, p->n_ops * sizeof(*ret));
}

/* ---- cursors ---- */

/* Moves op j forward to the op holding byte at of extent e. */
static void seek(struct wr_cursor *c, uint64_t at)
{
	const struct wr_op *ops = c->plan->ops;

	while (c->j_at + ops[c->j].length <= at) {
		c->j_at += ops[c->j].length;
		c->j++;
	}
}

/* From extent e on, the first one holding a piece of c's path, and that
 * piece; e = n_ext when there is none. An extent has one piece at least and
 * the numbering runs on, so n_rr extents in a row hold one of each path's:
 * this skips fewer than n_rr. */
static void next_extent(struct wr_cursor *c)
{
	const struct wr_plan *p = c->plan;

	for (; c->e < c->n_ext; c->e++) {
		const struct wr_extent *x = &p->ext[c->e];
		uint64_t k = p->n_rr == 1 ? 0 : (c->path + p->n_rr - x->g % p->n_rr) % p->n_rr;

		c->k_end = pieces_of(p, x->len);
		if (k < c->k_end) {
			c->k = k;
			c->j = x->first;
			c->j_at = 0;
			seek(c, k * p->piece);
			return;
		}
	}
}

void wr_cursor_init(struct wr_cursor *c, const struct wr_plan *p, uint32_t path)
{
	*c = (struct wr_cursor){ .plan = p, .path = path };
	/* Unstriped, every piece is path 0's. */
	if (path >= p->n_rr)
		return;
	c->n_ext = p->n_ext;
	next_extent(c);
}

size_t wr_cursor_take(struct wr_cursor *c, struct wr *out, size_t max)
{
	const struct wr_plan *p = c->plan;
	/* Worked on in a copy, which the stores to out cannot alias. */
	struct wr_cursor t = *c;
	size_t n = 0;

	while (n < max && t.e < t.n_ext) {
		const struct wr_extent *x = &p->ext[t.e];
		const struct wr_op *head = &p->ops[x->first];
		const struct wr_keys *k = &p->keys[(size_t)head->keys * p->n_paths + t.path];
		uint64_t at = t.k * p->piece;
		uint64_t len = x->len - at < p->piece ? x->len - at : p->piece;
		uint32_t last = t.j;
		/* Where op last ends, from the extent's start. */
		uint64_t end = t.j_at + p->ops[last].length;

		/* The last op the piece touches: the one holding its last byte. */
		while (end < at + len)
			end += p->ops[++last].length;
		out[n++] = (struct wr){
			.local_addr = k->local_addr + head->local_offset + at,
			.remote_addr = k->remote_addr + head->remote_offset + at,
			.lkey = k->lkey,
			.rkey = k->rkey,
			.length = (uint32_t)len,
			.first_op = t.j,
			.n_ops = last - t.j + 1,
			.opcode = head->opcode,
			.path = (uint8_t)t.path,
		};
		t.k += p->n_rr;
		if (t.k < t.k_end) {
			/* The next piece of the path starts in op last or after. */
			t.j = last;
			t.j_at = end - p->ops[last].length;
			seek(&t, t.k * p->piece);
		} else if (p->n_rr == 1) {
			/* Unstriped: every extent's first piece is the path's. */
			if (++t.e < t.n_ext) {
				x++;
				t.k = 0;
				t.k_end = pieces_of(p, x->len);
				t.j = x->first;
				t.j_at = 0;
			}
		} else {
			t.e++;
			next_extent(&t);
		}
	}
	*c = t;
	return n;
}

/* Whether a piece of path q carries the op of len bytes at s in extent x. */
static bool op_on_path(const struct wr_plan *p, const struct wr_extent *x, uint64_t s, uint64_t len,
		       uint32_t q)
{
	uint64_t lo, hi;

	/* Unstriped, or meeting n_rr pieces in a row: every path's. */
	if (p->n_rr == 1 || len >= p->n_rr * p->piece)
		return true;
	lo = x->g + s / p->piece;
	hi = x->g + (s + len - 1) / p->piece;
	return on_path_below(p, hi + 1, q) > on_path_below(p, lo, q);
}

bool wr_cursor_drop(struct wr_cursor *c, uint32_t *ret_op)
{
	const struct wr_plan *p = c->plan;

	if (!c->dropping) {
		if (wr_cursor_done(c))
			return false;
		/* From here the cursor walks ops: (e, j, j_at) is the next
		 * op to look at. Op j holds the next piece, so it is handed
		 * out; every later op's pieces come after that one, so what
		 * it has on the path is untaken. Nothing more is taken. */
		c->dropping = true;
		c->n_ext = 0;
	}
	while (c->e < p->n_ext) {
		const struct wr_extent *x = &p->ext[c->e];
		uint32_t j = c->j;
		uint64_t s = c->j_at;

		if (j > x->last) {
			c->e++;
			c->j_at = 0;
			continue;
		}
		c->j++;
		c->j_at += p->ops[j].length;
		if (op_on_path(p, x, s, p->ops[j].length, c->path)) {
			*ret_op = j;
			return true;
		}
	}
	return false;
}
