/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfers (daemon/remote/transfer.c) over the fake verbs: a local memfd
 * region of f.owner (uid 1000) registered on the fake device, a remote
 * handle of a descriptor naming the link fixture's "remote" buffer through
 * this process's own endpoint (the fake rdmacm connects in process, the
 * endpoint admits by the token), so bytes move by the fake's checked
 * memcpy and refusals are the fake device's. The pool and the windows are
 * the daemon's own (remote_ctx), the locks the region's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rdma/mreg.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/remote.h"
#include "daemon/remote/transfer.h"
#include "proto/errors.h"
#include "tests/fakes/fake.h"
#include "tests/unit/link-fixture.h"
#include "tests/testlib.h"

#define LOCAL_SIZE (1U << 20)

static struct link_fixture lf;
static struct remote_ctx ctx;
static struct region *local;
static struct remote *rem;

struct outcome {
	bool done;
	int result;
	struct errinfo e;
	unsigned n_progress;
	struct transfer_progress last;
};

static void on_done(void *userdata, struct transfer *t, int result, struct errinfo *e)
{
	struct outcome *o = userdata;

	(void)t;
	ck_assert(!o->done);
	o->done = true;
	o->result = result;
	o->e = *e;
	*e = (struct errinfo){};
}

static void on_progress(void *userdata, struct transfer *t, const struct transfer_progress *p)
{
	struct outcome *o = userdata;

	(void)t;
	ck_assert_uint_ge(p->ops_done, o->last.ops_done);
	o->n_progress++;
	o->last = *p;
}

static const struct transfer_cb cb = { .done = on_done, .progress = on_progress };

static void register_local(struct region *r)
{
	struct mreg *m;

	m = mreg_ensure(r, lf.dev, NULL);
	ck_assert_ptr_nonnull(m);
	LINK_RUN_UNTIL(&lf, m->state != MREG_PENDING);
	ck_assert_int_eq(m->state, MREG_REGISTERED);
}

static void setup(void)
{
	struct descriptor d = {};
	struct errinfo e = {};

	vb = &fake_vb_ops;
	fake_verbs_reset();
	link_fixture_init(&lf, "127.0.0.1:7471", NULL);
	remote_ctx_init(&ctx, &lf.f.core, &lf.rdma);
	plan_init(&ctx);
	link_pool_init(&ctx.links, &lf.f.loop,
		       &(struct link_pool_config){ .window = 16, .idle_sec = 60 });
	transfer_engine_init(&ctx, &lf.f.regions);
	/* The fixture's token as export 77's: its connections receive
	 * notifications, queued for f.owner. */
	notify_init(&ctx.notify, &lf.rdma);
	lf.token->export_id = 77;

	local = mem_fixture_import(&lf.f, LOCAL_SIZE);
	local->access |= REGION_ACCESS_LOCAL_WRITE; /* READs land in it */
	register_local(local);

	d.access = DESCRIPTOR_ACCESS_READ | DESCRIPTOR_ACCESS_WRITE;
	d.id = 77;
	d.length = LINK_FIXTURE_SIZE;
	memcpy(d.token, lf.token->raw, TOKEN_BYTES);
	d.n_endpoints = 1;
	d.endpoints[0].family = 4;
	d.endpoints[0].port = 7471;
	d.endpoints[0].addr[0] = 127;
	d.endpoints[0].addr[3] = 1;
	d.n_devices = 1;
	snprintf(d.devices[0].name, sizeof(d.devices[0].name), "%s", lf.dev->info.name);
	d.devices[0].addr = (uint64_t)(uintptr_t)lf.remote.buf;
	d.devices[0].rkey = lf.remote.rkey;
	d.devices[0].port = 1;
	ck_assert_int_eq(remote_import(&ctx, lf.f.owner, &d, &rem, &e), 0);
}

