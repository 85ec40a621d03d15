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

#include "core.h"
#include "rdma.h"
#include "device.h"
#include "endpoint.h"
#include "errinfo.h"
#include "gpu.h"
#include "log.h"
#include "mreg.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "proto/strset.h"
#include "region.h"
#include "rpc.h"
#include "rpc_rdma.h"
#include "token.h"

/* A call waiting for registrations on several devices to settle. */
struct reg_wait {
	struct rpc_deferred *call;
	struct region *region;		/* a reference */
	bool whole_region;		/* Register answers with the region */
	size_t n, pending;
	struct reg_item {
		struct reg_wait *rw;
		struct mreg_waiter waiter;
		char device[VB_NAME_MAX];
		bool recorded;		/* had failed before this call */
		bool missing;		/* no such device is open: answered, not recorded */
	} items[];
};

/*
 * A list names at most this many devices, or as many as the daemon has open
 * when that is more ("all" names every one). Longer is no request a client
 * means to make: refused before any work that grows with it.
 */
#define DEVICES_LIST_MAX 64

static bool device_name_is_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= VB_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

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

static cJSON *registration_of(struct reg_wait *rw, const struct reg_item *it)
{
	_cleanup_json_ cJSON *o = NULL;
	const struct mreg *m;

	if (it->missing)
		return mreg_missing_json(rw->call->call->ctx->rdma, it->device);
	m = mreg_find(rw->region, it->device);
	if (m)
		return mreg_to_json(m, it->recorded);
	/* Forgotten by a RetryRegistration meanwhile, which forgets only
	 * failures: still a Registration, with every field it declares. */
	o = cJSON_CreateObject();
	if (!o || json_add_string(o, "device", it->device) < 0 ||
	    json_add_string(o, "state", "failed") < 0 ||
	    json_add_string(o, "error", "the failure was cleared by RetryRegistration while this "
					 "call waited; ask again to try again") < 0)
		return NULL;
	return TAKE_PTR(o);
}

static void reg_wait_reply(struct reg_wait *rw)
{
	struct rpc_deferred *d = rw->call;
	_cleanup_json_ cJSON *p = NULL;
	struct errinfo e = {};
	cJSON *list;

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
	if (rw->whole_region) {
		p = region_json(rw->region, false);
	} else {
		p = cJSON_CreateObject();
		list = p ? cJSON_AddArrayToObject(p, "registrations") : NULL;
		if (!list || json_add_u64(p, "region", rw->region->id) < 0)
			p = (cJSON_Delete(p), NULL);
		for (size_t i = 0; p && i < rw->n; i++) {
			cJSON *o = registration_of(rw, &rw->items[i]);

			if (!o)
				p = (cJSON_Delete(p), NULL);
			else
				cJSON_AddItemToArray(list, o);
		}
	}
	/* Register's answer is the region: names that are no device show as
	 * failures only here, since the region records none for them. */
	for (size_t i = 0; p && rw->whole_region && i < rw->n; i++) {
		cJSON *o;

		if (!rw->items[i].missing)
			continue;
		o = mreg_missing_json(d->call->ctx->rdma, rw->items[i].device);
		if (!o)
			p = (cJSON_Delete(p), NULL);
		else
			cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(p, "registrations"), o);
	}
	if (p)
		rpc_deferred_reply(d, TAKE_PTR(p));
	else
		rpc_deferred_fail(d, -ENOMEM);
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
				"Region %" PRIu64 ": %s names %zu device%s that %s not open, such as "
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

static int method_register_on(struct rpc_call *call)
{
	struct {
		uint64_t region;
		cJSON *devices;
	} p = {};
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{ "devices", JSON_ANY, offsetof(__typeof__(p), devices), JSON_MANDATORY },
		{},
	};
	struct region *reg;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	r = rpc_region_lookup(call, p.region, REGION_ADMIN, &reg);
	if (r < 0)
		return r;
	rpc_register_on(rpc_defer(call, NULL, NULL), reg, p.devices, false);
	region_unref(reg);
	return 0;
}

