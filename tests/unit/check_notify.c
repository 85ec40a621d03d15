/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Notifications: the wire record (daemon/remote/notify_msg.c), the sending
 * side (link_post_notify(), daemon/remote/link.c) and the receiving side
 * (the endpoint's receive rings, daemon/rdma/recv_ring.c, and the owner's
 * queue, daemon/remote/notify.c) over the fake verbs, against this
 * process's own endpoint: uid 2000 links to uid 1000's export. The same
 * path on rxe runs in the Soft-RoCE VM (case rxe).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rdma/recv_ring.h"
#include "daemon/remote/link.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/notify_msg.h"
#include "tests/fakes/fake.h"
#include "tests/unit/link-fixture.h"
#include "tests/testlib.h"

/* Encoded and decoded back, field for field; each flaw refused. */
START_TEST(test_msg_codec)
{
	uint8_t msg[NOTIFY_MSG_MAX + 8], data[NOTIFY_MAX];
	struct notify_header h;
	const char *why = NULL;
	size_t n;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 31 + 7);
	n = notify_msg_encode(msg, UINT64_C(0x1122334455667788), 4242, data, 1001);
	ck_assert_uint_eq(n, NOTIFY_HEADER_BYTES + 1001);
	ck_assert_int_eq(notify_msg_decode(msg, n, &h, &why), 0);
	ck_assert_uint_eq(h.length, 1001);
	ck_assert_uint_eq(h.sender_uid, 4242);
	ck_assert_uint_eq(h.export_id, UINT64_C(0x1122334455667788));
	ck_assert_int_eq(memcmp(msg + NOTIFY_HEADER_BYTES, data, 1001), 0);

	/* The largest, and the empty one. */
	n = notify_msg_encode(msg, 1, 0, data, NOTIFY_MAX);
	ck_assert_int_eq(notify_msg_decode(msg, n, &h, &why), 0);
	n = notify_msg_encode(msg, 1, 0, NULL, 0);
	ck_assert_int_eq(notify_msg_decode(msg, n, &h, &why), 0);
	ck_assert_uint_eq(h.length, 0);

	/* Short, bad magic, bad version, lengths that lie or exceed. */
	ck_assert_int_eq(notify_msg_decode(msg, NOTIFY_HEADER_BYTES - 1, &h, &why), -EBADMSG);
	ck_assert_str_eq(why, "shorter than a notification's header");
	n = notify_msg_encode(msg, 1, 0, data, 10);
	ck_assert_int_eq(notify_msg_decode(msg, n - 1, &h, &why), -EBADMSG);
	ck_assert_str_eq(why, "a notification whose length is not what arrived");
	msg[0] ^= 1;
	ck_assert_int_eq(notify_msg_decode(msg, n, &h, &why), -EBADMSG);
	ck_assert_str_eq(why, "not a notification (bad magic)");
	msg[0] ^= 1;
	msg[4] = NOTIFY_VERSION + 1;
	ck_assert_int_eq(notify_msg_decode(msg, n, &h, &why), -EBADMSG);
	ck_assert_str_eq(why, "a notification of an unknown version");
	n = notify_msg_encode(msg, 1, 0, data, NOTIFY_MAX);
	msg[9] = 0x20; /* length 4096 + 8192 */
	ck_assert_int_eq(notify_msg_decode(msg, n + 8, &h, &why), -EBADMSG);
	ck_assert_str_eq(why, "a notification longer than NOTIFY_MAX");
}
END_TEST

#define EXPORT_ID 77

static struct link_fixture lf;
static struct notify_ctx nctx;

/* The fixture's token as an export's: its connections get receive rings. */
static void notify_fixture_init(const char *listen, bool real)
{
	link_fixture_start(&lf, listen, real);
	notify_init(&nctx, &lf.rdma);
	lf.token->export_id = EXPORT_ID;
}

static void setup(void)
{
	notify_fixture_init("127.0.0.1:7473", false);
}

/* The one connection the endpoint admitted. */
static struct rconn *the_rconn(void)
{
	ck_assert_uint_eq(lf.rdma.n_rconns, 1);
	return list_first_entry(&lf.rdma.rconns, struct rconn, link);
}

/* Checks, when a notification arrives, that the bytes written before it
 * are in place. */
struct arrival {
	struct notify_waiter w;
	unsigned n;
	bool data_in_place;
	size_t off, len; /* of the WRITE before it, in both buffers */
};

static void arrival_seen(struct notify_waiter *w)
{
	struct arrival *a = container_of(w, struct arrival, w);

	a->n++;
	a->data_in_place = memcmp(lf.local.buf + a->off, lf.remote.buf + a->off, a->len) == 0;
}