static void teardown(void)
{
	ck_assert_uint_eq(ctx.n_transfers, 0);
	link_pool_stop(&ctx.links);
	LINK_RUN_UNTIL(&lf, ctx.links.n_links == 0);
	ck_assert_int_eq(link_pool_done(&ctx.links), 0);
	ck_assert_uint_eq(ctx.n_transfer_qps, 0);
	/* The owner's session takes its region (its MR deregisters on the
	 * pool, which the fixture's loop runs) and its remote. */
	session_close(lf.f.owner);
	link_fixture_done(&lf);
	remote_ctx_done(&ctx);
	fake_verbs_reset();
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
}

static uint8_t *lbuf(void)
{
	return local->addr;
}

static struct transfer *start(const struct transfer_op *ops, size_t n, struct outcome *o)
{
	struct transfer *t = NULL;
	struct errinfo e = {};
	int r;

	memset(o, 0, sizeof(*o));
	r = transfer_start(&ctx, lf.f.owner, ops, n, NULL, 0, &cb, o, &t, &e);
	ck_assert_msg(r == 0, "transfer_start: %d %s", r, e.message);
	return t;
}

static void finish(struct transfer *t, struct outcome *o)
{
	LINK_RUN_UNTIL(&lf, o->done);
	transfer_free(t);
}

static struct transfer_op op(uint8_t code, uint64_t off, uint64_t roff, uint64_t len)
{
	return (struct transfer_op){ .opcode = code,
				     .region = local->id,
				     .offset = off,
				     .remote = rem->id,
				     .remote_offset = roff,
				     .length = len };
}

