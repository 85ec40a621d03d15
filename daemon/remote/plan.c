/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/mem/region.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/remote.h"
#include "proto/errors.h"

static void plan_session_drop(struct session_link *link)
{
	plan_release(container_of(link, struct plan, owner_link));
}

void plan_init(struct remote_ctx *ctx)
{
	(void)ctx;
	session_kind_register(SESSION_PLAN, plan_session_drop);
}

/* Whether [offset, offset + length) lies in [0, size), without wrapping. */
static bool in_range(uint64_t offset, uint64_t length, uint64_t size)
{
	return offset <= size && length <= size - offset;
}

int plan_create(struct remote_ctx *ctx, struct session *s, const struct region *region,
		struct remote *remote, const struct ranges_item *ranges, size_t n,
		struct plan **ret, struct errinfo *e)
{
	struct account *a = s->account;
	unsigned max = ctx->core->cfg.max_plans_per_uid;
	uint64_t remote_size = remote->desc.length;
	struct plan *p;
	int r;

	for (size_t i = 0; i < n; i++) {
		const struct ranges_item *rg = &ranges[i];

		if (rg->length == 0)
			return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
					   "range %zu has length 0", i);
		if (!in_range(rg->local_offset, rg->length, region->size))
			return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
					   "range %zu: %" PRIu64 " bytes at %" PRIu64
					   " pass the end of region %" PRIu64 " (%" PRIu64
					   " bytes)",
					   i, rg->length, rg->local_offset, region->id,
					   region->size);
		if (!in_range(rg->remote_offset, rg->length, remote_size))
			return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
					   "range %zu: %" PRIu64 " bytes at remote offset %" PRIu64
					   " pass the end of remote %" PRIu64 " (%" PRIu64
					   " bytes)",
					   i, rg->length, rg->remote_offset, remote->id,
					   remote_size);
	}
	if (a->n_plans >= max)
		return errinfo_quota(e, "plans", max, a->n_plans, 1,
				     "uid %u holds %u plans, the limit is %u; release some first "
				     "(ReleasePlan)",
				     (unsigned)a->uid, a->n_plans, max);
	p = malloc(sizeof(*p) + n * sizeof(p->ranges[0]));
	if (!p)
		return -ENOMEM;
	*p = (struct plan){
		.id = ++ctx->next_plan_id,
		.ctx = ctx,
		.region = region->id,
		.region_size = region->size,
		.n_ranges = n,
	};
	memcpy(p->ranges, ranges, n * sizeof(p->ranges[0]));
	r = idmap_put(&ctx->plans, p->id, p);
	if (r < 0) {
		free(p);
		return r;
	}
	p->remote = remote_ref(remote);
	p->account = account_ref(a);
	a->n_plans++;
	ctx->n_plans++;
	session_link_init(&p->owner_link);
	session_add(s, SESSION_PLAN, &p->owner_link);
	log_debug("Plan %" PRIu64 ": %zu ranges from region %" PRIu64 " to remote %" PRIu64, p->id,
		  n, region->id, remote->id);
	*ret = p;
	return 0;
}

struct plan *plan_lookup(struct remote_ctx *ctx, uint64_t id, const struct session *s)
{
	struct plan *p = idmap_get(&ctx->plans, id);

	return p && p->owner_link.session == s ? p : NULL;
}

void plan_release(struct plan *p)
{
	idmap_remove(&p->ctx->plans, p->id);
	p->ctx->n_plans--;
	p->account->n_plans--;
	account_unref(p->account);
	session_remove(&p->owner_link);
	remote_unref(p->remote);
	free(p);
}