static void arrival_gone(struct notify_waiter *w)
{
	(void)w;
}

/* n notifications "<tag>.<i>" on l, one at a time, each waited for. */
static void send_many(struct link *l, struct link_rec *rec, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char text[32];
		int len = snprintf(text, sizeof(text), "n.%u", i);
		unsigned before = rec->n;

		ck_assert_int_eq(link_post_notify(l, &rec->u, text, (size_t)len, EXPORT_ID), 0);
		LINK_RUN_UNTIL(&lf, rec->n == before + 1);
		ck_assert_uint_eq(rec->c[rec->n - 1].wr_id, LINK_WR_ID_NOTIFY);
		ck_assert_int_eq(rec->c[rec->n - 1].status, VB_WC_SUCCESS);
		rec->n = 0;
	}
}

static void teardown(void)
{
	link_fixture_stop(&lf);
}

/* What the sender refuses before anything is posted: too long, and the
 * send buffers all in flight. */
START_TEST(test_send_bounds)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	static uint8_t big[NOTIFY_MAX + 1];
	struct link_rec rec;

	link_rec_init(&rec);
	ck_assert_int_eq(link_post_notify(l, &rec.u, big, sizeof(big), 1), -EMSGSIZE);
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	fake_verbs_hold_completions(true);
	for (unsigned i = 0; i < LINK_NOTIFY_SLOTS; i++)
		ck_assert_int_eq(link_post_notify(l, &rec.u, "x", 1, 1), 0);
	ck_assert_int_eq(link_post_notify(l, &rec.u, "x", 1, 1), -EAGAIN);
	ck_assert_uint_eq(rec.u.n_inflight, LINK_NOTIFY_SLOTS);
	ck_assert_uint_eq(l->stats.notifications, LINK_NOTIFY_SLOTS);
	link_close(l, -ECANCELED, "test over");
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&lf, l->finished);
	ck_assert_uint_eq(rec.u.n_inflight, 0);
	link_unref(l);
}
END_TEST

/*
 * WRITEs, then a notification on the same link: it reaches the owner's
 * queue after the bytes landed (checked when it arrives), tagged with the
 * export and the sender's uid, and the receive buffer is posted again.
 */
START_TEST(test_after_data)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct arrival a = { .w = { .arrived = arrival_seen, .gone = arrival_gone },
			     .off = 1001,
			     .len = 40000 };
	struct vb_send_wr w[2];
	struct notification *n;
	struct notify_queue *q;
	struct link_rec rec;
	struct rconn *c;

	link_rec_init(&rec);
	c = the_rconn();
	ck_assert_ptr_nonnull(c->rx);
	q = notify_queue_get(&nctx, lf.f.owner);
	ck_assert_ptr_nonnull(q);
	q->waiter = &a.w;

	link_fixture_fill(&lf, 3);
	w[0] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 1, 1001, 1001, 20000, false);
	w[1] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, 2, 21001, 21001, 20000, false);
	ck_assert_int_eq(link_post(l, &rec.u, w, 2), 0);
	ck_assert_int_eq(link_post_notify(l, &rec.u, "done: 2 writes", 14, EXPORT_ID), 0);
	LINK_RUN_UNTIL(&lf, a.n == 1);
	ck_assert(a.data_in_place);
	LINK_RUN_UNTIL(&lf, rec.n == 2);
	ck_assert_uint_eq(rec.c[1].wr_id, LINK_WR_ID_NOTIFY);

	ck_assert_uint_eq(q->n, 1);
	n = notify_queue_pop(q);
	ck_assert_ptr_nonnull(n);
	ck_assert_uint_eq(n->export_id, EXPORT_ID);
	ck_assert_uint_eq(n->sender_uid, 2000);
	ck_assert_uint_eq(n->len, 14);
	ck_assert_int_eq(memcmp(n->data, "done: 2 writes", 14), 0);
	ck_assert_uint_gt(n->received_usec, 0);
	free(n);
	ck_assert_uint_eq(c->rx->stats.received, 1);
	ck_assert_uint_eq(c->rx->stats.reposted, 1);
	ck_assert_uint_eq(nctx.stats.received, 1);
	/* The link's own session sees nothing: only the export's owner does. */
	ck_assert_ptr_null(notify_queue_of(lf.f.other));
	q->waiter = NULL;
	link_unref(l);
}
END_TEST

/*
 * More notifications than receive buffers over time (each buffer posted
 * again), and more than a queue holds: the queue keeps the first
 * NOTIFY_QUEUE_MAX, the rest are dropped and counted; reading makes room.
 */
