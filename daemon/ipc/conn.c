/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/core/account.h"
#include "daemon/ipc/conn.h"
#include "daemon/core/core.h"
#include "daemon/core/json_arena.h"
#include "daemon/core/log.h"
#include "daemon/core/offload.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "daemon/rpc/rpc.h"
#include "daemon/ipc/server.h"
#include "daemon/core/session.h"

/* A client rejected for being over a limit gets this long to send its
 * first call and read the answer. */
#define CONN_REJECT_GRACE_MSEC 5000U

/*
 * Messages up to this size are parsed on the loop, larger ones on the pool:
 * the worst 16 KiB (an array of one-letter strings: a node and a string per
 * four bytes) parses in well under a millisecond, and 16 MiB in a second.
 */
#define CONN_PARSE_INLINE_MAX (16U * 1024U)
/* Replies from this size on leave in the buffer they were made in. */
#define CONN_SEND_BUFFER_MIN (64U * 1024U)
/* Replies up to about this size are printed into the output queue itself. */
#define CONN_PRINT_INLINE_MAX 2048U

/*
 * Input budgets (budget.h). What a client sends costs memory before it is
 * served: the connection's input buffer, which grows with a message still
 * arriving up to the 16 MiB message limit, then the message while it is
 * parsed and served (its buffer, then its tree). A client may leave a
 * message unfinished for as long as it likes, so without a bound one uid's
 * 1024 connections could make the daemon hold 16 GiB.
 *
 * So every connection's buffer counts against its uid's budget
 * (max-input-bytes-per-uid) and the daemon's (max-input-bytes), and so does a
 * message parsed on the pool from the moment it leaves the buffer until its
 * tree is freed (the tree is at most a few MiB more than the text: see
 * JSON_VALUES_MAX). A buffer may always grow to FRAME_BUFFER_INITIAL, which
 * holds every call but a large Write or Ping, so small calls never wait (the
 * connection caps bound what that adds up to). Beyond, a buffer grows only
 * within both budgets: a connection that would pass one is not read, its
 * sender's writes block, and it waits in line until room is freed; the
 * oldest waiter's pass lasts until its message is complete. And no message
 * holds room for long once its sender stops: input-stall-timeout after its
 * last byte arrived, the connection is dropped (conn_tick).
 *
 * Output budgets, the same for replies: a connection keeps taking calls
 * while its queue is under output_max, and a Read's reply is megabytes of
 * base64, so one uid's connections that never read could make the daemon
 * hold 11 MB each. So what every connection's queue holds counts against
 * its uid's budget (max-output-bytes-per-uid) and the daemon's
 * (max-output-bytes), and so does a large reply from before it is made: a
 * Read reserves its reply's size when the call comes (conn_output_reserve),
 * waiting in line while that would pass a budget, and gives it back when the
 * reply is queued (then the queue holds it) or not made. A connection takes
 * no new call while its uid is over a budget, unless it holds nothing at all
 * (its queue empty, nothing reserved): the one small reply that comes of it
 * is bounded, as above, by the connection caps. The oldest waiter's pass is
 * for one reply, until it has left the queue. A client that does not read
 * what it holds is dropped after output-stall-timeout (conn_tick).
 */

/*
 * A message parsed on the pool: its buffer (detached from the frame reader,
 * so that megabytes are neither copied nor kept), then what parsing made.
 * The connection serves nothing else meanwhile, so calls stay in order.
 * msg.charge counts the buffer against the input budgets from detach until
 * the tree made of it is freed.
 */
struct conn_parse {
	struct offload_job job;
	struct conn *conn; /* a reference */
	char *buf;         /* holds text; freed by run (by done if cancelled) */
	const char *text;
	size_t len;
	int fds[VARLINK_FDS_MAX];
	size_t n_fds;
	struct rpc_message msg;
	const char *reason;
	int r;
};

static void conn_update_poll(struct conn *c);
static void conn_process(struct conn *c);
static void conn_serve_later(struct conn *c);
static void conn_serve_queued(uv_check_t *h);
static void on_poll(uv_poll_t *h, int status, int events);

static struct fd_batch *in_fds_at(struct conn *c, unsigned i)
{
	return &c->in_fds[(c->in_fds_first + i) % CONN_FD_BATCHES_MAX];
}

static void in_fds_drop_first(struct conn *c)
{
	struct fd_batch *b = in_fds_at(c, 0);

	/* A batch over the limit had its fds closed when it came. */
	if (b->n_fds <= VARLINK_FDS_MAX)
		close_many(b->fds, b->n_fds);
	c->in_fds_first = (c->in_fds_first + 1) % CONN_FD_BATCHES_MAX;
	c->n_in_fds--;
}

static struct conn *conn_free(struct conn *c)
{
	idseq_remove(&c->server->conn_order, &c->order);
	frame_reader_done(&c->in);
	while (c->n_in_fds > 0)
		in_fds_drop_first(c);
	outq_done(&c->out);
	if (c->session) {
		budget_sub(c->session->account, BUDGET_INPUT, c->in_charged);
		budget_sub(c->session->account, BUDGET_OUTPUT, c->out_charged);
	}
	safe_close(c->fd);
	session_unref(c->session);
	free(c);
	return NULL;
}

