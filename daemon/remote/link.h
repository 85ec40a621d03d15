/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Links: the daemon's own RC queue pairs to other daemons, over which it
 * posts one-sided READ and WRITE for its clients.
 *
 * A link goes from (local device, the initiating uid's PD there) to (a
 * remote daemon's rdmacm endpoint, the token that admits it into the remote
 * owner's PD): struct link_key. It connects actively through librdmacm
 * (resolve address, resolve route, connect with the endpoint's private data:
 * magic, version, token), each step on the link's event channel, polled in
 * the loop, under one deadline. Its CQ (2 × window entries) is on a
 * completion channel of its own, polled in the loop as well: on readable,
 * take and ack the event, re-arm, poll until empty; nothing blocks.
 *
 * States: CONNECTING → READY → (ERROR | CLOSED). ERROR and CLOSED are
 * final: the link is out of the pool's index, its QP destroyed (the device
 * touches no memory after that), and link_get() makes a new one for the
 * same key. ERROR: an error completion, the peer's DISCONNECTED, a CQ
 * overflow, a failed post, a refused or timed-out connect. CLOSED: idle
 * (nothing in flight and nobody holding it for idle_sec), the last
 * reference gone (the last
 * holder — a session's remote handle, a transfer — let go), link_close(),
 * link_pool_stop().
 *
 * Completions. Every WR posted retires exactly once, and RC completes in
 * order: a callback for one of a user's WRs says that each earlier WR of
 * that user is done. While the link lives, the user hears of its signalled
 * WRs (the last of each link_post() is signalled whatever it asked). When
 * the link fails, each user with WRs in flight hears once more, final: the
 * WR named did not complete (its own error status when its completion
 * carried the error, VB_WC_FLUSH_ERR otherwise), nor did any later one of
 * that user; every earlier one did. The final callbacks come after the QP is
 * destroyed, so the user may release the memory they touched.
 *
 * The link's QP grants its peer no remote access (conn_qp_create in
 * rdma/verbs.h): it lives in the uid's PD, next to that uid's regions, and
 * whatever answers at a descriptor's endpoint (descriptors are the
 * client's strings) must not WRITE or READ them through it.
 *
 * Callbacks are never made from inside link_get() or link_post(); they may
 * post, get, unref and close. Loop thread only.
 */
#ifndef RDMAMEMD_LINK_H
#define RDMAMEMD_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "util/idseq.h"
#include "util/list.h"
#include "daemon/core/errinfo.h"
#include "daemon/rdma/cq_watch.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/token.h"
#include "daemon/rdma/verbs.h"

struct device;
struct link;

#define LINK_WINDOW_DEFAULT 128U
#define LINK_IDLE_SEC_DEFAULT 60U
#define LINK_CONNECT_TIMEOUT_MS_DEFAULT 5000U
/*
 * Links live at once (connecting, ready, or torn down but not yet freed of
 * their resources: two fds, an rdmacm id, a QP, a CQ, an MR), in all and
 * per initiating uid. Descriptors are the client's strings, any endpoint
 * and token: without a bound one user could open links until the daemon
 * ran out of fds for every tenant.
 */
#define LINK_MAX_DEFAULT 256U
#define LINK_MAX_PER_UID_DEFAULT 64U
/*
 * A silent peer (its network gone: no DISCONNECTED, no reset) is seen by
 * the RC transport: a WR unanswered for the ack timeout, 4.096 us x
 * 2^LINK_ACK_TIMEOUT_DEFAULT = 1.07 s, is resent, and fails with
 * RETRY_EXC_ERR after LINK_RETRY_COUNT resends, so (1 + 6) x 1.07 s =
 * 7.5 s after the peer's last answer (up to 4x that, 30 s, where a device
 * waits the most the IB spec allows). Shorter timeouts recover lost
 * packets sooner (a 16 MiB READ on Soft-RoCE under emulation does better
 * at 16, 268 ms) but resend a whole window of large WRs whenever the peer
 * is merely slow: at 16 the two-VM suite saw 512 MiB WRITEs crawl and fail
 * after 80 s with no progress. The link then fails with
 * -EHOSTUNREACH, its transfers with PeerUnreachable. Without a timeout of
 * its own a link had the CM's (about 1 s on RoCE), and with a retry count
 * of 7, which rxe takes as "forever", never failed at all. An idle link
 * notices nothing: it has no WR to resend.
 */
