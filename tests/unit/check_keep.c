/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions kept across a restart (mem/keep.c), in process: a store of the
 * test's stands in for systemd's (the real one runs in make vmsystemd, a
 * stand-in for it over a real notify socket in tests/python/test_restart.py).
 * Two registries, one after the other, play the daemon before and after.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/mem/keep.h"
#include "proto/errors.h"
#include "tests/testlib.h"
#include "tests/unit/mem-fixture.h"
#include "tests/unit/store-fixture.h"

#define STORE_MAX 16

/* The devices' side: region `on_dev` is registered on "fake0" and
 * "fake1"; a restore's registrations are recorded. */
static uint64_t on_dev;
static char registered[2][32];
static unsigned n_registered;

static void fake_each(void *userdata, struct region *r, void (*fn)(void *ctx, const char *device),
		      void *ctx)
{
	(void)userdata;
	if (r->id == on_dev) {
		fn(ctx, "fake0");
		fn(ctx, "fake1");
	}
}

static void fake_register_on(void *userdata, struct region *r, const char *device)
{
	(void)userdata;
	ck_assert_uint_eq(r->id, on_dev);
	ck_assert_uint_lt(n_registered, 2);
	snprintf(registered[n_registered++], sizeof(registered[0]), "%s", device);
}

static const struct keep_device_ops fake_devices = {
	.each = fake_each,
	.register_on = fake_register_on,
};

/* The daemon after, on a fresh fixture: what the store passes back,
 * restored with grace_sec; returns how many regions came back. */
static unsigned after(struct mem_fixture *f, struct keep_ctx *k, struct store *s,
		      unsigned grace_sec, bool devices)
{
	struct keep_passed *passed;
	size_t n = s->n;
	unsigned got;

	mem_fixture_init(f);
	keep_init(k, &f->regions, &store_ops, s, STORE_MAX);
	if (devices)
		keep_set_devices(k, &fake_devices, NULL);
	passed = store_pass(s);
	got = keep_restore(k, passed, n, grace_sec);
	passed_free(passed, n);
	return got;
}

/* Shuts the daemon of after() down, and the store. */
static void after_done(struct mem_fixture *f, struct keep_ctx *k, struct store *s)
{
	keep_freeze(k);
	keep_stop(k);
	mem_fixture_done(f);
	store_done(s);
}

