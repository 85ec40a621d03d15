/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client-internal.h"
#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/json.h"
#include "util/sockio.h"
#include "util/sockpath.h"
#include "proto/varlink.h"

struct rdmamem_client {
	int fd;
	int timeout_ms;
	bool broken; /* out of sync with the daemon: only closing helps */
	struct frame_reader in;
	int in_fds[SOCKIO_FDS_MAX];
	size_t n_in_fds;
	char *path;
	char *error_name;
	char *error_message;
};

void rdmamem__set_error(struct rdmamem_client *c, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;

	free(c->error_name);
	free(c->error_message);
	c->error_name = name ? strdup(name) : NULL;
	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) < 0)
			msg = NULL;
		va_end(ap);
	}
	c->error_message = msg;
}

void rdmamem__take_error(struct rdmamem_client *c, char **ret_name, char **ret_message)
{
	*ret_name = TAKE_PTR(c->error_name);
	*ret_message = TAKE_PTR(c->error_message);
}

void rdmamem__put_error(struct rdmamem_client *c, char *name, char *message)
{
	free(c->error_name);
	free(c->error_message);
	c->error_name = name;
	c->error_message = message;
}

/*
 * The message of an error from the daemon: io.rdmamemd's errors carry one;
 * org.varlink.service's carry only the parameter they declare (the daemon
 * logs its explanation at debug), so the line is composed from that.
 */
static void set_remote_error(struct rdmamem_client *c, const char *name, const cJSON *params)
{
	static const struct {
		const char *name, *param, *fmt;
	} composed[] = {
		{ VARLINK_ERROR_INVALID_PARAMETER, "parameter",
		  "parameter '%s' is invalid: unknown, missing, of the wrong type or out of its range "
		  "(the daemon logs why at debug level)" },
		{ VARLINK_ERROR_METHOD_NOT_FOUND, "method", "the daemon has no method %s" },
		{ VARLINK_ERROR_METHOD_NOT_IMPLEMENTED, "method",
		  "the daemon does not implement %s" },
		{ VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface",
		  "the daemon does not serve the interface %s" },
	};
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");

	if (cJSON_IsString(m)) {
		rdmamem__set_error(c, name, "%s", m->valuestring);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(composed); i++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(params, composed[i].param);

		if (strcmp(name, composed[i].name) == 0 && cJSON_IsString(p)) {
			rdmamem__set_error(c, name, composed[i].fmt, p->valuestring);
			return;
		}
	}
	rdmamem__set_error(c, name, "%s", name);
}

static void clear_error(struct rdmamem_client *c)
{
	rdmamem__set_error(c, NULL, NULL);
}

_public_ int rdmamem_client_connect(const char *path, struct rdmamem_client **ret)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct rdmamem_client *c;
	struct sockaddr_un sa;
	unsigned salen;
	int r;

	if (!ret)
		return -EINVAL;
	if (!path) {
		r = sockpath_client_default(buf, sizeof(buf));
		if (r < 0)
			return r;
		path = buf;
	}
	r = sockpath_to_addr(path, &sa, &salen);
	if (r < 0)
		return r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->timeout_ms = RDMAMEM_DEFAULT_TIMEOUT_MS;
	frame_reader_init(&c->in, VARLINK_BODY_MAX);
	c->path = strdup(path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!c->path || c->fd < 0) {
		r = c->fd < 0 ? negative_errno() : -ENOMEM;
		goto fail;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, salen) < 0) {
		r = negative_errno();
		goto fail;
	}
	/* Connected: from here on waits are bounded by poll() timeouts. */
	r = fcntl(c->fd, F_GETFL);
	if (r < 0 || fcntl(c->fd, F_SETFL, r | O_NONBLOCK) < 0) {
		r = negative_errno();
		goto fail;
	}

	*ret = c;
	return 0;

fail:
	rdmamem_client_close(c);
	return r;
}

