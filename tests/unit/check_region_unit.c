/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Region lifetime and weak references, in process, without a socket; and
 * the lifetime of a region's registrations over the fake verbs
 * (tests/fakes/fake-verbs.c), whose (de)registrations a case can hold on
 * their pool thread to decide when they finish.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/rdma/device.h"
#include "daemon/core/errinfo.h"
#include "daemon/rdma/mreg.h"
#include "daemon/rdma/rdma.h"
#include "daemon/mem/region.h"
#include "daemon/mem/region_memfd.h"
#include "daemon/core/session.h"
#include "daemon/rdma/verbs.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/unit/mem-fixture.h"
#include "tests/unit/session-fixture.h"
#include "tests/testlib.h"
#include "tests/fakes/fake.h"

/* The contexts the modules under test take: no daemon. */
static struct core core;
static struct account_table accounts;
static struct region_registry regions;
static struct rdma_ctx rdma;
static struct session *owner, *other;
static uv_loop_t loop;

static void setup(void)
{
	memset(&core, 0, sizeof(core));
	memset(&regions, 0, sizeof(regions));
	memset(&rdma, 0, sizeof(rdma));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	core.loop = &loop;
	daemon_config_init(&core.cfg);
	account_table_init(&accounts);
	core.accounts = &accounts;
	region_registry_init(&regions, &core);
	rdma.core = &core;

	owner = test_session_new(&accounts, 1,
				 &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
	other = test_session_new(&accounts, 2,
				 &(struct ucred){ .pid = 2, .uid = 2000, .gid = 2000 });
}

static void teardown(void)
{
	owner = session_unref(owner);
	other = session_unref(other);
	ck_assert_uint_eq(accounts.by_uid.n_entries, 0);
	account_table_done(&accounts);
	region_registry_stop(&regions);
	uv_run(&loop, UV_RUN_DEFAULT);
	region_registry_done(&regions);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* The file behind fd, opened anew: another fd, the same inode. */
static int open_by_proc(int fd)
{
	char path[64];
	int n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(n, 0);
	return n;
}

static struct region *import(size_t size)
{
	struct memfd_import imp = { .length = 0 };
	struct errinfo e = {};
	struct region *r = NULL;

	ck_assert_int_eq(rdmamem_memfd_create("unit", size, &imp.fd, NULL), 0);
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &r, &e), 0);
	ck_assert_int_eq(imp.fd, -EBADF); /* taken */
	return r;
}

START_TEST(test_refcount_keeps_memory)
{
	struct region *r = import(8192), *extra;
	struct errinfo e = {};

	ck_assert_uint_eq(regions.n_regions, 1);
	ck_assert_uint_eq(owner->account->pinned_bytes, 8192);
	ck_assert_ptr_eq(list_first_entry(&owner->sets[SESSION_REGION].items, struct region,
					  owner_link.link),
			 r);

	/* An operation's reference outlives Unregister. */
	extra = region_ref(r);
	region_drop_owner(r);
	ck_assert(r->dead);
	ck_assert(list_empty(&owner->sets[SESSION_REGION].items));
	ck_assert_int_eq(region_lookup(&regions, r->id, owner, REGION_READ, &extra, &e), -ENOENT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_REGION);
	/* Still mapped and charged: the memory is in use. */
	((char *)r->addr)[8191] = 1;
	ck_assert_uint_eq(regions.n_regions, 1);
	ck_assert_uint_eq(owner->account->pinned_bytes, 8192);

	region_unref(r);
	ck_assert_uint_eq(regions.n_regions, 0);
	ck_assert_uint_eq(owner->account->pinned_bytes, 0);
	ck_assert_uint_eq(owner->account->n_regions, 0);
}
END_TEST

START_TEST(test_weak_references)
{
	struct region *r = import(4096), *s;
	struct region_weak w = region_weak(r), stale = w;

	s = region_weak_upgrade(&regions, &w);
	ck_assert_ptr_eq(s, r);
	ck_assert_uint_eq(r->n_ref, 2);
	region_unref(s);

	/* Same id, another range: the memory behind the handle changed. */
	stale.size = 8192;
	ck_assert_ptr_null(region_weak_upgrade(&regions, &stale));
	stale = w;
	stale.addr = w.addr + 4096;
	ck_assert_ptr_null(region_weak_upgrade(&regions, &stale));
	stale = w;
	stale.id = w.id + 1;
	ck_assert_ptr_null(region_weak_upgrade(&regions, &stale));

	/* Dead regions do not upgrade, even while referenced. */
	s = region_ref(r);
	region_drop_owner(r);
	ck_assert_ptr_null(region_weak_upgrade(&regions, &w));
	region_unref(s);
	ck_assert_ptr_null(region_weak_upgrade(&regions, &w));
}
END_TEST

