/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous engine under every call of librdmamem: a queue of calls
 * in the order they are sent, written as the socket takes them and matched
 * to replies in that same order (Varlink answers one call at a time), with
 * a deadline each. Nothing here blocks; the blocking calls (client.c) wait
 * on the fd between rdmamem_client_process() turns.
 *
 * Invariants:
 * - A call is in client->calls from rdmamem__call_start() until its last
 *   reply is taken (or the connection dies). A cancelled or timed-out call
 *   (a "ghost": fn cleared) stays until then too, so that later replies
 *   find their calls; one never written at all leaves at once.
 * - A call's last callback runs after it left the list: the callback may
 *   queue calls and cancel others without seeing itself.
 * - Fds to send are the library's duplicates, closed once written; fds
 *   received belong to the message that starts in the read that brought
 *   them (proto/frame.h) and go to that message's call.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client-internal.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "util/sockio.h"

/* Reads one turn of rdmamem_client_process() makes at most: a fast stream
 * cannot keep it (and the caller's loop) for ever; the fd stays readable. */
#define PROCESS_READS_MAX 16
/* Fds received and not yet handed out, at most: a reply brings at most
 * VARLINK_FDS_MAX, a read at most SOCKIO_FDS_MAX. */
#define IN_FDS_MAX (4 * SOCKIO_FDS_MAX)

struct rdmamem_call {
	struct list_head link; /* in client->calls */
	struct rdmamem_client *client;
	char *method;
	char *text; /* the message and its NUL; freed once written */
	size_t len, sent;
	int fds[VARLINK_FDS_MAX]; /* duplicates, closed once written */
	size_t n_fds;
	unsigned flags;
	int timeout_ms;       /* negative: none */
	uint64_t start_usec;  /* when made, or its last continuing reply came */
	rdmamem__reply_fn fn; /* NULL: a ghost (cancelled, timed out) */
	void *userdata;
	/* The public callback, for the adapter that hands it text. */
	rdmamem_reply_fn user_fn;
	void *user_userdata;
	bool in_callback; /* its callback runs: cancel only marks it */
};

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
}

static uint64_t call_deadline(const struct rdmamem_call *call)
{
	if (!call->fn || call->timeout_ms < 0)
		return UINT64_MAX;
	return call->start_usec + (uint64_t)call->timeout_ms * 1000U;
}

static struct rdmamem_call *call_free(struct rdmamem_call *call)
{
	if (!call)
		return NULL;
	close_many(call->fds, call->n_fds);
	free(call->text);
	free(call->method);
	free(call);
	return NULL;
}

static struct rdmamem_call *next_of(struct rdmamem_client *c, struct rdmamem_call *call)
{
	return call->link.next == &c->calls ?
		       NULL :
		       list_entry(call->link.next, struct rdmamem_call, link);
}

/* Takes call off the queue (it is written, or never will be). */
static void call_unlink(struct rdmamem_client *c, struct rdmamem_call *call)
{
	if (c->send_next == call)
		c->send_next = next_of(c, call);
	list_del(&call->link);
	c->n_calls--;
}

static void close_in_fds(struct rdmamem_client *c)
{
	for (size_t i = 0; i < c->n_in_fds; i++)
		safe_close(c->in_fds[i].fd);
	c->n_in_fds = 0;
}

void rdmamem__drop_calls(struct rdmamem_client *c)
{
	while (!list_empty(&c->calls)) {
		struct rdmamem_call *call = list_first_entry(&c->calls, struct rdmamem_call, link);

		call_unlink(c, call);
		call_free(call);
	}
	close_in_fds(c);
}

char *rdmamem__connection_error(const struct rdmamem_client *c, int r)
{
	char *m = NULL;
	int k;

	if (r == -ETIMEDOUT)
		k = asprintf(&m, "no answer from the daemon at '%s' in time; reconnect", c->path);
	else if (r == -ECONNRESET || r == -EPIPE)
		k = asprintf(&m,
			     "the daemon at '%s' closed the connection (it may have exited); "
			     "reconnect, and register again what this connection held",
			     c->path);
	else if (r == -EPROTO || r == -EMSGSIZE)
		k = asprintf(&m, "the daemon sent an invalid message");
	else
		k = asprintf(&m, "connection to the daemon failed: %s", strerror(-r));
	return k < 0 ? NULL : m;
}

