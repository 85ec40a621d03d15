/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd Register, Unregister, Share, ListRegions and GetRegion. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "errinfo.h"
#include "gpu.h"
#include "lease.h"
#include "mreg.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "region.h"
#include "region_memfd.h"
#include "rpc.h"
#include "rpc_gpu.h"
#include "rpc_rdma.h"

static const struct {
	const char *name;
	unsigned bit;
} access_names[] = {
	{ "local_write", REGION_ACCESS_LOCAL_WRITE },
	{ "remote_read", REGION_ACCESS_REMOTE_READ },
	{ "remote_write", REGION_ACCESS_REMOTE_WRITE },
	{ "remote_atomic", REGION_ACCESS_REMOTE_ATOMIC },
};

#define REGION_ACCESS_DEFAULT \
	(REGION_ACCESS_LOCAL_WRITE | REGION_ACCESS_REMOTE_READ | REGION_ACCESS_REMOTE_WRITE)

static int parse_access(struct rpc_call *call, const cJSON *list, unsigned *ret)
{
	const cJSON *item;
	unsigned bits = 0;
	size_t n = 0;

	if (!list)
		return 0;
	cJSON_ArrayForEach(item, list) {
		size_t i;

		/* Each name once at most: a longer list is no request. */
		if (++n > ELEMENTSOF(access_names))
			return rpc_invalid_param(call, "access",
						 "parameter 'access' lists more than %zu names",
						 ELEMENTSOF(access_names));
		for (i = 0; i < ELEMENTSOF(access_names); i++)
			if (cJSON_IsString(item) && strcmp(item->valuestring, access_names[i].name) == 0)
				break;
		if (i == ELEMENTSOF(access_names))
			return rpc_invalid_param(call, "access",
						 "parameter 'access' lists \"local_write\", "
						 "\"remote_read\", \"remote_write\" or "
						 "\"remote_atomic\"");
		bits |= access_names[i].bit;
	}
	*ret = bits;
	return 0;
}

static int add_access(cJSON *o, unsigned bits)
{
	cJSON *a = cJSON_AddArrayToObject(o, "access");

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(access_names); i++) {
		cJSON *s;

		if (!(bits & access_names[i].bit))
			continue;
		s = cJSON_CreateString(access_names[i].name);
		if (!s)
			return -ENOMEM;
		cJSON_AddItemToArray(a, s);
	}
	return 0;
}

/* GetRegion lists at most this many leases; leases.held and .waiting count all. */
#define REGION_LEASE_LIST_MAX 256

static cJSON *lease_to_json(const struct lease *l)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || json_add_u64(o, "lease", l->id) < 0 ||
	    json_add_string(o, "mode", lock_mode_to_string(l->mode)) < 0 ||
	    json_add_string(o, "state", l->req.held ? "held" : "waiting") < 0 ||
	    json_add_int(o, "pid", lease_holder(l) ? lease_holder(l)->cred.pid : 0) < 0 ||
	    json_add_int(o, "uid", lease_holder(l) ? lease_holder(l)->cred.uid : 0) < 0)
		return (cJSON_Delete(o), NULL);
	return o;
}