START_TEST(test_rights)
{
	struct region *r = import(4096), *got = NULL;
	struct errinfo e = {};
	gid_t groups[] = { 77 };

	ck_assert_int_eq(region_lookup(&regions, r->id, other, REGION_READ, &got, &e), -EACCES);
	ck_assert_ptr_null(got);
	ck_assert_int_eq(region_share(r, true, 77, true, &e), 0);
	ck_assert_int_eq(region_share(r, true, 77, true, &e), -EEXIST);
	other->groups = groups;
	other->n_groups = 1;
	ck_assert_int_eq(region_lookup(&regions, r->id, other, REGION_READ, &got, &e), 0);
	region_unref(got);
	ck_assert_int_eq(region_lookup(&regions, r->id, other, REGION_WRITE, &got, &e), -EACCES);
	/* Upgrading the same share to read-write replaces it. */
	ck_assert_int_eq(region_share(r, true, 77, false, &e), 0);
	ck_assert_uint_eq(r->n_shares, 1);
	ck_assert_int_eq(region_lookup(&regions, r->id, other, REGION_WRITE, &got, &e), 0);
	region_unref(got);
	ck_assert_int_eq(region_lookup(&regions, r->id, other, REGION_ADMIN, &got, &e), -EACCES);
	ck_assert(region_visible_to(r, other));
	other->groups = NULL;
	other->n_groups = 0;
	ck_assert(!region_visible_to(r, other));

	/* Taken back: the share goes, the others stay in their order. */
	ck_assert_int_eq(region_share(r, false, 5, false, NULL), 0);
	ck_assert_int_eq(region_share(r, false, 6, true, NULL), 0);
	ck_assert_int_eq(region_unshare(r, false, 77), -ENOENT);
	ck_assert_int_eq(region_unshare(r, true, 77), 0);
	ck_assert_int_eq(region_unshare(r, true, 77), -ENOENT);
	ck_assert_uint_eq(r->n_shares, 2);
	ck_assert_uint_eq(r->shares[0].id, 5);
	ck_assert_uint_eq(r->shares[1].id, 6);
	other->groups = groups;
	other->n_groups = 1;
	ck_assert(!region_allows(r, other, REGION_READ));
	other->groups = NULL;
	other->n_groups = 0;

	ck_assert_int_eq(region_check_range(r, 0, 4096, "x", &e), 0);
	ck_assert_int_eq(region_check_range(r, 4096, 0, "x", &e), 0);
	ck_assert_int_eq(region_check_range(r, 4097, 0, "x", &e), -ERANGE);
	ck_assert_int_eq(region_check_range(r, 1, UINT64_MAX, "x", &e), -ERANGE);
	ck_assert_int_eq(region_check_range(r, UINT64_MAX, 2, "x", &e), -ERANGE);
	region_drop_owner(r);
}
END_TEST

/* The fake device "fake0" opened, as the daemon opens devices. CK_FORK:
 * the verbs table and the fake's counters start afresh in each case. */
static void setup_fake(void)
{
	setup();
	vb = &fake_vb_ops;
	ck_assert_int_eq(devices_open(&rdma), 0);
	ck_assert_uint_eq(rdma.n_devices, 1);
}

static void teardown_fake(void)
{
	fake_verbs_hold_reg(false);
	fake_verbs_hold_dereg(false);
	devices_stop(&rdma);
	uv_run(&loop, UV_RUN_DEFAULT);
	devices_free(&rdma);
	/* Every MR was deregistered before its region went, the PDs after. */
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
	teardown();
}

/* A waiter that notes what was true when it ran. */
struct probe {
	struct mreg_waiter w;
	bool settled;
	int mrs_then;          /* MRs the fake verbs still had */
	uint64_t regions_then; /* regions still holding memory */
};

static void on_probe(struct mreg_waiter *w)
{
	struct probe *p = container_of(w, struct probe, w);

	p->settled = true;
	p->mrs_then = atomic_load(&fake_verbs_mrs);
	p->regions_then = regions.n_regions;
}

static void probe_init(struct probe *p)
{
	*p = (struct probe){ .w.settled = on_probe };
	list_init(&p->w.link);
}