/* Runs call's callback with a failure of the library's own; call has left
 * the queue and is freed after. */
static void call_fail(struct rdmamem_client *c, struct rdmamem_call *call, int r,
		      const char *message)
{
	struct rdmamem__reply reply = { .error = r, .error_message = message };

	if (call->fn) {
		c->dispatching++;
		call->in_callback = true;
		call->fn(c, call, &reply, call->userdata);
		c->dispatching--;
	}
	call_free(call);
}

int rdmamem__client_fail(struct rdmamem_client *c, int r)
{
	if (r == -EPIPE)
		r = -ECONNRESET;
	if (c->dead)
		return r;
	c->dead = r;
	c->dead_message = rdmamem__connection_error(c, r);
	c->dead_untold = list_empty(&c->calls);
	/* Each pending call hears it once, in order; a callback that queues
	 * a call meanwhile gets -ENOTCONN. */
	while (!list_empty(&c->calls)) {
		struct rdmamem_call *call = list_first_entry(&c->calls, struct rdmamem_call, link);

		call_unlink(c, call);
		call_fail(c, call, r, c->dead_message);
	}
	close_in_fds(c);
	return r;
}

int rdmamem__call_start(struct rdmamem_client *c, const char *method, const cJSON *params,
			const int *fds, size_t n_fds, unsigned flags, int timeout_ms,
			rdmamem__reply_fn fn, void *userdata, struct rdmamem_call **ret_call)
{
	struct rdmamem_call *call;
	int r;

	if (!c || !method || (n_fds > 0 && !fds) ||
	    (flags & ~(RDMAMEM_CALL_MORE | RDMAMEM_CALL_ONEWAY)) ||
	    !(flags & RDMAMEM_CALL_ONEWAY) != !!fn)
		return -EINVAL;
	if (c->dead && c->dead_untold) {
		c->dead_untold = false;
		rdmamem__set_error(c, NULL, "%s", c->dead_message ?: "the connection ended");
		return c->dead;
	}
	if (c->dead) {
		rdmamem__set_error(c, NULL,
				   "the connection is broken by an earlier failure; reconnect");
		return -ENOTCONN;
	}
	if (n_fds > VARLINK_FDS_MAX) {
		rdmamem__set_error(c, NULL, "at most %u file descriptors per call",
				   VARLINK_FDS_MAX);
		return -E2BIG;
	}
	call = calloc(1, sizeof(*call));
	if (!call)
		return -ENOMEM;
	call->client = c;
	call->flags = flags;
	call->timeout_ms = timeout_ms;
	call->fn = fn;
	call->userdata = userdata;
	call->method = strdup(method);
	r = call->method ? varlink_call_format(method, params, flags & RDMAMEM_CALL_ONEWAY,
					       &call->text, &call->len) :
			   -ENOMEM;
	/* With more: the same message, '"more":true' before its closing brace. */
	if (r == 0 && (flags & RDMAMEM_CALL_MORE)) {
		char *m = realloc(call->text, call->len + sizeof(",\"more\":true"));

		if (m) {
			call->text = m;
			strcpy(call->text + call->len - 1, ",\"more\":true}");
			call->len = strlen(call->text);
		} else {
			r = -ENOMEM;
		}
	}
	for (; r == 0 && call->n_fds < n_fds; call->n_fds++) {
		call->fds[call->n_fds] = fcntl(fds[call->n_fds], F_DUPFD_CLOEXEC, 3);
		if (call->fds[call->n_fds] < 0)
			r = negative_errno();
	}
	if (r < 0) {
		if (r == -EBADF)
			rdmamem__set_error(c, NULL, "a file descriptor to send is not open");
		call_free(call);
		return r;
	}
	/* The terminator goes out with the text. */
	call->len++;
	call->start_usec = now_usec();
	list_add_tail(&call->link, &c->calls);
	c->n_calls++;
	if (!c->send_next)
		c->send_next = call;
	if (ret_call)
		*ret_call = flags & RDMAMEM_CALL_ONEWAY ? NULL : call;
	return 0;
}

