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
#include "staging.h"
#include "proto/errors.h"
#include "proto/frame.h"
#include "proto/json.h"
#include "util/sockio.h"
#include "util/sockpath.h"
#include "proto/varlink.h"

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
 * The message of an error from the daemon (malloc()ed): io.rdmamemd's
 * errors carry one; org.varlink.service's carry only the parameter they
 * declare (the daemon logs its explanation at debug), so the line is
 * composed from that.
 */
char *rdmamem__remote_error_message(const char *name, const cJSON *params)
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
	char *text = NULL;

	if (cJSON_IsString(m))
		return strdup(m->valuestring);
	for (size_t i = 0; i < ELEMENTSOF(composed); i++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(params, composed[i].param);

		if (strcmp(name, composed[i].name) == 0 && cJSON_IsString(p))
			return asprintf(&text, composed[i].fmt, p->valuestring) < 0 ? NULL : text;
	}
	return strdup(name);
}

static void clear_error(struct rdmamem_client *c)
{
	rdmamem__set_error(c, NULL, NULL);
}

int rdmamem__connect_fd(const char *path, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_un sa;
	unsigned salen;
	int r;

	r = sockpath_to_addr(path, &sa, &salen);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, salen) < 0)
		return negative_errno();
	/* Connected: from here on waits are bounded by poll() timeouts. */
	r = fcntl(fd, F_GETFL);
	if (r < 0 || fcntl(fd, F_SETFL, r | O_NONBLOCK) < 0)
		return negative_errno();
	*ret_fd = TAKE_FD(fd);
	return 0;
}

_public_ int rdmamem_client_connect(const char *path, struct rdmamem_client **ret)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct rdmamem_client *c;
	int r;

	if (!ret)
		return -EINVAL;
	if (!path) {
		r = sockpath_client_default(buf, sizeof(buf));
		if (r < 0)
			return r;
		path = buf;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -EBADF;
	c->timeout_ms = RDMAMEM_DEFAULT_TIMEOUT_MS;
	list_init(&c->calls);
	frame_reader_init(&c->in, VARLINK_BODY_MAX);
	c->path = strdup(path);
	r = c->path ? rdmamem__connect_fd(path, &c->fd) : -ENOMEM;
	if (r < 0) {
		rdmamem_client_close(c);
		return r;
	}
	*ret = c;
	return 0;
}

