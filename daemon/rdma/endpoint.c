/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/recv_ring.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "proto/errors.h"
#include "daemon/core/session.h"
#include "daemon/rdma/token.h"

/* Address bytes of ss, with IPv4-mapped IPv6 seen as IPv4. */
static size_t addr_bytes(const struct sockaddr_storage *ss, const uint8_t **ret)
{
	*ret = NULL;
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (ss->ss_family == AF_INET) {
		*ret = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
		return 4;
	}
	if (ss->ss_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;

		if (memcmp(a, mapped, sizeof(mapped)) == 0) {
			*ret = a + 12;
			return 4;
		}
		*ret = a;
		return 16;
	}
	return 0;
}

static bool network_allowed(const struct rdma_ctx *rdma, const struct sockaddr_storage *peer)
{
	const uint8_t *p;
	size_t plen = addr_bytes(peer, &p);

	if (rdma->n_allow == 0)
		return true;
	for (size_t i = 0; i < rdma->n_allow; i++) {
		const uint8_t *n;
		size_t nlen = addr_bytes(&rdma->allow[i].addr, &n);
		unsigned bits = rdma->allow[i].prefix;

		if (nlen != plen)
			continue;
		if (memcmp(p, n, bits / 8) != 0)
			continue;
		if (bits % 8 && ((p[bits / 8] ^ n[bits / 8]) & (0xff << (8 - bits % 8))))
			continue;
		return true;
	}
	return false;
}

static struct device *device_of_vb(struct rdma_ctx *rdma, struct vb_device *vbd)
{
	struct device *dev;

	list_for_each_entry(dev, &rdma->devices, link)
		if (dev->vb == vbd)
			return dev;
	return NULL;
}

/* Its token was revoked (token_revoke()). */
static void rconn_revoke(struct token_admission *a, const char *why)
{
	rconn_destroy(container_of(a, struct rconn, admission), why);
}

static struct rconn *rconn_new(struct rdma_ctx *rdma, struct device *dev, struct token *t)
{
	struct rconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->id = ++rdma->next_rconn_id;
	if (idseq_add(&rdma->rconn_order, c->id, &c->order) < 0) {
		free(c);
		return NULL;
	}
	c->account = account_get(rdma->core->accounts, t->uid);
	if (!c->account) {
		idseq_remove(&rdma->rconn_order, &c->order);
		free(c);
		return NULL;
	}
	c->account->n_rdma_connections++;
	c->dev = dev;
	c->token = t;
	c->uid = t->uid;
	c->created_msec = uv_now(rdma->core->loop);
	session_link_init(&c->ctl_link);
	list_add_tail(&c->link, &rdma->rconns);
	c->admission.revoke = rconn_revoke;
	token_admit(t, &c->admission);
	rdma->n_rconns++;
	dev->n_connections++;
	return c;
}

void rconn_destroy(struct rconn *c, const char *why)
{
	struct rdma_ctx *rdma = c->dev->rdma;

	log_info("RDMA connection %" PRIu64 " (%s, %s, uid %u, qpn %u) closed: %s", c->id,
		 c->oob ? "ConnectQueuePair" : "rdmacm", c->dev->info.name, (unsigned)c->uid,
		 c->qpn, why);
	if (c->cm)
		vb->cm_conn_destroy(c->cm);
	if (c->qp)
		vb->qp_destroy(c->qp);
	/* The QP is gone: no receive lands any more. */
	recv_ring_free(c->rx);
	list_del(&c->link);
	idseq_remove(&rdma->rconn_order, &c->order);
	token_unadmit(&c->admission);
	session_remove(&c->ctl_link);
	rdma->n_rconns--;
	c->dev->n_connections--;
	c->account->n_rdma_connections--;
	account_unref(c->account);
	free(c);
}

static struct rconn *rconn_by_cm(struct rdma_ctx *rdma, struct vb_cm_conn *cm)
{
	struct rconn *c;

	list_for_each_entry(c, &rdma->rconns, link)
		if (c->cm == cm)
			return c;
	return NULL;
}

