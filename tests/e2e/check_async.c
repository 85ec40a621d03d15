/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librdmamem's asynchronous API against a real daemon: pipelining, order,
 * waits on one connection beside calls on another driven by the same
 * loop, cancel, per-call timeouts, a daemon killed under pending calls,
 * fds sent; and against a scripted server (the daemon sends no fds and, on
 * a host without RDMA, no stream of several replies): a "more" stream,
 * fds received, cancel from a callback.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdmamem.h"
#include "tests/testlib.h"
#include "util/sockio.h"

static struct test_daemon td;

static void setup(void)
{
	test_daemon_start(&td, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

/* What a case's callbacks saw, in the order they ran. */
#define LOG_MAX 64
struct seen {
	char tag[32];
	int error;
	char *name;
	char *message;
	char *params;
	unsigned flags;
	int fd; /* the first fd received, taken */
};

static struct seen seen[LOG_MAX];
static unsigned n_seen;

static void seen_reset(void)
{
	for (unsigned i = 0; i < n_seen; i++) {
		free(seen[i].name);
		free(seen[i].message);
		free(seen[i].params);
		safe_close(seen[i].fd);
	}
	memset(seen, 0, sizeof(seen));
	n_seen = 0;
}

/* Records the reply under the tag userdata points to. */
static void record(struct rdmamem_client *c, struct rdmamem_call *call,
		   const struct rdmamem_reply *reply, void *userdata)
{
	struct seen *s;

	(void)c;
	(void)call;
	ck_assert_uint_lt(n_seen, LOG_MAX);
	s = &seen[n_seen++];
	snprintf(s->tag, sizeof(s->tag), "%s", (const char *)userdata);
	s->error = reply->error;
	s->name = reply->error_name ? strdup(reply->error_name) : NULL;
	s->message = reply->error_message ? strdup(reply->error_message) : NULL;
	s->params = reply->parameters ? strdup(reply->parameters) : NULL;
	s->flags = reply->flags;
	s->fd = -EBADF;
	if (reply->n_fds > 0) {
		s->fd = reply->fds[0];
		reply->fds[0] = -EBADF;
	}
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
}

/*
 * One loop over clients, as an event loop would run it: process each,
 * then poll their fds for their events until the nearest deadline (at
 * most 20 ms), until n_seen reaches want or timeout_ms passes. Returns
 * the last process() result of clients[0].
 */
static int run_until(struct rdmamem_client **clients, size_t n, unsigned want, int timeout_ms)
{
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000U;
	int last = 0;

	while (n_seen < want && now_usec() < end) {
		struct pollfd pfd[8];
		uint64_t t, wake = now_usec() + 20000;
		bool again = false;

		for (size_t i = 0; i < n; i++) {
			int r = rdmamem_client_process(clients[i]);

			if (i == 0)
				last = r;
			again |= r > 0;
			pfd[i] = (struct pollfd){
				.fd = rdmamem_client_get_fd(clients[i]),
				.events = (short)rdmamem_client_get_events(clients[i])
			};
			ck_assert_int_eq(rdmamem_client_get_timeout(clients[i], &t), 0);
			wake = t < wake ? t : wake;
		}
		if (again || n_seen >= want)
			continue;
		t = now_usec();
		poll(pfd, n, wake > t ? (int)((wake - t + 999) / 1000) : 0);
	}
	return last;
}

static void call(struct rdmamem_client *c, const char *method, const char *params, const char *tag,
		 struct rdmamem_call **ret)
{
	ck_assert_int_eq(rdmamem_call_async(c, method, params, NULL, 0, 0, record, (void *)tag,
					    ret),
			 0);
}

/* A region of c's with an exclusive lease held on it by c: returns the lease. */
static uint64_t locked_region(struct rdmamem_client *c, uint64_t *ret_region, int *ret_fd)
{
	uint64_t lease;

	ck_assert_int_eq(rdmamem_memfd_create("async", 4096, ret_fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, *ret_fd, 0, 0, ret_region), 0);
	ck_assert_int_eq(rdmamem_lock(c, *ret_region, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease), 0);
	return lease;
}

static char *lock_params(uint64_t region, int timeout_ms)
{
	char *p;

	ck_assert_int_ge(asprintf(&p,
				  "{\"region\":\"%llu\",\"mode\":\"exclusive\",\"timeout_ms\":%d}",
				  (unsigned long long)region, timeout_ms),
			 0);
	return p;
}

/* Many calls pipelined on one connection: each callback sees its own
 * reply, in the order the calls were made. */
START_TEST(test_pipelined_in_order)
{
	struct rdmamem_client *c = test_client(td.socket);
	static char tags[40][8];
	uint64_t t;

	seen_reset();
	for (unsigned i = 0; i < 40; i++) {
		char p[64];

		snprintf(tags[i], sizeof(tags[i]), "%u", i);
		snprintf(p, sizeof(p), "{\"data\":\"%u\"}", i);
		call(c, "io.rdmamemd.Ping", p, tags[i], NULL);
	}
	/* Nothing is written before the loop turns. */
	ck_assert_int_eq(rdmamem_client_get_events(c), POLLIN | POLLOUT);
	ck_assert_int_eq(rdmamem_client_get_timeout(c, &t), 0);
	ck_assert(t != UINT64_MAX && t > now_usec());
	run_until(&c, 1, 40, 10000);
	ck_assert_uint_eq(n_seen, 40);
	for (unsigned i = 0; i < 40; i++) {
		char p[64];

		snprintf(p, sizeof(p), "{\"data\":\"%u\"}", i);
		ck_assert_str_eq(seen[i].tag, tags[i]);
		ck_assert_int_eq(seen[i].error, 0);
		ck_assert_str_eq(seen[i].params, p);
		ck_assert_uint_eq(seen[i].flags, 0);
	}
	/* Idle: nothing to write, no deadline, nothing to do. */
	ck_assert_int_eq(rdmamem_client_get_events(c), POLLIN);
	ck_assert_int_eq(rdmamem_client_get_timeout(c, &t), 0);
	ck_assert(t == UINT64_MAX);
	ck_assert_int_eq(rdmamem_client_process(c), 0);

	/* A Varlink error reaches its callback, named, with its message. */
	seen_reset();
	call(c, "io.rdmamemd.Unregister", "{\"region\":\"999\"}", "bad", NULL);
	call(c, "io.rdmamemd.Ping", NULL, "after", NULL);
	run_until(&c, 1, 2, 10000);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_int_eq(seen[0].error, -ENOENT);
	ck_assert_str_eq(seen[0].name, "io.rdmamemd.NoSuchRegion");
	ck_assert_ptr_nonnull(seen[0].message);
	ck_assert_ptr_nonnull(strstr(seen[0].params, "\"message\""));
	ck_assert_int_eq(seen[1].error, 0);
	ck_assert_str_eq(seen[1].tag, "after");
	seen_reset();
	rdmamem_client_close(c);
}
END_TEST

/*
 * A Lock that waits in the daemon holds up what is queued behind it on the
 * same connection (Varlink answers in order) and nothing else: Pings on a
 * second connection driven by the same loop are answered meanwhile, and
 * the Ping behind the Lock comes right after it.
 */
START_TEST(test_lock_wait_beside_pings)
{
	struct rdmamem_client *owner = test_client(td.socket);
	struct rdmamem_client *clients[2] = { test_client(td.socket), test_client(td.socket) };
	_cleanup_free_ char *p = NULL;
	uint64_t region, lease;
	int fd;

	seen_reset();
	lease = locked_region(owner, &region, &fd);
	p = lock_params(region, 20000);
	call(clients[0], "io.rdmamemd.Lock", p, "lock", NULL);
	call(clients[0], "io.rdmamemd.Ping", NULL, "behind", NULL);
	for (unsigned i = 0; i < 5; i++)
		call(clients[1], "io.rdmamemd.Ping", NULL, "other", NULL);
	run_until(clients, 2, 5, 10000);
	ck_assert_uint_eq(n_seen, 5);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_str_eq(seen[i].tag, "other");
	/* The lock still waits; so does the Ping behind it. */
	run_until(clients, 2, 6, 200);
	ck_assert_uint_eq(n_seen, 5);

	ck_assert_int_eq(rdmamem_unlock(owner, lease), 0);
	run_until(clients, 2, 7, 10000);
	ck_assert_uint_eq(n_seen, 7);
	ck_assert_str_eq(seen[5].tag, "lock");
	ck_assert_int_eq(seen[5].error, 0);
	ck_assert_ptr_nonnull(strstr(seen[5].params, "\"lease\""));
	ck_assert_str_eq(seen[6].tag, "behind");
	seen_reset();
	close(fd);
	rdmamem_client_close(clients[0]);
	rdmamem_client_close(clients[1]);
	rdmamem_client_close(owner);
}
END_TEST

/*
 * Cancel: a call not yet written is never sent; one sent already has its
 * reply dropped, and the calls after it still get theirs.
 */
START_TEST(test_cancel)
{
	struct rdmamem_client *owner = test_client(td.socket);
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_call *never = NULL, *sent = NULL;
	_cleanup_free_ char *p = NULL;
	uint64_t region, lease;
	int fd;

	seen_reset();
	lease = locked_region(owner, &region, &fd);
	p = lock_params(region, 20000);
	call(c, "io.rdmamemd.Lock", p, "lock", NULL);
	call(c, "io.rdmamemd.Ping", "{\"data\":\"never\"}", "never", &never);
	ck_assert_str_eq(rdmamem_call_get_method(never), "io.rdmamemd.Ping");
	ck_assert_ptr_null(rdmamem_call_cancel(never));
	call(c, "io.rdmamemd.Ping", "{\"data\":\"sent\"}", "sent", &sent);
	call(c, "io.rdmamemd.Ping", "{\"data\":\"last\"}", "last", NULL);
	/* Everything is written (the Lock waits). */
	while (rdmamem_client_get_events(c) & POLLOUT)
		ck_assert_int_ge(rdmamem_client_process(c), 0);
	ck_assert_ptr_null(rdmamem_call_cancel(sent));
	ck_assert_ptr_null(rdmamem_call_cancel(NULL));

	ck_assert_int_eq(rdmamem_unlock(owner, lease), 0);
	run_until(&c, 1, 2, 10000);
	/* Nothing else comes. */
	run_until(&c, 1, 3, 200);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[0].tag, "lock");
	ck_assert_str_eq(seen[1].tag, "last");
	ck_assert_str_eq(seen[1].params, "{\"data\":\"last\"}");
	ck_assert_int_eq(rdmamem_client_process(c), 0);
	seen_reset();
	close(fd);
	rdmamem_client_close(c);
	rdmamem_client_close(owner);
}
END_TEST

/*
 * A call's own timeout: its callback gets -ETIMEDOUT with a message that
 * names the method, the connection goes on (the late answer is dropped)
 * and the daemon stays healthy.
 */
START_TEST(test_call_timeout)
{
	struct rdmamem_client *owner = test_client(td.socket);
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_call *lock = NULL;
	_cleanup_free_ char *p = NULL;
	uint64_t region, lease, t0, t;
	int fd;

	seen_reset();
	lease = locked_region(owner, &region, &fd);
	p = lock_params(region, 20000);
	t0 = now_usec();
	call(c, "io.rdmamemd.Lock", p, "lock", &lock);
	ck_assert_int_eq(rdmamem_call_set_timeout(lock, 300), 0);
	ck_assert_int_eq(rdmamem_client_get_timeout(c, &t), 0);
	ck_assert_uint_le(t, t0 + 400000);
	run_until(&c, 1, 1, 5000);
	ck_assert_uint_eq(n_seen, 1);
	ck_assert_uint_ge(now_usec() - t0, 300000);
	ck_assert_int_eq(seen[0].error, -ETIMEDOUT);
	ck_assert_ptr_null(seen[0].name);
	ck_assert_ptr_null(seen[0].params);
	ck_assert_ptr_nonnull(strstr(seen[0].message, "no answer to io.rdmamemd.Lock in 300 ms"));

	/* The connection goes on: the Ping behind the Lock is answered
	 * once the Lock is, and the Lock's late answer is nobody's. */
	call(c, "io.rdmamemd.Ping", "{\"data\":\"on\"}", "on", NULL);
	ck_assert_int_eq(rdmamem_unlock(owner, lease), 0);
	run_until(&c, 1, 2, 10000);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[1].tag, "on");
	ck_assert_int_eq(seen[1].error, 0);
	ck_assert_int_eq(rdmamem_ping(c), 0);
	test_assert_serving(td.socket);
	seen_reset();
	close(fd);
	rdmamem_client_close(c);
	rdmamem_client_close(owner);
}
END_TEST

