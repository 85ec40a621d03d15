/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which device pairs carry a transfer leg, nearest first.
 *
 * A leg (transfer.h) moves bytes between some local regions of one owner
 * and one remote region. Its paths are pairs of a local device and a
 * remote device of the descriptor. The rule, in this order:
 *
 *   candidates  the local devices on which every region of the leg has a
 *               registration in force (and that are not fatal). A GPU
 *               region is a candidate only where its device memory is
 *               registered (a dma-buf MR, or peer memory): a device it is
 *               not registered on never carries its bytes;
 *   rank        the candidates by distance to the memory:
 *               - GPU memory: PCIe hops between the GPU and the NIC (from
 *                 each up to their nearest common bridge; a GPU behind the
 *                 same switch as the NIC is nearest, one under another
 *                 root complex farthest), the leg's farthest GPU region
 *                 counting; an unknown place ranks after every known one;
 *               - host memory: the bandwidth the device can expect from
 *                 the memory's NUMA node: the daemon's measured copy
 *                 bandwidth of that node (membw.h), scaled by the
 *                 firmware's NUMA distance to the device's node (10 / the
 *                 ACPI SLIT distance: a device on the memory's node gets
 *                 all of it, one across the interconnect at distance 21
 *                 less than half); a leg counts its slowest region, so a
 *                 leg over memory on two nodes goes nearest the slower
 *                 memory. A node not measured yet counts as
 *                 PATHS_BPS_UNMEASURED, which orders by distance alone;
 *                 a device on an unknown node counts as at distance
 *                 PATHS_NUMA_UNKNOWN (just farther than local, nearer
 *                 than across the interconnect); memory on an unknown
 *                 node finds every device local;
 *               - ties keep the discovery order;
 *   pair        for each device of the descriptor, in its order, the best
 *               ranked candidate that reaches the device's endpoint (one
 *               of the candidate's IPv4 GIDs is an address of an interface
 *               whose network holds the endpoint's address), one not used
 *               by an earlier pair if there is one, so that the leg spreads
 *               over the local devices too. A remote device that no
 *               candidate reaches gets no pair while another does; when
 *               nothing can be told (no IPv4 GID, an IPv6 endpoint), the
 *               best ranked candidate is tried;
 *   order       the pairs by their local device's rank: path 0 is the
 *               device nearest the memory, which carries every batch
 *               below TRANSFER_STRIPE_MIN; larger batches stripe over all.
 *
 * The interface list (getifaddrs(), a netlink dump) is cached and fetched
 * anew every PATHS_IFS_REFRESH_MS, so a transfer does not pay a dump; a
 * device's place is read once at discovery (device.h), a GPU's at the
 * first leg that needs it. Loop thread only.
 */
#ifndef RDMAMEMD_PATHS_H
#define RDMAMEMD_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "daemon/core/topo.h"
#include "daemon/remote/wr_plan.h"

struct descriptor;
struct device;
struct errinfo;
struct membw;
struct rdma_ctx;
struct region;

/* Paths one leg takes at most: what one WR plan stripes over. */
#define PATHS_MAX WR_PLAN_PATHS_MAX
#define PATHS_IFS_MAX 64U
#define PATHS_IFS_REFRESH_MS 3000U
#define PATHS_GPUS_MAX 16U
/* What an unmeasured NUMA node counts as, bytes/s: the same for every
 * node, so that only the distance orders. */
#define PATHS_BPS_UNMEASURED 1000000000ULL

/* An IPv4 interface address and its netmask, network order. */
struct paths_ifaddr {
	uint32_t addr, mask;
};

/* Nodes whose distances are kept (a table of ints per pair). */
#define PATHS_NODES_MAX 16
/* The distance given a device whose NUMA node is unknown (the firmware's
 * local is 10, a hop across the interconnect 20 or more). */
#define PATHS_NUMA_UNKNOWN 11

struct paths {
	uv_loop_t *loop;
	struct rdma_ctx *rdma;     /* the devices, the sysfs root */
	const struct membw *membw; /* measured host bandwidth; NULL: none */
	/* The interface list: good until ifs_expiry (uv_now()); ifs_known
	 * false when it could not be read (reachability is then unknown). */
	struct paths_ifaddr ifs[PATHS_IFS_MAX];
	size_t n_ifs;
	bool ifs_known;
	uint64_t ifs_expiry;
	uint64_t n_ifs_fetched; /* getifaddrs() calls, for the tests */
	/* GPUs' places by PCI bus id, read at first need. */
	struct paths_gpu {
		char bus_id[32];
		struct topo_place place;
	} gpus[PATHS_GPUS_MAX];
	size_t n_gpus;
	/* NUMA distances read so far (0: not yet), [memory node][device node]. */
	int numa_distance[PATHS_NODES_MAX][PATHS_NODES_MAX];
};

/* One path: a local device, the remote device (its index in the
 * descriptor) and the endpoint the link connects to. */
struct paths_choice {
	struct device *dev;
	uint32_t remote_dev;
	struct sockaddr_storage endpoint;
};

void paths_init(struct paths *p, uv_loop_t *loop, struct rdma_ctx *rdma, const struct membw *bw);

/*
 * The paths of a leg over regions[0..n_regions) to the region desc
 * describes, in rank order, into ret[0..*ret_n) (1 ≤ *ret_n ≤ PATHS_MAX).
 * NotRegistered in *e (-ENOLINK) when no local device is a candidate.
 */
int paths_choose(struct paths *p, struct region *const *regions, size_t n_regions,
		 const struct descriptor *desc, struct paths_choice ret[PATHS_MAX], uint32_t *ret_n,
		 struct errinfo *e);

#endif
