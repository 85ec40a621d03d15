/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/core/account.h"
#include "daemon/ipc/conn.h"
#include "daemon/core/core.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "util/sockpath.h"
#include "daemon/rpc/rpc.h"
#include "daemon/ipc/server.h"

/* Connections accepted per wake-up before other work gets a turn: a flood
 * of connections costs the others at most one batch of accepts at a time. */
#define SERVER_ACCEPT_BATCH 64
/* Messages about refusals and drops: at most one per interval. */
#define SERVER_LOG_INTERVAL_MSEC 5000U

static int mkdir_parents(const char *path, mode_t mode)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/*
 * Removes a socket left by a daemon that died, but never a live one (another
 * rdmamemd answers on it) and never a file that is not a socket.
 */
static int remove_stale_socket(const char *path, const struct sockaddr_un *sa, socklen_t salen)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return log_error_errno(-EEXIST, "'%s' exists and is not a socket, not touching it",
				       path);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, salen) == 0)
		return log_error_errno(-EADDRINUSE, "Another daemon is listening on '%s'", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return log_error_errno(-errno, "Cannot remove stale socket '%s': %m", path);
	log_info("Removed stale socket '%s'", path);
	return 0;
}

static int server_bind(struct server *s, const char *path, mode_t mode, gid_t gid)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_un sa;
	unsigned salen;
	mode_t old_umask;
	int r;

	r = sockpath_to_addr(path, &sa, &salen);
	if (r < 0)
		return log_error_errno(r, "Socket path '%s' is not usable: %m", path);

	r = mkdir_parents(path, 0755);
	if (r < 0)
		return log_error_errno(r, "Cannot create the directory of '%s': %m", path);

	r = remove_stale_socket(path, &sa, salen);
	if (r < 0)
		return r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return log_error_errno(-errno, "Cannot create socket: %m");

	/* No window in which the socket exists with looser permissions. */
	old_umask = umask(~mode & 0777);
	r = bind(fd, (struct sockaddr *)&sa, salen);
	umask(old_umask);
	if (r < 0)
		return log_error_errno(-errno, "Cannot bind to '%s': %m", path);
	if (chmod(path, mode) < 0)
		log_warning_errno(-errno, "Cannot set mode %04o on '%s', ignoring: %m", mode, path);
	/* socket-group: before listen(), so that no member connects to a
	 * socket that later changes hands. The group was checked at start. */
	if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0) {
		r = -errno;
		unlink(path);
		return log_error_errno(r, "Cannot give '%s' to group %s: %m", path,
				       s->core->cfg.socket_group);
	}

	if (listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		unlink(path);
		return log_error_errno(r, "Cannot listen on '%s': %m", path);
	}

	s->path = strdup(path);
	if (!s->path) {
		unlink(path);
		return -ENOMEM;
	}
	s->fd = TAKE_FD(fd);
	return 0;
}

/* Adopts fd, the listening Unix stream socket systemd passed. */
static int server_adopt_activated(struct server *s, int fd)
{
	struct sockaddr_un sa = {};
	socklen_t salen = sizeof(sa);
	int flags;

	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return log_error_errno(-errno, "Cannot make the passed socket non-blocking: %m");

	if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0 && sa.sun_path[0])
		s->path = strndup(sa.sun_path, sizeof(sa.sun_path));
	else
		s->path = strdup("(socket activated)");
	if (!s->path)
		return -ENOMEM;
	s->fd = fd;
	s->activated = true;
	return 0;
}

/* Logs a refusal or drop, at most once per interval with a count of the rest. */
static void server_log_refusal(struct server *s, const char *what, const struct ucred *cred)
{
	unsigned held_back;

	s->n_refused_total++;
	if (!ratelimit_pass(&s->refusal_log, uv_now(s->core->loop), &held_back))
		return;
	log_full_fields(LOG_NOTICE, 0, LOG_CLIENT(cred),
			"%s, refusing pid %d uid %u (%u more refusals since the last message; "
			"%u admitted, %u waiting to be told)",
			what, (int)cred->pid, (unsigned)cred->uid, held_back, s->n_conns,
			s->n_rejected);
}

