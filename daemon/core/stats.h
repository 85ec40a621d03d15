/* SPDX-License-Identifier: BSD-3-Clause */
/* Counters for GetStats and rdmamemctl stats: calls by method, errors by
 * name, bytes moved. A few dozen names: a small array searched in order. */
#ifndef RDMAMEMD_STATS_H
#define RDMAMEMD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct counter {
	const char *name; /* static, or owned when dup */
	uint64_t n;
	bool dup;
};

struct counters {
	struct counter *v;
	size_t n, cap;
};

struct stats {
	struct counters calls;  /* by method */
	struct counters errors; /* by error name */
	uint64_t bytes_read, bytes_written, bytes_copied;
	uint64_t regions_registered;
	uint64_t pinned_peak;
	uint64_t mrs_registered, mr_failures;
};

/* Counts one more of name; names not known at build time are copied. */
void counters_bump(struct counters *c, const char *name, bool copy);
void counters_done(struct counters *c);
/* {name: count, …}; NULL on OOM. */
cJSON *counters_json(const struct counters *c);

#endif
