/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Links (daemon/remote/link.c) over the fake verbs, against this process's
 * own endpoint (daemon/rdma/endpoint.c) listening through the fake rdmacm:
 * the initiator is uid 2000 (f.other), the memory it reaches belongs to uid
 * 1000 (f.owner), whose token admits the link into uid 1000's PD. READ and
 * WRITE are memcpy's checked by key, PD, bounds and access, so bytes and
 * refusals are real; what a VM cannot provoke (a failing n-th WR, a CQ
 * overflow, a connection dropped with WRs held) the fake's knobs do. The
 * same path on real verbs runs in the Soft-RoCE VM (suite link-rxe).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "daemon/rdma/verbs.h"
#include "daemon/remote/link.h"
#include "tests/fakes/fake.h"
#include "tests/unit/link-fixture.h"
#include "tests/testlib.h"

static struct link_fixture lf;

static void setup(void)
{
	link_fixture_start(&lf, "127.0.0.1:7471", false);
}

static void teardown(void)
{
	link_fixture_stop(&lf);
}

/* A fresh fixture whose pool has cfg (window, timeouts). */
static void reinit(const struct link_pool_config *cfg)
{
	link_fixture_done(&lf);
	link_fixture_init(&lf, "127.0.0.1:7471", cfg);
}

/* A WR between local[loff] and the start of the read-only region. */
static struct vb_send_wr ro_wr(enum vb_wr_opcode op, uint64_t wr_id, size_t loff, uint32_t len)
{
	struct vb_send_wr w = link_fixture_wr(&lf, op, wr_id, loff, 0, len, true);

	w.rkey = lf.ro.rkey;
	w.remote_addr = (uint64_t)(uintptr_t)lf.ro.buf;
	return w;
}

/* Connect, then WRITE and READ at odd offsets and lengths: byte-exact,
 * one callback per signalled WR, the last of a post signalled anyway. */
START_TEST(test_connect_post)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct link_rec rec;
	struct vb_send_wr w[3];

	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(l->state, LINK_READY);
	ck_assert_uint_eq(lf.rdma.n_rconns, 1);
	ck_assert_uint_eq(l->max_msg, UINT32_C(1) << 31);
	ck_assert_uint_eq(l->initiator_depth, 16);
	link_rec_init(&rec);

	link_fixture_fill(&lf, 7);
	w[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 3, 1001, 4093, false);
	w[1] = link_fixture_wr(&lf, VB_WR_RDMA_READ, 2, 9000, 17, 333, false);
	w[2] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 3, 5000, 60000, 1, false);
	ck_assert_int_eq(link_post(l, &rec.u, w, 3), 0);
	ck_assert_uint_eq(rec.u.n_inflight, 3);
	ck_assert_uint_eq(link_space(l), LINK_WINDOW_DEFAULT - 3);
	/* Never from inside link_post(). */
	ck_assert_uint_eq(rec.n, 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert_uint_eq(rec.c[0].wr_id, 3);
	ck_assert_int_eq(rec.c[0].status, VB_WC_SUCCESS);
	ck_assert(!rec.c[0].final);
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	ck_assert_uint_eq(link_space(l), LINK_WINDOW_DEFAULT);
	link_fixture_check(&lf, w, 3);
	/* Counted as they complete: WRITEs out, READs in; the device too. */
	ck_assert_uint_eq(l->stats.wrs, 3);
	ck_assert_uint_eq(l->stats.done.writes, 2);
	ck_assert_uint_eq(l->stats.done.bytes_out, 4094);
	ck_assert_uint_eq(l->stats.done.reads, 1);
	ck_assert_uint_eq(l->stats.done.bytes_in, 333);
	ck_assert_uint_eq(lf.dev->xfer.bytes_out, 4094);
	ck_assert_uint_eq(lf.dev->xfer.bytes_in, 333);
	ck_assert_uint_eq(lf.dev->xfer.writes, 2);

	/* Each signalled: each heard, in order; a READ says its length. */
	w[0] = link_fixture_wr(&lf, VB_WR_RDMA_READ, 10, 100, 200, 50, true);
	w[1] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 11, 300, 400, 60, true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 2), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 3);
	ck_assert_uint_eq(rec.c[1].wr_id, 10);
	ck_assert_uint_eq(rec.c[1].byte_len, 50);
	ck_assert_uint_eq(rec.c[2].wr_id, 11);
	link_fixture_check(&lf, w, 2);
	link_unref(l);
}
END_TEST

/* The first connect request at the hostile peer's listener, or NULL. */
static struct vb_cm_conn *hostile_request(struct vb_listener *vl)
{
	struct vb_cm_event ev;

	while (vb->cm_next_event(vl, &ev) == 0)
		if (ev.kind == VB_CM_REQUEST)
			return ev.conn;
	return NULL;
}

/*
 * A hostile peer: whatever answers at a descriptor's endpoint (a listener
 * of the test's own on listen) accepts the link with a QP of its own and
 * WRITEs, through the link's QP, at memory of the link's uid registered for
 * remote access in the very PD the link lives in (as a region is by
 * default), with the right rkey. The device refuses it and no byte lands:
 * the link's QP grants its peer no remote access. Over the fake verbs and
 * rxe alike.
 */