/*
 * Admits fd, refuses it with an answer, or closes it at once. Deciding costs
 * no allocation: a refused connection that is closed at once leaves nothing
 * behind, not even an account for its uid.
 */
static void server_accept_one(struct server *s, int fd)
{
	const struct daemon_config *cfg = &s->core->cfg;
	const char *why = NULL;
	struct account *a;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *c;
	int r;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warning_errno(-errno, "Cannot read peer credentials, dropping client: %m");
		safe_close(fd);
		return;
	}

	a = account_find(s->core->accounts, cred.uid);
	if (s->n_conns >= cfg->max_connections)
		why = "Connection limit reached";
	else if (a && a->n_connections >= cfg->max_connections_per_uid)
		why = "Per-uid connection limit reached";
	if (why && (s->n_rejected >= SERVER_REJECTED_MAX ||
		    (a && a->n_rejected >= SERVER_REJECTED_PER_UID_MAX))) {
		server_log_refusal(s, why, &cred);
		safe_close(fd);
		return;
	}

	r = conn_new(s, fd, &cred, &c);
	if (r < 0) {
		log_warning_errno(r, "Cannot set up connection from pid %d: %m", (int)cred.pid);
		return;
	}
	if (why) {
		server_log_refusal(s, why, &cred);
		conn_reject(c, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	}
}

/*
 * Out of fds: the client at the head of the queue would keep the socket
 * readable and the loop spinning. Free the spare, accept and drop it, take
 * the spare back (libuv's uv__emfile_trick, one client per turn so that
 * clients whose turn comes after fds were freed are served).
 */
static void server_drop_one(struct server *s, int error)
{
	unsigned held_back;

	if (s->spare_fd < 0)
		return;
	s->spare_fd = safe_close(s->spare_fd);
	safe_close(accept4(s->fd, NULL, NULL, SOCK_CLOEXEC));
	s->spare_fd = open("/", O_PATH | O_CLOEXEC);
	if (ratelimit_pass(&s->emfile_log, uv_now(s->core->loop), &held_back))
		log_warning_errno(error,
				  "Out of file descriptors (%u admitted, %u waiting to be told "
				  "they are refused), dropped a client and %u before: %m",
				  s->n_conns, s->n_rejected, held_back);
}

static void on_listen(uv_poll_t *h, int status, int events)
{
	struct server *s = h->data;

	(void)events;
	if (status < 0) {
		log_error("Listening socket failed: %s", uv_strerror(status));
		return;
	}

	for (int i = 0; i < SERVER_ACCEPT_BATCH; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd >= 0) {
			server_accept_one(s, fd);
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE) {
			server_drop_one(s, -errno);
			return;
		}
		log_warning_errno(-errno, "accept() failed: %m");
		return;
	}
}

