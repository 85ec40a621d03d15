/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma-peer: a remote peer that knows nothing but what a region's owner would
 * hand out of band — the daemon's endpoint, an access token, and a region's
 * {addr, rkey} — and drives RDMA READ and WRITE against it. Used by the RDMA
 * tests inside the Soft-RoCE VM.
 *
 *   rdma-peer (--rdmacm ADDR[:PORT] | --socket PATH --device NAME [--mtu BYTES])
 *             [--token HEX] --addr A --rkey K
 *             (--read N [--expect TEXT] | --write TEXT)
 *             [--repeat-until-fail SEC | --step]
 *
 * --mtu asks ConnectQueuePair for that path MTU; the peer's own queue pair
 * then uses the MTU the daemon answers, which it prints ("mtu N").
 * --step does one operation at start and one more each time it gets SIGUSR1,
 * printing each result, until one fails: a test decides when the next access
 * happens (after an Unregister returned, say).
 *
 * Exit status: 0 done (and matched), 2 connection refused, 3 work request
 * failed (its status is printed), 4 data mismatch, 5 repeat never failed,
 * 6 the daemon disconnected us, 1 anything else.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <sys/socket.h>
#include <sys/un.h>

#define EXIT_REFUSED 2
#define EXIT_WC 3
#define EXIT_MISMATCH 4
#define EXIT_NEVER_FAILED 5
#define EXIT_DISCONNECTED 6

static const char *arg_rdmacm, *arg_socket, *arg_device, *arg_token, *arg_expect, *arg_write;
static uint64_t arg_addr;
static uint32_t arg_rkey;
static size_t arg_read;
static double arg_repeat;
static unsigned arg_mtu;
static bool arg_step;

struct peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[1 << 20];
};

static struct peer peer;

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "rdma-peer: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(code);
}

static struct rdma_cm_event *wait_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(peer.ch, &ev) < 0)
		die(1, "rdma_get_cm_event: %s", strerror(errno));
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		const uint8_t *p = ev->param.conn.private_data;

		if (p && ev->param.conn.private_data_len >= 5 && memcmp(p, "RDMR", 4) == 0)
			die(EXIT_REFUSED, "connection rejected by rdmamemd, reason %u", p[4]);
		die(EXIT_REFUSED, "connection rejected (status %d)", ev->status);
	}
	if (ev->event != want)
		die(1, "expected %s, got %s (status %d)", rdma_event_str(want),
		    rdma_event_str(ev->event), ev->status);
	return ev;
}

static void make_cq_qp(void)
{
	peer.pd = ibv_alloc_pd(peer.ctx);
	peer.cq = ibv_create_cq(peer.ctx, 16, NULL, NULL, 0);
	if (!peer.pd || !peer.cq)
		die(1, "pd/cq: %s", strerror(errno));
	peer.mr = ibv_reg_mr(peer.pd, peer.buf, sizeof(peer.buf), IBV_ACCESS_LOCAL_WRITE);
	if (!peer.mr)
		die(1, "ibv_reg_mr: %s", strerror(errno));
}