static void hostile_peer(const char *listen)
{
	struct link_key k = lf.key;
	struct vb_cm_conn *cm = NULL;
	struct vb_listener *vl;
	struct link_wait w;
	struct link *l = NULL;
	struct vb_send_wr wr;
	struct vb_wc wc;
	struct vb_mr *mr;
	struct vb_cq *cq;
	struct vb_qp *qp;
	struct vb_pd *pd;
	uint32_t qpn, lkey, rkey;
	uint8_t *victim;
	size_t posted;
	int n = 0;

	ck_assert_int_eq(netaddr_parse_address(listen, &k.endpoint), 0);
	ck_assert_int_eq(vb->cm_listen((struct sockaddr *)&k.endpoint, &vl), 0);
	link_wait_init(&w);
	ck_assert_int_eq(link_get(&lf.pool, &k, &w.w, &l), -EINPROGRESS);
	LINK_RUN_UNTIL(&lf, cm || (cm = hostile_request(vl)));
	ck_assert_int_eq(device_pd(lf.dev, 1000, &pd), 0);
	ck_assert_int_eq(vb->cq_create(lf.dev->vb, 8, &cq), 0);
	ck_assert_int_eq(vb->cm_qp_create(cm, pd, cq,
					  &(struct vb_qp_caps){ .max_send_wr = 4,
								.max_recv_wr = 1,
								.initiator_depth = 1 },
					  &qp),
			 0);
	ck_assert_int_eq(vb->cm_accept(cm, pd, 1, &qpn), 0);
	LINK_RUN_UNTIL(&lf, w.done);
	ck_assert_msg(w.l, "no link: %s", w.reason);
	if (vb == &fake_vb_ops)
		ck_assert_uint_eq(fake_verbs_qp_access(w.l->qp), 0);

	link_fixture_reg(&lf, 2000,
			 VB_ACCESS_LOCAL_WRITE | VB_ACCESS_REMOTE_READ | VB_ACCESS_REMOTE_WRITE,
			 &victim, &mr, &lkey, &rkey);
	memset(victim, 0x5a, LINK_FIXTURE_SIZE);
	link_fixture_fill(&lf, 3);
	wr = (struct vb_send_wr){ .wr_id = 77,
				  .opcode = VB_WR_RDMA_WRITE,
				  .signaled = true,
				  .local_addr = (uint64_t)(uintptr_t)lf.remote.buf,
				  .lkey = lf.remote.lkey,
				  .length = 4096,
				  .remote_addr = (uint64_t)(uintptr_t)victim,
				  .rkey = rkey };
	ck_assert_int_eq(vb->qp_post_send(qp, &wr, 1, &posted), 0);
	LINK_RUN_UNTIL(&lf, n || (n = vb->cq_poll(cq, &wc, 1)) != 0);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(wc.wr_id, 77);
	/* Refused by the link's side: the fake says remote access error,
	 * rxe "remote invalid request" (the QP does not allow the opcode). */
	ck_assert_msg(wc.status != VB_WC_SUCCESS && wc.status != VB_WC_FLUSH_ERR,
		      "the peer's WRITE: %s", wc.status_name);
	if (vb == &fake_vb_ops)
		ck_assert_int_eq(wc.status, VB_WC_REM_ACCESS_ERR);
	fprintf(stderr, "link: a WRITE from the link's peer: %s\n", wc.status_name);
	for (size_t i = 0; i < LINK_FIXTURE_SIZE; i++)
		ck_assert_uint_eq(victim[i], 0x5a);

	link_unref(w.l);
	LINK_RUN_UNTIL(&lf, lf.pool.n_links == 0);
	vb->cm_conn_destroy(cm);
	vb->cq_destroy(cq);
	vb->cm_listener_close(vl);
	ck_assert_int_eq(vb->mr_dereg(mr), 0);
	free(victim);
}

START_TEST(test_hostile_peer)
{
	hostile_peer("127.0.0.1:7472");
}
END_TEST

/* At most window WRs in flight: all or none, -EAGAIN past it. */
START_TEST(test_window_full)
{
	struct link_pool_config cfg = { .window = 4 };
	struct link_rec rec;
	struct vb_send_wr w[5];
	struct link *l;

	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	for (int i = 0; i < 5; i++)
		w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, (uint64_t)i, (size_t)i * 10,
				       (size_t)i * 10, 10, false);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 5), -EAGAIN);
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	ck_assert_int_eq(link_post(l, &rec.u, w, 3), 0);
	ck_assert_int_eq(link_post(l, &rec.u, w + 3, 2), -EAGAIN);
	ck_assert_int_eq(link_post(l, &rec.u, w + 3, 1), 0);
	ck_assert_uint_eq(link_space(l), 0);
	ck_assert_int_eq(link_post(l, &rec.u, w + 4, 1), -EAGAIN);
	ck_assert_uint_eq(fake_verbs_held(), 4);
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&lf, rec.n == 2);
	ck_assert_uint_eq(rec.c[0].wr_id, 2);
	ck_assert_uint_eq(rec.c[1].wr_id, 3);
	ck_assert_uint_eq(link_space(l), 4);
	ck_assert_int_eq(link_post(l, &rec.u, w + 4, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 3);
	link_fixture_check(&lf, w, 5);
	link_unref(l);
}
END_TEST

/*
 * An error completion fails the link: the failing WR's user hears its
 * status at that WR, another user hears a flush at its first WR after it;
 * what came before completed; the next link_get() makes a new link.
 */
