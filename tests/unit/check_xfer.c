/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfers (daemon/xfer.c) on memfd regions, built on a session and the
 * region registry, without a connection: Read, Write and Copy report once
 * through their completion callback, on the loop or after the pool; they
 * wait behind leases and time out; rights are looked at again once the
 * locks came (an Unshare meanwhile moves nothing); a lease names the region
 * it covers; a cancelled wait leaves the lock free.
 *
 * Bounds are the dispatcher's (rpc_data.c, region_check_range(), covered
 * by the region suite): a transfer trusts the ranges it is given.
 */
#include <errno.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/mem/lease.h"
#include "daemon/mem/xfer.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "tests/unit/mem-fixture.h"
#include "tests/testlib.h"

static struct mem_fixture f;

/* What the completion callback saw. */
static struct {
	unsigned calls;
	int result;
	char error[64];
	char *out;
	bool done;
	unsigned n_parts;
} seen;

static void on_done(void *userdata, struct xfer *x, int result, struct errinfo *e)
{
	ck_assert_ptr_eq(userdata, &seen);
	seen.calls++;
	seen.result = result;
	snprintf(seen.error, sizeof(seen.error), "%s", e->name ?: "");
	free(seen.out);
	seen.out = TAKE_PTR(x->out);
	seen.n_parts = x->n_parts;
	seen.done = true;
	xfer_free(x);
}

static void setup(void)
{
	mem_fixture_init(&f);
	memset(&seen, 0, sizeof(seen));
}

static void teardown(void)
{
	free(seen.out);
	mem_fixture_done(&f);
}

/* A transfer of caller's with its ends' references taken here. */
static struct xfer *new_xfer(struct session *caller, enum xfer_kind kind, int64_t timeout_ms)
{
	struct xfer *x = xfer_new(caller, kind, timeout_ms, on_done, &seen);

	ck_assert_ptr_nonnull(x);
	return x;
}

static void set_src(struct xfer *x, struct region *r, uint64_t offset)
{
	x->src = (struct xfer_end){ .region = region_ref(r), .offset = offset };
}

static void set_dst(struct xfer *x, struct region *r, uint64_t offset)
{
	x->dst = (struct xfer_end){ .region = region_ref(r),
				    .offset = offset,
				    .write = true,
				    .mode = LOCK_EXCLUSIVE };
}

/* Starts x and runs the loop until it reported (or 10 s). */
static void start_and_wait(struct xfer *x)
{
	ck_assert_int_eq(xfer_start(x), 0);
	mem_fixture_run_until(&f, &seen.done, 10000);
	ck_assert_uint_eq(seen.calls, 1);
}

static bool bytes_are(const struct region *r, uint64_t off, const unsigned char *want, size_t n)
{
	return memcmp((const char *)r->addr + off, want, n) == 0;
}

/* A small Read answers on the loop, before xfer_start() returns, with the
 * whole reply made. */
START_TEST(test_read_inline)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct xfer *x = new_xfer(f.owner, XFER_READ, -1);
	char want[256] = "{\"parameters\":{\"length\":\"100\",\"data\":\"";

	set_src(x, r, 10);
	x->length = 100;
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, 0);
	base64_encode((const char *)r->addr + 10, 100, want + strlen(want));
	strcat(want, "\"}}");
	ck_assert_str_eq(seen.out, want);
	ck_assert_uint_eq(strlen(seen.out) + 1, xfer_read_reply_size(100));
	/* The lock it took is given back. */
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
}
END_TEST

/* A large Write goes to the pool: done runs later, on the loop, with the
 * bytes in place; a Read of them gives them back. */
START_TEST(test_write_large_on_pool)
{
	/* Beyond what the loop does itself at the rate assumed for base64. */
	size_t n = 64 * 4096;
	struct region *r = mem_fixture_import(&f, n + 4096);
	unsigned char *data = malloc(n);
	char *text = malloc(base64_encoded_len(n) + 1);
	struct xfer *x = new_xfer(f.owner, XFER_WRITE, -1);

	ck_assert_uint_gt(n, (size_t)XFER_INLINE_RATE_MIN * f.core.cfg.loop_work_usec);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(text);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	base64_encode(data, n, text);
	set_dst(x, r, 4096);
	x->length = n;
	x->text = text;
	x->text_len = strlen(text);
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 0);
	/* Held while the bytes move. */
	ck_assert_int_ne(r->lock.state, LOCK_IDLE);
	mem_fixture_run_until(&f, &seen.done, 10000);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, 0);
	ck_assert(bytes_are(r, 4096, data, n));
	/* Before the range: untouched. */
	ck_assert_uint_eq(((unsigned char *)r->addr)[4095], 4095 & 0xff);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
	free(text);
	free(data);
}
END_TEST

