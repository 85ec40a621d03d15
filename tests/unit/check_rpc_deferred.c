/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deferred-reply handle (daemon/rpc.c), over a transport of the test's
 * own and a session, without a connection or a daemon: a handler that
 * defers and answers later, or at once; the client leaving first (on_cancel
 * runs once, a late answer is dropped); every handle ended exactly once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core.h"
#include "daemon/errinfo.h"
#include "daemon/rpc.h"
#include "daemon/session.h"
#include "proto/errors.h"
#include "tests/unit/session-fixture.h"
#include "tests/testlib.h"

/* What went over the test's transport. */
static struct {
	unsigned sent, ended, cancelled;
	char last[256];
	struct rpc_call *call;		/* the call in progress, freed when it ends */
} t;

/* The core and the handlers' view of it: no daemon. */
static struct core core;
static struct account_table accounts;
static struct rpc_ctx ctx = { .core = &core };
static struct session *s;
static struct rpc_deferred *held;	/* the handle a handler deferred */

static int fake_send_json(void *owner, const cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);

	ck_assert_ptr_eq(owner, &t);
	ck_assert_ptr_nonnull(text);
	snprintf(t.last, sizeof(t.last), "%s", text);
	free(text);
	t.sent++;
	return 0;
}

static int fake_send_buffer(void *owner, char *text, size_t len)
{
	(void)owner;
	snprintf(t.last, sizeof(t.last), "%.*s", (int)len, text);
	free(text);
	t.sent++;
	return 0;
}

static int fake_reserve(void *owner, uint64_t bytes)
{
	(void)owner;
	(void)bytes;
	return 1;
}

static void fake_unreserve(void *owner, uint64_t bytes)
{
	(void)owner;
	(void)bytes;
}

/* As the connection does: the deferred call ended, free it. */
static void fake_ended(void *owner, struct rpc_call *call)
{
	ck_assert_ptr_eq(owner, &t);
	ck_assert_ptr_eq(call, t.call);
	t.ended++;
	t.call = rpc_call_free(call);
}

static const struct rpc_transport fake_transport = {
	.send_json = fake_send_json,
	.send_buffer = fake_send_buffer,
	.reserve = fake_reserve,
	.unreserve = fake_unreserve,
	.ended = fake_ended,
};

