/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs layer: the only code that calls libibverbs, libmlx5 and
 * librdmacm. Everything above it sees opaque handles and -errno returns;
 * libibverbs' NULL-plus-errno and positive-errno conventions stop here.
 *
 * Devices are the contexts librdmacm opens (rdma_get_devices), so that a
 * protection domain allocated here is the one a connection accepted through
 * librdmacm lands in.
 *
 * Calls go through an ops table so that tests and fuzzers can run the
 * daemon over a fake. Thread safety is libibverbs': registration runs on
 * pool threads, everything else on the loop.
 */
#ifndef RDMAMEMD_VERBS_H
#define RDMAMEMD_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define VB_NAME_MAX 64
#define VB_PORTS_MAX 4
#define VB_GIDS_MAX 16
#define VB_PRIVATE_DATA_MAX 56

struct vb_device;
struct vb_pd;
struct vb_mr;
struct vb_qp;
struct vb_listener;
struct vb_cm_conn;
struct vb_cq;
struct vb_conn;

/* Access of a memory region, mirrored from IBV_ACCESS_*. */
#define VB_ACCESS_LOCAL_WRITE (1U << 0)
#define VB_ACCESS_REMOTE_WRITE (1U << 1)
#define VB_ACCESS_REMOTE_READ (1U << 2)
#define VB_ACCESS_REMOTE_ATOMIC (1U << 3)

struct vb_gid {
	uint32_t index;
	uint8_t raw[16];
	char text[48];    /* IPv6 notation */
	const char *type; /* "IB", "RoCEv1", "RoCEv2" */
};

struct vb_port {
	uint8_t num;
	const char *state; /* "ACTIVE", "DOWN", ... */
	bool active;
	const char *link_layer; /* "Ethernet", "InfiniBand" */
	unsigned mtu;           /* active MTU in bytes */
	uint32_t max_msg_sz;    /* the largest message one work request may move */
	uint16_t lid;
	size_t n_gids;
	struct vb_gid gids[VB_GIDS_MAX];
};

struct vb_device_info {
	char name[VB_NAME_MAX];
	char node_guid[24];
	bool mlx5; /* mlx5dv_is_supported() */
	uint64_t max_mr_size;
	uint32_t max_mr, max_qp, max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom; /* READs a QP of ours may have outstanding */
	uint32_t max_qp_wr, max_cqe;
	size_t n_ports;
	struct vb_port ports[VB_PORTS_MAX];
};

enum vb_event_kind {
	VB_EVENT_PORT_ACTIVE,
	VB_EVENT_PORT_DOWN,
	VB_EVENT_DEVICE_FATAL,
	VB_EVENT_OTHER,
};

struct vb_event {
	enum vb_event_kind kind;
	const char *name; /* ibv_event_type_str() */
	uint8_t port;
};

/* One side of a reliable connection, as queue pairs exchange it. */
struct vb_qp_endpoint {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t gid[16];
	uint32_t gid_index;
	uint8_t port;
	unsigned mtu; /* path MTU in bytes: asked for (0: 1024), or in force */
};

enum vb_cm_event_kind {
	VB_CM_REQUEST, /* a peer asks to connect: accept or reject */
	VB_CM_ESTABLISHED,
	VB_CM_DISCONNECTED, /* the peer left, or the connection failed */
	VB_CM_OTHER,
};

struct vb_cm_event {
	enum vb_cm_event_kind kind;
	const char *name; /* rdma_event_str() */
	struct vb_cm_conn *conn;
	struct vb_device *device; /* the device the request came in on */
	struct sockaddr_storage peer;
	uint8_t private_data[VB_PRIVATE_DATA_MAX];
	size_t private_len;
	uint8_t initiator_depth;
	int status;
};

/*
 * The daemon's own queue pairs (daemon/remote/link.c): connected actively
 * through librdmacm, with a CQ on a completion channel of their own, posting
 * RDMA READ/WRITE (one sge each) and, for notifications, SEND and
 * WRITE_WITH_IMM.
 */
enum vb_wr_opcode {
	VB_WR_RDMA_WRITE,
	VB_WR_RDMA_READ,
	VB_WR_SEND,
	VB_WR_RDMA_WRITE_IMM,
};

struct vb_send_wr {
	uint64_t wr_id;
	enum vb_wr_opcode opcode;
	bool signaled; /* a completion is generated (errors always are) */
	uint64_t local_addr;
	uint32_t lkey;
	uint32_t length;
	uint64_t remote_addr; /* READ, WRITE, WRITE_IMM */
	uint32_t rkey;
	uint32_t imm; /* WRITE_IMM, host order */
};