START_TEST(test_error_flushes_and_reconnect)
{
	struct link *l = link_fixture_connect(&lf, lf.key), *l2;
	struct link_rec a, b;
	struct vb_send_wr wa[3], wb[2];

	link_rec_init(&a);
	link_rec_init(&b);
	link_fixture_fill(&lf, 1);
	wa[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 100, 0, 0, 64, false);
	wb[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 200, 64, 64, 64, false);
	wa[1] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 101, 128, 128, 64, false);
	wa[2] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 102, 192, 192, 64, false);
	wb[1] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 201, 256, 256, 64, false);
	/* In flight, in this order: a100 b200 | a101 a102 b201. */
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &a.u, wa, 1), 0);
	ck_assert_int_eq(link_post(l, &b.u, wb, 1), 0);
	ck_assert_int_eq(link_post(l, &a.u, wa + 1, 2), 0);
	ck_assert_int_eq(link_post(l, &b.u, wb + 1, 1), 0);
	/* The third WR run (a101) fails as a bad rkey would. */
	fake_verbs_fail_wr(3, VB_WC_REM_ACCESS_ERR);
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_int_eq(l->state, LINK_ERROR);
	/* a100 and b200 were signalled (last of their posts): heard. */
	ck_assert_uint_eq(a.n, 2);
	ck_assert_uint_eq(a.c[0].wr_id, 100);
	ck_assert(!a.c[0].final);
	ck_assert_uint_eq(a.c[1].wr_id, 101);
	ck_assert(a.c[1].final);
	ck_assert_int_eq(a.c[1].status, VB_WC_REM_ACCESS_ERR);
	ck_assert_int_eq(a.c[1].error, -EIO);
	ck_assert_uint_eq(b.n, 2);
	ck_assert_uint_eq(b.c[0].wr_id, 200);
	ck_assert_uint_eq(b.c[1].wr_id, 201);
	ck_assert(b.c[1].final);
	ck_assert_int_eq(b.c[1].status, VB_WC_FLUSH_ERR);
	ck_assert_ptr_nonnull(strstr(a.reason, "remote access error"));
	/* Two WRITEs done, three not (the failed one and two flushed). */
	ck_assert_uint_eq(l->stats.done.writes, 2);
	ck_assert_uint_eq(l->stats.done.bytes_out, 128);
	ck_assert_uint_eq(l->stats.flushed, 3);
	ck_assert_uint_eq(l->stats.errors[LINK_ERR_REMOTE_ACCESS], 1);
	ck_assert_uint_eq(l->stats.errors[LINK_ERR_DISCONNECT], 0);
	ck_assert_uint_eq(a.u.n_inflight, 0);
	ck_assert_uint_eq(b.u.n_inflight, 0);
	/* Done before the failure point, not after it. */
	link_fixture_check(&lf, wa, 1);
	link_fixture_check(&lf, wb, 1);
	ck_assert(!link_fixture_same(&lf, &wa[2]));
	ck_assert_int_eq(link_post(l, &a.u, wa, 1), -EIO);
	LINK_RUN_UNTIL(&lf, lf.rdma.n_rconns == 0);

	/* Replaced on the next use. */
	l2 = link_fixture_connect(&lf, lf.key);
	ck_assert_ptr_nonnull(l2);
	ck_assert_ptr_ne(l2, l);
	ck_assert_uint_gt(l2->id, l->id);
	link_unref(l);
	/* ListLinks' order: the failed link left it when it was freed. */
	{
		size_t i = idseq_seek(&lf.pool.order, 0);

		while (i < lf.pool.order.n && !lf.pool.order.slots[i].node)
			i++;
		ck_assert_uint_lt(i, lf.pool.order.n);
		ck_assert_ptr_eq(lf.pool.order.slots[i].node, &l2->order);
		ck_assert_uint_eq(lf.pool.order.slots[i].id, l2->id);
	}
	a.n = 0;
	ck_assert_int_eq(link_post(l2, &a.u, wa + 2, 1), 0);
	LINK_RUN_UNTIL(&lf, a.n == 1);
	link_fixture_check(&lf, wa + 2, 1);
	link_unref(l2);
}
END_TEST

/*
 * A silent peer: the connect asks for the pool's ack timeout and a bounded
 * retry count (never 7, which rxe retries forever), the defaults when the
 * configuration names none; when the resends run out (RETRY_EXC_ERR) the
 * link fails as unreachable and its user hears -EHOSTUNREACH.
 */
START_TEST(test_silent_peer)
{
	struct link_pool_config cfg = { .ack_timeout = 12, .retry_count = 9 };
	struct vb_conn_param p;
	struct link_rec rec;
	struct vb_send_wr w[2];
	unsigned n;
	struct link *l;

	n = fake_verbs_last_connect(&p);
	link_unref(link_fixture_connect(&lf, lf.key));
	ck_assert_uint_eq(fake_verbs_last_connect(&p), n + 1);
	ck_assert_uint_eq(p.ack_timeout, LINK_ACK_TIMEOUT_DEFAULT);
	ck_assert_uint_eq(p.retry_count, LINK_RETRY_COUNT);
	ck_assert_uint_eq(p.rnr_retry, LINK_RNR_RETRY);
	/* Finite: 7 would keep a SEND to a peer with no receive forever. */
	ck_assert_uint_lt(p.rnr_retry, 7);
	ck_assert_uint_eq(p.initiator_depth, 16);
	/* 4.096 us x 2^18 = 1.07 s, seven times, four times at most. */
	ck_assert_uint_eq(link_silent_peer_ms(&lf.pool.cfg), 30064);

	/* Configured: the exponent as given, the retries capped at 6. */
	reinit(&cfg);
	ck_assert_uint_eq(lf.pool.cfg.retry_count, 6);
	l = link_fixture_connect(&lf, lf.key);
	fake_verbs_last_connect(&p);
	ck_assert_uint_eq(p.ack_timeout, 12);
	ck_assert_uint_eq(p.retry_count, 6);
	ck_assert_uint_eq(link_silent_peer_ms(&lf.pool.cfg), 469);

	link_rec_init(&rec);
	w[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 0, 0, 64, false);
	w[1] = link_fixture_wr(&lf, VB_WR_RDMA_READ, 2, 64, 64, 64, false);
	fake_verbs_fail_wr(2, VB_WC_RETRY_EXC_ERR);
	ck_assert_int_eq(link_post(l, &rec.u, w, 2), 0);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_int_eq(l->state, LINK_ERROR);
	ck_assert_int_eq(l->error, -EHOSTUNREACH);
	ck_assert_uint_eq(l->stats.errors[LINK_ERR_RETRY], 1);
	/* The pool's count outlives the link. */
	ck_assert_uint_eq(lf.pool.errors[LINK_ERR_RETRY], 1);
	ck_assert_uint_eq(lf.pool.errors[LINK_ERR_REMOTE_ACCESS], 0);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert(rec.c[0].final);
	ck_assert_uint_eq(rec.c[0].wr_id, 2);
	ck_assert_int_eq(rec.c[0].status, VB_WC_RETRY_EXC_ERR);
	ck_assert_int_eq(rec.c[0].error, -EHOSTUNREACH);
	ck_assert_uint_eq(l->stats.done.writes, 1);
	link_unref(l);
}
END_TEST

/* A real access error: WRITE into memory the owner registered read-only
 * is refused, and not a byte lands. */
