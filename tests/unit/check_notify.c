/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Notifications: the wire record (daemon/remote/notify_msg.c) and the
 * sending side (link_post_notify(), daemon/remote/link.c) over the fake
 * verbs, against this process's own endpoint.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/link.h"
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

static struct link_fixture lf;

static void setup(void)
{
	vb = &fake_vb_ops;
	fake_verbs_reset();
	link_fixture_init(&lf, "127.0.0.1:7473", NULL);
}

static void teardown(void)
{
	link_fixture_done(&lf);
	fake_verbs_reset();
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
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

Suite *notify_suite(void)
{
	Suite *su = suite_create("notify");
	TCase *msg = tcase_create("msg");
	TCase *tc = tcase_create("notify");

	tcase_add_test(msg, test_msg_codec);
	suite_add_tcase(su, msg);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_send_bounds);
	suite_add_tcase(su, tc);
	return su;
}
