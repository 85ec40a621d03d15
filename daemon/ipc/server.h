/* SPDX-License-Identifier: BSD-3-Clause */
/* The listening socket: our own, or the one systemd passed us. */
#ifndef RDMAMEMD_SERVER_H
#define RDMAMEMD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/core/budget.h"
#include "util/idseq.h"
#include "daemon/core/log.h"
#include "util/list.h"
#include "util/macro.h"

struct core;
struct rpc_ctx;
struct rpc_server_ops;

/*
 * Refused clients waiting to hear why (they are told on their first call,
 * or dropped after a grace period): at most this many in all, and from one
 * uid; beyond that a refused connection is closed at once, without a word.
 * So refusals cost a bounded number of fds whoever floods, and one uid's
 * flood leaves the others their answers.
 */
#define SERVER_REJECTED_MAX 64U
#define SERVER_REJECTED_PER_UID_MAX 8U

/* The ipc subsystem's context. Loop only. */
struct server {
	struct core *core;   /* the loop, the limits, the accounts, the counters */
	struct rpc_ctx *rpc; /* what its connections' calls reach */
	/* During shutdown, the last connection went (daemon.c ends the loop). */
	void (*drained)(void *userdata);
	void *drained_userdata;
	int fd;
	int spare_fd; /* closed to accept-and-drop when out of fds */
	uv_poll_t poll;
	bool listening;
	bool held;      /* server_hold() */
	bool activated; /* from sd_listen_fds(): systemd owns the path */
	char *path;     /* shown to users; unlinked at exit unless activated */

	struct list_head conns;
	struct idseq conn_order;  /* the same connections by id, for ListClients */
	unsigned n_conns;         /* accepted and admitted */
	unsigned n_rejected;      /* accepted to be told they are over a limit */
	uint64_t n_refused_total; /* refused since start, told or closed at once */
	uint64_t next_conn_id;
	struct ratelimit refusal_log, emfile_log;

	struct budget budgets[BUDGET_KINDS]; /* input and output, daemon-wide */
	/*
	 * Connections to serve again once this turn of the loop has read
	 * every ready socket (conn_serve_later()): their replies leave then,
	 * all together, and the calls behind a deferred one go on. Each
	 * holds a reference while it waits. later_check runs them after the
	 * loop's I/O; later_idle, started with it, keeps the loop from
	 * sleeping in between when one is queued outside the I/O phase (a
	 * timer's callback). Loop thread only.
	 */
	struct list_head later;
	uv_check_t later_check;
	uv_idle_t later_idle;
	bool serving_later; /* inside later_check's callback: flush at once */
	struct ratelimit stall_log;
};

/* What the method handlers see of a server (rpc_ctx.server_ops). */
extern const struct rpc_server_ops server_rpc_ops;

/* Listens on activated_fd (a socket systemd passed, taken) or, when it
 * is -1, on a socket of its own; the accounts' budgets are the server's
 * from here on. */
int server_new(struct core *core, struct rpc_ctx *rpc, int activated_fd, struct server **ret);
struct server *server_free(struct server *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct server *, server_free)

/* Closes the listening socket (and unlinks its path if it is ours). */
void server_stop_listening(struct server *s);
/* Closes the handles the connections use (budgets, serving later): last,
 * once no connection is left, or on a failed start. */
void server_stop_handles(struct server *s);
/* Stops taking connections while hold (they wait in the socket's backlog),
 * and takes them again after: at start, until restored GPU regions are
 * back (keep.h), so that an owner's Reclaim finds them. */
void server_hold(struct server *s, bool hold);

/* A connection left the list; may end the shutdown. */
void server_conn_removed(struct server *s);

#endif
