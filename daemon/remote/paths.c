/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "daemon/core/errinfo.h"
#include "daemon/mem/membw.h"
#include "daemon/mem/region.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/mreg.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/paths.h"
#include "proto/errors.h"

/* Candidates one leg ranks at most. */
#define PATHS_CANDIDATES_MAX 16U
/* The hops of a GPU or NIC whose place is unknown: after every known one. */
#define HOPS_UNKNOWN 1000

void paths_init(struct paths *p, uv_loop_t *loop, struct rdma_ctx *rdma, const struct membw *bw)
{
	*p = (struct paths){ .loop = loop, .rdma = rdma, .membw = bw };
}

/* ---- reachability ---- */

/* The interface list, fetched anew once it is PATHS_IFS_REFRESH_MS old. */
static void ifs_refresh(struct paths *p)
{
	uint64_t now = uv_now(p->loop);
	struct ifaddrs *ifs = NULL;

	if (now < p->ifs_expiry)
		return;
	p->ifs_expiry = now + PATHS_IFS_REFRESH_MS;
	p->n_ifs_fetched++;
	p->n_ifs = 0;
	p->ifs_known = getifaddrs(&ifs) == 0;
	for (const struct ifaddrs *i = ifs; i && p->n_ifs < PATHS_IFS_MAX; i = i->ifa_next) {
		const struct sockaddr_in *ia = (const void *)i->ifa_addr;
		const struct sockaddr_in *im = (const void *)i->ifa_netmask;

		if (ia && im && ia->sin_family == AF_INET)
			p->ifs[p->n_ifs++] = (struct paths_ifaddr){ .addr = ia->sin_addr.s_addr,
								    .mask = im->sin_addr.s_addr };
	}
	freeifaddrs(ifs);
}

/* The IPv4 address of an IPv4-mapped GID, or 0. */
static uint32_t gid_ipv4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint32_t a;

	if (memcmp(gid, prefix, sizeof(prefix)) != 0)
		return 0;
	memcpy(&a, gid + 12, 4);
	return a;
}

enum reach {
	REACH_NO,      /* its IPv4 addresses are on other networks */
	REACH_UNKNOWN, /* nothing tells: no IPv4 GID, no interface list, IPv6 */
	REACH_YES,     /* one of its IPv4 GIDs is on a network that holds addr */
};

/* Whether dev reaches IPv4 address addr (network order; 0: not IPv4). */
static enum reach dev_reaches(const struct paths *p, const struct device *dev, uint32_t addr)
{
	bool any = false;

	if (!addr || !p->ifs_known)
		return REACH_UNKNOWN;
	for (size_t port = 0; port < dev->info.n_ports; port++)
		for (size_t g = 0; g < dev->info.ports[port].n_gids; g++) {
			uint32_t a = gid_ipv4(dev->info.ports[port].gids[g].raw);

			if (!a)
				continue;
			for (size_t i = 0; i < p->n_ifs; i++) {
				if (p->ifs[i].addr != a)
					continue;
				any = true;
				if (((a ^ addr) & p->ifs[i].mask) == 0)
					return REACH_YES;
			}
		}
	return any ? REACH_NO : REACH_UNKNOWN;
}

/* The endpoint that reaches remote device d: the one on its address, else
 * the first. */
static const struct descriptor_endpoint *endpoint_of(const struct descriptor *desc,
						     const struct descriptor_device *d)
{
	uint32_t a = gid_ipv4(d->gid);

	for (size_t i = 0; a && i < desc->n_endpoints; i++)
		if (desc->endpoints[i].family == 4 && memcmp(desc->endpoints[i].addr, &a, 4) == 0)
			return &desc->endpoints[i];
	return &desc->endpoints[0];
}

/* ---- rank ---- */

struct candidate {
	struct device *dev;
	int hops;          /* the leg's farthest GPU region; 0 without one */
	uint64_t host_bps; /* the leg's slowest host region; UINT64_MAX without one */
	unsigned order;    /* discovery order */
};

static bool registered_on(struct region *const *regions, size_t n, const struct device *dev)
{
	for (size_t k = 0; k < n; k++) {
		const struct mreg *m = mreg_find(regions[k], dev->info.name);

		if (!m || m->state != MREG_REGISTERED)
			return false;
	}
	return true;
}