static void setup(void)
{
	memset(&core, 0, sizeof(core));
	memset(&t, 0, sizeof(t));
	held = NULL;
	account_table_init(&accounts);
	core.accounts = &accounts;
	s = test_session_new(&accounts, 3,
			     &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
}

static void teardown(void)
{
	t.call = rpc_call_free(t.call);
	s = session_unref(s);
	counters_done(&core.stats.errors);
	ck_assert_uint_eq(accounts.by_uid.n_entries, 0);
	account_table_done(&accounts);
}

/* A call of org.example.test.Method, in progress on the test's transport. */
static struct rpc_call *new_call(void)
{
	static const char text[] = "{\"method\":\"org.example.test.Method\",\"parameters\":{}}";
	struct rpc_message m = {};
	int no_fds[1];
	const char *reason;

	m.root = cJSON_Parse(text);
	ck_assert_ptr_nonnull(m.root);
	ck_assert_int_eq(varlink_call_parse(m.root, &m.vc, &reason), 0);
	ck_assert_int_eq(rpc_call_new(&fake_transport, &t, s, &ctx, &m, no_fds, 0, &t.call), 0);
	return t.call;
}

static void on_cancel(void *userdata)
{
	ck_assert_ptr_eq(userdata, &held);
	t.cancelled++;
}

/* Stops on cancel and ends the handle there, as most holders do. */
static void on_cancel_drop(void *userdata)
{
	t.cancelled++;
	rpc_deferred_drop(userdata);
}

static int defer_only(struct rpc_call *call)
{
	held = rpc_defer(call, on_cancel, &held);
	return 0;
}

static int defer_and_answer(struct rpc_call *call)
{
	struct rpc_deferred *dd = rpc_defer(call, on_cancel, &held);
	cJSON *p = cJSON_CreateObject();

	cJSON_AddStringToObject(p, "answer", "at once");
	ck_assert_int_eq(rpc_deferred_reply(dd, p), 0);
	return 0;
}

static int defer_dropping(struct rpc_call *call)
{
	held = rpc_defer(call, NULL, NULL);
	rpc_deferred_on_cancel(held, on_cancel_drop, held);
	return 0;
}

static const struct rpc_method m_defer = { "org.example.test.Method", defer_only, 0 };
static const struct rpc_method m_at_once = { "org.example.test.Method", defer_and_answer, 0 };
static const struct rpc_method m_dropping = { "org.example.test.Method", defer_dropping, 0 };

START_TEST(test_reply_later)
{
	cJSON *p = cJSON_CreateObject();

	ck_assert(rpc_call_run(new_call(), &m_defer));
	ck_assert_ptr_nonnull(held);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_uint_eq(t.ended, 0);

	cJSON_AddNumberToObject(p, "n", 1);
	ck_assert_int_eq(rpc_deferred_reply(held, p), 0);
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_str_eq(t.last, "{\"parameters\":{\"n\":1}}");
	/* Ended once, through the transport, which freed the call. */
	ck_assert_uint_eq(t.ended, 1);
	ck_assert_ptr_null(t.call);
	ck_assert_uint_eq(t.cancelled, 0);
}
END_TEST

START_TEST(test_answer_at_once)
{
	/* The call ends when the handler returns, not through the transport. */
	ck_assert(!rpc_call_run(new_call(), &m_at_once));
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_str_eq(t.last, "{\"parameters\":{\"answer\":\"at once\"}}");
	ck_assert_uint_eq(t.ended, 0);
	ck_assert_ptr_nonnull(t.call);
}
END_TEST

START_TEST(test_reply_after_client_left)
{
	struct rpc_call *call = new_call();

	ck_assert(rpc_call_run(call, &m_defer));
	rpc_call_cancel(call);
	ck_assert_uint_eq(t.cancelled, 1);
	/* Once only. */
	rpc_call_cancel(call);
	ck_assert_uint_eq(t.cancelled, 1);
	ck_assert_uint_eq(t.ended, 0);

	/* The holder still ends the handle: the answer goes nowhere. */
	ck_assert_int_eq(rpc_deferred_reply(held, cJSON_CreateObject()), 0);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_uint_eq(t.ended, 1);
	ck_assert_ptr_null(t.call);
}
END_TEST

START_TEST(test_error_after_client_left)
{
	struct rpc_call *call = new_call();
	struct errinfo e = {};

	ck_assert(rpc_call_run(call, &m_defer));
	rpc_call_cancel(call);
	errinfo_set(&e, RDMAMEM_ERROR_LOCK_TIMEOUT, -ETIMEDOUT, "too late");
	/* Still the errno the error stands for; nothing sent. */
	ck_assert_int_eq(rpc_deferred_error(held, &e), -ETIMEDOUT);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_uint_eq(t.ended, 1);
}
END_TEST

START_TEST(test_cancel_ends_handle)
{
	struct rpc_call *call = new_call();

	ck_assert(rpc_call_run(call, &m_dropping));
	/* on_cancel drops the handle: the call ends (and is freed) in there. */
	rpc_call_cancel(call);
	ck_assert_uint_eq(t.cancelled, 1);
	ck_assert_uint_eq(t.ended, 1);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_ptr_null(t.call);
}
END_TEST

START_TEST(test_error_later)
{
	struct errinfo e = {};

	ck_assert(rpc_call_run(new_call(), &m_defer));
	errinfo_set(&e, RDMAMEM_ERROR_LOCK_TIMEOUT, -ETIMEDOUT, "waited");
	ck_assert_int_eq(rpc_deferred_error(held, &e), -ETIMEDOUT);
	ck_assert_uint_eq(t.sent, 1);
	ck_assert_ptr_nonnull(strstr(t.last, RDMAMEM_ERROR_LOCK_TIMEOUT));
	ck_assert_ptr_nonnull(strstr(t.last, "waited"));
	ck_assert_uint_eq(t.ended, 1);
}
END_TEST

START_TEST(test_drop_answers_nothing)
{
	ck_assert(rpc_call_run(new_call(), &m_defer));
	rpc_deferred_drop(held);
	ck_assert_uint_eq(t.sent, 0);
	ck_assert_uint_eq(t.ended, 1);
	ck_assert_uint_eq(t.cancelled, 0);
}
END_TEST

START_TEST(test_cancel_after_end)
{
	/* A call answered at once has no live handle: cancelling it runs no
	 * hook. */
	struct rpc_call *call = new_call();

	ck_assert(!rpc_call_run(call, &m_at_once));
	rpc_call_cancel(call);
	ck_assert_uint_eq(t.cancelled, 0);
	ck_assert_uint_eq(t.ended, 0);
}
END_TEST

Suite *rpc_deferred_suite(void)
{
	Suite *su = suite_create("deferred");
	TCase *tc = tcase_create("deferred");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_reply_later);
	tcase_add_test(tc, test_answer_at_once);
	tcase_add_test(tc, test_reply_after_client_left);
	tcase_add_test(tc, test_error_after_client_left);
	tcase_add_test(tc, test_cancel_ends_handle);
	tcase_add_test(tc, test_error_later);
	tcase_add_test(tc, test_drop_answers_nothing);
	tcase_add_test(tc, test_cancel_after_end);
	suite_add_tcase(su, tc);
	return su;
}
