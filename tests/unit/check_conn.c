/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection (daemon/ipc/conn.c), driven through real conn objects on a
 * real loop: a real server (listening in a temporary directory, its budgets
 * and limits the daemon's), a connection made over a socketpair as
 * server.c makes an accepted one, and the test at the other end writing raw
 * bytes and reading what comes back. No daemon: the calls are Ping and two
 * methods of the suite's own, which the rpc context serves besides the
 * tables (rpc_ctx.extra_methods): one that defers until the test answers,
 * one that reports the fds it was given.
 *
 * Framing (split and pipelined calls), fds (with their message, refused,
 * amid a message), malformed and oversized messages, the peer's half-close
 * and hang-up, conn_close() and conn_drain() around a deferred call, the
 * poll kept asking for input while a call is deferred, output
 * backpressure (the queue limit, the per-uid budget, the stall timeout),
 * refusal (conn_reject()), the input stall, and messages parsed on the pool.
 * Every case ends with the fds the process had before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/offload.h"
#include "daemon/core/session.h"
#include "daemon/ipc/conn.h"
#include "daemon/ipc/server.h"
#include "daemon/rpc/rpc.h"
#include "proto/errors.h"
#include "util/sockio.h"
#include "tests/testlib.h"
#include "tests/unit/conn-client.h"

/* How many loop turns show that nothing (more) comes. */
#define QUIET_TURNS 50

#define TEST_INTERFACE "org.example.test"
#define PING "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"%s\"}}"
#define PONG "{\"parameters\":{\"data\":\"%s\"}}"

/* The server and the one connection under test. Loop thread: the test's. */
static struct {
	int fds_before; /* the process's open fds once the loop is made */
	uv_loop_t loop;
	struct core core;
	struct account_table accounts;
	struct offload offload;
	struct rpc_ctx rpc;
	struct server *server;
	char dir[64], path[96];

	struct conn *conn;     /* a reference of the test's: readable after it closed */
	struct conn_client cl; /* the test's end of the socketpair */
} f;

/* What the suite's methods saw. */
#define CALLS_MAX 8
static struct {
	struct rpc_deferred *held; /* a Defer call waiting for the test */
	unsigned deferred, cancelled;
	unsigned n_fd_calls;
	int peek_fds[2];       /* the test's ends of two connections */
	int peeked[CALLS_MAX]; /* bytes waiting at either, per Peek */
	unsigned n_peeks;
	struct {
		size_t n_fds;
		struct stat st[VARLINK_FDS_MAX];
	} fd_calls[CALLS_MAX];
} t;

/* The client left: stop waiting and end the handle, as real holders do. */
static void defer_cancel(void *userdata)
{
	ck_assert_ptr_eq(userdata, &t);
	t.cancelled++;
	rpc_deferred_drop(t.held);
	t.held = NULL;
}

static int method_defer(struct rpc_call *call, _unused_ void *params)
{
	ck_assert_ptr_null(t.held);
	t.held = rpc_defer(call, defer_cancel, &t);
	t.deferred++;
	return 0;
}

/* Reports the fds of the call: how many, and which files they are. */
static int method_fds(struct rpc_call *call, _unused_ void *params)
{
	cJSON *reply = cJSON_CreateObject();

	ck_assert_uint_lt(t.n_fd_calls, CALLS_MAX);
	t.fd_calls[t.n_fd_calls].n_fds = call->n_fds;
	for (size_t i = 0; i < call->n_fds; i++)
		ck_assert_int_eq(fstat(call->fds[i], &t.fd_calls[t.n_fd_calls].st[i]), 0);
	t.n_fd_calls++;
	ck_assert_ptr_nonnull(cJSON_AddNumberToObject(reply, "n", (double)call->n_fds));
	return rpc_reply(call, reply);
}

/* Reports, from inside the daemon, how many reply bytes already wait at the
 * test's ends of the two connections (t.peek_fds). */
static int method_peek(struct rpc_call *call, _unused_ void *params)
{
	int most = 0;

	ck_assert_uint_lt(t.n_peeks, CALLS_MAX);
	for (unsigned i = 0; i < 2; i++) {
		int n;

		ck_assert_int_eq(ioctl(t.peek_fds[i], FIONREAD, &n), 0);
		most = MAX(most, n);
	}
	t.peeked[t.n_peeks++] = most;
	return rpc_reply(call, cJSON_CreateObject());
}

RPC_DEFINE_METHOD(Defer, NULL);
RPC_DEFINE_METHOD(Fds, NULL);
RPC_DEFINE_METHOD(Peek, NULL);

static const struct rpc_method test_methods[] = {
	RPC_METHOD(TEST_INTERFACE, Defer, method_defer),
	RPC_METHOD(TEST_INTERFACE, Fds, method_fds, .flags = RPC_ACCEPTS_FDS),
	RPC_METHOD(TEST_INTERFACE, Peek, method_peek),
	{},
};

/* One turn of the loop, without blocking. */
static void turn(void)
{
	uv_run(&f.loop, UV_RUN_NOWAIT);
}

/* Turns the loop until cond(arg), which must come within CONN_CLIENT_WAIT_MSEC. */
static void wait_until(bool (*cond)(const void *arg), const void *arg, const char *what)
{
	uint64_t deadline = conn_client_msec() + CONN_CLIENT_WAIT_MSEC;

	while (!cond(arg)) {
		ck_assert_msg(conn_client_msec() < deadline, "timed out waiting for %s", what);
		turn();
		usleep(200);
	}
}

/* A connection made over a socketpair as server.c makes an accepted one:
 * its end non-blocking and close-on-exec, the peer's credentials. The
 * daemon's end sends at most about sndbuf bytes before it blocks (0: the
 * kernel's default). The test's end in *ret_fd. */
static struct conn *conn_make(int sndbuf, int *ret_fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *c;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	if (sndbuf > 0)
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)),
				 0);
	ck_assert_int_eq(getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cred, &len), 0);
	ck_assert_int_eq(conn_new(f.server, sv[0], &cred, &c), 0);
	*ret_fd = sv[1];
	return c;
}

