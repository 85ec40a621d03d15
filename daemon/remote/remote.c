/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/remote/remote.h"

/* Its importer's session closed. */
static void remote_session_drop(struct session_link *link)
{
	remote_release(container_of(link, struct remote, owner_link));
}

void remote_ctx_init(struct remote_ctx *ctx, struct core *core, struct rdma_ctx *rdma)
{
	*ctx = (struct remote_ctx){ .core = core, .rdma = rdma };
	idmap_init(&ctx->remotes);
	idmap_init(&ctx->plans);
	session_kind_register(SESSION_REMOTE, remote_session_drop);
}

void remote_ctx_done(struct remote_ctx *ctx)
{
	idmap_done(&ctx->plans);
	idmap_done(&ctx->remotes);
	free(ctx->peers);
	ctx->peers = NULL;
	ctx->n_peers = 0;
}

struct remote_peer_stats *remote_peer_stats(struct remote_ctx *ctx, const char *peer)
{
	struct remote_peer_stats *p;

	for (unsigned i = 0; i < ctx->n_peers; i++)
		if (strcmp(ctx->peers[i].peer, peer) == 0)
			return &ctx->peers[i];
	if (ctx->n_peers == REMOTE_PEERS_MAX)
		return &ctx->peers[REMOTE_PEERS_MAX - 1];
	if (!ctx->peers) {
		ctx->peers = calloc(REMOTE_PEERS_MAX, sizeof(*ctx->peers));
		if (!ctx->peers)
			return NULL;
	}
	p = &ctx->peers[ctx->n_peers++];
	snprintf(p->peer, sizeof(p->peer), "%s", ctx->n_peers == REMOTE_PEERS_MAX ? "other" : peer);
	return p;
}

int remote_import(struct remote_ctx *ctx, struct session *s, const struct descriptor *d,
		  struct remote **ret, struct errinfo *e)
{
	struct account *a = s->account;
	unsigned max = ctx->core->cfg.max_remotes_per_uid;
	struct remote *r;
	int res;

	if (a->n_remotes >= max)
		return errinfo_quota(e, "remotes", max, a->n_remotes, 1,
				     "uid %u holds %u remote handles, the limit is %u; release "
				     "some first (ReleaseRemote)",
				     (unsigned)a->uid, a->n_remotes, max);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->n_ref = 1;
	r->ctx = ctx;
	r->id = ++ctx->next_remote_id;
	r->desc = *d;
	r->uid = s->cred.uid;
	res = idmap_put(&ctx->remotes, r->id, r);
	if (res < 0) {
		free(r);
		return res;
	}
	r->account = account_ref(a);
	a->n_remotes++;
	ctx->n_remotes++;
	session_link_init(&r->owner_link);
	session_add(s, SESSION_REMOTE, &r->owner_link);
	log_debug("Remote %" PRIu64 " (export %" PRIu64 ", %" PRIu64 " bytes) imported by pid %d",
		  r->id, d->id, d->length, (int)s->cred.pid);
	*ret = r;
	return 0;
}

struct remote *remote_lookup(struct remote_ctx *ctx, uint64_t id, const struct session *s)
{
	struct remote *r = idmap_get(&ctx->remotes, id);

	return r && r->owner_link.session == s ? r : NULL;
}

void remote_release(struct remote *r)
{
	if (r->released)
		return;
	r->released = true;
	idmap_remove(&r->ctx->remotes, r->id);
	r->ctx->n_remotes--;
	r->account->n_remotes--;
	r->account = account_unref(r->account);
	session_remove(&r->owner_link);
	remote_unref(r);
}

struct remote *remote_ref(struct remote *r)
{
	r->n_ref++;
	return r;
}

struct remote *remote_unref(struct remote *r)
{
	if (r && --r->n_ref == 0)
		free(r);
	return NULL;
}
