/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/errinfo.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/gpu_keep.h"
#include "daemon/gpu/gpu_region.h"
#include "daemon/mem/keep.h"
#include "proto/errors.h"
#include "util/textbuf.h"

/* The word that starts text and the space after it. */
static const char *after_word(const char *text, const char *word)
{
	size_t n = strlen(word);

	return strncmp(text, word, n) == 0 && text[n] == ' ' ? text + n + 1 : NULL;
}

/* rec's kind line into p: "cuda-vmm SIZE" with its files, or
 * "cuda-ipc GPU HANDLE" without any. */
static int params_of(const struct keep_record *rec, struct gpu_import_params *p)
{
	const char *s;
	uint64_t v;

	if ((s = after_word(rec->text, GPU_KEEP_VMM))) {
		if (text_u64(&s, '\0', UINT64_MAX / CU_VMM_CHUNKS_MAX, &v) < 0 || v == 0 ||
		    rec->n_fds == 0 || rec->n_fds > CU_VMM_CHUNKS_MAX)
			return -EINVAL;
		p->memory = GPU_MEMORY_VMM;
		p->alloc_size = v;
		return 0;
	}
	if ((s = after_word(rec->text, GPU_KEEP_IPC))) {
		if (text_u64(&s, ' ', INT32_MAX, &v) < 0 || strlen(s) != 2 * CU_IPC_HANDLE_SIZE ||
		    rec->n_fds != 0)
			return -EINVAL;
		p->memory = GPU_MEMORY_IPC;
		p->gpu = (uint32_t)v;
		p->ipc_handle = s;
		return 0;
	}
	return -EINVAL;
}

static int gpu_restore(void *userdata, struct session *holder, struct keep_record *rec,
		       keep_restored_fn done, void *ctx, void **ret_job, struct errinfo *e)
{
	struct gpu_import_params p = {
		.offset = rec->offset,
		.length = rec->length,
		.access = rec->access,
		.id = rec->id,
	};
	struct gpu_import *job = NULL;
	int r;

	if (params_of(rec, &p) < 0) {
		for (unsigned i = 0; i < rec->n_fds; i++)
			rec->fds[i] = safe_close(rec->fds[i]);
		return errinfo_set(e, RDMAMEM_ERROR_INTERNAL, -EINVAL,
				   "a GPU region's line that this daemon does not write: '%.64s'",
				   rec->text);
	}
	/* Peeked from the holders the store keeps until the owner lets go:
	 * the import needs them once, the store nothing more. */
	memcpy(p.fds, rec->fds, rec->n_fds * sizeof(int));
	p.n_fds = rec->n_fds;
	rec->n_fds = 0;
	r = gpu_import_start(userdata, holder, &p, done, ctx, &job, e);
	if (r < 0)
		return r;
	/* (done may have run already: keep.c expects that) */
	*ret_job = job;
	return 0;
}

static void gpu_restore_cancel(void *userdata, void *job)
{
	(void)userdata;
	gpu_import_cancel(job);
}

static const struct keep_kind_ops gpu_keep_ops = {
	.restore = gpu_restore,
	.cancel = gpu_restore_cancel,
};

void gpu_keep_init(struct gpu_ctx *g, struct keep_ctx *k)
{
	keep_set_kinds(k, &gpu_keep_ops, g);
}
