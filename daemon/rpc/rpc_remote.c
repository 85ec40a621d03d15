/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.rdmamemd methods about other hosts' regions: ExportRegion (a
 * descriptor of one of the caller's regions, for a peer elsewhere),
 * ImportRemote and ReleaseRemote (remote handles of such descriptors),
 * PrepareTransfer and ReleasePlan (range lists between a local region and
 * a remote, checked once). The model is daemon/remote/.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/token.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/export.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/remote.h"
#include "daemon/remote/transfer.h"
#include "daemon/rpc/rpc.h"
#include "proto/base64.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "proto/ranges.h"
#include "util/strset.h"

struct export_region_params {
	struct rpc_region region;
	const cJSON *devices;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	ExportRegion,
	"A descriptor of a region for peers on other hosts (PROTOCOL.md,\n"
	"\"Descriptors\"): the daemon's rdmacm endpoints, and per device the GID,\n"
	"addr, rkey and port of the region's registration, its length, the access\n"
	"it grants and a new access token of the caller's (token; revoking it, or\n"
	"this connection closing, ends what the descriptor grants, as does\n"
	"Unregister). devices: names of devices the region is registered on (at\n"
	"most 16, each once); left out, every device it is registered on (the\n"
	"first 16). Owner (or root) only. NotRegistered when a device has no\n"
	"registration in force, NoRdmaEndpoint when the daemon listens for none.",
	RPC_INPUT_REGION(struct export_region_params, region, REGION_ADMIN),
	VARLINK_INPUT(struct export_region_params, devices, VARLINK_STRING,
		      VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("\"rdmamem1.\" then base64url: opaque to clients"),
	VARLINK_OUTPUT(descriptor, VARLINK_STRING, 0),
	VARLINK_OUTPUT(token, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("the export's id, which the descriptor carries"),
	VARLINK_OUTPUT(id, VARLINK_U64, 0));
/* clang-format on */

/* devices: distinct device names, at most DESCRIPTOR_DEVICES_MAX. */
static int parse_export_devices(struct rpc_call *call, const cJSON *devices, const char **names,
				size_t *ret_n)
{
	_cleanup_(strset_done) struct strset seen = {};
	const cJSON *item;
	size_t n = 0;

	cJSON_ArrayForEach(item, devices) {
		if (n == DESCRIPTOR_DEVICES_MAX)
			return rpc_invalid_param(call, "devices",
						 "parameter 'devices' names more than %d devices",
						 DESCRIPTOR_DEVICES_MAX);
		if (!cJSON_IsString(item) || !device_name_is_valid(item->valuestring))
			return rpc_invalid_param(call, "devices",
						 "parameter 'devices' lists something that is not "
						 "a device name");
		names[n++] = item->valuestring;
	}
	if (strset_init(&seen, n) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!strset_add(&seen, names[i]))
			return rpc_invalid_param(call, "devices",
						 "parameter 'devices' names '%s' twice", names[i]);
	*ret_n = n;
	return 0;
}

static int method_export_region(struct rpc_call *call, void *params)
{
	const struct export_region_params *p = params;
	const char *names[DESCRIPTOR_DEVICES_MAX];
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *reply = NULL;
	struct errinfo err = {};
	struct descriptor d;
	struct token *t;
	size_t n = 0;
	int r;

	if (p->devices) {
		r = parse_export_devices(call, p->devices, names, &n);
		if (r < 0)
			return r;
		if (n == 0)
			return rpc_invalid_param(
				call, "devices",
				"parameter 'devices' is empty: leave it out to "
				"export on every device the region is registered on");
	}
	r = remote_export(call->ctx->remote, call->session, p->region.region, (char *const *)names,
			  n, &d, &text, &t, &err);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	reply = cJSON_CreateObject();
	if (!reply || json_add_string(reply, "descriptor", text) < 0 ||
	    json_add_string(reply, "token", t->hex) < 0 || json_add_u64(reply, "id", d.id) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

/* clang-format off */
static const struct varlink_symbol rpc_type_RemoteDevice = VARLINK_DEFINE_TYPE(
	RemoteDevice, "A device of the exporting host, as the descriptor names it.",
	VARLINK_FIELD(name, VARLINK_STRING, 0),
	VARLINK_FIELD(gid, VARLINK_STRING, 0),
	VARLINK_FIELD(port, VARLINK_INT, 0),
	VARLINK_FIELD(addr, VARLINK_U64, 0),
	VARLINK_FIELD(rkey, VARLINK_U64, 0));
/* clang-format on */

struct import_remote_params {
	struct rpc_string descriptor;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	ImportRemote,
	"A remote handle of a descriptor another daemon's ExportRegion made:\n"
	"parsed and checked once (InvalidParameter saying what is wrong with it),\n"
	"no connection made yet. It lives until ReleaseRemote or until this\n"
	"connection closes; max-remotes-per-uid bounds them (QuotaExceeded\n"
	"\"remotes\"). The reply shows what the descriptor says, but its token.",
	RPC_INPUT_MEASURED(struct import_remote_params, descriptor, 0),
	VARLINK_OUTPUT(remote, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("the export's id on the exporting host"),
	VARLINK_OUTPUT(export, VARLINK_U64, 0),
	VARLINK_OUTPUT(length, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("\"read\", \"write\""),
	VARLINK_OUTPUT(access, VARLINK_STRING, VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("the exporting daemon's rdmacm endpoints, ADDR:PORT or [ADDR]:PORT"),
	VARLINK_OUTPUT(endpoints, VARLINK_STRING, VARLINK_ARRAY),
	VARLINK_OUTPUT_BY_TYPE(devices, rpc_type_RemoteDevice, VARLINK_ARRAY));
/* clang-format on */

static int add_access(cJSON *reply, uint8_t access)
{
	cJSON *a = cJSON_AddArrayToObject(reply, "access");

	if (!a)
		return -ENOMEM;
	if ((access & DESCRIPTOR_ACCESS_READ) &&
	    !cJSON_AddItemToArray(a, cJSON_CreateString("read")))
		return -ENOMEM;
	if ((access & DESCRIPTOR_ACCESS_WRITE) &&
	    !cJSON_AddItemToArray(a, cJSON_CreateString("write")))
		return -ENOMEM;
	return 0;
}

static cJSON *remote_json(const struct remote *r)
{
	const struct descriptor *d = &r->desc;
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *eps, *devs;

	if (!o || json_add_u64(o, "remote", r->id) < 0 || json_add_u64(o, "export", d->id) < 0 ||
	    json_add_u64(o, "length", d->length) < 0 || add_access(o, d->access) < 0)
		return NULL;
	eps = cJSON_AddArrayToObject(o, "endpoints");
	devs = cJSON_AddArrayToObject(o, "devices");
	if (!eps || !devs)
		return NULL;
	for (size_t i = 0; i < d->n_endpoints; i++) {
		char text[64];

		descriptor_endpoint_text(&d->endpoints[i], text, sizeof(text));
		if (!cJSON_AddItemToArray(eps, cJSON_CreateString(text)))
			return NULL;
	}
	for (size_t i = 0; i < d->n_devices; i++) {
		const struct descriptor_device *dev = &d->devices[i];
		cJSON *x = cJSON_CreateObject();
		char gid[INET6_ADDRSTRLEN];

		if (!x || !cJSON_AddItemToArray(devs, x))
			return (cJSON_Delete(x), NULL);
		inet_ntop(AF_INET6, dev->gid, gid, sizeof(gid));
		if (json_add_string(x, "name", dev->name) < 0 ||
		    json_add_string(x, "gid", gid) < 0 || json_add_int(x, "port", dev->port) < 0 ||
		    json_add_u64(x, "addr", dev->addr) < 0 ||
		    json_add_u64(x, "rkey", dev->rkey) < 0)
			return NULL;
	}
	return TAKE_PTR(o);
}

static int method_import_remote(struct rpc_call *call, void *params)
{
	const struct import_remote_params *p = params;
	struct errinfo err = {};
	struct descriptor d;
	const char *why = NULL;
	struct remote *r;
	cJSON *reply;
	int res;

	if (descriptor_parse(p->descriptor.s, p->descriptor.len, &d, &why) < 0)
		return rpc_invalid_param(call, "descriptor", "parameter 'descriptor' %s", why);
	res = remote_import(call->ctx->remote, call->session, &d, &r, &err);
	if (res < 0)
		return err.name ? rpc_error_info(call, &err) : res;
	reply = remote_json(r);
	if (!reply) {
		remote_release(r);
		return -ENOMEM;
	}
	return rpc_reply(call, reply);
}

/* The caller's remote of that id; answers NoSuchRemote. */
static int lookup_remote(struct rpc_call *call, uint64_t id, struct remote **ret)
{
	*ret = remote_lookup(call->ctx->remote, id, call->session);
	if (!*ret)
		return rpc_errorf(call, RDMAMEM_ERROR_NO_SUCH_REMOTE,
				  "this connection holds no remote %" PRIu64, id);
	return 0;
}

struct release_remote_params {
	uint64_t remote;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	ReleaseRemote,
	"Forgets a remote handle of this connection. Plans made on it keep it for\n"
	"themselves until they are released; its id is gone at once.",
	VARLINK_INPUT(struct release_remote_params, remote, VARLINK_U64, 0));
/* clang-format on */

static int method_release_remote(struct rpc_call *call, void *params)
{
	const struct release_remote_params *p = params;
	struct remote *r;
	int res;

	res = lookup_remote(call, p->remote, &r);
	if (res < 0)
		return res;
	remote_release(r);
	return rpc_reply(call, NULL);
}

struct prepare_transfer_params {
	struct rpc_region region;
	uint64_t remote;
	const cJSON *ranges;
	struct rpc_string packed;
	int64_t packed_fd;
};

static const struct prepare_transfer_params prepare_transfer_init = { .packed_fd = -1 };

/* clang-format off */
static const struct varlink_symbol rpc_type_Range = VARLINK_DEFINE_TYPE(
	Range, "Bytes [local_offset, +length) of the region and [remote_offset, +length) of the remote.",
	VARLINK_INPUT(struct ranges_item, local_offset, VARLINK_U64, 0),
	VARLINK_INPUT(struct ranges_item, remote_offset, VARLINK_U64, 0),
	VARLINK_INPUT(struct ranges_item, length, VARLINK_U64, 0));

RPC_DEFINE_METHOD(
	PrepareTransfer,
	"A plan: ranges between a region the caller may read and one of its\n"
	"remotes, either listed (ranges: 1 to 16000) or packed (packed, or\n"
	"packed_fd: 1 to 131072; PROTOCOL.md, \"Packed ranges\"), each checked\n"
	"against both lengths now (OutOfRange names the first that does not\n"
	"fit, by index; a length of 0 is out of range too), so that a transfer\n"
	"posts them by index without sending them again. It lives until\n"
	"ReleasePlan or until this connection closes; max-plans-per-uid bounds\n"
	"them (QuotaExceeded \"plans\"). The region is looked up again, with the\n"
	"caller's rights then, whenever the plan is used.",
	RPC_INPUT_REGION(struct prepare_transfer_params, region, REGION_READ),
	VARLINK_INPUT(struct prepare_transfer_params, remote, VARLINK_U64, 0),
	VARLINK_INPUT_BY_TYPE(struct prepare_transfer_params, ranges, ranges, rpc_type_Range,
			      VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("base64 of little-endian u64 (local_offset, remote_offset, length)"),
	RPC_INPUT_MEASURED(struct prepare_transfer_params, packed, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT("the same records in a sealed memfd sent with the call: its index"),
	VARLINK_INPUT(struct prepare_transfer_params, packed_fd, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_OUTPUT(plan, VARLINK_U64, 0));
/* clang-format on */

/*
 * Counts a list parameter's items, as far as max only: the list may be
 * millions long. Over max: InvalidParameter "has more than max unit", with
 * the setting that sets max when there is one. 0 items is the caller's to
 * answer.
 */
static int count_items(struct rpc_call *call, const cJSON *list, const char *param, size_t max,
		       const char *unit, const char *setting, size_t *ret_n)
{
	const cJSON *item;
	size_t n = 0;

	cJSON_ArrayForEach(item, list)
		if (++n > max)
			return rpc_invalid_param(call, param,
						 "parameter '%s' has more than %zu %s%s%s%s", param,
						 max, unit, setting ? " (" : "", setting ?: "",
						 setting ? ")" : "");
	*ret_n = n;
	return 0;
}

/* ranges (listed) into a new array: each an object of rpc_type_Range's fields. */
static int parse_ranges(struct rpc_call *call, const cJSON *ranges, struct ranges_item **ret,
			size_t *ret_n)
{
	_cleanup_free_ struct ranges_item *out = NULL;
	const cJSON *item;
	size_t n = 0, k = 0;

	int r = count_items(call, ranges, "ranges", PLAN_LISTED_MAX, "ranges", NULL, &n);

	if (r < 0)
		return r;
	if (n == 0)
		return rpc_invalid_param(call, "ranges", "parameter 'ranges' is empty");
	out = calloc(n, sizeof(*out));
	if (!out)
		return -ENOMEM;
	cJSON_ArrayForEach(item, ranges) {
		struct json_dispatch_error err;

		if (!cJSON_IsObject(item) ||
		    json_dispatch(item, rpc_type_Range.fields, &out[k], &err) < 0)
			return rpc_invalid_param(
				call, "ranges",
				"parameter 'ranges' item %zu must be {local_offset, "
				"remote_offset, length}, each a decimal string",
				k);
		k++;
	}
	*ret = TAKE_PTR(out);
	*ret_n = n;
	return 0;
}

/*
 * Packed ranges (proto/ranges.h) into b, 1 to max: the base64 text
 * (text, len), or else the memfd of the call's fd number fd, mapped
 * read-only for the call (the handler releases b when it returns: what
 * outlives the call was copied). InvalidParameter naming param, the
 * parameter, and saying what is wrong with field, its form. setting: what
 * sets max, if anything does.
 */
static int parse_packed(struct rpc_call *call, const char *param, const char *field,
			const char *text, size_t len, int64_t fd_index, size_t max,
			const char *setting, struct ranges_buf *b)
{
	const char *why = NULL;
	int r;

	if (text) {
		r = ranges_decode_buf(text, len, max, b, &why);
	} else {
		_cleanup_close_ int fd = -EBADF;

		if (fd_index > UINT32_MAX)
			fd_index = UINT32_MAX;
		r = rpc_take_fd(call, param, (uint32_t)fd_index, &fd);
		if (r < 0)
			return r;
		r = ranges_map_fd(fd, max, b, &why);
	}
	if (r == -E2BIG)
		return rpc_invalid_param(call, param,
					 "parameter '%s' holds more than %zu ranges%s%s%s", field,
					 max, setting ? " (" : "", setting ?: "",
					 setting ? ")" : "");
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return rpc_invalid_param(call, param, "parameter '%s' %s", field, why);
	return 0;
}

static int method_prepare_transfer(struct rpc_call *call, void *params)
{
	const struct prepare_transfer_params *p = params;
	_cleanup_free_ struct ranges_item *listed = NULL;
	_cleanup_(ranges_release) struct ranges_buf packed = {};
	const struct ranges_item *ranges;
	_cleanup_json_ cJSON *reply = NULL;
	struct errinfo err = {};
	struct remote *r;
	struct plan *plan;
	size_t n = 0;
	int res;

	if (!!p->ranges + !!p->packed.s + (p->packed_fd >= 0) != 1)
		return rpc_invalid_param(call,
					 p->packed_fd >= 0 ? "packed_fd" :
					 p->ranges         ? "packed" :
							     "ranges",
					 "give one of 'ranges', 'packed' or 'packed_fd'");
	if (p->ranges) {
		res = parse_ranges(call, p->ranges, &listed, &n);
		ranges = listed;
	} else {
		const char *param = p->packed.s ? "packed" : "packed_fd";

		res = parse_packed(call, param, param, p->packed.s, p->packed.len, p->packed_fd,
				   PLAN_RANGES_MAX, NULL, &packed);
		ranges = packed.r;
		n = packed.n;
	}
	if (res < 0)
		return res;
	res = lookup_remote(call, p->remote, &r);
	if (res < 0)
		return res;
	res = plan_create(call->ctx->remote, call->session, p->region.region, r, ranges, n, &plan,
			  &err);
	if (res < 0)
		return err.name ? rpc_error_info(call, &err) : res;
	reply = cJSON_CreateObject();
	if (!reply || json_add_u64(reply, "plan", plan->id) < 0) {
		plan_release(plan);
		return -ENOMEM;
	}
	return rpc_reply(call, TAKE_PTR(reply));
}

struct release_plan_params {
	uint64_t plan;
};

/* clang-format off */
RPC_DEFINE_METHOD(ReleasePlan, "Forgets a plan of this connection.",
		  VARLINK_INPUT(struct release_plan_params, plan, VARLINK_U64, 0));
/* clang-format on */

static int method_release_plan(struct rpc_call *call, void *params)
{
	const struct release_plan_params *p = params;
	struct plan *plan = plan_lookup(call->ctx->remote, p->plan, call->session);

	if (!plan)
		return rpc_errorf(call, RDMAMEM_ERROR_NO_SUCH_PLAN,
				  "this connection holds no plan %" PRIu64, p->plan);
	plan_release(plan);
	return rpc_reply(call, NULL);
}

struct transfer_batch_local {
	uint64_t region, lease;
};

struct transfer_batch_remote {
	uint64_t id;
};

struct transfer_batch_params {
	const char *op;
	struct transfer_batch_local local;
	struct transfer_batch_remote remote;
	const char *packed;
	int64_t packed_fd;
};

struct transfer_params {
	const cJSON *ops;
	struct transfer_batch_params batch;
	bool has_batch;
	uint64_t plan;
	bool has_plan;
	const char *op;
	const cJSON *indices;
	struct rpc_string packed_indices;
	struct rpc_string notify;
};

static const struct transfer_params transfer_init = { .batch = { .packed_fd = -1 } };

/* clang-format off */
static const struct varlink_symbol rpc_type_TransferOp = VARLINK_DEFINE_TYPE(
	TransferOp, "One op: length bytes between the local region and the remote.",
	VARLINK_FIELD_COMMENT("\"read\" (remote to local) or \"write\" (local to remote)"),
	VARLINK_FIELD(op, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("lease: one of this connection's on the region, to run under"),
	VARLINK_FIELD_INLINE(local, 0,
		VARLINK_FIELD(region, VARLINK_U64, 0),
		VARLINK_FIELD(offset, VARLINK_U64, 0),
		VARLINK_FIELD(lease, VARLINK_U64, VARLINK_NULLABLE)),
	VARLINK_FIELD_INLINE(remote, 0,
		VARLINK_FIELD(id, VARLINK_U64, 0),
		VARLINK_FIELD(offset, VARLINK_U64, 0)),
	VARLINK_FIELD(length, VARLINK_U64, 0));

static const struct varlink_symbol rpc_type_TransferBatch = VARLINK_DEFINE_TYPE(
	TransferBatch,
	"Ranges between one local region and one remote, op for all, packed\n"
	"(PROTOCOL.md, \"Packed ranges\"): the compact form of a large transfer.",
	VARLINK_FIELD_COMMENT("\"read\" (remote to local) or \"write\" (local to remote)"),
	VARLINK_INPUT(struct transfer_batch_params, op, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("lease: one of this connection's on the region, to run under"),
	VARLINK_INPUT_INLINE(struct transfer_batch_params, local, 0,
		VARLINK_INPUT(struct transfer_batch_local, region, VARLINK_U64, 0),
		VARLINK_INPUT(struct transfer_batch_local, lease, VARLINK_U64, VARLINK_NULLABLE)),
	VARLINK_INPUT_INLINE(struct transfer_batch_params, remote, 0,
		VARLINK_INPUT(struct transfer_batch_remote, id, VARLINK_U64, 0)),
	VARLINK_FIELD_COMMENT("base64 of little-endian u64 (local_offset, remote_offset, length)"),
	VARLINK_INPUT(struct transfer_batch_params, packed, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT("or the same records in a sealed memfd sent with the call: its index"),
	VARLINK_INPUT(struct transfer_batch_params, packed_fd, VARLINK_INT, VARLINK_NULLABLE));

RPC_DEFINE_METHOD(
	Transfer,
	"One-sided RDMA READs and WRITEs between this connection's view of local\n"
	"regions and remotes (ImportRemote), posted by the daemon on its own queue\n"
	"pairs to the exporting daemons (PROTOCOL.md, \"Transfers\"). One of ops\n"
	"(at most max-transfer-ops, and what one message holds: about 7000),\n"
	"batch (packed ranges between one region and one remote, as text or in\n"
	"a sealed memfd: at most max-transfer-ops), or plan with op and indices\n"
	"(left out: every range of the plan). The local regions are locked for the duration (shared\n"
	"when only read, by writes; exclusive when a read writes them) unless an\n"
	"op (or the batch) names a lease. The reply comes when every op is done;\n"
	"with \"more\", progress replies come first (at most every 100 ms or 4096\n"
	"ops). A failure names the first failed op (index; a batch's range or a\n"
	"plan post's entry) and how many failed: RemoteAccessError,\n"
	"PeerUnreachable, TransferCancelled, TransferFailed. notify: base64 bytes\n"
	"(at most 4096) the remote owner receives after the data.",
	VARLINK_INPUT_BY_TYPE(struct transfer_params, ops, ops, rpc_type_TransferOp,
			      VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_INPUT_BY_TYPE_HAS(struct transfer_params, batch, batch, rpc_type_TransferBatch,
				  VARLINK_NULLABLE, has_batch),
	VARLINK_INPUT_HAS(struct transfer_params, plan, plan, VARLINK_U64, VARLINK_NULLABLE,
			  has_plan),
	VARLINK_FIELD_COMMENT("with plan: \"read\" or \"write\""),
	VARLINK_INPUT(struct transfer_params, op, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_INPUT(struct transfer_params, indices, VARLINK_U64,
		      VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("or packed: base64 of little-endian u32 (PROTOCOL.md, \"Packed indices\")"),
	RPC_INPUT_MEASURED(struct transfer_params, packed_indices, VARLINK_NULLABLE),
	RPC_INPUT_MEASURED(struct transfer_params, notify, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT("ops and bytes in the call; ops and bytes done so far (all at the end)"),
	VARLINK_OUTPUT(ops, VARLINK_U64, 0),
	VARLINK_OUTPUT(bytes, VARLINK_U64, 0),
	VARLINK_OUTPUT(ops_done, VARLINK_U64, 0),
	VARLINK_OUTPUT(bytes_done, VARLINK_U64, 0));
/* clang-format on */

static int parse_opcode(const char *s, uint8_t *ret)
{
	if (s && strcmp(s, "read") == 0)
		*ret = WR_READ;
	else if (s && strcmp(s, "write") == 0)
		*ret = WR_WRITE;
	else
		return -EINVAL;
	return 0;
}

static int parse_transfer_ops(struct rpc_call *call, const cJSON *list, struct transfer_op **ret,
			      size_t *ret_n)
{
	unsigned max = call->ctx->core->cfg.max_transfer_ops;
	_cleanup_free_ struct transfer_op *ops = NULL;
	const cJSON *item;
	size_t n = 0, k = 0;

	int r = count_items(call, list, "ops", max, "ops", "max-transfer-ops", &n);

	if (r < 0)
		return r;
	if (n == 0)
		return rpc_invalid_param(call, "ops", "parameter 'ops' is empty");
	ops = calloc(n, sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	cJSON_ArrayForEach(item, list) {
		const cJSON *local = cJSON_GetObjectItemCaseSensitive(item, "local");
		const cJSON *remote = cJSON_GetObjectItemCaseSensitive(item, "remote");
		const cJSON *lease = cJSON_GetObjectItemCaseSensitive(local, "lease");
		struct transfer_op *o = &ops[k];

		if (parse_opcode(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(item, "op")),
				 &o->opcode) < 0 ||
		    !cJSON_IsObject(local) || !cJSON_IsObject(remote) ||
		    json_get_u64(local, "region", &o->region) < 0 ||
		    json_get_u64(local, "offset", &o->offset) < 0 ||
		    (lease && !cJSON_IsNull(lease) && json_to_u64(lease, &o->lease) < 0) ||
		    json_get_u64(remote, "id", &o->remote) < 0 ||
		    json_get_u64(remote, "offset", &o->remote_offset) < 0 ||
		    json_get_u64(item, "length", &o->length) < 0)
			return rpc_invalid_param(
				call, "ops",
				"parameter 'ops' item %zu must be {op: \"read\" or "
				"\"write\", local: {region, offset, lease?}, remote: "
				"{id, offset}, length}, numbers as decimal strings",
				k);
		k++;
	}
	*ret = TAKE_PTR(ops);
	*ret_n = n;
	return 0;
}

static int parse_indices(struct rpc_call *call, const cJSON *list, uint32_t **ret, size_t *ret_n)
{
	unsigned max = call->ctx->core->cfg.max_transfer_ops;
	_cleanup_free_ uint32_t *idx = NULL;
	const cJSON *item;
	size_t n = 0, k = 0;

	int r = count_items(call, list, "indices", max, "entries", "max-transfer-ops", &n);

	if (r < 0)
		return r;
	if (n == 0)
		return rpc_invalid_param(call, "indices",
					 "parameter 'indices' is empty: leave it out to post "
					 "every range");
	idx = calloc(n, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	cJSON_ArrayForEach(item, list) {
		uint64_t v;

		if (!cJSON_IsString(item) || json_to_u64(item, &v) < 0)
			return rpc_invalid_param(call, "indices",
						 "parameter 'indices' must hold decimal strings");
		/* A plan holds fewer than 2^32 ranges: past that, the index
		 * is out of any plan. */
		if (v > UINT32_MAX)
			return rpc_errorf(call, RDMAMEM_ERROR_OUT_OF_RANGE,
					  "index %zu: %" PRIu64 " is past any plan (at most %u "
					  "ranges)",
					  k, v, PLAN_RANGES_MAX);
		idx[k++] = (uint32_t)v;
	}
	*ret = TAKE_PTR(idx);
	*ret_n = n;
	return 0;
}

/* A Transfer in flight: its deferred reply. */
struct transfer_call {
	struct rpc_deferred *d;
	struct transfer *t;
};

static cJSON *transfer_reply(const struct transfer_progress *p)
{
	cJSON *o = cJSON_CreateObject();

	if (o && (json_add_u64(o, "ops", p->n_ops) < 0 || json_add_u64(o, "bytes", p->bytes) < 0 ||
		  json_add_u64(o, "ops_done", p->ops_done) < 0 ||
		  json_add_u64(o, "bytes_done", p->bytes_done) < 0))
		o = (cJSON_Delete(o), NULL);
	return o;
}

static void on_transfer_progress(void *userdata, struct transfer *t,
				 const struct transfer_progress *p)
{
	struct transfer_call *tc = userdata;

	(void)t;
	/* A progress reply is best effort: a failed one is not the transfer's. */
	if (tc->d->call->vc.more && p->ops_done < p->n_ops)
		(void)rpc_deferred_continue(tc->d, transfer_reply(p));
}

static void on_transfer_done(void *userdata, struct transfer *t, int result, struct errinfo *e)
{
	struct transfer_call *tc = userdata;
	cJSON *reply;

	if (result < 0) {
		rpc_deferred_error(tc->d, e);
	} else {
		reply = transfer_reply(&t->progress);
		if (reply)
			rpc_deferred_reply(tc->d, reply);
		else
			rpc_deferred_fail(tc->d, -ENOMEM);
	}
	transfer_free(t);
	free(tc);
}

/* The client went away: nothing more is posted; what was drains, then done
 * ends the handle (its answer dropped). */
static void on_transfer_cancel(void *userdata)
{
	struct transfer_call *tc = userdata;

	transfer_cancel(tc->t);
}

static const struct transfer_cb transfer_call_cb = {
	.done = on_transfer_done,
	.progress = on_transfer_progress,
};

/* notify (base64, at most TRANSFER_NOTIFY_MAX bytes) into a new buffer. */
static int parse_notify(struct rpc_call *call, const struct rpc_string *text, uint8_t **ret,
			size_t *ret_len)
{
	ssize_t len = base64_decoded_len(text->s, text->len);

	if (len < 0)
		return rpc_invalid_param(call, "notify", "parameter 'notify' is not valid base64");
	if ((size_t)len > TRANSFER_NOTIFY_MAX)
		return rpc_invalid_param(call, "notify",
					 "parameter 'notify' holds more than %u bytes",
					 TRANSFER_NOTIFY_MAX);
	*ret = malloc(len ? (size_t)len : 1);
	if (!*ret)
		return -ENOMEM;
	base64_decode(text->s, text->len, *ret);
	*ret_len = (size_t)len;
	return 0;
}

/*
 * A batch's packed text of more than TRANSFER_INLINE_OPS ranges is decoded
 * on the pool, not here (3 ms of the loop at 100,000 ranges): counted from
 * its length, its first range decoded for the checks made now, the text
 * handed to the transfer (it lives in the call's message until the
 * deferred reply). Returns 1 when b holds it so, 0 when the text is to be
 * decoded now (short, or malformed: the error is said then), -ENOMEM.
 */
static int batch_text_later(const char *text, unsigned max, struct transfer_batch *b,
			    struct ranges_item **ret_first)
{
	const char *why;
	size_t one;
	ssize_t n;

	n = text ? ranges_count_text(text, b->text_len) : -1;
	if (n <= (ssize_t)TRANSFER_INLINE_OPS || n > (ssize_t)max)
		return 0;
	if (ranges_decode(text, ranges_encoded_len(1), 1, ret_first, &one, &why) < 0)
		return 0;
	b->text = text;
	b->ranges = *ret_first;
	b->n = (size_t)n;
	return 1;
}

static int method_transfer(struct rpc_call *call, void *params)
{
	const struct transfer_params *p = params;
	unsigned max = call->ctx->core->cfg.max_transfer_ops;
	_cleanup_free_ struct transfer_op *ops = NULL;
	_cleanup_(ranges_release) struct ranges_buf ranges = {};
	_cleanup_free_ uint32_t *idx = NULL;
	_cleanup_free_ uint8_t *notify = NULL;
	_cleanup_free_ struct transfer_call *tc = NULL;
	struct transfer_batch batch = {};
	_cleanup_free_ struct ranges_item *first = NULL;
	struct errinfo err = {};
	size_t n = 0, notify_len = 0;
	struct plan *plan = NULL;
	uint8_t opcode = 0;
	bool has_batch = p->has_batch;
	int r;

	/* Each list's own form first: what is wrong with it, by its name. */
	if (p->indices && p->packed_indices.s)
		return rpc_invalid_param(call, "packed_indices",
					 "give one of 'indices' and 'packed_indices'");
	if (p->indices) {
		r = parse_indices(call, p->indices, &idx, &n);
		if (r < 0)
			return r;
	} else if (p->packed_indices.s) {
		const char *why = NULL;

		r = ranges_indices_decode(p->packed_indices.s, p->packed_indices.len, max, &idx, &n,
					  &why);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return rpc_invalid_param(call, "packed_indices",
						 "parameter 'packed_indices' %s%s", why,
						 r == -E2BIG ? " (max-transfer-ops)" : "");
	}
	/* None: the first form is named; more: the later of two. */
	if (!!p->ops + has_batch + p->has_plan != 1)
		return rpc_invalid_param(call,
					 p->has_plan && (p->ops || has_batch) ? "plan" :
					 p->ops && has_batch                  ? "batch" :
										"ops",
					 "give one of 'ops', 'batch' or 'plan' (with 'op')");
	if (!p->has_plan && (p->op || idx))
		return rpc_invalid_param(call,
					 p->op      ? "op" :
					 p->indices ? "indices" :
						      "packed_indices",
					 "'op' and 'indices' go with 'plan'");
	if (p->ops) {
		r = parse_transfer_ops(call, p->ops, &ops, &n);
		if (r < 0)
			return r;
	} else if (has_batch) {
		if (parse_opcode(p->batch.op, &batch.opcode) < 0)
			return rpc_invalid_param(call, "batch",
						 "parameter 'batch' field 'op' must be \"read\" or "
						 "\"write\"");
		if (!p->batch.packed == (p->batch.packed_fd < 0))
			return rpc_invalid_param(call, "batch",
						 "parameter 'batch' needs one of 'packed' and "
						 "'packed_fd'");
		batch.text_len = p->batch.packed ? strlen(p->batch.packed) : 0;
		r = call->ctx->core->offload ?
			    batch_text_later(p->batch.packed, max, &batch, &first) :
			    0;
		if (r == 0)
			r = parse_packed(call, "batch",
					 p->batch.packed ? "batch.packed" : "batch.packed_fd",
					 p->batch.packed, batch.text_len, p->batch.packed_fd, max,
					 "max-transfer-ops", &ranges);
		if (r < 0)
			return r;
		batch.region = p->batch.local.region;
		batch.lease = p->batch.local.lease;
		batch.remote = p->batch.remote.id;
		if (!batch.text) {
			batch.ranges = ranges.r;
			batch.n = ranges.n;
			batch.take = &ranges;
		}
	} else {
		if (parse_opcode(p->op, &opcode) < 0)
			return rpc_invalid_param(call, "op",
						 "parameter 'op' must be \"read\" or \"write\" "
						 "with 'plan'");
		plan = plan_lookup(call->ctx->remote, p->plan, call->session);
		if (!plan)
			return rpc_errorf(call, RDMAMEM_ERROR_NO_SUCH_PLAN,
					  "this connection holds no plan %" PRIu64, p->plan);
		if (!idx && plan->n_ranges > max)
			return rpc_invalid_param(call, "plan",
						 "plan %" PRIu64 " has more ranges than "
						 "max-transfer-ops; post it by indices",
						 p->plan);
	}
	if (p->notify.s) {
		r = parse_notify(call, &p->notify, &notify, &notify_len);
		if (r < 0)
			return r;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	if (plan)
		r = transfer_start_plan(call->ctx->remote, call->session, plan, opcode, idx, n,
					notify, notify_len, &transfer_call_cb, tc, &tc->t, &err);
	else if (has_batch)
		r = transfer_start_batch(call->ctx->remote, call->session, &batch, notify,
					 notify_len, &transfer_call_cb, tc, &tc->t, &err);
	else
		r = transfer_start(call->ctx->remote, call->session, ops, n, notify, notify_len,
				   &transfer_call_cb, tc, &tc->t, &err);
	/* The ranges are the transfer's own now (copied as they were checked,
	 * or the buffer taken for the pool to check): what is left goes when
	 * this returns. */
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	tc->d = rpc_defer(call, on_transfer_cancel, tc);
	TAKE_PTR(tc);
	return 0;
}

const struct rpc_method rpc_remote_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, ExportRegion, method_export_region,
		   RPC_PARAMS(struct export_region_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, ImportRemote, method_import_remote,
		   RPC_PARAMS(struct import_remote_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, ReleaseRemote, method_release_remote,
		   RPC_PARAMS(struct release_remote_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, PrepareTransfer, method_prepare_transfer,
		   .flags = RPC_ACCEPTS_FDS, RPC_PARAMS(struct prepare_transfer_params),
		   .params_init = &prepare_transfer_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, ReleasePlan, method_release_plan,
		   RPC_PARAMS(struct release_plan_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, Transfer, method_transfer, .flags = RPC_ACCEPTS_FDS,
		   RPC_PARAMS(struct transfer_params), .params_init = &transfer_init),
	{},
};
