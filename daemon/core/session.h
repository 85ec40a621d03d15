/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A session: what one client holds, apart from the connection that carries
 * its calls (PipeWire's pw_impl_client and its resources). Who it is (cred,
 * groups, account) and, per kind, the resources it created: access tokens,
 * the queue pairs it set up, its leases, its regions. Regions, leases,
 * tokens and queue pairs know their holder as a session, never as a
 * connection; rights are computed from it.
 *
 * The connection makes its session when it is accepted and closes it when it
 * closes (session_close()); the session itself is freed with its last
 * reference (the connection's, and those of work that outlives the call,
 * such as a transfer on the pool). Loop thread only.
 *
 * Teardown order is the order of enum session_kind: session_close() drops
 * every resource of the first kind, then of the next, through the drop hook
 * each subsystem registered for its kinds (session_kind_register()).
 * session.c knows no resource's type.
 */
#ifndef RDMAMEMD_SESSION_H
#define RDMAMEMD_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "util/list.h"

struct account;

/*
 * The kinds of resources a session holds, in teardown order: what it
 * imported of other hosts first — prepared plans, then the remote handles
 * they use (a transfer in flight keeps its own references); then remote
 * access — tokens (the peers they admitted go with them), then the queue
 * pairs set up with ConnectQueuePair — since peers reach this client's
 * memory; then the notifications queued for it (nothing adds to them once
 * the tokens, and with them the peers' queue pairs, are gone); then
 * leases, which hold the regions' locks (work still running under a lease
 * keeps it until it finishes); then the regions.
 */
enum session_kind {
	SESSION_PLAN,
	SESSION_REMOTE,
	SESSION_TOKEN,
	SESSION_RCONN,
	SESSION_NOTIFY,
	SESSION_LEASE,
	SESSION_REGION,
	SESSION_KIND_MAX,
};

/* Embedded in a resource; session is NULL while it is in no session. */
struct session_link {
	struct list_head link; /* in session->sets[kind].items */
	struct session *session;
	enum session_kind kind;
};

struct session_set {
	struct list_head items; /* struct session_link */
	unsigned n;
};

struct session {
	unsigned n_ref;
	uint64_t id; /* the connection's id, for listings and logs */
	struct ucred cred;
	gid_t *groups; /* supplementary groups (SO_PEERGROUPS), or NULL */
	size_t n_groups;
	struct account *account; /* a reference */
	struct session_set sets[SESSION_KIND_MAX];
	bool closed; /* session_close() ran: nothing may be added */
};

/*
 * Drops one resource of the session (it ends as if the client had let go of
 * it); must take link out of its set (session_remove()) before returning.
 */
typedef void (*session_drop_fn)(struct session_link *link);

/* Each subsystem, at init, for each kind it owns. Registering again
 * replaces the hook; returns the one before (a test puts it back). */
session_drop_fn session_kind_register(enum session_kind kind, session_drop_fn drop);

/*
 * A new session for a client with cred; takes groups (malloc'ed, n_groups
 * entries; also on failure), takes a reference on account. -ENOMEM.
 */
int session_new(uint64_t id, const struct ucred *cred, gid_t *groups, size_t n_groups,
		struct account *account, struct session **ret);
struct session *session_ref(struct session *s);
struct session *session_unref(struct session *s);

/* Puts link (not in a set) into s's set of kind. s must not be closed. */
void session_add(struct session *s, enum session_kind kind, struct session_link *link);
/* Takes link out of its session's set; no-op when it is in none. */
void session_remove(struct session_link *link);

static inline void session_link_init(struct session_link *link)
{
	list_init(&link->link);
	link->session = NULL;
}

static inline unsigned session_count(const struct session *s, enum session_kind kind)
{
	return s->sets[kind].n;
}

/*
 * The client is gone: drops every resource, kind by kind in enum order,
 * each set until it is empty (a drop may drop others of later kinds: a
 * token's peers), then marks s closed. Closing twice does nothing.
 */
void session_close(struct session *s);

/* Whether the client is in group gid: its primary gid or a supplementary
 * one (without the list, on old kernels, only the primary one counts). */
bool session_in_group(const struct session *s, gid_t gid);

#endif
