/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A ring of receive buffers on one queue pair: RECV_RING_DEPTH buffers
 * of RECV_RING_BYTES, registered (local write) in the QP's protection
 * domain, and the QP's CQ on a completion channel polled in the loop. The
 * endpoint gives one to each queue pair a peer connected with an export's
 * token, for the notifications that peer SENDs (remote/notify.c).
 *
 * Every buffer is posted before the connection is accepted. On readable:
 * take and ack the channel's event, re-arm, poll; each successful receive
 * is handed to received() (the bytes are valid during the call only) and
 * its buffer posted again at once. A turn of the loop takes at most
 * RECV_RING_TURN_MAX completions: a peer that keeps sending must not keep
 * the loop from its clients, so what is left is taken on the next turns
 * (an idle handle: the channel raises no event for completions already
 * queued). A receive that completes in error is counted, not posted
 * again: a flush means the QP is going away, any other status (a SEND
 * longer than a buffer) leaves the QP in error, and the peer's link fails
 * with it. A receive that cannot be posted again kills the ring: it stops
 * polling (its channel would stay readable and wake every turn) and the
 * peer's next SENDs find no buffer. Nothing blocks.
 *
 * received() may end the ring's connection (what it hands on answers a
 * client, whose next call may revoke the token that admitted it):
 * recv_ring_free() from inside it stops the batch at once, and nothing is
 * posted or handed on after it.
 *
 * Teardown: the QP first (the device writes no buffer after that), then
 * recv_ring_free(), which closes the handles and frees the CQ, the MR and
 * the buffers once libuv let go of them. Loop thread only.
 */
#ifndef RDMAMEMD_RECV_RING_H
#define RDMAMEMD_RECV_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/rdma/cq_watch.h"
#include "daemon/rdma/verbs.h"

/*
 * Receives posted on each queue pair a peer connected with an export's
 * token (another daemon's link, which SENDs notifications after its
 * writes), and the bytes of each: a notification's header and its at most
 * 4 KiB (remote/notify_msg.h). A buffer is posted again as soon as what it
 * received was handed on; a peer with more SENDs in flight than this waits
 * (RNR retries) until buffers are posted again.
 */
#define RECV_RING_DEPTH 16U
#define RECV_RING_BYTES 4120U
/* Completions taken per turn of the loop, at most. */
#define RECV_RING_TURN_MAX (4U * RECV_RING_DEPTH)

struct recv_ring_stats {
	uint64_t received; /* completed without error, handed on */
	uint64_t errors;   /* completed in error, flushes included */
	uint64_t reposted;
};

struct recv_ring {
	struct cq_watch watch; /* .cq: the QP's, both queues */
	unsigned n_handles;    /* the watch's, not yet closed; the ring is freed with the last */
	struct vb_mr *mr;
	uint8_t *buf; /* RECV_RING_DEPTH × RECV_RING_BYTES */
	uint32_t lkey;
	struct vb_qp *qp; /* recv_ring_start()'s; NULL once freed */
	/* A CQ or post failure, or freed: nothing is posted again, and the
	 * watch is stopped. */
	bool dead;
	bool freed; /* recv_ring_free() ran: nothing is handed on either */
	void (*received)(void *userdata, const uint8_t *data, size_t len);
	void *userdata;
	struct recv_ring_stats stats;
};

/* The CQ (make the QP on ring->cq), the buffers and their MR in pd. */
int recv_ring_new(uv_loop_t *loop, struct vb_device *dev, struct vb_pd *pd,
		  void (*received)(void *userdata, const uint8_t *data, size_t len), void *userdata,
		  struct recv_ring **ret);
/* Posts every buffer on qp (made on ring->cq), before the peer may send. */
int recv_ring_start(struct recv_ring *ring, struct vb_qp *qp);
/* After the QP is destroyed (or was never made). NULL is fine. */
void recv_ring_free(struct recv_ring *ring);

#endif