/* The adapter between the engine and a public callback: JSON as text. */
static void user_reply(struct rdmamem_client *c, struct rdmamem_call *call,
		       struct rdmamem__reply *r, void *userdata)
{
	_cleanup_free_ char *text = NULL;
	struct rdmamem_reply reply = {
		.error = r->error,
		.error_name = r->error_name,
		.error_message = r->error_message,
		.fds = r->fds,
		.n_fds = r->n_fds,
		.flags = r->continues ? RDMAMEM_REPLY_CONTINUES : 0,
	};

	(void)userdata;
	if (r->root) {
		text = r->parameters ? cJSON_PrintUnformatted(r->parameters) : strdup("{}");
		if (!text) {
			reply.error = -ENOMEM;
			reply.error_message = "out of memory for the reply's text";
		}
		reply.parameters = text;
	}
	call->user_fn(c, call, &reply, call->user_userdata);
}

_public_ int rdmamem_call_async(struct rdmamem_client *c, const char *method,
				const char *params_json, const int *fds, size_t n_fds,
				unsigned flags, rdmamem_reply_fn callback, void *userdata,
				struct rdmamem_call **ret_call)
{
	_cleanup_json_ cJSON *params = NULL;
	struct rdmamem_call *call = NULL;
	int r;

	if (!c || !method || !(flags & RDMAMEM_CALL_ONEWAY) != !!callback)
		return -EINVAL;
	r = rdmamem__parse_params(c, params_json, &params);
	if (r < 0)
		return r;
	r = rdmamem__call_start(c, method, params, fds, n_fds, flags, c->timeout_ms,
				callback ? user_reply : NULL, NULL, &call);
	if (r < 0)
		return r;
	if (call) {
		call->user_fn = callback;
		call->user_userdata = userdata;
	}
	if (ret_call)
		*ret_call = call;
	return 0;
}

_public_ int rdmamem_call_set_timeout(struct rdmamem_call *call, int timeout_ms)
{
	if (!call)
		return -EINVAL;
	call->timeout_ms = timeout_ms < 0 ? -1 : timeout_ms;
	return 0;
}

_public_ const char *rdmamem_call_get_method(const struct rdmamem_call *call)
{
	return call ? call->method : NULL;
}

/* Its callback is done with: a call not yet written leaves the queue, one
 * written (even in part) stays as a ghost until its last reply. */
static void call_retire(struct rdmamem_client *c, struct rdmamem_call *call)
{
	call->fn = NULL;
	if (call->in_callback)
		return;
	if (call->sent == 0 && call->text) {
		call_unlink(c, call);
		call_free(call);
	}
}

_public_ struct rdmamem_call *rdmamem_call_cancel(struct rdmamem_call *call)
{
	if (call)
		call_retire(call->client, call);
	return NULL;
}

_public_ int rdmamem_client_get_fd(const struct rdmamem_client *c)
{
	return c ? c->fd : -EINVAL;
}

_public_ int rdmamem_client_get_events(const struct rdmamem_client *c)
{
	if (!c)
		return -EINVAL;
	if (c->dead)
		return 0;
	return POLLIN | (c->send_next ? POLLOUT : 0);
}

_public_ int rdmamem_client_get_timeout(const struct rdmamem_client *c, uint64_t *ret_usec)
{
	struct rdmamem_call *call;
	uint64_t t = UINT64_MAX;

	if (!c || !ret_usec)
		return -EINVAL;
	if (!c->dead)
		list_for_each_entry(call, &c->calls, link)
			t = MIN(t, call_deadline(call));
	*ret_usec = t;
	return 0;
}