/* Runs the loop for about msec, or until p settled. */
static void run_loop(struct probe *p, int msec)
{
	for (int i = 0; i < msec && !(p && p->settled); i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
}

/*
 * The owner lets go while the registration is still on the pool, a lease
 * holding the region: the MR it makes is deregistered as soon as it is
 * done, before anyone waiting for the registrations to be gone hears of
 * it; the memory stays for the lease and goes with it.
 */
START_TEST(test_revoke_in_flight)
{
	struct region *r = import(8192), *lease;
	struct probe reg, gone;
	struct mreg *m;

	probe_init(&reg);
	probe_init(&gone);
	fake_verbs_hold_reg(true);
	m = mreg_ensure(r, device_find(&rdma, "fake0"), &reg.w);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->state, MREG_PENDING);
	lease = region_ref(r);
	region_drop_owner(r);
	ck_assert(mreg_wait_revoked(r, &gone.w));
	run_loop(&gone, 50);
	ck_assert(!gone.settled);

	fake_verbs_hold_reg(false);
	run_loop(&gone, 10000);
	ck_assert(gone.settled);
	ck_assert(reg.settled);
	ck_assert_int_eq(gone.mrs_then, 0);
	ck_assert(!mreg_any(r));
	ck_assert_uint_eq(device_find(&rdma, "fake0")->n_mrs, 0);
	ck_assert_uint_eq(device_find(&rdma, "fake0")->mr_bytes, 0);

	ck_assert_uint_eq(regions.n_regions, 1);
	((char *)r->addr)[8191] = 1;
	region_unref(lease);
	ck_assert_uint_eq(regions.n_regions, 0);
}
END_TEST

/*
 * Drop order: with nothing else holding the region, its memory stays until
 * its MR is deregistered (held here on the pool), and goes right after.
 */
START_TEST(test_revoke_before_memory)
{
	struct region *r = import(4096);
	struct probe reg, gone;
	struct mreg *m;

	probe_init(&reg);
	probe_init(&gone);
	m = mreg_ensure(r, device_find(&rdma, "fake0"), &reg.w);
	run_loop(&reg, 10000);
	ck_assert_int_eq(m->state, MREG_REGISTERED);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 1);

	fake_verbs_hold_dereg(true);
	region_drop_owner(r);
	ck_assert(mreg_wait_revoked(r, &gone.w));
	ck_assert_int_eq(m->state, MREG_DEREGISTERING);
	run_loop(&gone, 50);
	ck_assert(!gone.settled);
	ck_assert_uint_eq(regions.n_regions, 1);

	fake_verbs_hold_dereg(false);
	run_loop(&gone, 10000);
	ck_assert(gone.settled);
	ck_assert_int_eq(gone.mrs_then, 0);
	ck_assert_uint_eq(gone.regions_then, 1);
	ck_assert_uint_eq(regions.n_regions, 0);
	ck_assert_uint_eq(owner->account->pinned_bytes, 0);
}
END_TEST

/* A recorded failure is forgotten with the owner's hold: nothing to wait for. */
START_TEST(test_revoke_failed)
{
	struct region *r = import(4096);
	struct probe reg, gone;

	probe_init(&reg);
	probe_init(&gone);
	test_expect("region: the fake device refuses a registration (a warning naming "
		    "RLIMIT_MEMLOCK)");
	atomic_store(&fake_verbs_fail_mr, true);
	mreg_ensure(r, device_find(&rdma, "fake0"), &reg.w);
	run_loop(&reg, 10000);
	ck_assert_int_eq(mreg_find(r, "fake0")->state, MREG_FAILED);
	region_drop_owner(r);
	ck_assert_uint_eq(regions.n_regions, 0);
}
END_TEST

/* Regions over one memfd are one memory, wherever each is mapped. */
START_TEST(test_same_memory)
{
	struct memfd_import imp = { .length = 8192 };
	struct region *a = import(4096), *b, *c;
	struct errinfo e = {};
	int64_t delta = 1;
	int fd;

	ck_assert(region_same_memory(a, a, &delta));
	ck_assert_int_eq(delta, 0);
	ck_assert_int_eq(rdmamem_memfd_create("unit", 3 << 13, &fd, NULL), 0);
	imp.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &b, &e), 0);
	/* Another fd of the same file, another range. */
	imp = (struct memfd_import){ .fd = open_by_proc(fd), .offset = 12288 };
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &c, &e), 0);
	ck_assert_ptr_ne(b->addr, c->addr);
	ck_assert(region_same_memory(b, c, &delta));
	ck_assert_int_eq(delta, 12288);
	ck_assert(region_same_memory(c, b, &delta));
	ck_assert_int_eq(delta, -12288);
	ck_assert(!region_same_memory(a, b, &delta));
	close(fd);
	region_drop_owner(a);
	region_drop_owner(b);
	region_drop_owner(c);
}
END_TEST

