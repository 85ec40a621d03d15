/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "account.h"
#include "daemon.h"

struct account *account_find(struct daemon *d, uid_t uid)
{
	return idmap_get(&d->accounts, uid);
}

struct account *account_get(struct daemon *d, uid_t uid)
{
	struct account *a = account_find(d, uid);

	if (a)
		return account_ref(a);
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->n_ref = 1;
	a->uid = uid;
	a->daemon = d;
	if (idmap_put(&d->accounts, uid, a) < 0) {
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
	idmap_remove(&a->daemon->accounts, a->uid);
	free(a);
	return NULL;
}