/* Text that is no base64 of length bytes: InvalidParameter "data", and not
 * one byte written. */
START_TEST(test_write_bad_base64)
{
	static const char *bad[] = { "AAAA", "!!!!!!!!", "AAAAAAA" };
	struct region *r = mem_fixture_import(&f, 4096);

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct xfer *x = new_xfer(f.owner, XFER_WRITE, -1);

		memset(&seen, 0, sizeof(seen));
		set_dst(x, r, 0);
		x->length = 6;
		x->text = bad[i];
		x->text_len = strlen(bad[i]);
		start_and_wait(x);
		ck_assert_int_eq(seen.result, -EINVAL);
		ck_assert_str_eq(seen.error, VARLINK_ERROR_INVALID_PARAMETER);
	}
	for (unsigned i = 0; i < 8; i++)
		ck_assert_uint_eq(((unsigned char *)r->addr)[i], i);
}
END_TEST

/* Copies between two regions, and within one region over overlapping
 * ranges, either way: the result is memmove()'s. */
START_TEST(test_copy)
{
	struct region *a = mem_fixture_import(&f, 8192), *b = mem_fixture_import(&f, 8192);
	unsigned char want[8192];
	struct xfer *x;

	/* b's id is higher: the locks are taken in id order whichever way. */
	x = new_xfer(f.owner, XFER_COPY, -1);
	set_src(x, b, 100);
	set_dst(x, a, 1000);
	x->length = 3000;
	memcpy(want, a->addr, 8192);
	memcpy(want + 1000, (char *)b->addr + 100, 3000);
	start_and_wait(x);
	ck_assert_int_eq(seen.result, 0);
	ck_assert(bytes_are(a, 0, want, 8192));

	/* Forward overlap in one region. */
	memset(&seen, 0, sizeof(seen));
	x = new_xfer(f.owner, XFER_COPY, -1);
	set_src(x, b, 0);
	set_dst(x, b, 10);
	x->length = 4000;
	memcpy(want, b->addr, 8192);
	memmove(want + 10, want, 4000);
	start_and_wait(x);
	ck_assert_int_eq(seen.result, 0);
	ck_assert(bytes_are(b, 0, want, 8192));
	ck_assert_int_eq(a->lock.state, LOCK_IDLE);
	ck_assert_int_eq(b->lock.state, LOCK_IDLE);
}
END_TEST

/* A Copy of XFER_SPLIT_MIN and more goes to the pool in parts, one per CPU
 * up to XFER_PARTS_MAX, each at least half of XFER_SPLIT_MIN, page-aligned
 * slices that together move every byte; below, one part. */
START_TEST(test_copy_split)
{
	struct xfer *x = new_xfer(f.owner, XFER_COPY, -1);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want_parts = (unsigned)MIN((long)XFER_PARTS_MAX, MAX(cpus, 1L));
	struct region *a, *b;
	unsigned char *src;
	uint64_t n, small;

	/* Beyond what the loop does itself at the rate the fixture measured. */
	n = 2 * (uint64_t)XFER_SPLIT_MIN + 3000;
	a = mem_fixture_import(&f, n + 8192);
	b = mem_fixture_import(&f, n + 8192);
	set_src(x, b, 100);
	set_dst(x, a, 5000);
	if (xfer_inline_max(x) >= n) {
		/* A machine that copies this much within the bound: the
		 * split is not reached here. */
		printf("test_copy_split: %" PRIu64 " bytes run on the loop here\n", n);
		xfer_free(x);
		return;
	}
	src = b->addr;
	for (uint64_t i = 0; i < n + 8192; i++)
		src[i] = (unsigned char)(i * 31 + i / 4096);
	want_parts = MIN(want_parts, (unsigned)(n / (XFER_SPLIT_MIN / 2)));
	x->length = n;
	start_and_wait(x);
	ck_assert_int_eq(seen.result, 0);
	ck_assert_uint_eq(seen.n_parts, want_parts);
	ck_assert(bytes_are(a, 5000, src + 100, n));
	/* The bytes around the range: the fixture's pattern. */
	ck_assert_uint_eq(((unsigned char *)a->addr)[4999], 4999 & 0xff);
	ck_assert_uint_eq(((unsigned char *)a->addr)[5000 + n], (5000 + n) & 0xff);

	/* Below the threshold: one part, or none (the loop's). */
	memset(&seen, 0, sizeof(seen));
	x = new_xfer(f.owner, XFER_COPY, -1);
	set_src(x, a, 5000);
	set_dst(x, b, 0);
	small = XFER_SPLIT_MIN - 4096;
	x->length = small;
	want_parts = small <= xfer_inline_max(x) ? 0 : 1;
	start_and_wait(x);
	ck_assert_int_eq(seen.result, 0);
	ck_assert_uint_eq(seen.n_parts, want_parts);
	ck_assert(bytes_are(b, 0, (unsigned char *)a->addr + 5000, small));
}
END_TEST

