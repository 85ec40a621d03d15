/* SPDX-License-Identifier: BSD-3-Clause */
/* End to end against a real rdmamemd process over raw Varlink. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/errors.h"
#include "proto/varlink.h"
#include "rdmamem.h"
#include "tests/testlib.h"

static struct test_daemon td;

static void setup(void)
{
	test_daemon_start(&td, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

static cJSON *params_of(const cJSON *reply)
{
	cJSON *p = cJSON_GetObjectItemCaseSensitive(reply, "parameters");

	ck_assert_msg(cJSON_IsObject(p), "reply has no parameters object");
	return p;
}

/* call is answered with error, whose parameter field has the value want. */
static void expect_error_naming(int fd, const char *call, const char *error, const char *field,
				const char *want)
{
	cJSON *reply = test_call(fd, call);

	ck_assert_str_eq(test_reply_error(reply), error);
	ck_assert_str_eq(test_str(params_of(reply), field), want);
	cJSON_Delete(reply);
}

START_TEST(test_get_info)
{
	int fd = test_connect(td.socket);
	cJSON *reply = test_call(fd, "{\"method\":\"org.varlink.service.GetInfo\"}");
	cJSON *p = params_of(reply), *ifaces, *i;
	int n = 0;

	ck_assert_ptr_null(test_reply_error(reply));
	ck_assert_str_eq(test_str(p, "vendor"), "rdmamemd");
	ck_assert_str_eq(test_str(p, "product"), "rdmamemd");
	ck_assert_int_gt(strlen(test_str(p, "version")), 0);
	ck_assert_int_gt(strlen(test_str(p, "url")), 0);
	ifaces = cJSON_GetObjectItemCaseSensitive(p, "interfaces");
	ck_assert(cJSON_IsArray(ifaces));
	cJSON_ArrayForEach(i, ifaces) {
		ck_assert(cJSON_IsString(i));
		ck_assert(varlink_interface_name_is_valid(i->valuestring, strlen(i->valuestring)));
		n++;
	}
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(cJSON_GetArrayItem(ifaces, 0)->valuestring, "org.varlink.service");
	ck_assert_str_eq(cJSON_GetArrayItem(ifaces, 1)->valuestring, "io.rdmamemd");
	cJSON_Delete(reply);
	close(fd);
}
END_TEST

/*
 * "parameters": null is no parameters: the reference Go library sends it for
 * every call without any, its own GetInfo() among them.
 */
START_TEST(test_null_parameters)
{
	static const char *const methods[] = {
		"org.varlink.service.GetInfo", "io.rdmamemd.Ping",
		"io.rdmamemd.GetStatus",       "io.rdmamemd.GetStats",
		"io.rdmamemd.ListClients",     "io.rdmamemd.ListRegions",
		"io.rdmamemd.ListDevices",     "io.rdmamemd.ListConnections",
		"io.rdmamemd.ListLinks",       "io.rdmamemd.CreateAccessToken",
	};
	int fd = test_connect(td.socket);

	for (size_t k = 0; k < ELEMENTSOF(methods); k++) {
		char call[256];
		cJSON *reply;

		snprintf(call, sizeof(call), "{\"method\":\"%s\",\"parameters\":null}", methods[k]);
		reply = test_call(fd, call);
		ck_assert_msg(!test_reply_error(reply), "%s: %s", methods[k],
			      test_reply_error(reply));
		params_of(reply);
		cJSON_Delete(reply);
	}
	/* A mandatory parameter is still missing when the object is null. */
	expect_error_naming(fd, "{\"method\":\"io.rdmamemd.GetRegion\",\"parameters\":null}",
			    VARLINK_ERROR_INVALID_PARAMETER, "parameter", "region");
	close(fd);
}
END_TEST