/*
 * What a remote peer asks to be admitted with. Both ways in (rdmacm and
 * ConnectQueuePair) describe their peer in one and pass it to admit(), so
 * that every rule refuses the same peers, for the same reason, on both.
 */
struct admission {
	struct sockaddr_storage peer; /* rdmacm: the peer's address; ConnectQueuePair: its GID */
	char peer_text[64];
	const uint8_t *token; /* raw bytes; NULL: the request carried none */
	const char *device;   /* asked for, or the one the request came in on */
	struct device *dev;   /* NULL: no such device is open */
};

static unsigned rdma_connections_of(struct rdma_ctx *rdma, uid_t uid)
{
	const struct account *a = account_find(rdma->core->accounts, uid);

	return a ? a->n_rdma_connections : 0;
}

/*
 * The admission rules, cheapest and least telling first: a peer outside
 * the allowed networks learns nothing about tokens. On success the token
 * and the protection domain of its uid on the device; on refusal *e says
 * why for Varlink and *ret_reason for rdmacm, and the refusal is counted.
 */
static int admit(struct rdma_ctx *rdma, const struct admission *a, struct token **ret_token,
		 struct vb_pd **ret_pd, enum endpoint_reject *ret_reason, struct errinfo *e)
{
	const struct daemon_config *cfg = &rdma->core->cfg;
	enum endpoint_reject why;
	struct token *t = NULL;
	unsigned used;
	int r;

	if (!network_allowed(rdma, &a->peer)) {
		why = REJECT_NETWORK;
		r = errinfo_set(e, RDMAMEM_ERROR_NETWORK_NOT_ALLOWED, -ECONNREFUSED,
				"peer %s is outside the networks RDMA peers are admitted from "
				"(allow-networks)",
				a->peer_text);
		goto refuse;
	}
	if (!a->token) {
		why = REJECT_BAD_REQUEST;
		r = errinfo_set(e, RDMAMEM_ERROR_INVALID_TOKEN, -EKEYREJECTED,
				"no access token in the request");
		goto refuse;
	}
	t = token_find(rdma, a->token);
	if (!t) {
		why = REJECT_BAD_TOKEN;
		r = errinfo_set(e, RDMAMEM_ERROR_INVALID_TOKEN, -EKEYREJECTED,
				"no such access token: never issued, revoked, or its creator "
				"disconnected");
		goto refuse;
	}
	if (!a->dev || a->dev->fatal) {
		why = REJECT_DEVICE;
		r = a->dev ? errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_DEVICE, -EIO,
					 "RDMA device %s reported a fatal error and admits no "
					 "connections",
					 a->device) :
			     errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_DEVICE, -ENODEV,
					 "no RDMA device '%.64s' is open", a->device);
		goto refuse;
	}
	/* The daemon's limit first: over it, nobody is let in. */
	if (rdma->n_rconns >= cfg->max_rdma_connections) {
		why = REJECT_LIMIT;
		r = errinfo_set(e, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS, -EUSERS,
				"the daemon serves %u RDMA connections, its limit "
				"(max-rdma-connections)",
				rdma->n_rconns);
		goto refuse;
	}
	used = rdma_connections_of(rdma, t->uid);
	if (used >= cfg->max_rdma_connections_per_uid) {
		why = REJECT_LIMIT;
		r = errinfo_quota(e, "rdma_connections", cfg->max_rdma_connections_per_uid, used, 1,
				  "uid %u has %u RDMA connections into its memory, the limit per "
				  "uid (max-rdma-connections-per-uid); close some first",
				  (unsigned)t->uid, used);
		goto refuse;
	}
	r = device_pd(a->dev, t->uid, ret_pd);
	if (r < 0) {
		why = REJECT_DEVICE;
		r = errinfo_set(e, RDMAMEM_ERROR_INTERNAL, r, "no protection domain on %s: %s",
				a->device, strerror(-r));
		goto refuse;
	}
	*ret_token = t;
	return 0;