struct conn *conn_ref(struct conn *c)
{
	if (c)
		c->n_ref++;
	return c;
}

struct conn *conn_unref(struct conn *c)
{
	if (!c || --c->n_ref > 0)
		return NULL;
	return conn_free(c);
}

static void on_poll_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

/* Counts c's input buffer as it is now. */
static void conn_input_recharge(struct conn *c)
{
	budget_recharge(c->session->account, BUDGET_INPUT, &c->in_charged, c->in.cap);
}

/*
 * Makes room in c's input buffer for the next read, growing it when it must
 * and the budgets allow. Returns 0, -EAGAIN when they do not allow it now,
 * -ENOBUFS when a message at the size limit fills the buffer, -ENOMEM.
 */
static int conn_input_reserve(struct conn *c, void **ret_ptr, size_t *ret_space)
{
	size_t grow = frame_reader_growth(&c->in);
	int r;

	if (grow > 0 && c->in.cap + grow > FRAME_BUFFER_INITIAL &&
	    !budget_admit(c->session, &c->wait[BUDGET_INPUT], BUDGET_INPUT, grow))
		return -EAGAIN;
	r = frame_reader_reserve(&c->in, ret_ptr, ret_space);
	conn_input_recharge(c);
	return r;
}

/* Counts c's output queue and reservation as they are now. The pass was
 * for one reply: it is given back once c holds nothing. */
static void conn_output_recharge(struct conn *c)
{
	budget_recharge(c->session->account, BUDGET_OUTPUT, &c->out_charged,
			outq_held(&c->out) + c->out_reserved);
	if (outq_pending(&c->out) == 0 && c->out_reserved == 0)
		budget_unexempt(c->session, &c->wait[BUDGET_OUTPUT], BUDGET_OUTPUT);
}

/* Reserves bytes for c's call in progress if the budgets allow it now. */
static bool conn_output_try_reserve(struct conn *c, uint64_t bytes)
{
	if (!budget_admit(c->session, &c->wait[BUDGET_OUTPUT], BUDGET_OUTPUT, bytes))
		return false;
	c->out_reserved += bytes;
	conn_output_recharge(c);
	return true;
}

int conn_output_reserve(struct conn *c, uint64_t bytes)
{
	if (conn_output_try_reserve(c, bytes))
		return 1;
	budget_wait(c->session, &c->wait[BUDGET_OUTPUT], BUDGET_OUTPUT, bytes);
	return 0;
}

void conn_output_unreserve(struct conn *c, uint64_t bytes)
{
	c->out_reserved -= bytes;
	conn_output_recharge(c);
}

/* A connection waiting for room: not read, and no call taken. */
static bool conn_held_back(const struct conn *c)
{
	return c->wait[BUDGET_INPUT].waiting || c->wait[BUDGET_OUTPUT].waiting;
}

void conn_close(struct conn *c)
{
	struct server *s = c->server;

	if (c->closed)
		return;
	c->closed = true;

	log_full_fields(LOG_DEBUG, 0, LOG_CLIENT(&c->session->cred),
			"Connection %" PRIu64 " (pid %d uid %u) closed after %" PRIu64 " calls",
			c->id, (int)c->session->cred.pid, (unsigned)c->session->cred.uid,
			c->n_calls);

	/*
	 * Unlinked, but keeping its own pointers: the daemon walks its
	 * connections closing or draining them, and closing one can finish a
	 * call on the next (a lease released grants its lock), which then
	 * closes too. The walk, already holding that next one, must get past
	 * it; a self-linked entry would hold it there forever. The memory
	 * stays until the poll handle's close callback, after the walk.
	 */
	c->link.prev->next = c->link.next;
	c->link.next->prev = c->link.prev;
	idseq_remove(&s->conn_order, &c->order);
	if (c->reject) {
		s->n_rejected--;
		c->session->account->n_rejected--;
	} else {
		s->n_conns--;
		c->session->account->n_connections--;
	}

	for (unsigned k = 0; k < BUDGET_KINDS; k++) {
		budget_unwait(&c->wait[k]);
		budget_unexempt(c->session, &c->wait[k], k);
	}

	/* The call in progress keeps the connection alive through its own
	 * reference; tell it nobody waits for the answer any more. A message
	 * still waiting for its turn to be parsed is dropped unparsed. */
	if (c->call)
		rpc_call_cancel(c->call);
	if (c->parse)
		offload_cancel(&c->parse->job);

	/* What the client held goes, in the session's teardown order
	 * (session.h): remote access, leases, regions. */
	session_close(c->session);

	uv_close((uv_handle_t *)&c->poll, on_poll_closed);
	server_conn_removed(s);
}

static bool conn_output_full(const struct conn *c)
{
	return outq_pending(&c->out) >= c->server->core->cfg.output_max;
}

/* Whether c's uid's replies leave c room for another call (see the output
 * budgets above): c holds nothing, or its uid is within the budgets. */
static bool conn_output_room(const struct conn *c)
{
	return (outq_pending(&c->out) == 0 && c->out_reserved == 0) ||
	       budget_has_room(c->session, BUDGET_OUTPUT, 0);
}

