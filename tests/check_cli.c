/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl against a live daemon, in text and JSON. */
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

static struct test_daemon td;

static void setup(void)
{
	test_daemon_start(&td, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

START_TEST(test_status_text)
{
	const char *argv[] = { CTL_BIN, "--socket", td.socket, "status", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_msg(strncmp(out, "rdmamemd 0.1.0 (pid ", 20) == 0, "stdout: %s", out);
	ck_assert_ptr_nonnull(strstr(out, td.socket));
	ck_assert_ptr_nonnull(strstr(out, "clients:"));
	ck_assert_ptr_nonnull(strstr(out, "regions:"));
	ck_assert_ptr_nonnull(strstr(out, "pinned:"));
	ck_assert_ptr_nonnull(strstr(out, "devices:"));
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
}
END_TEST

START_TEST(test_status_json)
{
	const char *argv[] = { CTL_BIN, "--json", "-s", td.socket, "status", NULL };
	char *out, *err;
	cJSON *root;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	root = cJSON_Parse(out);
	ck_assert_msg(root, "not JSON: %s", out);
	ck_assert_str_eq(cJSON_GetObjectItem(root, "version")->valuestring, "0.1.0");
	ck_assert_int_eq(cJSON_GetObjectItem(root, "pid")->valueint, td.pid);
	ck_assert_int_eq(cJSON_GetObjectItem(root, "clients")->valueint, 1);
	cJSON_Delete(root);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_ping)
{
	const char *argv[] = { CTL_BIN, "-s", td.socket, "ping", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "answers"));
	free(out);
	free(err);
}
END_TEST

START_TEST(test_not_running)
{
	const char *argv[] = { CTL_BIN, "--socket", "/nonexistent/x.sock", "status", NULL };
	const char *argv_default[] = { CTL_BIN, "status", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 1);
	ck_assert_str_eq(out, "");
	/* One line that names the socket and the likely cause. */
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.sock"));
	ck_assert_ptr_nonnull(strstr(err, "is the daemon running?"));
	ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
	free(out);
	free(err);

	setenv("RDMAMEM_SOCKET", "/nonexistent/y.sock", 1);
	ck_assert_int_eq(test_run(argv_default, &out, &err), 1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/y.sock"));
	unsetenv("RDMAMEM_SOCKET");
	free(out);
	free(err);
}
END_TEST

START_TEST(test_usage_errors)
{
	const char *unknown[] = { CTL_BIN, "-s", td.socket, "frobnicate", NULL };
	const char *help[] = { CTL_BIN, "--help", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(unknown, &out, &err), 2);
	ck_assert_ptr_nonnull(strstr(err, "unknown command"));
	free(out);
	free(err);
	ck_assert_int_eq(test_run(help, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "status"));
	free(out);
	free(err);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_status_text);
	tcase_add_test(tc, test_status_json);
	tcase_add_test(tc, test_ping);
	tcase_add_test(tc, test_not_running);
	tcase_add_test(tc, test_usage_errors);
	suite_add_tcase(s, tc);
	return s;
}