START_TEST(test_remote_access_refused)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct link_rec rec;
	struct vb_send_wr w;

	link_rec_init(&rec);
	link_fixture_fill(&lf, 3);
	w = ro_wr(VB_WR_RDMA_WRITE, 5, 0, 32);
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert(rec.c[0].final);
	ck_assert_int_eq(rec.c[0].status, VB_WC_REM_ACCESS_ERR);
	ck_assert_uint_eq(rec.c[0].vendor_err, 0x42);
	for (size_t i = 0; i < 32; i++)
		ck_assert_uint_eq(lf.ro.buf[i], 0);
	/* Past the end of the remote region: refused as well. */
	link_unref(l);
	l = link_fixture_connect(&lf, lf.key);
	rec.n = 0;
	w = link_fixture_wr(&lf, VB_WR_RDMA_READ, 6, 0, LINK_FIXTURE_SIZE - 8, 16, true);
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert_int_eq(rec.c[0].status, VB_WC_REM_ACCESS_ERR);
	link_unref(l);
}
END_TEST

/* The remote daemon goes away with WRs in flight: each user hears a flush
 * at its first one, the held WRs never ran, nothing is left. */
START_TEST(test_disconnect_midflight)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct link_rec rec;
	struct vb_send_wr w[3];

	link_rec_init(&rec);
	link_fixture_fill(&lf, 9);
	for (int i = 0; i < 3; i++)
		w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, (uint64_t)i, (size_t)i * 100,
				       (size_t)i * 100, 100, true);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 3), 0);
	fake_verbs_disconnect_all();
	LINK_RUN_UNTIL(&lf, l->finished);
	fake_verbs_hold_completions(false);
	ck_assert_int_eq(l->state, LINK_ERROR);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert(rec.c[0].final);
	ck_assert_uint_eq(rec.c[0].wr_id, 0);
	ck_assert_int_eq(rec.c[0].status, VB_WC_FLUSH_ERR);
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	ck_assert_uint_eq(l->stats.errors[LINK_ERR_DISCONNECT], 1);
	ck_assert_uint_eq(l->stats.flushed, 3);
	ck_assert_uint_eq(l->stats.done.writes, 0);
	for (int i = 0; i < 3; i++)
		ck_assert(!link_fixture_same(&lf, &w[i]));
	LINK_RUN_UNTIL(&lf, lf.rdma.n_rconns == 0);
	link_unref(l);
}
END_TEST

/* The owner revokes its token mid-transfer: the endpoint drops the
 * connection, the link hears DISCONNECTED and fails with a named reason. */
START_TEST(test_token_revoked)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct link_rec rec;
	struct vb_send_wr w;

	link_rec_init(&rec);
	w = link_fixture_wr(&lf, VB_WR_RDMA_READ, 1, 0, 0, 100, true);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	token_revoke(lf.token, "test");
	lf.token = NULL;
	LINK_RUN_UNTIL(&lf, l->finished);
	fake_verbs_hold_completions(false);
	ck_assert_int_eq(l->error, -ECONNRESET);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert(rec.c[0].final);
	ck_assert_int_eq(rec.c[0].error, -ECONNRESET);
	ck_assert_ptr_nonnull(strstr(rec.reason, "127.0.0.1:7471"));
	link_unref(l);
}
END_TEST

/*
 * A peer that never completes (the fake holds every WR): no completion for
 * stall_sec with WRs in flight, and the watchdog fails the link; its user
 * hears once, final, that none of its WRs completed (flushed, after the QP
 * is gone), -ETIMEDOUT and why. Counted as "stalled".
 */
START_TEST(test_stall_watchdog)
{
	struct link_pool_config cfg = { .stall_sec = 1 };
	struct link_rec rec;
	struct vb_send_wr w[3];
	struct link *l;
	uint64_t t0;

	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	for (unsigned i = 0; i < 3; i++)
		w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, i + 1, i * 64, i * 64, 64, false);
	fake_verbs_hold_completions(true);
	t0 = uv_now(&lf.f.loop);
	ck_assert_int_eq(link_post(l, &rec.u, w, 3), 0);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_uint_ge(uv_now(&lf.f.loop) - t0, 900);
	ck_assert_int_eq(l->state, LINK_ERROR);
	ck_assert_int_eq(l->error, -ETIMEDOUT);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert(rec.c[0].final);
	ck_assert_uint_eq(rec.c[0].wr_id, 1);
	ck_assert_int_eq(rec.c[0].status, VB_WC_FLUSH_ERR);
	ck_assert_int_eq(rec.c[0].error, -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(rec.reason, "stalled"));
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	ck_assert_uint_eq(l->stats.flushed, 3);
	ck_assert_uint_eq(lf.pool.errors[LINK_ERR_STALLED], 1);
	fake_verbs_hold_completions(false);
	link_unref(l);
}
END_TEST

/*
 * Progress resets the watchdog: WRs that keep completing, each post within
 * stall_sec of the last completion, never trip it, however long in all.
 */
START_TEST(test_stall_progress)
{
	struct link_pool_config cfg = { .stall_sec = 1 };
	struct link_rec rec;
	struct vb_send_wr w;
	struct link *l;
	uint64_t t0;

	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	t0 = uv_now(&lf.f.loop);
	for (unsigned i = 0; i < 4; i++) {
		uint64_t t1;

		fake_verbs_hold_completions(true);
		w = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, i + 1, 0, 0, 64, true);
		ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
		/* Held 600 ms (under the second), then completed. */
		t1 = uv_now(&lf.f.loop);
		LINK_RUN_UNTIL(&lf, uv_now(&lf.f.loop) - t1 >= 600);
		fake_verbs_hold_completions(false);
		LINK_RUN_UNTIL(&lf, rec.n == i + 1);
	}
	ck_assert_uint_ge(uv_now(&lf.f.loop) - t0, 2400);
	ck_assert_int_eq(l->state, LINK_READY);
	ck_assert(!rec.c[3].final);
	link_unref(l);
}
END_TEST

/*
 * A cancelled transfer's WRs (link_drain()): they must retire within
 * drain_ms, long before the watchdog, or the link fails -ECANCELED and
 * they flush once the QP is gone. WRs that do retire in time clear it.
 */
