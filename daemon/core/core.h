/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every subsystem of the daemon shares: the loop, the configuration,
 * the counters, the accounts and the pool's queue for client-made work.
 * daemon.c owns it and composes it with the subsystems' own contexts
 * (struct region_registry, rdma_ctx, gpu_ctx, server), each of which keeps
 * a pointer to it. Loop thread only: the pool touches none of it.
 */
#ifndef RDMAMEMD_CORE_H
#define RDMAMEMD_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/core/config.h"
#include "daemon/core/stats.h"

struct account_table;
struct offload;

#define RDMAMEMD_VERSION "0.1.0"

/* fds the daemon holds for itself (sockets, signalfd, epoll, the loop's own,
 * rdmacm channels), and for each RDMA device it opens: a generous allowance,
 * for GetStatus's fds_needed. */
#define DAEMON_FDS_OWN 64U
#define DAEMON_FDS_PER_DEVICE 8U
/* And for each queue pair to another daemon (daemon/remote/link.c): its
 * rdmacm event channel and its completion channel. */
#define DAEMON_FDS_PER_LINK 2U

struct core {
	uv_loop_t *loop;
	struct daemon_config cfg;
	struct stats stats;
	/* Pointers, not members, so that this header stays below every module
	 * that uses it (daemon.c owns them). */
	struct account_table *accounts; /* uid → struct account while the uid has anything */
	struct offload *offload;        /* client-made CPU work on the pool */
	uint64_t start_msec;            /* uv_now() at start */
	bool shutting_down;             /* no new connections; the loop ends once drained */
};

/* Milliseconds since the daemon started. */
static inline uint64_t core_uptime_msec(const struct core *c)
{
	return uv_now(c->loop) - c->start_msec;
}

/* Closes h unless it was never initialised (no loop) or is closing already:
 * safe to call from every teardown path. */
static inline void core_close_handle(uv_handle_t *h)
{
	if (h->loop && !uv_is_closing(h))
		uv_close(h, NULL);
}

#endif