/* The connection under test (conn_make()), f.conn and f.cl. */
static void conn_open(int sndbuf)
{
	int fd;

	f.conn = conn_ref(conn_make(sndbuf, &fd));
	conn_client_init(&f.cl, &f.loop, fd);
	ck_assert_uint_eq(f.server->n_conns, 1);
}

static void setup(void)
{
	memset(&f, 0, sizeof(f));
	memset(&t, 0, sizeof(t));
	f.cl.fd = -EBADF;
	ck_assert_int_eq(uv_loop_init(&f.loop), 0);
	/* After the loop's own, and libuv's process-wide ones its first
	 * loop opens. */
	f.fds_before = test_count_fds(getpid());
	f.core.loop = &f.loop;
	f.core.start_msec = uv_now(&f.loop);
	daemon_config_init(&f.core.cfg);
	account_table_init(&f.accounts);
	f.core.accounts = &f.accounts;
	offload_init(&f.offload, &f.loop);
	f.core.offload = &f.offload;

	snprintf(f.dir, sizeof(f.dir), "/tmp/check-conn.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f.dir));
	snprintf(f.path, sizeof(f.path), "%s/sock", f.dir);
	f.core.cfg.socket_path = strdup(f.path);
	ck_assert_ptr_nonnull(f.core.cfg.socket_path);

	f.rpc = (struct rpc_ctx){ .core = &f.core, .extra_methods = test_methods };
	ck_assert_int_eq(server_new(&f.core, &f.rpc, -1, &f.server), 0);
	f.rpc.server_ops = &server_rpc_ops;
	f.rpc.server = f.server;
}

/* Closes what is left in the daemon's teardown order, then checks that
 * nothing is: no connection, no byte in a budget, no account, no handle,
 * no fd the case did not have before it. */
static void teardown(void)
{
	conn_client_done(&f.cl);
	if (f.conn && !f.conn->closed)
		conn_close(f.conn);
	/* Its memory goes with the poll handle's close, or now. */
	f.conn = conn_unref(f.conn);
	ck_assert_ptr_null(t.held);

	server_stop_listening(f.server);
	server_stop_handles(f.server);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	ck_assert(list_empty(&f.server->conns));
	ck_assert_uint_eq(f.server->n_conns, 0);
	ck_assert_uint_eq(f.server->n_rejected, 0);
	for (unsigned k = 0; k < BUDGET_KINDS; k++)
		ck_assert_uint_eq(f.server->budgets[k].bytes, 0);
	f.server = server_free(f.server);
	ck_assert_int_eq(rmdir(f.dir), 0);

	counters_done(&f.core.stats.calls);
	counters_done(&f.core.stats.errors);
	ck_assert_uint_eq(f.accounts.by_uid.n_entries, 0);
	account_table_done(&f.accounts);
	daemon_config_done(&f.core.cfg);
	ck_assert_int_eq(test_count_fds(getpid()), f.fds_before);
	ck_assert_int_eq(uv_loop_close(&f.loop), 0);
}

static int client_write(const void *buf, size_t len, const int *fds, size_t n_fds,
			bool allow_hangup)
{
	return conn_client_write(&f.cl, buf, len, fds, n_fds, allow_hangup);
}

static void client_send(const void *buf, size_t len, const int *fds, size_t n_fds)
{
	client_write(buf, len, fds, n_fds, false);
}

/* Sends one message (text and its NUL) in one sendmsg with fds. */
static void client_send_msg(const char *text, const int *fds, size_t n_fds)
{
	client_send(text, strlen(text) + 1, fds, n_fds);
}

static void client_poll(void)
{
	conn_client_poll(&f.cl);
}

static const char *client_next(void)
{
	return conn_client_next(&f.cl);
}

static void client_expect(const char *want)
{
	const char *got = client_next();

	ck_assert_msg(got, "end of stream, expected %s", want);
	ck_assert_str_eq(got, want);
}

static void client_expect_pong(const char *data)
{
	char want[256];

	snprintf(want, sizeof(want), PONG, data);
	client_expect(want);
}

/* The next message is the error name. */
static void client_expect_error(const char *name)
{
	const char *got = client_next();
	cJSON *root, *error;

	ck_assert_msg(got, "end of stream, expected %s", name);
	root = cJSON_Parse(got);
	ck_assert_msg(root, "not JSON: %s", got);
	error = cJSON_GetObjectItemCaseSensitive(root, "error");
	ck_assert_msg(cJSON_IsString(error), "not an error: %s", got);
	ck_assert_str_eq(error->valuestring, name);
	cJSON_Delete(root);
}

static bool conn_is_closed(_unused_ const void *arg)
{
	return f.conn->closed;
}

/*
 * The daemon hangs up: the connection closes, and its socket with its last
 * reference, so the test lets go of its own (f.conn is NULL after this);
 * then the stream ends, with nothing more in it.
 */
static void client_expect_eof(void)
{
	const char *got;

	wait_until(conn_is_closed, NULL, "the connection to close");
	f.conn = conn_unref(f.conn);
	got = client_next();
	ck_assert_msg(!got, "expected the end of the stream, got %s", got);
}

/* Nothing comes over QUIET_TURNS turns of the loop, nor does the stream end. */
static void client_expect_quiet(void)
{
	for (unsigned i = 0; i < QUIET_TURNS; i++)
		client_poll();
	ck_assert_msg(f.cl.rx_len == 0, "unexpected: %.*s", (int)f.cl.rx_len, f.cl.rx);
	ck_assert(!f.cl.rx_eof);
}

static void client_ping(const char *data)
{
	char text[256];

	snprintf(text, sizeof(text), PING, data);
	client_send_msg(text, NULL, 0);
}

/* Appends the call text and its NUL to buf at *len. */
static void append_msg(char *buf, size_t cap, size_t *len, const char *text)
{
	size_t n = strlen(text) + 1;

	ck_assert_uint_le(*len + n, cap);
	memcpy(buf + *len, text, n);
	*len += n;
}

/* Appends a Ping of data and its NUL to buf at *len. */
static void append_ping(char *buf, size_t cap, size_t *len, const char *data)
{
	int n = snprintf(buf + *len, cap - *len, PING, data);

	ck_assert(n >= 0 && (size_t)n < cap - *len);
	*len += (size_t)n + 1;
}

/* The tick keeps the connection until deadline (the daemon's clock) and
 * drops it then. */
static void assert_dropped_at(uint64_t deadline)
{
	conn_tick(f.conn, deadline - 1);
	ck_assert(!f.conn->closed);
	conn_tick(f.conn, deadline);
	ck_assert(f.conn->closed);
}

/* The deferred call answers {"data": data}. */
static void answer_held(const char *data)
{
	cJSON *p = cJSON_CreateObject();

	ck_assert_ptr_nonnull(t.held);
	ck_assert_ptr_nonnull(cJSON_AddStringToObject(p, "data", data));
	ck_assert_int_eq(rpc_deferred_reply(t.held, p), 0);
	t.held = NULL;
}

static bool is_held(_unused_ const void *arg)
{
	return t.held != NULL;
}

static bool is_cancelled(_unused_ const void *arg)
{
	return t.cancelled > 0;
}

/* The daemon read the first *arg bytes of a message it has not finished. */
static bool has_pending(const void *arg)
{
	return frame_reader_pending(&f.conn->in) == *(const size_t *)arg;
}

static bool output_waits(_unused_ const void *arg)
{
	return f.conn->wait[BUDGET_OUTPUT].waiting;
}

static bool output_is_full(_unused_ const void *arg)
{
	return outq_pending(&f.conn->out) >= f.core.cfg.output_max;
}

static bool is_parsing(_unused_ const void *arg)
{
	return f.conn->parse != NULL;
}

/* Only the test holds the connection: its call, its parse and its poll
 * handle let go. */
static bool only_ours(_unused_ const void *arg)
{
	return f.conn->n_ref == 1;
}

/* A call written one byte at a time, each read on its own, is answered
 * once, after its last byte. */
START_TEST(test_split_bytes)
{
	char text[128];
	size_t len;

	conn_open(0);
	snprintf(text, sizeof(text), PING, "split");
	len = strlen(text) + 1;
	for (size_t i = 0; i + 1 < len; i++) {
		size_t have = i + 1;

		client_send(text + i, 1, NULL, 0);
		wait_until(has_pending, &have, "the byte to be read");
		client_poll();
		ck_assert_uint_eq(f.cl.rx_len, 0);
	}
	ck_assert_uint_eq(f.conn->n_calls, 0);
	client_send(text + len - 1, 1, NULL, 0);
	client_expect_pong("split");
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, 1);
	ck_assert_uint_eq(frame_reader_pending(&f.conn->in), 0);
}
END_TEST