/* Writes queued messages until the socket is full. >0: wrote something. */
static int write_some(struct rdmamem_client *c)
{
	int progress = 0;

	while (c->send_next) {
		struct rdmamem_call *call = c->send_next;
		bool first = call->sent == 0;
		ssize_t n;

		/* The fds ride on the first byte, in a sendmsg that carries
		 * nothing of another message (PROTOCOL.md, "File descriptors"). */
		n = sockio_send(c->fd, call->text + call->sent, call->len - call->sent,
				first ? call->fds : NULL, first ? call->n_fds : 0, MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EINTR)
			break;
		if (n < 0)
			return (int)n;
		progress = 1;
		call->sent += (size_t)n;
		if (call->sent < call->len)
			continue;
		c->send_next = next_of(c, call);
		call->text = (free(call->text), NULL);
		close_many(call->fds, call->n_fds);
		call->n_fds = 0;
		/* Oneway calls get no reply; a ghost never written part-way is
		 * gone already. */
		if (call->flags & RDMAMEM_CALL_ONEWAY) {
			call_unlink(c, call);
			call_free(call);
		}
	}
	return progress;
}

/* The fds of message ordinal, moved into fds (capacity VARLINK_FDS_MAX). */
static int take_fds(struct rdmamem_client *c, uint64_t ordinal, int *fds, size_t *ret_n)
{
	size_t n = 0, kept = 0;

	for (size_t i = 0; i < c->n_in_fds; i++) {
		if (c->in_fds[i].ordinal != ordinal) {
			c->in_fds[kept++] = c->in_fds[i];
			continue;
		}
		if (n == VARLINK_FDS_MAX) {
			safe_close(c->in_fds[i].fd);
			continue;
		}
		fds[n++] = c->in_fds[i].fd;
	}
	c->n_in_fds = kept;
	*ret_n = n;
	return 0;
}

/* Hands the message in f to the call at the head of the queue. */
static int dispatch(struct rdmamem_client *c, const struct frame *f)
{
	_cleanup_json_ cJSON *root = NULL;
	_cleanup_free_ char *message = NULL;
	struct rdmamem__reply reply = {};
	struct varlink_reply v;
	struct rdmamem_call *call;
	int fds[VARLINK_FDS_MAX];
	size_t n_fds;
	const char *reason;

	take_fds(c, f->ordinal, fds, &n_fds);
	if (json_parse(f->data, f->len, &root, &reason) < 0 ||
	    varlink_reply_parse(root, &v, &reason) < 0 || list_empty(&c->calls)) {
		close_many(fds, n_fds);
		return -EPROTO;
	}
	call = list_first_entry(&c->calls, struct rdmamem_call, link);
	/* Continuing replies only to a call that asked, and never an error. */
	if (v.continues && (!(call->flags & RDMAMEM_CALL_MORE) || v.error)) {
		close_many(fds, n_fds);
		return -EPROTO;
	}
	/* Answered before it was written in full: the daemon refused it
	 * (a message too large) and will close; the stream is out of step. */
	if (call->text) {
		close_many(fds, n_fds);
		return -ECONNRESET;
	}
	if (!v.continues)
		call_unlink(c, call);
	if (call->fn) {
		reply = (struct rdmamem__reply){
			.root = root,
			.parameters = v.parameters,
			.fds = fds,
			.n_fds = n_fds,
			.continues = v.continues,
		};
		if (v.error) {
			message = rdmamem__remote_error_message(v.error, v.parameters);
			reply.error = rdmamem_error_to_errno(v.error);
			reply.error_name = v.error;
			reply.error_message = message ?: v.error;
		}
		if (v.continues)
			call->start_usec = now_usec();
		c->dispatching++;
		call->in_callback = true;
		call->fn(c, call, &reply, call->userdata);
		call->in_callback = false;
		c->dispatching--;
		/* The callback may have taken the tree. */
		root = reply.root;
	}
	for (size_t i = 0; i < n_fds; i++)
		safe_close(fds[i]);
	if (!v.continues)
		call_free(call);
	return 1;
}

/* Reads once and dispatches every complete message. >0: read something,
 * 0: nothing there. */