/* fds sent with a call are the library's copies: the caller may close its
 * own at once. */
START_TEST(test_fds_sent)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *mem;
	int fd;

	seen_reset();
	ck_assert_int_eq(rdmamem_memfd_create("sent", 4096, &fd, (void **)&mem), 0);
	strcpy(mem, "through a copy");
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Register", "{\"fd\":0}", &fd, 1, 0,
					    record, "register", NULL),
			 0);
	/* Still ours, and closed before anything is written. */
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	close(fd);
	run_until(&c, 1, 1, 10000);
	ck_assert_uint_eq(n_seen, 1);
	ck_assert_int_eq(seen[0].error, 0);
	ck_assert_ptr_nonnull(strstr(seen[0].params, "\"region\""));
	{
		char back[16] = "";
		cJSON *root = cJSON_Parse(seen[0].params);
		uint64_t region = strtoull(test_str(root, "region"), NULL, 10);

		ck_assert_int_eq(rdmamem_read(c, region, 0, back, 15, 0), 0);
		ck_assert_str_eq(back, "through a copy");
		cJSON_Delete(root);
	}
	/* Bad fds and bad arguments fail at once, saying why. */
	fd = -1;
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, &fd, 1, 0, record, "x",
					    NULL),
			 -EBADF);
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", "[]", NULL, 0, 0, record, "x",
					    NULL),
			 -EINVAL);
	ck_assert_ptr_nonnull(rdmamem_client_error_message(c));
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, NULL, NULL,
					    NULL),
			 -EINVAL);
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, NULL, 0,
					    RDMAMEM_CALL_ONEWAY, record, "x", NULL),
			 -EINVAL);
	munmap(mem, 4096);
	seen_reset();
	rdmamem_client_close(c);
}
END_TEST

