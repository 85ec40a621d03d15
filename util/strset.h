/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A set of strings for finding repeats in what a client sent (object keys,
 * device names) in linear time: open addressing over borrowed pointers,
 * sized once for the number of strings it will see.
 */
#ifndef RDMAMEM_STRSET_H
#define RDMAMEM_STRSET_H

#include <stdbool.h>
#include <stddef.h>

struct strset {
	const char **slots; /* NULL: free; the strings are the caller's */
	size_t mask;        /* slots - 1, a power of two minus one */
};

/* Room for n strings (the table is kept at most half full). -ENOMEM. */
int strset_init(struct strset *s, size_t n);
void strset_done(struct strset *s);

/* Adds s unless it is there: true when it was added, false for a repeat.
 * At most the n strings given to strset_init may be added. */
bool strset_add(struct strset *set, const char *s);

#endif
