/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The remote-access endpoint. An rkey is honoured only on a queue pair in the
 * same protection domain as its MR, so remote peers reach registered memory
 * through queue pairs the daemon creates: accepted through librdmacm, or set
 * up from attributes exchanged over Varlink (ConnectQueuePair). Each is
 * admitted into the PD of the uid whose access token the peer presents. The
 * daemon never posts on these queue pairs: peers drive RDMA READ, WRITE and
 * atomics.
 */
#ifndef RDMAMEMD_ENDPOINT_H
#define RDMAMEMD_ENDPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "util/idseq.h"
#include "util/list.h"
#include "daemon/core/session.h"
#include "daemon/rdma/token.h"
#include "daemon/rdma/verbs.h"

struct account;
struct session;
struct rdma_ctx;
struct device;
struct errinfo;
struct recv_ring;

/* rdmacm private data of a connect request: magic, version, token. */
#define ENDPOINT_MAGIC "RDMT"
#define ENDPOINT_VERSION 1
#define ENDPOINT_REQUEST_LEN 24
/* And of a reject: "RDMR", then the reason. */
#define ENDPOINT_REJECT_MAGIC "RDMR"

enum endpoint_reject {
	REJECT_BAD_REQUEST = 1, /* no or malformed private data */
	REJECT_BAD_TOKEN = 2,   /* no such token */
	REJECT_NETWORK = 3,     /* peer outside the allowed networks */
	REJECT_LIMIT = 4,       /* too many connections */
	REJECT_DEVICE = 5,      /* device unknown or failed */
};

struct rconn {
	struct list_head link;            /* in rdma->rconns */
	struct idseq_node order;          /* in rdma->rconn_order */
	struct token_admission admission; /* in token->admitted: revoked with it */
	/* SESSION_RCONN, in the session that set it up (ConnectQueuePair only) */
	struct session_link ctl_link;
	uint64_t id;
	bool oob; /* from ConnectQueuePair */
	struct device *dev;
	struct token *token;
	uid_t uid;
	struct account *account; /* of uid: counts its remote connections */
	struct vb_cm_conn *cm;
	struct vb_qp *qp;
	/* Admitted by an export's token (rdmacm only): the receives its
	 * notifications land in. */
	struct recv_ring *rx;
	struct notify_count notify; /* what arrived on it */
	uint32_t qpn;
	char peer[128]; /* its address, or GID and the pid that set it up */
	bool established;
	uint64_t created_msec;
};

struct listener {
	struct list_head link; /* in rdma->listeners */
	struct rdma_ctx *rdma;
	struct vb_listener *vb;
	uv_poll_t poll;
	char address[64];
};

/* At daemon start: the lists, and the drop hook of SESSION_RCONN. */
void endpoint_init(struct rdma_ctx *rdma);
/* Listens with librdmacm on the configured addresses. */
int endpoint_start(struct rdma_ctx *rdma);
/* SIGHUP: applies a new allow-list to new connections. */
void endpoint_reload(struct rdma_ctx *rdma);
/* Shutdown: closes the listeners and every remote connection. */
void endpoint_stop(struct rdma_ctx *rdma);

/*
 * ConnectQueuePair: admits the peer by the same rules as rdmacm (its GID
 * standing for its address), then makes a queue pair in the token's uid PD
 * on device, connected to peer; fills *ret with the daemon's side. ctl is
 * the Varlink connection that asked: the queue pair lives until it closes
 * or the token is revoked. A refusal fills *e.
 */
int endpoint_connect_qp(struct rdma_ctx *rdma, struct session *ctl, const char *device,
			const uint8_t token[TOKEN_BYTES], const struct vb_qp_endpoint *peer,
			int gid_index, struct vb_qp_endpoint *ret, struct errinfo *e);

void rconn_destroy(struct rconn *c, const char *why);

#endif