static void connect_rdmacm(void)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	uint8_t data[24] = "RDMT";
	struct rdma_conn_param param = {
		.initiator_depth = 1,
		.responder_resources = 0,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct addrinfo *ai, hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	char host[64], *colon;
	const char *port = "7471";
	struct rdma_cm_event *ev;

	snprintf(host, sizeof(host), "%s", arg_rdmacm);
	colon = strrchr(host, ':');
	if (colon) {
		*colon = '\0';
		port = colon + 1;
	}
	if (getaddrinfo(host, port, &hints, &ai))
		die(1, "bad address %s", arg_rdmacm);
	peer.ch = rdma_create_event_channel();
	if (!peer.ch || rdma_create_id(peer.ch, &peer.id, NULL, RDMA_PS_TCP))
		die(1, "rdma_create_id: %s", strerror(errno));
	if (rdma_resolve_addr(peer.id, NULL, ai->ai_addr, 5000))
		die(1, "rdma_resolve_addr: %s", strerror(errno));
	rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(peer.id, 5000))
		die(1, "rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	freeaddrinfo(ai);

	peer.ctx = peer.id->verbs;
	make_cq_qp();
	init.send_cq = init.recv_cq = peer.cq;
	if (rdma_create_qp(peer.id, peer.pd, &init))
		die(1, "rdma_create_qp: %s", strerror(errno));
	peer.qp = peer.id->qp;

	data[4] = 1;
	if (arg_token) {
		for (int i = 0; i < 16; i++)
			if (sscanf(arg_token + 2 * i, "%2hhx", &data[8 + i]) != 1)
				die(1, "bad token");
		param.private_data = data;
		param.private_data_len = sizeof(data);
	}
	if (rdma_connect(peer.id, &param))
		die(1, "rdma_connect: %s", strerror(errno));
	ev = wait_event(RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	/* From here on the channel is only watched for a disconnect. */
	fcntl(peer.ch->fd, F_SETFL, fcntl(peer.ch->fd, F_GETFL) | O_NONBLOCK);
}

/* The daemon dropped the connection: its queue pair is gone, so a posted
 * work request may never complete. */
static bool disconnected(void)
{
	struct rdma_cm_event *ev;
	bool gone = false;

	while (peer.ch && rdma_get_cm_event(peer.ch, &ev) == 0) {
		gone = gone || ev->event == RDMA_CM_EVENT_DISCONNECTED;
		rdma_ack_cm_event(ev);
	}
	if (gone) {
		printf("disconnected\n");
		fflush(stdout);
	}
	return gone;
}

/*
 * One Varlink call on a plain socket, as any peer could make it: the peer
 * does not need the project's library. Returns the reply's parameters, or
 * exits. The socket is kept open: the daemon's queue pair lives as long as
 * this connection.
 */
static cJSON *varlink_call(const char *path, const char *method, const char *params)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static char reply[65536];
	char msg[1024];
	size_t got = 0;
	cJSON *root, *err;
	int fd, n;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(1, "cannot reach rdmamemd at %s: %s", path, strerror(errno));
	n = snprintf(msg, sizeof(msg), "{\"method\":\"%s\",\"parameters\":%s}", method, params);
	if (write(fd, msg, (size_t)n + 1) != n + 1)
		die(1, "write: %s", strerror(errno));
	while (got == 0 || reply[got - 1] != '\0') {
		ssize_t r = read(fd, reply + got, sizeof(reply) - 1 - got);

		if (r <= 0)
			die(1, "rdmamemd closed the connection");
		got += r;
	}
	root = cJSON_Parse(reply);
	err = cJSON_GetObjectItem(root, "error");
	/* The error's parameters as they came: what a test looks at. */
	if (cJSON_IsString(err))
		die(EXIT_REFUSED, "%s: %s: %s", method, err->valuestring,
		    cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "parameters")));
	return cJSON_DetachItemFromObject(root, "parameters");
}

/* The daemon's side of the queue pair comes back over Varlink. */
static enum ibv_mtu mtu_enum(unsigned bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	case 4096:
		return IBV_MTU_4096;
	default:
		die(1, "the daemon answered mtu %u, which is no IB MTU", bytes);
	}
}

