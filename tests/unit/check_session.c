/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sessions (daemon/core/session.c), built on their own: the drop hooks run kind
 * by kind in teardown order, the counts follow what is added and removed,
 * and closing twice does nothing more.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/session.h"
#include "tests/unit/session-fixture.h"
#include "tests/testlib.h"

/* A resource of a test: which kind, and a tag for the order it went in. */
struct item {
	struct session_link link;
	int tag;
};

static struct account_table accounts;
static struct session *s;
static session_drop_fn saved[SESSION_KIND_MAX];
static int dropped[16];
static size_t n_dropped;
/* Dropping a token also drops this rconn: a drop may reach later kinds. */
static struct item *token_takes;

static void drop_item(struct session_link *link)
{
	struct item *it = container_of(link, struct item, link);

	ck_assert_uint_lt(n_dropped, ELEMENTSOF(dropped));
	dropped[n_dropped++] = it->tag;
	session_remove(link);
	if (link->kind == SESSION_TOKEN && token_takes) {
		session_remove(&token_takes->link);
		token_takes = NULL;
	}
}

static void setup(void)
{
	account_table_init(&accounts);
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++)
		saved[k] = session_kind_register(k, drop_item);
	n_dropped = 0;
	token_takes = NULL;
	s = test_session_new(&accounts, 7, &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
}

static void teardown(void)
{
	s = session_unref(s);
	ck_assert_uint_eq(accounts.by_uid.n_entries, 0);
	account_table_done(&accounts);
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++)
		session_kind_register(k, saved[k]);
}

static void add(struct item *it, enum session_kind kind, int tag)
{
	session_link_init(&it->link);
	it->tag = tag;
	session_add(s, kind, &it->link);
}

START_TEST(test_close_order)
{
	struct item items[8];

	/* Added in no particular order of kinds. */
	add(&items[0], SESSION_REGION, 40);
	add(&items[1], SESSION_LEASE, 30);
	add(&items[2], SESSION_TOKEN, 10);
	add(&items[3], SESSION_REMOTE, 5);
	add(&items[4], SESSION_REGION, 41);
	add(&items[5], SESSION_RCONN, 20);
	add(&items[6], SESSION_PLAN, 1);
	add(&items[7], SESSION_LEASE, 31);
	session_close(s);

	/* Teardown order is the kind enum's (plans, remotes, tokens, queue
	 * pairs, leases, regions); within a kind, first added first. */
	ck_assert_uint_eq(n_dropped, 8);
	ck_assert_int_eq(dropped[0], 1);
	ck_assert_int_eq(dropped[1], 5);
	ck_assert_int_eq(dropped[2], 10);
	ck_assert_int_eq(dropped[3], 20);
	ck_assert_int_eq(dropped[4], 30);
	ck_assert_int_eq(dropped[5], 31);
	ck_assert_int_eq(dropped[6], 40);
	ck_assert_int_eq(dropped[7], 41);
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++)
		ck_assert_uint_eq(session_count(s, k), 0);
	ck_assert(s->closed);
}
END_TEST

START_TEST(test_drop_reaches_later_kind)
{
	struct item token, rconn, other;

	add(&token, SESSION_TOKEN, 1);
	add(&rconn, SESSION_RCONN, 2);
	add(&other, SESSION_RCONN, 3);
	token_takes = &rconn;
	session_close(s);
	/* The token's drop took rconn with it: its hook never saw it. */
	ck_assert_uint_eq(n_dropped, 2);
	ck_assert_int_eq(dropped[0], 1);
	ck_assert_int_eq(dropped[1], 3);
	ck_assert_ptr_null(rconn.link.session);
}
END_TEST

/* Frees its resource, as the daemon's hooks do: session_close() must not
 * look at it again (ASan would say so). */
static void drop_and_free(struct session_link *link)
{
	drop_item(link);
	free(container_of(link, struct item, link));
}

START_TEST(test_hook_frees)
{
	for (int i = 0; i < 3; i++) {
		struct item *it = malloc(sizeof(*it));

		ck_assert_ptr_nonnull(it);
		add(it, SESSION_REGION, i);
	}
	session_kind_register(SESSION_REGION, drop_and_free);
	session_close(s);
	ck_assert_uint_eq(n_dropped, 3);
	ck_assert_uint_eq(session_count(s, SESSION_REGION), 0);
}
END_TEST

START_TEST(test_counts)
{
	struct item a, b, c;

	add(&a, SESSION_REGION, 1);
	add(&b, SESSION_REGION, 2);
	add(&c, SESSION_LEASE, 3);
	ck_assert_uint_eq(session_count(s, SESSION_REGION), 2);
	ck_assert_uint_eq(session_count(s, SESSION_LEASE), 1);
	ck_assert_uint_eq(session_count(s, SESSION_TOKEN), 0);
	ck_assert_ptr_eq(a.link.session, s);

	session_remove(&a.link);
	ck_assert_ptr_null(a.link.session);
	ck_assert_uint_eq(session_count(s, SESSION_REGION), 1);
	/* Removing what is in no session does nothing. */
	session_remove(&a.link);
	ck_assert_uint_eq(session_count(s, SESSION_REGION), 1);

	session_close(s);
	ck_assert_uint_eq(n_dropped, 2);
	ck_assert_uint_eq(session_count(s, SESSION_REGION), 0);
	ck_assert_uint_eq(session_count(s, SESSION_LEASE), 0);
}
END_TEST

START_TEST(test_close_twice)
{
	struct item a;

	add(&a, SESSION_LEASE, 1);
	session_close(s);
	ck_assert_uint_eq(n_dropped, 1);
	session_close(s);
	ck_assert_uint_eq(n_dropped, 1);
	ck_assert(s->closed);
}
END_TEST

START_TEST(test_hold_outlives_close)
{
	struct session *held = session_ref(s);
	struct item a;

	add(&a, SESSION_REGION, 1);
	session_close(s);
	/* Work that outlives the call keeps the session (its cred, its
	 * account) readable, holding nothing. */
	s = session_unref(s);
	ck_assert_uint_eq(held->cred.uid, 1000);
	ck_assert_ptr_nonnull(held->account);
	s = held;
}
END_TEST

START_TEST(test_groups)
{
	gid_t *groups = malloc(2 * sizeof(gid_t));
	struct account *a = account_get(&accounts, 1000);
	struct ucred cred = { .pid = 2, .uid = 1000, .gid = 1000 };
	struct session *g = NULL;

	ck_assert_ptr_nonnull(groups);
	groups[0] = 77;
	groups[1] = 78;

	ck_assert_int_eq(session_new(8, &cred, groups, 2, a, &g), 0);
	account_unref(a);
	ck_assert(session_in_group(g, 1000));
	ck_assert(session_in_group(g, 78));
	ck_assert(!session_in_group(g, 79));
	ck_assert(!session_in_group(s, 77));
	session_unref(g);
}
END_TEST

Suite *session_suite(void)
{
	Suite *su = suite_create("session");
	TCase *tc = tcase_create("session");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_close_order);
	tcase_add_test(tc, test_drop_reaches_later_kind);
	tcase_add_test(tc, test_hook_frees);
	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_close_twice);
	tcase_add_test(tc, test_hold_outlives_close);
	tcase_add_test(tc, test_groups);
	suite_add_tcase(su, tc);
	return su;
}
