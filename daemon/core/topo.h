/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where a device sits in the machine, from sysfs: the PCI function behind
 * an RDMA device or a GPU (its path under <root>/devices, the chain of
 * bridges from its root complex down to it) and the NUMA node the kernel
 * gives that function. Transfers rank the devices that could carry them by
 * this (remote/paths.h): NUMA distance for host memory, PCIe hops for GPU
 * memory.
 *
 * The root is "/sys" in the daemon; the tests point it at a tree of their
 * own. Every read is a few small files: callers read a device once (RDMA
 * devices at discovery, a GPU at its first transfer), never per transfer.
 * Nothing here fails hard: what cannot be read is unknown (-1, ""). The
 * ranking (remote/paths.h) puts a device on an unknown NUMA node just
 * behind one on the memory's node and an unknown PCI place after any known
 * one, so that a machine whose sysfs says nothing keeps the discovery
 * order. Any thread; no state.
 */
#ifndef RDMAMEMD_TOPO_H
#define RDMAMEMD_TOPO_H

#define TOPO_SYSFS_DEFAULT "/sys"
/* The firmware's distance of a node to itself (ACPI SLIT). */
#define TOPO_NUMA_LOCAL 10
#define TOPO_PATH_MAX 256

struct topo_place {
	int numa_node;           /* -1: unknown, or a machine without NUMA */
	char pci[TOPO_PATH_MAX]; /* "pci0000:00/0000:00:01.0/0000:01:00.0"; "": unknown */
};

/*
 * RDMA device ibdev: <root>/class/infiniband/<ibdev>/device, or for a
 * device with no bus of its own (rxe, siw) the netdev its "parent" file
 * names: <root>/class/net/<netdev>/device. The place is that device's or,
 * when it has no numa_node (virtio-net's is the virtio device under the
 * PCI function), its nearest parent's that has one.
 */
void topo_rdma_device(const char *root, const char *ibdev, struct topo_place *ret);
/* The PCI function of bus id "0000:3b:00.0" (any case; a domain of eight
 * digits, as NVML writes it, is taken too): <root>/bus/pci/devices/<id>. */
void topo_pci_bus_id(const char *root, const char *bus_id, struct topo_place *ret);
/*
 * Links between two PCI functions: from each up to their nearest common
 * bridge (root complex included) and down to the other; 0 for the same
 * function. Two functions under different root complexes meet only at the
 * top: every level of both counts. -1 when either is unknown.
 */
int topo_pci_hops(const char *a, const char *b);
/* The firmware's distance from node from to node to (<root>/devices/system/
 * node/node<from>/distance; TOPO_NUMA_LOCAL for a node to itself), or -1
 * when either is unknown or the table says nothing. */
int topo_numa_distance(const char *root, int from, int to);

#endif