/* "more" on a method that answers once: one reply, not continuing.
 * "oneway": no reply, and the calls after it get theirs. */
START_TEST(test_more_and_oneway)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_call *ow = (void *)1;

	seen_reset();
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", "{\"data\":\"m\"}", NULL, 0,
					    RDMAMEM_CALL_MORE, record, "more", NULL),
			 0);
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", "{\"data\":\"ow\"}", NULL, 0,
					    RDMAMEM_CALL_ONEWAY, NULL, NULL, &ow),
			 0);
	ck_assert_ptr_null(ow);
	call(c, "io.rdmamemd.Ping", "{\"data\":\"p\"}", "ping", NULL);
	run_until(&c, 1, 2, 10000);
	run_until(&c, 1, 3, 200);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[0].params, "{\"data\":\"m\"}");
	ck_assert_uint_eq(seen[0].flags, 0);
	ck_assert_str_eq(seen[1].params, "{\"data\":\"p\"}");
	seen_reset();
	rdmamem_client_close(c);
}
END_TEST

/* What a callback may do: queue calls (they are answered), cancel; a
 * blocking call or process() from it fails with -EBUSY. */
static struct rdmamem_call *victim;

static void chaining(struct rdmamem_client *c, struct rdmamem_call *call,
		     const struct rdmamem_reply *reply, void *userdata)
{
	record(c, call, reply, userdata);
	ck_assert_int_eq(rdmamem_ping(c), -EBUSY);
	ck_assert_int_eq(rdmamem_client_process(c), -EBUSY);
	ck_assert_ptr_null(rdmamem_call_cancel(victim));
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", "{\"data\":\"chained\"}", NULL,
					    0, 0, record, "chained", NULL),
			 0);
}

