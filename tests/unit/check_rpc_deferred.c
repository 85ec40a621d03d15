/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deferred-reply handle (daemon/rpc/rpc.c), over a transport of the test's
 * own and a session, without a connection or a daemon: a handler that
 * defers and answers later, or at once; the client leaving first (on_cancel
 * runs once, a late answer is dropped); every handle ended exactly once.
 * And what the dispatcher does before a handler runs: the parameters
 * decoded by the method's table (types, mandatory, unknown, presence,
 * nested structs, long strings), check(), and the region looked up with
 * the right the table declares.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/mem/region.h"
#include "daemon/mem/region_memfd.h"
#include "daemon/rpc/rpc.h"
#include "daemon/core/session.h"
#include "proto/errors.h"
#include "rdmamem.h"
#include "tests/unit/session-fixture.h"
#include "tests/testlib.h"

/* What went over the test's transport. */
static struct {
	unsigned sent, ended, cancelled;
	char last[256];
	struct rpc_call *call; /* the call in progress, freed when it ends */
} t;

/* The core and the handlers' view of it: no daemon. */
static struct core core;
static struct account_table accounts;
static struct rpc_ctx ctx = { .core = &core };
static struct session *s;
static struct rpc_deferred *held; /* the handle a handler deferred */

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

static int fake_send_text(void *owner, const char *text, size_t len)
{
	ck_assert_ptr_eq(owner, &t);
	snprintf(t.last, sizeof(t.last), "%.*s", (int)len, text);
	t.sent++;
	return 0;
}

/* The connection's kind: replies made without a tree go as text. */
static const struct rpc_transport text_transport = {
	.send_json = fake_send_json,
	.send_buffer = fake_send_buffer,
	.send_text = fake_send_text,
	.reserve = fake_reserve,
	.unreserve = fake_unreserve,
	.ended = fake_ended,
};
static const struct rpc_transport *transport = &fake_transport;

