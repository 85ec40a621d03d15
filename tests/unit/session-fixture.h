/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's session for the unit suites, without a connection. */
#ifndef RDMAMEMD_TESTS_SESSION_FIXTURE_H
#define RDMAMEMD_TESTS_SESSION_FIXTURE_H

#include <check.h>

#include "daemon/core/account.h"
#include "daemon/core/session.h"

/* A session of cred's uid, its account in table t. */
static inline struct session *test_session_new(struct account_table *t, uint64_t id,
					       const struct ucred *cred)
{
	struct account *a = account_get(t, cred->uid);
	struct session *s = NULL;

	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(session_new(id, cred, NULL, 0, a, &s), 0);
	account_unref(a);
	return s;
}

#endif