START_TEST(test_queue_bound)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	unsigned total = NOTIFY_QUEUE_MAX + 5;
	struct notification *n;
	struct notify_queue *q;
	struct link_rec rec;
	struct rconn *c = the_rconn();

	link_rec_init(&rec);
	send_many(l, &rec, total);
	q = notify_queue_of(lf.f.owner);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q->n, NOTIFY_QUEUE_MAX);
	ck_assert_uint_eq(q->dropped, 5);
	ck_assert_uint_eq(nctx.stats.full, 5);
	ck_assert_uint_eq(nctx.stats.received, NOTIFY_QUEUE_MAX);
	ck_assert_uint_eq(c->rx->stats.received, total);
	ck_assert_uint_eq(c->rx->stats.reposted, total);
	/* The connection's and its export's counts. */
	ck_assert_uint_eq(c->notify.received, total);
	ck_assert_uint_eq(c->notify.queued, NOTIFY_QUEUE_MAX);
	ck_assert_uint_eq(c->notify.dropped, 5);
	ck_assert_uint_eq(c->token->notify.dropped, 5);
	ck_assert_uint_eq(c->token->notify.queued, NOTIFY_QUEUE_MAX);
	ck_assert_uint_gt(total, RECV_RING_DEPTH);
	/* Oldest first; the dropped ones were the last. */
	n = notify_queue_pop(q);
	ck_assert_int_eq(memcmp(n->data, "n.0", 3), 0);
	free(n);
	send_many(l, &rec, 1);
	ck_assert_uint_eq(q->n, NOTIFY_QUEUE_MAX);
	ck_assert_uint_eq(q->dropped, 5);
	link_unref(l);
}
END_TEST

/*
 * What is not a notification of the connection's export is dropped and
 * counted, and the connection goes on: a SEND of other bytes, one that
 * names another export, one whose length lies.
 */
START_TEST(test_malformed)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct rconn *c = the_rconn();
	struct link_rec rec;
	struct vb_send_wr w;
	unsigned before;

	link_rec_init(&rec);
	w = link_fixture_wr(&lf, VB_WR_SEND, 5, 0, 0, 100, true);
	memset(lf.local.buf, 0xab, 100);
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert_int_eq(rec.c[0].status, VB_WC_SUCCESS);
	ck_assert_uint_eq(nctx.stats.malformed, 1);

	ck_assert_int_eq(link_post_notify(l, &rec.u, "x", 1, EXPORT_ID + 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 2);
	ck_assert_uint_eq(nctx.stats.malformed, 2);

	w.length = (uint32_t)notify_msg_encode(lf.local.buf, EXPORT_ID, 2000, "abc", 3) + 1;
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 3);
	ck_assert_uint_eq(nctx.stats.malformed, 3);
	ck_assert_uint_eq(c->notify.dropped, 3);
	ck_assert_uint_eq(c->notify.queued, 0);
	ck_assert_ptr_null(notify_queue_of(lf.f.owner));
	ck_assert_uint_eq(c->rx->stats.reposted, 3);

	/* And a good one after them is queued. */
	rec.n = 0;
	send_many(l, &rec, 1);
	ck_assert_uint_eq(notify_queue_of(lf.f.owner)->n, 1);

	/* Longer than a receive buffer: the receiving QP fails (RC cannot
	 * take half a message), the link with it; nothing crashes. */
	before = (unsigned)c->rx->stats.errors;
	w.length = RECV_RING_BYTES + 1;
	rec.n = 0;
	ck_assert_int_eq(link_post(l, &rec.u, &w, 1), 0);
	LINK_RUN_UNTIL(&lf, rec.n == 1);
	ck_assert(rec.c[0].final);
	ck_assert_uint_gt(c->rx->stats.errors, before);
	ck_assert_uint_eq(notify_queue_of(lf.f.owner)->n, 1);
	LINK_RUN_UNTIL(&lf, l->finished);
	link_unref(l);
}
END_TEST

/* The owner's session ends: its queue goes, a waiter hears so, and the
 * connections its export admitted go with its token. */
static bool gone_heard;

static void note_gone(struct notify_waiter *w)
{
	(void)w;
	gone_heard = true;
}