/* Calls in one write are answered in order, each once. */
START_TEST(test_pipelined)
{
	enum { N = 100 };
	static char buf[N * 80];
	char data[16];
	size_t len = 0;

	conn_open(0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(data, sizeof(data), "p%u", i);
		append_ping(buf, sizeof(buf), &len, data);
	}
	client_send(buf, len, NULL, 0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(data, sizeof(data), "p%u", i);
		client_expect_pong(data);
	}
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, N);
}
END_TEST

/*
 * Each of two connections writes calls to Peek before one turn of the loop,
 * in which the daemon serves both: peeked[] says what waited at either
 * client while each call ran, and after the turn each client has all its
 * replies waiting.
 */
static void peek_two(unsigned calls_each)
{
	static const char peek[] = "{\"method\":\"" TEST_INTERFACE ".Peek\"}";
	static const char empty[] = "{\"parameters\":{}}";
	char buf[4 * sizeof(peek)];
	struct conn *second;
	int fd, n;

	ck_assert_uint_le(calls_each, 4);
	for (unsigned i = 0; i < calls_each; i++)
		memcpy(buf + i * sizeof(peek), peek, sizeof(peek));
	conn_open(0);
	second = conn_make(0, &fd);
	t.peek_fds[0] = f.cl.fd;
	t.peek_fds[1] = fd;

	client_send(buf, calls_each * sizeof(peek), NULL, 0);
	ck_assert_int_eq(write(fd, buf, calls_each * sizeof(peek)),
			 (ssize_t)(calls_each * sizeof(peek)));
	turn();
	ck_assert_uint_eq(t.n_peeks, 2 * calls_each);
	for (unsigned i = 0; i < 2; i++) {
		ck_assert_int_eq(ioctl(t.peek_fds[i], FIONREAD, &n), 0);
		ck_assert_int_eq(n, (int)(calls_each * sizeof(empty)));
	}
	conn_close(second);
	safe_close(fd);
	for (unsigned i = 0; i < calls_each; i++)
		client_expect(empty);
	client_expect_quiet();
}