START_TEST(test_callback_rules)
{
	struct rdmamem_client *c = test_client(td.socket);

	seen_reset();
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, chaining,
					    "first", NULL),
			 0);
	call(c, "io.rdmamemd.Ping", NULL, "victim", &victim);
	run_until(&c, 1, 2, 10000);
	run_until(&c, 1, 3, 200);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[0].tag, "first");
	ck_assert_str_eq(seen[1].tag, "chained");
	ck_assert_str_eq(seen[1].params, "{\"data\":\"chained\"}");
	seen_reset();
	rdmamem_client_close(c);
}
END_TEST

/* The daemon dies under pending calls: each callback hears -ECONNRESET
 * once, process() says so from then on, and new calls are refused. */
START_TEST(test_daemon_killed)
{
	struct test_daemon d;
	struct rdmamem_client *owner, *c;
	_cleanup_free_ char *p = NULL;
	uint64_t region;
	int fd, status;

	seen_reset();
	test_daemon_start(&d, NULL);
	owner = test_client(d.socket);
	c = test_client(d.socket);
	locked_region(owner, &region, &fd);
	p = lock_params(region, 20000);
	call(c, "io.rdmamemd.Lock", p, "lock", NULL);
	for (unsigned i = 0; i < 3; i++)
		call(c, "io.rdmamemd.Ping", NULL, "ping", NULL);
	while (rdmamem_client_get_events(c) & POLLOUT)
		ck_assert_int_ge(rdmamem_client_process(c), 0);
	ck_assert_uint_eq(n_seen, 0);

	kill(d.pid, SIGKILL);
	waitpid(d.pid, &status, 0);
	ck_assert_int_eq(run_until(&c, 1, 4, 10000), -ECONNRESET);
	ck_assert_uint_eq(n_seen, 4);
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_str_eq(seen[i].tag, i == 0 ? "lock" : "ping");
		ck_assert_int_eq(seen[i].error, -ECONNRESET);
		ck_assert_ptr_null(seen[i].name);
		ck_assert_ptr_nonnull(strstr(seen[i].message, "closed the connection"));
	}
	ck_assert_int_eq(rdmamem_client_process(c), -ECONNRESET);
	ck_assert_int_eq(rdmamem_client_get_events(c), 0);
	ck_assert_int_eq(rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, record, "x",
					    NULL),
			 -ENOTCONN);
	ck_assert_int_eq(rdmamem_ping(c), -ENOTCONN);
	run_until(&c, 1, 5, 100);
	ck_assert_uint_eq(n_seen, 4);
	seen_reset();
	close(fd);
	rdmamem_client_close(c);
	rdmamem_client_close(owner);
	close(d.notify_fd);
	unlink(d.socket);
	unlink(d.notify);
	rmdir(d.dir);
}
END_TEST