int server_new(struct core *core, struct rpc_ctx *rpc, int activated_fd, struct server **ret)
{
	_cleanup_(server_freep) struct server *s = NULL;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	gid_t gid;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->core = core;
	s->rpc = rpc;
	s->fd = -EBADF;
	s->spare_fd = open("/", O_PATH | O_CLOEXEC);
	s->refusal_log.interval_msec = SERVER_LOG_INTERVAL_MSEC;
	s->emfile_log.interval_msec = SERVER_LOG_INTERVAL_MSEC;
	s->stall_log.interval_msec = SERVER_LOG_INTERVAL_MSEC;
	list_init(&s->conns);
	budget_init(s->budgets, &core->cfg, conn_budget_retry, SERVER_LOG_INTERVAL_MSEC);
	idseq_init(&s->conn_order);

	if (activated_fd >= 0) {
		r = server_adopt_activated(s, activated_fd);
		if (r < 0)
			return r;
	} else {
		if (core->cfg.socket_path) {
			if (strlen(core->cfg.socket_path) >= sizeof(path))
				return log_error_errno(-ENAMETOOLONG,
						       "Socket path is too long (max %zu)",
						       sizeof(path) - 1);
			strcpy(path, core->cfg.socket_path);
		} else {
			r = sockpath_server_default(path, sizeof(path));
			if (r < 0)
				return log_error_errno(r, "No socket path: set --socket, "
							  "RDMAMEM_SOCKET or XDG_RUNTIME_DIR");
		}
		r = config_socket_group(&core->cfg, &gid);
		if (r < 0)
			return log_error_errno(r, "socket-group '%s': no such group",
					       core->cfg.socket_group);
		r = server_bind(s, path, core->cfg.socket_mode, gid);
		if (r < 0)
			return r;
	}

	r = uv_poll_init(core->loop, &s->poll, s->fd);
	if (r < 0)
		return log_error_errno(-ENOMEM, "Cannot poll the socket: %s", uv_strerror(r));
	s->poll.data = s;
	s->listening = true;
	r = uv_poll_start(&s->poll, UV_READABLE, on_listen);
	if (r < 0) {
		server_stop_listening(s);
		return log_error_errno(-EIO, "Cannot poll the socket: %s", uv_strerror(r));
	}

	/* Last: from here on the loop knows the server's memory (making a
	 * check or an idle handle cannot fail). */
	conn_serve_later_init(s);
	budget_start(s->budgets, core->loop);
	core->accounts->budgets = s->budgets;

	log_info("Listening on '%s'%s", s->path, s->activated ? " (socket activated)" : "");
	*ret = TAKE_PTR(s);
	return 0;
}

void server_hold(struct server *s, bool hold)
{
	if (!s->listening || s->held == hold)
		return;
	s->held = hold;
	if (hold)
		uv_poll_stop(&s->poll);
	else if (uv_poll_start(&s->poll, UV_READABLE, on_listen) < 0)
		log_error("Cannot poll the socket again: no new client is taken");
}

static void on_listen_closed(uv_handle_t *h)
{
	(void)h;
}

void server_stop_listening(struct server *s)
{
	if (!s->listening)
		return;
	s->listening = false;
	/* Unlink before close: after close another daemon may bind the
	 * same path, and we must not remove its socket. */
	if (!s->activated && s->path)
		unlink(s->path);
	uv_close((uv_handle_t *)&s->poll, on_listen_closed);
	s->fd = safe_close(s->fd);
}

void server_stop_handles(struct server *s)
{
	budget_stop(s->budgets);
	conn_serve_later_stop(s);
}

void server_conn_removed(struct server *s)
{
	if (s->core->shutting_down && list_empty(&s->conns) && s->drained)
		s->drained(s->drained_userdata);
}

struct server *server_free(struct server *s)
{
	if (!s)
		return NULL;
	if (s->listening) {
		/* Only reached on a failed start, before the loop ran. */
		s->listening = false;
		if (!s->activated && s->path)
			unlink(s->path);
	}
	safe_close(s->fd);
	safe_close(s->spare_fd);
	idseq_done(&s->conn_order);
	free(s->path);
	free(s);
	return NULL;
}

static void server_rpc_status(const void *server, struct rpc_server_status *ret)
{
	const struct server *s = server;

	*ret = (struct rpc_server_status){ .path = s->path,
					   .n_clients = s->n_conns,
					   .n_rejected = s->n_rejected,
					   .n_rejected_max = SERVER_REJECTED_MAX,
					   .n_refused_total = s->n_refused_total };
	for (unsigned k = 0; k < BUDGET_KINDS; k++)
		ret->bytes[k] = s->budgets[k].bytes;
}

static const struct idseq *server_rpc_clients(const void *server)
{
	const struct server *s = server;

	return &s->conn_order;
}

static void server_rpc_client(const struct idseq_node *node, struct rpc_client *ret)
{
	const struct conn *c = container_of(node, struct conn, order);

	*ret = (struct rpc_client){
		.session = c->session,
		.id = c->id,
		.n_calls = c->n_calls,
		.refused = c->reject,
		.in_call = c->call,
	};
}

const struct rpc_server_ops server_rpc_ops = {
	.status = server_rpc_status,
	.clients = server_rpc_clients,
	.client = server_rpc_client,
};
