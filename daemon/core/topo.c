/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/topo.h"
#include "util/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose);

/* The first line of <dir>/<name>, without its newline; -errno. */
static int read_line(const char *dir, const char *name, char *buf, size_t size)
{
	_cleanup_(fclosep) FILE *f = NULL;
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)size, f))
		return -ENODATA;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/*
 * link (a sysfs link to a device) resolved, as a path under <root>/devices,
 * into ret->pci, with that device's numa_node. ret is left unknown when
 * link does not resolve there.
 *
 * The device is the nearest of the link's target and its parents that has
 * a numa_node file: the bus function. A netdev's "device" is not always
 * one: virtio-net's is the virtio device (.../0000:81:00.0/virtio1), a
 * child of the PCI function with no numa_node of its own. Without one
 * anywhere up to <root>/devices, the target itself, node unknown.
 */
static void place_of(const char *root, const char *link, struct topo_place *ret)
{
	char devices[PATH_MAX], top[PATH_MAX], real[PATH_MAX], dir[PATH_MAX], node[16];
	const char *at = real;
	size_t n;

	*ret = (struct topo_place){ .numa_node = -1 };
	if ((size_t)snprintf(devices, sizeof(devices), "%s/devices", root) >= sizeof(devices) ||
	    !realpath(devices, top) || !realpath(link, real))
		return;
	n = strlen(top);
	if (strncmp(real, top, n) != 0 || real[n] != '/')
		return;
	snprintf(dir, sizeof(dir), "%s", real);
	for (;;) {
		char *slash;

		/* "-1" on a machine without NUMA: unknown, as it should be. */
		if (read_line(dir, "numa_node", node, sizeof(node)) == 0) {
			ret->numa_node = atoi(node) >= 0 ? atoi(node) : -1;
			at = dir;
			break;
		}
		/* dir is top/..., so there is a '/' at n or after. */
		slash = strrchr(dir, '/');
		if ((size_t)(slash - dir) <= n)
			break;
		*slash = '\0';
	}
	if (strlen(at + n + 1) < sizeof(ret->pci))
		snprintf(ret->pci, sizeof(ret->pci), "%s", at + n + 1);
	else
		ret->numa_node = -1;
}

void topo_rdma_device(const char *root, const char *ibdev, struct topo_place *ret)
{
	char dir[PATH_MAX], link[PATH_MAX], parent[64];

	*ret = (struct topo_place){ .numa_node = -1 };
	if ((size_t)snprintf(dir, sizeof(dir), "%s/class/infiniband/%s", root, ibdev) >=
	    sizeof(dir))
		return;
	if ((size_t)snprintf(link, sizeof(link), "%s/device", dir) >= sizeof(link))
		return;
	place_of(root, link, ret);
	if (ret->pci[0])
		return;
	/* A software device (rxe): the netdev it runs on is what sits on a bus. */
	if (read_line(dir, "parent", parent, sizeof(parent)) < 0 || !parent[0] ||
	    strchr(parent, '/'))
		return;
	if ((size_t)snprintf(link, sizeof(link), "%s/class/net/%s/device", root, parent) <
	    sizeof(link))
		place_of(root, link, ret);
}

void topo_pci_bus_id(const char *root, const char *bus_id, struct topo_place *ret)
{
	char id[32], link[PATH_MAX];
	const char *colon = strchr(bus_id, ':');
	size_t i;

	*ret = (struct topo_place){ .numa_node = -1 };
	/* "00000000:3B:00.0" (NVML) → "0000:3b:00.0" (sysfs). */
	if (colon && colon - bus_id == 8)
		bus_id += 4;
	for (i = 0; bus_id[i] && i < sizeof(id) - 1; i++) {
		if (bus_id[i] == '/')
			return;
		id[i] = (char)tolower((unsigned char)bus_id[i]);
	}
	id[i] = '\0';
	if (!id[0] ||
	    (size_t)snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, id) >= sizeof(link))
		return;
	place_of(root, link, ret);
}

/* The number of '/'-separated components of p. */
static int depth(const char *p)
{
	int n = 1;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

int topo_pci_hops(const char *a, const char *b)
{
	int common = 0;
	size_t i = 0;

	if (!a[0] || !b[0])
		return -1;
	/* Whole components in common: they match up to a '/' (or both end). */
	for (;; i++) {
		bool end_a = a[i] == '\0' || a[i] == '/', end_b = b[i] == '\0' || b[i] == '/';

		if (end_a || end_b) {
			if (!(end_a && end_b))
				break;
			common++;
			if (!a[i] || !b[i])
				break;
			continue;
		}
		if (a[i] != b[i])
			break;
	}
	return depth(a) - common + depth(b) - common;
}

int topo_numa_distance(const char *root, int from, int to)
{
	char dir[PATH_MAX], line[1024], *p, *end;
	long d = -1;

	if (from < 0 || to < 0)
		return -1;
	if (from == to)
		return TOPO_NUMA_LOCAL;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/devices/system/node/node%d", root, from) >=
		    sizeof(dir) ||
	    read_line(dir, "distance", line, sizeof(line)) < 0)
		return -1;
	p = line;
	for (int i = 0; i <= to; i++) {
		errno = 0;
		d = strtol(p, &end, 10);
		if (end == p || errno)
			return -1;
		p = end;
	}
	return d > 0 && d < INT_MAX ? (int)d : -1;
}