struct vb_recv_wr {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t lkey;
	uint32_t length;
};

/* What a completion says, by what the layers above do about it. */
enum vb_wc_status {
	VB_WC_SUCCESS = 0,
	VB_WC_FLUSH_ERR,      /* not done: the QP was in error before it ran */
	VB_WC_REM_ACCESS_ERR, /* the peer refused the rkey, bounds or access */
	VB_WC_LOC_ACCESS_ERR, /* our lkey, bounds or access */
	VB_WC_RETRY_EXC_ERR,  /* the peer never answered (transport or RNR retries) */
	VB_WC_REM_OP_ERR,     /* the peer could not carry it out */
	VB_WC_OTHER_ERR,
};

struct vb_wc {
	uint64_t wr_id;
	enum vb_wc_status status;
	const char *status_name; /* ibv_wc_status_str() */
	uint32_t vendor_err;
	uint32_t byte_len;
	bool recv; /* a receive (SEND or WRITE_IMM from the peer) */
	bool has_imm;
	uint32_t imm; /* host order */
};

/* Events of an active connection, in the order a good one sees them. */
enum vb_conn_event_kind {
	VB_CONN_ADDR_RESOLVED,
	VB_CONN_ROUTE_RESOLVED,
	VB_CONN_ESTABLISHED,
	VB_CONN_REJECTED,    /* private_data: the endpoint's "RDMR" and reason */
	VB_CONN_UNREACHABLE, /* also address, route and connect errors */
	VB_CONN_DISCONNECTED,
	VB_CONN_TIMEWAIT_EXIT,
	VB_CONN_OTHER,
};

struct vb_conn_event {
	enum vb_conn_event_kind kind;
	const char *name; /* rdma_event_str() */
	int status;
	uint8_t private_data[VB_PRIVATE_DATA_MAX];
	size_t private_len;
};

struct vb_qp_caps {
	uint32_t max_send_wr, max_recv_wr;
	uint8_t initiator_depth; /* READs outstanding at once */
};

/*
 * An active connect: the CM's parameters, and the RC transport timeouts of
 * the QP, which conn_next_event brings to RTS itself. A WR whose packets go
 * unanswered is resent after ack_timeout (4.096 us x 2^ack_timeout; the IB
 * spec lets a device wait up to four times that) and fails with
 * VB_WC_RETRY_EXC_ERR after retry_count resends: a peer that vanished is
 * seen after (1 + retry_count) x the timeout. retry_count is 0 to 6: rxe
 * takes 7 as "retry forever", as the spec does only for RNR. A SEND that
 * finds no receive posted at the peer (RNR NAK) is resent after the peer's
 * RNR timer, rnr_retry times, then fails with VB_WC_RETRY_EXC_ERR; 7 is
 * "retry forever" everywhere. Both are set on our QP by us: the CM would
 * take the RNR count from the peer's reply.
 */
struct vb_conn_param {
	const void *private_data;
	size_t private_len;
	uint8_t initiator_depth; /* READs outstanding at once */
	uint8_t ack_timeout;     /* 1 to 31; 0: the CM's own (path life time) */
	uint8_t retry_count;     /* 0 to 6 */
	uint8_t rnr_retry;       /* 0 to 7 */
};

struct vb_ops {
	int (*devices_open)(struct vb_device ***ret, size_t *ret_n);
	void (*devices_close)(struct vb_device **devs, size_t n);
	int (*device_query)(struct vb_device *dev, struct vb_device_info *ret);
	int (*device_async_fd)(struct vb_device *dev);
	int (*device_next_event)(struct vb_device *dev, struct vb_event *ret);

	int (*pd_alloc)(struct vb_device *dev, struct vb_pd **ret);
	int (*pd_free)(struct vb_pd *pd);

	int (*mr_reg)(struct vb_pd *pd, void *addr, size_t len, unsigned access,
		      struct vb_mr **ret);
	int (*mr_reg_dmabuf)(struct vb_pd *pd, int fd, uint64_t offset, size_t len, uint64_t iova,
			     unsigned access, struct vb_mr **ret);
	int (*mr_dereg)(struct vb_mr *mr);
	void (*mr_keys)(const struct vb_mr *mr, uint32_t *lkey, uint32_t *rkey);

	int (*qp_create)(struct vb_pd *pd, uint8_t port, struct vb_qp **ret);
	int (*qp_connect)(struct vb_qp *qp, const struct vb_qp_endpoint *peer, uint32_t gid_index,
			  struct vb_qp_endpoint *ret_local);
	void (*qp_destroy)(struct vb_qp *qp);