START_TEST(test_drain_deadline)
{
	struct link_pool_config cfg = { .stall_sec = 60, .drain_ms = 300 };
	struct link_rec rec;
	struct vb_send_wr w[2];
	struct link *l;
	uint64_t t0;

	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	w[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 0, 0, 64, false);
	w[1] = link_fixture_wr(&lf, VB_WR_RDMA_READ, 2, 64, 64, 64, false);

	/* Retired in time: the drain clears, the link stays. */
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 2), 0);
	link_drain(l);
	ck_assert(l->draining);
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert(!l->draining);
	t0 = uv_now(&lf.f.loop);
	LINK_RUN_UNTIL(&lf, uv_now(&lf.f.loop) - t0 >= 500);
	ck_assert_int_eq(l->state, LINK_READY);

	/* Never retired: closed at the deadline. */
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 2), 0);
	t0 = uv_now(&lf.f.loop);
	link_drain(l);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_uint_ge(uv_now(&lf.f.loop) - t0, 250);
	ck_assert_uint_lt(uv_now(&lf.f.loop) - t0, 5000);
	ck_assert_int_eq(l->error, -ECANCELED);
	ck_assert_uint_eq(rec.n, 2);
	ck_assert(rec.c[1].final);
	ck_assert_uint_eq(rec.c[1].wr_id, 1);
	ck_assert_int_eq(rec.c[1].status, VB_WC_FLUSH_ERR);
	ck_assert_uint_eq(lf.pool.errors[LINK_ERR_STALLED], 1);
	fake_verbs_hold_completions(false);
	link_unref(l);
}
END_TEST

/*
 * Links are bounded: max_links_per_uid live for one initiating uid
 * (-EDQUOT, QuotaExceeded "links"), max_links in all (-EUSERS). Links that
 * never connect (a silent endpoint) hold their fds and count; once torn
 * down they do not.
 */
START_TEST(test_link_limits)
{
	struct link_pool_config cfg = { .max_links = 3, .max_links_per_uid = 2 };
	struct link_wait w[4];
	struct link_key k[4];
	struct errinfo e = {};
	struct link *l = NULL;
	const char *quota;

	reinit(&cfg);
	fake_verbs_cm_fault(FAKE_CM_SILENT);
	for (unsigned i = 0; i < 4; i++) {
		k[i] = lf.key;
		k[i].token[0] ^= (uint8_t)(i + 1); /* four different links */
		link_wait_init(&w[i]);
	}
	k[2].uid = 1000;
	k[3].uid = 3000;
	ck_assert_int_eq(link_get(&lf.pool, &k[0], &w[0].w, &l), -EINPROGRESS);
	ck_assert_int_eq(link_get(&lf.pool, &k[1], &w[1].w, &l), -EINPROGRESS);
	ck_assert_uint_eq(link_count_uid(&lf.pool, 2000), 2);
	/* A third for uid 2000: over its quota, named as such. */
	k[0].token[1] ^= 1;
	ck_assert_int_eq(link_get(&lf.pool, &k[0], &w[3].w, &l), -EDQUOT);
	k[0].token[1] ^= 1;
	ck_assert_int_eq(link_limit_error(&lf.pool, 2000, -EDQUOT, &e), -EDQUOT);
	ck_assert_str_eq(e.name, "io.rdmamemd.QuotaExceeded");
	quota = cJSON_GetStringValue(cJSON_GetObjectItem(e.params, "quota"));
	ck_assert_str_eq(quota, "links");
	errinfo_done(&e);
	/* Another uid still may, up to the daemon's limit. */
	ck_assert_int_eq(link_get(&lf.pool, &k[2], &w[2].w, &l), -EINPROGRESS);
	ck_assert_int_eq(link_get(&lf.pool, &k[3], &w[3].w, &l), -EUSERS);
	ck_assert_int_eq(link_limit_error(&lf.pool, 3000, -EUSERS, &e), -EUSERS);
	ck_assert_str_eq(e.name, "io.rdmamemd.TooManyConnections");
	errinfo_done(&e);
	ck_assert_int_eq(link_limit_error(&lf.pool, 3000, -ETIMEDOUT, &e), 0);

	/* Given up: torn down, they count no more. */
	link_waiter_cancel(&w[0].w);
	LINK_RUN_UNTIL(&lf, lf.pool.n_live == 2);
	ck_assert_uint_eq(link_count_uid(&lf.pool, 2000), 1);
	link_wait_init(&w[3]);
	ck_assert_int_eq(link_get(&lf.pool, &k[3], &w[3].w, &l), -EINPROGRESS);
	link_waiter_cancel(&w[1].w);
	link_waiter_cancel(&w[2].w);
	link_waiter_cancel(&w[3].w);
	LINK_RUN_UNTIL(&lf, lf.pool.n_links == 0);
	ck_assert_uint_eq(lf.pool.n_live, 0);
}
END_TEST

/* A user that counts its completions. */
struct count_user {
	struct link_user u;
	unsigned n;
};

static void count_complete(struct link_user *u, const struct link_completion *c)
{
	(void)c;
	container_of(u, struct count_user, u)->n++;
}

/*
 * A turn of the loop takes at most 256 completions: 600 queued at once
 * (each WR signalled) are not all taken inside one callback, and the rest
 * follow on the next turns though no new completion event comes.
 */
START_TEST(test_completions_per_turn)
{
	struct link_pool_config cfg = { .window = 600 };
	struct count_user cu = { .u.complete = count_complete };
	struct vb_send_wr *w = calloc(600, sizeof(*w));
	struct link *l;

	ck_assert_ptr_nonnull(w);
	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	for (unsigned i = 0; i < 600; i++)
		w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, i, i * 8, i * 8, 8, true);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &cu.u, w, 600), 0);
	fake_verbs_hold_completions(false);
	uv_run(&lf.f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(cu.n, 256);
	LINK_RUN_UNTIL(&lf, cu.n == 600);
	ck_assert_int_eq(l->state, LINK_READY);
	ck_assert_uint_eq(cu.u.n_inflight, 0);
	link_fixture_check(&lf, w, 600);
	free(w);
	link_unref(l);
}
END_TEST

