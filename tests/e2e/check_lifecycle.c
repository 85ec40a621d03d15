/* SPDX-License-Identifier: BSD-3-Clause */
/* Start, stop, sockets, systemd notification and activation, limits. */
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
#include "tests/testlib.h"

START_TEST(test_notify_and_clean_exit)
{
	struct test_daemon td;
	int fd;
	char *reply;

	test_daemon_start(&td, NULL);
	ck_assert(test_notify_wait(&td, "STATUS=Serving", 5000));
	fd = test_connect(td.socket);
	test_assert_serving(td.socket);

	/* SIGTERM with a client connected: it is told by EOF, the daemon
	 * says STOPPING=1, exits 0 and removes its socket. */
	kill(td.pid, SIGTERM);
	ck_assert(test_notify_wait(&td, "STOPPING=1", 5000));
	ck_assert_int_eq(test_recv_msg(fd, &reply, 5000), 0);
	close(fd);
	test_daemon_wait_exit(&td, false);
}
END_TEST

static void bind_dead_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* Closed without unlink: what a crashed daemon leaves. */
	close(fd);
}

START_TEST(test_stale_socket_removed)
{
	char dir[] = "/tmp/rdmamemd-stale.XXXXXX", path[128];
	const char *args[] = { DAEMON_BIN, "--socket", path, NULL };
	struct test_daemon td;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	bind_dead_socket(path);
	test_daemon_start_argv(&td, args);
	test_assert_serving(path);
	/* Stop checks that this socket, not the default one, is gone. */
	strcpy(td.socket, path);
	test_daemon_stop(&td);
	rmdir(dir);
}
END_TEST

START_TEST(test_refuses_live_socket_and_files)
{
	struct test_daemon td;
	const char *args[] = { DAEMON_BIN, "--socket", NULL, NULL };
	char path[128], *out, *err;

	test_daemon_start(&td, NULL);

	/* A second daemon on the same socket fails and leaves it alone. */
	args[2] = td.socket;
	ck_assert_int_eq(test_run(args, &out, &err), 1);
	ck_assert_msg(strstr(err, "Another daemon is listening"), "stderr: %s", err);
	free(out);
	free(err);
	test_assert_serving(td.socket);

	/* A regular file where the socket should go is not removed. */
	snprintf(path, sizeof(path), "%s/file", td.dir);
	close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	args[2] = path;
	ck_assert_int_eq(test_run(args, &out, &err), 1);
	ck_assert_msg(strstr(err, "is not a socket"), "stderr: %s", err);
	ck_assert_int_eq(access(path, F_OK), 0);
	unlink(path);
	free(out);
	free(err);

	test_daemon_stop(&td);
}
END_TEST

START_TEST(test_socket_mode)
{
	struct test_daemon td;
	const char *extra[] = { "--socket-mode", "0600", NULL };
	struct stat st;

	test_daemon_start(&td, extra);
	ck_assert_int_eq(stat(td.socket, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	test_daemon_stop(&td);

	test_daemon_start(&td, NULL);
	ck_assert_int_eq(stat(td.socket, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);
	test_daemon_stop(&td);
}
END_TEST

/* systemd-socket-activate passes a listening socket: the daemon serves it
 * and leaves the path to its owner. */
START_TEST(test_socket_activation)
{
	static const char *const tool = "/usr/bin/systemd-socket-activate";
	const char *args[] = { tool,       "--listen=@SOCKET@",
			       "-E",       "NOTIFY_SOCKET=@NOTIFY@",
			       DAEMON_BIN, NULL };
	struct test_daemon td;
	cJSON *reply;
	int fd;

	ck_assert_msg(access(tool, X_OK) == 0, "%s is missing (package systemd)", tool);
	test_daemon_spawn(&td, args);
	/* The tool starts the daemon on the first connection. */
	for (int i = 0; i < 500 && access(td.socket, F_OK) < 0; i++)
		usleep(10000);
	fd = test_connect(td.socket);
	test_daemon_wait_ready(&td);

	reply = test_call(fd, "{\"method\":\"io.rdmamemd.GetStatus\"}");
	ck_assert_ptr_null(test_reply_error(reply));
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "parameters"), "socket")
				 ->valuestring,
			 td.socket);
	cJSON_Delete(reply);
	test_assert_serving(td.socket);
	close(fd);

	kill(td.pid, SIGTERM);
	/* The path belongs to whoever made the socket: left in place. */
	test_daemon_wait_exit(&td, true);
}
END_TEST

START_TEST(test_connection_limits)
{
	struct test_daemon td;
	const char *extra[] = { "--max-connections-per-uid", "2", NULL };
	int a, b, c;
	cJSON *reply;
	char *text;

	test_daemon_start(&td, extra);
	a = test_connect(td.socket);
	b = test_connect(td.socket);
	test_assert_serving_fd(a);
	test_assert_serving_fd(b);

	c = test_connect(td.socket);
	reply = test_call(c, "{\"method\":\"io.rdmamemd.Ping\"}");
	ck_assert_str_eq(test_reply_error(reply), RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "parameters"),
							 "message")
					     ->valuestring,
				     "limit"));
	cJSON_Delete(reply);
	ck_assert_int_eq(test_recv_msg(c, &text, 5000), 0);
	close(c);

	/* The others are unaffected, and a freed slot can be used again. */
	test_assert_serving_fd(a);
	close(b);
	usleep(50000);
	c = test_connect(td.socket);
	test_assert_serving_fd(c);
	close(c);
	close(a);
	test_daemon_stop(&td);
}
END_TEST

START_TEST(test_bad_arguments)
{
	const char *const cases[][4] = {
		{ DAEMON_BIN, "--socket-mode", "660", NULL },
		{ DAEMON_BIN, "--max-connections", "0", NULL },
		{ DAEMON_BIN, "--log-level", "loud", NULL },
		{ DAEMON_BIN, "--bogus", NULL, NULL },
		{ DAEMON_BIN, "extra", NULL, NULL },
	};
	char *out, *err;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		ck_assert_int_eq(test_run(cases[i], &out, &err), 1);
		ck_assert_int_gt(strlen(err), 0);
		free(out);
		free(err);
	}
	{
		const char *v[] = { DAEMON_BIN, "--version", NULL };

		ck_assert_int_eq(test_run(v, &out, &err), 0);
		ck_assert_str_eq(out, "rdmamemd 0.1.0\n");
		free(out);
		free(err);
	}
}
END_TEST

Suite *lifecycle_suite(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_notify_and_clean_exit);
	tcase_add_test(tc, test_stale_socket_removed);
	tcase_add_test(tc, test_refuses_live_socket_and_files);
	tcase_add_test(tc, test_socket_mode);
	tcase_add_test(tc, test_socket_activation);
	tcase_add_test(tc, test_bad_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_connection_limits);
	suite_add_tcase(s, tc);
	return s;
}
