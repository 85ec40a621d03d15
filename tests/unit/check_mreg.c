/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registrations (daemon/mreg.c) and devices (daemon/device.c) through an
 * rdma_ctx over the fake verbs (tests/fakes/fake-verbs.c), with sessions
 * and the region registry, without a daemon: one MR per region and device
 * however many ask while it is under way; a failure recorded, not retried,
 * until forgotten; a device that went fatal takes none; one protection
 * domain per uid; the owner's session closing while a registration is on
 * the pool. (Drop order against the memory is the region suite's.)
 */
#include <errno.h>
#include <string.h>

#include "daemon/rdma/device.h"
#include "daemon/rdma/mreg.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/verbs.h"
#include "proto/json.h"
#include "proto/json_out.h"
#include "tests/fakes/fake.h"
#include "tests/unit/mem-fixture.h"
#include "tests/testlib.h"

static struct mem_fixture f;
static struct rdma_ctx rdma;
static struct device *dev;

/* CK_FORK: the verbs table and the fake's counters start afresh. */
static void setup(void)
{
	mem_fixture_init(&f);
	memset(&rdma, 0, sizeof(rdma));
	rdma.core = &f.core;
	vb = &fake_vb_ops;
	ck_assert_int_eq(devices_open(&rdma), 0);
	dev = device_find(&rdma, "fake0");
	ck_assert_ptr_nonnull(dev);
}

static void teardown(void)
{
	fake_verbs_hold_reg(false);
	fake_verbs_hold_dereg(false);
	/* The MRs go (on the pool) before the devices, the PDs with them. */
	session_close(f.owner);
	session_close(f.other);
	devices_stop(&rdma);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 0);
	devices_free(&rdma);
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
	mem_fixture_done(&f);
}

struct probe {
	struct mreg_waiter w;
	unsigned calls;
	bool settled;
};

static void on_settled(struct mreg_waiter *w)
{
	struct probe *p = container_of(w, struct probe, w);

	p->calls++;
	p->settled = true;
}

static void probe_init(struct probe *p)
{
	*p = (struct probe){ .w.settled = on_settled };
	list_init(&p->w.link);
}

/* m as answers show it, parsed back. */
static cJSON *mreg_tree(const struct mreg *m, bool recorded)
{
	struct json_out o;

	json_out_init(&o, NULL, 0);
	mreg_write(&o, m, recorded);
	return test_out_tree(&o);
}

/* Two requests while the first attempt is on the pool: one MR, both told;
 * a later request finds it in force. */
START_TEST(test_register_once)
{
	struct region *r = mem_fixture_import(&f, 8192);
	struct probe a, b, c;
	struct mreg *m;
	_cleanup_json_ cJSON *j = NULL;

	probe_init(&a);
	probe_init(&b);
	probe_init(&c);
	fake_verbs_hold_reg(true);
	m = mreg_ensure(r, dev, &a.w);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->state, MREG_PENDING);
	ck_assert_ptr_eq(mreg_ensure(r, dev, &b.w), m);
	fake_verbs_hold_reg(false);
	mem_fixture_run_until(&f, &b.settled, 10000);
	ck_assert_uint_eq(a.calls, 1);
	ck_assert_uint_eq(b.calls, 1);
	ck_assert_int_eq(m->state, MREG_REGISTERED);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 1);
	ck_assert_uint_ne(m->rkey, 0);
	ck_assert_uint_eq(dev->n_mrs, 1);
	ck_assert_uint_eq(dev->mr_bytes, 8192);
	ck_assert_uint_eq(f.core.stats.mrs_registered, 1);

	/* In force: no waiting, no second MR. */
	ck_assert_ptr_eq(mreg_ensure(r, dev, &c.w), m);
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(c.calls, 0);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 1);
	ck_assert_ptr_eq(mreg_find(r, "fake0"), m);
	ck_assert_ptr_null(mreg_find(r, "fake1"));

	j = mreg_tree(m, false);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "state")), "registered");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "via")), "host-memory");
}
END_TEST

/* A failure is recorded with its cause and not retried; forgotten, the
 * next request tries again. */