/*
 * The daemon dies after answering the last call: process() reads the end of
 * the stream with no call pending (as a blocking call can read a success
 * and the end in one go), so no call failed with it. The next call says
 * what happened (the daemon closed the connection); the ones after it that
 * the connection is broken.
 */
START_TEST(test_daemon_killed_between_calls)
{
	struct test_daemon d;
	struct rdmamem_client *c;
	int status;

	seen_reset();
	test_daemon_start(&d, NULL);
	c = test_client(d.socket);
	call(c, "io.rdmamemd.Ping", NULL, "ping", NULL);
	ck_assert_int_ge(run_until(&c, 1, 1, 10000), 0);
	ck_assert_uint_eq(n_seen, 1);
	ck_assert_int_eq(seen[0].error, 0);
	kill(d.pid, SIGKILL);
	waitpid(d.pid, &status, 0);
	ck_assert_int_eq(rdmamem_client_process(c), -ECONNRESET);
	ck_assert_uint_eq(n_seen, 1);
	ck_assert_int_eq(rdmamem_ping(c), -ECONNRESET);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "closed the connection"));
	ck_assert_int_eq(rdmamem_ping(c), -ENOTCONN);
	seen_reset();
	rdmamem_client_close(c);
	close(d.notify_fd);
	unlink(d.socket);
	unlink(d.notify);
	rmdir(d.dir);
}
END_TEST

/*
 * A scripted Varlink server on its own thread, for what the daemon does
 * not send: a "test.Stream" call with "more" gets three continuing
 * replies, a memfd holding "fd" on the second, and a last; any other call
 * gets its parameters back. It serves one connection until it closes.
 */
struct script {
	char dir[64];
	char path[96];
	int lfd;
	pthread_t thread;
};