/* WRITE then READ at odd offsets and lengths: byte-exact, counted. */
START_TEST(test_write_read_exact)
{
	struct transfer_op ops[3] = {
		op(WR_WRITE, 3, 5, 40001),
		op(WR_WRITE, 50001, 60001, 1),
		op(WR_READ, 100003, 777, 7777),
	};
	struct outcome o;
	struct transfer *t;

	t = start(ops, 3, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_mem_eq(lbuf() + 3, lf.remote.buf + 5, 40001);
	ck_assert_mem_eq(lbuf() + 50001, lf.remote.buf + 60001, 1);
	ck_assert_mem_eq(lbuf() + 100003, lf.remote.buf + 777, 7777);
	/* The first WRITE put local bytes 3.. at remote 5..: 777 is inside. */
	ck_assert_uint_eq(lbuf()[100003], lbuf()[3 + 772]);
	ck_assert_uint_eq(o.last.ops_done, 3);
	ck_assert_uint_eq(o.last.bytes_done, 40001 + 1 + 7777);
	ck_assert_uint_eq(ctx.n_transfers_started, 1);
	ck_assert_uint_eq(ctx.n_transfers_done, 1);
	/* The device carried them: WRITEs out, the READ in. */
	ck_assert_uint_eq(lf.dev->xfer.bytes_out, 40001 + 1);
	ck_assert_uint_eq(lf.dev->xfer.bytes_in, 7777);
	ck_assert_uint_ge(lf.dev->xfer.writes, 1);
	ck_assert_uint_eq(lf.dev->xfer.reads, 1);
	/* The metrics' peer: one transfer done, its bytes, its time. */
	ck_assert_uint_eq(ctx.n_peers, 1);
	ck_assert_uint_eq(ctx.peers[0].transfers, 1);
	ck_assert_uint_eq(ctx.peers[0].bytes, 40001 + 1 + 7777);
	ck_assert_uint_eq(ctx.peers[0].latency.count, 1);
	ck_assert_uint_gt(ctx.peers[0].latency.sum_ns, 0);
	/* The locks are given back. */
	ck_assert(lock_is_idle(&local->lock));
}
END_TEST

/* 10,000 ops in one batch, alternating directions at odd sizes. */
START_TEST(test_ten_thousand)
{
	size_t n = 10000;
	struct transfer_op *ops = calloc(n, sizeof(*ops));
	struct outcome o;
	struct transfer *t;
	uint64_t bytes = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t len = 1 + i % 5;

		ops[i] = op(i % 2 ? WR_READ : WR_WRITE, i * 8 + 500000, i * 6 + 1, len);
		bytes += len;
	}
	t = start(ops, n, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_uint_eq(o.last.ops_done, n);
	ck_assert_uint_eq(o.last.bytes_done, bytes);
	ck_assert_uint_ge(o.n_progress, 2);
	/* Every byte carried once, by the one link and its device. */
	ck_assert_uint_eq(lf.dev->xfer.bytes_in + lf.dev->xfer.bytes_out, bytes);
	ck_assert_uint_eq(ctx.n_transfers_done, 1);
	for (size_t i = 0; i < n; i++)
		ck_assert_mem_eq(lbuf() + ops[i].offset, lf.remote.buf + ops[i].remote_offset,
				 ops[i].length);
	free(ops);
	/* One link, one window. */
	ck_assert_uint_eq(ctx.links.n_links, 1);
	ck_assert_uint_eq(ctx.n_transfer_qps, 1);
}
END_TEST

/* A batch (the packed form's model): 100,000 ranges of one region and one
 * remote in one call, READ: byte-exact, one link; a range out of bounds is
 * named by its index and nothing starts. */
START_TEST(test_batch_100k)
{
	size_t n = 100000;
	struct ranges_item *r = calloc(n, sizeof(*r));
	struct transfer_batch b = { .opcode = WR_READ,
				    .region = local->id,
				    .remote = rem->id,
				    .ranges = r,
				    .n = n };
	struct errinfo e = {};
	struct transfer *t = NULL;
	struct outcome o = {};
	uint64_t bytes = 0;

	/* Disjoint local ranges of 1 to 7 bytes, remote ones overlapping; the
	 * remote bytes a pattern the zeroed local region has not. */
	for (size_t i = 0; i < LINK_FIXTURE_SIZE; i++)
		lf.remote.buf[i] = (uint8_t)(i * 7 + 1) | 1;
	for (size_t i = 0; i < n; i++) {
		r[i] = (struct ranges_item){ i * 8, (i * 13) % (LINK_FIXTURE_SIZE - 8), 1 + i % 7 };
		bytes += r[i].length;
	}
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e), 0);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_uint_eq(o.last.ops_done, n);
	ck_assert_uint_eq(o.last.bytes_done, bytes);
	ck_assert_uint_eq(lf.dev->xfer.bytes_in, bytes);
	ck_assert_uint_ne(lbuf()[8 * (n - 1)], 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_mem_eq(lbuf() + r[i].local_offset, lf.remote.buf + r[i].remote_offset,
				 r[i].length);
	ck_assert_uint_eq(ctx.n_transfer_qps, 1);

	r[n - 1].local_offset = LOCAL_SIZE - 1;
	r[n - 1].length = 2;
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e),
			 -ERANGE);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_ptr_nonnull(strstr(e.message, "op 99999"));
	ck_assert_ptr_null(t);
	errinfo_done(&e);
	b.remote = rem->id + 1;
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e),
			 -ENOENT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_REMOTE);
	errinfo_done(&e);
	ck_assert(lock_is_idle(&local->lock));
	free(r);
}
END_TEST

/* A batch of 100,000 ranges (1 to 7 bytes, READ) in a buffer the transfer
 * takes, ranges[i] at local 8 i; the bytes in *ret_bytes. */
static struct ranges_buf pool_ranges(size_t n, uint64_t *ret_bytes)
{
	struct ranges_item *r = calloc(n, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	*ret_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		r[i] = (struct ranges_item){ i * 8, (i * 13) % (LINK_FIXTURE_SIZE - 8), 1 + i % 7 };
		*ret_bytes += r[i].length;
	}
	return (struct ranges_buf){ .r = r, .n = n, .base = r };
}

/*
 * Past TRANSFER_INLINE_OPS, with the daemon's offload: the batch's ranges
 * are checked on the pool (the buffer taken: the caller's is empty when the
 * start returns) and the WR plan made there; byte-exact as inline. A range
 * out of bounds is named through done, nothing moved and no lock left; a
 * cancel while the pool works reports every op once, cancelled.
 */
