/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake verbs and CUDA backends, linked by the daemon fuzzer and the test runner. */
#ifndef RDMAMEM_FAKE_H
#define RDMAMEM_FAKE_H

#include <stdatomic.h>
#include <stdbool.h>

struct vb_ops;

extern const struct vb_ops fake_vb_ops;
/* Every MR registration fails with ENOMEM while set. */
extern atomic_bool fake_verbs_fail_mr;
/* PDs, MRs and QPs allocated and not freed. */
extern atomic_int fake_verbs_live;
/* MRs registered and not deregistered. */
extern atomic_int fake_verbs_mrs;
/*
 * Holds MR registrations, or deregistrations, on their pool thread until
 * released with false: a test decides when they finish (the unit tests;
 * the fuzzer never holds).
 */
void fake_verbs_hold_reg(bool hold);
void fake_verbs_hold_dereg(bool hold);

/* Installs the fake CUDA driver (before the daemon's first GPU import);
 * without cuda.h at build time the daemon has no driver table to fake.
 * fake-cuda.h has the rest of its interface, for the unit tests. */
void fake_cuda_install(void);
/* IPC opens, VMM handles, reservations and mappings, and primary-context
 * retains not yet released. */
int fake_cuda_live(void);

#endif
