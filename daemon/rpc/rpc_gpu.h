/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPU import as the Register method serves it (rpc_gpu.c). */
#ifndef RDMAMEMD_RPC_GPU_H
#define RDMAMEMD_RPC_GPU_H

#include <cjson/cJSON.h>

struct gpu_import_params;
struct rpc_call;

/*
 * Register for GPU memory: imports it (gpu.c) and answers call with the
 * region, after its RDMA registrations on devices (in the call's
 * parameters; NULL for none). Returns 0 (the call is deferred, or answered),
 * or a negative errno not answered. Takes p->fds.
 */
int rpc_gpu_import(struct rpc_call *call, struct gpu_import_params *p, const cJSON *devices);

#endif