/* Whether c may take another call as far as its replies go; if the output
 * budgets hold it back, it waits in line (a flush of its own makes room
 * too: conn_process asks again). */
static bool conn_output_admits(struct conn *c)
{
	if (conn_output_full(c))
		return false;
	if (conn_output_room(c)) {
		budget_unwait(&c->wait[BUDGET_OUTPUT]);
		return true;
	}
	budget_wait(c->session, &c->wait[BUDGET_OUTPUT], BUDGET_OUTPUT, 0);
	return false;
}

/* A call in progress, or the message that becomes the next one is being
 * parsed: the connection takes no other message meanwhile. */
static bool conn_busy(const struct conn *c)
{
	return c->call || c->parse;
}

/* Whether the connection could take input but for a call in progress. */
static bool conn_may_read(const struct conn *c)
{
	return !c->draining && !c->close_after_flush && !c->input_eof && !conn_output_full(c) &&
	       !conn_held_back(c);
}

static bool conn_wants_input(const struct conn *c)
{
	return !conn_busy(c) && conn_may_read(c);
}

static void conn_flush(struct conn *c)
{
	int r;

	if (c->closed || outq_pending(&c->out) == 0)
		return;

	r = outq_flush(&c->out, c->fd);
	conn_output_recharge(c);
	if (r < 0) {
		log_debug_errno(r, "Connection %" PRIu64 ": write failed: %m", c->id);
		conn_close(c);
		return;
	}
	if (r > 0)
		c->out_stalled_since = 0;
	else if (!c->out_stalled_since)
		c->out_stalled_since = uv_now(c->server->core->loop);
}

static void conn_update_poll(struct conn *c)
{
	int events = 0, r;

	if (c->closed)
		return;
	if (conn_wants_input(c)) {
		events |= UV_READABLE;
		/* Reading (again): a message left unfinished is timed from
		 * now, not from before the daemon stopped reading. */
		if (!c->reading)
			c->in_since = uv_now(c->server->core->loop);
		c->reading = true;
	} else {
		c->reading = false;
	}
	if (!conn_busy(c))
		c->input_while_busy = false;
	else if (conn_may_read(c) && !c->input_while_busy)
		/* A call in progress stops reading, but the poll keeps
		 * asking for input until some comes (on_poll()): a client
		 * that waits for its answer sends none, and each change of
		 * the poll costs two epoll_ctl() calls, four a call that
		 * goes to the pool. */
		events |= c->poll_events & UV_READABLE;
	if (!c->close_after_flush && !c->input_eof && !conn_held_back(c))
		events |= UV_DISCONNECT;
	else if (conn_busy(c) || conn_held_back(c))
		/* Half-closed by the peer while a call runs or waits, or
		 * while the bytes it sent wait for room: RDHUP is
		 * level-triggered and would spin (and a waiting connection
		 * has yet to read what came before the end), but the full
		 * hang-up must still end the call and release what the client
		 * held. epoll reports HUP whatever is asked for; a Unix socket
		 * never has urgent data, so asking for that wakes us for HUP
		 * only. */
		events |= UV_PRIORITIZED;
	if (outq_pending(&c->out) > 0 && !list_linked(&c->later))
		events |= UV_WRITABLE;
	if (events == c->poll_events)
		return;

	r = events ? uv_poll_start(&c->poll, events, on_poll) : uv_poll_stop(&c->poll);
	if (r < 0) {
		log_warning("Connection %" PRIu64 ": cannot poll: %s", c->id, uv_strerror(r));
		conn_close(c);
		return;
	}
	c->poll_events = events;
}

int conn_send(struct conn *c, const char *text, size_t len, int *fds, size_t n_fds)
{
	int r;

	if (c->closed)
		return 0;
	r = outq_push(&c->out, text, len, fds, n_fds);
	conn_output_recharge(c);
	return r;
}

int conn_send_buffer(struct conn *c, char *text, size_t len)
{
	int r;

	if (c->closed) {
		free(text);
		return 0;
	}
	r = outq_push_buffer(&c->out, text, len);
	if (r < 0)
		free(text);
	conn_output_recharge(c);
	return r;
}

int conn_send_json(struct conn *c, const cJSON *msg)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	char *p;
	int r;

	if (c->closed)
		return 0;
	/* Most replies are printed straight into the queue; one that does
	 * not fit there is printed on its own (cJSON says it may want a few
	 * bytes more than it writes, hence the margin). */
	r = outq_reserve(&c->out, CONN_PRINT_INLINE_MAX, &p);
	if (r < 0)
		return r;
	if (cJSON_PrintPreallocated((cJSON *)msg, p, CONN_PRINT_INLINE_MAX + 1, false)) {
		outq_commit(&c->out, strlen(p));
		conn_output_recharge(c);
		return 0;
	}
	text = cJSON_PrintUnformatted(msg);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	/* Small replies are coalesced, large ones queued as they are. */
	if (len >= CONN_SEND_BUFFER_MIN)
		return conn_send_buffer(c, TAKE_PTR(text), len);
	return conn_send(c, text, len, NULL, 0);
}