/*
 * Pipelined calls' replies leave once every ready socket was read, all in
 * the same turn of the loop: two connections' pairs of calls each see no
 * reply waiting at either client (replies written at once would be there
 * for the second connection's), and all replies are there after the turn.
 */
START_TEST(test_pipelined_replies_after_reads)
{
	peek_two(2);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(t.peeked[i], 0);
}
END_TEST

/* A single call is answered at once: its client waits for it. The second
 * connection's call sees the first one's reply already sent. */
START_TEST(test_single_call_answered_at_once)
{
	peek_two(1);
	ck_assert_int_eq(t.peeked[0], 0);
	ck_assert_int_gt(t.peeked[1], 0);
}
END_TEST

/* Closes nothing: a handle closing would keep the poll from sleeping. */
static void on_answer_timer(_unused_ uv_timer_t *timer)
{
	answer_held("from a timer");
}

/*
 * A deferred call answered from a timer's callback, before the loop's poll:
 * the reply must leave in that same turn, the poll not sleeping first
 * (nothing else would wake it here). One UV_RUN_ONCE turn sends it.
 */
START_TEST(test_reply_from_timer)
{
	uv_timer_t timer;
	int n = 0;

	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\"}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	ck_assert_int_eq(uv_timer_init(&f.loop, &timer), 0);
	ck_assert_int_eq(uv_timer_start(&timer, on_answer_timer, 0, 0), 0);
	uv_run(&f.loop, UV_RUN_ONCE);
	ck_assert_ptr_null(t.held);
	ck_assert_int_eq(ioctl(f.cl.fd, FIONREAD, &n), 0);
	ck_assert_int_gt(n, 0);
	uv_close((uv_handle_t *)&timer, NULL);
	client_expect_pong("from a timer");
	client_expect_quiet();
}
END_TEST

/* A deferred call holds back the calls behind it, which come in order once
 * it is answered. */
START_TEST(test_pipelined_behind_deferred)
{
	char buf[512];
	size_t len = 0;

	conn_open(0);
	append_ping(buf, sizeof(buf), &len, "before");
	append_msg(buf, sizeof(buf), &len, "{\"method\":\"" TEST_INTERFACE ".Defer\"}");
	append_ping(buf, sizeof(buf), &len, "after");
	client_send(buf, len, NULL, 0);

	client_expect_pong("before");
	wait_until(is_held, NULL, "the deferred call");
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, 2);

	answer_held("deferred");
	client_expect_pong("deferred");
	client_expect_pong("after");
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, 3);
	ck_assert_uint_eq(t.cancelled, 0);
}
END_TEST

/*
 * While a deferred call runs the connection reads nothing, but its poll
 * keeps asking for input (no epoll_ctl() each way) until some comes; then
 * it stops asking, and asks again once the call is answered.
 */