static const char *sysfs_of(const struct paths *p)
{
	return p->rdma->sysfs ?: TOPO_SYSFS_DEFAULT;
}

/* GPU region r's PCI place, read once per GPU. */
static const struct topo_place *gpu_place(struct paths *p, const struct region *r,
					  struct topo_place *scratch)
{
	struct paths_gpu *g;

	for (size_t i = 0; i < p->n_gpus; i++)
		if (strcmp(p->gpus[i].bus_id, r->pci_bus_id) == 0)
			return &p->gpus[i].place;
	if (p->n_gpus == PATHS_GPUS_MAX) {
		topo_pci_bus_id(sysfs_of(p), r->pci_bus_id, scratch);
		return scratch;
	}
	g = &p->gpus[p->n_gpus++];
	snprintf(g->bus_id, sizeof(g->bus_id), "%s", r->pci_bus_id);
	topo_pci_bus_id(sysfs_of(p), r->pci_bus_id, &g->place);
	return &g->place;
}

/* Measured copy bandwidth of the node host region r is on. */
static uint64_t node_bps(const struct paths *p, const struct region *r)
{
	const struct membw *bw = p->membw;

	if (bw && bw->done && r->numa_node >= 0 && (unsigned)r->numa_node < bw->n_nodes &&
	    bw->node_bps[r->numa_node])
		return bw->node_bps[r->numa_node];
	return PATHS_BPS_UNMEASURED;
}

/*
 * The NUMA distance from the memory's node to the device's, from the
 * firmware's table read once per node pair (the ranking runs per transfer).
 * A device whose node is unknown while the memory's is known counts as
 * PATHS_NUMA_UNKNOWN: behind a device known to be on the memory's node,
 * ahead of one known to be across the interconnect. Memory on an unknown
 * node sees every device as local (the discovery order decides).
 */
static int numa_distance(struct paths *p, int mem_node, int dev_node)
{
	int *d;

	if (mem_node < 0)
		return TOPO_NUMA_LOCAL;
	if (dev_node < 0)
		return PATHS_NUMA_UNKNOWN;
	if (mem_node >= PATHS_NODES_MAX || dev_node >= PATHS_NODES_MAX)
		return topo_numa_distance(sysfs_of(p), mem_node, dev_node);
	d = &p->numa_distance[mem_node][dev_node];
	if (*d == 0) {
		int r = topo_numa_distance(sysfs_of(p), mem_node, dev_node);

		/* Unreadable: the same as an unknown device node. */
		*d = r > 0 ? r : PATHS_NUMA_UNKNOWN;
	}
	return *d;
}

static void rank_one(struct paths *p, struct region *const *regions, size_t n, struct candidate *c)
{
	c->hops = 0;
	c->host_bps = UINT64_MAX;
	for (size_t k = 0; k < n; k++) {
		const struct region *r = regions[k];

		if (region_is_gpu(r)) {
			struct topo_place scratch;
			int h = topo_pci_hops(gpu_place(p, r, &scratch)->pci, c->dev->place.pci);

			c->hops = MAX(c->hops, h < 0 ? HOPS_UNKNOWN : h);
		} else {
			int d = numa_distance(p, r->numa_node, c->dev->place.numa_node);
			uint64_t bps = node_bps(p, r);

			if (d > TOPO_NUMA_LOCAL)
				bps = bps / (uint64_t)d * TOPO_NUMA_LOCAL;
			c->host_bps = MIN(c->host_bps, bps);
		}
	}
}

/* Nearest first: fewer PCIe hops, more host bandwidth, discovered first. */
static bool nearer(const struct candidate *a, const struct candidate *b)
{
	if (a->hops != b->hops)
		return a->hops < b->hops;
	if (a->host_bps != b->host_bps)
		return a->host_bps > b->host_bps;
	return a->order < b->order;
}

/* The candidates of the leg, ranked (an insertion sort of a few). */
static size_t rank(struct paths *p, struct region *const *regions, size_t n_regions,
		   struct candidate cand[PATHS_CANDIDATES_MAX])
{
	struct device *dev;
	unsigned order = 0;
	size_t n = 0;

