/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>

#include "util/idmap.h"

struct idmap_entry {
	struct idmap_entry *next;
	uint64_t id;
	void *value;
};

void idmap_init(struct idmap *m)
{
	*m = (struct idmap){};
}

void idmap_done(struct idmap *m)
{
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct idmap_entry *e = m->buckets[i];

		while (e) {
			struct idmap_entry *next = e->next;

			free(e);
			e = next;
		}
	}
	free(m->buckets);
	*m = (struct idmap){};
}

/* Ids are mostly sequential: mix them so they spread over the buckets. */
static size_t slot(const struct idmap *m, uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return id & (m->n_buckets - 1);
}

static int grow(struct idmap *m)
{
	size_t n = m->n_buckets ? m->n_buckets * 2 : 64;
	struct idmap_entry **nb = calloc(n, sizeof(*nb));
	struct idmap old = *m;

	if (!nb)
		return -ENOMEM;
	m->buckets = nb;
	m->n_buckets = n;
	for (size_t i = 0; i < old.n_buckets; i++) {
		struct idmap_entry *e = old.buckets[i];

		while (e) {
			struct idmap_entry *next = e->next;
			size_t s = slot(m, e->id);

			e->next = m->buckets[s];
			m->buckets[s] = e;
			e = next;
		}
	}
	free(old.buckets);
	return 0;
}

int idmap_put(struct idmap *m, uint64_t id, void *value)
{
	struct idmap_entry *e;
	size_t s;

	if (idmap_get(m, id))
		return -EEXIST;
	if (m->n_entries >= m->n_buckets && grow(m) < 0)
		return -ENOMEM;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	s = slot(m, id);
	*e = (struct idmap_entry){ .next = m->buckets[s], .id = id, .value = value };
	m->buckets[s] = e;
	m->n_entries++;
	return 0;
}

void *idmap_get(const struct idmap *m, uint64_t id)
{
	if (m->n_buckets == 0)
		return NULL;
	for (struct idmap_entry *e = m->buckets[slot(m, id)]; e; e = e->next)
		if (e->id == id)
			return e->value;
	return NULL;
}

void *idmap_remove(struct idmap *m, uint64_t id)
{
	struct idmap_entry **p;

	if (m->n_buckets == 0)
		return NULL;
	for (p = &m->buckets[slot(m, id)]; *p; p = &(*p)->next) {
		struct idmap_entry *e = *p;
		void *v;

		if (e->id != id)
			continue;
		*p = e->next;
		v = e->value;
		free(e);
		m->n_entries--;
		return v;
	}
	return NULL;
}

void idmap_foreach(const struct idmap *m, void (*fn)(uint64_t id, void *value, void *userdata),
		   void *userdata)
{
	for (size_t i = 0; i < m->n_buckets; i++)
		for (struct idmap_entry *e = m->buckets[i]; e; e = e->next)
			fn(e->id, e->value, userdata);
}