static void script_send(int fd, const char *text, int pass_fd)
{
	size_t len = strlen(text) + 1;

	ck_assert_int_eq(sockio_send(fd, text, len, pass_fd >= 0 ? &pass_fd : NULL, pass_fd >= 0,
				     0),
			 (ssize_t)len);
}

static void *script_serve(void *arg)
{
	struct script *s = arg;
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	char *msg;

	while (fd >= 0 && test_recv_msg(fd, &msg, 10000) > 0) {
		cJSON *root = cJSON_Parse(msg);
		const char *method = test_str(root, "method");

		if (strcmp(method, "test.Stream") == 0) {
			int mfd;
			char *mem;

			ck_assert_int_eq(rdmamem_memfd_create("fd", 4096, &mfd, (void **)&mem), 0);
			strcpy(mem, "fd");
			munmap(mem, 4096);
			script_send(fd, "{\"parameters\":{\"n\":0},\"continues\":true}", -1);
			script_send(fd, "{\"parameters\":{\"n\":1},\"continues\":true}", mfd);
			script_send(fd, "{\"parameters\":{\"n\":2},\"continues\":true}", -1);
			script_send(fd, "{\"parameters\":{\"n\":3}}", -1);
			close(mfd);
		} else {
			cJSON *reply = cJSON_CreateObject();
			cJSON *params = cJSON_DetachItemFromObject(root, "parameters");
			char *text;

			cJSON_AddItemToObject(reply, "parameters", params ?: cJSON_CreateObject());
			text = cJSON_PrintUnformatted(reply);
			script_send(fd, text, -1);
			free(text);
			cJSON_Delete(reply);
		}
		cJSON_Delete(root);
		free(msg);
	}
	safe_close(fd);
	return NULL;
}

static void script_start(struct script *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(s->dir, sizeof(s->dir), "/tmp/rdmamem-script.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s->dir));
	snprintf(s->path, sizeof(s->path), "%s/s", s->dir);
	strcpy(sa.sun_path, s->path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(s->lfd, 4), 0);
	ck_assert_int_eq(pthread_create(&s->thread, NULL, script_serve, s), 0);
}

static void script_stop(struct script *s)
{
	ck_assert_int_eq(pthread_join(s->thread, NULL), 0);
	close(s->lfd);
	unlink(s->path);
	rmdir(s->dir);
}

/* A "more" stream: every reply reaches the callback, the continuing ones
 * flagged, with the fd that came with its reply; the next call follows. */
START_TEST(test_stream_and_fds_received)
{
	struct script s;
	struct rdmamem_client *c = NULL;
	char back[4] = "";

	seen_reset();
	script_start(&s);
	ck_assert_int_eq(rdmamem_client_connect(s.path, &c), 0);
	ck_assert_int_eq(rdmamem_call_async(c, "test.Stream", NULL, NULL, 0, RDMAMEM_CALL_MORE,
					    record, "stream", NULL),
			 0);
	call(c, "test.Echo", "{\"after\":true}", "echo", NULL);
	run_until(&c, 1, 5, 10000);
	ck_assert_uint_eq(n_seen, 5);
	for (unsigned i = 0; i < 4; i++) {
		char p[16];

		snprintf(p, sizeof(p), "{\"n\":%u}", i);
		ck_assert_str_eq(seen[i].tag, "stream");
		ck_assert_str_eq(seen[i].params, p);
		ck_assert_uint_eq(seen[i].flags, i < 3 ? RDMAMEM_REPLY_CONTINUES : 0);
		ck_assert_int_eq(seen[i].fd >= 0, i == 1);
	}
	ck_assert_int_eq(pread(seen[1].fd, back, 2, 0), 2);
	ck_assert_str_eq(back, "fd");
	ck_assert_int_eq(fcntl(seen[1].fd, F_GETFD), FD_CLOEXEC);
	ck_assert_str_eq(seen[4].params, "{\"after\":true}");

	/* The blocking calls are the same engine: fds come back too. */
	{
		int fds[2] = { -1, -1 };
		size_t n = 2;

		ck_assert_int_eq(rdmamem_call(c, "test.Echo", NULL, NULL, 0, NULL, fds, &n), 0);
		ck_assert_uint_eq(n, 0);
	}
	seen_reset();
	rdmamem_client_close(c);
	script_stop(&s);
}
END_TEST

/* A stream cancelled from its own first callback: the rest of its replies
 * is dropped (their fds closed), and the next call gets its own. */
static void cancel_self(struct rdmamem_client *c, struct rdmamem_call *call,
			const struct rdmamem_reply *reply, void *userdata)
{
	record(c, call, reply, userdata);
	ck_assert_ptr_null(rdmamem_call_cancel(call));
}

START_TEST(test_cancel_stream_in_callback)
{
	struct script s;
	struct rdmamem_client *c = NULL;
	int before;

	seen_reset();
	before = test_count_fds(getpid());
	script_start(&s);
	ck_assert_int_eq(rdmamem_client_connect(s.path, &c), 0);
	ck_assert_int_eq(rdmamem_call_async(c, "test.Stream", NULL, NULL, 0, RDMAMEM_CALL_MORE,
					    cancel_self, "stream", NULL),
			 0);
	call(c, "test.Echo", "{\"x\":1}", "echo", NULL);
	run_until(&c, 1, 2, 10000);
	run_until(&c, 1, 3, 200);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[0].tag, "stream");
	ck_assert_str_eq(seen[1].tag, "echo");
	ck_assert_str_eq(seen[1].params, "{\"x\":1}");
	seen_reset();
	rdmamem_client_close(c);
	script_stop(&s);
	/* The fd of the dropped reply went with it. */
	ck_assert_int_eq(test_count_fds(getpid()), before);
}
END_TEST

