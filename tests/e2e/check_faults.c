/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's own faults: SIGTERM with work in flight (copies on the pool,
 * registrations, lock waits, calls queued behind them, half-sent messages),
 * SIGKILL under clients that are waiting for answers, and a restart that
 * clients recover from by reconnecting and registering again.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

static struct test_daemon td;
static char log_path[128];

static void start_logging(void)
{
	static const char *const extra[] = { "--log-level", "debug", "--socket-mode", "0666",
					     NULL };

	snprintf(log_path, sizeof(log_path), "/tmp/rdmamemd-faults.%d.log", (int)getpid());
	test_daemon_log_path = log_path;
	test_daemon_start(&td, extra);
	test_daemon_log_path = NULL;
}

static uint64_t register_fd(int sock, int fd)
{
	uint64_t id;
	char *text;
	cJSON *r;

	test_send_msg(sock, "{\"method\":\"io.rdmamemd.Register\",\"parameters\":{\"fd\":0}}", &fd,
		      1);
	ck_assert_int_gt(test_recv_msg(sock, &text, 10000), 0);
	r = cJSON_Parse(text);
	ck_assert_ptr_null(test_reply_error(r));
	ck_assert_int_eq(json_parse_u64(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "parameters"),
							    "region")
						->valuestring,
					&id),
			 0);
	cJSON_Delete(r);
	free(text);
	return id;
}

/* A count from GetRegion: leases.waiting (leases queued) or lock.waiters
 * (requests queued on the region's lock, leases and transfers alike). */
static int region_count(int sock, uint64_t region, const char *object, const char *field)
{
	char msg[128];
	cJSON *r;
	int n;

	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.GetRegion\",\"parameters\":{\"region\":\"%llu\"}}",
		 (unsigned long long)region);
	r = test_call(sock, msg);
	n = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "parameters"), object),
				field)
		    ->valueint;
	cJSON_Delete(r);
	return n;
}

static int region_waiting(int sock, uint64_t region)
{
	return region_count(sock, region, "leases", "waiting");
}

static int region_lock_waiters(int sock, uint64_t region)
{
	return region_count(sock, region, "lock", "waiters");
}

/* Reads everything a connection still gets: each message must be a valid
 * reply; then the connection must end. Returns the number of replies and
 * the error names seen (comma-separated) in errors. */
static int read_to_eof(int fd, char *errors, size_t size)
{
	int n = 0;

	errors[0] = '\0';
	for (;;) {
		char *text;
		ssize_t len = test_recv_msg(fd, &text, 20000);
		cJSON *r;

		if (len == 0 || len == -ECONNRESET)
			return n;
		ck_assert_msg(len > 0, "neither an answer nor EOF (%zd)", len);
		r = cJSON_Parse(text);
		ck_assert_msg(r, "not JSON: %s", text);
		ck_assert(cJSON_IsObject(cJSON_GetObjectItem(r, "parameters")));
		if (test_reply_error(r))
			snprintf(errors + strlen(errors), size - strlen(errors), "%s,",
				 test_reply_error(r));
		cJSON_Delete(r);
		free(text);
		n++;
	}
}

/* Ids of the regions the log says were made, and of those it says were
 * released: every region made must have gone before the daemon exited. */
static void assert_log_released_everything(char *log, unsigned at_least)
{
	char *all = strdup(log);
	unsigned made = 0;

	ck_assert_ptr_nonnull(all);
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		const char *p = strstr(line, "Region ");
		unsigned long long id;
		char needle[64];

		/* "Region N: S bytes of ..." is the creation line. */
		if (!p || !strstr(p, " bytes of ") || sscanf(p, "Region %llu:", &id) != 1)
			continue;
		made++;
		snprintf(needle, sizeof(needle), "Region %llu released", id);
		ck_assert_msg(strstr(all, needle), "region %llu was never released", id);
	}
	free(all);
	ck_assert_uint_ge(made, at_least);
}

/*
 * SIGTERM with work in flight: a 64 MiB copy and a lock wait queued behind
 * another client's leases, a registration queued behind that lock wait,
 * regions just registered, an idle client and one half-way through a
 * message. The idle lease holder is closed first, which lets the copy run
 * (on the pool) and the lock be granted: both are answered; the queued
 * registration is refused with ShuttingDown or cut off; everyone else gets
 * EOF; the daemon exits 0 and its log shows every region released.
 */