START_TEST(test_session_end)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct notify_waiter w = { .arrived = arrival_gone, .gone = note_gone };
	struct link_rec rec;

	link_rec_init(&rec);
	send_many(l, &rec, 3);
	ck_assert_uint_eq(nctx.n_queues, 1);
	ck_assert_uint_eq(nctx.n_queued, 3);
	notify_queue_of(lf.f.owner)->waiter = &w;
	gone_heard = false;
	session_close(lf.f.owner);
	lf.token = NULL;
	ck_assert(gone_heard);
	ck_assert_uint_eq(nctx.n_queues, 0);
	ck_assert_uint_eq(nctx.n_queued, 0);
	ck_assert_uint_eq(lf.rdma.n_rconns, 0);
	/* Nothing is made for a closed session. */
	ck_assert_ptr_null(notify_queue_get(&nctx, lf.f.owner));
	LINK_RUN_UNTIL(&lf, l->finished);
	link_unref(l);
}
END_TEST

/*
 * Real verbs: rxe in the Soft-RoCE VM (tag rdma). The daemon's own device
 * links (uid 2000) to its own rdmacm endpoint on 10.9.0.1 with an export's
 * token of uid 1000: large WRITEs, then a notification on the same RC QP;
 * when the owner's queue gets it, the bytes are already in place.
 */
static void setup_rxe(void)
{
	notify_fixture_init("10.9.0.1:7491", true);
}

START_TEST(test_rxe_after_data)
{
	struct link *l = link_fixture_connect(&lf, lf.key);
	struct arrival a = { .w = { .arrived = arrival_seen, .gone = arrival_gone },
			     .off = 3,
			     .len = LINK_FIXTURE_SIZE - 3 };
	struct vb_send_wr w[4];
	struct notification *n;
	struct notify_queue *q;
	struct link_rec rec;
	struct rconn *c = the_rconn();
	uint64_t t0, t1;

	link_rec_init(&rec);
	ck_assert_ptr_nonnull(c->rx);
	q = notify_queue_get(&nctx, lf.f.owner);
	q->waiter = &a.w;
	for (unsigned round = 0; round < 20; round++) {
		size_t part = (LINK_FIXTURE_SIZE - 3) / 4;

		link_fixture_fill(&lf, 11 + round);
		for (unsigned i = 0; i < 4; i++)
			w[i] = link_fixture_wr(&lf, VB_WR_RDMA_WRITE, i, 3 + i * part, 3 + i * part,
					       (uint32_t)(i == 3 ?
								  LINK_FIXTURE_SIZE - 3 - 3 * part :
								  part),
					       false);
		rec.n = 0;
		a.n = 0;
		t0 = uv_hrtime();
		ck_assert_int_eq(link_post(l, &rec.u, w, 4), 0);
		ck_assert_int_eq(link_post_notify(l, &rec.u, &round, sizeof(round), EXPORT_ID), 0);
		LINK_RUN_UNTIL(&lf, a.n == 1);
		t1 = uv_hrtime();
		ck_assert_msg(a.data_in_place, "round %u: the notification came before the data",
			      round);
		n = notify_queue_pop(q);
		ck_assert_ptr_nonnull(n);
		ck_assert_uint_eq(n->export_id, EXPORT_ID);
		ck_assert_uint_eq(n->sender_uid, 2000);
		ck_assert_uint_eq(n->len, sizeof(round));
		ck_assert_int_eq(memcmp(n->data, &round, sizeof(round)), 0);
		free(n);
		LINK_RUN_UNTIL(&lf, rec.n == 2);
		ck_assert_uint_eq(rec.c[1].wr_id, LINK_WR_ID_NOTIFY);
		if (round == 0)
			fprintf(stderr, "notify-rxe: 64 KiB of WRITEs + notification in %.2f ms\n",
				(double)(t1 - t0) / 1e6);
	}
	/* More than the ring's buffers went through it. */
	ck_assert_uint_eq(c->rx->stats.received, 20);
	ck_assert_uint_eq(c->rx->stats.reposted, 20);
	ck_assert_uint_eq(nctx.stats.received, 20);
	q->waiter = NULL;
	link_unref(l);
}
END_TEST

Suite *notify_suite(void)
{
	Suite *su = suite_create("notify");
	TCase *msg = tcase_create("msg");
	TCase *tc = tcase_create("notify");
	TCase *rxe = tcase_create("rxe");

	tcase_add_test(msg, test_msg_codec);
	suite_add_tcase(su, msg);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_send_bounds);
	tcase_add_test(tc, test_after_data);
	tcase_add_test(tc, test_queue_bound);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_session_end);
	suite_add_tcase(su, tc);

	tcase_set_tags(rxe, "rdma");
	tcase_add_checked_fixture(rxe, setup_rxe, teardown);
	tcase_set_timeout(rxe, 120);
	test_add_tagged(rxe, "rdma", test_rxe_after_data);
	suite_add_tcase(su, rxe);
	return su;
}
