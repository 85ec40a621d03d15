/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host memory regions: a range of a sealed memfd (or shmem file), mapped
 * MAP_SHARED into the daemon once and kept mapped while the region lives.
 * The region's memory kind "memfd" (struct region_mem_ops).
 */
#ifndef RDMAMEMD_REGION_MEMFD_H
#define RDMAMEMD_REGION_MEMFD_H

#include <stdint.h>

#include "daemon/mem/region.h"

struct memfd_import {
	int fd; /* taken on success */
	uint64_t offset;
	uint64_t length; /* 0: to the end of the file */
	unsigned access;
};

/*
 * Imports a memfd range for owner. Validates the fd (memfd or shmem file,
 * F_SEAL_SHRINK, range within st_size), maps it once MAP_SHARED, charges the
 * owner's quota and publishes the region in the registry. Returns 0 with a
 * reference for the owner in *ret, or a negative errno with *e filled in.
 */
int region_import_memfd(struct region_registry *registry, struct session *owner,
			struct memfd_import *imp, struct region **ret, struct errinfo *e);

/*
 * The host's huge pages of page bytes: what is one of "nr_hugepages",
 * "free_hugepages", "resv_hugepages" (free ones include those reserved by
 * mappings). -1 when the host has no such page size.
 */
#define HUGETLB_SYSFS "/sys/kernel/mm/hugepages/hugepages"
long long hugetlb_pages(uint64_t page, const char *what);

#endif
