/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/siphash.h"
#include "util/strset.h"

/* Keyed: the strings come from a client, who could otherwise pick ones
 * that all land in one slot and make adding them quadratic. */
static uint64_t hash(const char *s)
{
	return siphash24(s, strlen(s), siphash_process_key());
}

int strset_init(struct strset *s, size_t n)
{
	size_t size = 16;

	while (size < 2 * n)
		size *= 2;
	s->slots = calloc(size, sizeof(*s->slots));
	if (!s->slots)
		return -ENOMEM;
	s->mask = size - 1;
	return 0;
}

void strset_done(struct strset *s)
{
	free(s->slots);
	*s = (struct strset){};
}

bool strset_add(struct strset *set, const char *s)
{
	size_t k = hash(s) & set->mask;

	while (set->slots[k]) {
		if (strcmp(set->slots[k], s) == 0)
			return false;
		k = (k + 1) & set->mask;
	}
	set->slots[k] = s;
	return true;
}
