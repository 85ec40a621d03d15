/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Notifications' receive path under a real connection: the fake verbs'
 * endpoint and receive rings (daemon/rdma/recv_ring.c), the owner's queue
 * (daemon/remote/notify.c), and WaitNotifications (rpc/rpc_notify.c)
 * served on a real connection (daemon/ipc/conn.c) whose session owns the
 * export's token, all on one loop. The peer is a link of uid 2000 that
 * SENDs notifications straight on its QP, as another daemon's link does.
 *
 * What a completion callback must not do: run the client's next pipelined
 * call (which may revoke the token and destroy the QP and ring under it);
 * spin once its ring is dead; take completions for ever while a peer keeps
 * sending; and a stream the client does not read must leave arrivals in
 * the bounded queue, not in the connection's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/core/offload.h"
#include "daemon/ipc/conn.h"
#include "daemon/ipc/server.h"
#include "daemon/rdma/recv_ring.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/notify_msg.h"
#include "daemon/remote/remote.h"
#include "daemon/rpc/rpc.h"
#include "tests/fakes/fake.h"
#include "tests/testlib.h"
#include "tests/unit/conn-client.h"
#include "tests/unit/link-fixture.h"

#define EXPORT_ID 91
#define PING "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"%s\"}}"
#define PONG "{\"parameters\":{\"data\":\"%s\"}}"
/* Notifications a receive buffer holds, side by side in lf.local. */
#define SEND_SLOTS (LINK_FIXTURE_SIZE / NOTIFY_MSG_MAX)

static struct {
	struct link_fixture lf;
	struct remote_ctx remote; /* its notify context only */
	struct offload offload;
	struct rpc_ctx rpc;
	struct server *server;
	char dir[64];
	struct conn *conn; /* a reference of the test's */
	struct conn_client cl;
	struct token *token; /* the connection's session's, the export's */
	struct link *link;   /* uid 2000's, admitted by token */
} f;

static void setup(void)
{
	struct errinfo e = {};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct link_key key;
	char path[96];
	int sv[2];

	vb = &fake_vb_ops;
	fake_verbs_reset();
	memset(&f, 0, sizeof(f));
	link_fixture_init(&f.lf, "127.0.0.1:7479", NULL);
	notify_init(&f.remote.notify, &f.lf.rdma);
	offload_init(&f.offload, &f.lf.f.loop);
	f.lf.f.core.offload = &f.offload;

	snprintf(f.dir, sizeof(f.dir), "/tmp/check-notify-conn.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f.dir));
	snprintf(path, sizeof(path), "%s/sock", f.dir);
	f.lf.f.core.cfg.socket_path = strdup(path);
	f.rpc = (struct rpc_ctx){ .core = &f.lf.f.core, .rdma = &f.lf.rdma, .remote = &f.remote };
	ck_assert_int_eq(server_new(&f.lf.f.core, &f.rpc, -1, &f.server), 0);
	f.rpc.server_ops = &server_rpc_ops;
	f.rpc.server = f.server;

	/* A small socket buffer: what the client leaves unread soon stays
	 * in the connection's queue. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &(int){ 16384 }, sizeof(int)), 0);
	ck_assert_int_eq(getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cred, &len), 0);
	ck_assert_int_eq(conn_new(f.server, sv[0], &cred, &f.conn), 0);
	conn_ref(f.conn);
	conn_client_init(&f.cl, &f.lf.f.loop, sv[1]);

	ck_assert_int_eq(token_create(&f.lf.rdma, f.conn->session, &f.token, &e), 0);
	f.token->export_id = EXPORT_ID;
	key = f.lf.key;
	memcpy(key.token, f.token->raw, TOKEN_BYTES);
	f.link = link_fixture_connect(&f.lf, key);
	ck_assert_uint_eq(f.lf.rdma.n_rconns, 1);
}

static void teardown(void)
{
	conn_client_done(&f.cl);
	if (f.conn && !f.conn->closed)
		conn_close(f.conn);
	f.conn = conn_unref(f.conn);
	LINK_RUN_UNTIL(&f.lf, f.link->finished);
	f.link = link_unref(f.link);
	server_stop_listening(f.server);
	server_stop_handles(f.server);
	/* The connection's memory and the server's handles go on the turns
	 * after their close. */
	for (unsigned i = 0; i < 10; i++)
		uv_run(&f.lf.f.loop, UV_RUN_NOWAIT);
	ck_assert(list_empty(&f.server->conns));
	f.server = server_free(f.server);
	ck_assert_int_eq(rmdir(f.dir), 0);
	counters_done(&f.lf.f.core.stats.calls);
	counters_done(&f.lf.f.core.stats.errors);
	f.lf.f.core.cfg.socket_path = (free(f.lf.f.core.cfg.socket_path), NULL);
	link_fixture_done(&f.lf);
	ck_assert_uint_eq(fake_verbs_dead_posts(), 0);
	fake_verbs_reset();
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
}

/* The one connection the endpoint admitted. */
static struct rconn *the_rconn(void)
{
	ck_assert_uint_eq(f.lf.rdma.n_rconns, 1);
	return list_first_entry(&f.lf.rdma.rconns, struct rconn, link);
}

/* The peer SENDs a notification of len bytes, tagged i, unsignaled: it
 * lands in a receive buffer at once (or when completions are released). */
static void peer_send(unsigned i, size_t len)
{
	static uint8_t data[NOTIFY_MAX];
	size_t off = (size_t)(i % SEND_SLOTS) * NOTIFY_MSG_MAX, posted = 0;
	struct vb_send_wr w;

	ck_assert_uint_le(len, NOTIFY_MAX);
	memset(data, 'a' + (int)(i % 26), len);
	if (len >= sizeof(i))
		memcpy(data, &i, sizeof(i));
	w = link_fixture_wr(&f.lf, VB_WR_SEND, i, off, 0,
			    (uint32_t)notify_msg_encode(f.lf.local.buf + off, EXPORT_ID, 2000, data,
							len),
			    false);
	ck_assert_int_eq(vb->qp_post_send(f.link->qp, &w, 1, &posted), 0);
}

static void client_send(const char *text)
{
	conn_client_write(&f.cl, text, strlen(text) + 1, NULL, 0, false);
}

static const char *client_next(void)
{
	const char *m = conn_client_next(&f.cl);

	ck_assert_msg(m, "the daemon hung up");
	return m;
}

/* How many notifications the reply m lists (and it is no error). */
static unsigned listed(const char *m)
{
	cJSON *root = cJSON_Parse(m), *list;
	unsigned n;

	ck_assert_msg(root, "not JSON: %s", m);
	ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(root, "error"), "an error: %s", m);
	list = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root,
										 "parameters"),
						"notifications");
	ck_assert_msg(cJSON_IsArray(list), "no notifications: %s", m);
	n = (unsigned)cJSON_GetArraySize(list);
	cJSON_Delete(root);
	return n;
}