START_TEST(test_failure_recorded)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct probe a, b;
	struct mreg *m;
	_cleanup_json_ cJSON *j = NULL;

	probe_init(&a);
	probe_init(&b);
	test_expect("mreg: the fake device refuses a registration (a warning naming "
		    "RLIMIT_MEMLOCK)");
	atomic_store(&fake_verbs_fail_mr, true);
	m = mreg_ensure(r, dev, &a.w);
	mem_fixture_run_until(&f, &a.settled, 10000);
	ck_assert_int_eq(m->state, MREG_FAILED);
	ck_assert_int_eq(m->err, -ENOMEM);
	ck_assert_ptr_nonnull(strstr(m->error, "ibv_reg_mr on fake0 failed"));
	ck_assert_uint_eq(f.core.stats.mr_failures, 1);
	ck_assert(mreg_any(r));

	/* The device would take it now; the recorded failure stands. */
	atomic_store(&fake_verbs_fail_mr, false);
	ck_assert_ptr_eq(mreg_ensure(r, dev, &b.w), m);
	usleep(20000);
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(b.calls, 0);
	ck_assert_int_eq(m->state, MREG_FAILED);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 0);
	j = mreg_tree(m, true);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "recorded")));
	ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")),
				     "RetryRegistration"));

	ck_assert_int_eq(mreg_forget_failure(r, "fake0"), 0);
	ck_assert_int_eq(mreg_forget_failure(r, "fake0"), -ENOENT);
	ck_assert(!mreg_any(r));
	m = mreg_ensure(r, dev, &b.w);
	mem_fixture_run_until(&f, &b.settled, 10000);
	ck_assert_int_eq(m->state, MREG_REGISTERED);
	/* Nothing to forget about one in force. */
	ck_assert_int_eq(mreg_forget_failure(r, "fake0"), -ENOENT);
}
END_TEST

/* After IBV_EVENT_DEVICE_FATAL: failed at once, nothing queued. */
START_TEST(test_fatal_device)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct probe a;
	struct mreg *m;

	probe_init(&a);
	test_expect("mreg: a device that went fatal (a warning)");
	dev->fatal = true;
	m = mreg_ensure(r, dev, &a.w);
	ck_assert_int_eq(m->state, MREG_FAILED);
	ck_assert_int_eq(m->err, -EIO);
	ck_assert_ptr_nonnull(strstr(m->error, "fatal"));
	uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(a.calls, 0);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 0);
}
END_TEST

/* One protection domain per uid on a device, made on first need. */
START_TEST(test_pd_per_uid)
{
	struct region *r = mem_fixture_import(&f, 4096), *q;
	struct memfd_import imp = {};
	struct errinfo e = {};
	struct probe a, b;
	struct mreg *m, *n;
	struct vb_pd *pd = NULL;

	probe_init(&a);
	probe_init(&b);
	ck_assert_uint_eq(dev->n_pds, 0);
	m = mreg_ensure(r, dev, &a.w);
	ck_assert_uint_eq(dev->n_pds, 1);
	ck_assert_int_eq(rdmamem_memfd_create("unit", 4096, &imp.fd, NULL), 0);
	ck_assert_int_eq(region_import_memfd(&f.regions, f.other, &imp, &q, &e), 0);
	n = mreg_ensure(q, dev, &b.w);
	ck_assert_uint_eq(dev->n_pds, 2);
	ck_assert_ptr_ne(m->pd, n->pd);
	ck_assert_int_eq(device_pd(dev, 1000, &pd), 0);
	ck_assert_ptr_eq(pd, m->pd);
	ck_assert_uint_eq(dev->n_pds, 2);
	mem_fixture_run_until(&f, &a.settled, 10000);
	mem_fixture_run_until(&f, &b.settled, 10000);
	ck_assert_uint_eq(dev->n_mrs, 2);
}
END_TEST

/*
 * The owner's session closes while its region's registration is on the
 * pool, with a waiter that went away: the MR is deregistered as soon as it
 * is made, the cancelled waiter hears nothing, and the region goes after.
 */
