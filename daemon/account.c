/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "account.h"
#include "daemon.h"

struct account *account_get(struct daemon *d, uid_t uid)
{
	struct account *a;

	list_for_each_entry(a, &d->accounts, link)
		if (a->uid == uid)
			return account_ref(a);

	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->n_ref = 1;
	a->uid = uid;
	list_add_tail(&a->link, &d->accounts);
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
	list_del(&a->link);
	free(a);
	return NULL;
}