/* A blocking call made while async calls are pending waits its turn;
 * their callbacks run inside it. */
START_TEST(test_blocking_behind_async)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;

	seen_reset();
	call(c, "io.rdmamemd.Ping", "{\"data\":\"a\"}", "a", NULL);
	call(c, "io.rdmamemd.Ping", "{\"data\":\"b\"}", "b", NULL);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Ping", "{\"data\":\"c\"}", NULL, 0, &reply,
				      NULL, NULL),
			 0);
	ck_assert_str_eq(reply, "{\"data\":\"c\"}");
	free(reply);
	ck_assert_uint_eq(n_seen, 2);
	ck_assert_str_eq(seen[0].tag, "a");
	ck_assert_str_eq(seen[1].tag, "b");
	seen_reset();
	rdmamem_client_close(c);
}
END_TEST

/* examples/async-uv drives three connections from a libuv loop: its
 * Pings are answered while another connection's Lock waits, the Ping
 * queued behind that Lock comes after it, and it exits cleanly. */
START_TEST(test_example_async_uv)
{
	const char *argv[] = { BUILD_DIR "/examples/async-uv", td.socket, NULL };
	char *out = NULL, *err = NULL, *lock, *last_ping, *behind;

	ck_assert_msg(test_run(argv, &out, &err) == 0, "async-uv failed: %s", err);
	lock = strstr(out, "waiter: lock granted after 5 pings");
	last_ping = strstr(out, "holder: ping 5 answered while the other connection's lock waits");
	behind = strstr(out, "waiter: ping behind the lock answered after it");
	ck_assert_msg(lock && last_ping && behind, "unexpected output: %s", out);
	ck_assert(last_ping < lock);
	ck_assert(lock < behind);
	ck_assert_ptr_nonnull(strstr(behind, "\ndone\n"));
	free(out);
	free(err);
	test_assert_serving(td.socket);
}
END_TEST

Suite *async_suite(void)
{
	Suite *s = suite_create("async");
	TCase *tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_pipelined_in_order);
	tcase_add_test(tc, test_lock_wait_beside_pings);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_call_timeout);
	tcase_add_test(tc, test_fds_sent);
	tcase_add_test(tc, test_more_and_oneway);
	tcase_add_test(tc, test_callback_rules);
	tcase_add_test(tc, test_blocking_behind_async);
	tcase_add_test(tc, test_example_async_uv);
	suite_add_tcase(s, tc);

	tc = tcase_create("alone");
	tcase_add_test(tc, test_daemon_killed);
	tcase_add_test(tc, test_daemon_killed_between_calls);
	tcase_add_test(tc, test_stream_and_fds_received);
	tcase_add_test(tc, test_cancel_stream_in_callback);
	suite_add_tcase(s, tc);
	return s;
}
