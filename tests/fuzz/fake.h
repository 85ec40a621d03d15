/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake verbs and CUDA backends for the daemon fuzzer. */
#ifndef RDMAMEM_FUZZ_FAKE_H
#define RDMAMEM_FUZZ_FAKE_H

#include <stdatomic.h>
#include <stdbool.h>

struct vb_ops;

extern const struct vb_ops fake_vb_ops;
/* Every MR registration fails with ENOMEM while set. */
extern atomic_bool fake_verbs_fail_mr;
/* PDs, MRs and QPs allocated and not freed. */
extern atomic_int fake_verbs_live;

/* Installs the fake CUDA driver (before the daemon's first GPU import);
 * without cuda.h at build time the daemon has no driver table to fake. */
void fake_cuda_install(void);
/* Device allocations, IPC opens and VMM mappings not yet released. */
int fake_cuda_live(void);

#endif