static int method_retry_registration(struct rpc_call *call)
{
	struct {
		uint64_t region;
		const char *device;
	} p = {};
	static const struct json_field fields[] = {
		{ "region", JSON_U64, offsetof(__typeof__(p), region), JSON_MANDATORY },
		{ "device", JSON_STRING, offsetof(__typeof__(p), device), JSON_MANDATORY },
		{},
	};
	struct region *reg;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	/* Retrying costs the device and the host a new pinning attempt: the
	 * operator decides, not every client. */
	if (call->session->cred.uid != 0)
		return rpc_errorf(call, RDMAMEM_ERROR_PERMISSION_DENIED,
				  "RetryRegistration is for root: a recorded failure stays until an "
				  "administrator clears it");
	r = rpc_region_lookup(call, p.region, REGION_ADMIN, &reg);
	if (r < 0)
		return r;
	r = mreg_forget_failure(reg, p.device);
	region_unref(reg);
	if (r < 0)
		return rpc_invalid_param(call, "device",
					 "region %" PRIu64 " has no recorded failure on '%.64s'",
					 p.region, p.device);
	return rpc_reply(call, NULL);
}

static cJSON *device_json(const struct device *dev)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *ports, *events;

	if (!o || json_add_string(o, "name", dev->info.name) < 0 ||
	    json_add_string(o, "backend", dev->backend) < 0 ||
	    json_add_string(o, "node_guid", dev->info.node_guid) < 0 ||
	    json_add_bool(o, "fatal", dev->fatal) < 0 ||
	    json_add_u64(o, "mrs", dev->n_mrs) < 0 ||
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
		if (json_add_int(po, "port", p->num) < 0 || json_add_string(po, "state", p->state) < 0 ||
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
	for (unsigned k = dev->n_events > DEVICE_EVENTS_KEPT ? dev->n_events - DEVICE_EVENTS_KEPT : 0;
	     k < dev->n_events; k++) {
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

static int method_list_devices(struct rpc_call *call)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	struct device *dev;
	cJSON *list;
	int r;

	r = rpc_params(call, (const struct json_field[]){ {} }, NULL);
	if (r < 0)
		return r;
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

static int method_create_access_token(struct rpc_call *call)
{
	_cleanup_json_ cJSON *p = NULL;
	struct errinfo err = {};
	struct token *t;
	int r;

	r = rpc_params(call, (const struct json_field[]){ {} }, NULL);
	if (r < 0)
		return r;
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
		return rpc_invalid_param(call, "token", "parameter 'token' must be 32 hex digits, "
							"as CreateAccessToken returns it");
	t = token_find(call->ctx->rdma, raw);
	if (!t)
		return rpc_errorf(call, RDMAMEM_ERROR_INVALID_TOKEN,
				  "no such access token: never issued, revoked, or its creator "
				  "disconnected");
	*ret = t;
	return 0;
}

static int method_revoke_access_token(struct rpc_call *call)
{
	struct {
		const char *token;
	} p = {};
	static const struct json_field fields[] = {
		{ "token", JSON_STRING, offsetof(__typeof__(p), token), JSON_MANDATORY },
		{},
	};
	struct token *t = NULL;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0 || (r = lookup_token(call, p.token, &t)) < 0)
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

static int method_connect_queue_pair(struct rpc_call *call)
{
	struct {
		const char *device, *token, *gid;
		uint32_t qpn, psn, lid, mtu;
		int64_t gid_index;
	} p = { .gid_index = -1 };
	static const struct json_field fields[] = {
		{ "device", JSON_STRING, offsetof(__typeof__(p), device), JSON_MANDATORY },
		{ "token", JSON_STRING, offsetof(__typeof__(p), token), JSON_MANDATORY },
		{ "qpn", JSON_U32, offsetof(__typeof__(p), qpn), JSON_MANDATORY },
		{ "psn", JSON_U32, offsetof(__typeof__(p), psn), JSON_MANDATORY },
		{ "gid", JSON_STRING, offsetof(__typeof__(p), gid), JSON_MANDATORY },
		{ "lid", JSON_U32, offsetof(__typeof__(p), lid), 0 },
		{ "mtu", JSON_U32, offsetof(__typeof__(p), mtu), 0 },
		{ "gid_index", JSON_INT, offsetof(__typeof__(p), gid_index), 0 },
		{},
	};
	struct vb_qp_endpoint peer = {}, local;
	_cleanup_json_ cJSON *reply = NULL;
	uint8_t token[TOKEN_BYTES];
	struct errinfo err = {};
	char gid[48];
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	if (token_parse_hex(p.token, token) < 0)
		return rpc_invalid_param(call, "token", "parameter 'token' must be 32 hex digits, "
							"as CreateAccessToken returns it");
	if (p.qpn == 0 || p.qpn > 0xffffff)
		return rpc_invalid_param(call, "qpn", "parameter 'qpn' must be a 24-bit QP number");
	if (parse_gid(p.gid, peer.gid) < 0)
		return rpc_invalid_param(call, "gid", "parameter 'gid' must be an IPv6-style GID "
						      "or 32 hex digits");
	/* Absent picks a default; a value sent must be one that exists. */
	if (json_present(call->vc.parameters, "gid_index") && (p.gid_index < 0 || p.gid_index > 255))
		return rpc_invalid_param(call, "gid_index",
					 "parameter 'gid_index' must be a GID table index, 0 to 255; "
					 "leave it out for the port's default");
	/* Absent is the default (1024); anything else is at least the
	 * smallest IB MTU, and is rounded down to one. */
	if (json_present(call->vc.parameters, "mtu") && p.mtu < 256)
		return rpc_invalid_param(call, "mtu", "parameter 'mtu' is a path MTU in bytes: 256, "
						      "512, 1024, 2048 or 4096");
	peer.qpn = p.qpn;
	peer.psn = p.psn;
	peer.lid = (uint16_t)p.lid;
	peer.mtu = p.mtu;
	/* Admission (networks by the peer's GID, token, device, connection
	 * limits) is the one rdmacm requests go through. */
	r = endpoint_connect_qp(call->ctx->rdma, call->session, p.device, token, &peer,
				(int)p.gid_index, &local,
				&err);
	if (r < 0)
		return err.name ? rpc_error_info(call, &err) : r;

	inet_ntop(AF_INET6, local.gid, gid, sizeof(gid));
	reply = cJSON_CreateObject();
	if (!reply || json_add_int(reply, "qpn", local.qpn) < 0 ||
	    json_add_int(reply, "psn", local.psn) < 0 || json_add_int(reply, "lid", local.lid) < 0 ||
	    json_add_string(reply, "gid", gid) < 0 ||
	    json_add_int(reply, "gid_index", local.gid_index) < 0 ||
	    json_add_int(reply, "port", local.port) < 0 || json_add_int(reply, "mtu", local.mtu) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

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
	    json_add_u64(o, "age_msec", uv_now(call->ctx->core->loop) - c->created_msec) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

static int method_list_connections(struct rpc_call *call)
{
	return rpc_reply_page(call, &call->ctx->rdma->rconn_order, "connections", connection_item);
}

const struct rpc_method rpc_rdma_methods[] = {
	{ "io.rdmamemd.RegisterOn", method_register_on, 0 },
	{ "io.rdmamemd.RetryRegistration", method_retry_registration, 0 },
	{ "io.rdmamemd.ListDevices", method_list_devices, 0 },
	{ "io.rdmamemd.CreateAccessToken", method_create_access_token, 0 },
	{ "io.rdmamemd.RevokeAccessToken", method_revoke_access_token, 0 },
	{ "io.rdmamemd.ConnectQueuePair", method_connect_queue_pair, 0 },
	{ "io.rdmamemd.ListConnections", method_list_connections, 0 },
	{},
};
