/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "daemon/core/account.h"

void account_table_init(struct account_table *t)
{
	idmap_init(&t->by_uid);
	t->budgets = NULL;
}

void account_table_done(struct account_table *t)
{
	idmap_done(&t->by_uid);
}

struct account *account_find(struct account_table *t, uid_t uid)
{
	return idmap_get(&t->by_uid, uid);
}

struct account *account_get(struct account_table *t, uid_t uid)
{
	struct account *a = account_find(t, uid);

	if (a)
		return account_ref(a);
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->n_ref = 1;
	a->uid = uid;
	a->table = t;
	if (idmap_put(&t->by_uid, uid, a) < 0) {
		free(a);
		return NULL;
	}
	return a;
}

struct account *account_ref(struct account *a)
{
	if (a)
		a->n_ref++;
	return a;
}

struct account *account_unref(struct account *a)
{
	if (!a || --a->n_ref > 0)
		return NULL;
	idmap_remove(&a->table->by_uid, a->uid);
	free(a);
	return NULL;
}