/* Answers a message that never became a call. */
static void conn_protocol_error(struct conn *c, const char *name, const char *message)
{
	_cleanup_json_ cJSON *msg = cJSON_CreateObject();
	cJSON *params;

	counters_bump(&c->server->core->stats.errors, name, false);
	log_full_fields(LOG_DEBUG, 0, LOG_CLIENT(&c->session->cred),
			"Connection %" PRIu64 " (pid %d): %s: %s", c->id, (int)c->session->cred.pid,
			name, message);
	if (!msg || json_add_string(msg, "error", name) < 0)
		goto fail;
	params = cJSON_AddObjectToObject(msg, "parameters");
	if (!params || json_add_string(params, "message", message) < 0)
		goto fail;
	if (conn_send_json(c, msg) >= 0)
		return;
fail:
	c->close_after_flush = true;
}

/*
 * Moves the fds that arrived with message ordinal into fds and returns how
 * many arrived (more than VARLINK_FDS_MAX: none are kept); closes the batches
 * of messages before it, which were never taken.
 */
static size_t conn_take_in_fds(struct conn *c, uint64_t ordinal, int *fds)
{
	struct fd_batch *b;
	size_t n;

	while (c->n_in_fds > 0 && in_fds_at(c, 0)->ordinal < ordinal)
		in_fds_drop_first(c);
	if (c->n_in_fds == 0 || in_fds_at(c, 0)->ordinal != ordinal)
		return 0;
	b = in_fds_at(c, 0);
	n = b->n_fds;
	if (n <= VARLINK_FDS_MAX)
		memcpy(fds, b->fds, n * sizeof(int));
	b->n_fds = 0;
	in_fds_drop_first(c);
	return n;
}

/* Queues the fds of one read for message ordinal (FRAME_NO_START: the read
 * started no message). Takes the fds. */
static int conn_add_in_fds(struct conn *c, uint64_t ordinal, int *fds, size_t n_fds)
{
	struct fd_batch *b;

	/* fds ride on the first byte of their message: a read that began
	 * none carries a batch the sender sent in the middle of a message. */
	if (ordinal == FRAME_NO_START || c->n_in_fds == CONN_FD_BATCHES_MAX) {
		close_many(fds, n_fds);
		return -EBADMSG;
	}
	b = in_fds_at(c, c->n_in_fds++);
	b->ordinal = ordinal;
	b->n_fds = n_fds;
	/* A batch over the limit is refused when its message is taken; its
	 * fds need not wait for that. */
	if (n_fds > VARLINK_FDS_MAX)
		close_many(fds, n_fds);
	else
		memcpy(b->fds, fds, n_fds * sizeof(int));
	return 0;
}

/*
 * Answers a message without looking at it when the connection takes no
 * calls: refused over a limit, or the daemon shutting down (whether or not
 * the drain reached this connection yet: a call finishing on another one
 * may have let this one go on). Closes fds then.
 */
static bool conn_refuse_calls(struct conn *c, int *fds, size_t n_fds)
{
	if (!c->reject && !c->draining && !c->server->core->shutting_down)
		return false;
	close_many(fds, n_fds);
	conn_protocol_error(c, c->reject ?: RDMAMEM_ERROR_SHUTTING_DOWN,
			    c->reject ? "the daemon is at its connection limit, try again later" :
					"the daemon is shutting down");
	c->close_after_flush = c->close_after_flush || c->reject;
	return true;
}

/* The call in progress is over: frees it, which lets go of its reference
 * on the connection (the last one, perhaps, of a closed connection). */
static void conn_call_free(struct conn *c)
{
	c->room_wanted = false;
	c->call = rpc_call_free(c->call);
	conn_unref(c);
}

static void conn_call_finished(struct conn *c);

/*
 * A message queued outside conn_process(): a deferred call's reply with
 * "continues" (a transfer's progress, a notification on a stream), made
 * from another callback of the loop. Nothing else writes it until the
 * connection's next event (the call's final reply): it leaves after this
 * turn's I/O. Not at once from here: a failed write closes the connection,
 * which cancels the call, whose caller is in the middle of its own callback.
 */
static int conn_queued(struct conn *c, int r)
{
	if (!c->processing)
		conn_serve_later(c);
	return r;
}

static int transport_send_json(void *owner, const cJSON *msg)
{
	return conn_queued(owner, conn_send_json(owner, msg));
}

static int transport_send_buffer(void *owner, char *text, size_t len)
{
	return conn_queued(owner, conn_send_buffer(owner, text, len));
}

static int transport_send_text(void *owner, const char *text, size_t len)
{
	return conn_queued(owner, conn_send(owner, text, len, NULL, 0));
}

static int transport_reserve(void *owner, uint64_t bytes)
{
	return conn_output_reserve(owner, bytes);
}

static void transport_unreserve(void *owner, uint64_t bytes)
{
	conn_output_unreserve(owner, bytes);
}

/*
 * A deferred call ended. Inside conn_process() (a cancel, a reply made at
 * once), the connection goes on from there. From any other callback of the
 * loop (a completion queue's, a timer's, the pool's), the next call waits
 * until that callback is over: run now, it could tear down what the
 * callback is in the middle of (a pipelined RevokeAccessToken destroys the
 * queue pair whose receive answered a WaitNotifications; a failed write
 * closes the session). The connection is served again after this turn's
 * I/O, its reply with the others.
 */
