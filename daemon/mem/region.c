/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "util/idmap.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "daemon/mem/region.h"
#include "daemon/core/session.h"

/* The owner's session closed: as if it had unregistered. */
static void region_session_drop(struct session_link *link)
{
	region_drop_owner(container_of(link, struct region, owner_link));
}

void region_registry_init(struct region_registry *reg, struct core *core)
{
	reg->core = core;
	session_kind_register(SESSION_REGION, region_session_drop);
	idmap_init(&reg->regions);
	idseq_init(&reg->region_order);
	reg->next_region_id = 1;
	reg->n_regions = 0;
	reg->pinned_bytes = 0;
	timeouts_init(&reg->timeouts, core->loop);
	loop_poll_init(&reg->started, core->loop);
}

void region_registry_stop(struct region_registry *reg)
{
	timeouts_close(&reg->timeouts);
	loop_poll_stop(&reg->started);
}

void region_registry_done(struct region_registry *reg)
{
	idmap_done(&reg->regions);
	idseq_done(&reg->region_order);
}

/* Refuses the import if it would take the owner over a quota. */
static int charge_quota(struct region_registry *reg, struct account *a, uint64_t length,
			struct errinfo *e)
{
	const struct daemon_config *cfg = &reg->core->cfg;

	if (a->n_regions + 1 > cfg->max_regions_per_uid)
		return errinfo_quota(e, "regions", cfg->max_regions_per_uid, a->n_regions, 1,
				     "uid %u has %" PRIu64 " regions, the limit is %" PRIu64
				     "; unregister some first",
				     (unsigned)a->uid, a->n_regions, cfg->max_regions_per_uid);
	if (length > cfg->max_pinned_bytes_per_uid ||
	    a->pinned_bytes > cfg->max_pinned_bytes_per_uid - length)
		return errinfo_quota(e, "pinned_bytes", cfg->max_pinned_bytes_per_uid,
				     a->pinned_bytes, length,
				     "uid %u keeps %" PRIu64 " bytes in regions; %" PRIu64
				     " more would pass the limit of %" PRIu64 " bytes",
				     (unsigned)a->uid, a->pinned_bytes, length,
				     cfg->max_pinned_bytes_per_uid);
	a->n_regions++;
	a->pinned_bytes += length;
	reg->n_regions++;
	reg->pinned_bytes += length;
	reg->core->stats.pinned_peak = MAX(reg->core->stats.pinned_peak, reg->pinned_bytes);
	return 0;
}

static void uncharge_quota(struct region_registry *reg, struct account *a, uint64_t length)
{
	a->n_regions--;
	a->pinned_bytes -= length;
	reg->n_regions--;
	reg->pinned_bytes -= length;
}

int region_prepare(struct region_registry *registry, struct session *owner, uint64_t size,
		   const struct region_mem_ops *mem, size_t alloc, struct region **ret,
		   struct errinfo *e)
{
	struct region *reg;
	int r;

	assert(alloc >= sizeof(*reg));
	r = charge_quota(registry, owner->account, size, e);
	if (r < 0)
		return r;
	reg = calloc(1, alloc);
	if (!reg) {
		uncharge_quota(registry, owner->account, size);
		return -ENOMEM;
	}
	reg->n_ref = 1;
	reg->registry = registry;
	reg->mem = mem;
	reg->gpu = -1;
	reg->numa_node = -1;
	pthread_mutex_init(&reg->hooks_lock, NULL);
	list_init(&reg->hooks);
	reg->account = account_ref(owner->account);
	reg->size = size;
	reg->created_msec = uv_now(registry->core->loop);
	reg->prepared_ns = uv_hrtime();
	idseq_node_init(&reg->order);
	session_link_init(&reg->owner_link);
	list_init(&reg->leases);
	lock_init(&reg->lock);
	*ret = reg;
	return 0;
}

int region_publish(struct region *reg, struct session *owner)
{
	return region_publish_as(reg, owner, 0);
}

int region_publish_as(struct region *reg, struct session *owner, uint64_t id)
{
	struct region_registry *registry = reg->registry;

	if (id && idmap_get(&registry->regions, id))
		return -EEXIST;
	reg->owner_conn_id = owner->id;
	reg->owner_uid = owner->cred.uid;
	reg->owner_gid = owner->cred.gid;
	reg->owner_pid = owner->cred.pid;
	reg->id = id ?: registry->next_region_id++;
	registry->core->stats.regions_registered++;
	histogram_observe(&registry->core->stats.import_latency, uv_hrtime() - reg->prepared_ns);
	if (idmap_put(&registry->regions, reg->id, reg) < 0)
		return -ENOMEM;
	if (idseq_add(&registry->region_order, reg->id, &reg->order) < 0) {
		idmap_remove(&registry->regions, reg->id);
		return -ENOMEM;
	}
	session_add(owner, SESSION_REGION, &reg->owner_link);
	if (registry->on_publish)
		registry->on_publish(registry->on_publish_data, reg->id);
	log_full_fields(LOG_DEBUG, 0, LOG_REGION(reg),
			"Region %" PRIu64 ": %" PRIu64 " bytes of %s for pid %d uid %u%s", reg->id,
			reg->size, region_is_gpu(reg) ? "GPU memory" : "a memfd",
			(int)reg->owner_pid, (unsigned)reg->owner_uid,
			reg->writable ? "" : " (read-only)");
	return 0;
}

