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

/*
 * A latency histogram for the metrics endpoint: counts per bucket (not
 * cumulative; the text makes them so), the sum and the count. Observing
 * is a few compares and adds on the loop, no allocation, no lock.
 */
#define HISTOGRAM_BUCKETS 14
/* Upper bounds in nanoseconds, the last bucket (+Inf) not counted here. */
extern const uint64_t histogram_bounds_ns[HISTOGRAM_BUCKETS];

struct histogram {
	uint64_t bucket[HISTOGRAM_BUCKETS + 1]; /* the last: above every bound */
	uint64_t sum_ns, count;
};

void histogram_observe(struct histogram *h, uint64_t ns);

struct stats {
	struct counters calls;  /* by method */
	struct counters errors; /* by error name */
	uint64_t bytes_read, bytes_written, bytes_copied;
	uint64_t regions_registered;
	uint64_t pinned_peak;
	uint64_t mrs_registered, mr_failures;
	/* Region import (prepared to published: mapped and checked) and
	 * registration on a device (queued to the pool until settled). */
	struct histogram import_latency, registration_latency;
};

/* Counts one more of name; names not known at build time are copied. */
void counters_bump(struct counters *c, const char *name, bool copy);
void counters_done(struct counters *c);
/* {name: count, …}; NULL on OOM. */
cJSON *counters_json(const struct counters *c);

#endif