START_TEST(test_batch_on_pool)
{
	size_t n = 100000;
	struct offload off;
	uint64_t bytes;
	struct ranges_buf buf = pool_ranges(n, &bytes);
	struct ranges_item *r = (struct ranges_item *)buf.base;
	struct transfer_batch b = { .opcode = WR_READ,
				    .region = local->id,
				    .remote = rem->id,
				    .ranges = buf.r,
				    .n = n,
				    .take = &buf };
	struct errinfo e = {};
	struct transfer *t = NULL;
	struct outcome o = {};

	offload_init(&off, &lf.f.loop);
	lf.f.core.offload = &off;
	for (size_t i = 0; i < LINK_FIXTURE_SIZE; i++)
		lf.remote.buf[i] = (uint8_t)(i * 5 + 3) | 1;
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e), 0);
	ck_assert_ptr_null(buf.base); /* taken */
	ck_assert(!o.done);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_uint_eq(o.last.ops_done, n);
	ck_assert_uint_eq(o.last.bytes_done, bytes);
	ck_assert_uint_eq(o.last.bytes, bytes);
	for (size_t i = 0; i < n; i += 997)
		ck_assert_mem_eq(lbuf() + i * 8, lf.remote.buf + (i * 13) % (LINK_FIXTURE_SIZE - 8),
				 1 + i % 7);

	/* The last range one byte past the region: refused through done. */
	buf = pool_ranges(n, &bytes);
	r = (struct ranges_item *)buf.base;
	r[n - 1] = (struct ranges_item){ LOCAL_SIZE - 1, 0, 2 };
	b.ranges = buf.r;
	memset(lbuf(), 0, LOCAL_SIZE);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e), 0);
	finish(t, &o);
	ck_assert_int_eq(o.result, -ERANGE);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_ptr_nonnull(strstr(o.e.message, "op 99999"));
	ck_assert_uint_eq(o.last.ops_done, 0);
	ck_assert_uint_eq(lbuf()[0], 0);
	ck_assert(lock_is_idle(&local->lock));
	errinfo_done(&o.e);

	/* Cancelled while the pool checks: every op once, cancelled. */
	buf = pool_ranges(n, &bytes);
	b.ranges = buf.r;
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(transfer_start_batch(&ctx, lf.f.owner, &b, NULL, 0, &cb, &o, &t, &e), 0);
	transfer_cancel(t);
	ck_assert(!o.done);
	finish(t, &o);
	ck_assert_int_eq(o.result, -ECANCELED);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_TRANSFER_CANCELLED);
	ck_assert_uint_eq(lbuf()[0], 0);
	ck_assert(lock_is_idle(&local->lock));
	errinfo_done(&o.e);
	lf.f.core.offload = NULL;
}
END_TEST

/* A plan posted by index: only those ranges move. */
START_TEST(test_plan_by_index)
{
	struct ranges_item ranges[4] = {
		{ 11, 101, 1000 },
		{ 2001, 3001, 999 },
		{ 5003, 7003, 17 },
		{ 9000, 9000, 64 },
	};
	uint32_t idx[2] = { 3, 1 };
	struct errinfo e = {};
	struct transfer *t = NULL;
	struct outcome o = {};
	struct plan *p;
	uint8_t before[17];

	ck_assert_int_eq(plan_create(&ctx, lf.f.owner, local, rem, ranges, 4, &p, &e), 0);
	memcpy(before, lf.remote.buf + 7003, 17);
	ck_assert_int_eq(transfer_start_plan(&ctx, lf.f.owner, p, WR_WRITE, idx, 2, NULL, 0, &cb,
					     &o, &t, &e),
			 0);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_mem_eq(lbuf() + 9000, lf.remote.buf + 9000, 64);
	ck_assert_mem_eq(lbuf() + 2001, lf.remote.buf + 3001, 999);
	ck_assert_mem_eq(lf.remote.buf + 7003, before, 17); /* index 2 not posted */

	/* An index past the plan is refused before anything starts. */
	idx[0] = 4;
	ck_assert_int_eq(transfer_start_plan(&ctx, lf.f.owner, p, WR_WRITE, idx, 1, NULL, 0, &cb,
					     &o, &t, &e),
			 -ERANGE);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_ptr_null(t);
	plan_release(p);
}
END_TEST