/* Idle for idle_sec with nothing in flight: CLOSED, replaced on next use. */
START_TEST(test_idle_teardown)
{
	struct link_pool_config cfg = { .idle_sec = 1 };
	struct link *l, *l2;
	struct link_rec rec;
	struct vb_send_wr w;
	uint64_t t0;

	reinit(&cfg);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	w = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 0, 0, 8, true);
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	t0 = uv_now(&lf.f.loop);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_int_eq(l->state, LINK_CLOSED);
	ck_assert_uint_ge(uv_now(&lf.f.loop) - t0, 900);
	ck_assert_int_eq(l->error, -ETIMEDOUT);
	LINK_RUN_UNTIL(&lf, lf.rdma.n_rconns == 0);
	l2 = link_fixture_connect(&lf, lf.key);
	ck_assert_ptr_nonnull(l2);
	ck_assert_int_eq(l2->state, LINK_READY);
	link_unref(l);
	link_unref(l2);
}
END_TEST

/* The last reference closes it: the holders are gone. */
START_TEST(test_last_unref_closes)
{
	struct link *l = link_fixture_connect(&lf, lf.key);

	ck_assert_uint_eq(lf.pool.n_links, 1);
	link_unref(l);
	LINK_RUN_UNTIL(&lf, lf.pool.n_links == 0);
	LINK_RUN_UNTIL(&lf, lf.rdma.n_rconns == 0);
}
END_TEST

/* Two users of one key wait on one connect and get one link (one QP on
 * the remote side too); a READY link is handed out at once; another uid
 * gets its own. */
START_TEST(test_sharing)
{
	struct link_wait w1, w2;
	struct link *l = NULL, *l3 = NULL, *other;
	struct link_key k2 = lf.key;

	link_wait_init(&w1);
	link_wait_init(&w2);
	ck_assert_int_eq(link_get(&lf.pool, &lf.key, &w1.w, &l), -EINPROGRESS);
	ck_assert_int_eq(link_get(&lf.pool, &lf.key, &w2.w, &l), -EINPROGRESS);
	ck_assert_uint_eq(lf.pool.n_links, 1);
	LINK_RUN_UNTIL(&lf, w1.done && w2.done);
	ck_assert_ptr_nonnull(w1.l);
	ck_assert_ptr_eq(w1.l, w2.l);
	ck_assert_uint_eq(w1.l->n_ref, 2);
	ck_assert_int_eq(link_get(&lf.pool, &lf.key, NULL, &l3), 0);
	ck_assert_ptr_eq(l3, w1.l);
	ck_assert_uint_eq(lf.rdma.n_rconns, 1);
	ck_assert_uint_eq(lf.pool.n_connected, 1);

	k2.uid = 1000;
	other = link_fixture_connect(&lf, k2);
	ck_assert_ptr_ne(other, w1.l);
	ck_assert_uint_eq(lf.rdma.n_rconns, 2);
	ck_assert_uint_eq(lf.pool.n_links, 2);

	link_unref(w1.l);
	link_unref(w2.l);
	ck_assert_int_eq(l3->state, LINK_READY);
	link_unref(l3);
	link_unref(other);
	LINK_RUN_UNTIL(&lf, lf.pool.n_links == 0);
}
END_TEST

/* A waiter that leaves before the connect ends takes the link with it. */
START_TEST(test_waiter_cancel)
{
	struct link_wait w;
	struct link *l = NULL;

	link_wait_init(&w);
	ck_assert_int_eq(link_get(&lf.pool, &lf.key, &w.w, &l), -EINPROGRESS);
	link_waiter_cancel(&w.w);
	LINK_RUN_UNTIL(&lf, lf.pool.n_links == 0);
	ck_assert(!w.done);
	LINK_RUN_UNTIL(&lf, lf.rdma.n_rconns == 0);
}
END_TEST

/* Every refusal of the endpoint reaches the waiter with its own errno. */
START_TEST(test_rejects)
{
	static char *allow[] = { "10.0.0.0/8", NULL };
	struct link_key k = lf.key;
	struct link_wait w;
	unsigned max;

	/* No such token. */
	k.token[0] ^= 1;
	ck_assert_int_eq(link_fixture_connect_error(&lf, k, &w), -EKEYREJECTED);
	ck_assert_ptr_nonnull(strstr(w.reason, "no such access token"));
	ck_assert_uint_eq(lf.pool.n_failed, 1);

	/* Outside the allowed networks (the fake's peers are 127.0.0.1). */
	lf.f.core.cfg.rdma_allow = allow;
	endpoint_reload(&lf.rdma);
	ck_assert_int_eq(link_fixture_connect_error(&lf, lf.key, &w), -EACCES);
	ck_assert_ptr_nonnull(strstr(w.reason, "allow-networks"));
	lf.f.core.cfg.rdma_allow = NULL;
	endpoint_reload(&lf.rdma);

	/* The remote daemon's connection limit. */
	max = lf.f.core.cfg.max_rdma_connections;
	lf.f.core.cfg.max_rdma_connections = 0;
	ck_assert_int_eq(link_fixture_connect_error(&lf, lf.key, &w), -EUSERS);
	lf.f.core.cfg.max_rdma_connections = max;

	/* Its device failed. */
	lf.dev->fatal = true;
	ck_assert_int_eq(link_fixture_connect_error(&lf, lf.key, &w), -ENODEV);
	lf.dev->fatal = false;

	/* Nothing listens on that port: the CM refuses, not the endpoint. */
	k = lf.key;
	((struct sockaddr_in *)&k.endpoint)->sin_port = htons(7472);
	ck_assert_int_eq(link_fixture_connect_error(&lf, k, &w), -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(w.reason, "is an rdmamemd listening"));

	/* No route; no answer within the deadline. */
	fake_verbs_cm_fault(FAKE_CM_UNREACHABLE);
	ck_assert_int_eq(link_fixture_connect_error(&lf, lf.key, &w), -EHOSTUNREACH);
	fake_verbs_cm_fault(FAKE_CM_SILENT);
	lf.pool.cfg.connect_timeout_ms = 50;
	ck_assert_int_eq(link_fixture_connect_error(&lf, lf.key, &w), -ETIMEDOUT);
	fake_verbs_cm_fault(FAKE_CM_NONE);

	/* And after all that, a good one. */
	link_unref(link_fixture_connect(&lf, lf.key));
	ck_assert_uint_eq(lf.rdma.rejected, 4);
}
END_TEST