START_TEST(test_session_close_in_flight)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct probe a, gone;
	struct mreg *m;

	probe_init(&a);
	probe_init(&gone);
	fake_verbs_hold_reg(true);
	m = mreg_ensure(r, dev, &a.w);
	ck_assert_int_eq(m->state, MREG_PENDING);
	mreg_waiter_cancel(&a.w);
	region_ref(r);
	session_close(f.owner);
	ck_assert(r->dead);
	ck_assert(mreg_wait_revoked(r, &gone.w));
	fake_verbs_hold_reg(false);
	mem_fixture_run_until(&f, &gone.settled, 10000);
	ck_assert_uint_eq(gone.calls, 1);
	ck_assert_uint_eq(a.calls, 0);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 0);
	ck_assert(!mreg_any(r));
	ck_assert_uint_eq(dev->n_mrs, 0);
	ck_assert_uint_eq(f.regions.n_regions, 1);
	region_unref(r);
	ck_assert_uint_eq(f.regions.n_regions, 0);
}
END_TEST

/*
 * The daemon's own WRs hold an MR (a transfer's lkey): the owner's
 * Unregister marks it deregistering at once but the MR stays — the fake
 * counts it live — until the last release; then it goes, and Unregister's
 * wait ends.
 */
START_TEST(test_hold_defers_dereg)
{
	struct region *r = mem_fixture_import(&f, 4096);
	struct probe a, gone;
	struct mreg *m;

	list_init(&rdma.rconns); /* no endpoint here: no peers to end */
	probe_init(&a);
	probe_init(&gone);
	m = mreg_ensure(r, dev, &a.w);
	mem_fixture_run_until(&f, &a.settled, 10000);
	ck_assert_int_eq(m->state, MREG_REGISTERED);
	ck_assert_ptr_eq(mreg_hold(m), m);
	mreg_hold(m);
	region_ref(r);
	session_close(f.owner);
	ck_assert(r->dead);
	ck_assert_int_eq(m->state, MREG_DEREGISTERING);
	ck_assert(mreg_wait_revoked(r, &gone.w));
	for (int i = 0; i < 20; i++)
		uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert(!gone.settled);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 1);
	mreg_release(m);
	for (int i = 0; i < 20; i++)
		uv_run(&f.loop, UV_RUN_NOWAIT);
	ck_assert(!gone.settled);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 1);
	/* The last release: deregistered now. */
	mreg_release(m);
	mem_fixture_run_until(&f, &gone.settled, 10000);
	ck_assert_int_eq(atomic_load(&fake_verbs_mrs), 0);
	ck_assert(!mreg_any(r));
	ck_assert_uint_eq(dev->n_mrs, 0);
	region_unref(r);
	ck_assert_uint_eq(f.regions.n_regions, 0);
}
END_TEST

/* A device that is not open is answered, not recorded: naming the open ones. */
START_TEST(test_missing_device)
{
	struct json_out o;
	_cleanup_json_ cJSON *j = NULL;
	const char *err;

	json_out_init(&o, NULL, 0);
	mreg_missing_write(&o, &rdma, "mlx5_9");
	j = test_out_tree(&o);

	ck_assert_ptr_nonnull(j);
	err = cJSON_GetStringValue(cJSON_GetObjectItem(j, "error"));
	ck_assert_ptr_nonnull(strstr(err, "'mlx5_9'"));
	ck_assert_ptr_nonnull(strstr(err, "open: fake0"));
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "recorded")));
	ck_assert(device_allowed(&rdma, "fake0"));
}
END_TEST

Suite *mreg_suite(void)
{
	Suite *su = suite_create("mreg");
	TCase *tc = tcase_create("mreg");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_register_once);
	tcase_add_test(tc, test_failure_recorded);
	tcase_add_test(tc, test_fatal_device);
	tcase_add_test(tc, test_pd_per_uid);
	tcase_add_test(tc, test_hold_defers_dereg);
	tcase_add_test(tc, test_session_close_in_flight);
	tcase_add_test(tc, test_missing_device);
	suite_add_tcase(su, tc);
	return su;
}