START_TEST(test_get_interface_description)
{
	static const char *const files[] = { "io.rdmamemd", "org.varlink.service" };
	int fd = test_connect(td.socket);

	for (size_t k = 0; k < ELEMENTSOF(files); k++) {
		char call[256], path[512];
		cJSON *reply;
		char *want;

		snprintf(call, sizeof(call),
			 "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
			 "\"parameters\":{\"interface\":\"%s\"}}",
			 files[k]);
		reply = test_call(fd, call);
		snprintf(path, sizeof(path), "%s/proto/%s.varlink", SRC_DIR, files[k]);
		want = test_read_file(path);
		ck_assert_str_eq(test_str(params_of(reply), "description"), want);
		free(want);
		cJSON_Delete(reply);
	}

	expect_error_naming(fd,
			    "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
			    "\"parameters\":{\"interface\":\"com.example.Nope\"}}",
			    VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", "com.example.Nope");
	close(fd);
}
END_TEST

START_TEST(test_ping_and_status)
{
	int fd = test_connect(td.socket), fd2 = test_connect(td.socket);
	cJSON *reply, *p;

	reply = test_call(fd,
			  "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"héllo\"}}");
	ck_assert_str_eq(test_str(params_of(reply), "data"), "héllo");
	cJSON_Delete(reply);

	reply = test_call(fd, "{\"method\":\"io.rdmamemd.GetStatus\"}");
	p = params_of(reply);
	ck_assert_str_eq(test_str(p, "version"), "0.1.0");
	ck_assert_int_eq(cJSON_GetObjectItem(p, "pid")->valueint, td.pid);
	ck_assert_int_eq(cJSON_GetObjectItem(p, "clients")->valueint, 2);
	ck_assert_int_eq(cJSON_GetObjectItem(p, "regions")->valueint, 0);
	ck_assert_int_eq(cJSON_GetObjectItem(p, "devices")->valueint, 0);
	ck_assert_str_eq(test_str(p, "pinned_bytes"), "0");
	ck_assert_str_eq(test_str(p, "socket"), td.socket);
	ck_assert_int_ge(atoll(test_str(p, "uptime_msec")), 0);
	cJSON_Delete(reply);
	close(fd);
	close(fd2);
}
END_TEST

/* The used and limit of quota in GetLimits' reply. */
static void expect_limit(const cJSON *reply, const char *quota, const char *used, const char *limit)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, cJSON_GetObjectItem(reply, "limits"))
		if (strcmp(test_str(item, "quota"), quota) == 0) {
			ck_assert_str_eq(test_str(item, "used"), used);
			ck_assert_str_eq(test_str(item, "limit"), limit);
			return;
		}
	ck_abort_msg("GetLimits lists no quota '%s'", quota);
}

/* GetLimits: the caller's uid's limits as configured, and what it uses. */
START_TEST(test_get_limits)
{
	static const char *const extra[] = {
		"--max-regions-per-uid",
		"7",
		"--max-access-tokens-per-uid",
		"5",
		"--max-connections-per-uid",
		"9",
		"--max-leases-per-uid",
		"11",
		"--max-shares-per-region",
		"3",
		NULL,
	};
	struct test_daemon tl;
	struct rdmamem_client *c, *c2;
	uint64_t region;
	char *text = NULL;
	cJSON *reply;
	int fd;

	test_daemon_start(&tl, extra);
	ck_assert_int_eq(rdmamem_client_connect(tl.socket, &c), 0);
	ck_assert_int_eq(rdmamem_client_connect(tl.socket, &c2), 0);
	ck_assert_int_eq(rdmamem_memfd_create("limits", 8192, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &region), 0);
	close(fd);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.CreateAccessToken", NULL, NULL, 0, NULL, NULL,
				      NULL),
			 0);

	/* The uid's, not the connection's: the other one sees the same. */
	ck_assert_int_eq(rdmamem_call(c2, "io.rdmamemd.GetLimits", NULL, NULL, 0, &text, NULL,
				      NULL),
			 0);
	reply = cJSON_Parse(text);
	ck_assert_ptr_nonnull(reply);
	ck_assert_int_eq(cJSON_GetObjectItem(reply, "uid")->valueint, (int)getuid());
	ck_assert_int_eq(cJSON_GetObjectItem(reply, "shares_per_region")->valueint, 3);
	expect_limit(reply, "regions", "1", "7");
	expect_limit(reply, "tokens", "1", "5");
	expect_limit(reply, "connections", "2", "9");
	expect_limit(reply, "leases", "0", "11");
	expect_limit(reply, "links", "0", "64");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(reply, "limits")), 9);
	cJSON_Delete(reply);
	free(text);

	/* It takes no parameters. */
	ck_assert_int_eq(rdmamem_call(c2, "io.rdmamemd.GetLimits", "{\"quota\":\"regions\"}", NULL,
				      0, NULL, NULL, NULL),
			 -EINVAL);
	rdmamem_client_close(c);
	rdmamem_client_close(c2);
	test_daemon_stop(&tl);
}
END_TEST