START_TEST(test_sigterm_with_work_in_flight)
{
	struct rdmamem_client *holder = NULL;
	int copier, waiter, registrar, idle, partial, status_sock, big, small[3];
	uint64_t from, to, locked, lease;
	char msg[512], errors[512], *log;

	start_logging();
	ck_assert_int_eq(rdmamem_client_connect(td.socket, &holder), 0);
	copier = test_connect(td.socket);
	waiter = test_connect(td.socket);
	registrar = test_connect(td.socket);
	idle = test_connect(td.socket);
	partial = test_connect(td.socket);
	status_sock = test_connect(td.socket);

	ck_assert_int_eq(rdmamem_memfd_create("big", 64 << 20, &big, NULL), 0);
	from = register_fd(copier, big);
	to = register_fd(copier, big);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(rdmamem_memfd_create("small", 1 << 20, &small[i], NULL), 0);
		register_fd(registrar, small[i]);
	}
	ck_assert_int_eq(rdmamem_register(holder, small[0], 0, 0, &locked), 0);
	ck_assert_int_eq(rdmamem_lock(holder, locked, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease), 0);
	ck_assert_int_eq(rdmamem_lock(holder, to, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease), 0);

	/* Behind the holder: a copy into 'to', a lock on 'locked' and a
	 * registration after that lock. */
	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{\"region\":\"%llu\"},"
		 "\"to\":{\"region\":\"%llu\"},\"length\":\"67108864\"}}",
		 (unsigned long long)from, (unsigned long long)to);
	test_send_msg(copier, msg, NULL, 0);
	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"%llu\",\"mode\":"
		 "\"shared\"}}",
		 (unsigned long long)locked);
	test_send_msg(waiter, msg, NULL, 0);
	test_send_msg(waiter, "{\"method\":\"io.rdmamemd.Register\",\"parameters\":{\"fd\":0}}",
		      &small[1], 1);
	for (int i = 0; i < 1000 && (region_waiting(status_sock, locked) != 1 ||
				     region_lock_waiters(status_sock, to) != 1);
	     i++)
		usleep(10000);
	ck_assert_int_eq(region_waiting(status_sock, locked), 1);
	ck_assert_int_eq(region_lock_waiters(status_sock, to), 1);
	close(status_sock);
	test_send_raw(partial, "{\"method\":\"io.rdm", 17);

	ck_assert_int_eq(kill(td.pid, SIGTERM), 0);

	/* The copy ran once the holder was gone, and is answered. */
	ck_assert_int_eq(read_to_eof(copier, errors, sizeof(errors)), 1);
	ck_assert_str_eq(errors, "");
	/* The lock is granted; the registration behind it, if the daemon had
	 * read it, is refused. */
	{
		int n = read_to_eof(waiter, errors, sizeof(errors));

		ck_assert_int_ge(n, 1);
		ck_assert_str_eq(errors, n == 2 ? RDMAMEM_ERROR_SHUTTING_DOWN "," : "");
	}
	ck_assert_int_eq(read_to_eof(registrar, errors, sizeof(errors)), 0);
	ck_assert_int_eq(read_to_eof(idle, errors, sizeof(errors)), 0);
	ck_assert_int_eq(read_to_eof(partial, errors, sizeof(errors)), 0);
	ck_assert_int_eq(rdmamem_ping(holder), -ECONNRESET);

	test_daemon_wait_exit(&td, false);
	log = test_read_file(log_path);
	ck_assert_ptr_nonnull(strstr(log, "Stopped"));
	/* from, to, three small ones and the holder's. */
	assert_log_released_everything(log, 6);
	free(log);
	unlink(log_path);

	rdmamem_client_close(holder);
	close_many((int[]){ copier, waiter, registrar, idle, partial, big, small[0], small[1],
			    small[2] },
		   9);
}
END_TEST

/*
 * Regression (fuzz-daemon): two clients each hold a lease and wait for the
 * other's, so neither call can finish and the shutdown's grace period runs
 * out. Closing the first connection grants the second its lock; its answer
 * closes it too, while the daemon's walk over its connections stood on it:
 * the walk went round forever and the daemon never exited.
 */