/* Rights and ranges are checked up front; nothing moves. */
START_TEST(test_refusals)
{
	struct transfer_op o1 = op(WR_READ, 0, 0, 16);
	struct transfer *t = NULL;
	struct errinfo e = {};
	struct outcome o = {};

	/* Remote ids are the importing session's: another has none. */
	ck_assert_int_eq(transfer_start(&ctx, lf.f.other, &o1, 1, NULL, 0, &cb, &o, &t, &e),
			 -ENOENT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_REMOTE);
	errinfo_done(&e);
	/* Past the remote's length. */
	o1 = op(WR_WRITE, 0, LINK_FIXTURE_SIZE - 3, 4);
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &o1, 1, NULL, 0, &cb, &o, &t, &e),
			 -ERANGE);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_OUT_OF_RANGE);
	/* Past the region. */
	o1 = op(WR_WRITE, LOCAL_SIZE, 0, 1);
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &o1, 1, NULL, 0, &cb, &o, &t, &e),
			 -ERANGE);
	/* The remote grants read only. */
	rem->desc.access = DESCRIPTOR_ACCESS_READ;
	o1 = op(WR_WRITE, 0, 0, 1);
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &o1, 1, NULL, 0, &cb, &o, &t, &e),
			 -EACCES);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_PERMISSION_DENIED);
	rem->desc.access |= DESCRIPTOR_ACCESS_WRITE;
	/* A READ into a region registered without local writes. */
	local->access &= ~REGION_ACCESS_LOCAL_WRITE;
	mreg_find(local, lf.dev->info.name)->access &= ~VB_ACCESS_LOCAL_WRITE;
	o1 = op(WR_READ, 0, 0, 1);
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &o1, 1, NULL, 0, &cb, &o, &t, &e),
			 -EACCES);
	ck_assert_ptr_nonnull(strstr(e.message, "local writes"));
	mreg_find(local, lf.dev->info.name)->access |= VB_ACCESS_LOCAL_WRITE;
	o1 = op(WR_WRITE, 0, 0, 1);
	/* Notify bytes without a notification hook. */
	ctx.notify_send = NULL;
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &o1, 1, "x", 1, &cb, &o, &t, &e),
			 -EOPNOTSUPP);
	ctx.notify_send = link_post_notify;
	errinfo_done(&e);
	ck_assert(!o.done);
	ck_assert_uint_eq(ctx.links.n_links, 0);
}
END_TEST

/* The owner's queue, watched: each arrival checks that the bytes the
 * transfer wrote before it are in place already. */
struct arrival {
	struct notify_waiter w;
	unsigned n;
	bool in_place;
	char data[16];
	const struct transfer_op *ops;
	size_t n_ops;
};

static void arrival_seen(struct notify_waiter *w)
{
	struct arrival *a = container_of(w, struct arrival, w);
	struct notification *n = notify_queue_pop(notify_queue_of(lf.f.owner));

	ck_assert_ptr_nonnull(n);
	ck_assert_uint_eq(n->export_id, 77);
	ck_assert_uint_lt(n->len, sizeof(a->data));
	memcpy(a->data, n->data, n->len);
	free(n);
	a->in_place = true;
	for (size_t i = 0; i < a->n_ops; i++)
		if (memcmp(lbuf() + a->ops[i].offset, lf.remote.buf + a->ops[i].remote_offset,
			   a->ops[i].length) != 0)
			a->in_place = false;
	a->n++;
}

static void arrival_gone(struct notify_waiter *w)
{
	(void)w;
}

static struct link *the_link(void)
{
	ck_assert_uint_eq(ctx.links.n_links, 1);
	return list_first_entry(&ctx.links.links, struct link, node);
}