/* Many calls in one write come back in order, and oneway calls get nothing. */
START_TEST(test_pipelining_and_oneway)
{
	int fd = test_connect(td.socket);
	char *buf = malloc(200 * 128), *reply;
	size_t len = 0;

	for (int i = 0; i < 200; i++) {
		len += sprintf(buf + len,
			       "{\"method\":\"io.rdmamemd.Ping\",%s\"parameters\":"
			       "{\"data\":\"%d\"}}",
			       i % 2 ? "\"oneway\":true," : "", i);
		buf[len++] = '\0';
	}
	test_send_raw(fd, buf, len);
	for (int i = 0; i < 200; i += 2) {
		char want[64];

		ck_assert_int_gt(test_recv_msg(fd, &reply, 5000), 0);
		snprintf(want, sizeof(want), "{\"parameters\":{\"data\":\"%d\"}}", i);
		ck_assert_str_eq(reply, want);
		free(reply);
	}
	free(buf);
	close(fd);
}
END_TEST

static const struct {
	const char *name;
	const char *bytes;
	size_t len;            /* 0: strlen + 1 */
	const char *errors[2]; /* expected error names, in order */
} bad_frames[] = {
	{ "invalid JSON", "{\"method\":", 0, { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "not an object", "[\"io.rdmamemd.Ping\"]", 0, { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "no method", "{\"parameters\":{}}", 0, { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "empty message", "", 0, { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "raw NUL inside a string",
	  "{\"method\":\"io.rdm\0amemd.Ping\"}",
	  31,
	  { RDMAMEM_ERROR_INVALID_MESSAGE, RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "\\u0000 inside a string",
	  "{\"method\":\"io.rdmamemd.Ping\\u0000x\"}",
	  0,
	  { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "invalid UTF-8",
	  "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"\xc3\x28\"}}",
	  0,
	  { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "duplicate key",
	  "{\"method\":\"io.rdmamemd.Ping\",\"method\":\"io.rdmamemd.GetStatus\"}",
	  0,
	  { RDMAMEM_ERROR_INVALID_MESSAGE } },
	{ "unknown method",
	  "{\"method\":\"io.rdmamemd.Frobnicate\"}",
	  0,
	  { VARLINK_ERROR_METHOD_NOT_FOUND } },
	{ "unknown interface",
	  "{\"method\":\"com.example.Frobnicate\"}",
	  0,
	  { VARLINK_ERROR_INTERFACE_NOT_FOUND } },
	{ "unknown parameter",
	  "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"date\":\"x\"}}",
	  0,
	  { VARLINK_ERROR_INVALID_PARAMETER } },
	{ "parameter of the wrong type",
	  "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":1e999}}",
	  0,
	  { VARLINK_ERROR_INVALID_PARAMETER } },
	{ "upgrade",
	  "{\"method\":\"io.rdmamemd.Ping\",\"upgrade\":true}",
	  0,
	  { VARLINK_ERROR_INVALID_PARAMETER } },
};

/* Each bad frame gets its named error; the same connection and a second,
 * well-behaved client go on working. */
START_TEST(test_bad_frames)
{
	int good = test_connect(td.socket), bad = test_connect(td.socket);
	size_t len = bad_frames[_i].len ?: strlen(bad_frames[_i].bytes) + 1;
	cJSON *reply;

	test_send_raw(bad, bad_frames[_i].bytes, len);
	for (size_t k = 0; k < 2 && bad_frames[_i].errors[k]; k++) {
		char *text;

		ck_assert_msg(test_recv_msg(bad, &text, 5000) > 0, "%s: no reply",
			      bad_frames[_i].name);
		reply = cJSON_Parse(text);
		ck_assert_ptr_nonnull(reply);
		ck_assert_msg(test_reply_error(reply) && strcmp(test_reply_error(reply),
								bad_frames[_i].errors[k]) == 0,
			      "%s: got %s", bad_frames[_i].name, text);
		/* Every error says what is wrong. */
		if (strncmp(bad_frames[_i].errors[k], "io.rdmamemd.", 12) == 0)
			ck_assert_int_gt(strlen(test_str(params_of(reply), "message")), 0);
		free(text);
		cJSON_Delete(reply);
	}

	reply = test_call(bad, "{\"method\":\"io.rdmamemd.Ping\"}");
	ck_assert_ptr_null(test_reply_error(reply));
	cJSON_Delete(reply);
	reply = test_call(good, "{\"method\":\"io.rdmamemd.Ping\"}");
	ck_assert_ptr_null(test_reply_error(reply));
	cJSON_Delete(reply);
	test_assert_serving(td.socket);
	close(bad);
	close(good);
}
END_TEST

/* A Ping whose message is exactly n bytes long: its data "abc", then
 * whitespace (Ping echoes at most 16 KiB). */
static char *ping_of_size(size_t n)
{
	static const char head[] =
		"{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"abc\"}";
	static const char tail[] = "}";
	char *buf = malloc(n + 1);

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, head, sizeof(head) - 1);
	memset(buf + sizeof(head) - 1, ' ', n - (sizeof(head) - 1) - (sizeof(tail) - 1));
	memcpy(buf + n - (sizeof(tail) - 1), tail, sizeof(tail));
	return buf;
}

START_TEST(test_message_at_limit)
{
	int fd = test_connect(td.socket);
	char *msg = ping_of_size(VARLINK_BODY_MAX), *reply;
	ssize_t n;

	ck_assert_uint_eq(strlen(msg), VARLINK_BODY_MAX);
	test_send_msg(fd, msg, NULL, 0);
	n = test_recv_msg(fd, &reply, 20000);
	ck_assert_int_gt(n, 0);
	ck_assert_str_eq(reply, "{\"parameters\":{\"data\":\"abc\"}}");
	free(reply);
	free(msg);
	close(fd);
}
END_TEST

START_TEST(test_message_over_limit)
{
	int fd = test_connect(td.socket), good = test_connect(td.socket);
	char *msg = ping_of_size(VARLINK_BODY_MAX + 1), *reply;
	cJSON *r;

	test_send_msg(fd, msg, NULL, 0);
	ck_assert_int_gt(test_recv_msg(fd, &reply, 20000), 0);
	r = cJSON_Parse(reply);
	ck_assert_str_eq(test_reply_error(r), RDMAMEM_ERROR_MESSAGE_TOO_LARGE);
	cJSON_Delete(r);
	free(reply);
	/* Then the daemon hangs up. */
	ck_assert_int_eq(test_recv_msg(fd, &reply, 5000), 0);
	free(msg);
	close(fd);

	r = test_call(good, "{\"method\":\"io.rdmamemd.Ping\"}");
	ck_assert_ptr_null(test_reply_error(r));
	cJSON_Delete(r);
	close(good);
}
END_TEST

START_TEST(test_trickle)
{
	static const char msg[] =
		"{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"slow\"}}";
	int fd = test_connect(td.socket);
	char *reply;

	for (size_t i = 0; i < sizeof(msg); i++) {
		test_send_raw(fd, msg + i, 1);
		usleep(200);
	}
	ck_assert_int_gt(test_recv_msg(fd, &reply, 5000), 0);
	ck_assert_str_eq(reply, "{\"parameters\":{\"data\":\"slow\"}}");
	free(reply);
	close(fd);
}
END_TEST

/* fds on a method that takes none are refused and closed by the daemon. */
START_TEST(test_fds_refused_and_closed)
{
	int fd = test_connect(td.socket), before;
	int pass[VARLINK_FDS_MAX + 1];
	cJSON *reply;
	char *text;

	for (size_t i = 0; i < ELEMENTSOF(pass); i++)
		pass[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* A round trip first: the daemon has accepted us when it answers.
	 * Counted once settled: an earlier case's connection may still be
	 * closing (seen under valgrind, where the count then fell below). */
	test_assert_serving_fd(fd);
	before = test_settled_fds(td.pid);

	test_send_msg(fd, "{\"method\":\"io.rdmamemd.Ping\"}", pass, 1);
	ck_assert_int_gt(test_recv_msg(fd, &text, 5000), 0);
	reply = cJSON_Parse(text);
	ck_assert_str_eq(test_reply_error(reply), RDMAMEM_ERROR_TOO_MANY_FDS);
	cJSON_Delete(reply);
	free(text);

	test_send_msg(fd, "{\"method\":\"io.rdmamemd.Ping\"}", pass, ELEMENTSOF(pass));
	ck_assert_int_gt(test_recv_msg(fd, &text, 5000), 0);
	reply = cJSON_Parse(text);
	ck_assert_str_eq(test_reply_error(reply), RDMAMEM_ERROR_TOO_MANY_FDS);
	cJSON_Delete(reply);
	free(text);

	/* fds sent with half a message, then the client leaves. */
	test_send_msg(fd, "{\"method\":", pass, 3);
	close_many(pass, ELEMENTSOF(pass));
	close(fd);

	for (int i = 0; i < 200 && test_count_fds(td.pid) != before - 1; i++)
		usleep(10000);
	/* before counted the connection itself. */
	ck_assert_int_eq(test_count_fds(td.pid), before - 1);
}
END_TEST

START_TEST(test_eof_answers_pending_calls)
{
	int fd = test_connect(td.socket);
	char *reply;

	test_send_raw(fd, "{\"method\":\"io.rdmamemd.Ping\"}\0{\"method\":\"io.rdmamemd.Ping\"}",
		      60);
	shutdown(fd, SHUT_WR);
	ck_assert_int_gt(test_recv_msg(fd, &reply, 5000), 0);
	free(reply);
	ck_assert_int_gt(test_recv_msg(fd, &reply, 5000), 0);
	free(reply);
	ck_assert_int_eq(test_recv_msg(fd, &reply, 5000), 0);
	close(fd);
}
END_TEST

Suite *daemon_suite(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_get_info);
	tcase_add_test(tc, test_null_parameters);
	tcase_add_test(tc, test_get_interface_description);
	tcase_add_test(tc, test_ping_and_status);
	tcase_add_test(tc, test_get_limits);
	tcase_add_test(tc, test_pipelining_and_oneway);
	tcase_add_test(tc, test_trickle);
	tcase_add_test(tc, test_eof_answers_pending_calls);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_bad_frames, 0, ELEMENTSOF(bad_frames));
	tcase_add_test(tc, test_fds_refused_and_closed);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_message_at_limit);
	tcase_add_test(tc, test_message_over_limit);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}
