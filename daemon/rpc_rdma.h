/* SPDX-License-Identifier: BSD-3-Clause */
/* What the region and RDMA methods share. */
#ifndef RDMAMEMD_RPC_RDMA_H
#define RDMAMEMD_RPC_RDMA_H

#include <stdbool.h>

#include <cjson/cJSON.h>

struct region;
struct rpc_call;

/*
 * Registers r on the devices named by devices ("all", or a list) and answers
 * call once every registration has settled: with the whole region
 * (Register) or with the registrations asked for (RegisterOn). Returns 0,
 * RPC_PENDING, or a negative errno not yet answered.
 */
int rpc_register_on(struct rpc_call *call, struct region *r, const cJSON *devices,
		    bool whole_region);

/* The region as queries show it; detailed adds source, shares and leases. */
cJSON *region_json(const struct region *r, bool detailed);

#endif