static void setup(void)
{
	memset(&core, 0, sizeof(core));
	memset(&t, 0, sizeof(t));
	held = NULL;
	account_table_init(&accounts);
	core.accounts = &accounts;
	s = test_session_new(&accounts, 3, &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
}

static void teardown(void)
{
	t.call = rpc_call_free(t.call);
	s = session_unref(s);
	counters_done(&core.stats.errors);
	ck_assert_uint_eq(accounts.by_uid.n_entries, 0);
	account_table_done(&accounts);
}

/* A call of org.example.test.Method from caller, in progress on the test's
 * transport, with these parameters (a JSON object's text). */
static struct rpc_call *new_call_with(struct session *caller, const char *params)
{
	char text[512];
	struct rpc_message m = {};
	int no_fds[1];
	const char *reason;

	snprintf(text, sizeof(text), "{\"method\":\"org.example.test.Method\",\"parameters\":%s}",
		 params);
	m.root = cJSON_Parse(text);
	ck_assert_ptr_nonnull(m.root);
	ck_assert_int_eq(varlink_call_parse(m.root, &m.vc, &reason), 0);
	ck_assert_int_eq(rpc_call_new(transport, &t, caller, &ctx, &m, no_fds, 0, NULL, &t.call),
			 0);
	return t.call;
}

static struct rpc_call *new_call(void)
{
	return new_call_with(s, "{}");
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

static int defer_only(struct rpc_call *call, _unused_ void *params)
{
	held = rpc_defer(call, on_cancel, &held);
	return 0;
}

static int defer_and_answer(struct rpc_call *call, _unused_ void *params)
{
	struct rpc_deferred *dd = rpc_defer(call, on_cancel, &held);
	cJSON *p = cJSON_CreateObject();

	cJSON_AddStringToObject(p, "answer", "at once");
	ck_assert_int_eq(rpc_deferred_reply(dd, p), 0);
	return 0;
}

static int defer_dropping(struct rpc_call *call, _unused_ void *params)
{
	held = rpc_defer(call, NULL, NULL);
	rpc_deferred_on_cancel(held, on_cancel_drop, held);
	return 0;
}

#define TEST_INTERFACE "org.example.test"

/* clang-format off */
RPC_DEFINE_METHOD(Method, NULL);
/* clang-format on */

static const struct rpc_method m_defer = RPC_METHOD(TEST_INTERFACE, Method, defer_only);
static const struct rpc_method m_at_once = RPC_METHOD(TEST_INTERFACE, Method, defer_and_answer);
static const struct rpc_method m_dropping = RPC_METHOD(TEST_INTERFACE, Method, defer_dropping);

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

/* A reply of one u64 is the same text with a tree and without one (a
 * transport that takes text); one answer only. */
START_TEST(test_reply_u64)
{
	static const char *const want[] = { "{\"parameters\":{\"length\":\"4096\"}}",
					    "{\"parameters\":{\"length\":\"0\"}}",
					    "{\"parameters\":{\"n\":\"18446744073709551615\"}}" };
	static const struct {
		const char *name;
		uint64_t v;
	} replies[] = { { "length", 4096 }, { "length", 0 }, { "n", UINT64_MAX } };

	for (int k = 0; k < 2; k++) {
		transport = k ? &text_transport : &fake_transport;
		for (size_t i = 0; i < ELEMENTSOF(replies); i++) {
			unsigned sent = t.sent;

			ck_assert(rpc_call_run(new_call(), &m_defer));
			ck_assert_int_eq(rpc_deferred_reply_u64(held, replies[i].name,
								replies[i].v),
					 0);
			ck_assert_uint_eq(t.sent, sent + 1);
			ck_assert_str_eq(t.last, want[i]);
			ck_assert_ptr_null(t.call);
		}
		/* A second answer to the same call is refused. */
		new_call();
		ck_assert_int_eq(rpc_reply_u64(t.call, "length", 1), 0);
		ck_assert_int_eq(rpc_reply_u64(t.call, "length", 2), -EALREADY);
		ck_assert_str_eq(t.last, "{\"parameters\":{\"length\":\"1\"}}");
		t.call = rpc_call_free(t.call);
	}
	transport = &fake_transport;
}
END_TEST

/* Flat replies: printed straight to text where they can be, through a tree
 * where they cannot (a text to escape, too many fields, a transport that
 * takes no text), the same bytes on the wire either way. */
START_TEST(test_reply_flat)
{
	static const struct rpc_field lease[] = { { .name = "lease", .u64 = 7 },
						  { .name = "mode", .text = "exclusive" } };
	static const struct rpc_field quoted[] = { { .name = "n", .u64 = 1 },
						   { .name = "s", .text = "a\"b\\c\n" } };
	static const struct rpc_field many[] = {
		{ .name = "a", .u64 = 1 },       { .name = "b", .u64 = 2 },
		{ .name = "c", .u64 = 3 },       { .name = "d", .u64 = 4 },
		{ .name = "e", .text = "five" },
	};
	static const struct {
		const struct rpc_field *f;
		size_t n;
		const char *want;
	} cases[] = {
		{ lease, ELEMENTSOF(lease),
		  "{\"parameters\":{\"lease\":\"7\",\"mode\":\"exclusive\"}}" },
		{ quoted, ELEMENTSOF(quoted),
		  "{\"parameters\":{\"n\":\"1\",\"s\":\"a\\\"b\\\\c\\n\"}}" },
		{ many, ELEMENTSOF(many),
		  "{\"parameters\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\",\"e\":\"five\"}}" },
		{ lease, 0, "{\"parameters\":{}}" },
	};

	for (int k = 0; k < 2; k++) {
		transport = k ? &text_transport : &fake_transport;
		for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
			unsigned sent = t.sent;

			ck_assert(rpc_call_run(new_call(), &m_defer));
			ck_assert_int_eq(rpc_deferred_reply_flat(held, cases[i].f, cases[i].n), 0);
			ck_assert_uint_eq(t.sent, sent + 1);
			ck_assert_str_eq(t.last, cases[i].want);
			ck_assert_ptr_null(t.call);
		}
		new_call();
		ck_assert_int_eq(rpc_reply_flat(t.call, lease, ELEMENTSOF(lease)), 0);
		ck_assert_int_eq(rpc_reply_flat(t.call, lease, ELEMENTSOF(lease)), -EALREADY);
		t.call = rpc_call_free(t.call);
	}
	transport = &fake_transport;
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

/* The parameters of the decoding tests' method, as its table declares them. */
struct decode_params {
	struct rpc_region region;
	uint64_t size;
	uint32_t count;
	int64_t timeout;
	bool flag, has_flag;
	struct rpc_string text;
	struct decode_inner {
		uint64_t a;
		const char *b;
		bool has_b;
	} inner;
	bool refuse;
};

/* clang-format off */
static const struct varlink_symbol rpc_type_Inner = VARLINK_DEFINE_TYPE(
	Inner, NULL,
	VARLINK_INPUT(struct decode_inner, a, VARLINK_U64, 0),
	VARLINK_INPUT_HAS(struct decode_inner, b, b, VARLINK_STRING, VARLINK_NULLABLE, has_b));

RPC_DEFINE_METHOD(Decode, NULL,
		  RPC_INPUT_REGION(struct decode_params, region, REGION_WRITE),
		  VARLINK_INPUT(struct decode_params, size, VARLINK_U64, VARLINK_NULLABLE),
		  VARLINK_INPUT(struct decode_params, count, VARLINK_U32, VARLINK_NULLABLE),
		  VARLINK_INPUT(struct decode_params, timeout, VARLINK_INT, VARLINK_NULLABLE),
		  VARLINK_INPUT_HAS(struct decode_params, flag, flag, VARLINK_BOOL,
				    VARLINK_NULLABLE, has_flag),
		  RPC_INPUT_MEASURED(struct decode_params, text, VARLINK_NULLABLE),
		  VARLINK_INPUT_BY_TYPE(struct decode_params, inner, inner, rpc_type_Inner,
					VARLINK_NULLABLE),
		  VARLINK_INPUT(struct decode_params, refuse, VARLINK_BOOL, VARLINK_NULLABLE),
		  VARLINK_OUTPUT(ok, VARLINK_BOOL, 0));
/* clang-format on */

static const struct decode_params decode_init = { .timeout = -1 };

/* What the handler saw; ran counts its calls. */
static struct {
	struct decode_params p;
	unsigned ran;
	unsigned region_refs; /* the region's references while the handler ran */
} seen;

static int decode_handler(struct rpc_call *call, void *params)
{
	seen.p = *(struct decode_params *)params;
	seen.region_refs = seen.p.region.region->n_ref;
	seen.ran++;
	return rpc_reply(call, NULL);
}

/* Before the region is looked up: a refusal names no region. */
static int decode_check(struct rpc_call *call, void *params)
{
	const struct decode_params *p = params;

	if (p->refuse)
		return rpc_invalid_param(call, "refuse", "refused before the lookup");
	return 0;
}

static const struct rpc_method m_decode =
	RPC_METHOD(TEST_INTERFACE, Decode, decode_handler, RPC_PARAMS(struct decode_params),
		   .params_init = &decode_init, .check = decode_check);

static uv_loop_t loop;
static struct region *reg;    /* owned by s's uid */
static struct session *other; /* another uid */
static struct region_registry regs;

static void setup_decode(void)
{
	struct memfd_import imp = {};
	struct errinfo e = {};

	setup();
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	core.loop = &loop;
	daemon_config_init(&core.cfg);
	region_registry_init(&regs, &core);
	ctx.regions = &regs;
	other = test_session_new(&accounts, 4,
				 &(struct ucred){ .pid = 2, .uid = 2000, .gid = 2000 });
	ck_assert_int_eq(rdmamem_memfd_create("decode", 4096, &imp.fd, NULL), 0);
	ck_assert_int_eq(region_import_memfd(&regs, s, &imp, &reg, &e), 0);
}

static void teardown_decode(void)
{
	t.call = rpc_call_free(t.call);
	region_drop_owner(reg);
	other = session_unref(other);
	teardown();
	region_registry_stop(&regs);
	uv_run(&loop, UV_RUN_DEFAULT);
	region_registry_done(&regs);
	ctx.regions = NULL;
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* Runs the Decode method from caller with params ("%1$s": the region's id). */
static void run_decode(struct session *caller, const char *params)
{
	char text[256], id[24];

	snprintf(id, sizeof(id), "\"%llu\"", (unsigned long long)reg->id);
	snprintf(text, sizeof(text), params, id);
	t.call = rpc_call_free(t.call);
	t.sent = 0;
	ck_assert(!rpc_call_run(new_call_with(caller, text), &m_decode));
	ck_assert_uint_eq(t.sent, 1);
}

START_TEST(test_decode_types)
{
	unsigned refs = reg->n_ref;

	run_decode(s, "{\"region\":%1$s,\"size\":\"12345678901234567890\",\"count\":7,"
		      "\"timeout\":-5,\"flag\":false,\"text\":\"abcd\",\"inner\":{\"a\":\"3\"}}");
	ck_assert_uint_eq(seen.ran, 1);
	ck_assert_str_eq(t.last, "{\"parameters\":{}}");
	ck_assert_uint_eq(seen.p.region.id, reg->id);
	ck_assert_ptr_eq(seen.p.region.region, reg);
	ck_assert(seen.p.size == 12345678901234567890ULL);
	ck_assert_uint_eq(seen.p.count, 7);
	ck_assert_int_eq(seen.p.timeout, -5);
	ck_assert(!seen.p.flag && seen.p.has_flag);
	ck_assert_str_eq(seen.p.text.s, "abcd");
	ck_assert_uint_eq(seen.p.text.len, 4);
	ck_assert_uint_eq(seen.p.inner.a, 3);
	ck_assert(!seen.p.inner.has_b);
	/* The dispatcher's reference while the handler ran, dropped after. */
	ck_assert_uint_eq(seen.region_refs, refs + 1);
	ck_assert_uint_eq(reg->n_ref, refs);

	/* Absent: the initial values, no presence. */
	run_decode(s, "{\"region\":%1$s,\"flag\":null}");
	ck_assert_uint_eq(seen.ran, 2);
	ck_assert_int_eq(seen.p.timeout, -1);
	ck_assert(!seen.p.has_flag);
	ck_assert_ptr_null(seen.p.text.s);
	ck_assert_uint_eq(seen.p.text.len, 0);
}
END_TEST

/* Each refusal as InvalidParameter naming the parameter; no handler ran. */
START_TEST(test_decode_refused)
{
	static const struct {
		const char *params, *parameter;
	} cases[] = {
		{ "{}", "region" },
		{ "{\"size\":\"1\"}", "region" },
		{ "{\"region\":null}", "region" },
		{ "{\"region\":%1$s,\"bogus\":1}", "bogus" },
		{ "{\"region\":%1$s,\"count\":-1}", "count" },
		{ "{\"region\":%1$s,\"count\":4294967296}", "count" },
		{ "{\"region\":%1$s,\"size\":1.5}", "size" },
		{ "{\"region\":%1$s,\"timeout\":\"1\"}", "timeout" },
		{ "{\"region\":%1$s,\"flag\":1}", "flag" },
		{ "{\"region\":%1$s,\"text\":[]}", "text" },
		{ "{\"region\":true}", "region" },
		/* A nested struct's problems are named by the parameter holding it. */
		{ "{\"region\":%1$s,\"inner\":1}", "inner" },
		{ "{\"region\":%1$s,\"inner\":{}}", "inner" },
		{ "{\"region\":%1$s,\"inner\":{\"a\":\"1\",\"c\":1}}", "inner" },
		{ "{\"region\":%1$s,\"inner\":{\"a\":\"1\",\"b\":2}}", "inner" },
		/* Types first, then what is missing, whatever the order sent. */
		{ "{\"count\":-1}", "count" },
		/* check() before the lookup: no region needed to refuse. */
		{ "{\"region\":\"999\",\"refuse\":true}", "refuse" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char want[128];

		run_decode(s, cases[i].params);
		snprintf(want, sizeof(want),
			 "{\"error\":\"%s\",\"parameters\":{\"parameter\":\"%s\"}}",
			 VARLINK_ERROR_INVALID_PARAMETER, cases[i].parameter);
		ck_assert_msg(strcmp(t.last, want) == 0, "%s: %s", cases[i].params, t.last);
	}
	ck_assert_uint_eq(seen.ran, 0);
}
END_TEST

/* The region is looked up with the declared right, or the call is refused
 * as rpc_region_lookup() refuses it. */
START_TEST(test_decode_region_right)
{
	unsigned refs = reg->n_ref;

	run_decode(s, "{\"region\":\"999\"}");
	ck_assert_ptr_nonnull(strstr(t.last, RDMAMEM_ERROR_NO_SUCH_REGION));
	run_decode(other, "{\"region\":%1$s}");
	ck_assert_ptr_nonnull(strstr(t.last, RDMAMEM_ERROR_PERMISSION_DENIED));
	/* Read-only is not enough for a write. */
	ck_assert_int_eq(region_share(reg, false, 2000, true, NULL), 0);
	run_decode(other, "{\"region\":%1$s}");
	ck_assert_ptr_nonnull(strstr(t.last, RDMAMEM_ERROR_PERMISSION_DENIED));
	ck_assert_uint_eq(seen.ran, 0);
	ck_assert_int_eq(region_share(reg, false, 2000, false, NULL), 0);
	run_decode(other, "{\"region\":%1$s}");
	ck_assert_uint_eq(seen.ran, 1);
	ck_assert_uint_eq(reg->n_ref, refs);
}
END_TEST

Suite *rpc_deferred_suite(void)
{
	Suite *su = suite_create("deferred");
	TCase *tc = tcase_create("deferred");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_reply_later);
	tcase_add_test(tc, test_reply_u64);
	tcase_add_test(tc, test_reply_flat);
	tcase_add_test(tc, test_answer_at_once);
	tcase_add_test(tc, test_reply_after_client_left);
	tcase_add_test(tc, test_error_after_client_left);
	tcase_add_test(tc, test_cancel_ends_handle);
	tcase_add_test(tc, test_error_later);
	tcase_add_test(tc, test_drop_answers_nothing);
	tcase_add_test(tc, test_cancel_after_end);
	suite_add_tcase(su, tc);

	tc = tcase_create("decode");
	tcase_add_checked_fixture(tc, setup_decode, teardown_decode);
	tcase_add_test(tc, test_decode_types);
	tcase_add_test(tc, test_decode_refused);
	tcase_add_test(tc, test_decode_region_right);
	suite_add_tcase(su, tc);
	return su;
}
