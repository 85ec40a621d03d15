/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "daemon/mem/region.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/mreg.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/export.h"
#include "daemon/remote/remote.h"
#include "proto/errors.h"

static bool gid_is_v4_mapped(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

/*
 * The port and GID a peer reaches dev by: the first active port (else the
 * first), and on it the first RoCEv2 GID of an IPv4 address, else the
 * first RoCEv2 one, else its GID 0 (InfiniBand).
 */
static void pick_gid(const struct device *dev, struct descriptor_device *out)
{
	const struct vb_port *port = NULL;
	const struct vb_gid *best = NULL;

	for (size_t i = 0; i < dev->info.n_ports && !port; i++)
		if (dev->info.ports[i].active)
			port = &dev->info.ports[i];
	if (!port && dev->info.n_ports > 0)
		port = &dev->info.ports[0];
	out->port = port ? port->num : 1;
	for (size_t g = 0; port && g < port->n_gids; g++) {
		const struct vb_gid *gid = &port->gids[g];
		bool v2 = gid->type && strcmp(gid->type, "RoCEv2") == 0;

		if (v2 && gid_is_v4_mapped(gid->raw)) {
			best = gid;
			break;
		}
		if (v2 && !best)
			best = gid;
	}
	if (!best && port && port->n_gids > 0)
		best = &port->gids[0];
	if (best)
		memcpy(out->gid, best->raw, sizeof(out->gid));
}

static void add_endpoint(struct descriptor *d, uint8_t family, uint16_t port, const uint8_t *addr)
{
	struct descriptor_endpoint e = { .family = family, .port = port };

	memcpy(e.addr, addr, family == 4 ? 4 : 16);
	if (d->n_endpoints == DESCRIPTOR_ENDPOINTS_MAX)
		return;
	for (size_t i = 0; i < d->n_endpoints; i++)
		if (memcmp(&d->endpoints[i], &e, sizeof(e)) == 0)
			return;
	d->endpoints[d->n_endpoints++] = e;
}

/* The IPv4 addresses of the exported devices' GIDs, for a 0.0.0.0 listener. */
static void add_gid_endpoints(struct rdma_ctx *rdma, struct descriptor *d, uint16_t port)
{
	for (size_t i = 0; i < d->n_devices; i++) {
		const struct device *dev = device_find(rdma, d->devices[i].name);

		for (size_t p = 0; dev && p < dev->info.n_ports; p++)
			for (size_t g = 0; g < dev->info.ports[p].n_gids; g++) {
				const uint8_t *raw = dev->info.ports[p].gids[g].raw;

				if (gid_is_v4_mapped(raw))
					add_endpoint(d, 4, port, raw + 12);
			}
	}
}

static void add_endpoints(struct rdma_ctx *rdma, struct descriptor *d)
{
	struct listener *l;

	list_for_each_entry(l, &rdma->listeners, link) {
		struct sockaddr_storage ss;

		if (netaddr_parse_address(l->address, &ss) < 0)
			continue;
		if (ss.ss_family == AF_INET) {
			const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
			uint16_t port = ntohs(in->sin_port);

			if (in->sin_addr.s_addr == htonl(INADDR_ANY))
				add_gid_endpoints(rdma, d, port);
			else
				add_endpoint(d, 4, port, (const uint8_t *)&in->sin_addr);
		} else if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
			uint16_t port = ntohs(in6->sin6_port);

			if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
				add_gid_endpoints(rdma, d, port);
			else
				add_endpoint(d, 6, port, in6->sin6_addr.s6_addr);
		}
	}
}

/* Adds r's registration on dev, or says why there is none. */
static int add_device(struct descriptor *d, struct region *r, struct device *dev, unsigned *access,
		      struct errinfo *e)
{
	const struct mreg *m = mreg_find(r, dev->info.name);
	struct descriptor_device *out = &d->devices[d->n_devices];

	if (!m || m->state != MREG_REGISTERED)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_REGISTERED, -ENOLINK,
				   "region %" PRIu64 " has no registration in force on %s%s", r->id,
				   dev->info.name,
				   !m                       ? " (RegisterOn registers it)" :
				   m->state == MREG_PENDING ? " yet (it is being made)" :
							      " (it failed)");
	snprintf(out->name, sizeof(out->name), "%s", dev->info.name);
	out->addr = region_address(r);
	out->rkey = m->rkey;
	pick_gid(dev, out);
	*access &= m->access;
	d->n_devices++;
	return 0;
}

int remote_export(struct remote_ctx *ctx, struct session *s, struct region *r, char *const *names,
		  size_t n, struct descriptor *ret, char **ret_text, struct token **ret_token,
		  struct errinfo *e)
{
	unsigned access = VB_ACCESS_REMOTE_READ | VB_ACCESS_REMOTE_WRITE;
	struct rdma_ctx *rdma = ctx->rdma;
	struct descriptor d = { .length = r->size };
	const char *why = NULL;
	struct token *t;
	int res;

	for (size_t i = 0; i < n; i++) {
		struct device *dev = device_find(rdma, names[i]);

		if (!dev)
			return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_DEVICE, -ENODEV,
					   "no RDMA device '%.64s' is open", names[i]);
		res = add_device(&d, r, dev, &access, e);
		if (res < 0)
			return res;
	}
	if (n == 0) {
		struct device *dev;

		list_for_each_entry(dev, &rdma->devices, link) {
			const struct mreg *m = mreg_find(r, dev->info.name);

			if (d.n_devices < DESCRIPTOR_DEVICES_MAX && m &&
			    m->state == MREG_REGISTERED)
				add_device(&d, r, dev, &access, e);
		}
		if (d.n_devices == 0)
			return errinfo_set(e, RDMAMEM_ERROR_NOT_REGISTERED, -ENOLINK,
					   "region %" PRIu64 " has no registration in force on any "
					   "device: RegisterOn registers it, ExportRegion then "
					   "describes it",
					   r->id);
	}
	if (access & VB_ACCESS_REMOTE_READ)
		d.access |= DESCRIPTOR_ACCESS_READ;
	if (access & VB_ACCESS_REMOTE_WRITE)
		d.access |= DESCRIPTOR_ACCESS_WRITE;
	if (d.access == 0)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_REGISTERED, -ENOLINK,
				   "region %" PRIu64 " is registered for no remote access on the "
				   "devices asked for",
				   r->id);
	add_endpoints(rdma, &d);
	if (d.n_endpoints == 0)
		return errinfo_set(
			e, RDMAMEM_ERROR_NO_RDMA_ENDPOINT, -EADDRNOTAVAIL,
			"the daemon accepts no RDMA connections that reach these devices "
			"(its rdmacm-listen setting): nothing could use the descriptor");

	res = token_create(rdma, s, &t, e);
	if (res < 0)
		return res;
	memcpy(d.token, t->raw, TOKEN_BYTES);
	d.id = ++ctx->next_export_id;
	t->export_id = d.id;
	res = descriptor_format(&d, ret_text, &why);
	if (res < 0) {
		/* What the daemon describes is its own: a refusal here is a bug. */
		log_error("Export of region %" PRIu64 " makes a bad descriptor: it %s", r->id,
			  why ?: "cannot be made (out of memory)");
		token_revoke(t, "its export failed");
		return res == -ENOMEM ? res : -EIO;
	}
	*ret = d;
	*ret_token = t;
	return 0;
}