/* The region as queries show it; detailed adds the source, shares and leases. */
cJSON *region_json(const struct region *r, bool detailed)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *owner, *loc, *lock, *leases, *list;

	if (!o)
		return NULL;
	if (json_add_u64(o, "region", r->id) < 0 || json_add_u64(o, "size", r->size) < 0 ||
	    add_access(o, r->access) < 0 || json_add_bool(o, "writable", r->writable) < 0)
		return NULL;
	list = cJSON_AddArrayToObject(o, "registrations");
	if (!list)
		return NULL;
	if (mreg_list_json(r, list) < 0)
		return NULL;

	owner = cJSON_AddObjectToObject(o, "owner");
	loc = cJSON_AddObjectToObject(o, "location");
	lock = cJSON_AddObjectToObject(o, "lock");
	leases = cJSON_AddObjectToObject(o, "leases");
	if (!owner || !loc || !lock || !leases)
		return NULL;
	if (json_add_int(owner, "uid", r->owner_uid) < 0 ||
	    json_add_int(owner, "gid", r->owner_gid) < 0 ||
	    json_add_int(owner, "pid", r->owner_pid) < 0 ||
	    json_add_u64(owner, "connection", r->owner_conn_id) < 0 ||
	    json_add_string(loc, "type", region_is_gpu(r) ? "gpu" : "cpu") < 0 ||
	    (r->numa_node >= 0 && json_add_int(loc, "numa_node", r->numa_node) < 0) ||
	    (r->gpu >= 0 && json_add_int(loc, "device", r->gpu) < 0) ||
	    (r->gpu >= 0 && json_add_string(loc, "pci_bus_id", r->pci_bus_id) < 0) ||
	    json_add_string(lock, "state", lock_state_to_string(r->lock.state)) < 0 ||
	    json_add_int(lock, "holders", r->lock.n_holders) < 0 ||
	    json_add_int(lock, "waiters", r->lock.n_waiters) < 0 ||
	    json_add_int(leases, "held", r->n_leases_held) < 0 ||
	    json_add_int(leases, "waiting", r->n_leases_waiting) < 0 ||
	    json_add_u64(o, "age_msec", uv_now(r->registry->core->loop) - r->created_msec) < 0)
		return NULL;
	if (!detailed)
		return TAKE_PTR(o);

	{
		cJSON *src = cJSON_AddObjectToObject(o, "source");

		if (!src || json_add_string(src, "type", r->mem->type) < 0 ||
		    r->mem->describe(r, src) < 0)
			return NULL;
	}
	list = cJSON_AddArrayToObject(o, "shares");
	if (!list)
		return NULL;
	for (size_t i = 0; i < r->n_shares; i++) {
		cJSON *s = cJSON_CreateObject();

		if (!s)
			return NULL;
		cJSON_AddItemToArray(list, s);
		if (json_add_int(s, r->shares[i].is_group ? "gid" : "uid", r->shares[i].id) < 0 ||
		    json_add_bool(s, "readonly", r->shares[i].readonly) < 0)
			return NULL;
	}
	list = cJSON_AddArrayToObject(o, "lease_list");
	if (!list)
		return NULL;
	{
		const struct lease *l;
		size_t n = 0;

		/* The oldest REGION_LEASE_LIST_MAX: other uids' leases on a shared
		 * region count against their own quotas, not this list's size. */
		list_for_each_entry(l, &r->leases, region_link) {
			cJSON *j;

			if (l->released)
				continue;
			if (n++ == REGION_LEASE_LIST_MAX)
				break;
			j = lease_to_json(l);
			if (!j)
				return NULL;
			cJSON_AddItemToArray(list, j);
		}
	}
	return TAKE_PTR(o);
}