/* Behind another's exclusive lease: a Write waits, and times out with
 * LockTimeout; with timeout 0 it does not wait at all. */
START_TEST(test_lock_timeout)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *l;
	struct errinfo e = {};
	struct xfer *x;
	uint64_t t0;

	ck_assert_int_eq(lease_new(f.owner, r, LOCK_EXCLUSIVE, &l, &e), 0);
	ck_assert_int_eq(lease_acquire(l, -1, NULL, NULL), 1);

	x = new_xfer(f.owner, XFER_READ, 0);
	set_src(x, r, 0);
	x->length = 8;
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, -ETIMEDOUT);
	ck_assert_str_eq(seen.error, RDMAMEM_ERROR_LOCK_TIMEOUT);

	memset(&seen, 0, sizeof(seen));
	x = new_xfer(f.owner, XFER_READ, 30);
	set_src(x, r, 0);
	x->length = 8;
	uv_update_time(&f.loop);
	t0 = uv_now(&f.loop);
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 0);
	mem_fixture_run_until(&f, &seen.done, 5000);
	ck_assert_int_eq(seen.result, -ETIMEDOUT);
	ck_assert_str_eq(seen.error, RDMAMEM_ERROR_LOCK_TIMEOUT);
	ck_assert_uint_ge(uv_now(&f.loop) - t0, 30);
	ck_assert_ptr_null(seen.out);
	/* The timed-out request left the queue: the lease alone holds it. */
	ck_assert_uint_eq(r->lock.n_waiters, 0);
	lease_release(l);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
}
END_TEST

/*
 * Another uid may write through a share, and waits behind the owner's
 * lease. The share is taken back meanwhile: once the lock comes the rights
 * are looked at again, PermissionDenied, nothing moved.
 */
START_TEST(test_rights_recheck)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *l;
	struct errinfo e = {};
	struct xfer *x;

	ck_assert_int_eq(region_share(r, false, 2000, false, &e), 0);
	ck_assert_int_eq(lease_new(f.owner, r, LOCK_EXCLUSIVE, &l, &e), 0);
	ck_assert_int_eq(lease_acquire(l, -1, NULL, NULL), 1);

	x = new_xfer(f.other, XFER_WRITE, -1);
	set_dst(x, r, 0);
	x->length = 3;
	x->text = "////";
	x->text_len = 4;
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 0);
	ck_assert_int_eq(region_unshare(r, false, 2000), 0);
	lease_release(l);
	mem_fixture_run_until(&f, &seen.done, 5000);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, -EACCES);
	ck_assert_str_eq(seen.error, RDMAMEM_ERROR_PERMISSION_DENIED);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_eq(((unsigned char *)r->addr)[i], i);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);

	/* With the share back, the same write lands. */
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(region_share(r, false, 2000, false, &e), 0);
	x = new_xfer(f.other, XFER_WRITE, -1);
	set_dst(x, r, 0);
	x->length = 3;
	x->text = "////";
	x->text_len = 4;
	start_and_wait(x);
	ck_assert_int_eq(seen.result, 0);
	ck_assert_uint_eq(((unsigned char *)r->addr)[2], 0xff);
}
END_TEST

/* A transfer under the caller's lease runs at once, the lease holding the
 * lock; a lease of another region, one still waiting, or a shared one for
 * a write refuse to start (done does not run). */
