/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl against a live daemon, in text and JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/*
 * Every command against a live daemon with one region and a second client:
 * the text names what the command is about, --json prints one object that
 * holds the same. region ID and regions in detail: the regions suite;
 * devices with a device: the rdma suite.
 */
static const struct {
	const char *verb;
	const char *text; /* in the text output */
	const char *key;  /* in the JSON object */
} verbs[] = {
	{ "status", "regions:       1", "regions" },  { "regions", "1 regions", "regions" },
	{ "region", "4096 bytes", "region" },         { "devices", "No RDMA devices", "devices" },
	{ "connections", "STATE", "connections" },    { "peers", "No remote daemons", "peers" },
	{ "gpus", "CUDA driver:", "driver" },         { "clients", "(this)", "clients" },
	{ "stats", "io.rdmamemd.Register", "calls" }, { "limits", "pinned_bytes", "limits" },
	{ "doctor", "locked memory", "checks" },      { "ping", "answers", NULL },
};

START_TEST(test_every_command)
{
	struct rdmamem_client *c;
	uint64_t region;
	char id[32];
	const char *text[] = { CTL_BIN, "-s", td.socket, verbs[_i].verb, id, NULL };
	const char *json[] = { CTL_BIN, "-s", td.socket, "--json", verbs[_i].verb, id, NULL };
	char *out, *err;
	cJSON *root;
	int fd, rc;

	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);
	ck_assert_int_eq(rdmamem_memfd_create("cli", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &region), 0);
	snprintf(id, sizeof(id), "%" PRIu64, region);
	if (strcmp(verbs[_i].verb, "region") != 0)
		text[4] = json[5] = NULL;

	rc = test_run(text, &out, &err);
	/* doctor fails when a check fails (a user without CAP_IPC_LOCK and
	 * a low memlock limit, say), and its exit status says so. */
	ck_assert_int_eq(rc, strncmp(out, "FAIL", 4) == 0 || strstr(out, "\nFAIL") ? 1 : 0);
	ck_assert_msg(strstr(out, verbs[_i].text), "%s: '%s' not in:\n%s", verbs[_i].verb,
		      verbs[_i].text, out);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);

	ck_assert_int_eq(test_run(json, &out, &err), rc);
	root = cJSON_Parse(out);
	ck_assert_msg(cJSON_IsObject(root), "%s --json: not a JSON object: %s", verbs[_i].verb,
		      out);
	ck_assert_msg(!verbs[_i].key || cJSON_GetObjectItem(root, verbs[_i].key),
		      "%s --json: no '%s' in %s", verbs[_i].verb, verbs[_i].key, out);
	ck_assert_str_eq(err, "");
	cJSON_Delete(root);
	free(out);
	free(err);

	rdmamem_client_close(c);
	close(fd);
}
END_TEST

/* The daemon's fd limit starts low, with room above it. */
static void low_soft_fd_limit(void)
{
	struct rlimit rl = { .rlim_cur = 200, .rlim_max = 3000 };

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		_exit(96);
}

/* Starts a daemon under the low soft limit; its doctor's fd line and the
 * fd_limit of GetStatus. */
static char *doctor_fd_line(const char *const *args, int *ret_limit)
{
	struct test_daemon d;
	const char *doctor[] = { CTL_BIN, "-s", d.socket, "doctor", NULL };
	char *out, *err, *line, *nl;
	cJSON *st;
	int fd;

	test_daemon_child_setup = low_soft_fd_limit;
	test_daemon_start(&d, args);
	test_daemon_child_setup = NULL;
	fd = test_connect(d.socket);
	st = test_call(fd, "{\"method\":\"io.rdmamemd.GetStatus\"}");
	*ret_limit =
		cJSON_GetObjectItem(cJSON_GetObjectItem(st, "parameters"), "fd_limit")->valueint;
	cJSON_Delete(st);
	close(fd);
	test_run(doctor, &out, &err);
	line = strstr(out, "file descriptors");
	ck_assert_msg(line, "no fd check in:\n%s", out);
	/* From the status column to the end of the line. */
	while (line > out && line[-1] != '\n')
		line--;
	nl = strchr(line, '\n');
	line = strndup(line, nl ? (size_t)(nl - line) : strlen(line));
	free(out);
	free(err);
	test_daemon_stop(&d);
	return line;
}

/* The daemon raises its soft fd limit to the hard one, reports it, and
 * doctor warns when one uid at its caps could need more. */
START_TEST(test_doctor_fd_limit)
{
	static const char *const small[] = { "--max-connections", "100", "--max-regions-per-uid",
					     "1000", NULL };
	char *line;
	int limit;

	if (getenv("RDMAMEM_TEST_DAEMON_WRAPPER")) {
		/* valgrind keeps RLIMIT_NOFILE for itself: it reserves fds
		 * above what it lets the program see and raise. */
		printf("SKIP test_doctor_fd_limit: the daemon runs under "
		       "RDMAMEM_TEST_DAEMON_WRAPPER, which owns its fd limit\n");
		return;
	}
	line = doctor_fd_line(small, &limit);
	ck_assert_int_eq(limit, 3000);
	ck_assert_msg(strncmp(line, "PASS", 4) == 0 && strstr(line, "limit 3000"), "%s", line);
	free(line);
	/* The defaults: 4096 connections and 16384 regions per uid. */
	line = doctor_fd_line(NULL, &limit);
	ck_assert_int_eq(limit, 3000);
	ck_assert_msg(strncmp(line, "WARN", 4) == 0 && strstr(line, "limit 3000"), "%s", line);
	free(line);
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
	tcase_add_loop_test(tc, test_every_command, 0, ELEMENTSOF(verbs));
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_doctor_fd_limit);
	suite_add_tcase(s, tc);
	return s;
}