/* Transfer{ops, notify}: the SEND is posted right behind the WRITEs, before
 * any of them completed; the owner's queue gets it with the bytes in
 * place; the transfer ends once the SEND completed. */
START_TEST(test_notify_after_data)
{
	struct transfer_op ops[2] = { op(WR_WRITE, 3, 5, 40001), op(WR_WRITE, 50001, 60001, 1) };
	struct arrival a = { .w = { .arrived = arrival_seen, .gone = arrival_gone },
			     .ops = ops,
			     .n_ops = 2 };
	struct transfer *t = NULL;
	struct errinfo e = {};
	struct outcome o = {};
	struct notify_queue *q = notify_queue_get(&ctx.notify, lf.f.owner);

	ck_assert_ptr_nonnull(q);
	q->waiter = &a.w;
	for (size_t i = 0; i < LOCAL_SIZE; i++)
		lbuf()[i] = (uint8_t)(i * 7 + 3);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, ops, 2, "ready", 5, &cb, &o, &t, &e), 0);
	/* Two WRITEs and the SEND, none run yet. */
	LINK_RUN_UNTIL(&lf, fake_verbs_held() == 3);
	ck_assert_uint_eq(the_link()->stats.notifications, 1);
	ck_assert(!o.done);
	ck_assert_uint_eq(a.n, 0);
	fake_verbs_hold_completions(false);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_uint_eq(a.n, 1);
	ck_assert(a.in_place);
	ck_assert_str_eq(a.data, "ready");

	/* A READ too, and several in a row on the same link. */
	ops[1] = op(WR_READ, 200001, 30001, 999);
	for (int i = 0; i < 3; i++) {
		lbuf()[3] ^= 0xff;
		memset(&o, 0, sizeof(o));
		ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, ops, 2, "again", 5, &cb, &o, &t,
						&e),
				 0);
		finish(t, &o);
		ck_assert_int_eq(o.result, 0);
		ck_assert_uint_eq(a.n, 2 + (unsigned)i);
		ck_assert(a.in_place);
		ck_assert_str_eq(a.data, "again");
	}
	ck_assert_uint_eq(the_link()->stats.notifications, 4);
	q->waiter = NULL;
}
END_TEST

/* More notifications than a link has send buffers: the rest wait for
 * room and go as the first complete; each arrives once. */
START_TEST(test_notify_waits_for_room)
{
	enum { N = LINK_NOTIFY_SLOTS + 3 };
	struct transfer_op ops[N];
	struct arrival a = { .w = { .arrived = arrival_seen, .gone = arrival_gone } };
	struct transfer *t[N];
	struct outcome o[N];
	struct errinfo e = {};
	struct notify_queue *q = notify_queue_get(&ctx.notify, lf.f.owner);

	q->waiter = &a.w;
	fake_verbs_hold_completions(true);
	for (int i = 0; i < N; i++) {
		ops[i] = op(WR_WRITE, (uint64_t)i * 100, (uint64_t)i * 100 + 1, 99);
		memset(&o[i], 0, sizeof(o[i]));
		ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, &ops[i], 1, "n", 1, &cb, &o[i],
						&t[i], &e),
				 0);
	}
	/* The window's WRITEs (a send queue of 16: 8 for the window, 8 for
	 * notifications) and as many SENDs as there are buffers. */
	LINK_RUN_UNTIL(&lf, fake_verbs_held() == 2 * LINK_NOTIFY_SLOTS);
	ck_assert_uint_eq(the_link()->stats.notifications, LINK_NOTIFY_SLOTS);
	fake_verbs_hold_completions(false);
	for (int i = 0; i < N; i++) {
		finish(t[i], &o[i]);
		ck_assert_int_eq(o[i].result, 0);
	}
	ck_assert_uint_eq(a.n, N);
	ck_assert_uint_eq(the_link()->stats.notifications, N);
	q->waiter = NULL;
}
END_TEST

/* A WRITE the remote refuses: the SEND behind it is flushed, nothing
 * arrives, and the error is the WRITE's. */
