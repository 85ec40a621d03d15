/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Leases (daemon/lease.c) over sessions and the region registry, without a
 * connection: granted at once or queued and granted when the holder lets
 * go; a wait that times out ends the lease; a cancelled wait tells nobody;
 * a session that closes gives its leases back; a share taken back ends
 * the leases it allowed; the per-uid limit.
 */
#include <errno.h>
#include <string.h>

#include "daemon/mem/lease.h"
#include "proto/errors.h"
#include "tests/unit/mem-fixture.h"
#include "tests/testlib.h"

static struct mem_fixture f;

/* How each waiting lease ended, as its done saw it. */
struct waiter {
	unsigned calls;
	int result;
	char error[64];
	bool held_then; /* lease_is_held() when told */
	bool done;
};

static void on_done(void *userdata, struct lease *l, int result, struct errinfo *e)
{
	struct waiter *w = userdata;

	w->calls++;
	w->result = result;
	snprintf(w->error, sizeof(w->error), "%s", e->name ?: "");
	w->held_then = lease_is_held(l);
	w->done = true;
}

static void setup(void)
{
	mem_fixture_init(&f);
}

static void teardown(void)
{
	mem_fixture_done(&f);
}

static struct lease *new_lease(struct session *s, struct region *r, enum lock_mode mode)
{
	struct errinfo e = {};
	struct lease *l = NULL;

	ck_assert_int_eq(lease_new(s, r, mode, &l, &e), 0);
	return l;
}

/* Granted at once; a second queues behind it, found only by its own
 * session, and is granted (told once) when the first is released. */
START_TEST(test_acquire_release)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *a = new_lease(f.owner, r, LOCK_EXCLUSIVE), *b, *got;
	struct waiter w = {};
	struct errinfo e = {};
	uint64_t a_id;

	ck_assert_int_eq(lease_acquire(a, -1, on_done, &w), 1);
	ck_assert(lease_is_held(a));
	ck_assert_uint_eq(r->n_leases_held, 1);

	b = new_lease(f.owner, r, LOCK_SHARED);
	ck_assert_int_eq(lease_acquire(b, -1, on_done, &w), 0);
	ck_assert(!lease_is_held(b));
	ck_assert_uint_eq(r->n_leases_waiting, 1);
	ck_assert_uint_eq(f.owner->account->n_leases, 2);
	ck_assert_uint_eq(session_count(f.owner, SESSION_LEASE), 2);

	ck_assert_int_eq(lease_lookup(&f.regions, b->id, f.owner, &got, &e), 0);
	ck_assert_ptr_eq(got, b);
	/* Another session hears of no such lease. */
	ck_assert_int_eq(lease_lookup(&f.regions, b->id, f.other, &got, &e), -ENOENT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_LEASE);
	errinfo_done(&e);

	a_id = a->id;
	lease_release(a);
	ck_assert_uint_eq(w.calls, 1);
	ck_assert_int_eq(w.result, 0);
	ck_assert(w.held_then);
	ck_assert(lease_is_held(b));
	ck_assert_uint_eq(r->n_leases_held, 1);
	ck_assert_uint_eq(r->n_leases_waiting, 0);
	ck_assert_int_eq(lease_lookup(&f.regions, a_id, f.owner, &got, &e), -ENOENT);
	errinfo_done(&e);
	ck_assert_uint_eq(f.owner->account->n_leases, 1);

	lease_release(b);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
	ck_assert_uint_eq(f.owner->account->n_leases, 0);
	ck_assert_uint_eq(session_count(f.owner, SESSION_LEASE), 0);
	ck_assert_uint_eq(w.calls, 1);
}
END_TEST

/* Timeout 0 never queues; a wait past its timeout is told LockTimeout and
 * the lease goes; the holder keeps the lock. */
START_TEST(test_timed_out)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *a = new_lease(f.owner, r, LOCK_SHARED), *b, *c, *got;
	struct waiter w = {};
	struct errinfo e = {};
	uint64_t t0, c_id;

	ck_assert_int_eq(lease_acquire(a, -1, NULL, NULL), 1);
	b = new_lease(f.owner, r, LOCK_EXCLUSIVE);
	ck_assert_int_eq(lease_acquire(b, 0, on_done, &w), -EAGAIN);
	ck_assert_uint_eq(r->lock.n_waiters, 0);
	lease_release(b);

	c = new_lease(f.owner, r, LOCK_EXCLUSIVE);
	c_id = c->id;
	uv_update_time(&f.loop);
	t0 = uv_now(&f.loop);
	ck_assert_int_eq(lease_acquire(c, 30, on_done, &w), 0);
	mem_fixture_run_until(&f, &w.done, 5000);
	ck_assert_uint_eq(w.calls, 1);
	ck_assert_int_eq(w.result, -ETIMEDOUT);
	ck_assert_str_eq(w.error, RDMAMEM_ERROR_LOCK_TIMEOUT);
	ck_assert_uint_ge(uv_now(&f.loop) - t0, 30);
	/* Released right after: gone from the session and the registry. */
	ck_assert_int_eq(lease_lookup(&f.regions, c_id, f.owner, &got, &e), -ENOENT);
	errinfo_done(&e);
	ck_assert_uint_eq(session_count(f.owner, SESSION_LEASE), 1);
	ck_assert_uint_eq(r->n_leases_waiting, 0);
	ck_assert_uint_eq(r->lock.n_waiters, 0);
	ck_assert(lease_is_held(a));
}
END_TEST

/* The client stopped waiting: granted later without telling anyone, and
 * given back when its session closes. */