static void lock_raw(int sock, uint64_t region, bool wait_for_answer)
{
	char msg[256];
	cJSON *r;

	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"%llu\",\"mode\":"
		 "\"exclusive\"}}",
		 (unsigned long long)region);
	if (!wait_for_answer) {
		test_send_msg(sock, msg, NULL, 0);
		return;
	}
	r = test_call(sock, msg);
	ck_assert_ptr_null(test_reply_error(r));
	cJSON_Delete(r);
}

START_TEST(test_sigterm_with_clients_deadlocked)
{
	int fd, x, y, status_sock;
	uint64_t rx, ry;
	char errors[256];

	start_logging();
	x = test_connect(td.socket);
	y = test_connect(td.socket);
	status_sock = test_connect(td.socket);
	ck_assert_int_eq(rdmamem_memfd_create("x", 4096, &fd, NULL), 0);
	rx = register_fd(x, fd);
	ry = register_fd(y, fd);
	lock_raw(x, rx, true);
	lock_raw(y, ry, true);
	/* Each waits for the other's lease. */
	lock_raw(x, ry, false);
	lock_raw(y, rx, false);
	for (int i = 0; i < 1000 && (region_waiting(status_sock, rx) != 1 ||
				     region_waiting(status_sock, ry) != 1);
	     i++)
		usleep(10000);
	ck_assert_int_eq(region_waiting(status_sock, rx), 1);
	ck_assert_int_eq(region_waiting(status_sock, ry), 1);
	close(status_sock);

	ck_assert_int_eq(kill(td.pid, SIGTERM), 0);
	/* After the grace period (5 s) both hear an answer or EOF... */
	ck_assert_int_le(read_to_eof(x, errors, sizeof(errors)), 1);
	ck_assert_int_le(read_to_eof(y, errors, sizeof(errors)), 1);
	/* ...and the daemon exits 0. */
	test_daemon_wait_exit(&td, false);
	unlink(log_path);
	close(x);
	close(y);
	close(fd);
}
END_TEST

/* In a child: waits for a lock that will not come before the daemon dies;
 * writes the result and the library's message to out. */
static void blocked_in_lock(const char *socket, uint64_t region, int out)
{
	struct rdmamem_client *c = NULL;
	char report[512];
	uint64_t lease;
	int r;

	if (rdmamem_client_connect(socket, &c) < 0)
		_exit(1);
	r = rdmamem_lock(c, region, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease);
	snprintf(report, sizeof(report), "%d %s", r, rdmamem_client_error_message(c) ?: "");
	/* The next call must not try again. */
	snprintf(report + strlen(report), sizeof(report) - strlen(report), "|%d", rdmamem_ping(c));
	if (write(out, report, strlen(report) + 1) < 0)
		_exit(2);
	_exit(0);
}

/* In a child: writes 8 MiB at a time until the daemon goes away, into the
 * second half of the memfd, away from the bytes the test checks after the
 * restart (the writes race the kill). */
static void busy_writing(const char *socket, uint64_t region, int out, int ready)
{
	struct rdmamem_client *c = NULL;
	char *buf = calloc(1, 8 << 20), report[512];
	int r;

	if (rdmamem_client_connect(socket, &c) < 0 || !buf)
		_exit(1);
	if (write(ready, "x", 1) != 1)
		_exit(3);
	do
		r = rdmamem_write(c, region, 8 << 20, buf, 8 << 20, RDMAMEM_LOCK_DISJOINT, 0);
	while (r == 0);
	snprintf(report, sizeof(report), "%d %s", r, rdmamem_client_error_message(c) ?: "");
	if (write(out, report, strlen(report) + 1) < 0)
		_exit(2);
	_exit(0);
}

static char *read_report(int fd)
{
	static char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	return buf;
}

/*
 * SIGKILL: a client blocked in a lock wait and one in the middle of large
 * writes both get -ECONNRESET with a message that says the daemon went
 * away; after a restart on the same socket a client reconnects and
 * registers its memfd again, whose contents it kept.
 */