_public_ struct rdmamem_client *rdmamem_client_close(struct rdmamem_client *c)
{
	if (!c)
		return NULL;
	safe_close(c->fd);
	close_many(c->in_fds, c->n_in_fds);
	frame_reader_done(&c->in);
	free(c->path);
	free(c->error_name);
	free(c->error_message);
	free(c);
	return NULL;
}

_public_ int rdmamem_client_set_timeout(struct rdmamem_client *c, int timeout_ms)
{
	if (!c)
		return -EINVAL;
	c->timeout_ms = timeout_ms;
	return 0;
}

_public_ const char *rdmamem_client_socket_path(const struct rdmamem_client *c)
{
	return c ? c->path : NULL;
}

_public_ const char *rdmamem_client_error_name(const struct rdmamem_client *c)
{
	return c ? c->error_name : NULL;
}

_public_ const char *rdmamem_client_error_message(const struct rdmamem_client *c)
{
	return c ? c->error_message : NULL;
}

static int64_t now_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on the socket until deadline (-1: forever). */
static int wait_fd(struct rdmamem_client *c, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };
	int timeout = -1, r;

	if (deadline >= 0) {
		int64_t left = deadline - now_msec();

		timeout = left > 0 ? (int)MIN(left, (int64_t)INT32_MAX) : 0;
	}
	r = poll(&pfd, 1, timeout);
	if (r < 0)
		return errno == EINTR ? 0 : negative_errno();
	if (r == 0)
		return -ETIMEDOUT;
	return 0;
}

static int broken(struct rdmamem_client *c, int r)
{
	c->broken = true;
	if (r == -ETIMEDOUT)
		rdmamem__set_error(c, NULL, "no answer from the daemon at '%s' in time; reconnect",
				   c->path);
	else if (r == -ECONNRESET || r == -EPIPE)
		rdmamem__set_error(c, NULL,
				   "the daemon at '%s' closed the connection (it may have exited); "
				   "reconnect, and register again what this connection held",
				   c->path);
	else if (r == -EPROTO || r == -EMSGSIZE)
		rdmamem__set_error(c, NULL, "the daemon sent an invalid message");
	else
		rdmamem__set_error(c, NULL, "connection to the daemon failed: %s", strerror(-r));
	return r == -EPIPE ? -ECONNRESET : r;
}