START_TEST(test_under_lease)
{
	struct region *r = mem_fixture_import(&f, 4096), *q = mem_fixture_import(&f, 4096);
	struct lease *l, *shared, *waiting;
	struct errinfo e = {};
	struct xfer *x;

	ck_assert_int_eq(lease_new(f.owner, r, LOCK_EXCLUSIVE, &l, &e), 0);
	ck_assert_int_eq(lease_acquire(l, -1, NULL, NULL), 1);

	x = new_xfer(f.owner, XFER_WRITE, 0);
	set_dst(x, r, 0);
	x->dst.lease = lease_ref(l);
	x->length = 3;
	x->text = "////";
	x->text_len = 4;
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, 0);
	ck_assert_uint_eq(((unsigned char *)r->addr)[0], 0xff);
	ck_assert(lease_is_held(l));

	/* Named for the wrong region. */
	x = new_xfer(f.owner, XFER_READ, 0);
	set_src(x, q, 0);
	x->src.lease = lease_ref(l);
	x->length = 1;
	ck_assert_int_eq(xfer_start(x), -EINVAL);
	ck_assert_str_eq(x->err.name, RDMAMEM_ERROR_LEASE_CONFLICT);
	xfer_free(x);

	/* Still waiting behind l. */
	ck_assert_int_eq(lease_new(f.owner, r, LOCK_SHARED, &waiting, &e), 0);
	ck_assert_int_eq(lease_acquire(waiting, -1, NULL, NULL), 0);
	x = new_xfer(f.owner, XFER_READ, 0);
	set_src(x, r, 0);
	x->src.lease = lease_ref(waiting);
	x->length = 1;
	ck_assert_int_eq(xfer_start(x), -EINVAL);
	ck_assert_str_eq(x->err.name, RDMAMEM_ERROR_LEASE_CONFLICT);
	xfer_free(x);
	lease_release(waiting);

	/* Shared: reads only. */
	ck_assert_int_eq(lease_new(f.owner, q, LOCK_SHARED, &shared, &e), 0);
	ck_assert_int_eq(lease_acquire(shared, -1, NULL, NULL), 1);
	x = new_xfer(f.owner, XFER_WRITE, 0);
	set_dst(x, q, 0);
	x->dst.lease = lease_ref(shared);
	x->length = 3;
	x->text = "////";
	x->text_len = 4;
	ck_assert_int_eq(xfer_start(x), -EINVAL);
	ck_assert_str_eq(x->err.name, RDMAMEM_ERROR_LEASE_CONFLICT);
	xfer_free(x);
	ck_assert_uint_eq(((unsigned char *)q->addr)[0], 0);
	ck_assert_uint_eq(seen.calls, 1);
}
END_TEST

/* The client leaves while its transfer waits: done runs at once with
 * -ECANCELED, and the lock has no waiter left. */
START_TEST(test_cancel_waiting)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct lease *l;
	struct errinfo e = {};
	struct xfer *x;

	ck_assert_int_eq(lease_new(f.owner, r, LOCK_EXCLUSIVE, &l, &e), 0);
	ck_assert_int_eq(lease_acquire(l, -1, NULL, NULL), 1);
	x = new_xfer(f.owner, XFER_READ, 60000);
	set_src(x, r, 0);
	x->length = 8;
	ck_assert_int_eq(xfer_start(x), 0);
	ck_assert_uint_eq(r->lock.n_waiters, 1);
	xfer_cancel(x);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_int_eq(seen.result, -ECANCELED);
	ck_assert_str_eq(seen.error, "");
	ck_assert_uint_eq(r->lock.n_waiters, 0);
	lease_release(l);
	ck_assert_int_eq(r->lock.state, LOCK_IDLE);
	/* Nothing comes later: the timeout was disarmed. */
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(seen.calls, 1);
}
END_TEST

Suite *xfer_suite(void)
{
	Suite *su = suite_create("xfer");
	TCase *tc = tcase_create("xfer");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_read_inline);
	tcase_add_test(tc, test_write_large_on_pool);
	tcase_add_test(tc, test_write_bad_base64);
	tcase_add_test(tc, test_copy);
	tcase_add_test(tc, test_copy_split);
	tcase_add_test(tc, test_lock_timeout);
	tcase_add_test(tc, test_rights_recheck);
	tcase_add_test(tc, test_under_lease);
	tcase_add_test(tc, test_cancel_waiting);
	suite_add_tcase(su, tc);
	return su;
}