struct region *region_ref(struct region *r)
{
	if (r)
		r->n_ref++;
	return r;
}

struct region_hook *region_hook_find(const struct region *r, const struct region_hook_ops *ops)
{
	return region_hook_get((struct region *)r, ops, NULL, NULL);
}

struct region_hook *region_hook_get(struct region *r, const struct region_hook_ops *ops,
				    struct region_hook *(*make)(struct region *r, void *userdata),
				    void *userdata)
{
	struct region_hook *h, *found = NULL;
	struct list_head *at;

	pthread_mutex_lock(&r->hooks_lock);
	list_for_each_entry(h, &r->hooks, link)
		if (h->ops == ops) {
			found = h;
			break;
		}
	if (!found && make) {
		found = make(r, userdata);
		if (found) {
			found->ops = ops;
			found->region = r;
			/* After the hooks of its rank and those before. */
			at = &r->hooks;
			list_for_each_entry(h, &r->hooks, link)
				if (h->ops->rank > ops->rank) {
					at = &h->link;
					break;
				}
			list_add_tail(&found->link, at);
		}
	}
	pthread_mutex_unlock(&r->hooks_lock);
	return found;
}

/* Pool-safe: the hooks, then the memory (and the fd), in that order (see
 * struct region_hook). No reference is left, so no other thread touches
 * the hooks now. */
static void region_release_memory(struct region *r)
{
	struct region_hook *h;

	list_for_each_entry(h, &r->hooks, link)
		if (h->ops->release)
			h->ops->release(h);
	if (r->mem->release)
		r->mem->release(r);
}

static void region_finish(struct region *r)
{
	struct region_hook *h, *n;

	list_for_each_entry_safe(h, n, &r->hooks, link) {
		list_del(&h->link);
		if (h->ops->finish)
			h->ops->finish(h);
	}
	if (r->mem->finish)
		r->mem->finish(r);
	pthread_mutex_destroy(&r->hooks_lock);
	account_unref(r->account);
	free(r->shares);
	log_full_fields(LOG_DEBUG, 0, LOG_REGION(r), "Region %" PRIu64 " released", r->id);
	free(r);
}

static void on_release(uv_work_t *w)
{
	region_release_memory(container_of(w, struct region, release));
}

static void on_release_done(uv_work_t *w, int status)
{
	(void)status;
	region_finish(container_of(w, struct region, release));
}

/* Whether releasing r may block: the kind says, and any hook that releases
 * something (a CUDA call). */
static bool region_release_blocks(const struct region *r)
{
	const struct region_hook *h;

	if (r->release_on_pool)
		return true;
	list_for_each_entry(h, &r->hooks, link)
		if (h->ops->release)
			return true;
	return false;
}

static void region_free(struct region *r)
{
	struct region_registry *registry = r->registry;

	/* Leases, attempts and in-flight work hold references: none is left. */
	if (idmap_get(&registry->regions, r->id) == r)
		idmap_remove(&registry->regions, r->id);
	idseq_remove(&registry->region_order, &r->order);
	/* The owner's quota is free again now, whether or not the memory goes
	 * on the pool: a client that unregistered may register at once. */
	uncharge_quota(registry, r->account, r->size);
	/* Unmapping a large mapping drops every page the daemon touched (25 ms
	 * a GiB here), and CUDA calls can take long: not on the loop. (The
	 * registrations went with the owner's hold, each on the pool.) */
	if (region_release_blocks(r) &&
	    uv_queue_work(registry->core->loop, &r->release, on_release, on_release_done) == 0)
		return;
	region_release_memory(r);
	region_finish(r);
}

struct region *region_unref(struct region *r)
{
	if (r && --r->n_ref == 0)
		region_free(r);
	return NULL;
}

void region_drop_owner(struct region *r)
{
	struct region_registry *registry = r->registry;

	if (r->dead)
		return;
	r->dead = true;
	idmap_remove(&registry->regions, r->id);
	idseq_remove(&registry->region_order, &r->order);
	session_remove(&r->owner_link);
	/* No uid keeps the owner's rkeys alive: leases and operations in
	 * flight keep only the memory. A pool thread may attach a hook
	 * meanwhile (under hooks_lock: the walk steps under it too, not the
	 * revokes); none is detached before the region goes. */
	pthread_mutex_lock(&r->hooks_lock);
	for (struct list_head *at = r->hooks.next; at != &r->hooks; at = at->next) {
		struct region_hook *h = container_of(at, struct region_hook, link);

		pthread_mutex_unlock(&r->hooks_lock);
		if (h->ops->revoke)
			h->ops->revoke(h);
		pthread_mutex_lock(&r->hooks_lock);
	}
	pthread_mutex_unlock(&r->hooks_lock);
	region_unref(r);
}

