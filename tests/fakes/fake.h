/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake verbs and CUDA backends, linked by the daemon fuzzer and the test runner. */
#ifndef RDMAMEM_FAKE_H
#define RDMAMEM_FAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/rdma/verbs.h"

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

/*
 * The daemon's own connections and posts (loop thread; fake_verbs_reset()
 * puts every knob back):
 * - hold_completions(true): posted WRs wait, not run, until released with
 *   false (then each runs in post order and completes);
 * - fail_wr(n, status): the n-th WR run from now completes with status,
 *   and its QP goes to error (the rest flush);
 * - cq_cap(n): CQs created from now hold n entries whatever was asked,
 *   so that more completions overflow them;
 * - cm_fault: UNREACHABLE (address resolution fails), SILENT (it never
 *   answers: the caller's timeout must end it);
 * - disconnect_all(): every established connection drops, both sides
 *   (DISCONNECTED, QPs to error), as when the remote daemon dies;
 * - fail_recv(true): receives are refused, as a full receive queue is.
 */
enum fake_cm_fault {
	FAKE_CM_NONE,
	FAKE_CM_UNREACHABLE,
	FAKE_CM_SILENT,
};
void fake_verbs_hold_completions(bool hold);
/* WRs posted and held, on every QP. */
size_t fake_verbs_held(void);
void fake_verbs_fail_wr(unsigned n, enum vb_wc_status status);
void fake_verbs_cq_cap(unsigned cap);
void fake_verbs_cm_fault(enum fake_cm_fault f);
void fake_verbs_disconnect_all(void);
/*
 * Devices: devices_open() from now opens n (fake0 .. fake<n-1>; 0 or 1:
 * fake0 alone, as after reset). With several, device i has a second GID,
 * ::ffff:10.0.<i>.1 (RoCEv2), and a connection to 10.0.<i>.x leaves
 * through device i (others through fake0); the passive side of every
 * connection is fake0.
 */
void fake_verbs_devices(unsigned n);
/*
 * dma-buf MRs: each call is recorded (n counts them; fd_open: the fd was
 * an open file). While dmabuf_at_iova is set, the MR reaches its bytes at
 * iova, which is right for the fake CUDA (its device memory is host memory
 * at the device address) and wrong for a real GPU; unset (the default),
 * it covers nothing, and a WR that uses it fails as out of bounds.
 */
struct fake_dmabuf_call {
	unsigned n;
	bool fd_open;
	uint64_t offset, len, iova;
};
/*
 * When set (a benchmark points it at memory it shares with the daemon's
 * process), each post of send WRs adds the time the fake device spent
 * running them (copies, completions: the NIC's work, not the poster's) to
 * nic_ns, counts them in wrs, and stamps when it returned in last_post_ns
 * (CLOCK_MONOTONIC). Written by the posting thread, read after the call.
 */
struct fake_verbs_clock {
	_Atomic uint64_t nic_ns, last_post_ns, wrs;
};
extern struct fake_verbs_clock *fake_verbs_clock;

extern atomic_bool fake_verbs_dmabuf_at_iova;
extern struct fake_dmabuf_call fake_verbs_last_dmabuf; /* read while no registration runs */
/* Every receive posted from now fails (ENOMEM) while set. */
void fake_verbs_fail_recv(bool fail);
/* Posts on a QP already destroyed (refused, and counted here). */
unsigned fake_verbs_dead_posts(void);
/* qp's peer keeps SENDing: the len bytes of data (at most 256) land in
 * each receive as soon as it is posted there, n times in all (as a peer
 * does that always has the next SEND waiting in RNR retries). */
void fake_verbs_flood(struct vb_qp *qp, const void *data, size_t len, unsigned n);
unsigned fake_verbs_flood_left(void);
/* The last active connect's parameters (private_data NULL) and how many
 * connects were made since the last reset. */
unsigned fake_verbs_last_connect(struct vb_conn_param *ret);
/* What qp's peer may do through it (VB_ACCESS_REMOTE_*): the passive side's
 * as the CM sets it, the active side's (conn_qp_create) 0. */
unsigned fake_verbs_qp_access(const struct vb_qp *qp);
/* WRs run (completed, well or not) since the process started. */
uint64_t fake_verbs_wrs_run(void);
void fake_verbs_reset(void);

/* Installs the fake CUDA driver (before the daemon's first GPU import);
 * without cuda.h at build time the daemon has no driver table to fake.
 * fake-cuda.h has the rest of its interface, for the unit tests. */
void fake_cuda_install(void);
/* IPC opens, VMM handles, reservations and mappings, and primary-context
 * retains not yet released. */
int fake_cuda_live(void);

#endif