#define LINK_ACK_TIMEOUT_DEFAULT 18U
#define LINK_RETRY_COUNT 6U
/*
 * A SEND (a notification) that finds no receive posted at the peer is
 * answered "receiver not ready" and resent after the peer's RNR timer,
 * LINK_RNR_RETRY times, then fails (RETRY_EXC_ERR): at most 7 x 655 ms =
 * 4.6 s, the longest timer a peer may ask for. 7 would be "forever": a
 * peer that never posts receives would hold the SEND, and every WR behind
 * it on the link, for good. The remote daemon reposts its receives as they
 * are taken, so a live one is waited for well within the bound.
 */
#define LINK_RNR_RETRY 6U
/*
 * The watchdog: WRs in flight and no completion for this long, and the
 * link fails (-ETIMEDOUT, "stalled"), its WRs flushed. Above what the
 * transport bounds itself (a silent peer: 7.5 s at most at the default ack
 * timeout; RNR: 4.6 s), so that it catches what those do not: a peer that
 * answers, slowly, forever, or a device that never completes.
 */
#define LINK_STALL_SEC_DEFAULT 30U
/*
 * A user that gives up (link_drain(): a cancelled transfer) waits this
 * long at most for what was posted before it to retire; then the link is
 * closed (-ECANCELED, "stalled"): destroying the QP is what makes the
 * memory safe to give back when the peer does not let the WRs finish.
 */
#define LINK_DRAIN_MS_DEFAULT 10000U
/* Notifications in flight per link at most: their send buffers. */
#define LINK_NOTIFY_SLOTS 8U
/* The wr_id a notification's SEND carries to its user's complete(). */
#define LINK_WR_ID_NOTIFY UINT64_MAX

enum link_state {
	LINK_CONNECTING,
	LINK_READY,
	LINK_ERROR,
	LINK_CLOSED,
};

struct link_key {
	struct device *dev;
	uid_t uid;                        /* whose PD on dev: its regions' lkeys work */
	struct sockaddr_storage endpoint; /* the remote daemon's rdmacm address */
	uint8_t token[TOKEN_BYTES];       /* admits us into the remote owner's PD */
};

struct link_completion {
	uint64_t wr_id; /* the user's */
	enum vb_wc_status status;
	const char *status_name;
	uint32_t vendor_err;
	uint32_t byte_len;
	/* The link failed: this WR and every later one of the user did not
	 * complete. error and reason say why the link failed. */
	bool final;
	int error;
	const char *reason;
};

/* One poster (a transfer), embedded in it; it must outlive its WRs. */
struct link_user {
	void (*complete)(struct link_user *u, const struct link_completion *c);
	/* The link's: WRs in flight, and the failure walk's marks. */
	unsigned n_inflight;
	struct list_head fail_node;
	bool fail_listed;
	struct link_completion fail;
};

/* A caller of link_get() waiting for its link. */
struct link_waiter {
	struct list_head node; /* in link->waiters */
	struct link *link;
	/* l: the ready link and a reference for the waiter; or NULL with
	 * error (-errno) and reason. */
	void (*ready)(struct link_waiter *w, struct link *l, int error, const char *reason);
};

struct link_pool_config {
	unsigned window;             /* WRs in flight per link (the send queue) */
	unsigned idle_sec;           /* nothing in flight this long: closed */
	unsigned connect_timeout_ms; /* connect, all steps */
	unsigned ack_timeout;        /* 4.096 us x 2^n before a resend, 1 to 31 */
	unsigned retry_count;        /* resends before RETRY_EXC_ERR, 0 to 6 */
	unsigned stall_sec;          /* WRs in flight, no completion this long: failed */
	unsigned drain_ms;           /* link_drain(): closed after this long */
	unsigned max_links;          /* live at once, in all */
	unsigned max_links_per_uid;  /* and per initiating uid */
};

/* The longest a WR of a link with cfg waits for a silent peer before it
 * fails, in ms: (1 + retry_count) x the ack timeout (x 4: what the IB spec
 * lets a device wait). */
uint64_t link_silent_peer_ms(const struct link_pool_config *cfg);

