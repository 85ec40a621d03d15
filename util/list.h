/* SPDX-License-Identifier: BSD-3-Clause */
/* Intrusive circular doubly-linked list, after the kernel's list.h. */
#ifndef RDMAMEM_LIST_H
#define RDMAMEM_LIST_H

#include <stdbool.h>

#include "util/macro.h"

struct list_head {
	struct list_head *next, *prev;
};

/* clang-format off */
#define LIST_HEAD_INIT(name) { &(name), &(name) }
/* clang-format on */

static inline void list_init(struct list_head *h)
{
	h->next = h->prev = h;
}

static inline bool list_empty(const struct list_head *h)
{
	return h->next == h;
}

/* An entry that was list_init'ed or removed with list_del is on no list. */
static inline bool list_linked(const struct list_head *e)
{
	return e->next && e->next != e;
}

static inline void list_add_tail(struct list_head *e, struct list_head *h)
{
	e->prev = h->prev;
	e->next = h;
	h->prev->next = e;
	h->prev = e;
}

static inline void list_del(struct list_head *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	list_init(e);
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)
#define list_first_entry(h, type, member) list_entry((h)->next, type, member)

#define list_for_each_entry(pos, h, member)                                              \
	for (pos = list_entry((h)->next, __typeof__(*pos), member); &pos->member != (h); \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))

#define list_for_each_entry_safe(pos, n, h, member)                     \
	for (pos = list_entry((h)->next, __typeof__(*pos), member),     \
	    n = list_entry(pos->member.next, __typeof__(*pos), member); \
	     &pos->member != (h); pos = n, n = list_entry(n->member.next, __typeof__(*n), member))

#endif