START_TEST(test_poll_kept_while_deferred)
{
	char buf[256];
	size_t len = 0;

	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\"}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	ck_assert(!f.conn->reading);
	ck_assert(f.conn->poll_events & UV_READABLE);
	ck_assert(!f.conn->input_while_busy);

	append_ping(buf, sizeof(buf), &len, "behind");
	client_send(buf, len, NULL, 0);
	client_expect_quiet();
	ck_assert(f.conn->input_while_busy);
	ck_assert(!(f.conn->poll_events & UV_READABLE));
	ck_assert(f.conn->poll_events & UV_DISCONNECT);
	ck_assert_uint_eq(f.conn->n_calls, 1);

	answer_held("deferred");
	client_expect_pong("deferred");
	client_expect_pong("behind");
	client_expect_quiet();
	ck_assert(f.conn->reading);
	ck_assert(f.conn->poll_events & UV_READABLE);
	ck_assert(!f.conn->input_while_busy);
	ck_assert_uint_eq(f.conn->n_calls, 2);
}
END_TEST

/*
 * A reply made away from the connection's own processing (a transfer's
 * progress, a notification on a stream: work that finishes on the loop)
 * leaves at once, not with the connection's next event: here the next
 * event would be the final reply, which the test holds back.
 */
START_TEST(test_continues_leave_at_once)
{
	cJSON *p;

	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\",\"more\":true}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	for (int i = 0; i < 3; i++) {
		p = cJSON_CreateObject();
		ck_assert_ptr_nonnull(cJSON_AddStringToObject(p, "data", "progress"));
		ck_assert_int_eq(rpc_deferred_continue(t.held, p), 0);
		client_expect("{\"parameters\":{\"data\":\"progress\"},\"continues\":true}");
	}
	answer_held("final");
	client_expect_pong("final");
	client_expect_quiet();
}
END_TEST

static void assert_same_file(const struct stat *a, int fd)
{
	struct stat b;

	ck_assert_int_eq(fstat(fd, &b), 0);
	ck_assert(a->st_dev == b.st_dev && a->st_ino == b.st_ino);
}

/* fds reach the call of the message they came with, also for two messages
 * pipelined, and the daemon closes its copies when the calls end. */
START_TEST(test_fds_reach_call)
{
	const char *call = "{\"method\":\"" TEST_INTERFACE ".Fds\"}";
	int one[1], two[2], base;

	conn_open(0);
	base = test_count_fds(getpid());
	one[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(one[0], 0);
	ck_assert_int_eq(pipe2(two, O_CLOEXEC), 0);

	/* Both are in the socket before the daemon reads either. */
	client_send_msg(call, one, 1);
	client_send_msg(call, two, 2);
	client_expect("{\"parameters\":{\"n\":1}}");
	client_expect("{\"parameters\":{\"n\":2}}");

	ck_assert_uint_eq(t.n_fd_calls, 2);
	ck_assert_uint_eq(t.fd_calls[0].n_fds, 1);
	assert_same_file(&t.fd_calls[0].st[0], one[0]);
	ck_assert_uint_eq(t.fd_calls[1].n_fds, 2);
	assert_same_file(&t.fd_calls[1].st[0], two[0]);
	assert_same_file(&t.fd_calls[1].st[1], two[1]);

	close(one[0]);
	close_many(two, 2);
	ck_assert_int_eq(test_count_fds(getpid()), base);
}
END_TEST

/* fds on a method that takes none, and more than 16 on one that takes
 * them: TooManyFileDescriptors, every fd closed, the connection usable. */
START_TEST(test_fds_refused)
{
	int fds[VARLINK_FDS_MAX + 1], base;
	char text[128];

	conn_open(0);
	base = test_count_fds(getpid());

	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fds[0], 0);
	snprintf(text, sizeof(text), PING, "with an fd");
	client_send_msg(text, fds, 1);
	close(fds[0]);
	client_expect_error(RDMAMEM_ERROR_TOO_MANY_FDS);
	ck_assert_int_eq(test_count_fds(getpid()), base);

	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fds[i], 0);
	}
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Fds\"}", fds, ELEMENTSOF(fds));
	close_many(fds, ELEMENTSOF(fds));
	client_expect_error(RDMAMEM_ERROR_TOO_MANY_FDS);
	ck_assert_uint_eq(t.n_fd_calls, 0);
	ck_assert_int_eq(test_count_fds(getpid()), base);

	client_ping("still here");
	client_expect_pong("still here");
	ck_assert(!f.conn->closed);
}
END_TEST

/* fds sent amid a message, with a read that starts none: InvalidMessage,
 * the fds closed, then the daemon hangs up without running the call. */
START_TEST(test_fds_amid_message)
{
	char text[128];
	size_t half;
	int fd, base;

	conn_open(0);
	base = test_count_fds(getpid());
	snprintf(text, sizeof(text), PING, "amid");
	half = strlen(text) / 2;
	client_send(text, half, NULL, 0);
	wait_until(has_pending, &half, "the first half to be read");

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	client_send(text + half, strlen(text) + 1 - half, &fd, 1);
	close(fd);
	client_expect_error(RDMAMEM_ERROR_INVALID_MESSAGE);
	ck_assert_uint_eq(f.conn->n_calls, 0);
	client_expect_eof();
	/* The fd sent, and the connection's socket with it. */
	ck_assert_int_eq(test_count_fds(getpid()), base - 1);
}
END_TEST

/* A message that is not JSON, small (parsed on the loop) or large (on the
 * pool): InvalidMessage, its fds closed, and the connection stays usable
 * (the NUL framing keeps both sides in step). */