static int read_some(struct rdmamem_client *c)
{
	int fds[SOCKIO_FDS_MAX];
	size_t n_fds, space;
	uint64_t ordinal;
	struct frame f;
	ssize_t n;
	void *p;
	int r;

	r = frame_reader_reserve(&c->in, &p, &space);
	if (r < 0)
		return r == -ENOBUFS ? -EMSGSIZE : r;
	n = sockio_recv(c->fd, p, space, fds, &n_fds, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EINTR)
		return 0;
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ECONNRESET;
	ordinal = frame_reader_commit(&c->in, (size_t)n);
	if (n_fds > 0) {
		/* Fds amid a message break the sender's rule. */
		if (ordinal == FRAME_NO_START || c->n_in_fds + n_fds > IN_FDS_MAX) {
			close_many(fds, n_fds);
			return -EPROTO;
		}
		if (c->n_in_fds + n_fds > c->cap_in_fds) {
			size_t cap = MAX(c->cap_in_fds * 2, c->n_in_fds + n_fds);
			struct rdmamem__in_fd *m = realloc(c->in_fds, cap * sizeof(*m));

			if (!m) {
				close_many(fds, n_fds);
				return -ENOMEM;
			}
			c->in_fds = m;
			c->cap_in_fds = cap;
		}
		for (size_t i = 0; i < n_fds; i++)
			c->in_fds[c->n_in_fds++] = (struct rdmamem__in_fd){ ordinal, fds[i] };
	}
	for (;;) {
		r = frame_reader_next(&c->in, &f);
		if (r < 0)
			return -EMSGSIZE;
		if (r == 0)
			return 1;
		r = dispatch(c, &f);
		if (r < 0)
			return r;
		/* A callback may have ended the connection (a blocking
		 * caller's timeout does). */
		if (c->dead)
			return 1;
	}
}

/* Fires the callbacks of live calls past their deadline, oldest first. */
static int expire(struct rdmamem_client *c)
{
	int progress = 0;

	for (;;) {
		struct rdmamem_call *call, *due = NULL;
		uint64_t now = now_usec();
		_cleanup_free_ char *m = NULL;
		struct rdmamem__reply reply = { .error = -ETIMEDOUT };
		rdmamem__reply_fn fn;

		list_for_each_entry(call, &c->calls, link)
			if (call_deadline(call) <= now) {
				due = call;
				break;
			}
		if (!due || c->dead)
			return progress;
		progress = 1;
		if (asprintf(
			    &m,
			    "no answer to %s in %d ms; the connection goes on (a late answer is dropped)",
			    due->method, due->timeout_ms) < 0)
			m = NULL;
		reply.error_message = m ?: "no answer in time";
		/* A ghost from here on: it stays queued until its reply. */
		fn = due->fn;
		due->fn = NULL;
		due->in_callback = true;
		c->dispatching++;
		fn(c, due, &reply, due->userdata);
		c->dispatching--;
		/* A blocking caller ends the connection on its timeout, which
		 * freed due with every other call. */
		if (c->dead)
			return progress;
		due->in_callback = false;
		call_retire(c, due);
	}
}

int rdmamem__client_send(struct rdmamem_client *c)
{
	int r;

	if (c->dead)
		return c->dead;
	r = write_some(c);
	/* A closed socket: rdmamem_client_process() reads its last words. */
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		return rdmamem__client_fail(c, r);
	return 0;
}

_public_ int rdmamem_client_process(struct rdmamem_client *c)
{
	return rdmamem__client_process_until(c, NULL);
}

int rdmamem__client_process_until(struct rdmamem_client *c, const bool *done)
{
	int progress = 0, r;

	if (!c)
		return -EINVAL;
	if (c->dead)
		return c->dead;
	if (c->dispatching)
		return -EBUSY;
	r = write_some(c);
	/* A write that fails on a closed socket: read what the daemon said
	 * before it went, then fail with the end of the stream. */
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		return rdmamem__client_fail(c, r);
	progress |= r > 0;
	for (unsigned i = 0; i < PROCESS_READS_MAX && !c->dead; i++) {
		int q = read_some(c);

		if (q < 0)
			return rdmamem__client_fail(c, q);
		if (q == 0)
			break;
		progress = 1;
		if (done && *done)
			break;
	}
	if (r < 0 && !c->dead)
		return rdmamem__client_fail(c, r);
	if (c->dead)
		return c->dead;
	progress |= expire(c);
	if (c->dead)
		return c->dead;
	return progress;
}
