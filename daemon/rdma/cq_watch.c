/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/rdma/cq_watch.h"
#include "util/macro.h"

static void on_more(uv_idle_t *h);

enum take_end {
	TAKE_DRAINED, /* the CQ was empty, or the watch stopped */
	TAKE_CAPPED,  /* turn_max reached: more may be queued */
	/* A completion callback said stop, or the CQ failed: the owner may
	 * be going away, so nothing of the watch is touched after it. */
	TAKE_HALTED,
};

static enum take_end take(struct cq_watch *w, unsigned *ret_taken)
{
	struct vb_wc wc[CQ_WATCH_BATCH];
	int n;

	*ret_taken = 0;
	do {
		n = vb->cq_poll(w->cq, wc, CQ_WATCH_BATCH);
		if (n < 0) {
			cq_watch_stop(w);
			w->ops->failed(w, false, n);
			return TAKE_HALTED;
		}
		for (int i = 0; i < n; i++)
			if (!w->ops->completion(w, &wc[i]))
				return TAKE_HALTED;
		*ret_taken += (unsigned)n;
		/* Stopped by a completion: the rest of its batch was still
		 * handed on, nothing more is polled. */
		if (w->stopped)
			return TAKE_DRAINED;
	} while (n == CQ_WATCH_BATCH && *ret_taken < w->turn_max);
	return n == CQ_WATCH_BATCH ? TAKE_CAPPED : TAKE_DRAINED;
}

/* A turn's share; the idle handle comes back for what the cap left. */
static void turn(struct cq_watch *w)
{
	unsigned n;

	switch (take(w, &n)) {
	case TAKE_HALTED:
		return;
	case TAKE_CAPPED:
		uv_idle_start(&w->more, on_more);
		break;
	case TAKE_DRAINED:
		uv_idle_stop(&w->more);
		break;
	}
	if (n > 0 && !w->stopped && w->ops->taken)
		w->ops->taken(w);
}

static void on_more(uv_idle_t *h)
{
	turn(container_of(h, struct cq_watch, more));
}

static void on_readable(uv_poll_t *h, int status, int events)
{
	struct cq_watch *w = container_of(h, struct cq_watch, poll);

	(void)events;
	if (status < 0) {
		/* Level-triggered: an error left armed would wake every turn. */
		cq_watch_stop(w);
		w->ops->failed(w, true, status);
		return;
	}
	/* Ack and re-arm before polling: a completion after the poll then
	 * raises a new event instead of being missed. */
	while (vb->cq_event(w->cq) == 0)
		;
	turn(w);
}

int cq_watch_init(struct cq_watch *w, uv_loop_t *loop, struct vb_cq *cq, unsigned turn_max,
		  const struct cq_watch_ops *ops, void *data)
{
	int r = uv_poll_init(loop, &w->poll, vb->cq_fd(cq));

	if (r < 0)
		return r;
	uv_idle_init(loop, &w->more);
	w->poll.data = w->more.data = data;
	w->cq = cq;
	w->ops = ops;
	w->turn_max = turn_max;
	w->stopped = true;
	return 0;
}

int cq_watch_start(struct cq_watch *w)
{
	w->stopped = false;
	return uv_poll_start(&w->poll, UV_READABLE, on_readable);
}

void cq_watch_stop(struct cq_watch *w)
{
	w->stopped = true;
	uv_poll_stop(&w->poll);
	uv_idle_stop(&w->more);
}

void cq_watch_close(struct cq_watch *w, uv_close_cb close_cb)
{
	w->stopped = true;
	if (!uv_is_closing((uv_handle_t *)&w->poll))
		uv_close((uv_handle_t *)&w->poll, close_cb);
	if (!uv_is_closing((uv_handle_t *)&w->more))
		uv_close((uv_handle_t *)&w->more, close_cb);
}

bool cq_watch_take(struct cq_watch *w)
{
	unsigned n;

	return take(w, &n) == TAKE_CAPPED;
}