static int method_register(struct rpc_call *call)
{
	struct {
		int64_t fd;
		uint64_t offset;
		uint64_t length;
		cJSON *access;
		cJSON *devices;
		const char *memory;
		uint64_t size;
		const char *ipc_handle;
		uint32_t gpu;
	} p = { .fd = -1 };
	static const struct json_field fields[] = {
		{ "fd", JSON_INT, offsetof(__typeof__(p), fd), 0 },
		{ "offset", JSON_U64, offsetof(__typeof__(p), offset), 0 },
		{ "length", JSON_U64, offsetof(__typeof__(p), length), 0 },
		{ "access", JSON_ARRAY, offsetof(__typeof__(p), access), 0 },
		{ "devices", JSON_ANY, offsetof(__typeof__(p), devices), 0 },
		{ "memory", JSON_STRING, offsetof(__typeof__(p), memory), 0 },
		{ "size", JSON_U64, offsetof(__typeof__(p), size), 0 },
		{ "ipc_handle", JSON_STRING, offsetof(__typeof__(p), ipc_handle), 0 },
		{ "gpu", JSON_U32, offsetof(__typeof__(p), gpu), 0 },
		{},
	};
	struct memfd_import imp = { .fd = -EBADF, .access = REGION_ACCESS_DEFAULT };
	_cleanup_close_ int fd = -EBADF;
	struct errinfo err = {};
	struct region *reg;
	int memory = 0;		/* a memfd, else enum gpu_memory */
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = parse_access(call, p.access, &imp.access)) < 0)
		return r;
	/* Below, length 0 stands for "absent: to the end", for every kind of
	 * memory; a client that sends 0 asks for an empty range. */
	if (p.length == 0 && json_present(call->vc.parameters, "length"))
		return rpc_invalid_param(call, "length",
					 "parameter 'length' is 0, an empty range; leave it out to "
					 "register up to the end");
	if (p.memory && strcmp(p.memory, "cuda-vmm") == 0)
		memory = GPU_MEMORY_VMM;
	else if (p.memory && strcmp(p.memory, "cuda-ipc") == 0)
		memory = GPU_MEMORY_IPC;
	else if (p.memory && strcmp(p.memory, "memfd") != 0)
		return rpc_invalid_param(call, "memory", "parameter 'memory' must be \"memfd\" "
							 "(default), \"cuda-vmm\" or \"cuda-ipc\"");
	if (memory != GPU_MEMORY_IPC) {
		if (p.fd < 0 || p.fd > UINT32_MAX)
			return rpc_invalid_param(call, "fd", "parameter 'fd' is required: the index "
							     "of the file descriptor sent with the "
							     "call");
		r = rpc_take_fd(call, "fd", (uint32_t)p.fd, &fd);
		if (r < 0)
			return r;
	} else if (p.fd >= 0) {
		return rpc_invalid_param(call, "fd", "a CUDA IPC handle travels in 'ipc_handle', "
						     "not as a file descriptor");
	}
	if (memory == GPU_MEMORY_VMM && p.size == 0)
		return rpc_invalid_param(call, "size", "parameter 'size' is required with "
						       "\"cuda-vmm\" and not 0: the size the "
						       "allocation was created with");
	if (memory) {
		struct gpu_import_params gp = {
			.memory = memory,
			.fd = TAKE_FD(fd),
			.alloc_size = p.size,
			.ipc_handle = p.ipc_handle,
			.gpu = p.gpu,
			.offset = p.offset,
			.length = p.length,
			.access = imp.access,
		};

		return rpc_gpu_import(call, &gp, p.devices);
	}

	imp.fd = fd;
	imp.offset = p.offset;
	imp.length = p.length;
	r = region_import_memfd(call->ctx->regions, call->session, &imp, &reg, &err);
	fd = imp.fd;
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;

	/* The answer waits for the devices asked for, if any. */
	if (rpc_register_on(rpc_defer(call, NULL, NULL), reg, p.devices, true) < 0)
		/* The client learns no region id from an error: keep none. */
		region_drop_owner(reg);
	return 0;
}

/* An Unregister waiting for the region's MRs to be deregistered. */
struct unregister_wait {
	struct rpc_deferred *call;
	struct region *region;		/* a reference */
	struct mreg_waiter waiter;
};

static void unregister_wait_free(struct unregister_wait *uw)
{
	mreg_waiter_cancel(&uw->waiter);
	region_unref(uw->region);
	free(uw);
}

static void on_revoked(struct mreg_waiter *w)
{
	struct unregister_wait *uw = container_of(w, struct unregister_wait, waiter);

	rpc_deferred_reply(uw->call, NULL);
	unregister_wait_free(uw);
}

static void unregister_cancel(void *userdata)
{
	struct unregister_wait *uw = userdata;

	/* The deregistrations go on without anyone waiting for them. */
	rpc_deferred_drop(uw->call);
	unregister_wait_free(uw);
}

static int method_unregister(struct rpc_call *call)
{
	struct {
		uint64_t region;
	} p = {};
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{},
	};
	struct unregister_wait *uw;
	struct region *reg;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	r = rpc_region_lookup(call, p.region, REGION_ADMIN, &reg);
	if (r < 0)
		return r;
	/* In-flight work and leases keep the memory until they finish; the
	 * registrations go now. */
	region_drop_owner(reg);
	uw = calloc(1, sizeof(*uw));
	if (!uw) {
		region_unref(reg);
		return -ENOMEM;
	}
	uw->region = reg;
	uw->waiter.settled = on_revoked;
	list_init(&uw->waiter.link);
	/* The answer means what it says: a peer's next access with one of
	 * the region's rkeys fails, so it comes once the MRs are gone. */
	if (!mreg_wait_revoked(reg, &uw->waiter)) {
		unregister_wait_free(uw);
		return rpc_reply(call, NULL);
	}
	uw->call = rpc_defer(call, unregister_cancel, uw);
	return 0;
}

