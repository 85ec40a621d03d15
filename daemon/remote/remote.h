/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Remote handles: a descriptor another host's daemon exported, imported by
 * a client of this one (ImportRemote). Parsed and checked once, then named
 * by its id; no connection is made until a transfer needs one. A remote
 * belongs to the session that imported it (SESSION_REMOTE: released with
 * it, or by ReleaseRemote) and counts against its uid's
 * max-remotes-per-uid while it does. It is refcounted: a plan made on it,
 * and a transfer in flight, keep it after it is released, so that what
 * they read of it stays valid; its id is gone at once.
 *
 * The subsystem's context (struct remote_ctx) holds the ids of remotes and
 * plans (plan.h) and the export ids (export.h). Loop thread only.
 */
#ifndef RDMAMEMD_REMOTE_H
#define RDMAMEMD_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/core/stats.h"
#include "daemon/core/session.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/link.h"
#include "daemon/remote/paths.h"
#include "util/idmap.h"

struct account;
struct core;
struct errinfo;
struct rdma_ctx;
struct region_registry;

struct remote_ctx {
	struct core *core; /* the limits, the accounts */
	struct rdma_ctx *rdma;
	struct idmap remotes; /* id → struct remote, while imported */
	struct idmap plans;   /* id → struct plan, while prepared */
	uint64_t next_remote_id, next_plan_id, next_export_id;
	unsigned n_remotes, n_plans; /* in the maps */
	struct notify_ctx notify;    /* notifications received (notify.h) */
	/*
	 * The queue pairs this daemon opens to other daemons for Transfer
	 * (link.h). daemon.c starts the pool after remote_ctx_init() and stops
	 * it at shutdown before the endpoint and the devices: its QPs are on
	 * those devices, in the PDs devices_free() frees.
	 */
	struct link_pool links;
	/* Transfers (transfer.h): the region registry they look regions up
	 * in, the windows of the live links, and the notification hook. */
	struct region_registry *regions;
	struct paths paths;            /* which device pairs carry a leg (paths.h) */
	struct list_head transfer_qps; /* struct transfer_qp */
	unsigned n_transfer_qps;       /* allocated, live or draining */
	unsigned n_transfers;          /* started, not freed */
	/* Since the daemon started: started = done + failed + cancelled +
	 * those still running (a refusal before the start counts nowhere). */
	uint64_t n_transfers_started, n_transfers_done, n_transfers_failed;
	uint64_t n_transfers_cancelled;
	/* Transfers done, by the peers they reached (remote_peer_stats()). */
	struct remote_peer_stats *peers;
	unsigned n_peers;
	int (*notify_send)(struct link *l, struct link_user *u, const void *data, size_t len,
			   uint64_t export_id);
};

/*
 * A remote daemon as the metrics see it: its rdmacm endpoint as text (a
 * link's peer), and how long the transfers this daemon started and that
 * reached it took, start to done (a transfer that reached several peers
 * counts under each). Found in order: peers are few; past
 * REMOTE_PEERS_MAX, new ones count under the last entry, "other".
 */
#define REMOTE_PEERS_MAX 64U
struct remote_peer_stats {
	char peer[64];
	struct histogram latency;
	uint64_t transfers, bytes; /* done, and the bytes of their ops */
};

/* peer's entry, made when new; NULL on OOM. */
struct remote_peer_stats *remote_peer_stats(struct remote_ctx *ctx, const char *peer);

struct remote {
	unsigned n_ref;
	uint64_t id;
	struct remote_ctx *ctx;
	struct session_link owner_link; /* SESSION_REMOTE, until released */
	uid_t uid;                      /* of the session that imported it */
	struct account *account;        /* charged one remote until released; a reference */
	bool released;
	struct descriptor desc;
};

/* At daemon start: the maps, and the drop hook of SESSION_REMOTE (plan_init()
 * registers SESSION_PLAN's). */
void remote_ctx_init(struct remote_ctx *ctx, struct core *core, struct rdma_ctx *rdma);
/* After every session is closed. */
void remote_ctx_done(struct remote_ctx *ctx);

/*
 * A remote of d for session s; QuotaExceeded ("remotes") in *e past the
 * uid's max-remotes-per-uid. The session holds the reference returned
 * (*ret is borrowed).
 */
int remote_import(struct remote_ctx *ctx, struct session *s, const struct descriptor *d,
		  struct remote **ret, struct errinfo *e);

/* s's remote of that id, or NULL (never another session's: ids are no
 * capability, the descriptor was). */
struct remote *remote_lookup(struct remote_ctx *ctx, uint64_t id, const struct session *s);

/* Takes r out of its session and the map, uncharges its uid, drops the
 * session's reference. Holders of other references keep the struct. */
void remote_release(struct remote *r);

struct remote *remote_ref(struct remote *r);
struct remote *remote_unref(struct remote *r);

#endif