/* A malformed request (not from a link: raw rdmacm) is refused with
 * REJECT_BAD_REQUEST, which the link would report as -EPROTO. */
START_TEST(test_reject_bad_request)
{
	struct vb_conn *c;
	struct vb_conn_event ev;
	struct vb_cq *cq;
	struct vb_qp *qp;
	struct vb_pd *pd;
	uint8_t junk[8] = "RDMX";

	ck_assert_int_eq(vb->conn_create(&c), 0);
	ck_assert_int_eq(vb->conn_resolve_addr(c, NULL, (struct sockaddr *)&lf.key.endpoint, 100),
			 0);
	ck_assert_int_eq(device_pd(lf.dev, 2000, &pd), 0);
	ck_assert_int_eq(vb->cq_create(lf.dev->vb, 4, &cq), 0);
	ck_assert_int_eq(vb->conn_qp_create(c, pd, cq, &(struct vb_qp_caps){ .max_send_wr = 1 },
					    &qp),
			 0);
	ck_assert_int_eq(vb->conn_connect(c, &(struct vb_conn_param){ .private_data = junk,
								      .private_len = sizeof(junk),
								      .initiator_depth = 1 }),
			 0);
	for (int i = 0; i < 1000; i++) {
		uv_run(&lf.f.loop, UV_RUN_NOWAIT);
		if (vb->conn_next_event(c, &ev) == 0 && ev.kind == VB_CONN_REJECTED)
			break;
	}
	ck_assert_int_eq(ev.kind, VB_CONN_REJECTED);
	ck_assert_int_eq(memcmp(ev.private_data, ENDPOINT_REJECT_MAGIC, 4), 0);
	ck_assert_int_eq(ev.private_data[4], REJECT_BAD_REQUEST);
	vb->conn_destroy(c);
	vb->cq_destroy(cq);
}
END_TEST

/* More completions than the CQ holds: the link fails, users hear. */
START_TEST(test_cq_overflow)
{
	struct link_rec rec;
	struct vb_send_wr w[4];
	struct link *l;

	fake_verbs_cq_cap(2);
	l = link_fixture_connect(&lf, lf.key);
	link_rec_init(&rec);
	for (int i = 0; i < 4; i++)
		w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, (uint64_t)i, 0, 0, 8, true);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, w, 4), 0);
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_int_eq(l->state, LINK_ERROR);
	ck_assert_int_eq(l->error, -EOVERFLOW);
	ck_assert_uint_eq(l->stats.errors[LINK_ERR_OTHER], 1);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert(rec.c[0].final);
	ck_assert_uint_eq(rec.c[0].wr_id, 0);
	ck_assert_ptr_nonnull(strstr(rec.reason, "overflow"));
	link_unref(l);
}
END_TEST

/* Shutdown with WRs held: users and waiters hear -ESHUTDOWN. */
START_TEST(test_pool_stop)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct link_key k2 = lf.key;
	struct link_rec rec;
	struct link_wait w;
	struct vb_send_wr wr;
	struct link *none = NULL;

	link_rec_init(&rec);
	link_wait_init(&w);
	wr = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 0, 0, 8, true);
	fake_verbs_hold_completions(true);
	ck_assert_int_eq(link_post(l, &rec.u, &wr, 1), 0);
	k2.uid = 1000;
	ck_assert_int_eq(link_get(&lf.pool, &k2, &w.w, &none), -EINPROGRESS);
	link_pool_stop(&lf.pool);
	LINK_RUN_UNTIL(&lf, l->finished && w.done);
	fake_verbs_hold_completions(false);
	ck_assert_int_eq(rec.c[0].error, -ESHUTDOWN);
	ck_assert_int_eq(w.error, -ESHUTDOWN);
	ck_assert_ptr_null(w.l);
	link_unref(l);
}
END_TEST

/*
 * Real verbs: rxe in the Soft-RoCE VM (tag rdma). The daemon's own device
 * links to its own rdmacm endpoint on 10.9.0.1 (rxe loopback), admitted by
 * a token into uid 1000's PD, and moves bytes by RDMA WRITE and READ
 * between two registered buffers: the same link and endpoint code as
 * above, with libibverbs and librdmacm under it.
 */
static void setup_rxe(void)
{
	link_fixture_start(&lf, "10.9.0.1:7489", true);
}

