/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prepared plans (PrepareTransfer): a list of (local offset, remote
 * offset, length) between one local region and one remote, checked once
 * against both lengths, so that a transfer posts a subset by index without
 * sending or checking ranges again (the vLLM/NIXL pattern: register the KV
 * cache once, prepare its block list once, post per request by block).
 *
 * A plan names its local region by id, not by reference: it holds no
 * memory, and every post looks the region up again with the caller's
 * rights then (a region's size never changes and its id is never reused,
 * so ranges checked now stay in bounds of whatever the id finds). It holds
 * a reference on its remote. A plan belongs to its session (SESSION_PLAN,
 * dropped first: before the remotes it uses) and counts against its uid's
 * max-plans-per-uid. Loop thread only.
 */
#ifndef RDMAMEMD_PLAN_H
#define RDMAMEMD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/core/session.h"
#include "proto/ranges.h"

struct errinfo;
struct region;
struct remote;
struct remote_ctx;

/*
 * The most ranges one plan holds. Listed ({local_offset, remote_offset,
 * length} objects, four JSON values each) a message carries at most 16,000
 * (JSON_VALUES_MAX); packed (proto/ranges.h, 32 characters each) up to
 * this, which a 16 MiB message holds with room to spare (4 MiB of text),
 * and which covers a post of every range at the default max-transfer-ops.
 * A plan costs 24 bytes a range: 3 MiB at most.
 */
#define PLAN_RANGES_MAX 131072U
/* The most a listed PrepareTransfer carries: what JSON_VALUES_MAX allows. */
#define PLAN_LISTED_MAX 16000U

struct plan {
	uint64_t id;
	struct remote_ctx *ctx;
	struct session_link owner_link; /* SESSION_PLAN */
	struct account *account;        /* charged one plan; a reference */
	uint64_t region;                /* the local region's id */
	uint64_t region_size;
	struct remote *remote; /* a reference */
	size_t n_ranges;
	struct ranges_item ranges[];
};

/* At daemon start, after remote_ctx_init(): the drop hook of SESSION_PLAN. */
void plan_init(struct remote_ctx *ctx);

/*
 * Checks each range (a length above 0, inside region from local_offset,
 * inside the remote's length from remote_offset; OutOfRange in *e naming
 * the first that is not, by index) and the uid's max-plans-per-uid
 * (QuotaExceeded "plans"), then makes a plan of a copy of ranges for s.
 * n is 1 to PLAN_RANGES_MAX (the caller's to check). *ret is borrowed.
 */
int plan_create(struct remote_ctx *ctx, struct session *s, const struct region *region,
		struct remote *remote, const struct ranges_item *ranges, size_t n,
		struct plan **ret, struct errinfo *e);

/* s's plan of that id, or NULL. */
struct plan *plan_lookup(struct remote_ctx *ctx, uint64_t id, const struct session *s);

/* Takes p out of its session and the map, and frees it. */
void plan_release(struct plan *p);

#endif