/*
 * D1: a wait and, pipelined behind it in one write, the revoke of the
 * export's token. The arrival answers the wait inside the ring's
 * completion callback; the revoke, if it ran there, would destroy the QP
 * and the ring's connection while the callback still walks its batch (a
 * re-post on the destroyed QP, the next completion handed to the freed
 * connection). It must run on a later turn: every reply comes, in order,
 * and nothing is posted on a dead QP (the teardown checks).
 */
START_TEST(test_pipelined_revoke)
{
	char calls[512];
	int n;

	n = snprintf(calls, sizeof(calls),
		     "{\"method\":\"io.rdmamemd.WaitNotifications\",\"parameters\":"
		     "{\"timeout_ms\":20000}}%c"
		     "{\"method\":\"io.rdmamemd.RevokeAccessToken\",\"parameters\":"
		     "{\"token\":\"%s\"}}%c" PING,
		     0, f.token->hex, 0, "after");
	ck_assert_int_lt(n, (int)sizeof(calls));
	conn_client_write(&f.cl, calls, (size_t)n + 1, NULL, 0, false);
	LINK_RUN_UNTIL(&f.lf, f.conn->call && f.conn->n_calls == 1);

	/* Two in one batch of the receive CQ. */
	fake_verbs_hold_completions(true);
	peer_send(0, 10);
	peer_send(1, 10);
	fake_verbs_hold_completions(false);

	ck_assert_uint_eq(listed(client_next()), 1);
	ck_assert_str_eq(client_next(), "{\"parameters\":{}}");
	ck_assert_str_eq(client_next(), "{\"parameters\":{\"data\":\"after\"}}");
	ck_assert_uint_eq(f.lf.rdma.n_rconns, 0);
	ck_assert_uint_eq(fake_verbs_dead_posts(), 0);
	f.token = NULL;
}
END_TEST

/* The same, the client hanging up instead: the wait's answer finds the
 * connection closed, and nothing of the session goes from inside the
 * callback either. */
START_TEST(test_hangup_in_wait)
{
	client_send("{\"method\":\"io.rdmamemd.WaitNotifications\",\"parameters\":"
		    "{\"timeout_ms\":20000}}");
	LINK_RUN_UNTIL(&f.lf, f.conn->call != NULL);
	ck_assert_int_eq(shutdown(f.cl.fd, SHUT_RDWR), 0);
	fake_verbs_hold_completions(true);
	peer_send(0, 10);
	peer_send(1, 10);
	fake_verbs_hold_completions(false);
	LINK_RUN_UNTIL(&f.lf, f.conn->closed && f.lf.rdma.n_rconns == 0);
	ck_assert_uint_eq(fake_verbs_dead_posts(), 0);
	f.token = NULL;
}
END_TEST

/*
 * D9: a receive that cannot be posted again kills the ring; it stops
 * polling its channel (which stays readable as further completions come)
 * instead of waking the loop on every turn until the connection goes.
 */
