/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RDMA devices the daemon opened: their attributes, their asynchronous
 * events, and one protection domain per device per uid that owns memory on
 * it (created on first need), so that a peer admitted for one uid can never
 * use another uid's keys.
 */
#ifndef RDMAMEMD_DEVICE_H
#define RDMAMEMD_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "daemon/core/topo.h"
#include "util/list.h"
#include "daemon/rdma/verbs.h"

struct rdma_ctx;

#define DEVICE_EVENTS_KEPT 8

struct uid_pd {
	struct list_head link; /* in device->pds */
	uid_t uid;
	struct vb_pd *pd;
};

/*
 * One-sided work a daemon's own queue pairs carried out (remote/link.c
 * counts them as their completions retire): READs bring bytes in, WRITEs
 * send bytes out. A link keeps one, its device another, so a transfer
 * striped over several device pairs shows the split.
 */
struct xfer_count {
	uint64_t reads, bytes_in;   /* RDMA READ work requests completed */
	uint64_t writes, bytes_out; /* RDMA WRITE work requests completed */
};

struct device {
	struct list_head link; /* in rdma->devices */
	struct rdma_ctx *rdma;
	struct vb_device *vb;
	struct vb_device_info info;
	const char *backend; /* "mlx5" when mlx5dv says so, else "ibv" */
	bool fatal;          /* IBV_EVENT_DEVICE_FATAL seen */
	/* Its PCI function and NUMA node, read once at discovery: transfers
	 * rank devices by their distance to the memory (remote/paths.h). */
	struct topo_place place;
	uv_poll_t poll;
	bool polling;
	struct list_head pds;
	unsigned n_pds; /* on pds: ListDevices counts without a walk */
	uint64_t n_mrs, mr_bytes;
	unsigned n_connections;
	struct xfer_count xfer; /* every link on this device, since start */
	struct {
		uint64_t msec; /* uv_now() */
		char text[64];
	} events[DEVICE_EVENTS_KEPT];
	unsigned n_events; /* ever seen; the last DEVICE_EVENTS_KEPT are kept */
};

/* Opens the devices the configuration allows. No device is no error. */
int devices_open(struct rdma_ctx *rdma);
/* Stops watching events (shutdown), so the loop can end. */
void devices_stop(struct rdma_ctx *rdma);
/* Frees PDs, then contexts: after every registration and QP is gone. */
void devices_free(struct rdma_ctx *rdma);

struct device *device_find(struct rdma_ctx *rdma, const char *name);

/* uid's protection domain on dev, allocated on first need. */
int device_pd(struct device *dev, uid_t uid, struct vb_pd **ret);

/* Whether s has the form of a device name: 1 to VB_NAME_MAX - 1 of
 * [A-Za-z0-9_.-] (what a client or a descriptor may name). */
bool device_name_is_valid(const char *s);

/* Whether name passes the allow and deny lists. */
bool device_allowed(const struct rdma_ctx *rdma, const char *name);

#endif