/*
 * Share and Unshare: exactly one uid or gid, of the region's owner (or
 * root). Presence decides which id is meant: an explicit negative one is
 * refused, not taken for "absent".
 */
static int share_change(struct rpc_call *call, bool unshare)
{
	struct {
		uint64_t region;
		int64_t uid, gid;
		bool readonly;
	} p = {};
	static const struct json_field fields[] = {
		/* Share only: Unshare decodes from the next entry on. */
		{ "readonly", JSON_BOOL, offsetof(__typeof__(p), readonly), 0 },
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{ "uid", JSON_INT, offsetof(__typeof__(p), uid), 0 },
		{ "gid", JSON_INT, offsetof(__typeof__(p), gid), 0 },
		{},
	};
	struct errinfo err = {};
	struct region *reg;
	bool has_uid, has_gid;
	const char *name;
	int64_t id;
	int r;

	r = rpc_params(call, unshare ? fields + 1 : fields, &p);
	if (r < 0)
		return r;
	has_uid = json_present(call->vc.parameters, "uid");
	has_gid = json_present(call->vc.parameters, "gid");
	if (has_uid == has_gid)
		return rpc_invalid_param(call, "uid", "pass exactly one of 'uid' and 'gid'");
	name = has_gid ? "gid" : "uid";
	id = has_gid ? p.gid : p.uid;
	/* (uid_t)-1 means "no id" to the kernel: nobody has it. */
	if (id < 0 || id >= UINT32_MAX)
		return rpc_invalid_param(call, name, "parameter '%s' must be an id from 0 to %u",
					 name, UINT32_MAX - 1);
	r = rpc_region_lookup(call, p.region, REGION_ADMIN, &reg);
	if (r < 0)
		return r;
	r = unshare ? region_unshare(reg, has_gid, (uint32_t)id) :
		      region_share(reg, has_gid, (uint32_t)id, p.readonly, &err);
	/* Rights shrank (taken back, or turned read-only): the leases of
	 * holders who lost the right theirs needs end. */
	if (r == 0 && (unshare || p.readonly))
		r = lease_revoke_lost(reg);
	region_unref(reg);
	/* Shared so already, or not shared at all: nothing changes, which is
	 * what was asked. */
	if (r < 0 && r != -EEXIST && r != -ENOENT)
		return err.name ? rpc_error_info(call, &err) : r;
	return rpc_reply(call, NULL);
}

static int method_share(struct rpc_call *call)
{
	return share_change(call, false);
}

static int method_unshare(struct rpc_call *call)
{
	return share_change(call, true);
}

static int region_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct region *r = container_of(node, struct region, order);

	if (!region_visible_to(r, call->session))
		return 0;
	*ret = region_json(r, false);
	return *ret ? 0 : -ENOMEM;
}

static int method_list_regions(struct rpc_call *call)
{
	return rpc_reply_page(call, &call->ctx->regions->region_order, "regions", region_item);
}

static int method_get_region(struct rpc_call *call)
{
	struct {
		uint64_t region;
	} p = {};
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{},
	};
	struct region *reg;
	cJSON *o;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	r = rpc_region_lookup(call, p.region, REGION_READ, &reg);
	if (r < 0)
		return r;
	o = region_json(reg, true);
	region_unref(reg);
	if (!o)
		return -ENOMEM;
	return rpc_reply(call, o);
}

const struct rpc_method rpc_region_methods[] = {
	{ "io.rdmamemd.Register", method_register, RPC_ACCEPTS_FDS },
	{ "io.rdmamemd.Unregister", method_unregister, 0 },
	{ "io.rdmamemd.Share", method_share, 0 },
	{ "io.rdmamemd.Unshare", method_unshare, 0 },
	{ "io.rdmamemd.ListRegions", method_list_regions, 0 },
	{ "io.rdmamemd.GetRegion", method_get_region, 0 },
	{},
};
