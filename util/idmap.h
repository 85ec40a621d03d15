/* SPDX-License-Identifier: BSD-3-Clause */
/* A map from 64-bit ids to pointers: regions and leases by id. */
#ifndef RDMAMEMD_IDMAP_H
#define RDMAMEMD_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap_entry;

struct idmap {
	struct idmap_entry **buckets;
	size_t n_buckets; /* a power of two, or 0 */
	size_t n_entries;
};

void idmap_init(struct idmap *m);
/* Frees the map, not what the values point to. */
void idmap_done(struct idmap *m);

/* Returns 0, -EEXIST when id is present, -ENOMEM. */
int idmap_put(struct idmap *m, uint64_t id, void *value);
void *idmap_get(const struct idmap *m, uint64_t id);
/* Returns the removed value, or NULL. */
void *idmap_remove(struct idmap *m, uint64_t id);

/* Calls fn for every entry in no particular order; fn may not modify m. */
void idmap_foreach(const struct idmap *m, void (*fn)(uint64_t id, void *value, void *userdata),
		   void *userdata);

#endif
