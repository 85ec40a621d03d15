/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/log.h"
#include "daemon/rdma/recv_ring.h"
#include "util/macro.h"

static struct vb_recv_wr recv_wr(const struct recv_ring *ring, uint64_t i)
{
	return (struct vb_recv_wr){ .wr_id = i,
				    .addr = (uint64_t)(uintptr_t)(ring->buf + i * RECV_RING_BYTES),
				    .lkey = ring->lkey,
				    .length = RECV_RING_BYTES };
}

/* Once both handles are closed. */
static void on_closed(uv_handle_t *h)
{
	struct recv_ring *ring = h->data;

	if (--ring->n_handles > 0)
		return;
	vb->cq_destroy(ring->watch.cq);
	if (ring->mr)
		vb->mr_dereg(ring->mr);
	free(ring->buf);
	free(ring);
}

/* Nothing is taken or posted any more: the watch no longer wakes the loop. */
static void ring_stop(struct recv_ring *ring)
{
	ring->dead = true;
	cq_watch_stop(&ring->watch);
}

void recv_ring_free(struct recv_ring *ring)
{
	if (!ring)
		return;
	/* Maybe from inside received(): the batch being walked stops at
	 * once (take()), and the QP is not touched again. */
	ring_stop(ring);
	ring->freed = true;
	ring->qp = NULL;
	cq_watch_close(&ring->watch, on_closed);
}

static void repost(struct recv_ring *ring, uint64_t i)
{
	struct vb_recv_wr w = recv_wr(ring, i);
	size_t posted = 0;
	int r = vb->qp_post_recv(ring->qp, &w, 1, &posted);

	if (r < 0) {
		ring_stop(ring);
		log_warning_errno(r, "Cannot post a receive again: %m");
		return;
	}
	ring->stats.reposted++;
}

static void on_wc(struct recv_ring *ring, const struct vb_wc *wc)
{
	if (!wc->recv || wc->wr_id >= RECV_RING_DEPTH)
		return; /* the passive side posts no sends */
	if (wc->status != VB_WC_SUCCESS) {
		ring->stats.errors++;
		if (wc->status != VB_WC_FLUSH_ERR)
			log_notice("A receive failed: %s (vendor error 0x%x)", wc->status_name,
				   wc->vendor_err);
		return;
	}
	ring->stats.received++;
	ring->received(ring->userdata, ring->buf + wc->wr_id * RECV_RING_BYTES,
		       MIN(wc->byte_len, RECV_RING_BYTES));
	if (!ring->dead)
		repost(ring, wc->wr_id);
}

/*
 * A ring that dies on the way stops taking: freed (received() ended its
 * connection), at once, the rest of the batch unread; dead otherwise (a
 * failed re-post), after the batch, whose receives are still handed on.
 */
static bool ring_completion(struct cq_watch *w, const struct vb_wc *wc)
{
	struct recv_ring *ring = container_of(w, struct recv_ring, watch);

	on_wc(ring, wc);
	return !ring->freed;
}

static void ring_failed(struct cq_watch *w, bool channel, int error)
{
	struct recv_ring *ring = container_of(w, struct recv_ring, watch);

	ring_stop(ring);
	if (channel)
		log_warning("Receive channel failed: %s", uv_strerror(error));
	else
		log_warning_errno(error, "Receive queue failed: %m");
}

static const struct cq_watch_ops ring_watch_ops = {
	.completion = ring_completion,
	.failed = ring_failed,
};

int recv_ring_new(uv_loop_t *loop, struct vb_device *dev, struct vb_pd *pd,
		  void (*received)(void *userdata, const uint8_t *data, size_t len), void *userdata,
		  struct recv_ring **ret)
{
	size_t size = (size_t)RECV_RING_DEPTH * RECV_RING_BYTES;
	struct recv_ring *ring = calloc(1, sizeof(*ring));
	struct vb_cq *cq = NULL;
	uint32_t rkey;
	int r;

	if (!ring)
		return -ENOMEM;
	ring->received = received;
	ring->userdata = userdata;
	ring->buf = malloc(size);
	if (!ring->buf) {
		free(ring);
		return -ENOMEM;
	}
	/* Small and once per connection: on the loop, like the QP itself. */
	r = vb->mr_reg(pd, ring->buf, size, VB_ACCESS_LOCAL_WRITE, &ring->mr);
	if (r == 0)
		r = vb->cq_create(dev, RECV_RING_DEPTH, &cq);
	if (r == 0)
		r = cq_watch_init(&ring->watch, loop, cq, RECV_RING_TURN_MAX, &ring_watch_ops,
				  ring);
	if (r < 0) {
		/* No handle was made: freed here. */
		vb->cq_destroy(cq);
		if (ring->mr)
			vb->mr_dereg(ring->mr);
		free(ring->buf);
		free(ring);
		return r;
	}
	ring->n_handles = 2;
	vb->mr_keys(ring->mr, &ring->lkey, &rkey);
	*ret = ring;
	return 0;
}

int recv_ring_start(struct recv_ring *ring, struct vb_qp *qp)
{
	struct vb_recv_wr w[RECV_RING_DEPTH];
	size_t posted = 0;
	int r;

	ring->qp = qp;
	for (uint64_t i = 0; i < RECV_RING_DEPTH; i++)
		w[i] = recv_wr(ring, i);
	r = vb->qp_post_recv(qp, w, RECV_RING_DEPTH, &posted);
	if (r < 0) {
		ring->dead = true;
		return r;
	}
	return cq_watch_start(&ring->watch);
}