refuse:
	rdma->rejected++;
	*ret_reason = why;
	return r;
}

static void reject(struct vb_cm_conn *cm, enum endpoint_reject why)
{
	uint8_t data[8] = ENDPOINT_REJECT_MAGIC;

	data[4] = (uint8_t)why;
	vb->cm_reject(cm, data, sizeof(data));
	vb->cm_conn_destroy(cm);
}

static void rconn_received(void *userdata, const uint8_t *data, size_t len)
{
	struct rconn *c = userdata;
	struct rdma_ctx *rdma = c->dev->rdma;

	if (rdma->received)
		rdma->received(rdma->received_userdata, c, data, len);
}

/*
 * A connection an export's token admitted: its QP on the CQ of a ring of
 * receives, every one posted before the accept, so that the peer's first
 * notification finds a buffer.
 */
static int rconn_receive(struct rconn *c, struct vb_pd *pd)
{
	struct vb_qp_caps caps = { .max_send_wr = 1, .max_recv_wr = RECV_RING_DEPTH };
	struct rdma_ctx *rdma = c->dev->rdma;
	struct vb_qp *qp;
	int r;

	r = recv_ring_new(rdma->core->loop, c->dev->vb, pd, rconn_received, c, &c->rx);
	if (r < 0)
		return r;
	r = vb->cm_qp_create(c->cm, pd, c->rx->watch.cq, &caps, &qp);
	if (r < 0)
		return r;
	return recv_ring_start(c->rx, qp);
}

static void on_request(struct rdma_ctx *rdma, struct vb_cm_event *ev)
{
	struct admission a = { .peer = ev->peer };
	enum endpoint_reject why;
	struct errinfo err = {};
	struct token *t;
	struct vb_pd *pd;
	struct rconn *c;
	uint32_t qpn;
	int r;

	netaddr_format(&ev->peer, a.peer_text, sizeof(a.peer_text));
	a.dev = device_of_vb(rdma, ev->device);
	a.device = a.dev ? a.dev->info.name : "(unknown)";
	if (ev->private_len >= ENDPOINT_REQUEST_LEN &&
	    memcmp(ev->private_data, ENDPOINT_MAGIC, 4) == 0 &&
	    ev->private_data[4] == ENDPOINT_VERSION)
		a.token = ev->private_data + 8;
	r = admit(rdma, &a, &t, &pd, &why, &err);
	errinfo_done(&err);
	if (r < 0) {
		/* A reason byte is all the peer hears: the words go to the log.
		 * (ConnectQueuePair's caller gets them in its error.) */
		log_notice("RDMA connection from %s rejected: %s", a.peer_text, err.message);
		reject(ev->conn, why);
		return;
	}
	c = rconn_new(rdma, a.dev, t);
	if (!c) {
		log_warning("RDMA connection from %s: out of memory", a.peer_text);
		reject(ev->conn, REJECT_LIMIT);
		return;
	}
	c->cm = ev->conn;
	snprintf(c->peer, sizeof(c->peer), "%s", a.peer_text);
	if (t->export_id) {
		r = rconn_receive(c, pd);
		if (r < 0) {
			log_warning_errno(r, "RDMA connection from %s: no receive buffers: %m",
					  a.peer_text);
			rconn_destroy(c, "no receive buffers");
			return;
		}
	}
	/* The peer drives READs and atomics: answer as many as it asks for,
	 * within what the device does. */
	r = vb->cm_accept(c->cm, pd,
			  (uint8_t)MIN((uint32_t)MAX(ev->initiator_depth, 1),
				       MIN(a.dev->info.max_qp_rd_atom ?: 1, 16U)),
			  &qpn);
	if (r < 0) {
		log_warning_errno(r, "RDMA connection from %s: accept failed: %m", a.peer_text);
		rconn_destroy(c, "accept failed");
		return;
	}
	c->qpn = qpn;
	log_info("RDMA connection %" PRIu64 " from %s admitted into uid %u's domain on %s (qpn %u)",
		 c->id, a.peer_text, (unsigned)c->uid, a.dev->info.name, qpn);
}