/* The memfd kind's ops: what GetRegion shows, what an MR registers. */
START_TEST(test_memfd_ops)
{
	struct memfd_import imp = { .offset = 4096, .length = 8192 };
	struct region_mr_source src;
	_cleanup_json_ cJSON *o = NULL;
	struct errinfo e = {};
	const cJSON *seals, *item;
	struct region *r;
	bool shrink = false;

	ck_assert_int_eq(rdmamem_memfd_create("unit", 3 << 12, &imp.fd, NULL), 0);
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &r, &e), 0);
	ck_assert_str_eq(r->mem->type, "memfd");
	ck_assert(region_is_host(r));
	ck_assert_ptr_null(r->mem->copy);

	o = mem_describe_tree(r);
	/* 64-bit numbers travel as strings. */
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o, "offset")), "4096");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o, "file_size")), "12288");
	seals = cJSON_GetObjectItem(o, "seals");
	ck_assert(cJSON_IsArray(seals));
	cJSON_ArrayForEach(item, seals)
		shrink = shrink || strcmp(cJSON_GetStringValue(item), "shrink") == 0;
	ck_assert(shrink);

	/* Host memory: the mapping itself, by address, no dma-buf. */
	ck_assert_int_eq(r->mem->mr_source(r, &src), 0);
	ck_assert_ptr_eq(src.addr, r->addr);
	ck_assert(!src.device);
	ck_assert_int_lt(src.dmabuf_fd, 0);
	ck_assert_uint_eq(src.iova, (uint64_t)(uintptr_t)r->addr);
	ck_assert_uint_eq(region_address(r), (uint64_t)(uintptr_t)r->addr);
	region_drop_owner(r);
}
END_TEST

/* Two views of one memfd, asked through the kind's op itself. */
START_TEST(test_memfd_same_memory_op)
{
	struct memfd_import imp = { .length = 4096 };
	struct region *a, *b, *c;
	struct errinfo e = {};
	int64_t delta = 0;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("unit", 3 << 12, &fd, NULL), 0);
	imp.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &a, &e), 0);
	imp = (struct memfd_import){ .fd = open_by_proc(fd), .offset = 8192, .length = 4096 };
	ck_assert_int_eq(region_import_memfd(&regions, owner, &imp, &b, &e), 0);
	c = import(4096);
	ck_assert_ptr_eq(a->mem, b->mem);
	ck_assert(a->mem->same_memory(a, b, &delta));
	ck_assert_int_eq(delta, 8192);
	ck_assert(b->mem->same_memory(b, a, &delta));
	ck_assert_int_eq(delta, -8192);
	ck_assert(!a->mem->same_memory(a, c, &delta));
	close(fd);
	region_drop_owner(a);
	region_drop_owner(b);
	region_drop_owner(c);
}
END_TEST

/* Fake hooks that note when each of their calls came, and what was mapped then. */
static char hook_log[64];
static size_t hook_log_len;

struct test_hook {
	struct region_hook hook;
	char name;
	bool mapped_at_release;
};

static void hook_note(struct region_hook *h, char what)
{
	struct test_hook *t = container_of(h, struct test_hook, hook);

	ck_assert_uint_lt(hook_log_len + 3, sizeof(hook_log));
	hook_log[hook_log_len++] = what;
	hook_log[hook_log_len++] = t->name;
	hook_log[hook_log_len++] = ' ';
}

static void test_hook_revoke(struct region_hook *h)
{
	hook_note(h, 'v');
}

static void test_hook_release(struct region_hook *h)
{
	container_of(h, struct test_hook, hook)->mapped_at_release = h->region->map_base != NULL;
	hook_note(h, 'r');
}

static void test_hook_finish(struct region_hook *h)
{
	/* The memory went before: the mapping is gone by now. */
	ck_assert_ptr_null(h->region->map_base);
	hook_note(h, 'f');
}

static const struct region_hook_ops test_first_ops = {
	.rank = REGION_HOOK_REGISTRATIONS,
	.revoke = test_hook_revoke,
	.release = test_hook_release,
	.finish = test_hook_finish,
};
static const struct region_hook_ops test_other_ops = {
	.rank = REGION_HOOK_OTHER,
	.revoke = test_hook_revoke,
	.release = test_hook_release,
	.finish = test_hook_finish,
};
static const struct region_hook_ops test_other2_ops = {
	.rank = REGION_HOOK_OTHER,
	.revoke = test_hook_revoke,
	.release = test_hook_release,
	.finish = test_hook_finish,
};