START_TEST(test_malformed)
{
	size_t big_len = 20000;
	char *big = malloc(big_len + 1);
	int fd, base;

	ck_assert_ptr_nonnull(big);
	conn_open(0);
	base = test_count_fds(getpid());

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	client_send("not json", sizeof("not json"), &fd, 1);
	close(fd);
	client_ping("after");
	client_expect_error(RDMAMEM_ERROR_INVALID_MESSAGE);
	client_expect_pong("after");

	memset(big, 'x', big_len);
	big[big_len] = '\0';
	client_send(big, big_len + 1, NULL, 0);
	client_ping("after big");
	client_expect_error(RDMAMEM_ERROR_INVALID_MESSAGE);
	client_expect_pong("after big");
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, 2);
	ck_assert_int_eq(test_count_fds(getpid()), base);
	free(big);
}
END_TEST

/* A message past the 16 MiB limit: MessageTooLarge, then the daemon hangs
 * up (the stream cannot be resynchronised), its input budget given back. */
START_TEST(test_too_large)
{
	size_t len = VARLINK_BODY_MAX + 1, chunk = 1U << 20;
	char *junk = malloc(chunk);

	ck_assert_ptr_nonnull(junk);
	memset(junk, ' ', chunk);
	conn_open(0);
	for (size_t sent = 0; sent < len; sent += chunk)
		if (client_write(junk, sent + chunk <= len ? chunk : len - sent, NULL, 0, true) < 0)
			break;
	client_expect_error(RDMAMEM_ERROR_MESSAGE_TOO_LARGE);
	ck_assert_uint_eq(f.conn->n_calls, 0);
	client_expect_eof();
	ck_assert_uint_eq(f.accounts.by_uid.n_entries, 0);
	free(junk);
}
END_TEST

/* The peer shuts its sending side after a call: the reply still comes,
 * then the end of the stream. */
START_TEST(test_half_close)
{
	conn_open(0);
	client_ping("last");
	ck_assert_int_eq(shutdown(f.cl.fd, SHUT_WR), 0);
	client_expect_pong("last");
	client_expect_eof();
}
END_TEST

/* The same while a deferred call runs: the call is not cancelled, and its
 * answer still comes, then the end of the stream. */
START_TEST(test_half_close_deferred)
{
	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\"}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	ck_assert_int_eq(shutdown(f.cl.fd, SHUT_WR), 0);
	client_expect_quiet();
	ck_assert(!f.conn->closed);
	ck_assert_uint_eq(t.cancelled, 0);

	answer_held("late");
	client_expect_pong("late");
	client_expect_eof();
	ck_assert_uint_eq(t.cancelled, 0);
}
END_TEST

/* The peer hangs up while a deferred call runs: nobody waits for the
 * answer, the call is cancelled and the connection closes. */
START_TEST(test_hangup_cancels)
{
	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\"}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	f.cl.fd = safe_close(f.cl.fd);
	wait_until(is_cancelled, NULL, "the call to be cancelled");
	ck_assert_uint_eq(t.cancelled, 1);
	ck_assert(f.conn->closed);
	ck_assert_ptr_null(f.conn->call);
}
END_TEST

/* conn_close() with a deferred call pending runs its on_cancel, once and
 * at once; the client hears nothing but the end of the stream. */
START_TEST(test_close_cancels)
{
	conn_open(0);
	client_send_msg("{\"method\":\"" TEST_INTERFACE ".Defer\"}", NULL, 0);
	wait_until(is_held, NULL, "the deferred call");
	conn_close(f.conn);
	ck_assert_uint_eq(t.cancelled, 1);
	ck_assert_ptr_null(f.conn->call);
	ck_assert_uint_eq(f.server->n_conns, 0);
	conn_close(f.conn);
	ck_assert_uint_eq(t.cancelled, 1);
	wait_until(only_ours, NULL, "the connection to let go");
	client_expect_eof();
}
END_TEST

/* conn_drain() of an idle connection closes it at once. */
START_TEST(test_drain_idle)
{
	conn_open(0);
	conn_drain(f.conn);
	ck_assert(f.conn->closed);
	client_expect_eof();
}
END_TEST

/* conn_drain() lets the call in progress finish and be answered; a call
 * read behind it is refused with ShuttingDown; then the daemon hangs up. */
START_TEST(test_drain_deferred)
{
	char buf[256];
	size_t len = 0;

	conn_open(0);
	append_msg(buf, sizeof(buf), &len, "{\"method\":\"" TEST_INTERFACE ".Defer\"}");
	append_ping(buf, sizeof(buf), &len, "queued");
	client_send(buf, len, NULL, 0);
	wait_until(is_held, NULL, "the deferred call");

	conn_drain(f.conn);
	client_expect_quiet();
	ck_assert(!f.conn->closed);
	ck_assert_uint_eq(t.cancelled, 0);

	answer_held("finished");
	client_expect_pong("finished");
	client_expect_error(RDMAMEM_ERROR_SHUTTING_DOWN);
	ck_assert_uint_eq(f.conn->n_calls, 1);
	client_expect_eof();
}
END_TEST

