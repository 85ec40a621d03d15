/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma subsystem's context: the open devices, the rdmacm listeners,
 * the remote peers' queue pairs, the access tokens that admit them, the
 * networks they may come from, and its counters. device.c, endpoint.c,
 * token.c and mreg.c work on it; daemon.c composes it. Loop only: pool work
 * (registrations) touches its own mreg and reports back on the loop.
 */
#ifndef RDMAMEMD_RDMA_H
#define RDMAMEMD_RDMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/idmap.h"
#include "util/idseq.h"
#include "util/list.h"

struct core;
struct rconn;
struct vb_device;

/*
 * Every live token, found in O(1) by a keyed hash of its bytes (SipHash with
 * this process's random key: a client can neither aim at a bucket nor learn
 * from the time a lookup takes which hashes are in use); the hash only picks
 * the candidate, whose 16 bytes are then compared in constant time.
 */
struct token_registry {
	struct list_head all; /* struct token, for shutdown */
	struct idmap by_hash; /* hash of the bytes → struct token */
	uint64_t n_compared;  /* candidates compared, for the tests */
};

struct rdma_ctx {
	struct core *core; /* the loop, the limits, the counters, the accounts */

	struct list_head devices; /* struct device */
	const char *sysfs;        /* where devices_open() reads the topology; NULL: "/sys" */
	unsigned n_devices;
	struct vb_device **vb_devices;
	size_t n_vb_devices;

	struct list_head listeners; /* struct listener (rdmacm) */
	struct list_head rconns;    /* struct rconn: remote peers' queue pairs */
	struct idseq rconn_order;   /* the same by id, for ListConnections */
	unsigned n_rconns;
	uint64_t next_rconn_id;
	struct token_registry tokens;
	struct allowed_network {
		struct sockaddr_storage addr;
		unsigned prefix;
	} * allow;
	size_t n_allow;
	uint64_t rejected; /* connections refused: token, network, limit */

	/*
	 * What peers SEND on the queue pairs an export's token admitted
	 * (remote/notify.c sets it; NULL: dropped): c the connection, whose
	 * token is live; data valid during the call only.
	 */
	void (*received)(void *userdata, struct rconn *c, const uint8_t *data, size_t len);
	void *received_userdata;
};

#endif