START_TEST(test_notify_not_after_failure)
{
	struct transfer_op ops[1] = { op(WR_WRITE, 0, 0, 100) };
	struct arrival a = { .w = { .arrived = arrival_seen, .gone = arrival_gone },
			     .ops = ops,
			     .n_ops = 1 };
	struct transfer *t = NULL;
	struct errinfo e = {};
	struct outcome o = {};
	struct notify_queue *q = notify_queue_get(&ctx.notify, lf.f.owner);
	uint32_t rkey = rem->desc.devices[0].rkey;

	q->waiter = &a.w;
	rem->desc.devices[0].rkey = rkey + 1;
	ck_assert_int_eq(transfer_start(&ctx, lf.f.owner, ops, 1, "no", 2, &cb, &o, &t, &e), 0);
	finish(t, &o);
	ck_assert_int_eq(o.result, -EACCES);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_REMOTE_ACCESS);
	errinfo_done(&o.e);
	LINK_RUN_UNTIL(&lf, ctx.n_transfer_qps == 0);
	ck_assert_uint_eq(a.n, 0);
	rem->desc.devices[0].rkey = rkey;
	q->waiter = NULL;
}
END_TEST

/* The remote device refuses (rkey wrong): RemoteAccessError at that op,
 * the rest of the batch flushed; the next transfer gets a new link. */
START_TEST(test_remote_access_error)
{
	struct transfer_op ops[3] = { op(WR_WRITE, 0, 0, 100), op(WR_WRITE, 1000, 1000, 100),
				      op(WR_WRITE, 5000, 5000, 100) };
	struct outcome o;
	struct transfer *t;
	uint32_t rkey = rem->desc.devices[0].rkey;
	cJSON *idx;

	/* Run one first so the link is READY and shared. */
	t = start(ops, 1, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);

	fake_verbs_fail_wr(2, VB_WC_REM_ACCESS_ERR);
	t = start(ops, 3, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, -EACCES);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_REMOTE_ACCESS);
	idx = cJSON_GetObjectItem(o.e.params, "index");
	ck_assert_ptr_nonnull(idx);
	ck_assert_str_eq(cJSON_GetStringValue(idx), "1");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o.e.params, "status")),
			 "remote access error");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o.e.params, "ops_failed")), "2");
	errinfo_done(&o.e);
	ck_assert_uint_eq(ctx.n_transfers_failed, 1);
	ck_assert_uint_eq(ctx.n_transfers_done, 1);
	LINK_RUN_UNTIL(&lf, ctx.n_transfer_qps == 0);

	/* A real refusal: a wrong rkey. */
	rem->desc.devices[0].rkey = rkey + 1;
	t = start(ops, 1, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, -EACCES);
	errinfo_done(&o.e);
	rem->desc.devices[0].rkey = rkey;

	/* Replaced: works again. */
	t = start(ops + 2, 1, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
	ck_assert_mem_eq(lbuf() + 5000, lf.remote.buf + 5000, 100);
}
END_TEST

/* The client goes away with WRs held in the device: nothing more is
 * posted, what was posted drains, the region and its lock stay until
 * then, then everything is released. */
START_TEST(test_cancel_drains)
{
	size_t n = 200;
	struct transfer_op *ops = calloc(n, sizeof(*ops));
	struct outcome o;
	struct transfer *t;
	unsigned refs;

	for (size_t i = 0; i < n; i++)
		ops[i] = op(WR_WRITE, i * 64, i * 64 + 1, 63); /* not coalesced */
	fake_verbs_hold_completions(true);
	t = start(ops, n, &o);
	LINK_RUN_UNTIL(&lf, fake_verbs_held() > 0);
	refs = local->n_ref;
	transfer_cancel(t);
	ck_assert(!o.done);
	/* Still held: the NIC may touch the memory. */
	ck_assert(!lock_is_idle(&local->lock));
	ck_assert_uint_eq(local->n_ref, refs);
	fake_verbs_hold_completions(false);
	finish(t, &o);
	ck_assert_int_eq(o.result, -ECANCELED);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_TRANSFER_CANCELLED);
	ck_assert_uint_eq(ctx.n_transfers_cancelled, 1);
	ck_assert_uint_eq(ctx.n_transfers_failed, 0);
	ck_assert_uint_eq(ctx.n_transfers_started, 1);
	/* Some ops were posted and ran (drained), the rest never went out. */
	ck_assert_uint_lt(o.last.ops_done, n);
	errinfo_done(&o.e);
	ck_assert(lock_is_idle(&local->lock));
	ck_assert_uint_lt(local->n_ref, refs);
	free(ops);
}
END_TEST