START_TEST(test_rxe_write_read)
{
	struct link *l;
	struct link_rec rec;
	struct link_wait w;
	struct link_key k;
	struct vb_send_wr big[2], batch[64], bad;
	uint64_t t0, t1;

	t0 = uv_hrtime();
	l = link_fixture_connect(&lf, lf.key);
	t1 = uv_hrtime();
	fprintf(stderr, "link-rxe: %s → %s ready in %.1f ms (max message %u, initiator depth %u)\n",
		lf.dev->info.name, l->peer, (double)(t1 - t0) / 1e6, l->max_msg,
		l->initiator_depth);
	ck_assert_uint_gt(l->max_msg, 0);
	ck_assert_uint_ge(l->initiator_depth, 1);
	ck_assert_uint_eq(lf.rdma.n_rconns, 1);
	link_rec_init(&rec);

	/* Large and odd: one WRITE, one READ, byte-exact. */
	link_fixture_fill(&lf, 5);
	big[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 1, 333, 40001, false);
	big[1] = link_fixture_wr(&lf, VB_WR_RDMA_READ, 2, 45003, 50001, 7777, false);
	t0 = uv_hrtime();
	ck_assert_int_eq(link_post(l, &rec.u, big, 2), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	t1 = uv_hrtime();
	ck_assert_msg(rec.c[0].status == VB_WC_SUCCESS, "%s", rec.c[0].status_name);
	ck_assert_uint_eq(rec.c[0].wr_id, 2);
	ck_assert_uint_eq(rec.c[0].byte_len, 7777);
	link_fixture_check(&lf, big, 2);
	fprintf(stderr, "link-rxe: WRITE 40001 B + READ 7777 B in %.2f ms\n",
		(double)(t1 - t0) / 1e6);

	/* A batch of 64 small WRITEs, one signalled: one completion. */
	link_fixture_fill(&lf, 6);
	for (unsigned i = 0; i < 64; i++)
		batch[i] = link_fixture_wr(&lf, i % 2 ? VB_WR_RDMA_READ : VB_WR_RDMA_WRITE, 100 + i,
					   i * 257, 20000 + i * 263, 129, false);
	rec.n = 0;
	t0 = uv_hrtime();
	ck_assert_int_eq(link_post(l, &rec.u, batch, 64), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	t1 = uv_hrtime();
	ck_assert_int_eq(rec.c[0].status, VB_WC_SUCCESS);
	ck_assert_uint_eq(rec.c[0].wr_id, 163);
	link_fixture_check(&lf, batch, 64);
	fprintf(stderr, "link-rxe: 64 WRs of 129 B in %.2f ms\n", (double)(t1 - t0) / 1e6);

	/* A WRITE into memory registered remote-read-only: the device
	 * refuses it, the link fails with the status, no byte lands. */
	bad = ro_wr(VB_WR_RDMA_WRITE, 7, 0, 64);
	rec.n = 0;
	ck_assert_int_eq(link_post(l, &rec.u, &bad, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert(rec.c[0].final);
	ck_assert_int_eq(rec.c[0].status, VB_WC_REM_ACCESS_ERR);
	fprintf(stderr, "link-rxe: refused WRITE: %s (vendor error 0x%x)\n", rec.c[0].status_name,
		rec.c[0].vendor_err);
	for (size_t i = 0; i < 64; i++)
		ck_assert_uint_eq(lf.ro.buf[i], 0);
	LINK_RUN_UNTIL(&lf, l->finished);
	link_unref(l);

	/* Replaced: a new link READs what the read-only region holds. */
	for (size_t i = 0; i < 64; i++)
		lf.ro.buf[i] = (uint8_t)(i * 5 + 1);
	l = link_fixture_connect(&lf, lf.key);
	bad = ro_wr(VB_WR_RDMA_READ, 8, 1000, 64);
	rec.n = 0;
	ck_assert_int_eq(link_post(l, &rec.u, &bad, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert_int_eq(rec.c[0].status, VB_WC_SUCCESS);
	ck_assert_int_eq(memcmp(lf.local.buf + 1000, lf.ro.buf, 64), 0);
	link_unref(l);

	/* A token the endpoint does not know: rejected with its reason. */
	k = lf.key;
	k.token[3] ^= 0x40;
	ck_assert_int_eq(link_fixture_connect_error(&lf, k, &w), -EKEYREJECTED);
	fprintf(stderr, "link-rxe: wrong token: %s\n", w.reason);
}
END_TEST

START_TEST(test_rxe_hostile_peer)
{
	hostile_peer("10.9.0.1:7490");
}
END_TEST

/* Peers are shown by address: an IPv4 host reached through a dual-stack
 * socket (IPv4-mapped) reads as the IPv4 address it is, so that a link
 * to it and a connection from it group as one peer. */
START_TEST(test_address_unmapped)
{
	struct sockaddr_storage ss;
	char buf[64];

	ck_assert_int_eq(netaddr_parse_address("[::ffff:10.0.1.2]:7471", &ss), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	netaddr_format(&ss, buf, sizeof(buf));
	ck_assert_str_eq(buf, "10.0.1.2:7471");
	ck_assert_int_eq(netaddr_parse_address("10.0.1.2:7471", &ss), 0);
	netaddr_format(&ss, buf, sizeof(buf));
	ck_assert_str_eq(buf, "10.0.1.2:7471");
	ck_assert_int_eq(netaddr_parse_address("[fe80::ffff:a00:102]:7471", &ss), 0);
	netaddr_format(&ss, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[fe80::ffff:a00:102]:7471");
}
END_TEST

Suite *link_suite(void)
{
	Suite *su = suite_create("link");
	TCase *tc = tcase_create("link");
	TCase *rxe = tcase_create("rxe");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_connect_post);
	tcase_add_test(tc, test_address_unmapped);
	tcase_add_test(tc, test_hostile_peer);
	tcase_add_test(tc, test_window_full);
	tcase_add_test(tc, test_error_flushes_and_reconnect);
	tcase_add_test(tc, test_silent_peer);
	tcase_add_test(tc, test_remote_access_refused);
	tcase_add_test(tc, test_disconnect_midflight);
	tcase_add_test(tc, test_token_revoked);
	tcase_add_test(tc, test_idle_teardown);
	tcase_add_test(tc, test_stall_watchdog);
	tcase_add_test(tc, test_stall_progress);
	tcase_add_test(tc, test_drain_deadline);
	tcase_add_test(tc, test_link_limits);
	tcase_add_test(tc, test_completions_per_turn);
	tcase_add_test(tc, test_last_unref_closes);
	tcase_add_test(tc, test_sharing);
	tcase_add_test(tc, test_waiter_cancel);
	tcase_add_test(tc, test_rejects);
	tcase_add_test(tc, test_reject_bad_request);
	tcase_add_test(tc, test_cq_overflow);
	tcase_add_test(tc, test_pool_stop);
	suite_add_tcase(su, tc);

	tcase_set_tags(rxe, "rdma");
	tcase_add_checked_fixture(rxe, setup_rxe, teardown);
	tcase_set_timeout(rxe, 120);
	test_add_tagged(rxe, "rdma", test_rxe_write_read);
	test_add_tagged(rxe, "rdma", test_rxe_hostile_peer);
	suite_add_tcase(su, rxe);
	return su;
}