static void transport_ended(void *owner, struct rpc_call *call)
{
	struct conn *c = owner;

	assert(c->call == call);
	if (c->processing) {
		conn_call_finished(c);
		return;
	}
	conn_ref(c);
	conn_call_free(c);
	conn_serve_later(c);
	conn_unref(c);
}

static bool transport_room(void *owner)
{
	struct conn *c = owner;

	if (outq_pending(&c->out) < RPC_CONTINUE_ROOM)
		return true;
	c->room_wanted = true;
	return false;
}

/* The call's stream waits for room (transport_room()): once a flush made
 * it, the stream goes on. */
static void conn_stream_room(struct conn *c)
{
	if (!c->room_wanted || !c->call || c->closed || outq_pending(&c->out) >= RPC_CONTINUE_ROOM)
		return;
	c->room_wanted = false;
	rpc_call_room(c->call);
}

/* How the rpc layer answers this connection's calls and tells it a deferred
 * one ended. */
static const struct rpc_transport conn_transport = {
	.send_json = transport_send_json,
	.send_buffer = transport_send_buffer,
	.send_text = transport_send_text,
	.reserve = transport_reserve,
	.unreserve = transport_unreserve,
	.ended = transport_ended,
	.room = transport_room,
};

/* Makes a parsed message a call and runs it. Takes m's contents and fds. */
static void conn_dispatch(struct conn *c, struct rpc_message *m, int *fds, size_t n_fds)
{
	struct rpc_call *call;
	int r;

	r = rpc_call_new(&conn_transport, c, c->session, c->server->rpc, m, fds, n_fds,
			 &c->call_storage, &call);
	if (r < 0) {
		conn_protocol_error(c, RDMAMEM_ERROR_INTERNAL, "out of memory");
		return;
	}
	/* The call holds a reference until it is freed: a deferred one may
	 * outlive conn_close(). */
	c->call = call;
	conn_ref(c);
	c->n_calls++;
	if (rpc_dispatch(call))
		return;
	conn_call_free(c);
}

static void conn_parse_run(struct offload_job *j)
{
	struct conn_parse *p = container_of(j, struct conn_parse, job);

	p->msg.big = true;
	p->r = json_parse_bounded(p->text, p->len, JSON_VALUES_MAX, &p->msg.root, &p->reason);
	if (p->r == 0)
		p->r = varlink_call_parse(p->msg.root, &p->msg.vc, &p->reason);
	if (p->r == 0 && rpc_message_measure(&p->msg) < 0) {
		p->r = -ENOMEM;
		p->reason = "out of memory";
	}
	/* The tree holds copies of what it needs. */
	p->buf = (free(p->buf), NULL);
	p->text = NULL;
}

static void conn_parse_done(struct offload_job *j)
{
	struct conn_parse *p = container_of(j, struct conn_parse, job);
	struct conn *c = p->conn;

	c->parse = NULL;
	/* Still here if cancelled before it ran. */
	free(p->buf);
	if (c->closed) {
		rpc_message_done(c->server->rpc, &p->msg);
		close_many(p->fds, p->n_fds);
	} else if (p->r < 0) {
		rpc_message_done(c->server->rpc, &p->msg);
		close_many(p->fds, p->n_fds);
		conn_protocol_error(c, RDMAMEM_ERROR_INVALID_MESSAGE, p->reason);
	} else if (conn_refuse_calls(c, p->fds, p->n_fds)) {
		/* Shutdown began while it was parsed: it had not started. */
		rpc_message_done(c->server->rpc, &p->msg);
	} else {
		conn_dispatch(c, &p->msg, p->fds, p->n_fds);
	}
	free(p);
	/* Go on with the messages behind it (conn_process holds a reference
	 * of its own: this one may be the last). */
	if (!c->closed)
		conn_process(c);
	conn_unref(c);
}

/* Hands f to the pool with its fds; the connection waits for it. */
static int conn_parse_on_pool(struct conn *c, const struct frame *f, int *fds, size_t n_fds)
{
	struct conn_parse *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	r = frame_reader_detach(&c->in, f, &p->buf);
	if (r < 0) {
		free(p);
		return r;
	}
	/* What the buffer was charged now counts for the message, and the new
	 * one is charged; the message is complete, so c needs no pass. */
	p->msg.charge = (struct budget_charge){ account_ref(c->session->account), BUDGET_INPUT,
						c->in_charged };
	c->in_charged = 0;
	conn_input_recharge(c);
	budget_unexempt(c->session, &c->wait[BUDGET_INPUT], BUDGET_INPUT);
	p->text = f->data;
	p->len = f->len;
	p->n_fds = n_fds;
	memcpy(p->fds, fds, n_fds * sizeof(int));
	p->conn = conn_ref(c);
	p->job.run = conn_parse_run;
	p->job.done = conn_parse_done;
	c->parse = p;
	offload_submit(c->server->core->offload, &p->job);
	return 0;
}

