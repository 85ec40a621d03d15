/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A WR plan's WRs all at once, for the suites that check them against the
 * ops (check_wr_plan.c) or against what a fake link saw (check_window.c):
 * generated the way the window generates them, a cursor per path taken in
 * calls of a few WRs.
 */
#ifndef RDMAMEMD_TESTS_PLAN_FIXTURE_H
#define RDMAMEMD_TESTS_PLAN_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>

#include "daemon/remote/wr_plan.h"
#include "tests/testlib.h"

/*
 * Every WR of p: path 0's in order, then path 1's, and so on; path_first[q]
 * is where path q's start (path_first[p->n_paths] is the count). Each cursor
 * is taken in calls of 1 .. max_take WRs (drawn from *rng when it is not
 * NULL, else max_take each), must give path_n[q] WRs, never 0 before it is
 * done, and none after. malloc()ed, one spare entry.
 */
static inline struct wr *plan_expand(const struct wr_plan *p, size_t max_take, uint64_t *rng,
				     size_t path_first[WR_PLAN_PATHS_MAX + 1])
{
	struct wr *wrs = malloc((p->n_wrs + 1) * sizeof(*wrs));
	size_t at = 0;

	ck_assert_ptr_nonnull(wrs);
	for (uint32_t q = 0; q < p->n_paths; q++) {
		struct wr_cursor c;

		path_first[q] = at;
		wr_cursor_init(&c, p, q);
		while (!wr_cursor_done(&c)) {
			size_t want = rng ? 1 + test_rng_below(rng, max_take) : max_take, n;

			/* Never past n_wrs: a cursor that has more says 0. */
			n = wr_cursor_take(&c, &wrs[at],
					   at + want <= p->n_wrs ? want : p->n_wrs - at);
			ck_assert_uint_ge(n, 1);
			at += n;
		}
		ck_assert_uint_eq(wr_cursor_take(&c, &wrs[at], 1), 0);
		ck_assert_uint_eq(at - path_first[q], p->path_n[q]);
	}
	path_first[p->n_paths] = at;
	ck_assert_uint_eq(at, p->n_wrs);
	return wrs;
}

#endif
