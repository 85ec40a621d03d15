/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One client connection: a uv_poll_t over a non-blocking Unix stream socket,
 * our own recvmsg/sendmsg (libuv cannot carry memfds), the framing reader,
 * the output queue and the call in progress. Calls are served one at a time
 * per connection, in order, as Varlink requires.
 */
#ifndef RDMAMEMD_CONN_H
#define RDMAMEMD_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "daemon/core/budget.h"
#include "util/idseq.h"
#include "daemon/ipc/outq.h"
#include "daemon/rpc/rpc.h"
#include "proto/frame.h"
#include "util/list.h"
#include "util/sockio.h"

struct conn_parse;
struct rpc_call;
struct server;
struct session;

/* fd batches a connection keeps for messages not yet taken (see in_fds). */
#define CONN_FD_BATCHES_MAX 4U

struct conn {
	struct list_head link;   /* in server->conns */
	struct idseq_node order; /* in server->conn_order until closed */
	struct server *server;
	unsigned n_ref;
	uint64_t id;
	int fd;
	uv_poll_t poll;
	int poll_events;
	/* The daemon takes input (conn_wants_input() at the last poll
	 * update). While a call runs it does not, but poll_events may still
	 * ask for input until some came: input_while_busy. */
	bool reading;
	bool input_while_busy;
	/* The client: who it is and what it holds (regions, leases, tokens,
	 * queue pairs). Made at accept, closed by conn_close(), freed with
	 * the connection (work still running may keep it a while longer). */
	struct session *session;

	struct frame_reader in;
	uint64_t in_charged; /* of in's buffer, counted in the input budgets */
	uint64_t in_since;   /* uv_now() when input last came or reading resumed */
	/* Over a budget: input, not read; output, takes no call or makes no
	 * large reply; until room is freed (budget.h). */
	struct budget_wait wait[BUDGET_KINDS];
	/*
	 * fds received, each batch waiting for the message it came with, in
	 * stream order. A read brings at most one batch, and the connection
	 * reads only when every complete message before it was taken, so at
	 * most two wait at once: the one of a message still arriving and the
	 * one of the next. More means the stream is malformed.
	 */
	struct fd_batch {
		uint64_t ordinal; /* of the message whose first byte they came with */
		size_t n_fds;     /* as received: over VARLINK_FDS_MAX, none are kept */
		int fds[VARLINK_FDS_MAX];
	} in_fds[CONN_FD_BATCHES_MAX];
	unsigned in_fds_first, n_in_fds; /* a ring */

	struct outq out;
	uint64_t out_stalled_since; /* uv_now() when output first could not leave; 0 if flowing */
	uint64_t out_reserved;      /* for the reply the call in progress makes elsewhere */
	uint64_t out_charged;       /* out's memory and out_reserved, in the output budgets */

	struct rpc_call *call; /* in progress (holds a reference); NULL when idle */
	/* Where call is made: one at a time, and the call's reference keeps
	 * the connection, and so this, until the call is freed. */
	struct rpc_call call_storage;
	struct conn_parse *parse; /* the next message, being parsed on the pool */
	const char *reject;       /* over a limit: answer every call with this error */
	uint64_t n_calls;

	bool draining;          /* shutdown: finish the call in progress, then close */
	bool close_after_flush; /* protocol error: say why, then hang up */
	bool input_eof;         /* the peer sends no more: answer, then hang up */
	bool closed;            /* uv_close() was called */
	/* Inside conn_process() (nested when a call ends within it), which
	 * flushes and polls for what is queued meanwhile. */
	unsigned processing;
	/* The call's stream waits for its queue to drain (transport_room()). */
	bool room_wanted;
	struct list_head later; /* in server->later: to serve after this turn's I/O */
};

/* The server's list of connections to serve after a turn's I/O
 * (conn_serve_later()): its handles, made with the server, and closed, with
 * the references of connections still queued (closed ones by then), once
 * no connection is left. */
void conn_serve_later_init(struct server *s);
void conn_serve_later_stop(struct server *s);

/* Takes ownership of fd (also on failure). */
int conn_new(struct server *s, int fd, const struct ucred *cred, struct conn **ret);
struct conn *conn_ref(struct conn *c);
struct conn *conn_unref(struct conn *c);

/* Tears the connection down now; in-flight work is cancelled. */
void conn_close(struct conn *c);
/* Stops reading new calls, lets the one in progress finish, flushes, closes. */
void conn_drain(struct conn *c);
/* Marks the connection to answer each call with error_name, then hang up. */
void conn_reject(struct conn *c, const char *error_name);

/* Queues one message; takes fds on success. Drops it if the connection closed. */
int conn_send(struct conn *c, const char *text, size_t len, int *fds, size_t n_fds);
/* Queues text[0..len), followed by its NUL, in its own buffer: takes text,
 * also on failure. For large messages made elsewhere (no copy). */
int conn_send_buffer(struct conn *c, char *text, size_t len);
/* Queues a cJSON tree as a message (not consumed). */
int conn_send_json(struct conn *c, const cJSON *msg);

/* Housekeeping from the daemon's tick: drops clients that stopped reading,
 * and clients that stopped sending in the middle of a message. */
void conn_tick(struct conn *c, uint64_t now);

/*
 * Reserves bytes in the output budgets for the reply of c's call in
 * progress, which is made elsewhere before it is queued (a Read's). Returns
 * 1 when reserved; 0 when c waits in line for room, and rpc_call_reserved()
 * tells the call once it is reserved (conn_close() drops the wait).
 */
int conn_output_reserve(struct conn *c, uint64_t bytes);
/* Gives back bytes reserved: the reply is queued, or never will be. */
void conn_output_unreserve(struct conn *c, uint64_t bytes);

/* c waits in line for room of kind k: tries again. When c may go on, it
 * leaves the line and goes on; else it stays. The budgets' retry (a
 * budget_retry_fn: c is its waiters' owner). */
void conn_budget_retry(void *conn, enum budget_kind k);

#endif