static void conn_handle_message(struct conn *c, const struct frame *f)
{
	struct rpc_message m = {};
	int fds[SOCKIO_FDS_MAX];
	const char *reason;
	size_t n_fds;
	int r;

	n_fds = conn_take_in_fds(c, f->ordinal, fds);
	if (n_fds > VARLINK_FDS_MAX) {
		conn_protocol_error(c, RDMAMEM_ERROR_TOO_MANY_FDS,
				    "a message may carry at most 16 file descriptors");
		return;
	}

	if (conn_refuse_calls(c, fds, n_fds))
		return;

	if (f->len > CONN_PARSE_INLINE_MAX) {
		r = conn_parse_on_pool(c, f, fds, n_fds);
		if (r < 0) {
			close_many(fds, n_fds);
			conn_protocol_error(c, RDMAMEM_ERROR_INTERNAL, "out of memory");
		}
		return;
	}

	/* The tree goes into a slot of its own (json_arena.h), given back
	 * with it. */
	m.slot = json_slot_take();
	json_slot_enter(m.slot);
	r = json_parse_bounded(f->data, f->len, JSON_VALUES_MAX, &m.root, &reason);
	json_slot_leave();
	if (r == 0)
		r = varlink_call_parse(m.root, &m.vc, &reason);
	if (r < 0) {
		cJSON_Delete(m.root);
		json_slot_give(m.slot);
		close_many(fds, n_fds);
		conn_protocol_error(c, RDMAMEM_ERROR_INVALID_MESSAGE, reason);
		return;
	}
	conn_dispatch(c, &m, fds, n_fds);
}

/* A deferred call ended: free it and go on with the next. */
static void conn_call_finished(struct conn *c)
{
	/* The call may hold the last reference of a closed connection. */
	conn_ref(c);
	conn_call_free(c);
	if (!c->closed)
		conn_process(c);
	conn_unref(c);
}

/*
 * Serves buffered calls until one goes asynchronous, the output queue fills
 * (or the output budgets hold the connection back) or the input runs dry,
 * and hangs up once nothing is left to do.
 */
static void conn_process(struct conn *c)
{
	/* Hold a reference: a handler may close the connection. */
	struct conn *ref = conn_ref(c);
	bool frames_left = true;
	unsigned n_served = 0;

	c->processing++;

	for (;;) {
		while (!c->closed && !conn_busy(c) && !c->close_after_flush &&
		       conn_output_admits(c)) {
			struct frame f;
			int r = frame_reader_next(&c->in, &f);

			if (r == 0) {
				frames_left = false;
				break;
			}
			if (r < 0) {
				conn_protocol_error(c, RDMAMEM_ERROR_MESSAGE_TOO_LARGE,
						    "a message may be at most 16 MiB");
				c->close_after_flush = true;
				break;
			}
			conn_handle_message(c, &f);
			n_served++;
		}
		/* Pipelined calls' replies leave once every ready socket was
		 * read (conn_serve_later()). */
		if (n_served > 1 && !c->server->serving_later && outq_pending(&c->out) > 0) {
			conn_serve_later(c);
			break;
		}
		conn_flush(c);
		conn_stream_room(c);
		/* Loop again only if the flush made room for more calls. */
		if (c->closed || conn_busy(c) || c->close_after_flush || !frames_left ||
		    !conn_output_admits(c))
			break;
	}

	if (!c->closed && !conn_busy(c) && outq_pending(&c->out) == 0 &&
	    (c->close_after_flush || ((c->input_eof || c->draining) && !frames_left)))
		conn_close(c);

	c->processing--;
	conn_update_poll(c);
	conn_unref(ref);
}

/*
 * The replies to pipelined calls (more than one served in a pass) leave
 * after the loop's I/O, not as each connection's calls are served, as
 * redis-server writes its replies before it sleeps. A reply written at once
 * wakes its client while the calls of other clients still wait to be read;
 * where clients share the daemon's CPU, the woken client takes it over, and
 * the daemon serves one connection per time it runs. Written after every
 * ready socket was read, the replies leave together: 8 clients with 16
 * calls in flight each, all on one CPU, switched the daemon out 0.91 times
 * per 16 calls before and 0.41 after, and made 31% more calls a second
 * (redis-server: 0.46; build machine).
 *
 * A single call is answered at once: its client waits for each reply, and
 * held back, the reply would wait for every other ready connection's calls
 * (8 such clients on other CPUs than the daemon's: 269k calls a second,
 * p50 26 us, answered at once; 222k, p50 43 us, held back; H100 machine).
 *
 * The calls a deferred one held up go on at this point too, once the
 * callback that ended it is over, and so do the replies a deferred call
 * streams.
 *
 * c waits in server->later, holding a reference, until later_check runs
 * after this turn's poll. later_idle makes that turn's poll return at once
 * when c was queued before it (a timer's callback), and costs nothing
 * otherwise: it is stopped with the check.
 */
/* Only there to keep the loop from sleeping (conn_serve_later()). */
static void on_later_idle(uv_idle_t *h)
{
	(void)h;
}