/* Why a link went to ERROR, as its counters and ListLinks name it. */
enum link_error_kind {
	LINK_ERR_CONNECT,       /* refused, unreachable, timed out: never READY */
	LINK_ERR_REMOTE_ACCESS, /* REM_ACCESS_ERR, REM_OP_ERR: the peer refused a WR */
	LINK_ERR_LOCAL_ACCESS,  /* LOC_ACCESS_ERR: our lkey, bounds or access */
	LINK_ERR_RETRY,         /* RETRY_EXC_ERR: the peer stopped answering */
	LINK_ERR_DISCONNECT,    /* the peer disconnected, or WRs flushed first */
	LINK_ERR_STALLED,       /* the watchdog, or a drain past its deadline */
	LINK_ERR_OTHER,         /* CQ overflow, a failed post, another status */
	LINK_ERR_KINDS,
};

struct link_pool {
	uv_loop_t *loop;
	struct link_pool_config cfg;
	struct list_head links; /* struct link, until freed */
	struct idseq order;     /* the same by id, for ListLinks */
	unsigned n_links;
	unsigned n_live; /* not yet finished: they hold fds */
	uint64_t next_id;
	uint64_t n_connected, n_failed;
	/* Every link's errors by kind since start: a failed link leaves the
	 * listing once nobody holds it, its errors stay counted here. */
	uint64_t errors[LINK_ERR_KINDS];
	/* Optional: a link changed state (visibility, the engine). */
	void (*state_changed)(struct link *l, void *userdata);
	void *userdata;
};

struct link_stats {
	uint64_t wrs;           /* posted, every kind */
	struct xfer_count done; /* completed: READs in, WRITEs out */
	uint64_t notifications; /* posted (link_post_notify()) */
	uint64_t completions;   /* taken off the CQ */
	uint64_t flushed;       /* WRs that did not complete when it failed */
	uint64_t errors[LINK_ERR_KINDS];
};

/* In flight, in post order. */
struct link_slot {
	struct link_user *user;
	uint64_t wr_id;
	uint32_t length;
	uint8_t opcode; /* enum vb_wr_opcode */
	bool notify;    /* holds the oldest notification send buffer in use */
};

struct link {
	struct list_head node;   /* in pool->links */
	struct idseq_node order; /* in pool->order */
	struct link_pool *pool;
	unsigned n_ref;
	/* link_hold()s: while any, the link is never idle. */
	unsigned n_hold;
	uint64_t id;
	struct link_key key;
	char peer[64]; /* the endpoint, as text */
	enum link_state state;
	bool indexed;     /* link_get() finds it: CONNECTING or READY */
	bool closing;     /* handles closing: teardown under way */
	bool finished;    /* resources gone, users told */
	bool stalled;     /* failed by the watchdog or a drain's deadline */
	int error;        /* ERROR, CLOSED: why, as -errno */
	char reason[192]; /* and in words */
	int reject;       /* the endpoint's enum endpoint_reject, or 0 */
	struct list_head waiters;

	struct vb_conn *conn;
	struct vb_cq *cq;
	struct vb_qp *qp;
	uv_poll_t cm_poll;
	struct cq_watch cq_watch; /* of cq, from route resolution on (cq_polling) */
	/* The connect deadline; once READY, with nothing in flight the idle
	 * timer (stopped while held), else the watchdog (stall_sec from progress_at, or the drain
	 * deadline when sooner). */
	uv_timer_t timer;
	uint64_t
		progress_at; /* loop time of the last completion, or of a post into an empty link */
	/* link_drain(): WRs before drain_seq must retire by drain_deadline
	 * (loop time). */
	bool draining;
	uint64_t drain_seq, drain_deadline;
	bool cq_polling;
	unsigned n_handles; /* initialised, not yet closed */

	uint32_t max_msg;        /* the port's max message size */
	uint8_t initiator_depth; /* READs in flight the peer allows */
	unsigned window;
	struct link_slot *ring; /* window entries; seq % window */
	struct vb_send_wr *scratch;
	uint64_t head_seq, tail_seq; /* oldest in flight; next to post */
	/* The failure point: WRs before it completed; the one at it carried
	 * fail_wc's error when has_fail_wc. */
	uint64_t fail_seq;
	bool has_fail_wc;
	struct vb_wc fail_wc;

	/* Notifications' send buffers: LINK_NOTIFY_SLOTS of NOTIFY_MSG_MAX
	 * bytes, registered in the key's PD at the first notification; in use:
	 * [notify_head, notify_tail), retired in post order with their WRs. */
	uint8_t *notify_buf;
	struct vb_mr *notify_mr;
	uint32_t notify_lkey;
	uint64_t notify_head, notify_tail;