/* The connection drops under a batch: TransferFailed, nothing hangs,
 * the next transfer reconnects. */
START_TEST(test_disconnect_midflight)
{
	struct transfer_op ops[2] = { op(WR_WRITE, 0, 0, 4096), op(WR_READ, 8192, 100, 4096) };
	struct outcome o;
	struct transfer *t;

	fake_verbs_hold_completions(true);
	t = start(ops, 2, &o);
	LINK_RUN_UNTIL(&lf, fake_verbs_held() > 0);
	fake_verbs_disconnect_all();
	fake_verbs_hold_completions(false);
	finish(t, &o);
	ck_assert_int_lt(o.result, 0);
	ck_assert_msg(strcmp(o.e.name, RDMAMEM_ERROR_TRANSFER_FAILED) == 0 ||
			      strcmp(o.e.name, RDMAMEM_ERROR_PEER_UNREACHABLE) == 0,
		      "%s", o.e.name);
	errinfo_done(&o.e);
	LINK_RUN_UNTIL(&lf, ctx.n_transfer_qps == 0);
	t = start(ops, 2, &o);
	finish(t, &o);
	ck_assert_int_eq(o.result, 0);
}
END_TEST

/* Two sessions' transfers to one key share one link and one window. */
START_TEST(test_link_shared)
{
	struct transfer_op ops[1] = { op(WR_WRITE, 10, 20, 30) };
	struct outcome a, b;
	struct transfer *ta, *tb;

	ta = start(ops, 1, &a);
	tb = start(ops, 1, &b);
	finish(ta, &a);
	finish(tb, &b);
	ck_assert_int_eq(a.result, 0);
	ck_assert_int_eq(b.result, 0);
	ck_assert_uint_eq(ctx.links.n_links, 1);
	ck_assert_uint_eq(ctx.n_transfer_qps, 1);
	ck_assert_uint_eq(ctx.links.n_connected, 1);
}
END_TEST

/* No listener there: PeerUnreachable, with nothing left behind. */
START_TEST(test_unreachable)
{
	struct transfer_op o1 = op(WR_WRITE, 0, 0, 1);
	struct outcome o;
	struct transfer *t;

	fake_verbs_cm_fault(FAKE_CM_UNREACHABLE);
	t = start(&o1, 1, &o);
	finish(t, &o);
	ck_assert_int_lt(o.result, 0);
	ck_assert_str_eq(o.e.name, RDMAMEM_ERROR_PEER_UNREACHABLE);
	errinfo_done(&o.e);
	ck_assert(lock_is_idle(&local->lock));
}
END_TEST

Suite *transfer_suite(void)
{
	Suite *su = suite_create("transfer");
	TCase *tc = tcase_create("transfer");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_write_read_exact);
	tcase_add_test(tc, test_ten_thousand);
	tcase_add_test(tc, test_batch_100k);
	tcase_add_test(tc, test_batch_on_pool);
	tcase_add_test(tc, test_plan_by_index);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_remote_access_error);
	tcase_add_test(tc, test_cancel_drains);
	tcase_add_test(tc, test_disconnect_midflight);
	tcase_add_test(tc, test_link_shared);
	tcase_add_test(tc, test_unreachable);
	tcase_add_test(tc, test_notify_after_data);
	tcase_add_test(tc, test_notify_waits_for_room);
	tcase_add_test(tc, test_notify_not_after_failure);
	suite_add_tcase(su, tc);
	return su;
}