enum { FLOOD_CALLS = 64, FLOOD_DATA = 1024 };

/* FLOOD_CALLS Pings of FLOOD_DATA bytes each in one write: the data of the
 * i-th is its number, then 'x's. */
static void flood_data(unsigned i, char *data)
{
	int n = snprintf(data, FLOOD_DATA + 1, "%u.", i);

	memset(data + n, 'x', FLOOD_DATA - (size_t)n);
	data[FLOOD_DATA] = '\0';
}

static void flood_send(void)
{
	static char buf[FLOOD_CALLS * (FLOOD_DATA + 80)];
	char data[FLOOD_DATA + 1];
	size_t len = 0;

	for (unsigned i = 0; i < FLOOD_CALLS; i++) {
		flood_data(i, data);
		append_ping(buf, sizeof(buf), &len, data);
	}
	client_send(buf, len, NULL, 0);
}

static void flood_expect_replies(void)
{
	char data[FLOOD_DATA + 1], want[FLOOD_DATA + 80];

	for (unsigned i = 0; i < FLOOD_CALLS; i++) {
		flood_data(i, data);
		snprintf(want, sizeof(want), PONG, data);
		client_expect(want);
	}
	client_expect_quiet();
	ck_assert_uint_eq(f.conn->n_calls, FLOOD_CALLS);
}

/* The connection took some calls and then stopped, and stays stopped while
 * the loop turns. */
static void assert_stopped(void)
{
	uint64_t n;

	for (unsigned i = 0; i < QUIET_TURNS; i++)
		turn();
	n = f.conn->n_calls;
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_lt(n, FLOOD_CALLS);
	for (unsigned i = 0; i < QUIET_TURNS; i++) {
		turn();
		usleep(200);
	}
	ck_assert_uint_eq(f.conn->n_calls, n);
	ck_assert(!(f.conn->poll_events & UV_READABLE));
	ck_assert(!f.conn->closed);
}

/* The client does not read: replies fill the socket and then the queue up
 * to output-max, and the connection takes no call until the client reads;
 * then every call is answered, in order. */
START_TEST(test_output_full)
{
	f.core.cfg.output_max = 16U * 1024U;
	conn_open(4096);
	flood_send();
	wait_until(output_is_full, NULL, "the output queue to fill");
	assert_stopped();
	ck_assert_uint_ge(outq_pending(&f.conn->out), f.core.cfg.output_max);
	flood_expect_replies();
}
END_TEST

/* The same against the uid's output budget: the connection waits in line
 * for room, and goes on once the client's reads give bytes back. */
START_TEST(test_output_budget)
{
	f.core.cfg.max_output_bytes_per_uid = 16U * 1024U;
	conn_open(4096);
	flood_send();
	wait_until(output_waits, NULL, "the connection to wait for the output budget");
	assert_stopped();
	ck_assert_uint_ge(f.conn->session->account->budget[BUDGET_OUTPUT].bytes,
			  f.core.cfg.max_output_bytes_per_uid);
	flood_expect_replies();
	ck_assert(!output_waits(NULL));
}
END_TEST

/* A client that does not read its replies is dropped once its output has
 * been stalled for output-stall-timeout (conn_tick with the daemon's
 * clock), and not a millisecond before. */
START_TEST(test_output_stall)
{
	uint64_t since, stall, deadline;
	unsigned n_replies = 0;

	f.core.cfg.output_max = 16U * 1024U;
	conn_open(4096);
	flood_send();
	wait_until(output_is_full, NULL, "the output queue to fill");
	since = f.conn->out_stalled_since;
	stall = f.core.cfg.output_stall_sec * 1000ULL;
	ck_assert_uint_gt(since, 0);
	ck_assert_uint_le(since, uv_now(&f.loop));

	assert_dropped_at(since + stall);
	ck_assert_uint_lt(f.conn->n_calls, FLOOD_CALLS);
	/* What was in the socket comes, then the end (perhaps amid a reply):
	 * fewer replies than calls. */
	f.conn = conn_unref(f.conn);
	deadline = conn_client_msec() + CONN_CLIENT_WAIT_MSEC;
	while (!f.cl.rx_eof) {
		ck_assert(conn_client_msec() < deadline);
		client_poll();
	}
	for (size_t i = 0; i < f.cl.rx_len; i++)
		n_replies += f.cl.rx[i] == '\0';
	ck_assert_uint_lt(n_replies, FLOOD_CALLS);
}
END_TEST

/* A message left unfinished is dropped after input-stall-timeout without
 * an answer. */
START_TEST(test_input_stall)
{
	const char *part = "{\"method\":";
	size_t len = strlen(part);
	uint64_t since, stall;

	conn_open(0);
	client_send(part, len, NULL, 0);
	wait_until(has_pending, &len, "the start of the message to be read");
	since = f.conn->in_since;
	stall = f.core.cfg.input_stall_sec * 1000ULL;
	assert_dropped_at(since + stall);
	client_expect_eof();
}
END_TEST