	struct link_stats stats;
	uint64_t created_msec, ready_msec; /* monotonic clock (uv_hrtime) */
};

/* cfg NULL or zero fields: the defaults above. */
void link_pool_init(struct link_pool *pool, uv_loop_t *loop, const struct link_pool_config *cfg);
/* Closes every link (users and waiters hear -ESHUTDOWN); run the loop after. */
void link_pool_stop(struct link_pool *pool);
/* After the loop ran: -EBUSY while links are left (a reference not dropped). */
int link_pool_done(struct link_pool *pool);

/*
 * The link for key: 0 and *ret (a reference) when one is READY; otherwise
 * -EINPROGRESS and w is called once the link is ready or failed (cancel
 * with link_waiter_cancel()); -EUSERS at max_links, -EDQUOT at the key's
 * uid's max_links_per_uid (link_limit_error() says it); another -errno
 * when no connect could start.
 */
int link_get(struct link_pool *pool, const struct link_key *key, struct link_waiter *w,
	     struct link **ret);
/* Links of uid holding resources (not yet torn down). */
unsigned link_count_uid(const struct link_pool *pool, uid_t uid);
/* A refusal of link_get() by the limits as a named error in e (-EDQUOT:
 * QuotaExceeded, quota "links"; -EUSERS: TooManyConnections); 0 and e
 * untouched for another r. */
int link_limit_error(const struct link_pool *pool, uid_t uid, int r, struct errinfo *e);
void link_waiter_cancel(struct link_waiter *w);

struct link *link_ref(struct link *l);
/* The last reference closes a live link and frees it once torn down. */
struct link *link_unref(struct link *l);
/*
 * A reference that also keeps l from being closed as idle: a transfer holds
 * each path's link from taking it until its leg is over, so that a READY
 * link it waits with (for its other paths, past idle_sec) is still there
 * when it posts. The idle timer runs only while nothing is in flight and
 * nobody holds the link; link_unhold() drops both and restarts it at the
 * last. Holding does not keep a link from failing.
 */
struct link *link_hold(struct link *l);
struct link *link_unhold(struct link *l);

/* WRs that may be posted now. */
unsigned link_space(const struct link *l);
/*
 * Posts n WRs for u, all or none: -EAGAIN when fewer than n fit in the
 * window, -ENOTCONN (or the link's error) when it is not READY. wr_id is
 * the user's own; the last WR is signalled.
 */
int link_post(struct link *l, struct link_user *u, const struct vb_send_wr *wrs, size_t n);
/*
 * Posts a notification for u: one signalled SEND of a header (the export
 * id the initiator imported, the key's uid as the sender, the length) and
 * len ≤ NOTIFY_MAX bytes of data (copied: data may go when this returns).
 * RC executes a QP's send queue in order, so the remote daemon receives it
 * only after every WR posted on this link before it has been carried out
 * there: post it after the transfer's last WRITE on this link, and it
 * arrives after their data. Only this link's WRs are ordered before it:
 * a transfer striped over several links posts it once the others' WRs
 * have completed. It completes like any WR of u, with wr_id
 * LINK_WR_ID_NOTIFY (the link's failure names it in a final callback when
 * it is u's first WR not done). -EMSGSIZE when len > NOTIFY_MAX; -EAGAIN
 * when the window or the LINK_NOTIFY_SLOTS buffers are full; -ENOTCONN (or
 * the link's error) when it is not READY; another -errno when the send
 * buffers cannot be registered.
 */
int link_post_notify(struct link *l, struct link_user *u, const void *data, size_t len,
		     uint64_t export_id);
/*
 * A user gives up on its WRs in flight (a cancelled transfer): what was
 * posted on l until now must retire within the pool's drain_ms, or the
 * link fails (-ECANCELED) and they flush. A drain already pending keeps
 * its deadline and now covers these WRs too.
 */
void link_drain(struct link *l);
/* Ends a live link (CLOSED; in-flight WRs flush with error and why). */
void link_close(struct link *l, int error, const char *why);

const char *link_state_name(enum link_state s);
/* "connect", "remote_access", …: the keys of ListLinks' errors. */
const char *link_error_kind_name(enum link_error_kind k);

#endif
