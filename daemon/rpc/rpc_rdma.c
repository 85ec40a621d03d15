/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.rdmamemd methods about RDMA: registrations on devices, the devices
 * themselves, access tokens and the queue pairs remote peers come in on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/core/log.h"
#include "daemon/gpu/gpu_keep.h"
#include "daemon/mem/keep.h"
#include "daemon/rdma/mreg.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "proto/json_out.h"
#include "util/strset.h"
#include "daemon/mem/region.h"
#include "daemon/rpc/rpc.h"
#include "daemon/rpc/rpc_rdma.h"
#include "daemon/rdma/token.h"

/* clang-format off */
const struct varlink_symbol rpc_type_Registration = VARLINK_DEFINE_TYPE(
	Registration,
	"A region's registration on one RDMA device: in force (lkey, rkey, addr,\n"
	"length, access, via), still being made, or a failure recorded with its cause\n"
	"(errno text, range, memlock limit), which is not retried until root's\n"
	"RetryRegistration clears it (\"recorded\": true when this answer did not\n"
	"attempt it).",
	VARLINK_FIELD(device, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("\"registered\", \"pending\" or \"failed\""),
	VARLINK_FIELD(state, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("\"ibv\" or \"mlx5\""),
	VARLINK_FIELD(backend, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_FIELD(lkey, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(rkey, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT("the address remote peers use (the MR's iova: the daemon's mapping)"),
	VARLINK_FIELD(addr, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(length, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(access, VARLINK_STRING, VARLINK_NULLABLE | VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT(
		"how the device reaches the memory: \"host-memory\" (ibv_reg_mr on the\n"
		"daemon's mapping), \"dma-buf\" (ibv_reg_dmabuf_mr, GPU memory) or\n"
		"\"peer-memory\" (ibv_reg_mr on a GPU address, through nvidia_peermem)"),
	VARLINK_FIELD(via, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_FIELD(error, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_FIELD(errno, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD(recorded, VARLINK_BOOL, VARLINK_NULLABLE));
/* clang-format on */

/* A call waiting for registrations on several devices to settle. */
struct reg_wait {
	struct rpc_deferred *call;
	struct region *region; /* a reference */
	bool whole_region;     /* Register answers with the region */
	size_t n, pending;
	struct reg_item {
		struct reg_wait *rw;
		struct mreg_waiter waiter;
		char device[VB_NAME_MAX];
		bool recorded; /* had failed before this call */
		bool missing;  /* no such device is open: answered, not recorded */
	} items[];
};

/*
 * A list names at most this many devices, or as many as the daemon has open
 * when that is more ("all" names every one). Longer is no request a client
 * means to make: refused before any work that grows with it.
 */
#define DEVICES_LIST_MAX 64

/*
 * devices: "all", or an array of names ([] registers nowhere yet). Fills
 * *ret with the names, each once, in the order first asked.
 */
static int parse_devices(struct rdma_ctx *rdma, const cJSON *devices, char ***ret, size_t *ret_n,
			 struct errinfo *e)
{
	size_t max = MAX((size_t)DEVICES_LIST_MAX, (size_t)rdma->n_devices), n = 0, k = 0;
	_cleanup_(strset_done) struct strset seen = {};
	_cleanup_free_ char **names = NULL;
	const cJSON *item;

	if (cJSON_IsString(devices) && strcmp(devices->valuestring, "all") == 0) {
		struct device *dev;

		names = calloc(rdma->n_devices + 1, sizeof(*names));
		if (!names)
			return -ENOMEM;
		list_for_each_entry(dev, &rdma->devices, link)
			names[n++] = dev->info.name;
		*ret = TAKE_PTR(names);
		*ret_n = n;
		return 0;
	}
	if (!cJSON_IsArray(devices))
		return errinfo_invalid_param(e, "devices", -EINVAL,
					     "parameter 'devices' must be \"all\" or a list of "
					     "device names such as [\"mlx5_0\"]");
	/* Counted as far as the bound only: the list may be millions long. */
	cJSON_ArrayForEach(item, devices)
		if (++k > max)
			return errinfo_invalid_param(e, "devices", -EINVAL,
						     "parameter 'devices' lists more than %zu "
						     "names; \"all\" names every device",
						     max);
	names = calloc(k + 1, sizeof(*names));
	if (!names || strset_init(&seen, k) < 0)
		return -ENOMEM;
	cJSON_ArrayForEach(item, devices) {
		if (!cJSON_IsString(item) || !device_name_is_valid(item->valuestring))
			return errinfo_invalid_param(e, "devices", -EINVAL,
						     "parameter 'devices' lists something that is "
						     "not a device name");
		if (strset_add(&seen, item->valuestring))
			names[n++] = item->valuestring;
	}
	*ret = TAKE_PTR(names);
	*ret_n = n;
	return 0;
}

static void reg_wait_free(struct reg_wait *rw)
{
	for (size_t i = 0; i < rw->n; i++)
		mreg_waiter_cancel(&rw->items[i].waiter);
	region_unref(rw->region);
	free(rw);
}

static void registration_write(struct json_out *o, struct reg_wait *rw, const struct reg_item *it)
{
	const struct mreg *m;

	if (it->missing) {
		mreg_missing_write(o, rw->call->call->ctx->rdma, it->device);
		return;
	}
	m = mreg_find(rw->region, it->device);
	if (m) {
		mreg_write(o, m, it->recorded);
		return;
	}
	/* Forgotten by a RetryRegistration meanwhile, which forgets only
	 * failures: still a Registration, with every field it declares. */
	json_out_object(o, NULL);
	json_out_string(o, "device", it->device);
	json_out_string(o, "state", "failed");
	json_out_string(o, "error",
			"the failure was cleared by RetryRegistration while this call waited; ask "
			"again to try again");
	json_out_end(o);
}

static void reg_wait_reply(struct reg_wait *rw)
{
	struct rpc_deferred *d = rw->call;
	struct errinfo e = {};
	struct json_out o;
	char buf[1024];

	if (rw->region->dead) {
		/* Unregistered (or its owner gone) meanwhile: its registrations
		 * went with it. */
		errinfo_set(&e, RDMAMEM_ERROR_NO_SUCH_REGION, -ENOENT,
			    "region %" PRIu64 " was unregistered while it was being registered",
			    rw->region->id);
		rpc_deferred_error(d, &e);
		reg_wait_free(rw);
		return;
	}
	rpc_reply_start(&o, buf, sizeof(buf));
	if (rw->whole_region) {
		const char *token = keep_token(rw->region);

		/* Register's answer is the region: names that are no device
		 * show as failures only here, since the region records none
		 * for them. */
		region_write_head(&o, rw->region);
		for (size_t i = 0; i < rw->n; i++)
			if (rw->items[i].missing)
				registration_write(&o, rw, &rw->items[i]);
		region_write_tail(&o, rw->region, false);
		if (token)
			json_out_string(&o, "reclaim_token", token);
	} else {
		json_out_u64(&o, "region", rw->region->id);
		json_out_array(&o, "registrations");
		for (size_t i = 0; i < rw->n; i++)
			registration_write(&o, rw, &rw->items[i]);
		json_out_end(&o);
	}
	rpc_deferred_reply_out(d, &o);
	reg_wait_free(rw);
}

static void on_settled(struct mreg_waiter *w)
{
	struct reg_item *it = container_of(w, struct reg_item, waiter);
	struct reg_wait *rw = it->rw;

	if (--rw->pending == 0)
		reg_wait_reply(rw);
}

static void reg_wait_cancel(void *userdata)
{
	struct reg_wait *rw = userdata;

	/* The registrations go on and are recorded on the region. */
	rpc_deferred_drop(rw->call);
	reg_wait_free(rw);
}

int rpc_check_devices(struct rpc_call *call, const cJSON *devices)
{
	_cleanup_free_ char **names = NULL;
	struct errinfo err = {};
	size_t n = 0;
	int r;

	if (!devices)
		return 0;
	r = parse_devices(call->ctx->rdma, devices, &names, &n, &err);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	return 0;
}

static void keep_each_device(void *userdata, struct region *r,
			     void (*fn)(void *ctx, const char *device), void *ctx)
{
	(void)userdata;
	mreg_each_device(r, fn, ctx);
}

/* A restored region, on a device it had: nobody waits for the answer. */
static void keep_register_on(void *userdata, struct region *r, const char *device)
{
	struct rpc_ctx *ctx = userdata;
	struct device *dev = device_find(ctx->rdma, device);
	struct errinfo e = {};

	if (!dev) {
		log_full_fields(LOG_NOTICE, 0, LOG_REGION(r),
				"Region %" PRIu64 " was registered on %s before the restart, "
				"which is not open now",
				r->id, device);
		return;
	}
	if (mreg_check_region(r, &e) == 0)
		(void)mreg_ensure(r, dev, NULL);
}

static const struct keep_device_ops keep_devices = {
	.each = keep_each_device,
	.register_on = keep_register_on,
};

void rpc_keep_init(struct rpc_ctx *ctx)
{
	if (!ctx->regions->keep)
		return;
	keep_set_devices(ctx->regions->keep, &keep_devices, ctx);
	if (ctx->gpu)
		gpu_keep_init(ctx->gpu, ctx->regions->keep);
}

int rpc_register_on(struct rpc_deferred *d, struct region *r, const cJSON *devices,
		    bool whole_region)
{
	struct rpc_call *call = d->call;
	_cleanup_free_ char **names = NULL;
	struct errinfo err = {};
	struct reg_wait *rw;
	size_t n = 0, n_missing = 0;
	const char *missing = NULL;
	int res;

	if (devices) {
		res = parse_devices(call->ctx->rdma, devices, &names, &n, &err);
		if (res < 0)
			return err.name ? rpc_deferred_error(d, &err) : rpc_deferred_fail(d, res);
	}
	if (n > 0) {
		res = mreg_check_region(r, &err);
		if (res < 0)
			return rpc_deferred_error(d, &err);
		/* The fd store's state names the devices of kept regions. */
		keep_changed(r->registry->keep);
	}
	rw = calloc(1, sizeof(*rw) + n * sizeof(rw->items[0]));
	if (!rw)
		return rpc_deferred_fail(d, -ENOMEM);
	rw->call = d;
	rw->region = region_ref(r);
	rw->whole_region = whole_region;
	/* Count first: a settled() during the loop must not reply early. */
	rw->pending = 1;
	for (size_t i = 0; i < n; i++) {
		struct reg_item *it = &rw->items[rw->n++];
		struct device *dev = device_find(call->ctx->rdma, names[i]);
		struct mreg *m;

		it->rw = rw;
		it->waiter.settled = on_settled;
		list_init(&it->waiter.link);
		snprintf(it->device, sizeof(it->device), "%s", names[i]);
		/* A name is no state of the region's: a client may send any
		 * number of them, so none is kept (and none is logged but
		 * this once per call, at debug: it is the client's mistake). */
		if (!dev) {
			it->missing = true;
			missing = missing ?: names[i];
			n_missing++;
			continue;
		}
		m = mreg_find(r, names[i]);
		it->recorded = m && m->state == MREG_FAILED;
		m = mreg_ensure(r, dev, &it->waiter);
		if (!m) {
			reg_wait_free(rw);
			return rpc_deferred_fail(d, -ENOMEM);
		}
		if (m->state == MREG_PENDING)
			rw->pending++;
	}
	if (n_missing > 0)
		log_full_fields(LOG_DEBUG, 0, LOG_REGION(r),
				"Region %" PRIu64
				": %s names %zu device%s that %s not open, such as "
				"'%s'",
				r->id, call->vc.method, n_missing, n_missing == 1 ? "" : "s",
				n_missing == 1 ? "is" : "are", missing);
	/* Settled at once, or the handle waits with rw from here on. */
	if (--rw->pending == 0)
		reg_wait_reply(rw);
	else
		rpc_deferred_on_cancel(d, reg_wait_cancel, rw);
	return 0;
}

struct register_on_params {
	struct rpc_region region;
	const cJSON *devices;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	RegisterOn,
	"Registers a region on more devices (\"all\", or a list of names); answers\n"
	"once each has settled, in the order asked (NoSuchRegion when the region\n"
	"was unregistered meanwhile). A read-only region on Linux before 6.2:\n"
	"ReadOnlyRegion, nothing tried. Owner (or root) only. A list names at most\n"
	"64 devices (or as many as are open, when more); each once, repeats are\n"
	"dropped. A name that is no open device is answered as a failure (errno\n"
	"19, recorded false) that the region does not keep.",
	RPC_INPUT_REGION(struct register_on_params, region, REGION_ADMIN),
	VARLINK_INPUT(struct register_on_params, devices, VARLINK_OBJECT, 0),
	VARLINK_OUTPUT(region, VARLINK_U64, 0),
	VARLINK_OUTPUT_BY_TYPE(registrations, rpc_type_Registration, VARLINK_ARRAY));
/* clang-format on */

static int method_register_on(struct rpc_call *call, void *params)
{
	const struct register_on_params *p = params;

	rpc_register_on(rpc_defer(call, NULL, NULL), p->region.region, p->devices, false);
	return 0;
}

struct retry_registration_params {
	struct rpc_region region;
	const char *device;
};

/* clang-format off */
RPC_DEFINE_METHOD(RetryRegistration,
		  "Forgets a recorded registration failure so the next request tries again.\n"
		  "Root only.",
		  RPC_INPUT_REGION(struct retry_registration_params, region, REGION_ADMIN),
		  VARLINK_INPUT(struct retry_registration_params, device, VARLINK_STRING, 0));
/* clang-format on */

/* Retrying costs the device and the host a new pinning attempt: the
 * operator decides, not every client. */
static int retry_registration_check(struct rpc_call *call, _unused_ void *params)
{
	if (call->session->cred.uid != 0)
		return rpc_errorf(
			call, RDMAMEM_ERROR_PERMISSION_DENIED,
			"RetryRegistration is for root: a recorded failure stays until an "
			"administrator clears it");
	return 0;
}

static int method_retry_registration(struct rpc_call *call, void *params)
{
	const struct retry_registration_params *p = params;
	int r;

	r = mreg_forget_failure(p->region.region, p->device);
	if (r < 0)
		return rpc_invalid_param(call, "device",
					 "region %" PRIu64 " has no recorded failure on '%.64s'",
					 p->region.id, p->device);
	return rpc_reply(call, NULL);
}

/* clang-format off */
static const struct varlink_symbol rpc_type_Gid = VARLINK_DEFINE_TYPE(
	Gid, NULL,
	VARLINK_FIELD(index, VARLINK_INT, 0),
	VARLINK_FIELD(gid, VARLINK_STRING, 0),
	VARLINK_FIELD(type, VARLINK_STRING, 0));

static const struct varlink_symbol rpc_type_Port = VARLINK_DEFINE_TYPE(
	Port, NULL,
	VARLINK_FIELD(port, VARLINK_INT, 0),
	VARLINK_FIELD(state, VARLINK_STRING, 0),
	VARLINK_FIELD(link_layer, VARLINK_STRING, 0),
	VARLINK_FIELD(mtu, VARLINK_INT, 0),
	VARLINK_FIELD(lid, VARLINK_INT, 0),
	VARLINK_FIELD_BY_TYPE(gids, rpc_type_Gid, VARLINK_ARRAY));

static const struct varlink_symbol rpc_type_DeviceEvent = VARLINK_DEFINE_TYPE(
	DeviceEvent, NULL,
	VARLINK_FIELD(event, VARLINK_STRING, 0),
	VARLINK_FIELD(age_msec, VARLINK_U64, 0));

static const struct varlink_symbol rpc_type_Device = VARLINK_DEFINE_TYPE(
	Device, NULL,
	VARLINK_FIELD(name, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("\"ibv\", or \"mlx5\" when mlx5dv supports the device"),
	VARLINK_FIELD(backend, VARLINK_STRING, 0),
	VARLINK_FIELD(node_guid, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("IBV_EVENT_DEVICE_FATAL seen: new registrations fail"),
	VARLINK_FIELD(fatal, VARLINK_BOOL, 0),
	VARLINK_FIELD(mrs, VARLINK_U64, 0),
	VARLINK_FIELD(pinned_bytes, VARLINK_U64, 0),
	VARLINK_FIELD(connections, VARLINK_INT, 0),
	VARLINK_FIELD(protection_domains, VARLINK_INT, 0),
	VARLINK_FIELD(max_mr_size, VARLINK_U64, 0),
	VARLINK_FIELD_BY_TYPE(ports, rpc_type_Port, VARLINK_ARRAY),
	VARLINK_FIELD_COMMENT("the last asynchronous events"),
	VARLINK_FIELD_BY_TYPE(events, rpc_type_DeviceEvent, VARLINK_ARRAY));
/* clang-format on */

static cJSON *device_json(const struct device *dev)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *ports, *events;
	unsigned first;

	if (!o || json_add_string(o, "name", dev->info.name) < 0 ||
	    json_add_string(o, "backend", dev->backend) < 0 ||
	    json_add_string(o, "node_guid", dev->info.node_guid) < 0 ||
	    json_add_bool(o, "fatal", dev->fatal) < 0 || json_add_u64(o, "mrs", dev->n_mrs) < 0 ||
	    json_add_u64(o, "pinned_bytes", dev->mr_bytes) < 0 ||
	    json_add_int(o, "connections", dev->n_connections) < 0 ||
	    json_add_u64(o, "max_mr_size", dev->info.max_mr_size) < 0 ||
	    json_add_int(o, "protection_domains", dev->n_pds) < 0)
		return NULL;
	ports = cJSON_AddArrayToObject(o, "ports");
	if (!ports)
		return NULL;
	for (size_t i = 0; i < dev->info.n_ports; i++) {
		const struct vb_port *p = &dev->info.ports[i];
		cJSON *po = cJSON_CreateObject(), *gids;

		if (!po)
			return NULL;
		cJSON_AddItemToArray(ports, po);
		if (json_add_int(po, "port", p->num) < 0 ||
		    json_add_string(po, "state", p->state) < 0 ||
		    json_add_string(po, "link_layer", p->link_layer) < 0 ||
		    json_add_int(po, "mtu", p->mtu) < 0 || json_add_int(po, "lid", p->lid) < 0)
			return NULL;
		gids = cJSON_AddArrayToObject(po, "gids");
		if (!gids)
			return NULL;
		for (size_t g = 0; g < p->n_gids; g++) {
			cJSON *go = cJSON_CreateObject();

			if (!go)
				return NULL;
			cJSON_AddItemToArray(gids, go);
			if (json_add_int(go, "index", p->gids[g].index) < 0 ||
			    json_add_string(go, "gid", p->gids[g].text) < 0 ||
			    json_add_string(go, "type", p->gids[g].type) < 0)
				return NULL;
		}
	}
	events = cJSON_AddArrayToObject(o, "events");
	if (!events)
		return NULL;
	/* The last DEVICE_EVENTS_KEPT, oldest first. */
	first = dev->n_events > DEVICE_EVENTS_KEPT ? dev->n_events - DEVICE_EVENTS_KEPT : 0;
	for (unsigned k = first; k < dev->n_events; k++) {
		cJSON *e = cJSON_CreateObject();
		unsigned i = k % DEVICE_EVENTS_KEPT;

		if (!e)
			return NULL;
		cJSON_AddItemToArray(events, e);
		if (json_add_string(e, "event", dev->events[i].text) < 0 ||
		    json_add_u64(e, "age_msec",
				 uv_now(dev->rdma->core->loop) - dev->events[i].msec) < 0)
			return NULL;
	}
	return TAKE_PTR(o);
}

/* clang-format off */
RPC_DEFINE_METHOD(
	ListDevices,
	"The RDMA devices the daemon opened (none is a normal state), and how many\n"
	"remote connections it refused (no or bad token, network, device, limit),\n"
	"through rdmacm and ConnectQueuePair.",
	VARLINK_OUTPUT_BY_TYPE(devices, rpc_type_Device, VARLINK_ARRAY),
	VARLINK_OUTPUT(rejected_connections, VARLINK_U64, 0));
/* clang-format on */

static int method_list_devices(struct rpc_call *call, _unused_ void *params)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	struct device *dev;
	cJSON *list;

	list = p ? cJSON_AddArrayToObject(p, "devices") : NULL;
	if (!list || json_add_u64(p, "rejected_connections", call->ctx->rdma->rejected) < 0)
		return -ENOMEM;
	list_for_each_entry(dev, &call->ctx->rdma->devices, link) {
		cJSON *o = device_json(dev);

		if (!o)
			return -ENOMEM;
		cJSON_AddItemToArray(list, o);
	}
	return rpc_reply(call, TAKE_PTR(p));
}

/* clang-format off */
RPC_DEFINE_METHOD(
	CreateAccessToken,
	"A token that admits remote peers into the caller's uid's protection\n"
	"domains. It lives until RevokeAccessToken or until this connection closes.",
	VARLINK_OUTPUT(token, VARLINK_STRING, 0),
	VARLINK_OUTPUT(uid, VARLINK_INT, 0));
/* clang-format on */

static int method_create_access_token(struct rpc_call *call, _unused_ void *params)
{
	_cleanup_json_ cJSON *p = NULL;
	struct errinfo err = {};
	struct token *t;
	int r;

	r = token_create(call->ctx->rdma, call->session, &t, &err);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;
	p = cJSON_CreateObject();
	if (!p || json_add_string(p, "token", t->hex) < 0 || json_add_int(p, "uid", t->uid) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

static int lookup_token(struct rpc_call *call, const char *hex, struct token **ret)
{
	uint8_t raw[TOKEN_BYTES];
	struct token *t;

	if (token_parse_hex(hex, raw) < 0)
		return rpc_invalid_param(call, "token",
					 "parameter 'token' must be 32 hex digits, "
					 "as CreateAccessToken returns it");
	t = token_find(call->ctx->rdma, raw);
	if (!t)
		return rpc_errorf(call, RDMAMEM_ERROR_INVALID_TOKEN,
				  "no such access token: never issued, revoked, or its creator "
				  "disconnected");
	*ret = t;
	return 0;
}

struct revoke_access_token_params {
	const char *token;
};

/* clang-format off */
RPC_DEFINE_METHOD(RevokeAccessToken,
		  "Revokes a token and tears down the connections it admitted. Its uid (or\n"
		  "root) only.",
		  VARLINK_INPUT(struct revoke_access_token_params, token, VARLINK_STRING, 0));
/* clang-format on */

static int method_revoke_access_token(struct rpc_call *call, void *params)
{
	const struct revoke_access_token_params *p = params;
	struct token *t = NULL;
	int r;

	r = lookup_token(call, p->token, &t);
	if (r < 0)
		return r;
	if (call->session->cred.uid != 0 && call->session->cred.uid != t->uid)
		return rpc_errorf(call, RDMAMEM_ERROR_PERMISSION_DENIED,
				  "only uid %u (or root) may revoke this token", (unsigned)t->uid);
	token_revoke(t, "RevokeAccessToken");
	return rpc_reply(call, NULL);
}

static int parse_gid(const char *s, uint8_t gid[16])
{
	struct in6_addr a;
	uint8_t raw[TOKEN_BYTES];

	/* inet_pton() measures its input first: bound it, it is the client's. */
	if (strnlen(s, INET6_ADDRSTRLEN) >= INET6_ADDRSTRLEN && strnlen(s, 33) != 32)
		return -EINVAL;
	if (inet_pton(AF_INET6, s, &a) == 1) {
		memcpy(gid, &a, 16);
		return 0;
	}
	/* 32 hex digits, as ibv_devinfo -v prints raw GIDs. */
	if (token_parse_hex(s, raw) == 0) {
		memcpy(gid, raw, 16);
		return 0;
	}
	return -EINVAL;
}

struct connect_queue_pair_params {
	const char *device, *token, *gid;
	uint32_t qpn, psn, lid, mtu;
	int64_t gid_index;
	bool has_mtu, has_gid_index;
};

static const struct connect_queue_pair_params connect_queue_pair_init = { .gid_index = -1 };

/* clang-format off */
RPC_DEFINE_METHOD(
	ConnectQueuePair,
	"Out-of-band queue pair setup for peers that do not use rdmacm: the peer\n"
	"gives its RC QP's number, first PSN and GID (IPv6 notation or 32 hex\n"
	"digits) and optionally the path MTU it wants in bytes (default 1024);\n"
	"the daemon admits it by the rules rdmacm requests follow (its GID counts\n"
	"as its address for the allowed networks: NetworkNotAllowed; token;\n"
	"device; connection limits: TooManyConnections, or QuotaExceeded for the\n"
	"token's uid), creates a QP in the token's uid's PD on device, connects it\n"
	"to the peer's, and answers with its own side. mtu is the path MTU the QP\n"
	"is in: the smaller of what was asked and the port's active MTU. The QP\n"
	"lives as long as this Varlink connection, or until the token is revoked.",
	VARLINK_INPUT(struct connect_queue_pair_params, device, VARLINK_STRING, 0),
	VARLINK_INPUT(struct connect_queue_pair_params, token, VARLINK_STRING, 0),
	VARLINK_INPUT(struct connect_queue_pair_params, qpn, VARLINK_U32, 0),
	VARLINK_INPUT(struct connect_queue_pair_params, psn, VARLINK_U32, 0),
	VARLINK_INPUT(struct connect_queue_pair_params, gid, VARLINK_STRING, 0),
	VARLINK_INPUT(struct connect_queue_pair_params, lid, VARLINK_U32, VARLINK_NULLABLE),
	VARLINK_INPUT_HAS(struct connect_queue_pair_params, mtu, mtu, VARLINK_U32, VARLINK_NULLABLE,
			  has_mtu),
	VARLINK_INPUT_HAS(struct connect_queue_pair_params, gid_index, gid_index, VARLINK_INT,
			  VARLINK_NULLABLE, has_gid_index),
	VARLINK_OUTPUT(qpn, VARLINK_INT, 0),
	VARLINK_OUTPUT(psn, VARLINK_INT, 0),
	VARLINK_OUTPUT(lid, VARLINK_INT, 0),
	VARLINK_OUTPUT(gid, VARLINK_STRING, 0),
	VARLINK_OUTPUT(gid_index, VARLINK_INT, 0),
	VARLINK_OUTPUT(port, VARLINK_INT, 0),
	VARLINK_OUTPUT(mtu, VARLINK_INT, 0));
/* clang-format on */

static int method_connect_queue_pair(struct rpc_call *call, void *params)
{
	const struct connect_queue_pair_params *p = params;
	struct vb_qp_endpoint peer = {}, local;
	_cleanup_json_ cJSON *reply = NULL;
	uint8_t token[TOKEN_BYTES];
	struct errinfo err = {};
	char gid[48];
	int r;

	if (token_parse_hex(p->token, token) < 0)
		return rpc_invalid_param(call, "token",
					 "parameter 'token' must be 32 hex digits, "
					 "as CreateAccessToken returns it");
	if (p->qpn == 0 || p->qpn > 0xffffff)
		return rpc_invalid_param(call, "qpn", "parameter 'qpn' must be a 24-bit QP number");
	if (parse_gid(p->gid, peer.gid) < 0)
		return rpc_invalid_param(call, "gid",
					 "parameter 'gid' must be an IPv6-style GID "
					 "or 32 hex digits");
	/* Absent picks a default; a value sent must be one that exists. */
	if (p->has_gid_index && (p->gid_index < 0 || p->gid_index > 255))
		return rpc_invalid_param(
			call, "gid_index",
			"parameter 'gid_index' must be a GID table index, 0 to 255; "
			"leave it out for the port's default");
	/* Absent is the default (1024); anything else is at least the
	 * smallest IB MTU, and is rounded down to one. */
	if (p->has_mtu && p->mtu < 256)
		return rpc_invalid_param(call, "mtu",
					 "parameter 'mtu' is a path MTU in bytes: 256, "
					 "512, 1024, 2048 or 4096");
	peer.qpn = p->qpn;
	peer.psn = p->psn;
	peer.lid = (uint16_t)p->lid;
	peer.mtu = p->mtu;
	/* Admission (networks by the peer's GID, token, device, connection
	 * limits) is the one rdmacm requests go through. */
	r = endpoint_connect_qp(call->ctx->rdma, call->session, p->device, token, &peer,
				(int)p->gid_index, &local, &err);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;

	inet_ntop(AF_INET6, local.gid, gid, sizeof(gid));
	reply = cJSON_CreateObject();
	if (!reply || json_add_int(reply, "qpn", local.qpn) < 0 ||
	    json_add_int(reply, "psn", local.psn) < 0 ||
	    json_add_int(reply, "lid", local.lid) < 0 || json_add_string(reply, "gid", gid) < 0 ||
	    json_add_int(reply, "gid_index", local.gid_index) < 0 ||
	    json_add_int(reply, "port", local.port) < 0 ||
	    json_add_int(reply, "mtu", local.mtu) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

/* clang-format off */
static const struct varlink_symbol rpc_type_Connection = VARLINK_DEFINE_TYPE(
	Connection, NULL,
	VARLINK_FIELD(id, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("\"rdmacm\" or \"queue-pair\""),
	VARLINK_FIELD(kind, VARLINK_STRING, 0),
	VARLINK_FIELD(device, VARLINK_STRING, 0),
	VARLINK_FIELD(uid, VARLINK_INT, 0),
	VARLINK_FIELD(peer, VARLINK_STRING, 0),
	VARLINK_FIELD(qpn, VARLINK_INT, 0),
	VARLINK_FIELD(established, VARLINK_BOOL, 0),
	VARLINK_FIELD(age_msec, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("the ExportRegion whose token admitted it, or 0"),
	VARLINK_FIELD(export, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("notifications that arrived on it: queued for the export's\n"
			      "owner, or dropped (its queue full, malformed)"),
	VARLINK_FIELD(notifications_received, VARLINK_U64, 0),
	VARLINK_FIELD(notifications_queued, VARLINK_U64, 0),
	VARLINK_FIELD(notifications_dropped, VARLINK_U64, 0));
/* clang-format on */

/* Remote peers of the caller's uid; root sees all. */
static int connection_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct rconn *c = container_of(node, struct rconn, order);
	_cleanup_json_ cJSON *o = NULL;

	if (call->session->cred.uid != 0 && call->session->cred.uid != c->uid)
		return 0;
	o = cJSON_CreateObject();
	if (!o || json_add_u64(o, "id", c->id) < 0 ||
	    json_add_string(o, "kind", c->oob ? "queue-pair" : "rdmacm") < 0 ||
	    json_add_string(o, "device", c->dev->info.name) < 0 ||
	    json_add_int(o, "uid", c->uid) < 0 || json_add_string(o, "peer", c->peer) < 0 ||
	    json_add_int(o, "qpn", c->qpn) < 0 ||
	    json_add_bool(o, "established", c->established) < 0 ||
	    json_add_u64(o, "age_msec", uv_now(call->ctx->core->loop) - c->created_msec) < 0 ||
	    json_add_u64(o, "export", c->token ? c->token->export_id : 0) < 0 ||
	    json_add_u64(o, "notifications_received", c->notify.received) < 0 ||
	    json_add_u64(o, "notifications_queued", c->notify.queued) < 0 ||
	    json_add_u64(o, "notifications_dropped", c->notify.dropped) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(ListConnections,
		  "Remote peers' queue pairs: the caller's uid's (all of them for root); a\n"
		  "page at a time, by id, as ListRegions.",
		  RPC_PAGE_INPUTS,
		  VARLINK_OUTPUT_BY_TYPE(connections, rpc_type_Connection, VARLINK_ARRAY),
		  VARLINK_OUTPUT(next, VARLINK_U64, VARLINK_NULLABLE));
/* clang-format on */

static int method_list_connections(struct rpc_call *call, void *params)
{
	return rpc_reply_page(call, params, &call->ctx->rdma->rconn_order, "connections",
			      connection_item);
}

const struct rpc_method rpc_rdma_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, RegisterOn, method_register_on,
		   RPC_PARAMS(struct register_on_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, RetryRegistration, method_retry_registration,
		   RPC_PARAMS(struct retry_registration_params), .check = retry_registration_check),
	RPC_METHOD(RDMAMEMD_INTERFACE, ListDevices, method_list_devices),
	RPC_METHOD(RDMAMEMD_INTERFACE, CreateAccessToken, method_create_access_token),
	RPC_METHOD(RDMAMEMD_INTERFACE, RevokeAccessToken, method_revoke_access_token,
		   RPC_PARAMS(struct revoke_access_token_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, ConnectQueuePair, method_connect_queue_pair,
		   RPC_PARAMS(struct connect_queue_pair_params),
		   .params_init = &connect_queue_pair_init),
	RPC_METHOD(RDMAMEMD_INTERFACE, ListConnections, method_list_connections, RPC_PAGE_PARAMS),
	{},
};
