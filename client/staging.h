/* SPDX-License-Identifier: BSD-3-Clause */
/* The connection's staging region for Read and Write (staging.c). */
#ifndef RDMAMEM_CLIENT_STAGING_H
#define RDMAMEM_CLIENT_STAGING_H

/* The staging memfd's size, and so the most one staged Copy moves. Pages
 * are only allocated as transfers touch them. */
#define STAGING_SIZE (4U << 20)
/*
 * Transfers from this size on go through it. At 4 KiB a staged Write took
 * 37 us where base64 took 50 on the build machine, at 64 KiB 41 us where
 * base64 took 1.6 ms (the fresh buffers base64 needs fault in page by page
 * there); below, the two are alike and base64 takes one lock, not two.
 */
#define STAGING_MIN 4096U

struct rdmamem_client;
struct rdmamem__staging; /* client-internal.h */

/*
 * The client's staging region, made on first use: 1 and *ret, 0 when there
 * is none to be had (the caller moves its bytes as base64), or the negative
 * errno of a connection that failed meanwhile (the client's error says why).
 */
int rdmamem__staging_get(struct rdmamem_client *c, struct rdmamem__staging **ret);

/* Unmaps this side; the daemon drops the region with the connection. */
void rdmamem__staging_done(struct rdmamem_client *c);

#endif
