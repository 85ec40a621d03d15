/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Objects in ascending id order, for listings that come in pages: a page
 * starts after the last id of the one before, so objects that come and go
 * between pages neither shift the others nor make them repeat.
 *
 * Ids are mostly handed out in increasing order, so adding is appending;
 * an id below the last (a region restored after a restart under its old
 * id) is inserted in its place, O(slots after it). Removing
 * leaves a hole, and the array is compacted once holes are half of it
 * (amortised O(1) per removal). Finding where a page starts is a binary
 * search. An object embeds a struct idseq_node that knows its slot.
 */
#ifndef RDMAMEMD_IDSEQ_H
#define RDMAMEMD_IDSEQ_H

#include <stddef.h>
#include <stdint.h>

struct idseq_node {
	size_t pos; /* its slot; IDSEQ_NONE while in no idseq */
};

#define IDSEQ_NONE SIZE_MAX

struct idseq_slot {
	uint64_t id;
	struct idseq_node *node; /* NULL: removed */
};

struct idseq {
	struct idseq_slot *slots;
	size_t n, cap;
	size_t n_holes;
};

void idseq_init(struct idseq *s);
void idseq_done(struct idseq *s);
/* For an object not yet added, so that removing it is a no-op. */
static inline void idseq_node_init(struct idseq_node *node)
{
	node->pos = IDSEQ_NONE;
}

/* Adds node under id, which no object in s has: -EEXIST, -ENOMEM. */
int idseq_add(struct idseq *s, uint64_t id, struct idseq_node *node);
/* Removes node if it is in s. */
void idseq_remove(struct idseq *s, struct idseq_node *node);

/* The first slot whose id is above after (s->n when there is none). Slots
 * from there on are s->slots[i] for i < s->n; skip those without a node. */
size_t idseq_seek(const struct idseq *s, uint64_t after);

#endif