START_TEST(test_cancel_wait)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *a = new_lease(f.owner, r, LOCK_EXCLUSIVE), *b;
	struct waiter w = {};

	ck_assert_int_eq(region_share(r, false, 2000, false, NULL), 0);
	ck_assert_int_eq(lease_acquire(a, -1, NULL, NULL), 1);
	b = new_lease(f.other, r, LOCK_EXCLUSIVE);
	ck_assert_int_eq(lease_acquire(b, 20, on_done, &w), 0);
	lease_wait_cancel(b);
	/* Its timeout was disarmed with it. */
	usleep(40000);
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(w.calls, 0);
	ck_assert(!b->released);

	lease_release(a);
	ck_assert_uint_eq(w.calls, 0);
	ck_assert(lease_is_held(b));
	lease_ref(b);
	session_close(f.other);
	ck_assert(b->released);
	ck_assert_uint_eq(session_count(f.other, SESSION_LEASE), 0);
	/* An operation's reference on the lease keeps the lock until it is
	 * done. */
	ck_assert_int_ne(r->lock.state, LOCK_IDLE);
	lease_unref(b);
	ck_assert_uint_eq(f.other->account->n_leases, 0);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
}
END_TEST

/* The holder's session closes: its leases go, the next waiter is granted,
 * and the region lives on for the lease that holds it though its owner is
 * gone. */
START_TEST(test_session_drop_releases)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *a = new_lease(f.owner, r, LOCK_EXCLUSIVE), *b;
	struct waiter w = {};

	ck_assert_int_eq(region_share(r, false, 2000, true, NULL), 0);
	ck_assert_int_eq(lease_acquire(a, -1, NULL, NULL), 1);
	b = new_lease(f.other, r, LOCK_SHARED);
	ck_assert_int_eq(lease_acquire(b, -1, on_done, &w), 0);

	session_close(f.owner);
	ck_assert_uint_eq(w.calls, 1);
	ck_assert_int_eq(w.result, 0);
	ck_assert(lease_is_held(b));
	ck_assert_uint_eq(f.owner->account->n_leases, 0);
	ck_assert(r->dead);
	ck_assert_uint_eq(f.regions.n_regions, 1);
	((volatile char *)r->addr)[4095] = 1;
	lease_release(b);
	ck_assert_uint_eq(f.regions.n_regions, 0);
}
END_TEST

/* Unshare: the leases the share allowed end (a waiting one is told
 * PermissionDenied); the owner's stays. */
START_TEST(test_revoke_lost)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *own = new_lease(f.owner, r, LOCK_SHARED), *held, *waits;
	struct waiter w = {};

	ck_assert_int_eq(region_share(r, false, 2000, false, NULL), 0);
	ck_assert_int_eq(lease_acquire(own, -1, NULL, NULL), 1);
	held = new_lease(f.other, r, LOCK_SHARED);
	ck_assert_int_eq(lease_acquire(held, -1, NULL, NULL), 1);
	waits = new_lease(f.other, r, LOCK_EXCLUSIVE);
	ck_assert_int_eq(lease_acquire(waits, -1, on_done, &w), 0);
	ck_assert_uint_eq(f.other->account->n_leases, 2);

	/* Still readable: the shared one keeps going, the exclusive wait
	 * needs write access. */
	ck_assert_int_eq(region_share(r, false, 2000, true, NULL), 0);
	ck_assert_int_eq(lease_revoke_lost(r), 0);
	ck_assert_uint_eq(w.calls, 1);
	ck_assert_int_eq(w.result, -EACCES);
	ck_assert_str_eq(w.error, RDMAMEM_ERROR_PERMISSION_DENIED);
	ck_assert(lease_is_held(held));

	ck_assert_int_eq(region_unshare(r, false, 2000), 0);
	ck_assert_int_eq(lease_revoke_lost(r), 0);
	ck_assert_uint_eq(f.other->account->n_leases, 0);
	ck_assert_uint_eq(session_count(f.other, SESSION_LEASE), 0);
	ck_assert(lease_is_held(own));
	ck_assert_uint_eq(r->n_leases_held, 1);
}
END_TEST

/* The per-uid limit: QuotaExceeded, and room again once one goes. */
START_TEST(test_quota)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *a, *b, *c = NULL;
	struct errinfo e = {};

	f.core.cfg.max_leases_per_uid = 2;
	a = new_lease(f.owner, r, LOCK_SHARED);
	b = new_lease(f.owner, r, LOCK_SHARED);
	ck_assert_int_lt(lease_new(f.owner, r, LOCK_SHARED, &c, &e), 0);
	ck_assert_ptr_null(c);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_QUOTA_EXCEEDED);
	errinfo_done(&e);
	/* Another uid has its own count. */
	ck_assert_int_eq(region_share(r, false, 2000, true, NULL), 0);
	c = new_lease(f.other, r, LOCK_SHARED);
	lease_release(c);
	lease_release(a);
	c = new_lease(f.owner, r, LOCK_SHARED);
	ck_assert_uint_eq(f.owner->account->n_leases, 2);
	(void)b;
}
END_TEST

Suite *lease_suite(void)
{
	Suite *su = suite_create("lease");
	TCase *tc = tcase_create("lease");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_acquire_release);
	tcase_add_test(tc, test_timed_out);
	tcase_add_test(tc, test_cancel_wait);
	tcase_add_test(tc, test_session_drop_releases);
	tcase_add_test(tc, test_revoke_lost);
	tcase_add_test(tc, test_quota);
	suite_add_tcase(su, tc);
	return su;
}
