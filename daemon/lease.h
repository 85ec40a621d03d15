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

#include "lock.h"
#include "proto/list.h"
#include "session.h"
#include "timeout.h"

struct daemon;
struct errinfo;
struct region;
struct rpc_call;

struct lease {
	uint64_t id;
	unsigned n_ref;
	struct daemon *daemon;
	struct region *region;		/* a reference */
	/* SESSION_LEASE, in the holder's session until released. */
	struct session_link holder_link;
	struct list_head region_link;	/* in region->leases */
	struct lock_request req;
	enum lock_mode mode;
	bool released;			/* Unlock or disconnect: no new users */

	/* While waiting: the Lock call to answer and its deadline. */
	struct rpc_call *call;
	struct timeout timeout;
	uint64_t asked_msec;
	void (*on_granted)(struct lease *l);
	/* The holder lost the right to wait for it (Unshare): answer call
	 * and release. Without it the lease is just released. */
	void (*on_revoked)(struct lease *l);
};

/*
 * A new lease of holder on r (registered, not yet asking for the lock);
 * QuotaExceeded ("leases") in *e when holder's uid holds its limit.
 */
int lease_new(struct session *holder, struct region *r, enum lock_mode mode, struct lease **ret,
	      struct errinfo *e);

/*
 * Asks for the lock: 1 when granted at once, 0 when queued (on_granted runs
 * later), -EAGAIN when try_only and it would queue.
 */
int lease_acquire(struct lease *l, bool try_only, void (*on_granted)(struct lease *l));

/* Unlock/disconnect/timeout: withdraws or gives back, drops the holder's ref. */
void lease_release(struct lease *l);

/*
 * After r's shares shrank: ends every lease on r whose holder may no longer
 * hold it (a shared lease needs read access, the others write access), as if
 * it had unlocked — operations running under one finish first, then the lock
 * is given back; a Lock still waiting is answered through on_revoked. Leases
 * of holders that keep the right (owner, root, another share) stay.
 */
int lease_revoke_lost(struct region *r);

struct lease *lease_ref(struct lease *l);
struct lease *lease_unref(struct lease *l);

/* The caller's own, live, granted-or-waiting lease id; NoSuchLease otherwise. */
int lease_lookup(struct daemon *d, uint64_t id, const struct session *caller, struct lease **ret,
		 struct errinfo *e);

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
void lease_registry_init(struct daemon *d);
void lease_registry_done(struct daemon *d);

#endif