static void connect_oob(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	union ibv_gid gid;
	char gidtext[64], params[512], mtu[32] = "";
	cJSON *root, *g;
	uint32_t psn;
	unsigned path_mtu;

	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), arg_device) == 0)
			peer.ctx = ibv_open_device(list[i]);
	if (!peer.ctx)
		die(1, "no device %s", arg_device);
	make_cq_qp();
	init.send_cq = init.recv_cq = peer.cq;
	peer.qp = ibv_create_qp(peer.pd, &init);
	if (!peer.qp ||
	    ibv_modify_qp(peer.qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die(1, "qp: %s", strerror(errno));
	/* Index 1 is the IPv4 RoCEv2 GID on rxe (as ibv_rc_pingpong -g 1). */
	if (ibv_query_gid(peer.ctx, 1, 1, &gid))
		die(1, "ibv_query_gid: %s", strerror(errno));
	inet_ntop(AF_INET6, gid.raw, gidtext, sizeof(gidtext));
	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		psn = 1;
	psn &= 0xffffff;

	if (arg_mtu)
		snprintf(mtu, sizeof(mtu), ",\"mtu\":%u", arg_mtu);
	snprintf(params, sizeof(params),
		 "{\"device\":\"%s\",\"token\":\"%s\",\"qpn\":%u,\"psn\":%u,\"gid\":\"%s\"%s}",
		 arg_device, arg_token ?: "00000000000000000000000000000000", peer.qp->qp_num, psn,
		 gidtext, mtu);
	root = varlink_call(arg_socket, "io.rdmamemd.ConnectQueuePair", params);
	g = cJSON_GetObjectItem(root, "gid");
	/* Both ends of the path use the MTU the daemon's queue pair is in. */
	path_mtu = (unsigned)cJSON_GetObjectItem(root, "mtu")->valuedouble;
	printf("mtu %u\n", path_mtu);

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = mtu_enum(path_mtu);
	attr.dest_qp_num = (uint32_t)cJSON_GetObjectItem(root, "qpn")->valuedouble;
	attr.rq_psn = (uint32_t)cJSON_GetObjectItem(root, "psn")->valuedouble;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.grh.sgid_index = 1;
	attr.ah_attr.grh.hop_limit = 64;
	inet_pton(AF_INET6, g->valuestring, attr.ah_attr.grh.dgid.raw);
	if (ibv_modify_qp(peer.qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die(1, "RTR: %s", strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = psn;
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(peer.qp, &attr,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die(1, "RTS: %s", strerror(errno));
	cJSON_Delete(root);
	ibv_free_device_list(list);
}

/* Posts one RDMA READ or WRITE and waits for its completion. */
static int one_op(void)
{
	size_t len = arg_write ? strlen(arg_write) : arg_read;
	struct ibv_sge sge = { .addr = (uintptr_t)peer.buf,
			       .length = (uint32_t)len,
			       .lkey = peer.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = arg_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = arg_addr, .rkey = arg_rkey },
	}, *bad;
	struct ibv_wc wc;
	time_t deadline = time(NULL) + 30;
	int n;

	if (arg_write)
		memcpy(peer.buf, arg_write, len);
	else
		memset(peer.buf, 0, len);
	if (ibv_post_send(peer.qp, &wr, &bad))
		die(1, "ibv_post_send: %s", strerror(errno));
	while ((n = ibv_poll_cq(peer.cq, 1, &wc)) == 0) {
		if (time(NULL) > deadline)
			die(1, "no completion in 30 s");
		if (disconnected())
			return -EXIT_DISCONNECTED;
		usleep(100);
	}
	if (n < 0)
		die(1, "ibv_poll_cq failed");
	if (wc.status != IBV_WC_SUCCESS) {
		printf("wc %s\n", ibv_wc_status_str(wc.status));
		fflush(stdout);
		return -EXIT_WC;
	}
	if (!arg_write) {
		if (arg_expect && memcmp(peer.buf, arg_expect, len) != 0) {
			printf("mismatch: got '%.*s'\n", (int)len, peer.buf);
			return -EXIT_MISMATCH;
		}
		printf("read '%.*s'\n", (int)len, peer.buf);
	} else {
		printf("wrote %zu bytes\n", len);
	}
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "rdmacm", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		{ "token", required_argument, NULL, 't' },
		{ "addr", required_argument, NULL, 'a' },
		{ "rkey", required_argument, NULL, 'k' },
		{ "read", required_argument, NULL, 'r' },
		{ "expect", required_argument, NULL, 'e' },
		{ "write", required_argument, NULL, 'w' },
		{ "repeat-until-fail", required_argument, NULL, 'R' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "step", no_argument, NULL, 'S' },
		{},
	};
	sigset_t usr1;
	int c, r, sig;

	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'c':
			arg_rdmacm = optarg;
			break;
		case 's':
			arg_socket = optarg;
			break;
		case 'd':
			arg_device = optarg;
			break;
		case 't':
			arg_token = optarg;
			break;
		case 'a':
			arg_addr = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			arg_rkey = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			arg_read = strtoul(optarg, NULL, 0);
			break;
		case 'e':
			arg_expect = optarg;
			break;
		case 'w':
			arg_write = optarg;
			break;
		case 'R':
			arg_repeat = atof(optarg);
			break;
		case 'm':
			arg_mtu = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			arg_step = true;
			break;
		default:
			return 1;
		}
	}
	if ((!arg_rdmacm && !(arg_socket && arg_device)) || (!arg_read && !arg_write) ||
	    arg_read > sizeof(peer.buf))
		die(1, "usage: see the comment at the top of rdma-peer.c");
	/* Blocked before anything is printed: a SIGUSR1 sent as soon as the
	 * test reads our first line waits for sigwait(). */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);

	if (arg_rdmacm)
		connect_rdmacm();
	else
		connect_oob();
	printf("connected\n");
	fflush(stdout);

	r = one_op();
	while (r == 0 && arg_step && sigwait(&usr1, &sig) == 0)
		r = one_op();
	if (r < 0 || arg_repeat <= 0)
		return r < 0 ? -r : 0;
	/* Keep going until the daemon takes access away (or the time runs out). */
	for (time_t end = time(NULL) + (time_t)arg_repeat; time(NULL) < end;) {
		usleep(50000);
		r = one_op();
		if (r < 0)
			return -r;
	}
	return EXIT_NEVER_FAILED;
}
