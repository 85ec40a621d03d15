/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "util/idmap.h"
#include "daemon/mem/lease.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "util/macro.h"
#include "daemon/mem/region.h"
#include "daemon/core/session.h"

/* The holder's session closed: as if it had unlocked. */
static void lease_session_drop(struct session_link *link)
{
	lease_release(container_of(link, struct lease, holder_link));
}

void lease_registry_init(struct region_registry *registry)
{
	session_kind_register(SESSION_LEASE, lease_session_drop);
	idmap_init(&registry->leases);
	registry->next_lease_id = 1;
}

void lease_registry_done(struct region_registry *registry)
{
	idmap_done(&registry->leases);
}

int lease_new(struct session *holder, struct region *r, enum lock_mode mode, struct lease **ret,
	      struct errinfo *e)
{
	struct region_registry *registry = r->registry;
	struct account *a = holder->account;
	unsigned max = registry->core->cfg.max_leases_per_uid;
	struct lease *l;

	if (a->n_leases >= max)
		return errinfo_quota(e, "leases", max, a->n_leases, 1,
				     "uid %u holds or waits for %u leases, the limit is %u; unlock "
				     "some first",
				     (unsigned)a->uid, a->n_leases, max);

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->n_ref = 1;
	l->registry = registry;
	l->id = registry->next_lease_id++;
	l->mode = mode;
	session_link_init(&l->holder_link);
	list_init(&l->req.link);
	if (idmap_put(&registry->leases, l->id, l) < 0) {
		free(l);
		return -ENOMEM;
	}
	l->region = region_ref(r);
	session_add(holder, SESSION_LEASE, &l->holder_link);
	a->n_leases++;
	list_add_tail(&l->region_link, &r->leases);
	*ret = l;
	return 0;
}

/* Tells the waiter how it ended, once; a failure releases the lease after. */
static void lease_wait_done(struct lease *l, int result, struct errinfo *e)
{
	lease_done_fn done = l->done;

	timeout_disarm(&l->registry->timeouts, &l->timeout);
	l->done = NULL;
	/* The answer lets the client's connection go on, and if the client
	 * has gone meanwhile close, releasing its leases, this one too: keep
	 * it. */
	lease_ref(l);
	if (done)
		done(l->userdata, l, result, e);
	if (result < 0)
		lease_release(l);
	errinfo_done(e);
	lease_unref(l);
}

static void lease_granted(struct lock_request *req)
{
	struct lease *l = req->userdata;

	l->region->n_leases_waiting--;
	l->region->n_leases_held++;
	/* Nobody to tell when the client left meanwhile: it cancelled the
	 * wait, then gave back a lease of its own that this one waited
	 * behind. The lease goes with the session's others. */
	if (l->done)
		lease_wait_done(l, 0, &(struct errinfo){});
}

static void lease_timed_out(struct timeout *t)
{
	struct lease *l = container_of(t, struct lease, timeout);
	struct region *r = l->region;
	uint64_t waited = uv_now(l->registry->core->loop) - l->asked_msec;
	struct errinfo e = {};

	errinfo_set(&e, RDMAMEM_ERROR_LOCK_TIMEOUT, -ETIMEDOUT,
		    "no %s lease on region %" PRIu64 " within %" PRIu64 " ms (lock %s, %u holders, "
		    "%u waiting)",
		    lock_mode_to_string(l->mode), r->id, waited,
		    lock_state_to_string(r->lock.state), r->lock.n_holders, r->lock.n_waiters - 1);
	lease_wait_done(l, -ETIMEDOUT, &e);
}

int lease_acquire(struct lease *l, int64_t timeout_ms, lease_done_fn done, void *userdata)
{
	struct region *r = l->region;
	int res;

	l->asked_msec = uv_now(l->registry->core->loop);
	res = lock_acquire(&r->lock, &l->req, l->mode, timeout_ms == 0, lease_granted, l);
	if (res == 1) {
		r->n_leases_held++;
	} else if (res == 0) {
		r->n_leases_waiting++;
		l->done = done;
		l->userdata = userdata;
		if (timeout_ms > 0)
			timeout_arm(&l->registry->timeouts, &l->timeout, (uint64_t)timeout_ms,
				    lease_timed_out);
	}
	return res;
}

void lease_wait_cancel(struct lease *l)
{
	l->done = NULL;
	timeout_disarm(&l->registry->timeouts, &l->timeout);
}

struct lease *lease_ref(struct lease *l)
{
	if (l)
		l->n_ref++;
	return l;
}

static void lease_free(struct lease *l)
{
	struct region *r = l->region;

	if (l->req.held) {
		r->n_leases_held--;
		/* May grant the next waiters, leases or operations. */
		lock_release(&r->lock, &l->req);
	}
	list_del(&l->region_link);
	region_unref(r);
	free(l);
}

struct lease *lease_unref(struct lease *l)
{
	if (l && --l->n_ref == 0)
		lease_free(l);
	return NULL;
}

void lease_release(struct lease *l)
{
	struct region *r = l->region;

	if (l->released)
		return;
	l->released = true;
	idmap_remove(&l->registry->leases, l->id);
	lease_holder(l)->account->n_leases--;
	session_remove(&l->holder_link);
	timeout_disarm(&l->registry->timeouts, &l->timeout);
	if (l->req.waiting) {
		r->n_leases_waiting--;
		lock_cancel(&r->lock, &l->req);
	}
	log_debug("Lease %" PRIu64 " on region %" PRIu64 " released", l->id, r->id);
	lease_unref(l);
}

int lease_revoke_lost(struct region *r)
{
	_cleanup_free_ struct lease **lost = NULL;
	struct lease *l;
	size_t n = 0, cap = 0;

	/* Collected first, each with a reference: releasing one grants
	 * waiters, whose work may drop other leases on r from the list. */
	list_for_each_entry(l, &r->leases, region_link) {
		if (l->released || !lease_holder(l) ||
		    region_allows(r, lease_holder(l),
				  l->mode == LOCK_SHARED ? REGION_READ : REGION_WRITE))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct lease **nl = reallocarray(lost, ncap, sizeof(*nl));

			if (!nl) {
				for (size_t i = 0; i < n; i++)
					lease_unref(lost[i]);
				return -ENOMEM;
			}
			lost = nl;
			cap = ncap;
		}
		lost[n++] = lease_ref(l);
	}
	for (size_t i = 0; i < n; i++) {
		l = lost[i];
		if (!l->released) {
			uid_t uid = lease_holder(l)->cred.uid;
			struct errinfo e = {};

			log_debug("Lease %" PRIu64 " of uid %u on region %" PRIu64
				  " ends: the region is no longer shared with it",
				  l->id, (unsigned)uid, r->id);
			if (!l->done) {
				lease_release(l);
			} else {
				errinfo_set(&e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					    "region %" PRIu64
					    " is no longer shared with uid %u for "
					    "a %s lease; the lease request was withdrawn",
					    r->id, (unsigned)uid, lock_mode_to_string(l->mode));
				lease_wait_done(l, -EACCES, &e);
			}
		}
		lease_unref(l);
	}
	return 0;
}

int lease_lookup(struct region_registry *registry, uint64_t id, const struct session *caller,
		 struct lease **ret, struct errinfo *e)
{
	struct lease *l = idmap_get(&registry->leases, id);

	/* Leases belong to a session (a connection): another one, even of
	 * the same uid, hears the same as for a lease that never existed. */
	if (!l || l->released || lease_holder(l) != caller)
		return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_LEASE, -ENOENT,
				   "this connection holds no lease %" PRIu64, id);
	*ret = l;
	return 0;
}