	list_for_each_entry(dev, &p->rdma->devices, link) {
		struct candidate c = { .dev = dev, .order = order++ };
		size_t j;

		if (n == PATHS_CANDIDATES_MAX || dev->fatal ||
		    !registered_on(regions, n_regions, dev))
			continue;
		rank_one(p, regions, n_regions, &c);
		for (j = n; j > 0 && nearer(&c, &cand[j - 1]); j--)
			cand[j] = cand[j - 1];
		cand[j] = c;
		n++;
	}
	return n;
}

/* ---- pair ---- */

int paths_choose(struct paths *p, struct region *const *regions, size_t n_regions,
		 const struct descriptor *desc, struct paths_choice ret[PATHS_MAX], uint32_t *ret_n,
		 struct errinfo *e)
{
	struct candidate cand[PATHS_CANDIDATES_MAX];
	enum reach best[DESCRIPTOR_DEVICES_MAX], top = REACH_NO;
	size_t rank_of[PATHS_MAX];
	bool used[PATHS_CANDIDATES_MAX] = {};
	size_t n_cand;
	uint32_t n = 0;

	n_cand = rank(p, regions, n_regions, cand);
	if (n_cand == 0)
		return errinfo_set(
			e, RDMAMEM_ERROR_NOT_REGISTERED, -ENOLINK,
			"region %" PRIu64
			" (or another region of the transfer with the same owner) has no "
			"registration in force on a device of this host (RegisterOn makes "
			"one; GPU memory registers through a dma-buf or peer memory)",
			regions[0]->id);
	ifs_refresh(p);
	/* How well the best candidate reaches each remote device. */
	for (uint32_t r = 0; r < desc->n_devices && r < DESCRIPTOR_DEVICES_MAX; r++) {
		const struct descriptor_endpoint *ep = endpoint_of(desc, &desc->devices[r]);
		uint32_t addr = 0;

		if (ep->family == 4)
			memcpy(&addr, ep->addr, 4);
		best[r] = REACH_NO;
		for (size_t c = 0; c < n_cand; c++)
			best[r] = MAX(best[r], dev_reaches(p, cand[c].dev, addr));
		top = MAX(top, best[r]);
	}
	for (uint32_t r = 0; r < desc->n_devices && r < DESCRIPTOR_DEVICES_MAX && n < PATHS_MAX;
	     r++) {
		const struct descriptor_endpoint *ep = endpoint_of(desc, &desc->devices[r]);
		struct sockaddr_storage ss = {};
		uint32_t addr = 0;
		size_t pick = SIZE_MAX;
		bool dup = false;

		/* Not reached while another remote device is: no pair. */
		if (best[r] == REACH_NO && top != REACH_NO)
			continue;
		if (ep->family == 4)
			memcpy(&addr, ep->addr, 4);
		for (size_t c = 0; c < n_cand; c++) {
			if (dev_reaches(p, cand[c].dev, addr) != best[r])
				continue;
			if (pick == SIZE_MAX)
				pick = c;
			if (!used[c]) {
				pick = c;
				break;
			}
		}
		if (pick == SIZE_MAX)
			pick = 0;
		descriptor_endpoint_sockaddr(ep, &ss);
		for (uint32_t q = 0; q < n; q++)
			if (ret[q].dev == cand[pick].dev &&
			    memcmp(&ret[q].endpoint, &ss, sizeof(ss)) == 0)
				dup = true;
		if (dup)
			continue;
		used[pick] = true;
		/* By rank: insertion keeps the descriptor's order among equals. */
		{
			uint32_t j = n;

			while (j > 0 && rank_of[j - 1] > pick) {
				ret[j] = ret[j - 1];
				rank_of[j] = rank_of[j - 1];
				j--;
			}
			ret[j] = (struct paths_choice){ .dev = cand[pick].dev,
							.remote_dev = r,
							.endpoint = ss };
			rank_of[j] = pick;
		}
		n++;
	}
	if (n == 0) {
		/* A descriptor always names a device; be safe all the same. */
		return errinfo_set(e, RDMAMEM_ERROR_NOT_REGISTERED, -ENOLINK,
				   "the remote region names no device this host can reach");
	}
	*ret_n = n;
	return 0;
}
