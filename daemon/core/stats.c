/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "daemon/core/stats.h"

void counters_bump(struct counters *c, const char *name, bool copy)
{
	struct counter *nv;

	/* Most names are the same constant each time: pointers first. */
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].name == name) {
			c->v[i].n++;
			return;
		}
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].name, name) == 0) {
			c->v[i].n++;
			return;
		}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;

		nv = reallocarray(c->v, ncap, sizeof(*nv));
		if (!nv)
			return;
		c->v = nv;
		c->cap = ncap;
	}
	c->v[c->n] = (struct counter){ .name = copy ? strdup(name) : name, .n = 1, .dup = copy };
	if (c->v[c->n].name)
		c->n++;
}

void counters_done(struct counters *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].dup)
			free((char *)c->v[i].name);
	free(c->v);
	*c = (struct counters){};
}

cJSON *counters_json(const struct counters *c)
{
	cJSON *o = cJSON_CreateObject();

	for (size_t i = 0; o && i < c->n; i++)
		if (json_add_u64(o, c->v[i].name, c->v[i].n) < 0)
			o = (cJSON_Delete(o), NULL);
	return o;
}

/* 10 us to 10 s: a memfd's import is tens of microseconds, a registration
 * of gigabytes of host memory takes seconds. */
const uint64_t histogram_bounds_ns[HISTOGRAM_BUCKETS] = {
	10000,   25000,   50000,    100000,    250000,     500000,     1000000,
	2500000, 5000000, 10000000, 100000000, 1000000000, 5000000000, 10000000000,
};

void histogram_observe(struct histogram *h, uint64_t ns)
{
	unsigned i = 0;

	while (i < HISTOGRAM_BUCKETS && ns > histogram_bounds_ns[i])
		i++;
	h->bucket[i]++;
	h->sum_ns += ns;
	h->count++;
}
