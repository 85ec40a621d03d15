/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-uid accounting: connections (local and remote), regions and the bytes
 * they keep mapped, leases and access tokens. */
#ifndef RDMAMEMD_ACCOUNT_H
#define RDMAMEMD_ACCOUNT_H

#include <stdint.h>
#include <sys/types.h>

#include "proto/list.h"

struct daemon;

struct account {
	struct list_head link;	/* in daemon->accounts */
	unsigned n_ref;
	uid_t uid;
	unsigned n_connections;
	unsigned n_rdma_connections;	/* remote queue pairs in this uid's PDs */
	uint64_t n_regions;
	uint64_t pinned_bytes;
	unsigned n_leases;	/* held or waiting, not yet released */
	unsigned n_tokens;
};

/* Returns a new reference to uid's account, creating it; NULL on OOM. */
struct account *account_get(struct daemon *d, uid_t uid);
struct account *account_ref(struct account *a);
struct account *account_unref(struct account *a);

#endif