static void on_cm_event(uv_poll_t *h, int status, int events)
{
	struct listener *l = h->data;
	struct rdma_ctx *rdma = l->rdma;
	struct vb_cm_event ev;
	struct rconn *c;

	(void)events;
	if (status < 0)
		return;
	while (vb->cm_next_event(l->vb, &ev) == 0) {
		switch (ev.kind) {
		case VB_CM_REQUEST:
			on_request(rdma, &ev);
			break;
		case VB_CM_ESTABLISHED:
			c = rconn_by_cm(rdma, ev.conn);
			if (c)
				c->established = true;
			break;
		case VB_CM_DISCONNECTED:
			c = ev.conn ? rconn_by_cm(rdma, ev.conn) : NULL;
			if (c)
				rconn_destroy(c, ev.name);
			break;
		case VB_CM_OTHER:
			log_debug("rdmacm on %s: %s", l->address, ev.name);
			break;
		}
	}
}

/* The allow-list, parsed once per configuration; all or nothing. */
static int parse_allow(struct rdma_ctx *rdma)
{
	struct allowed_network *list = NULL;
	size_t n = 0;

	for (char *const *net = rdma->core->cfg.rdma_allow; net && *net; net++) {
		void *nl = reallocarray(list, n + 1, sizeof(*list));

		if (!nl) {
			free(list);
			return -ENOMEM;
		}
		list = nl;
		if (netaddr_parse_network(*net, &list[n].addr, &list[n].prefix) < 0) {
			free(list);
			return log_error_errno(-EINVAL, "'%s' is not a network (ADDR/PREFIX)",
					       *net);
		}
		n++;
	}
	free(rdma->allow);
	rdma->allow = list;
	rdma->n_allow = n;
	return 0;
}

void endpoint_reload(struct rdma_ctx *rdma)
{
	/* A bad list keeps the one in force: refusing everyone would cut
	 * off peers over a typo. */
	if (parse_allow(rdma) < 0)
		log_warning("Keeping the allowed networks in force");
}

/* The session that set a queue pair up closed. */
static void rconn_session_drop(struct session_link *link)
{
	rconn_destroy(container_of(link, struct rconn, ctl_link),
		      "the connection that set it up closed");
}

void endpoint_init(struct rdma_ctx *rdma)
{
	session_kind_register(SESSION_RCONN, rconn_session_drop);
	list_init(&rdma->rconns);
}

int endpoint_start(struct rdma_ctx *rdma)
{
	char *const *addr;
	int r;

	list_init(&rdma->listeners);
	list_init(&rdma->rconns);
	idseq_init(&rdma->rconn_order);

	r = parse_allow(rdma);
	if (r < 0)
		return r;

	for (addr = rdma->core->cfg.rdmacm_listen; addr && *addr; addr++) {
		struct sockaddr_storage ss;
		struct listener *l;

		if (netaddr_parse_address(*addr, &ss) < 0)
			return log_error_errno(-EINVAL,
					       "'%s' is not an address to listen on "
					       "(ADDR[:PORT])",
					       *addr);
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		l->rdma = rdma;
		snprintf(l->address, sizeof(l->address), "%s", *addr);
		r = vb->cm_listen((struct sockaddr *)&ss, &l->vb);
		if (r < 0) {
			free(l);
			return log_error_errno(r, "Cannot listen with rdmacm on %s: %m", *addr);
		}
		uv_poll_init(rdma->core->loop, &l->poll, vb->cm_fd(l->vb));
		l->poll.data = l;
		uv_poll_start(&l->poll, UV_READABLE, on_cm_event);
		list_add_tail(&l->link, &rdma->listeners);
		log_info("Accepting RDMA connections on %s", l->address);
	}
	return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
	struct listener *l = h->data;

	vb->cm_listener_close(l->vb);
	free(l);
}