START_TEST(test_names)
{
	struct keep_name n = { .id = 17,
			       .uid = 1000,
			       .gid = 100,
			       .offset = 4096,
			       .length = 8192,
			       .access = 7 },
			 back;
	char buf[KEEP_NAME_MAX];
	static const char *const bad[] = {
		"rdmamem-r1.0.1000.100.0.4096.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.1.1000.100.0.0.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.1.1000.100.18446744073709551615.2.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.1.1000.100.0.4096.16.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.1.1000.100.0.4096.7.0123456789abcdef0123456789abcde",
		"rdmamem-r1.1.1000.100.0.4096.7.0123456789abcdef0123456789abcdefg",
		"rdmamem-r1.1.1000.100.0.4096.7.zz23456789abcdef0123456789abcdef",
		"rdmamem-r1.1.4294967295.100.0.4096.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.-1.1000.100.0.4096.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.1.1000.100.0.4096.0123456789abcdef0123456789abcdef",
		"rdmamem-r2.1.1000.100.0.4096.7.0123456789abcdef0123456789abcdef",
		"rdmamem-r1.",
		"",
	};

	strcpy(n.token, "0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(keep_name_format(&n, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf,
			 "rdmamem-r1.17.1000.100.4096.8192.7.0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(keep_name_parse(buf, &back), 0);
	ck_assert(back.id == 17 && back.uid == 1000 && back.gid == 100 && back.offset == 4096 &&
		  back.length == 8192 && back.access == 7);
	ck_assert_str_eq(back.token, n.token);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ck_assert_msg(keep_name_parse(bad[i], &back) == -EINVAL, "accepted %s", bad[i]);
}
END_TEST

/* The daemon before: two regions kept, one shared, one unregistered. */
static void before(struct store *s, uint64_t *kept_id, uint64_t *other_id, char *token)
{
	struct mem_fixture f;
	struct keep_ctx k;
	struct region *a, *b, *c;
	struct errinfo e = {};
	bool never = false;

	mem_fixture_init(&f);
	keep_init(&k, &f.regions, &store_ops, s, STORE_MAX);
	keep_set_devices(&k, &fake_devices, NULL);
	a = mem_fixture_import(&f, 8192);
	on_dev = a->id;
	b = mem_fixture_import(&f, 4096);
	c = mem_fixture_import(&f, 4096);
	ck_assert(keep_region(&k, a) && keep_region(&k, b) && keep_region(&k, c));
	ck_assert_uint_eq(store_count(s, KEEP_REGION_PREFIX), 3);
	ck_assert_ptr_nonnull(keep_token(a));
	ck_assert_str_ne(keep_token(a), keep_token(b));
	strcpy(token, keep_token(a));
	ck_assert_int_eq(region_share(a, false, 4242, true, &e), 0);
	keep_changed(&k);
	/* The state is written after its delay. */
	mem_fixture_run_until(&f, &never, 3 * KEEP_STATE_DELAY_MSEC);
	ck_assert_uint_eq(store_count(s, KEEP_STATE_PREFIX), 1);
	/* Unregistered: out of the store. */
	region_drop_owner(c);
	ck_assert_uint_eq(store_count(s, KEEP_REGION_PREFIX), 2);
	*kept_id = a->id;
	*other_id = b->id;
	/* The shutdown leaves the store as it is: the owner's disconnect is
	 * the daemon's doing. */
	keep_freeze(&k);
	session_close(f.owner);
	ck_assert_uint_eq(store_count(s, KEEP_REGION_PREFIX), 2);
	keep_stop(&k);
	mem_fixture_done(&f);
}

START_TEST(test_restore_reclaim_expire)
{
	struct store s = {};
	struct mem_fixture f;
	struct keep_ctx k;
	struct region *a, *b;
	struct errinfo e = {};
	char token[KEEP_TOKEN_HEX + 1], wrong[KEEP_TOKEN_HEX + 1];
	uint64_t kept_id, other_id, left;
	bool never = false;

	before(&s, &kept_id, &other_id, token);

	/* The daemon after: both come back with their ids, waiting, a
	 * registered again on its devices. */
	n_registered = 0;
	ck_assert_uint_eq(after(&f, &k, &s, 1, true), 2);
	/* The unregistered region's id is not handed out again. */
	ck_assert_uint_eq(f.regions.next_region_id, other_id + 2 + KEEP_ID_HEADROOM);
	a = idmap_get(&f.regions.regions, kept_id);
	b = idmap_get(&f.regions.regions, other_id);
	ck_assert(a && b);
	ck_assert(keep_awaiting(a, &left) && left <= 1000);
	ck_assert_uint_eq(a->size, 8192);
	ck_assert_uint_eq(((unsigned char *)a->addr)[300], 300 & 0xff);
	ck_assert_uint_eq(a->n_shares, 1);
	ck_assert(a->shares[0].id == 4242 && a->shares[0].readonly);
	ck_assert_uint_eq(n_registered, 2);
	ck_assert_str_eq(registered[0], "fake0");
	ck_assert_str_eq(registered[1], "fake1");

	/* Another uid, a wrong token: refused, still waiting. */
	ck_assert_int_eq(keep_reclaim(&k, a, f.other, token, &e), -EACCES);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_PERMISSION_DENIED);
	strcpy(wrong, token);
	wrong[0] = wrong[0] == '0' ? '1' : '0';
	ck_assert_int_eq(keep_reclaim(&k, a, f.owner, wrong, &e), -EACCES);
	ck_assert_int_eq(keep_reclaim(&k, a, f.owner, "short", &e), -EACCES);
	ck_assert(keep_awaiting(a, &left));
	/* The owner with its token: the region is its session's. */
	ck_assert_int_eq(keep_reclaim(&k, a, f.owner, token, &e), 0);
	ck_assert(!keep_awaiting(a, &left));
	ck_assert_ptr_eq(a->owner_link.session, f.owner);
	ck_assert_int_eq(keep_reclaim(&k, a, f.owner, token, &e), -ENOENT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_REGION);

	/* b nobody reclaims: gone with the grace, and out of the store. */
	mem_fixture_run_until(&f, &never, 1500);
	ck_assert_ptr_null(idmap_get(&f.regions.regions, other_id));
	ck_assert_uint_eq(k.n_expired, 1);
	ck_assert_uint_eq(store_count(&s, KEEP_REGION_PREFIX), 1);
	/* The state was written again, the old generation removed. */
	ck_assert_uint_eq(store_count(&s, KEEP_STATE_PREFIX), 1);

	/* Unregistered after the reclaim: the store is empty of regions. */
	region_drop_owner(a);
	ck_assert_uint_eq(store_count(&s, KEEP_REGION_PREFIX), 0);
	after_done(&f, &k, &s);
}
END_TEST

