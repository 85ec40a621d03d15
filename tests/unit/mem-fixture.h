/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mem subsystem for the unit suites, without a daemon: a loop, a core,
 * the accounts, a region registry with its leases, two sessions of
 * different uids, and memfd regions imported for the owner.
 */
#ifndef RDMAMEMD_TESTS_MEM_FIXTURE_H
#define RDMAMEMD_TESTS_MEM_FIXTURE_H

#include <string.h>
#include <unistd.h>

#include <check.h>
#include <uv.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/mem/lease.h"
#include "daemon/mem/region.h"
#include "daemon/mem/region_memfd.h"
#include "daemon/core/session.h"
#include "proto/json_out.h"
#include "rdmamem.h"
#include "tests/testlib.h"
#include "tests/unit/session-fixture.h"

struct mem_fixture {
	uv_loop_t loop;
	struct core core;
	struct account_table accounts;
	struct region_registry regions;
	struct session *owner; /* uid 1000 */
	struct session *other; /* uid 2000 */
};

static inline void mem_fixture_init(struct mem_fixture *f)
{
	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(uv_loop_init(&f->loop), 0);
	f->core.loop = &f->loop;
	daemon_config_init(&f->core.cfg);
	account_table_init(&f->accounts);
	f->core.accounts = &f->accounts;
	region_registry_init(&f->regions, &f->core);
	lease_registry_init(&f->regions);
	f->owner = test_session_new(&f->accounts, 1,
				    &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
	f->other = test_session_new(&f->accounts, 2,
				    &(struct ucred){ .pid = 2, .uid = 2000, .gid = 2000 });
}

/* Closes both sessions (their leases and regions go), then checks that
 * nothing is left: no region, no lease, no account. */
static inline void mem_fixture_done(struct mem_fixture *f)
{
	session_close(f->owner);
	session_close(f->other);
	f->owner = session_unref(f->owner);
	f->other = session_unref(f->other);
	region_registry_stop(&f->regions);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	ck_assert_uint_eq(f->regions.n_regions, 0);
	ck_assert_uint_eq(f->regions.leases.n_entries, 0);
	ck_assert_uint_eq(f->accounts.by_uid.n_entries, 0);
	lease_registry_done(&f->regions);
	region_registry_done(&f->regions);
	account_table_done(&f->accounts);
	ck_assert_int_eq(uv_loop_close(&f->loop), 0);
}

/* A memfd region of size bytes owned by f->owner, its bytes 0, 1, 2, … */
static inline struct region *mem_fixture_import(struct mem_fixture *f, size_t size)
{
	struct memfd_import imp = {};
	struct errinfo e = {};
	struct region *r = NULL;

	ck_assert_int_eq(rdmamem_memfd_create("unit", size, &imp.fd, NULL), 0);
	ck_assert_int_eq(region_import_memfd(&f->regions, f->owner, &imp, &r, &e), 0);
	for (size_t i = 0; i < size; i++)
		((unsigned char *)r->addr)[i] = (unsigned char)i;
	return r;
}

/* Runs f's loop until *flag is set or about msec passed. */
static inline void mem_fixture_run_until(struct mem_fixture *f, const bool *flag, int msec)
{
	for (int i = 0; i < msec && !*flag; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		if (!*flag)
			usleep(1000);
	}
}

/* What r's kind writes for GetRegion's source (describe()), parsed back. */
static inline cJSON *mem_describe_tree(const struct region *r)
{
	struct json_out o;

	json_out_init(&o, NULL, 0);
	json_out_object(&o, NULL);
	r->mem->describe(r, &o);
	json_out_end(&o);
	return test_out_tree(&o);
}

#endif