static int send_all(struct rdmamem_client *c, const char *buf, size_t len, const int *fds,
		    size_t n_fds, int64_t deadline)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = sockio_send(c->fd, buf + off, len - off, off == 0 ? fds : NULL,
					off == 0 ? n_fds : 0, MSG_DONTWAIT);
		int r;

		if (n >= 0) {
			off += n;
			continue;
		}
		if (n != -EAGAIN && n != -EINTR)
			return (int)n;
		r = wait_fd(c, POLLOUT, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Reads until one complete message; *ret_root gets its parsed tree. */
static int recv_message(struct rdmamem_client *c, cJSON **ret_root, int64_t deadline)
{
	for (;;) {
		int fds[SOCKIO_FDS_MAX];
		struct frame f;
		const char *reason;
		size_t n_fds, space;
		ssize_t n;
		void *p;
		int r;

		r = frame_reader_next(&c->in, &f);
		if (r < 0)
			return -EMSGSIZE;
		if (r > 0) {
			r = json_parse(f.data, f.len, ret_root, &reason);
			return r < 0 ? -EPROTO : 0;
		}

		r = frame_reader_reserve(&c->in, &p, &space);
		if (r < 0)
			return r == -ENOBUFS ? -EMSGSIZE : r;
		n = sockio_recv(c->fd, p, space, fds, &n_fds, MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EINTR) {
			r = wait_fd(c, POLLIN, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		frame_reader_commit(&c->in, n);
		if (n_fds > 0) {
			/* Replies come one at a time, so fds belong to the
			 * reply being read. */
			if (c->n_in_fds + n_fds > SOCKIO_FDS_MAX) {
				close_many(fds, n_fds);
				return -EPROTO;
			}
			memcpy(c->in_fds + c->n_in_fds, fds, n_fds * sizeof(int));
			c->n_in_fds += n_fds;
		}
	}
}

static void hand_out_fds(struct rdmamem_client *c, int *ret_fds, size_t *ret_n_fds)
{
	size_t n = 0;

	if (ret_n_fds) {
		n = ret_fds ? MIN(*ret_n_fds, c->n_in_fds) : 0;
		if (n > 0)
			memcpy(ret_fds, c->in_fds, n * sizeof(int));
		*ret_n_fds = n;
	}
	close_many(c->in_fds + n, c->n_in_fds - n);
	c->n_in_fds = 0;
}

int rdmamem__call(struct rdmamem_client *c, const char *method, const cJSON *params, const int *fds,
		  size_t n_fds, int extra_wait_ms, cJSON **ret_root, cJSON **ret_params,
		  int *ret_fds, size_t *ret_n_fds)
{
	return rdmamem__call_more(c, method, params, fds, n_fds, extra_wait_ms, NULL, NULL,
				  ret_root, ret_params, ret_fds, ret_n_fds);
}

int rdmamem__call_more(struct rdmamem_client *c, const char *method, const cJSON *params,
		       const int *fds, size_t n_fds, int extra_wait_ms,
		       void (*on_continues)(void *userdata, const cJSON *params), void *userdata,
		       cJSON **ret_root, cJSON **ret_params, int *ret_fds, size_t *ret_n_fds)
{
	_cleanup_json_ cJSON *root = NULL;
	_cleanup_free_ char *text = NULL;
	struct varlink_reply reply;
	const char *reason;
	int64_t deadline;
	size_t len;
	int r;

	if (!c || !method || (n_fds > 0 && !fds))
		return -EINVAL;
	if (c->broken) {
		rdmamem__set_error(c, NULL,
				   "the connection is broken by an earlier failure; reconnect");
		return -ENOTCONN;
	}
	clear_error(c);
	if (n_fds > VARLINK_FDS_MAX) {
		rdmamem__set_error(c, NULL, "at most %u file descriptors per call",
				   VARLINK_FDS_MAX);
		return -E2BIG;
	}
	r = varlink_call_format(method, params, false, &text, &len);
	if (r < 0)
		return r;
	/* With more: the same message, '"more":true' before its closing brace. */
	if (on_continues) {
		char *m = realloc(text, len + sizeof(",\"more\":true"));

		if (!m)
			return -ENOMEM;
		text = m;
		strcpy(text + len - 1, ",\"more\":true}");
		len = strlen(text);
	}

	/* Calls that wait on the daemon's side (locks) get that long more. */
	deadline = c->timeout_ms < 0 || extra_wait_ms < 0 ?
			   -1 :
			   now_msec() + c->timeout_ms + extra_wait_ms;
	/* The terminator goes out with the text, in the same sendmsg. */
	r = send_all(c, text, len + 1, fds, n_fds, deadline);
	if (r < 0)
		return broken(c, r);

	for (;;) {
		r = recv_message(c, &root, deadline);
		if (r == 0 && varlink_reply_parse(root, &reply, &reason) < 0)
			r = -EPROTO;
		if (r < 0 || !reply.continues || !on_continues || reply.error)
			break;
		/* A progress reply: the final one follows. Each one moves the
		 * deadline: the call is alive. */
		on_continues(userdata, reply.parameters);
		cJSON_Delete(TAKE_PTR(root));
		if (deadline >= 0)
			deadline = now_msec() + c->timeout_ms + extra_wait_ms;
	}
	if (r == 0 && reply.continues)
		r = -EPROTO;
	if (r < 0) {
		close_many(c->in_fds, c->n_in_fds);
		c->n_in_fds = 0;
		return broken(c, r);
	}
	hand_out_fds(c, ret_fds, ret_n_fds);

	if (reply.error) {
		set_remote_error(c, reply.error, reply.parameters);
		r = rdmamem_error_to_errno(reply.error);
	}
	if (ret_params)
		*ret_params = reply.parameters;
	if (ret_root)
		*ret_root = TAKE_PTR(root);
	return r;
}

_public_ int rdmamem_call(struct rdmamem_client *c, const char *method, const char *params_json,
			  const int *fds, size_t n_fds, char **ret_reply_json, int *ret_fds,
			  size_t *ret_n_fds)
{
	_cleanup_json_ cJSON *params = NULL;
	_cleanup_json_ cJSON *root = NULL;
	const char *reason;
	cJSON *reply = NULL;
	int r;

	if (!c || !method)
		return -EINVAL;
	if (params_json) {
		r = json_parse(params_json, strlen(params_json), &params, &reason);
		if (r < 0 || !cJSON_IsObject(params)) {
			rdmamem__set_error(c, NULL, "parameters must be a JSON object: %s",
					   r < 0 ? reason : "not an object");
			return -EINVAL;
		}
	}
	r = rdmamem__call(c, method, params, fds, n_fds, 0, &root, &reply, ret_fds, ret_n_fds);
	if (ret_reply_json && root) {
		char *out = reply ? cJSON_PrintUnformatted(reply) : strdup("{}");

		if (!out)
			return -ENOMEM;
		*ret_reply_json = out;
	}
	return r;
}

/* The one array of a listing's reply. */
static cJSON *list_of(const cJSON *reply)
{
	cJSON *item;

	cJSON_ArrayForEach(item, reply)
		if (cJSON_IsArray(item))
			return item;
	return NULL;
}

_public_ int rdmamem_list(struct rdmamem_client *c, const char *method, char **ret_reply_json)
{
	_cleanup_json_ cJSON *params = cJSON_CreateObject();
	_cleanup_json_ cJSON *all = NULL;
	cJSON *items = NULL;
	uint64_t after = 0;
	int r;

	if (!c || !method || !ret_reply_json)
		return -EINVAL;
	/* The largest pages: fewest round trips. */
	if (!params || json_add_int(params, "limit", LIST_PAGE_MAX) < 0)
		return -ENOMEM;
	for (;;) {
		_cleanup_json_ cJSON *root = NULL;
		cJSON *reply = NULL, *list, *next;
		uint64_t v;

		r = rdmamem__call(c, method, params, NULL, 0, 0, &root, &reply, NULL, NULL);
		if (r < 0)
			return r;
		list = list_of(reply);
		if (!list) {
			rdmamem__set_error(c, NULL, "the answer of %s holds no list", method);
			return -EPROTO;
		}
		if (!all) {
			all = cJSON_CreateObject();
			items = all ? cJSON_AddArrayToObject(all, list->string) : NULL;
			if (!items)
				return -ENOMEM;
		}
		while (list->child)
			cJSON_AddItemToArray(items, cJSON_DetachItemViaPointer(list, list->child));
		next = cJSON_GetObjectItemCaseSensitive(reply, "next");
		if (!next)
			break;
		/* A cursor that does not move on would never end. */
		if (json_to_u64(next, &v) < 0 || (after > 0 && v <= after)) {
			rdmamem__set_error(c, NULL, "the answer of %s has a bad 'next'", method);
			return -EPROTO;
		}
		after = v;
		cJSON_DeleteItemFromObjectCaseSensitive(params, "after");
		if (json_add_u64(params, "after", after) < 0)
			return -ENOMEM;
	}
	*ret_reply_json = cJSON_PrintUnformatted(all);
	return *ret_reply_json ? 0 : -ENOMEM;
}

_public_ int rdmamem_ping(struct rdmamem_client *c)
{
	return rdmamem_call(c, "io.rdmamemd.Ping", NULL, NULL, 0, NULL, NULL, NULL);
}