/* Into the store: a name this daemon never writes, and a second file
 * under a kept region's name. */
static void add_junk(struct store *s)
{
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("junk", 4096, &fd, NULL), 0);
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->names[i], KEEP_REGION_PREFIX, strlen(KEEP_REGION_PREFIX)) == 0) {
			store_put(s, s->names[i], fd);
			break;
		}
	store_put(s, "rdmamem-r1.garbage", fd);
	close(fd);
}

/* Names that are no region of this daemon, a second file of one region,
 * and keeping switched off (grace 0): dropped from the store, fds closed. */
START_TEST(test_restore_rejects)
{
	struct store s = {};
	struct mem_fixture f;
	struct keep_ctx k;
	uint64_t kept_id, other_id;
	char token[KEEP_TOKEN_HEX + 1];

	before(&s, &kept_id, &other_id, token);
	add_junk(&s);
	ck_assert_uint_eq(after(&f, &k, &s, 0, false), 0);
	ck_assert_uint_eq(f.regions.n_regions, 0);
	ck_assert_uint_eq(store_count(&s, KEEP_REGION_PREFIX), 0);
	after_done(&f, &k, &s);

	/* With a grace, the garbage and the duplicate still go. */
	before(&s, &kept_id, &other_id, token);
	add_junk(&s);
	ck_assert_uint_eq(after(&f, &k, &s, 60, false), 2);
	ck_assert_uint_eq(store_count(&s, KEEP_REGION_PREFIX), 2);
	after_done(&f, &k, &s);
}
END_TEST

/* A full store keeps no more (and says so once); a store that refuses
 * once is not used again. */
START_TEST(test_store_limits)
{
	struct store s = {};
	struct mem_fixture f;
	struct keep_ctx k;
	struct region *r[4];

	mem_fixture_init(&f);
	keep_init(&k, &f.regions, &store_ops, &s, 4); /* 2 regions + 2 states */
	for (size_t i = 0; i < ELEMENTSOF(r); i++)
		r[i] = mem_fixture_import(&f, 4096);
	ck_assert(keep_region(&k, r[0]) && keep_region(&k, r[1]));
	ck_assert(!keep_region(&k, r[2]));
	ck_assert_ptr_null(keep_token(r[2]));
	region_drop_owner(r[0]);
	ck_assert(keep_region(&k, r[2]));
	region_drop_owner(r[1]);
	s.refuse = true;
	ck_assert(!keep_region(&k, r[3]));
	ck_assert_uint_eq(k.max, 0);
	s.refuse = false;
	ck_assert(!keep_region(&k, r[3]));
	keep_freeze(&k);
	keep_stop(&k);
	mem_fixture_done(&f);
	store_done(&s);
}
END_TEST

Suite *keep_suite(void)
{
	Suite *s = suite_create("keep");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_restore_reclaim_expire);
	tcase_add_test(tc, test_restore_rejects);
	tcase_add_test(tc, test_store_limits);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}