/* conn_reject(): every call is answered with the error given (the first
 * one; the calls behind it get nothing), then the daemon hangs up; the
 * connection counts as refused, not admitted, until then. */
START_TEST(test_reject)
{
	char buf[256];
	size_t len = 0;

	conn_open(0);
	conn_reject(f.conn, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	ck_assert_uint_eq(f.server->n_conns, 0);
	ck_assert_uint_eq(f.server->n_rejected, 1);
	ck_assert_uint_eq(f.conn->session->account->n_rejected, 1);

	append_ping(buf, sizeof(buf), &len, "one");
	append_ping(buf, sizeof(buf), &len, "two");
	client_send(buf, len, NULL, 0);
	client_expect_error(RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	ck_assert_uint_eq(f.conn->n_calls, 0);
	client_expect_eof();
	ck_assert_uint_eq(f.server->n_rejected, 0);
}
END_TEST

/* A refused client that says nothing is dropped after a grace period (the
 * tick), not on the next one. */
START_TEST(test_reject_silent)
{
	uint64_t now;

	/* Only the refusal's grace may drop it. */
	f.core.cfg.output_stall_sec = 3600;
	conn_open(0);
	conn_reject(f.conn, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	now = uv_now(&f.loop);
	conn_tick(f.conn, now + 1000);
	ck_assert(!f.conn->closed);
	conn_tick(f.conn, now + 60000);
	ck_assert(f.conn->closed);
	client_expect_eof();
	ck_assert_uint_eq(f.server->n_rejected, 0);
}
END_TEST

/* A Ping of more than 16 KiB: parsed on the pool, answered, and the small
 * call behind it after it. */
START_TEST(test_large_on_pool)
{
	enum { DATA = 16 * 1024 };
	static char data[DATA + 1], text[DATA + 128], want[DATA + 128];
	bool parsed_on_pool = false;

	memset(data, 'y', DATA);
	conn_open(0);
	snprintf(text, sizeof(text), PING, data);
	client_send_msg(text, NULL, 0);
	client_ping("small");
	/* Each turn that reads it leaves it with the pool at least until the
	 * next. */
	for (uint64_t deadline = conn_client_msec() + CONN_CLIENT_WAIT_MSEC; f.conn->n_calls < 2;) {
		ck_assert(conn_client_msec() < deadline);
		turn();
		parsed_on_pool = parsed_on_pool || f.conn->parse;
		usleep(200);
	}
	ck_assert(parsed_on_pool);
	snprintf(want, sizeof(want), PONG, data);
	client_expect(want);
	client_expect_pong("small");
	client_expect_quiet();
}
END_TEST

/* conn_close() while a message is parsed on the pool: the parse lets go of
 * the connection (cancelled, or dropped once it is done), nothing answered. */
START_TEST(test_close_while_parsing)
{
	enum { DATA = 16 * 1024 };
	static char data[DATA + 1], text[DATA + 128];

	memset(data, 'z', DATA);
	conn_open(0);
	snprintf(text, sizeof(text), PING, data);
	client_send_msg(text, NULL, 0);
	wait_until(is_parsing, NULL, "the message to go to the pool");
	conn_close(f.conn);
	wait_until(only_ours, NULL, "the parse to let go");
	ck_assert_ptr_null(f.conn->parse);
	ck_assert_uint_eq(f.conn->n_calls, 0);
	client_expect_eof();
}
END_TEST

Suite *conn_suite(void)
{
	Suite *su = suite_create("conn");
	TCase *tc = tcase_create("framing");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_split_bytes);
	tcase_add_test(tc, test_pipelined);
	tcase_add_test(tc, test_pipelined_behind_deferred);
	tcase_add_test(tc, test_poll_kept_while_deferred);
	tcase_add_test(tc, test_pipelined_replies_after_reads);
	tcase_add_test(tc, test_single_call_answered_at_once);
	tcase_add_test(tc, test_reply_from_timer);
	tcase_add_test(tc, test_continues_leave_at_once);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_too_large);
	tcase_add_test(tc, test_large_on_pool);
	tcase_add_test(tc, test_close_while_parsing);
	suite_add_tcase(su, tc);

	tc = tcase_create("fds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fds_reach_call);
	tcase_add_test(tc, test_fds_refused);
	tcase_add_test(tc, test_fds_amid_message);
	suite_add_tcase(su, tc);

	tc = tcase_create("lifetime");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_half_close);
	tcase_add_test(tc, test_half_close_deferred);
	tcase_add_test(tc, test_hangup_cancels);
	tcase_add_test(tc, test_close_cancels);
	tcase_add_test(tc, test_drain_idle);
	tcase_add_test(tc, test_drain_deferred);
	tcase_add_test(tc, test_reject);
	tcase_add_test(tc, test_reject_silent);
	tcase_add_test(tc, test_input_stall);
	suite_add_tcase(su, tc);

	tc = tcase_create("backpressure");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_output_full);
	tcase_add_test(tc, test_output_budget);
	tcase_add_test(tc, test_output_stall);
	suite_add_tcase(su, tc);
	return su;
}