static void conn_serve_later(struct conn *c)
{
	struct server *s = c->server;

	if (c->closed || list_linked(&c->later))
		return;
	if (list_empty(&s->later)) {
		uv_check_start(&s->later_check, conn_serve_queued);
		uv_idle_start(&s->later_idle, on_later_idle);
	}
	list_add_tail(&c->later, &s->later);
	conn_ref(c);
}

static void conn_serve_queued(uv_check_t *h)
{
	struct server *s = h->data;

	/* Served now, a connection flushes at once; one served here may
	 * queue another (a call ending a call of another client): it is
	 * served in the same pass. */
	s->serving_later = true;
	while (!list_empty(&s->later)) {
		struct conn *c = list_first_entry(&s->later, struct conn, later);

		list_del(&c->later);
		if (!c->closed)
			conn_process(c);
		conn_unref(c);
	}
	s->serving_later = false;
	uv_check_stop(&s->later_check);
	uv_idle_stop(&s->later_idle);
}

void conn_serve_later_init(struct server *s)
{
	list_init(&s->later);
	(void)uv_check_init(s->core->loop, &s->later_check);
	(void)uv_idle_init(s->core->loop, &s->later_idle);
	s->later_check.data = s;
}

void conn_serve_later_stop(struct server *s)
{
	/* Closing the last connection may come before the check that would
	 * have let go of it. */
	while (!list_empty(&s->later)) {
		struct conn *c = list_first_entry(&s->later, struct conn, later);

		assert(c->closed);
		list_del(&c->later);
		conn_unref(c);
	}
	core_close_handle((uv_handle_t *)&s->later_check);
	core_close_handle((uv_handle_t *)&s->later_idle);
}

static void conn_read(struct conn *c)
{
	int fds[SOCKIO_FDS_MAX];
	size_t n_fds, space;
	uint64_t started;
	void *p;
	ssize_t n;
	int r;

	r = conn_input_reserve(c, &p, &space);
	if (r == -EAGAIN) {
		/* Stops reading c until its buffer may grow. */
		budget_wait(c->session, &c->wait[BUDGET_INPUT], BUDGET_INPUT, 0);
		conn_update_poll(c);
		return;
	}
	if (r == -ENOBUFS) {
		/* A message at the size limit and still no terminator. */
		conn_process(c);
		return;
	}
	if (r < 0) {
		log_error_errno(r, "Connection %" PRIu64 ": cannot grow input buffer: %m", c->id);
		conn_close(c);
		return;
	}

	n = sockio_recv(c->fd, p, space, fds, &n_fds, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n < 0) {
		log_debug_errno((int)n, "Connection %" PRIu64 ": read failed: %m", c->id);
		conn_close(c);
		return;
	}
	if (n == 0) {
		/* End of input: answer what was asked, then hang up. */
		close_many(fds, n_fds);
		c->input_eof = true;
		conn_process(c);
		return;
	}

	c->in_since = uv_now(c->server->core->loop);
	started = frame_reader_commit(&c->in, n);
	if (n_fds > 0 && conn_add_in_fds(c, started, fds, n_fds) < 0) {
		/* fds amid a message: the sender does not send each message
		 * with one sendmsg, and the stream cannot say which message
		 * they are for. Every message before this one was taken
		 * before this read. */
		conn_protocol_error(c, RDMAMEM_ERROR_INVALID_MESSAGE,
				    "file descriptors must be sent with the first byte of their "
				    "message, once per message");
		c->close_after_flush = true;
	}
	conn_process(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct conn *c = h->data;

	if (status < 0) {
		log_debug("Connection %" PRIu64 ": poll error: %s", c->id, uv_strerror(status));
		conn_close(c);
		return;
	}
	if (events & UV_READABLE) {
		if (!c->reading) {
			/* Input while a call runs (the poll still asked for
			 * it): stop asking until the call ends. A hang-up
			 * comes again without it, level-triggered. */
			c->input_while_busy = true;
			conn_update_poll(c);
			return;
		}
		conn_read(c);
		return;
	}
	if (events & (UV_DISCONNECT | UV_PRIORITIZED)) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };

		/* Not reading right now (a call is in progress). A full hang-up
		 * means nobody waits for the answer; a mere shutdown(SHUT_WR)
		 * still wants its replies. */
		if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR))) {
			conn_close(c);
			return;
		}
		if (events & UV_DISCONNECT)
			c->input_eof = true;
	}
	/* Writable, or the peer stopped sending: flush and serve what the
	 * output limit held back. */
	conn_process(c);
}

/* Shares to a gid reach members through any of their groups. Without the
 * list (old kernels), only the primary gid counts: returns NULL. */
static gid_t *conn_read_groups(int fd, size_t *ret_n)
{
	socklen_t len = 0;
	gid_t *groups;

	*ret_n = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, NULL, &len) == 0 || errno != ERANGE ||
	    len == 0)
		return NULL;
	groups = malloc(len);
	if (!groups)
		return NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		free(groups);
		return NULL;
	}
	*ret_n = len / sizeof(gid_t);
	return groups;
}

