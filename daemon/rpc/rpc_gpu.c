/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU memory as the methods see it: Register's GPU imports, ListGpus. */
#include <errno.h>
#include <stdlib.h>

#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/mem/keep.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "daemon/mem/region.h"
#include "daemon/rpc/rpc.h"
#include "daemon/rpc/rpc_gpu.h"
#include "daemon/rpc/rpc_rdma.h"

/* A Register waiting for its GPU import. */
struct gpu_call {
	struct rpc_deferred *call;
	const cJSON *devices; /* in the call's parameters */
	struct gpu_import *import;
	bool keep; /* kept across a restart (the import kept its fds for that) */
};

/* The client went away: the import's work finishes without anyone told. */
static void gpu_call_cancel(void *userdata)
{
	struct gpu_call *gc = userdata;

	gpu_import_cancel(gc->import);
	rpc_deferred_drop(gc->call);
	free(gc);
}

/* The region exists (or not): register it on the devices asked for, answer. */
static void gpu_imported(void *userdata, struct region *r, struct errinfo *e)
{
	struct gpu_call *gc = userdata;
	struct rpc_deferred *d = gc->call;
	const cJSON *devices = gc->devices;
	bool keep = gc->keep;

	free(gc);
	if (!r) {
		rpc_deferred_error(d, e);
		return;
	}
	if (keep)
		keep_region(r->registry->keep, r);
	/* The store holds its own copies: the daemon's go. */
	gpu_region_kept_fds_close(r);
	/* The handle waits for the registrations from here on. */
	rpc_deferred_on_cancel(d, NULL, NULL);
	if (rpc_register_on(d, r, devices, true) < 0)
		/* The client learns no region id from an error: keep none. */
		region_drop_owner(r);
}

int rpc_gpu_import(struct rpc_call *call, struct gpu_import_params *p, const cJSON *devices)
{
	struct errinfo e = {};
	struct gpu_call *gc;
	int r;

	gc = calloc(1, sizeof(*gc));
	if (!gc) {
		gpu_import_params_close(p);
		return -ENOMEM;
	}
	gc->devices = devices;
	/* The fd store takes a VMM region's fds, which the import keeps open
	 * only when the region will be kept. */
	gc->keep = p->keep;
	p->keep = p->keep && p->memory == GPU_MEMORY_VMM &&
		  keep_accepting(call->ctx->regions->keep);
	gc->call = rpc_defer(call, gpu_call_cancel, gc);
	/* gc may be gone when this returns: the import can end at once. */
	r = gpu_import_start(call->ctx->gpu, call->session, p, gpu_imported, gc, &gc->import, &e);
	if (r < 0) {
		struct rpc_deferred *d = gc->call;

		free(gc);
		if (e.name)
			rpc_deferred_error(d, &e);
		else
			rpc_deferred_fail(d, r);
	}
	return 0;
}

static void gpus_listed(void *userdata, const struct gpu_list_result *res)
{
	struct rpc_deferred *d = userdata;
	struct gpu_ctx *gpu = d->call->ctx->gpu;
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *driver, *gpus, *peer;
	struct errinfo e = {};
	bool ok = p != NULL;

	driver = p ? cJSON_AddObjectToObject(p, "driver") : NULL;
	gpus = p ? cJSON_AddArrayToObject(p, "gpus") : NULL;
	peer = p ? cJSON_AddObjectToObject(p, "peer_memory") : NULL;
	ok = ok && driver && gpus && peer;
	if (ok && !res->ran)
		ok = json_add_bool(driver, "loaded", false) == 0 &&
		     json_add_string(driver, "message",
				     "loaded when the first GPU import arrives; probe to load it "
				     "now") == 0;
	else if (ok && res->err < 0)
		ok = json_add_bool(driver, "loaded", false) == 0 &&
		     json_add_string(driver, "message", res->error) == 0;
	else if (ok)
		ok = json_add_bool(driver, "loaded", true) == 0;
	for (int i = 0; ok && i < res->n; i++) {
		const struct cu_device_info *g = &res->info[i];
		cJSON *o = cJSON_CreateObject(), *peers;

		ok = o != NULL;
		if (!ok)
			break;
		cJSON_AddItemToArray(gpus, o);
		ok = json_add_int(o, "ordinal", g->ordinal) == 0 &&
		     json_add_string(o, "name", g->name) == 0 &&
		     json_add_string(o, "pci_bus_id", g->pci_bus_id) == 0 &&
		     json_add_u64(o, "memory", g->total_mem) == 0 &&
		     json_add_bool(o, "dma_buf", g->dma_buf) == 0 &&
		     json_add_bool(o, "vmm", g->vmm) == 0 &&
		     json_add_bool(o, "vmm_posix_fd", g->vmm_posix_fd) == 0 &&
		     json_add_bool(o, "gpudirect_rdma_vmm", g->gdr_vmm) == 0 &&
		     json_add_int(o, "primary_context_refs", res->refs[i]) == 0 &&
		     json_add_bool(o, "context_kept", gpu_linger_held(&gpu->linger, g->ordinal)) ==
			     0 &&
		     json_add_int(o, "regions", gpu_regions_on(gpu, g->ordinal)) == 0;
		peers = ok ? cJSON_AddArrayToObject(o, "peers") : NULL;
		ok = ok && peers;
		for (int k = 0; ok && k < res->n_peers[i]; k++) {
			const struct cu_peer_info *pi = &res->peers[i][k];
			cJSON *q = cJSON_CreateObject();

			ok = q != NULL;
			if (!ok)
				break;
			cJSON_AddItemToArray(peers, q);
			ok = json_add_int(q, "ordinal", pi->ordinal) == 0 &&
			     json_add_bool(q, "access", pi->access) == 0 &&
			     (pi->performance_rank < 0 ||
			      json_add_int(q, "performance_rank", pi->performance_rank) == 0) &&
			     json_add_string(q, "copy_path", cu_copy_path_name(pi->path)) == 0 &&
			     json_add_u64(q, "peer_copies", pi->copies_peer) == 0 &&
			     json_add_u64(q, "staged_copies", pi->copies_staged) == 0;
		}
	}
	ok = ok && json_add_string(peer, "module", "nvidia_peermem") == 0 &&
	     json_add_bool(peer, "loaded", gpu_peer_memory_loaded()) == 0;
	if (ok) {
		rpc_deferred_reply(d, TAKE_PTR(p));
		return;
	}
	errinfo_set(&e, RDMAMEM_ERROR_INTERNAL, -ENOMEM, "out of memory");
	rpc_deferred_error(d, &e);
}

