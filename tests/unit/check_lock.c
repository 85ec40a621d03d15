/* SPDX-License-Identifier: BSD-3-Clause */
/* The access lock state machine: every transition, FIFO fairness, cancel. */
#include <errno.h>
#include <string.h>

#include "daemon/mem/lock.h"
#include "tests/testlib.h"

static struct access_lock lk;
static int granted_order[16];
static int n_granted;

static void on_granted(struct lock_request *req)
{
	ck_assert(req->held);
	ck_assert(!req->waiting);
	granted_order[n_granted++] = (int)(long)req->userdata;
}

static void setup(void)
{
	lock_init(&lk);
	n_granted = 0;
}

static int acquire(struct lock_request *r, enum lock_mode m, int tag)
{
	return lock_acquire(&lk, r, m, false, on_granted, (void *)(long)tag);
}

START_TEST(test_idle_grants_any_mode)
{
	for (int m = 0; m < _LOCK_MODE_MAX; m++) {
		struct lock_request r;

		lock_init(&lk);
		ck_assert(lock_is_idle(&lk));
		ck_assert_int_eq(acquire(&r, m, 1), 1);
		ck_assert(r.held);
		ck_assert_int_ne(lk.state, LOCK_IDLE);
		ck_assert_uint_eq(lk.n_holders, 1);
		lock_release(&lk, &r);
		ck_assert_int_eq(lk.state, LOCK_IDLE);
		ck_assert_uint_eq(lk.n_holders, 0);
		ck_assert(lock_is_idle(&lk));
	}
	ck_assert_int_eq(n_granted, 0);
}
END_TEST

/* Same-group modes share; the groups exclude each other; exclusive is alone. */
START_TEST(test_compatibility_matrix)
{
	static const int expect[3][3] = {
		/* held \ asked: shared disjoint exclusive */
		[LOCK_SHARED] = { 1, 0, 0 },
		[LOCK_DISJOINT] = { 0, 1, 0 },
		[LOCK_EXCLUSIVE] = { 0, 0, 0 },
	};

	for (int held = 0; held < 3; held++)
		for (int asked = 0; asked < 3; asked++) {
			struct lock_request a, b;
			int r;

			lock_init(&lk);
			n_granted = 0;
			ck_assert_int_eq(acquire(&a, held, 1), 1);
			r = acquire(&b, asked, 2);
			ck_assert_msg(r == expect[held][asked], "held %s, asked %s: %d",
				      lock_mode_to_string(held), lock_mode_to_string(asked), r);
			if (r == 1) {
				ck_assert_uint_eq(lk.n_holders, 2);
				lock_release(&lk, &b);
				ck_assert_uint_eq(lk.n_holders, 1);
			} else {
				ck_assert(b.waiting);
				ck_assert_uint_eq(lk.n_waiters, 1);
				lock_release(&lk, &a);
				/* The waiter runs as soon as the holder leaves. */
				ck_assert_int_eq(n_granted, 1);
				ck_assert(b.held);
				ck_assert_int_eq(lk.state,
						 asked == LOCK_SHARED   ? LOCK_READING :
						 asked == LOCK_DISJOINT ? LOCK_DISJOINT_WRITING :
									  LOCK_EXCLUSIVE_WRITING);
			}
		}
}
END_TEST

/* A writer waiting behind readers is not overtaken by later readers. */
START_TEST(test_fifo_no_barging)
{
	struct lock_request r1, w, r2, r3;

	ck_assert_int_eq(acquire(&r1, LOCK_SHARED, 1), 1);
	ck_assert_int_eq(acquire(&w, LOCK_EXCLUSIVE, 2), 0);
	/* Compatible with the holder, but someone waits: queue. */
	ck_assert_int_eq(acquire(&r2, LOCK_SHARED, 3), 0);
	ck_assert_int_eq(acquire(&r3, LOCK_SHARED, 4), 0);
	ck_assert_uint_eq(lk.n_waiters, 3);

	lock_release(&lk, &r1);
	ck_assert_int_eq(n_granted, 1);
	ck_assert_int_eq(granted_order[0], 2);
	ck_assert_int_eq(lk.state, LOCK_EXCLUSIVE_WRITING);

	/* Both queued readers go in together. */
	lock_release(&lk, &w);
	ck_assert_int_eq(n_granted, 3);
	ck_assert_int_eq(granted_order[1], 3);
	ck_assert_int_eq(granted_order[2], 4);
	ck_assert_int_eq(lk.state, LOCK_READING);
	ck_assert_uint_eq(lk.n_holders, 2);
	lock_release(&lk, &r2);
	lock_release(&lk, &r3);
	ck_assert(lock_is_idle(&lk));
}
END_TEST