static struct region_hook *test_hook_make(struct region *r, void *userdata)
{
	(void)r;
	return &((struct test_hook *)userdata)->hook;
}

/*
 * Hooks run by rank (registrations first), then in the order they came:
 * revokes when the owner lets go, releases before the memory goes, finishes
 * after it. A second request for a kind finds the hook there.
 */
START_TEST(test_hook_order)
{
	struct test_hook b = { .name = 'b' }, c = { .name = 'c' }, a = { .name = 'a' };
	struct test_hook dup = { .name = 'x' };
	struct region *r = import(4096), *extra;

	hook_log_len = 0;
	memset(hook_log, 0, sizeof(hook_log));
	/* Attached out of rank order: "other" ones first. */
	ck_assert_ptr_eq(region_hook_get(r, &test_other_ops, test_hook_make, &b), &b.hook);
	ck_assert_ptr_eq(region_hook_get(r, &test_other2_ops, test_hook_make, &c), &c.hook);
	ck_assert_ptr_eq(region_hook_get(r, &test_first_ops, test_hook_make, &a), &a.hook);
	ck_assert_ptr_eq(region_hook_get(r, &test_other_ops, test_hook_make, &dup), &b.hook);
	ck_assert_ptr_eq(region_hook_find(r, &test_first_ops), &a.hook);
	ck_assert_ptr_eq(b.hook.region, r);

	/* An operation's reference keeps the memory past the owner's drop. */
	extra = region_ref(r);
	region_drop_owner(r);
	ck_assert_str_eq(hook_log, "va vb vc ");
	region_unref(extra);
	/* Hooks that release something send the release to the pool. */
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_str_eq(hook_log, "va vb vc ra rb rc fa fb fc ");
	ck_assert(a.mapped_at_release && b.mapped_at_release && c.mapped_at_release);
}
END_TEST

/* The registry's counters follow imports and the last reference. */
START_TEST(test_registry_counters)
{
	struct region *a, *b, *keep;
	uint64_t registered = core.stats.regions_registered;

	ck_assert_uint_eq(regions.n_regions, 0);
	ck_assert_uint_eq(regions.pinned_bytes, 0);
	a = import(4096);
	b = import(3 * 4096);
	ck_assert_uint_eq(regions.n_regions, 2);
	ck_assert_uint_eq(regions.pinned_bytes, 4 * 4096);
	ck_assert_uint_eq(core.stats.regions_registered, registered + 2);
	ck_assert_uint_eq(core.stats.pinned_peak, 4 * 4096);
	ck_assert_uint_lt(a->id, b->id);

	keep = region_ref(b);
	region_drop_owner(b);
	/* Unregistered but in use: still counted, no longer listed. */
	ck_assert_uint_eq(regions.n_regions, 2);
	ck_assert_ptr_null(idmap_get(&regions.regions, b->id));
	region_unref(keep);
	ck_assert_uint_eq(regions.n_regions, 1);
	ck_assert_uint_eq(regions.pinned_bytes, 4096);
	region_drop_owner(a);
	ck_assert_uint_eq(regions.n_regions, 0);
	ck_assert_uint_eq(regions.pinned_bytes, 0);
	/* The peak stays. */
	ck_assert_uint_eq(core.stats.pinned_peak, 4 * 4096);
	ck_assert_uint_eq(core.stats.regions_registered, registered + 2);
}
END_TEST

Suite *region_unit_suite(void)
{
	Suite *s = suite_create("region");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_refcount_keeps_memory);
	tcase_add_test(tc, test_weak_references);
	tcase_add_test(tc, test_rights);
	tcase_add_test(tc, test_same_memory);
	suite_add_tcase(s, tc);

	tc = tcase_create("mem");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_memfd_ops);
	tcase_add_test(tc, test_memfd_same_memory_op);
	tcase_add_test(tc, test_hook_order);
	tcase_add_test(tc, test_registry_counters);
	suite_add_tcase(s, tc);

	tc = tcase_create("mreg");
	tcase_add_checked_fixture(tc, setup_fake, teardown_fake);
	tcase_add_test(tc, test_revoke_in_flight);
	tcase_add_test(tc, test_revoke_before_memory);
	tcase_add_test(tc, test_revoke_failed);
	suite_add_tcase(s, tc);
	return s;
}