/* clang-format off */
static const struct varlink_symbol rpc_type_GpuPeer = VARLINK_DEFINE_TYPE(
	GpuPeer, NULL,
	VARLINK_FIELD_COMMENT("the other GPU"),
	VARLINK_FIELD(ordinal, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("cuDeviceCanAccessPeer: this GPU can reach the other's memory"),
	VARLINK_FIELD(access, VARLINK_BOOL, 0),
	VARLINK_FIELD_COMMENT(
		"CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK of the link, lower is faster;\n"
		"absent when the driver does not rank it"),
	VARLINK_FIELD(performance_rank, VARLINK_INT, VARLINK_NULLABLE),
	VARLINK_FIELD_COMMENT(
		"How Copy moves bytes between the two GPUs: \"peer\" (peer access\n"
		"enabled both ways: NVLink or PCIe P2P) when each can reach the other,\n"
		"else \"staged\" (the driver stages through host memory)"),
	VARLINK_FIELD(copy_path, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("Copies from this GPU's memory to the other's so far, by path"),
	VARLINK_FIELD(peer_copies, VARLINK_U64, 0),
	VARLINK_FIELD(staged_copies, VARLINK_U64, 0));

static const struct varlink_symbol rpc_type_Gpu = VARLINK_DEFINE_TYPE(
	Gpu, NULL,
	VARLINK_FIELD(ordinal, VARLINK_INT, 0),
	VARLINK_FIELD(name, VARLINK_STRING, 0),
	VARLINK_FIELD(pci_bus_id, VARLINK_STRING, 0),
	VARLINK_FIELD(memory, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT(
		"CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: GPU memory registers through\n"
		"ibv_reg_dmabuf_mr"),
	VARLINK_FIELD(dma_buf, VARLINK_BOOL, 0),
	VARLINK_FIELD(vmm, VARLINK_BOOL, 0),
	VARLINK_FIELD(vmm_posix_fd, VARLINK_BOOL, 0),
	VARLINK_FIELD(gpudirect_rdma_vmm, VARLINK_BOOL, 0),
	VARLINK_FIELD_COMMENT(
		"The daemon's retains of the GPU's primary context: one per import\n"
		"of its memory (an IPC open: of the context it was opened in), one\n"
		"per host region page-locked through it, and one its own while\n"
		"context_kept; 0 when it holds nothing"),
	VARLINK_FIELD(primary_context_refs, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT(
		"The daemon keeps the context from the GPU's first region until\n"
		"context-linger-sec after its last, so that the next import does not\n"
		"create it again"),
	VARLINK_FIELD(context_kept, VARLINK_BOOL, 0),
	VARLINK_FIELD(regions, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("every other GPU, as this one sees it"),
	VARLINK_FIELD_BY_TYPE(peers, rpc_type_GpuPeer, VARLINK_ARRAY));
/* clang-format on */

struct list_gpus_params {
	bool probe;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	ListGpus,
	"The CUDA driver, the GPUs and peer-memory support (nvidia_peermem, for\n"
	"ibv_reg_mr on GPU addresses). The daemon loads the driver on the first GPU\n"
	"import; probe loads it now.",
	VARLINK_INPUT(struct list_gpus_params, probe, VARLINK_BOOL, VARLINK_NULLABLE),
	VARLINK_OUTPUT_INLINE(driver, 0, VARLINK_FIELD(loaded, VARLINK_BOOL, 0),
			      VARLINK_FIELD(message, VARLINK_STRING, VARLINK_NULLABLE)),
	VARLINK_OUTPUT_BY_TYPE(gpus, rpc_type_Gpu, VARLINK_ARRAY),
	VARLINK_OUTPUT_INLINE(peer_memory, 0, VARLINK_FIELD(module, VARLINK_STRING, 0),
			      VARLINK_FIELD(loaded, VARLINK_BOOL, 0)));
/* clang-format on */

static int method_list_gpus(struct rpc_call *call, void *params)
{
	const struct list_gpus_params *p = params;
	struct rpc_deferred *d;
	int r;

	/* No cancel hook: if the client leaves, the answer is dropped. */
	d = rpc_defer(call, NULL, NULL);
	r = gpu_list(call->ctx->gpu, p->probe, gpus_listed, d);
	if (r < 0)
		rpc_deferred_fail(d, r);
	return 0;
}

const struct rpc_method rpc_gpu_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, ListGpus, method_list_gpus,
		   RPC_PARAMS(struct list_gpus_params)),
	{},
};