START_TEST(test_sigkill_then_restart)
{
	const char *args[] = { DAEMON_BIN, "--socket", NULL, NULL };
	struct rdmamem_client *owner = NULL;
	struct test_daemon old;
	int lock_out[2], write_out[2], ready[2], mfd, status;
	uint64_t region, big, lease;
	pid_t locker, writer;
	char path[128], *report, x;
	void *addr;

	test_daemon_start(&td, NULL);
	strcpy(path, td.socket);
	ck_assert_int_eq(rdmamem_client_connect(path, &owner), 0);
	ck_assert_int_eq(rdmamem_memfd_create("kept", 16 << 20, &mfd, &addr), 0);
	memcpy(addr, "survives", 8);
	ck_assert_int_eq(rdmamem_register(owner, mfd, 0, 4096, &region), 0);
	ck_assert_int_eq(rdmamem_register(owner, mfd, 0, 0, &big), 0);
	ck_assert_int_eq(rdmamem_lock(owner, region, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease), 0);

	ck_assert_int_eq(pipe2(lock_out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(write_out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	locker = fork();
	ck_assert_int_ge(locker, 0);
	if (locker == 0)
		blocked_in_lock(path, region, lock_out[1]);
	writer = fork();
	ck_assert_int_ge(writer, 0);
	if (writer == 0)
		busy_writing(path, big, write_out[1], ready[1]);
	close(lock_out[1]);
	close(write_out[1]);
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &x, 1), 1);
	close(ready[0]);
	{
		char params[64], *reply = NULL;

		snprintf(params, sizeof(params), "{\"region\":\"%llu\"}",
			 (unsigned long long)region);
		for (int i = 0; i < 500; i++) {
			ck_assert_int_eq(rdmamem_call(owner, "io.rdmamemd.GetRegion", params, NULL,
						      0, &reply, NULL, NULL),
					 0);
			if (strstr(reply, "\"waiting\":1"))
				break;
			free(reply);
			reply = NULL;
			usleep(10000);
		}
		ck_assert_ptr_nonnull(reply);
		ck_assert_ptr_nonnull(strstr(reply, "\"waiting\":1"));
		free(reply);
	}

	ck_assert_int_eq(kill(td.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(td.pid, &status, 0), td.pid);

	report = read_report(lock_out[0]);
	ck_assert_msg(strncmp(report, "-104 ", 5) == 0, "lock: %s", report); /* -ECONNRESET */
	ck_assert_ptr_nonnull(strstr(report, "closed the connection"));
	ck_assert_ptr_nonnull(strstr(report, "register again"));
	/* Later calls on that connection say it is gone. */
	ck_assert_msg(strstr(report, "|-107"), "then: %s", report); /* -ENOTCONN */
	report = read_report(write_out[0]);
	ck_assert_msg(strncmp(report, "-104 ", 5) == 0, "write: %s", report);
	ck_assert_ptr_nonnull(strstr(report, "closed the connection"));
	ck_assert_int_eq(test_wait(locker, 10000), 0);
	ck_assert_int_eq(test_wait(writer, 10000), 0);
	close(lock_out[0]);
	close(write_out[0]);
	ck_assert_int_eq(rdmamem_ping(owner), -ECONNRESET);
	owner = rdmamem_client_close(owner);

	/* Restart: reconnect, register the memfd again; the memory is the
	 * client's, so its contents are all there. Ids start anew. */
	args[2] = path;
	old = td;
	test_daemon_start_argv(&td, args);
	strcpy(td.socket, path);
	{
		char buf[8];

		ck_assert_int_eq(rdmamem_client_connect(path, &owner), 0);
		ck_assert_int_eq(rdmamem_register(owner, mfd, 0, 4096, &region), 0);
		ck_assert_uint_eq(region, 1);
		ck_assert_int_eq(rdmamem_read(owner, region, 0, buf, 8, 0), 0);
		ck_assert_int_eq(memcmp(buf, "survives", 8), 0);
		ck_assert_int_eq(rdmamem_lock(owner, region, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease), 0);
		rdmamem_client_close(owner);
	}
	test_daemon_stop(&td);
	close(old.notify_fd);
	unlink(old.notify);
	rmdir(old.dir);
	munmap(addr, 16 << 20);
	close(mfd);
}
END_TEST

Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("signals");

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_sigterm_with_work_in_flight);
	tcase_add_test(tc, test_sigkill_then_restart);
	tcase_add_test(tc, test_sigterm_with_clients_deadlocked);
	suite_add_tcase(s, tc);
	return s;
}