START_TEST(test_dead_ring_stops)
{
	struct rconn *c = the_rconn();
	struct pollfd pfd = { .fd = vb->cq_fd(c->rx->watch.cq), .events = POLLIN };

	test_expect("notify_conn: the fake device refuses a receive (a warning)");
	fake_verbs_fail_recv(true);
	peer_send(0, 10);
	LINK_RUN_UNTIL(&f.lf, c->rx->dead);
	ck_assert(!uv_is_active((uv_handle_t *)&c->rx->watch.poll));
	/* Another lands in a buffer still posted: its event stays with the
	 * stopped channel. */
	peer_send(1, 10);
	for (unsigned i = 0; i < 20; i++)
		uv_run(&f.lf.f.loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(poll(&pfd, 1, 0), 1);
	ck_assert_uint_eq(c->rx->stats.received, 1);
	ck_assert_uint_eq(notify_queue_of(f.conn->session)->n, 1);
}
END_TEST

/*
 * D8: a peer that always has another SEND ready (each receive posted is
 * filled at once, FLOOD in all). The ring takes a bounded number per turn
 * and goes on on the next, so a Ping sent meanwhile is answered long
 * before the flood ends.
 */
#define FLOOD 200000U

START_TEST(test_flood_yields)
{
	struct rconn *c = the_rconn();
	uint8_t msg[NOTIFY_MSG_MAX];
	size_t len = notify_msg_encode(msg, EXPORT_ID, 2000, "flood", 5);
	unsigned left_at_pong;

	client_send("{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{\"data\":\"x\"}}");
	fake_verbs_flood(f.link->qp, msg, len, FLOOD);
	ck_assert_str_eq(client_next(), "{\"parameters\":{\"data\":\"x\"}}");
	left_at_pong = fake_verbs_flood_left();
	ck_assert_msg(left_at_pong > FLOOD / 2, "the Pong came after %u of %u receives",
		      FLOOD - left_at_pong, FLOOD);
	/* And the flood goes on by itself, to its end. */
	LINK_RUN_UNTIL(&f.lf, c->rx->stats.received == FLOOD);
	ck_assert_uint_eq(fake_verbs_flood_left(), 0);
	ck_assert_uint_eq(notify_queue_of(f.conn->session)->n, NOTIFY_QUEUE_MAX);
	ck_assert_uint_eq(notify_queue_of(f.conn->session)->dropped, FLOOD - NOTIFY_QUEUE_MAX);
}
END_TEST

/*
 * D10: a stream the client does not read. Arrivals stop moving into the
 * connection's queue once it holds RPC_CONTINUE_ROOM: they wait in the
 * session's bounded queue, and past it are dropped and counted; the
 * connection holds a bounded amount. When the client reads, the stream
 * resumes with what waited, then goes on with new arrivals.
 */
START_TEST(test_stream_unread)
{
	const unsigned total = 3 * NOTIFY_QUEUE_MAX, max = 16;
	/* A reply of max notifications of NOTIFY_MAX bytes, in base64. */
	const size_t reply_max = max * (NOTIFY_MAX / 3 + 1) * 4 + 4096;
	struct notify_queue *q;
	unsigned got = 0;
	char call[160];

	snprintf(call, sizeof(call),
		 "{\"method\":\"io.rdmamemd.WaitNotifications\",\"parameters\":{\"max\":%u},"
		 "\"more\":true}",
		 max);
	client_send(call);
	LINK_RUN_UNTIL(&f.lf, f.conn->call != NULL);
	for (unsigned i = 0; i < total; i++) {
		peer_send(i, NOTIFY_MAX);
		for (unsigned t = 0; t < 3; t++)
			uv_run(&f.lf.f.loop, UV_RUN_NOWAIT);
		ck_assert_uint_le(outq_pending(&f.conn->out), RPC_CONTINUE_ROOM + reply_max);
	}
	q = notify_queue_of(f.conn->session);
	ck_assert_uint_eq(q->n, NOTIFY_QUEUE_MAX);
	ck_assert_uint_gt(q->dropped, 0);
	ck_assert_uint_eq(f.remote.notify.stats.full, q->dropped);
	ck_assert(!f.conn->closed);

	/* The client reads: everything that was not dropped comes. */
	while (got < total - q->dropped) {
		const char *m = client_next();

		ck_assert_msg(strstr(m, "\"continues\":true"), "not a continuation: %.80s", m);
		got += listed(m);
	}
	ck_assert_uint_eq(got, total - q->dropped);
	ck_assert_uint_eq(q->n, 0);
	/* And then a new arrival, at once. */
	peer_send(total, 5);
	ck_assert_uint_eq(listed(client_next()), 1);
}
END_TEST

Suite *notify_conn_suite(void)
{
	Suite *su = suite_create("notify_conn");
	TCase *tc = tcase_create("notify_conn");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_pipelined_revoke);
	tcase_add_test(tc, test_hangup_in_wait);
	tcase_add_test(tc, test_dead_ring_stops);
	tcase_add_test(tc, test_flood_yields);
	tcase_add_test(tc, test_stream_unread);
	suite_add_tcase(su, tc);
	return su;
}