/* Only the compatible run at the head is granted, in order. */
START_TEST(test_grant_stops_at_incompatible)
{
	struct lock_request x, d1, d2, s1, d3;

	ck_assert_int_eq(acquire(&x, LOCK_EXCLUSIVE, 1), 1);
	ck_assert_int_eq(acquire(&d1, LOCK_DISJOINT, 2), 0);
	ck_assert_int_eq(acquire(&d2, LOCK_DISJOINT, 3), 0);
	ck_assert_int_eq(acquire(&s1, LOCK_SHARED, 4), 0);
	ck_assert_int_eq(acquire(&d3, LOCK_DISJOINT, 5), 0);

	lock_release(&lk, &x);
	ck_assert_int_eq(n_granted, 2);
	ck_assert_int_eq(lk.state, LOCK_DISJOINT_WRITING);
	ck_assert(s1.waiting && d3.waiting);

	lock_release(&lk, &d1);
	ck_assert_int_eq(n_granted, 2);
	lock_release(&lk, &d2);
	ck_assert_int_eq(n_granted, 3);
	ck_assert_int_eq(granted_order[2], 4);
	ck_assert_int_eq(lk.state, LOCK_READING);
	lock_release(&lk, &s1);
	ck_assert_int_eq(n_granted, 4);
	ck_assert_int_eq(lk.state, LOCK_DISJOINT_WRITING);
	lock_release(&lk, &d3);
	ck_assert(lock_is_idle(&lk));
}
END_TEST

/* Withdrawing the head waiter lets the ones behind it in. */
START_TEST(test_cancel)
{
	struct lock_request r1, w, r2, w2;

	ck_assert_int_eq(acquire(&r1, LOCK_SHARED, 1), 1);
	ck_assert_int_eq(acquire(&w, LOCK_EXCLUSIVE, 2), 0);
	ck_assert_int_eq(acquire(&r2, LOCK_SHARED, 3), 0);

	lock_cancel(&lk, &w);
	ck_assert(!w.waiting && !w.held);
	ck_assert_int_eq(n_granted, 1);
	ck_assert_int_eq(granted_order[0], 3);
	ck_assert_uint_eq(lk.n_holders, 2);
	ck_assert_uint_eq(lk.n_waiters, 0);

	/* Cancelling a request that is not waiting does nothing. */
	lock_cancel(&lk, &w);
	lock_cancel(&lk, &r2);
	ck_assert_uint_eq(lk.n_holders, 2);

	/* A waiter in the middle: the ones around it keep their places. */
	ck_assert_int_eq(acquire(&w, LOCK_EXCLUSIVE, 4), 0);
	ck_assert_int_eq(acquire(&w2, LOCK_EXCLUSIVE, 5), 0);
	lock_cancel(&lk, &w2);
	ck_assert_uint_eq(lk.n_waiters, 1);
	lock_release(&lk, &r1);
	lock_release(&lk, &r2);
	ck_assert_int_eq(granted_order[1], 4);
	lock_release(&lk, &w);
	ck_assert(lock_is_idle(&lk));

	/* Releasing twice does nothing the second time. */
	lock_release(&lk, &w);
	ck_assert_uint_eq(lk.n_holders, 0);
}
END_TEST

START_TEST(test_try_only)
{
	struct lock_request a, b, c, d;

	ck_assert_int_eq(lock_acquire(&lk, &a, LOCK_SHARED, true, on_granted, NULL), 1);
	ck_assert_int_eq(lock_acquire(&lk, &b, LOCK_SHARED, true, on_granted, NULL), 1);
	ck_assert_int_eq(lock_acquire(&lk, &c, LOCK_EXCLUSIVE, true, on_granted, NULL), -EAGAIN);
	ck_assert(!c.waiting);
	ck_assert_uint_eq(lk.n_waiters, 0);
	/* With a waiter queued, even a compatible try fails. */
	ck_assert_int_eq(acquire(&c, LOCK_EXCLUSIVE, 1), 0);
	ck_assert_int_eq(lock_acquire(&lk, &d, LOCK_SHARED, true, on_granted, NULL), -EAGAIN);
	ck_assert_uint_eq(lk.n_holders, 2);
}
END_TEST

/* A grant callback that releases at once hands the lock on. */
static struct lock_request chain[3];

static void release_on_grant(struct lock_request *req)
{
	on_granted(req);
	lock_release(&lk, req);
}

START_TEST(test_reentrant_callbacks)
{
	struct lock_request holder;

	ck_assert_int_eq(acquire(&holder, LOCK_EXCLUSIVE, 0), 1);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(lock_acquire(&lk, &chain[i], LOCK_EXCLUSIVE, false,
					      release_on_grant, (void *)(long)(i + 1)),
				 0);
	lock_release(&lk, &holder);
	ck_assert_int_eq(n_granted, 3);
	ck_assert_int_eq(granted_order[0], 1);
	ck_assert_int_eq(granted_order[2], 3);
	ck_assert(lock_is_idle(&lk));
}
END_TEST

START_TEST(test_names)
{
	ck_assert_int_eq(lock_mode_from_string("shared"), LOCK_SHARED);
	ck_assert_int_eq(lock_mode_from_string("disjoint"), LOCK_DISJOINT);
	ck_assert_int_eq(lock_mode_from_string("exclusive"), LOCK_EXCLUSIVE);
	ck_assert_int_eq(lock_mode_from_string("Shared"), -EINVAL);
	ck_assert_str_eq(lock_state_to_string(LOCK_IDLE), "idle");
	ck_assert_str_eq(lock_state_to_string(LOCK_READING), "reading");
}
END_TEST

Suite *lock_suite(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_idle_grants_any_mode);
	tcase_add_test(tc, test_compatibility_matrix);
	tcase_add_test(tc, test_fifo_no_barging);
	tcase_add_test(tc, test_grant_stops_at_incompatible);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_try_only);
	tcase_add_test(tc, test_reentrant_callbacks);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return s;
}