void endpoint_stop(struct rdma_ctx *rdma)
{
	struct listener *l, *n;

	while (!list_empty(&rdma->tokens.all))
		token_revoke(list_first_entry(&rdma->tokens.all, struct token, link), "shutdown");
	while (!list_empty(&rdma->rconns))
		rconn_destroy(list_first_entry(&rdma->rconns, struct rconn, link), "shutdown");
	idseq_done(&rdma->rconn_order);
	list_for_each_entry_safe(l, n, &rdma->listeners, link) {
		list_del(&l->link);
		uv_close((uv_handle_t *)&l->poll, on_listener_closed);
	}
	free(rdma->allow);
	rdma->allow = NULL;
	rdma->n_allow = 0;
}

/* The GID a peer reaches port 1 at: RoCEv2 over IPv4 when there is one. */
static int default_gid_index(const struct device *dev)
{
	const struct vb_port *p = dev->info.n_ports ? &dev->info.ports[0] : NULL;
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	for (size_t i = 0; p && i < p->n_gids; i++)
		if (strcmp(p->gids[i].type, "RoCEv2") == 0 &&
		    memcmp(p->gids[i].raw, mapped, sizeof(mapped)) == 0)
			return (int)p->gids[i].index;
	for (size_t i = 0; p && i < p->n_gids; i++)
		if (strcmp(p->gids[i].type, "RoCEv2") == 0)
			return (int)p->gids[i].index;
	return 0;
}

/* A GID as the address admission checks: an IPv4-mapped GID is that IPv4
 * address (network_allowed() sees it so), any other the IPv6 address. */
static void gid_address(const uint8_t gid[16], struct sockaddr_storage *ret, char *text,
			size_t size)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ret;
	char buf[INET6_ADDRSTRLEN];

	memset(ret, 0, sizeof(*ret));
	sin6->sin6_family = AF_INET6;
	memcpy(sin6->sin6_addr.s6_addr, gid, 16);
	inet_ntop(AF_INET6, gid, buf, sizeof(buf));
	snprintf(text, size, "GID %s", buf);
}

int endpoint_connect_qp(struct rdma_ctx *rdma, struct session *ctl, const char *device,
			const uint8_t token[TOKEN_BYTES], const struct vb_qp_endpoint *peer,
			int gid_index, struct vb_qp_endpoint *ret, struct errinfo *e)
{
	struct admission a = { .token = token, .device = device, .dev = device_find(rdma, device) };
	enum endpoint_reject why;
	struct token *t;
	struct vb_pd *pd;
	struct rconn *c;
	int r;

	gid_address(peer->gid, &a.peer, a.peer_text, sizeof(a.peer_text));
	r = admit(rdma, &a, &t, &pd, &why, e);
	if (r < 0)
		return r;
	c = rconn_new(rdma, a.dev, t);
	if (!c)
		return -ENOMEM;
	c->oob = true;
	session_add(ctl, SESSION_RCONN, &c->ctl_link);
	snprintf(c->peer, sizeof(c->peer), "%s (pid %d, qpn %u)", a.peer_text, (int)ctl->cred.pid,
		 peer->qpn);

	r = vb->qp_create(pd, 1, &c->qp);
	if (r == 0)
		r = vb->qp_connect(c->qp, peer,
				   gid_index >= 0 ? (uint32_t)gid_index :
						    (uint32_t)default_gid_index(a.dev),
				   ret);
	if (r < 0) {
		rconn_destroy(c, "setup failed");
		/* What the peer gave (its GID above all) is what the
		 * device could not connect to. */
		return errinfo_invalid_param(e, "gid", r,
					     "cannot connect a queue pair on %s to qpn %u: %s",
					     device, peer->qpn, strerror(-r));
	}
	c->qpn = ret->qpn;
	c->established = true;
	log_info("RDMA connection %" PRIu64 " (ConnectQueuePair by pid %d) admitted into uid %u's "
		 "domain on %s (qpn %u → peer qpn %u, path MTU %u)",
		 c->id, (int)ctl->cred.pid, (unsigned)c->uid, device, c->qpn, peer->qpn, ret->mtu);
	return 0;
}
