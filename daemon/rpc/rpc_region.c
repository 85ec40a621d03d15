/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd Register, Unregister, Share, ListRegions and GetRegion. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/mem/lease.h"
#include "daemon/rdma/mreg.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "proto/json_out.h"
#include "daemon/mem/region.h"
#include "daemon/mem/keep.h"
#include "daemon/mem/region_memfd.h"
#include "daemon/rpc/rpc.h"
#include "daemon/rpc/rpc_gpu.h"
#include "daemon/rpc/rpc_rdma.h"

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

/*
 * The types of a region's answers. Registration is rpc_rdma.c's: RegisterOn
 * answers with it too.
 */
/* clang-format off */
static const struct varlink_symbol rpc_type_Location = VARLINK_DEFINE_TYPE(
	Location, "Where a region's memory lives.",
	VARLINK_FIELD_COMMENT("\"cpu\" (host memory) or \"gpu\""),
	VARLINK_FIELD(type, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("NUMA node of its first page, when known"),
	VARLINK_FIELD(numa_node, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT("GPU regions: the device ordinal and its PCI bus id"),
	VARLINK_FIELD(device, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(pci_bus_id, VARLINK_STRING, VARLINK_NULLABLE));

static const struct varlink_symbol rpc_type_Owner = VARLINK_DEFINE_TYPE(
	Owner, NULL,
	VARLINK_FIELD(uid, VARLINK_INT, 0),
	VARLINK_FIELD(gid, VARLINK_INT, 0),
	VARLINK_FIELD(pid, VARLINK_INT, 0),
	VARLINK_FIELD(connection, VARLINK_U64, 0));

static const struct varlink_symbol rpc_type_LockState = VARLINK_DEFINE_TYPE(
	LockState, NULL,
	VARLINK_FIELD_COMMENT("\"idle\", \"reading\", \"disjoint-writing\" or \"exclusive\""),
	VARLINK_FIELD(state, VARLINK_STRING, 0),
	VARLINK_FIELD(holders, VARLINK_INT, 0),
	VARLINK_FIELD(waiters, VARLINK_INT, 0));

static const struct varlink_symbol rpc_type_LeaseCounts = VARLINK_DEFINE_TYPE(
	LeaseCounts, NULL,
	VARLINK_FIELD(held, VARLINK_INT, 0),
	VARLINK_FIELD(waiting, VARLINK_INT, 0));

static const struct varlink_symbol rpc_type_Lease = VARLINK_DEFINE_TYPE(
	Lease, NULL,
	VARLINK_FIELD(lease, VARLINK_U64, 0),
	VARLINK_FIELD(mode, VARLINK_STRING, 0),
	VARLINK_FIELD(state, VARLINK_STRING, 0),
	VARLINK_FIELD(pid, VARLINK_INT, 0),
	VARLINK_FIELD(uid, VARLINK_INT, 0));

static const struct varlink_symbol rpc_type_RegionShare = VARLINK_DEFINE_TYPE(
	RegionShare,
	"Who else may use a region (see method Share): a uid or a gid, read-only\n"
	"or not. Named apart from the method: a Varlink interface has one\n"
	"namespace for types, methods and errors.",
	VARLINK_FIELD(uid, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(gid, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(readonly, VARLINK_BOOL, 0));

static const struct varlink_symbol rpc_type_Source = VARLINK_DEFINE_TYPE(
	Source, NULL,
	VARLINK_FIELD_COMMENT("\"memfd\", \"cuda-vmm\" or \"cuda-ipc\""),
	VARLINK_FIELD(type, VARLINK_STRING, 0),
	VARLINK_FIELD(offset, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT(
		"memfd: its size and seals (of \"seal\", \"shrink\", \"grow\", \"write\",\n"
		"\"future_write\")"),
	VARLINK_FIELD(file_size, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(seals, VARLINK_STRING, VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("CUDA: the allocation's size (VMM: of all chunks, mapped in order);\n"
			      "VMM: the allocations mapped, primary context references held;\n"
			      "IPC: how many regions share the open"),
	VARLINK_FIELD(allocation_size, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(chunks, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(primary_context_refs, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(regions_sharing_the_open, VARLINK_INT, VARLINK_NULLABLE));
/* clang-format on */

/* The fields of every answer about a region (region_json()), as F and
 * F_BY_TYPE make them: Region's, and the replies of Register and GetRegion. */
#define REGION_FIELDS(F, F_BY_TYPE)                                                             \
	F(region, VARLINK_U64, 0), F(size, VARLINK_U64, 0),                                     \
		VARLINK_FIELD_COMMENT("of \"local_write\", \"remote_read\", \"remote_write\", " \
				      "\"remote_atomic\""),                                     \
		F(access, VARLINK_STRING, VARLINK_ARRAY), F(writable, VARLINK_BOOL, 0),         \
		F_BY_TYPE(registrations, rpc_type_Registration, VARLINK_ARRAY),                 \
		F_BY_TYPE(owner, rpc_type_Owner, 0), F_BY_TYPE(location, rpc_type_Location, 0), \
		F_BY_TYPE(lock, rpc_type_LockState, 0),                                         \
		F_BY_TYPE(leases, rpc_type_LeaseCounts, 0), F(age_msec, VARLINK_U64, 0),        \
		VARLINK_FIELD_COMMENT("kept from before a restart and not reclaimed yet: "      \
				      "released in this many ms unless its owner reclaims it"), \
		F(reclaim_in_msec, VARLINK_U64, VARLINK_NULLABLE),                              \
		VARLINK_FIELD_COMMENT("Register's and Reclaim's answers, when the region is "   \
				      "kept across restarts: what Reclaim takes"),              \
		F(reclaim_token, VARLINK_STRING, VARLINK_NULLABLE)

/* clang-format off */
static const struct varlink_symbol rpc_type_Region = VARLINK_DEFINE_TYPE(
	Region,
	"A region as queries show it. GetRegion adds source, shares and lease_list\n"
	"(the oldest 256 leases; leases counts them all).",
	REGION_FIELDS(VARLINK_FIELD, VARLINK_FIELD_BY_TYPE),
	VARLINK_FIELD_BY_TYPE(source, rpc_type_Source, VARLINK_NULLABLE),
	VARLINK_FIELD_BY_TYPE(shares, rpc_type_RegionShare, VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_BY_TYPE(lease_list, rpc_type_Lease, VARLINK_NULLABLE | VARLINK_ARRAY));
/* clang-format on */

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
			if (cJSON_IsString(item) &&
			    strcmp(item->valuestring, access_names[i].name) == 0)
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

static void add_access(struct json_out *o, unsigned bits)
{
	json_out_array(o, "access");
	for (size_t i = 0; i < ELEMENTSOF(access_names); i++)
		if (bits & access_names[i].bit)
			json_out_string(o, NULL, access_names[i].name);
	json_out_end(o);
}

/* GetRegion lists at most this many leases; leases.held and .waiting count all. */
#define REGION_LEASE_LIST_MAX 256

static void lease_write(struct json_out *o, const struct lease *l)
{
	const struct session *holder = lease_holder(l);

	json_out_object(o, NULL);
	json_out_u64(o, "lease", l->id);
	json_out_string(o, "mode", lock_mode_to_string(l->mode));
	json_out_string(o, "state", l->req.held ? "held" : "waiting");
	json_out_int(o, "pid", holder ? holder->cred.pid : 0);
	json_out_int(o, "uid", holder ? holder->cred.uid : 0);
	json_out_end(o);
}

void region_write_head(struct json_out *o, const struct region *r)
{
	json_out_u64(o, "region", r->id);
	json_out_u64(o, "size", r->size);
	add_access(o, r->access);
	json_out_bool(o, "writable", r->writable);
	json_out_array(o, "registrations");
	mreg_list_write(o, r);
}

void region_write_tail(struct json_out *o, const struct region *r, bool detailed)
{
	uint64_t left;

	json_out_end(o); /* registrations */
	json_out_object(o, "owner");
	json_out_int(o, "uid", r->owner_uid);
	json_out_int(o, "gid", r->owner_gid);
	json_out_int(o, "pid", r->owner_pid);
	json_out_u64(o, "connection", r->owner_conn_id);
	json_out_end(o);
	json_out_object(o, "location");
	json_out_string(o, "type", region_is_gpu(r) ? "gpu" : "cpu");
	if (r->numa_node >= 0)
		json_out_int(o, "numa_node", r->numa_node);
	if (r->gpu >= 0) {
		json_out_int(o, "device", r->gpu);
		json_out_string(o, "pci_bus_id", r->pci_bus_id);
	}
	json_out_end(o);
	json_out_object(o, "lock");
	json_out_string(o, "state", lock_state_to_string(r->lock.state));
	json_out_int(o, "holders", r->lock.n_holders);
	json_out_int(o, "waiters", r->lock.n_waiters);
	json_out_end(o);
	json_out_object(o, "leases");
	json_out_int(o, "held", r->n_leases_held);
	json_out_int(o, "waiting", r->n_leases_waiting);
	json_out_end(o);
	json_out_u64(o, "age_msec", uv_now(r->registry->core->loop) - r->created_msec);
	if (keep_awaiting(r, &left))
		json_out_u64(o, "reclaim_in_msec", left);
	if (!detailed)
		return;

	json_out_object(o, "source");
	json_out_string(o, "type", r->mem->type);
	r->mem->describe(r, o);
	json_out_end(o);
	json_out_array(o, "shares");
	for (size_t i = 0; i < r->n_shares; i++) {
		json_out_object(o, NULL);
		json_out_int(o, r->shares[i].is_group ? "gid" : "uid", r->shares[i].id);
		json_out_bool(o, "readonly", r->shares[i].readonly);
		json_out_end(o);
	}
	json_out_end(o);
	json_out_array(o, "lease_list");
	{
		const struct lease *l;
		size_t n = 0;

		/* The oldest REGION_LEASE_LIST_MAX: other uids' leases on a shared
		 * region count against their own quotas, not this list's size. */
		list_for_each_entry(l, &r->leases, region_link) {
			if (l->released)
				continue;
			if (n++ == REGION_LEASE_LIST_MAX)
				break;
			lease_write(o, l);
		}
	}
	json_out_end(o);
}

void region_write(struct json_out *o, const struct region *r, bool detailed)
{
	region_write_head(o, r);
	region_write_tail(o, r, detailed);
}

struct register_params {
	int64_t fd;
	uint64_t offset;
	uint64_t length;
	bool has_length;
	const cJSON *access;
	const cJSON *devices;
	const char *memory;
	uint64_t size;
	uint32_t chunks;
	const char *ipc_handle;
	uint32_t gpu;
	bool keep;
};

static const struct register_params register_init = { .fd = -1, .chunks = 1, .keep = true };

/* clang-format off */
RPC_DEFINE_METHOD(
	Register,
	"Imports memory as a region; memory says from where:\n"
	"- \"memfd\" (default): [offset, offset + length) of the memfd passed as file\n"
	"  descriptor number fd (length absent: to the end; \"0\", an empty range, is\n"
	"  refused). It must carry F_SEAL_SHRINK.\n"
	"- \"cuda-vmm\": a CUDA VMM allocation exported as a POSIX fd, passed as file\n"
	"  descriptor number fd; size is the size it was created with; offset and\n"
	"  length select the region in it. chunks (default 1, at most 64): that many\n"
	"  allocations of size bytes each, file descriptors fd to fd + chunks - 1,\n"
	"  mapped one after the other as one range (a tensor of PyTorch's expandable\n"
	"  segments spans several); offset and length select the region in the range.\n"
	"- \"cuda-ipc\": a legacy CUipcMemHandle as 128 hex digits in ipc_handle,\n"
	"  opened with the primary context of device gpu (default 0); regions over\n"
	"  one handle share one open.\n"
	"Each call makes a region of its own. devices (\"all\", or a list of names)\n"
	"registers it on RDMA devices before the answer; absent or [] registers\n"
	"nowhere yet. access lists at most its 4 names.\n"
	"Under systemd a region outlives a restart of the daemon (the answer then\n"
	"carries its reclaim_token, for Reclaim); keep false opts out. GPU memory\n"
	"comes back while its allocation lives: an IPC handle's while its exporter\n"
	"does, a VMM allocation always (the daemon holds its own export).",
	VARLINK_INPUT(struct register_params, fd, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, offset, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_INPUT_HAS(struct register_params, length, length, VARLINK_U64, VARLINK_NULLABLE,
			  has_length),
	VARLINK_INPUT(struct register_params, access, VARLINK_STRING,
		      VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_INPUT(struct register_params, devices, VARLINK_OBJECT, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, memory, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, size, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, chunks, VARLINK_U32, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, ipc_handle, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, gpu, VARLINK_U32, VARLINK_NULLABLE),
	VARLINK_INPUT(struct register_params, keep, VARLINK_BOOL, VARLINK_NULLABLE),
	REGION_FIELDS(VARLINK_OUTPUT, VARLINK_OUTPUT_BY_TYPE));
/* clang-format on */

static int method_register(struct rpc_call *call, void *params)
{
	const struct register_params *p = params;
	struct memfd_import imp = { .fd = -EBADF, .access = REGION_ACCESS_DEFAULT };
	_cleanup_close_ int fd = -EBADF;
	struct errinfo err = {};
	struct region *reg;
	int memory = 0; /* a memfd, else enum gpu_memory */
	int r;

	r = parse_access(call, p->access, &imp.access);
	if (r < 0)
		return r;
	/* Below, length 0 stands for "absent: to the end", for every kind of
	 * memory; a client that sends 0 asks for an empty range. */
	if (p->length == 0 && p->has_length)
		return rpc_invalid_param(call, "length",
					 "parameter 'length' is 0, an empty range; leave it out to "
					 "register up to the end");
	if (p->memory && strcmp(p->memory, "cuda-vmm") == 0)
		memory = GPU_MEMORY_VMM;
	else if (p->memory && strcmp(p->memory, "cuda-ipc") == 0)
		memory = GPU_MEMORY_IPC;
	else if (p->memory && strcmp(p->memory, "memfd") != 0)
		return rpc_invalid_param(call, "memory",
					 "parameter 'memory' must be \"memfd\" "
					 "(default), \"cuda-vmm\" or \"cuda-ipc\"");
	if (memory != GPU_MEMORY_IPC) {
		if (p->fd < 0 || p->fd > UINT32_MAX)
			return rpc_invalid_param(call, "fd",
						 "parameter 'fd' is required: the index "
						 "of the file descriptor sent with the "
						 "call");
		r = rpc_take_fd(call, "fd", (uint32_t)p->fd, &fd);
		if (r < 0)
			return r;
	} else if (p->fd >= 0) {
		return rpc_invalid_param(call, "fd",
					 "a CUDA IPC handle travels in 'ipc_handle', "
					 "not as a file descriptor");
	}
	if (memory == GPU_MEMORY_VMM && p->size == 0)
		return rpc_invalid_param(call, "size",
					 "parameter 'size' is required with "
					 "\"cuda-vmm\" and not 0: the size the "
					 "allocation was created with");
	if (p->chunks != 1 && memory != GPU_MEMORY_VMM)
		return rpc_invalid_param(call, "chunks",
					 "parameter 'chunks' goes with \"cuda-vmm\" only");
	if (p->chunks == 0 || p->chunks > CU_VMM_CHUNKS_MAX)
		return rpc_invalid_param(call, "chunks",
					 "parameter 'chunks' is %" PRIu32 ": 1 to %u allocations",
					 p->chunks, CU_VMM_CHUNKS_MAX);
	/* Checked before any is taken: fd + i below cannot wrap. */
	if (memory == GPU_MEMORY_VMM && (uint64_t)p->fd + p->chunks > call->n_fds)
		return rpc_invalid_param(
			call, "chunks",
			"parameters 'fd' and 'chunks' name file descriptors %" PRIi64 " to %" PRIu64
			", but the message carries %zu",
			p->fd, (uint64_t)p->fd + p->chunks - 1, call->n_fds);
	if (memory == GPU_MEMORY_VMM && p->size > UINT64_MAX / p->chunks)
		return rpc_invalid_param(call, "size",
					 "%" PRIu32 " allocations of %" PRIu64 " bytes overflow",
					 p->chunks, p->size);
	if (memory) {
		struct gpu_import_params gp = {
			.memory = memory,
			.alloc_size = p->size,
			.ipc_handle = p->ipc_handle,
			.gpu = p->gpu,
			.offset = p->offset,
			.length = p->length,
			.access = imp.access,
			.keep = p->keep,
		};

		if (memory == GPU_MEMORY_VMM) {
			gp.fds[gp.n_fds++] = TAKE_FD(fd);
			/* The rest follow the first, in order. */
			for (uint32_t i = 1; i < p->chunks; i++) {
				r = rpc_take_fd(call, "chunks", (uint32_t)p->fd + i,
						&gp.fds[gp.n_fds]);
				if (r < 0) {
					gpu_import_params_close(&gp);
					return r;
				}
				gp.n_fds++;
			}
		}
		return rpc_gpu_import(call, &gp, p->devices);
	}

	imp.fd = fd;
	imp.offset = p->offset;
	imp.length = p->length;
	r = region_import_memfd(call->ctx->regions, call->session, &imp, &reg, &err);
	fd = imp.fd;
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	if (p->keep)
		keep_region(call->ctx->regions->keep, reg);

	/* The answer waits for the devices asked for, if any. */
	if (rpc_register_on(rpc_defer(call, NULL, NULL), reg, p->devices, true) < 0)
		/* The client learns no region id from an error: keep none. */
		region_drop_owner(reg);
	return 0;
}

/* An Unregister waiting for the region's MRs to be deregistered. */
struct unregister_wait {
	struct rpc_deferred *call;
	struct region *region; /* a reference */
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

struct region_params {
	struct rpc_region region;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	Unregister,
	"Drops the owner's hold on the region: it is gone for every new call, and\n"
	"its RDMA registrations are deregistered; the answer comes once they are\n"
	"gone (a remote peer's next access with its rkeys fails). Its memory goes\n"
	"once in-flight operations and leases on it are done. Owner (or root) only.",
	RPC_INPUT_REGION(struct region_params, region, REGION_ADMIN));
/* clang-format on */

static int method_unregister(struct rpc_call *call, void *params)
{
	struct region *reg = ((struct region_params *)params)->region.region;
	struct unregister_wait *uw;

	/* In-flight work and leases keep the memory until they finish; the
	 * registrations go now. */
	region_drop_owner(reg);
	uw = calloc(1, sizeof(*uw));
	if (!uw)
		return -ENOMEM;
	uw->region = region_ref(reg);
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
struct share_params {
	struct rpc_region region;
	int64_t uid, gid;
	bool has_uid, has_gid;
	bool readonly; /* Share only */
	/* share_check()'s: the id meant */
	bool is_group;
	uint32_t id;
};

#define SHARE_ID_INPUTS                                                                           \
	VARLINK_INPUT_HAS(struct share_params, uid, uid, VARLINK_INT, VARLINK_NULLABLE, has_uid), \
		VARLINK_INPUT_HAS(struct share_params, gid, gid, VARLINK_INT, VARLINK_NULLABLE,   \
				  has_gid)

/* clang-format off */
RPC_DEFINE_METHOD(
	Share,
	"Lets a uid or a gid (exactly one) use the region: read, write and lock,\n"
	"or with readonly read and take shared leases. Owner (or root) only. A\n"
	"region is shared with at most max-shares-per-region uids and gids (64 by\n"
	"default; QuotaExceeded \"shares\").",
	RPC_INPUT_REGION(struct share_params, region, REGION_ADMIN),
	SHARE_ID_INPUTS,
	VARLINK_INPUT(struct share_params, readonly, VARLINK_BOOL, VARLINK_NULLABLE));

RPC_DEFINE_METHOD(
	Unshare,
	"Takes back what Share gave a uid or a gid (exactly one). New calls are\n"
	"checked against what is left at once; leases whose holders lost the right\n"
	"they need end (a waiting Lock gets PermissionDenied, a held lease is\n"
	"released once the operations running under it finish). Rights the holder\n"
	"has another way (owner, another share) stay. Not shared that way: nothing\n"
	"to do. Owner (or root) only.",
	RPC_INPUT_REGION(struct share_params, region, REGION_ADMIN),
	SHARE_ID_INPUTS);
/* clang-format on */

static int share_check(struct rpc_call *call, void *params)
{
	struct share_params *p = params;
	const char *name;
	int64_t id;

	if (p->has_uid == p->has_gid)
		return rpc_invalid_param(call, "uid", "pass exactly one of 'uid' and 'gid'");
	name = p->has_gid ? "gid" : "uid";
	id = p->has_gid ? p->gid : p->uid;
	/* (uid_t)-1 means "no id" to the kernel: nobody has it. */
	if (id < 0 || id >= UINT32_MAX)
		return rpc_invalid_param(call, name, "parameter '%s' must be an id from 0 to %u",
					 name, UINT32_MAX - 1);
	p->is_group = p->has_gid;
	p->id = (uint32_t)id;
	return 0;
}

static int share_change(struct rpc_call *call, const struct share_params *p, bool unshare)
{
	struct region *reg = p->region.region;
	struct errinfo err = {};
	int r;

	r = unshare ? region_unshare(reg, p->is_group, p->id) :
		      region_share(reg, p->is_group, p->id, p->readonly, &err);
	/* Rights shrank (taken back, or turned read-only): the leases of
	 * holders who lost the right theirs needs end. */
	if (r == 0)
		keep_changed(reg->registry->keep);
	if (r == 0 && (unshare || p->readonly))
		r = lease_revoke_lost(reg);
	/* Shared so already, or not shared at all: nothing changes, which is
	 * what was asked. */
	if (r < 0 && r != -EEXIST && r != -ENOENT)
		return err.name ? rpc_error_info(call, &err) : r;
	return rpc_reply(call, NULL);
}

static int method_share(struct rpc_call *call, void *params)
{
	return share_change(call, params, false);
}

static int method_unshare(struct rpc_call *call, void *params)
{
	return share_change(call, params, true);
}

struct reclaim_params {
	struct rpc_region region;
	const char *token;
	const cJSON *devices;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	Reclaim,
	"After a restart of the daemon: takes back a region registered before it,\n"
	"kept in systemd's fd store and waiting for its owner (reclaim_in_msec in\n"
	"its listing), with the reclaim_token Register answered. The region keeps\n"
	"its id and memory; its RDMA registrations are new (new rkeys: peers need\n"
	"a new descriptor), made again on the devices it had and on those named in\n"
	"devices, like Register's. The caller's uid must be the owner's. The\n"
	"answer is Register's.",
	RPC_INPUT_REGION(struct reclaim_params, region, REGION_ADMIN),
	VARLINK_INPUT(struct reclaim_params, token, VARLINK_STRING, 0),
	VARLINK_INPUT(struct reclaim_params, devices, VARLINK_OBJECT, VARLINK_NULLABLE),
	REGION_FIELDS(VARLINK_OUTPUT, VARLINK_OUTPUT_BY_TYPE));
/* clang-format on */

static int method_reclaim(struct rpc_call *call, void *params)
{
	const struct reclaim_params *p = params;
	struct region *reg = p->region.region;
	struct errinfo err = {};
	int r;

	/* A bad list changes nothing: the region keeps waiting. */
	r = rpc_check_devices(call, p->devices);
	if (r < 0)
		return r;
	r = keep_reclaim(call->ctx->regions->keep, reg, call->session, p->token, &err);
	if (r < 0)
		return rpc_error_info(call, &err);
	rpc_register_on(rpc_defer(call, NULL, NULL), reg, p->devices, true);
	return 0;
}

static int region_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct region *r = container_of(node, struct region, order);
	char buf[1024];
	struct json_out o;

	if (!region_visible_to(r, call->session))
		return 0;
	json_out_init(&o, buf, sizeof(buf));
	json_out_object(&o, NULL);
	region_write(&o, r, false);
	json_out_end(&o);
	*ret = json_out_item(&o);
	return *ret ? 0 : -ENOMEM;
}

/* clang-format off */
RPC_DEFINE_METHOD(
	ListRegions,
	"The regions the caller may use (all of them for root), a page at a time,\n"
	"by id: at most limit (default 128; more than 256 counts as 256) of those\n"
	"with ids above after (a decimal string; absent: from the first). next is\n"
	"there when more may follow: pass it as after. A page may hold fewer than\n"
	"limit, even none, and still have a next. Regions that come or go between\n"
	"pages do not make others repeat or go missing.",
	RPC_PAGE_INPUTS,
	VARLINK_OUTPUT_BY_TYPE(regions, rpc_type_Region, VARLINK_ARRAY),
	VARLINK_OUTPUT(next, VARLINK_U64, VARLINK_NULLABLE));
/* clang-format on */

static int method_list_regions(struct rpc_call *call, void *params)
{
	return rpc_reply_page(call, params, &call->ctx->regions->region_order, "regions",
			      region_item);
}

/* clang-format off */
RPC_DEFINE_METHOD(GetRegion, NULL,
		  RPC_INPUT_REGION(struct region_params, region, REGION_READ),
		  REGION_FIELDS(VARLINK_OUTPUT, VARLINK_OUTPUT_BY_TYPE),
		  VARLINK_OUTPUT_BY_TYPE(source, rpc_type_Source, 0),
		  VARLINK_OUTPUT_BY_TYPE(shares, rpc_type_RegionShare, VARLINK_ARRAY),
		  VARLINK_OUTPUT_BY_TYPE(lease_list, rpc_type_Lease, VARLINK_ARRAY),
		  VARLINK_FIELD_COMMENT("Bytes per second at which the CPU reads and writes the memory\n"
					"in place: memcpy on its NUMA node, measured at start. Absent\n"
					"for GPU memory, and until measured."),
		  VARLINK_OUTPUT(direct_access_host_bandwidth, VARLINK_U64, VARLINK_NULLABLE),
		  VARLINK_FIELD_COMMENT("Bytes per second at which a GPU copies it: its GPU's device to\n"
					"device copies for GPU memory; host to device for host memory\n"
					"page-locked for a GPU (after a Copy with a GPU region). Measured\n"
					"at the GPU's first import; absent until then, or otherwise."),
		  VARLINK_OUTPUT(direct_access_device_bandwidth, VARLINK_U64, VARLINK_NULLABLE));
/* clang-format on */

/* Measured figures only (0: none): never a guess. */
static void add_bandwidth(struct json_out *o, const struct rpc_ctx *ctx, const struct region *r)
{
	struct cu_bandwidth gbw;
	uint64_t host = 0, device = 0;
	int locked;

	if (r->gpu < 0 && r->map_base)
		host = membw_at(&ctx->regions->membw, r->map_base);
	if (r->gpu >= 0 && gpu_bandwidth(r->gpu, &gbw))
		device = gbw.dtod;
	locked = r->gpu < 0 ? gpu_region_host_locked_on(r) : -1;
	if (locked >= 0 && gpu_bandwidth(locked, &gbw))
		device = gbw.htod;
	if (host)
		json_out_u64(o, "direct_access_host_bandwidth", host);
	if (device)
		json_out_u64(o, "direct_access_device_bandwidth", device);
}

static int method_get_region(struct rpc_call *call, void *params)
{
	const struct region *r = ((struct region_params *)params)->region.region;
	char buf[2048];
	struct json_out o;

	rpc_reply_start(&o, buf, sizeof(buf));
	region_write(&o, r, true);
	add_bandwidth(&o, call->ctx, r);
	return rpc_reply_out(call, &o);
}

const struct rpc_method rpc_region_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, Register, method_register, .flags = RPC_ACCEPTS_FDS,
		   RPC_PARAMS(struct register_params), .params_init = &register_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, Unregister, method_unregister,
		   RPC_PARAMS(struct region_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, Share, method_share, RPC_PARAMS(struct share_params),
		   .check = share_check),
	RPC_METHOD(RDMAMEMD_INTERFACE, Unshare, method_unshare, RPC_PARAMS(struct share_params),
		   .check = share_check),
	RPC_METHOD(RDMAMEMD_INTERFACE, ListRegions, method_list_regions, RPC_PAGE_PARAMS),
	RPC_METHOD(RDMAMEMD_INTERFACE, GetRegion, method_get_region,
		   RPC_PARAMS(struct region_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, Reclaim, method_reclaim, RPC_PARAMS(struct reclaim_params)),
	{},
};
