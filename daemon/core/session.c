/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "daemon/core/account.h"
#include "daemon/core/log.h"
#include "daemon/core/session.h"

/* Filled by each subsystem's init; the same for every session. */
static session_drop_fn drop_hooks[SESSION_KIND_MAX];

session_drop_fn session_kind_register(enum session_kind kind, session_drop_fn drop)
{
	session_drop_fn old = drop_hooks[kind];

	drop_hooks[kind] = drop;
	return old;
}

int session_new(uint64_t id, const struct ucred *cred, gid_t *groups, size_t n_groups,
		struct account *account, struct session **ret)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s) {
		free(groups);
		return -ENOMEM;
	}
	s->n_ref = 1;
	s->id = id;
	s->cred = *cred;
	s->groups = groups;
	s->n_groups = groups ? n_groups : 0;
	s->account = account_ref(account);
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++)
		list_init(&s->sets[k].items);
	*ret = s;
	return 0;
}

struct session *session_ref(struct session *s)
{
	if (s)
		s->n_ref++;
	return s;
}

struct session *session_unref(struct session *s)
{
	if (!s || --s->n_ref > 0)
		return NULL;
	/* Every resource points at its session while in a set: none may be
	 * left once the last reference goes. */
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++)
		if (s->sets[k].n > 0)
			log_error("Session %" PRIu64 " freed holding %u resources of kind %u",
				  s->id, s->sets[k].n, k);
	account_unref(s->account);
	free(s->groups);
	free(s);
	return NULL;
}

void session_add(struct session *s, enum session_kind kind, struct session_link *link)
{
	link->session = s;
	link->kind = kind;
	list_add_tail(&link->link, &s->sets[kind].items);
	s->sets[kind].n++;
}

void session_remove(struct session_link *link)
{
	if (!link->session)
		return;
	list_del(&link->link);
	link->session->sets[link->kind].n--;
	link->session = NULL;
}

void session_close(struct session *s)
{
	if (s->closed)
		return;
	for (unsigned k = 0; k < SESSION_KIND_MAX; k++) {
		struct session_set *set = &s->sets[k];

		while (!list_empty(&set->items)) {
			struct session_link *link =
				list_first_entry(&set->items, struct session_link, link);

			if (drop_hooks[k])
				drop_hooks[k](link);
			/* The resource may be freed: link is only compared.
			 * A hook that left it first in the set (none
			 * registered, or a bug) must not make this spin. */
			if (!list_empty(&set->items) &&
			    list_first_entry(&set->items, struct session_link, link) == link) {
				log_error("Session %" PRIu64 ": kind %u was not dropped", s->id, k);
				session_remove(link);
			}
		}
	}
	s->closed = true;
}

bool session_in_group(const struct session *s, gid_t gid)
{
	if (s->cred.gid == gid)
		return true;
	for (size_t i = 0; i < s->n_groups; i++)
		if (s->groups[i] == gid)
			return true;
	return false;
}