	int (*cm_listen)(const struct sockaddr *addr, struct vb_listener **ret);
	int (*cm_fd)(struct vb_listener *l);
	int (*cm_next_event)(struct vb_listener *l, struct vb_cm_event *ret);
	/*
	 * The passive side's RC QP before it is accepted, in pd, both queues
	 * on cq, with caps' queue sizes; owned by c (cm_conn_destroy frees
	 * it). Receives posted on it before cm_accept are there before the
	 * peer can send. Without it, cm_accept makes a QP of its own (one WR
	 * each way, on a CQ nobody polls: the peer only READs and WRITEs).
	 */
	int (*cm_qp_create)(struct vb_cm_conn *c, struct vb_pd *pd, struct vb_cq *cq,
			    const struct vb_qp_caps *caps, struct vb_qp **ret);
	/* pd: for the QP made here when cm_qp_create made none. */
	int (*cm_accept)(struct vb_cm_conn *c, struct vb_pd *pd, uint8_t responder_resources,
			 uint32_t *ret_qpn);
	int (*cm_reject)(struct vb_cm_conn *c, const void *data, size_t len);
	void (*cm_conn_destroy)(struct vb_cm_conn *c);
	void (*cm_listener_close)(struct vb_listener *l);

	/* A CQ of depth entries on its own completion channel, whose fd is
	 * non-blocking and armed for the next completion. */
	int (*cq_create)(struct vb_device *dev, unsigned depth, struct vb_cq **ret);
	int (*cq_fd)(struct vb_cq *cq);
	/* On a readable fd: takes the channel's event, acks it and re-arms;
	 * -EAGAIN when there was none. Then poll until empty. */
	int (*cq_event)(struct vb_cq *cq);
	/* Up to n completions: how many, or -errno (an overflowed CQ). */
	int (*cq_poll)(struct vb_cq *cq, struct vb_wc *wc, unsigned n);
	/* After every QP on it is destroyed. */
	void (*cq_destroy)(struct vb_cq *cq);

	/* An active rdmacm id on a non-blocking event channel of its own. */
	int (*conn_create)(struct vb_conn **ret);
	int (*conn_fd)(struct vb_conn *c);
	/* src may be NULL (the route picks the device); VB_CONN_ADDR_RESOLVED
	 * or VB_CONN_UNREACHABLE follow. */
	int (*conn_resolve_addr)(struct vb_conn *c, const struct sockaddr *src,
				 const struct sockaddr *dst, int timeout_ms);
	int (*conn_resolve_route)(struct vb_conn *c, int timeout_ms);
	/* The device the address resolved to (after VB_CONN_ADDR_RESOLVED). */
	struct vb_device *(*conn_device)(struct vb_conn *c);
	/* The RC QP of the connection, in pd, both queues on cq; owned by c
	 * (conn_destroy frees it: never qp_destroy). It grants the peer no
	 * remote access at all (qp_access_flags 0, from INIT on, whatever the
	 * CM offers): it only initiates, and the PD holds its uid's regions,
	 * which whoever answers at a descriptor's endpoint must not reach. */
	int (*conn_qp_create)(struct vb_conn *c, struct vb_pd *pd, struct vb_cq *cq,
			      const struct vb_qp_caps *caps, struct vb_qp **ret);
	/* Connects with c's QP; the connect response brings it to RTR and
	 * RTS with p's timeouts (VB_CONN_ESTABLISHED, or VB_CONN_UNREACHABLE
	 * with status -errno when a transition fails). */
	int (*conn_connect)(struct vb_conn *c, const struct vb_conn_param *p);
	/* Copies and acks one event; -EAGAIN when there is none. */
	int (*conn_next_event)(struct vb_conn *c, struct vb_conn_event *ret);
	/* Disconnects, destroys the QP (no DMA after it returns), the id and
	 * the channel. */
	void (*conn_destroy)(struct vb_conn *c);

	/* Posts wrs in order; *ret_posted says how many went (all but on
	 * error). Never blocks. */
	int (*qp_post_send)(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n,
			    size_t *ret_posted);
	int (*qp_post_recv)(struct vb_qp *qp, const struct vb_recv_wr *wrs, size_t n,
			    size_t *ret_posted);
};

/* The ops in use: libibverbs/librdmacm unless a test swapped them. */
extern const struct vb_ops *vb;
extern const struct vb_ops vb_real_ops;

#endif