int conn_new(struct server *s, int fd, const struct ucred *cred, struct conn **ret)
{
	struct core *core = s->core;
	struct account *a;
	struct conn *c;
	size_t n_groups;
	gid_t *groups;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c) {
		safe_close(fd);
		return -ENOMEM;
	}
	c->n_ref = 1;
	c->fd = fd;
	c->server = s;
	c->id = ++s->next_conn_id;
	idseq_node_init(&c->order);
	for (unsigned k = 0; k < BUDGET_KINDS; k++) {
		c->wait[k].owner = c;
		list_init(&c->wait[k].link);
	}
	frame_reader_init(&c->in, VARLINK_BODY_MAX);
	outq_init(&c->out);
	list_init(&c->link);
	list_init(&c->later);

	groups = conn_read_groups(fd, &n_groups);
	a = account_get(core->accounts, cred->uid);
	r = a ? session_new(c->id, cred, groups, n_groups, a, &c->session) : -ENOMEM;
	if (!a)
		free(groups);
	account_unref(a);
	if (r < 0 || idseq_add(&s->conn_order, c->id, &c->order) < 0) {
		conn_free(c);
		return -ENOMEM;
	}

	r = uv_poll_init(core->loop, &c->poll, fd);
	if (r < 0) {
		conn_free(c);
		return -ENOMEM;
	}
	c->poll.data = c;
	r = uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, on_poll);
	if (r < 0) {
		/* The handle is initialised: it must be closed, and the
		 * connection freed in its close callback. */
		c->closed = true;
		uv_close((uv_handle_t *)&c->poll, on_poll_closed);
		return -EIO;
	}
	c->poll_events = UV_READABLE | UV_DISCONNECT;
	c->reading = true;

	list_add_tail(&c->link, &s->conns);
	s->n_conns++;
	c->session->account->n_connections++;

	log_full_fields(LOG_DEBUG, 0, LOG_CLIENT(cred),
			"Connection %" PRIu64 " from pid %d uid %u gid %u", c->id, (int)cred->pid,
			(unsigned)cred->uid, (unsigned)cred->gid);
	*ret = c;
	return 0;
}

void conn_budget_retry(void *conn, enum budget_kind k)
{
	struct conn *c = conn;
	uint64_t want = c->wait[k].want;
	size_t space;
	void *p;

	switch (k) {
	case BUDGET_INPUT:
		/* Another error comes again from the read, which handles it. */
		if (conn_input_reserve(c, &p, &space) == -EAGAIN)
			return;
		budget_unwait(&c->wait[k]);
		conn_update_poll(c);
		return;
	case BUDGET_OUTPUT:
		if (want == 0) {
			/* Waiting to take its next call. */
			if (!conn_output_room(c))
				return;
			budget_unwait(&c->wait[k]);
			conn_process(c);
			return;
		}
		/* The call in progress waits to reserve its reply. */
		if (!conn_output_try_reserve(c, want))
			return;
		budget_unwait(&c->wait[k]);
		rpc_call_reserved(c->call, want);
		return;
	case BUDGET_KINDS:
		break;
	}
}

void conn_reject(struct conn *c, const char *error_name)
{
	if (c->reject)
		return;
	c->reject = error_name;
	c->server->n_conns--;
	c->session->account->n_connections--;
	c->server->n_rejected++;
	c->session->account->n_rejected++;
	c->out_stalled_since = uv_now(c->server->core->loop);
}

void conn_drain(struct conn *c)
{
	if (c->closed || c->draining)
		return;
	c->draining = true;
	if (!conn_busy(c))
		conn_process(c);
}

/* Drops c, which stopped reading or sending (what it did, for sec seconds):
 * said at notice, at most once per interval with a count of the rest. */
static void conn_drop_stalled(struct conn *c, uint64_t now, const char *what, unsigned sec)
{
	unsigned held_back;

	if (ratelimit_pass(&c->server->stall_log, now, &held_back))
		log_full_fields(LOG_NOTICE, 0, LOG_CLIENT(&c->session->cred),
				"Connection %" PRIu64 " (pid %d uid %u) %s for %us, disconnecting "
				"(%u more stalled clients dropped since the last message)",
				c->id, (int)c->session->cred.pid, (unsigned)c->session->cred.uid,
				what, sec, held_back);
	conn_close(c);
}

void conn_tick(struct conn *c, uint64_t now)
{
	const struct daemon_config *cfg = &c->server->core->cfg;
	char what[80];

	if (c->closed)
		return;
	if (c->reject && now - c->out_stalled_since >= CONN_REJECT_GRACE_MSEC) {
		conn_close(c);
		return;
	}
	if (c->out_stalled_since && now - c->out_stalled_since >= cfg->output_stall_sec * 1000ULL) {
		conn_drop_stalled(c, now, "has not read its replies", cfg->output_stall_sec);
		return;
	}
	/* Reading, and bytes left over: the start of a message whose end does
	 * not come. (Complete messages do not wait while the connection reads,
	 * and one waiting for room is not the sender's doing.) */
	if (conn_wants_input(c) && frame_reader_pending(&c->in) > 0 &&
	    now - c->in_since >= cfg->input_stall_sec * 1000ULL) {
		snprintf(what, sizeof(what), "left a message of %zu bytes unfinished",
			 frame_reader_pending(&c->in));
		conn_drop_stalled(c, now, what, cfg->input_stall_sec);
	}
}
