/* SPDX-License-Identifier: BSD-3-Clause */
/* What the region and RDMA methods share. */
#ifndef RDMAMEMD_RPC_RDMA_H
#define RDMAMEMD_RPC_RDMA_H

#include <stdbool.h>

#include <cjson/cJSON.h>

struct region;
struct rpc_deferred;
struct varlink_symbol;

/* A region's registration on a device, as Register and RegisterOn answer. */
extern const struct varlink_symbol rpc_type_Registration;

/*
 * Registers r on the devices named by devices ("all", a list, or NULL for
 * none) and answers d once every registration has settled: with the whole
 * region (Register and Reclaim, with its reclaim token when it is kept) or
 * with the registrations asked for (RegisterOn). Ends
 * d, now or later (its on_cancel is replaced while it waits). Returns 0, or
 * a negative errno when it answered an error at once (bad 'devices', a
 * region that cannot be registered, OOM): Register then keeps no region.
 */
int rpc_register_on(struct rpc_deferred *d, struct region *r, const cJSON *devices,
		    bool whole_region);

/* Checks devices as rpc_register_on() will, before a call changes
 * anything: 0, or the error answered. */
int rpc_check_devices(struct rpc_call *call, const cJSON *devices);

/* Gives the fd store's keeper (mem/keep.h) the registrations' side (which
 * devices a region is on, registering a restored one again) and the GPU
 * kinds' restore (gpu/gpu_keep.h). */
void rpc_keep_init(struct rpc_ctx *ctx);

/*
 * The region as queries show it, written as members of the object open in
 * o; detailed adds source, shares and leases. In two halves for a caller
 * that adds registrations of its own: _head ends inside the registrations
 * array, after the region's own; _tail closes it and writes the rest.
 */
struct json_out;
void region_write(struct json_out *o, const struct region *r, bool detailed);
void region_write_head(struct json_out *o, const struct region *r);
void region_write_tail(struct json_out *o, const struct region *r, bool detailed);

#endif
