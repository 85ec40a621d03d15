/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Leases: a connection's hold (or queued request) on a region's access lock,
 * taken with Lock and given back with Unlock or by disconnecting. Operations
 * of the same connection name the lease to run under it instead of queueing
 * behind it. A lease holds a reference on its region; operations running
 * under a lease hold a reference on the lease, so the lock is given back only
 * after they finish even if the holder disconnects meanwhile.
 */
#ifndef RDMAMEMD_LEASE_H
#define RDMAMEMD_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/mem/lock.h"
#include "util/list.h"
#include "daemon/core/session.h"
#include "util/timeout.h"

struct region_registry;
struct errinfo;
struct lease;
struct region;

/*
 * How a Lock that waited ends, on the loop: 0 granted; or -ETIMEDOUT (its
 * timeout passed) or -EACCES (its holder lost the right to it: Unshare),
 * with e saying why for the client (the callee may take e's params); the
 * lease is released right after the callback returns.
 */
typedef void (*lease_done_fn)(void *userdata, struct lease *l, int result, struct errinfo *e);

struct lease {
	uint64_t id;
	unsigned n_ref;
	struct region_registry *registry;
	struct region *region; /* a reference */
	/* SESSION_LEASE, in the holder's session until released. */
	struct session_link holder_link;
	struct list_head region_link; /* in region->leases */
	struct lock_request req;
	enum lock_mode mode;
	bool released; /* Unlock or disconnect: no new users */

	/* While waiting: who is told how it ends, and the deadline. */
	lease_done_fn done; /* NULL: nobody waits to be told */
	void *userdata;
	struct timeout timeout;
	uint64_t asked_msec;
};

/*
 * A new lease of holder on r (registered, not yet asking for the lock);
 * QuotaExceeded ("leases") in *e when holder's uid holds its limit.
 */
int lease_new(struct session *holder, struct region *r, enum lock_mode mode, struct lease **ret,
	      struct errinfo *e);

/*
 * Asks for the lock: 1 when granted at once; -EAGAIN when timeout_ms is 0
 * and it would queue; 0 when queued: done(userdata, …) runs once, later —
 * granted, timed out after timeout_ms (> 0; < 0 waits without limit), or
 * revoked — unless lease_wait_cancel() came first.
 */
int lease_acquire(struct lease *l, int64_t timeout_ms, lease_done_fn done, void *userdata);

/* Nobody waits to be told any more (the client went away): done will not
 * run; the lease stays queued until released (its session closing). */
void lease_wait_cancel(struct lease *l);

/* Unlock/disconnect/timeout: withdraws or gives back, drops the holder's ref. */
void lease_release(struct lease *l);

/*
 * After r's shares shrank: ends every lease on r whose holder may no longer
 * hold it (a shared lease needs read access, the others write access), as if
 * it had unlocked — operations running under one finish first, then the lock
 * is given back; a Lock still waiting is told through its done. Leases
 * of holders that keep the right (owner, root, another share) stay.
 */
int lease_revoke_lost(struct region *r);

struct lease *lease_ref(struct lease *l);
struct lease *lease_unref(struct lease *l);

/* The caller's own, live, granted-or-waiting lease id; NoSuchLease otherwise. */
int lease_lookup(struct region_registry *registry, uint64_t id, const struct session *caller,
		 struct lease **ret, struct errinfo *e);

/* The session that holds or waits for l; NULL once released. */
static inline struct session *lease_holder(const struct lease *l)
{
	return l->holder_link.session;
}

static inline bool lease_is_held(const struct lease *l)
{
	return l->req.held && !l->released;
}

/* Also registers the drop hook of SESSION_LEASE. */
void lease_registry_init(struct region_registry *registry);
void lease_registry_done(struct region_registry *registry);

#endif