_public_ struct rdmamem_client *rdmamem_client_close(struct rdmamem_client *c)
{
	if (!c)
		return NULL;
	/* Pending calls end without a word: their callbacks are not run
	 * (the caller closes; nobody is left to tell). */
	rdmamem__drop_calls(c);
	rdmamem__staging_done(c);
	rdmamem__kept_done(c);
	safe_close(c->fd);
	free(c->in_fds);
	frame_reader_done(&c->in);
	free(c->dead_message);
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

/* A blocking call's state, filled in by its callback. */
struct blocking {
	bool done;
	int r;
	void (*on_continues)(void *userdata, const cJSON *params);
	void *userdata;
	cJSON *root;
	cJSON *params;
	char *error_name;
	char *error_message;
	int fds[VARLINK_FDS_MAX];
	size_t n_fds;
};

static void blocking_reply(struct rdmamem_client *c, struct rdmamem_call *call,
			   struct rdmamem__reply *reply, void *userdata)
{
	struct blocking *b = userdata;

	(void)call;
	/* A progress reply: the final one follows. */
	if (reply->continues) {
		if (b->on_continues)
			b->on_continues(b->userdata, reply->parameters);
		return;
	}
	b->done = true;
	b->r = reply->error;
	/* A blocking call that runs out of time leaves the connection out of
	 * step as far as its caller knows: it is given up for good. */
	if (reply->error == -ETIMEDOUT && !reply->root) {
		rdmamem__client_fail(c, -ETIMEDOUT);
		return;
	}
	if (reply->error_message) {
		b->error_name = reply->error_name ? strdup(reply->error_name) : NULL;
		b->error_message = strdup(reply->error_message);
	}
	b->root = TAKE_PTR(reply->root);
	b->params = reply->parameters;
	b->n_fds = reply->n_fds;
	if (reply->n_fds > 0)
		memcpy(b->fds, reply->fds, reply->n_fds * sizeof(int));
	for (size_t i = 0; i < reply->n_fds; i++)
		reply->fds[i] = -EBADF;
}

/* Waits on the socket for what the client needs, until its nearest deadline. */
static int wait_fd(struct rdmamem_client *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = (short)rdmamem_client_get_events(c) };
	uint64_t deadline, now;
	struct timespec ts;
	int timeout = -1;

	rdmamem_client_get_timeout(c, &deadline);
	if (deadline != UINT64_MAX) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
		/* Rounded up: waking before the deadline only spins. */
		timeout = deadline <= now ? 0 : (int)MIN((deadline - now + 999) / 1000, INT32_MAX);
	}
	if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
		return negative_errno();
	return 0;
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
	struct blocking b = { .on_continues = on_continues, .userdata = userdata };
	_cleanup_json_ cJSON *root = NULL;
	int timeout_ms, r;

	if (!c || !method || (n_fds > 0 && !fds))
		return -EINVAL;
	if (c->dispatching) {
		rdmamem__set_error(c, NULL,
				   "a blocking call from a callback; use rdmamem_call_async()");
		return -EBUSY;
	}
	clear_error(c);
	r = rdmamem__reclaim_if_needed(c);
	if (r < 0)
		return r;
	/* Calls that wait on the daemon's side (locks) get that long more.
	 * The clock starts again with each progress reply: the call is alive. */
	timeout_ms = c->timeout_ms < 0 || extra_wait_ms < 0 ?
			     -1 :
			     (int)MIN((int64_t)c->timeout_ms + extra_wait_ms, (int64_t)INT32_MAX);
	r = rdmamem__call_start(c, method, params, fds, n_fds, on_continues ? RDMAMEM_CALL_MORE : 0,
				timeout_ms, blocking_reply, &b, NULL);
	if (r < 0)
		return r;
	/* The call is written first, and then the socket waited on: its
	 * answer cannot be there before it left, so a read now would only
	 * find nothing (a syscall per call for no use). */
	r = rdmamem__client_send(c);
	while (!b.done && r >= 0) {
		r = wait_fd(c);
		if (r < 0) {
			rdmamem__client_fail(c, r);
			break;
		}
		r = rdmamem__client_process_until(c, &b.done);
	}
	/* The connection died before or with this call: say so as a broken
	 * connection always has, in the client's error. */
	if (c->dead && (!b.done || !b.root)) {
		rdmamem__set_error(c, NULL, "%s", c->dead_message ?: "the connection failed");
		free(b.error_name);
		free(b.error_message);
		close_many(b.fds, b.n_fds);
		return c->dead;
	}
	root = b.root;
	rdmamem__put_error(c, b.error_name, b.error_message);
	r = b.r;
	if (ret_n_fds) {
		size_t n = ret_fds ? MIN(*ret_n_fds, b.n_fds) : 0;

		if (n > 0)
			memcpy(ret_fds, b.fds, n * sizeof(int));
		*ret_n_fds = n;
		close_many(b.fds + n, b.n_fds - n);
	} else {
		close_many(b.fds, b.n_fds);
	}
	if (ret_params)
		*ret_params = b.params;
	if (ret_root)
		*ret_root = TAKE_PTR(root);
	return r;
}

int rdmamem__parse_params(struct rdmamem_client *c, const char *params_json, cJSON **ret)
{
	const char *reason;
	int r;

	*ret = NULL;
	if (!params_json)
		return 0;
	r = json_parse(params_json, strlen(params_json), ret, &reason);
	if (r < 0 || !cJSON_IsObject(*ret)) {
		rdmamem__set_error(c, NULL, "parameters must be a JSON object: %s",
				   r < 0 ? reason : "not an object");
		return -EINVAL;
	}
	return 0;
}

_public_ int rdmamem_call(struct rdmamem_client *c, const char *method, const char *params_json,
			  const int *fds, size_t n_fds, char **ret_reply_json, int *ret_fds,
			  size_t *ret_n_fds)
{
	_cleanup_json_ cJSON *params = NULL;
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL;
	int r;

	if (!c || !method)
		return -EINVAL;
	r = rdmamem__parse_params(c, params_json, &params);
	if (r < 0)
		return r;
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