/* 0 none, 1 read, 2 read-write, 3 owner. */
static int rights_of(const struct region *r, const struct session *c)
{
	int best = 0;

	if (c->cred.uid == 0 || c->cred.uid == r->owner_uid)
		return 3;
	for (size_t i = 0; i < r->n_shares; i++) {
		const struct region_share *s = &r->shares[i];
		bool match = s->is_group ? session_in_group(c, s->id) : c->cred.uid == s->id;

		if (match)
			best = MAX(best, s->readonly ? 1 : 2);
	}
	return best;
}

/* The rights_of() level a right needs. */
static int level_of(enum region_right right)
{
	switch (right) {
	case REGION_READ:
		return 1;
	case REGION_WRITE:
		return 2;
	case REGION_ADMIN:
		break;
	}
	return 3;
}

bool region_visible_to(const struct region *r, const struct session *caller)
{
	return rights_of(r, caller) > 0;
}

bool region_allows(const struct region *r, const struct session *s, enum region_right right)
{
	return rights_of(r, s) >= level_of(right);
}

int region_lookup(struct region_registry *registry, uint64_t id, const struct session *caller,
		  enum region_right right, struct region **ret, struct errinfo *e)
{
	struct region *r = idmap_get(&registry->regions, id);
	int have;

	if (!r || r->dead)
		return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_REGION, -ENOENT,
				   "there is no region %" PRIu64
				   " (never registered, or unregistered since)",
				   id);
	have = rights_of(r, caller);
	/* Say nothing about the region itself to those who may not use it. */
	if (have == 0)
		return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
				   "uid %u may not use region %" PRIu64
				   ": only its owner and those it is shared with may",
				   (unsigned)caller->cred.uid, id);
	if (have < level_of(right))
		return right == REGION_ADMIN ?
			       errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "only the owner of region %" PRIu64 " may do that", id) :
			       errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "region %" PRIu64 " is shared with uid %u read-only", id,
					   (unsigned)caller->cred.uid);
	*ret = region_ref(r);
	return 0;
}

int region_share(struct region *r, bool is_group, uint32_t id, bool readonly, struct errinfo *e)
{
	unsigned max = r->registry->core->cfg.max_shares_per_region;
	struct region_share *n;

	for (size_t i = 0; i < r->n_shares; i++) {
		struct region_share *s = &r->shares[i];

		if (s->is_group == is_group && s->id == id) {
			if (s->readonly == readonly)
				return -EEXIST;
			s->readonly = readonly;
			return 0;
		}
	}
	/* Every access check of another uid walks the list: keep it short. */
	if (r->n_shares >= max)
		return errinfo_quota(e, "shares", max, r->n_shares, 1,
				     "region %" PRIu64 " is shared with %zu uids and gids, the "
				     "limit is %u; share with a group to reach many users",
				     r->id, r->n_shares, max);
	n = reallocarray(r->shares, r->n_shares + 1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	r->shares = n;
	r->shares[r->n_shares++] = (struct region_share){ is_group, id, readonly };
	return 0;
}

int region_unshare(struct region *r, bool is_group, uint32_t id)
{
	for (size_t i = 0; i < r->n_shares; i++) {
		struct region_share *s = &r->shares[i];

		if (s->is_group != is_group || s->id != id)
			continue;
		/* Keep the order GetRegion shows them in. */
		memmove(s, s + 1, (r->n_shares - i - 1) * sizeof(*s));
		r->n_shares--;
		return 0;
	}
	return -ENOENT;
}

bool region_same_memory(const struct region *a, const struct region *b, int64_t *ret_delta)
{
	if (a == b) {
		*ret_delta = 0;
		return true;
	}
	return a->mem == b->mem && a->mem->same_memory && a->mem->same_memory(a, b, ret_delta);
}

int region_check_range(const struct region *r, uint64_t offset, uint64_t length, const char *what,
		       struct errinfo *e)
{
	if (offset > r->size || length > r->size - offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "%s range [%" PRIu64 ", +%" PRIu64 ") is outside region %" PRIu64
				   " (%" PRIu64 " bytes)",
				   what, offset, length, r->id, r->size);
	return 0;
}

struct region_weak region_weak(const struct region *r)
{
	return (struct region_weak){ .id = r->id, .addr = region_address(r), .size = r->size };
}

struct region *region_weak_upgrade(struct region_registry *registry, const struct region_weak *w)
{
	struct region *r = idmap_get(&registry->regions, w->id);

	if (!r || r->dead || region_address(r) != w->addr || r->size != w->size)
		return NULL;
	return region_ref(r);
}
