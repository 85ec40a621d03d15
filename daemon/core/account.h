/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-uid accounting: connections (local and remote), regions and the bytes
 * they keep mapped, leases and access tokens, the bytes of its messages the
 * daemon holds (budget.h). An account exists while
 * something of its uid does, found by uid in O(1): a host with many uids
 * (user namespaces map thousands) must not make every accept walk them.
 */
#ifndef RDMAMEMD_ACCOUNT_H
#define RDMAMEMD_ACCOUNT_H

#include <stdint.h>
#include <sys/types.h>

#include "util/idmap.h"

struct budget;
struct budget_wait;

/* The kinds of bytes held for clients (budget.h). Here, not there, because
 * every account counts its own: budget.c reads accounts, never the reverse. */
enum budget_kind {
	BUDGET_INPUT,
	BUDGET_OUTPUT,
	BUDGET_KINDS,
};

/* One kind, one uid (in struct account). */
struct budget_use {
	uint64_t bytes;
	const struct budget_wait *exempt; /* holds the pass past the uid's limit, or NULL */
};

/* Every account, by uid: the daemon's one table (struct core). */
struct account_table {
	struct idmap by_uid;    /* uid → struct account */
	struct budget *budgets; /* the daemon-wide ones (the server's), for budget.c */
};

struct account {
	struct account_table *table;
	unsigned n_ref;
	uid_t uid;
	unsigned n_connections;      /* admitted */
	unsigned n_rejected;         /* refused, waiting to be told why */
	unsigned n_rdma_connections; /* remote queue pairs in this uid's PDs */
	uint64_t n_regions;
	uint64_t pinned_bytes;
	unsigned n_leases; /* held or waiting, not yet released */
	unsigned n_tokens;
	unsigned n_remotes;                     /* remote handles imported (ImportRemote) */
	unsigned n_plans;                       /* prepared plans (PrepareTransfer) */
	struct budget_use budget[BUDGET_KINDS]; /* bytes of its messages held (budget.h) */
};

void account_table_init(struct account_table *t);
/* Every account is gone (each holder let go of its reference). */
void account_table_done(struct account_table *t);

/* Returns a new reference to uid's account, creating it; NULL on OOM. */
struct account *account_get(struct account_table *t, uid_t uid);
/* uid's account if it has one (no reference taken); NULL when nothing of
 * that uid is left. */
struct account *account_find(struct account_table *t, uid_t uid);
struct account *account_ref(struct account *a);
struct account *account_unref(struct account *a);

#endif
