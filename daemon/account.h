/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-uid accounting: connections (local and remote), regions and the bytes
 * they keep mapped, leases and access tokens. An account exists while
 * something of its uid does, found by uid in O(1): a host with many uids
 * (user namespaces map thousands) must not make every accept walk them.
 */
#ifndef RDMAMEMD_ACCOUNT_H
#define RDMAMEMD_ACCOUNT_H

#include <stdint.h>
#include <sys/types.h>

struct conn;
struct daemon;

struct account {
	struct daemon *daemon;
	unsigned n_ref;
	uid_t uid;
	unsigned n_connections;		/* admitted */
	unsigned n_rejected;		/* refused, waiting to be told why */
	unsigned n_rdma_connections;	/* remote queue pairs in this uid's PDs */
	uint64_t n_regions;
	uint64_t pinned_bytes;
	unsigned n_leases;	/* held or waiting, not yet released */
	unsigned n_tokens;
	uint64_t input_bytes;		/* of its messages the daemon holds (conn.c says which) */
	struct conn *input_exempt;	/* holds the pass past its budget (conn.c), or NULL */
};

/*
 * Bytes of one message the daemon holds, counted against its sender's input
 * budgets from the moment it left the connection's buffer until it is freed,
 * parse tree and all.
 */
struct input_charge {
	struct account *account;	/* a reference while bytes are charged */
	uint64_t bytes;
};

/* Returns a new reference to uid's account, creating it; NULL on OOM. */
struct account *account_get(struct daemon *d, uid_t uid);
/* uid's account if it has one (no reference taken); NULL when nothing of
 * that uid is left. */
struct account *account_find(struct daemon *d, uid_t uid);
struct account *account_ref(struct account *a);
struct account *account_unref(struct account *a);

/* Counts n more bytes of a's messages as held by the daemon, in a's total
 * and the daemon's. */
void account_input_add(struct account *a, uint64_t n);
/* Counts n of them as freed: connections waiting for room may go on. */
void account_input_sub(struct account *a, uint64_t n);
/* Gives back what ch holds and empties it. */
void input_charge_release(struct input_charge *ch);

#endif
