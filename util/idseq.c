/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/idseq.h"

void idseq_init(struct idseq *s)
{
	*s = (struct idseq){};
}

void idseq_done(struct idseq *s)
{
	free(s->slots);
	*s = (struct idseq){};
}

/* Room for one more slot. */
static int grow(struct idseq *s)
{
	size_t cap;
	struct idseq_slot *n;

	if (s->n < s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 64;
	n = reallocarray(s->slots, cap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->slots = n;
	s->cap = cap;
	return 0;
}

int idseq_add(struct idseq *s, uint64_t id, struct idseq_node *node)
{
	size_t pos;

	if (s->n == 0 || id > s->slots[s->n - 1].id) {
		if (grow(s) < 0)
			return -ENOMEM;
		node->pos = s->n;
		s->slots[s->n++] = (struct idseq_slot){ id, node };
		return 0;
	}
	/* Below the last: its place, found and opened. */
	pos = idseq_seek(s, id);
	if (pos > 0 && s->slots[pos - 1].id == id) {
		if (s->slots[pos - 1].node)
			return -EEXIST;
		/* The hole an object of that id left. */
		s->slots[pos - 1].node = node;
		node->pos = pos - 1;
		s->n_holes--;
		return 0;
	}
	if (grow(s) < 0)
		return -ENOMEM;
	memmove(&s->slots[pos + 1], &s->slots[pos], (s->n - pos) * sizeof(*s->slots));
	s->n++;
	for (size_t i = pos + 1; i < s->n; i++)
		if (s->slots[i].node)
			s->slots[i].node->pos = i;
	node->pos = pos;
	s->slots[pos] = (struct idseq_slot){ id, node };
	return 0;
}

/* Closes the holes, keeping the order; nodes learn their new slots. */
static void compact(struct idseq *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (!s->slots[i].node)
			continue;
		s->slots[k] = s->slots[i];
		s->slots[k].node->pos = k;
		k++;
	}
	s->n = k;
	s->n_holes = 0;
	/* Give memory back after a large listing shrank a lot. */
	if (s->cap > 64 && s->n < s->cap / 4) {
		struct idseq_slot *n = reallocarray(s->slots, s->cap / 2, sizeof(*n));

		if (n) {
			s->slots = n;
			s->cap /= 2;
		}
	}
}

void idseq_remove(struct idseq *s, struct idseq_node *node)
{
	if (node->pos == IDSEQ_NONE)
		return;
	s->slots[node->pos].node = NULL;
	node->pos = IDSEQ_NONE;
	s->n_holes++;
	/* Holes at the end go at once: the next id is appended there. */
	while (s->n > 0 && !s->slots[s->n - 1].node) {
		s->n--;
		s->n_holes--;
	}
	if (s->n_holes > 32 && s->n_holes > s->n / 2)
		compact(s);
}

size_t idseq_seek(const struct idseq *s, uint64_t after)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->slots[mid].id <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
