/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/core/log.h"
#include "daemon/fdstore.h"
#include "util/list.h"
#include "util/macro.h"

/* At exit, how long the last messages may wait for PID 1. */
#define FDSTORE_FLUSH_MSEC 1000

struct fdstore_msg {
	struct list_head link; /* in fdstore.queue */
	int fd;                /* sent with it; -1: none */
	size_t len;
	char text[];
};

struct fdstore {
	int fd; /* SOCK_DGRAM, connected to $NOTIFY_SOCKET, non-blocking */
	uv_poll_t poll;
	bool polling;
	bool warned;            /* a queued message failed: said once */
	struct list_head queue; /* struct fdstore_msg, in the order said */
};

static void msg_free(struct fdstore_msg *m)
{
	list_del(&m->link);
	safe_close(m->fd);
	free(m);
}

/* 0 sent, -EAGAIN no room now, or the error. */
static int msg_send(struct fdstore *s, const struct fdstore_msg *m)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {};
	struct iovec iov = { (void *)m->text, m->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (m->fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &m->fd, sizeof(int));
	}
	for (;;) {
		if (sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
			return 0;
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/* Sends what waits, in order, until there is no room. */
static int queue_flush(struct fdstore *s)
{
	struct fdstore_msg *m, *n;
	int r;

	list_for_each_entry_safe(m, n, &s->queue, link) {
		r = msg_send(s, m);
		if (r == -EAGAIN)
			return r;
		if (r < 0 && !s->warned)
			log_warning_errno(r, "Fd store: cannot send '%.40s…' (and maybe more): %m",
					  m->text);
		s->warned = s->warned || r < 0;
		msg_free(m);
	}
	return 0;
}

static void on_writable(uv_poll_t *p, int status, int events)
{
	struct fdstore *s = p->data;

	(void)status;
	(void)events;
	if (queue_flush(s) == 0) {
		uv_poll_stop(&s->poll);
		s->polling = false;
	}
}

/* Sends text (with a duplicate of fd, when fd >= 0) now or, when PID 1 has
 * no room, once it has. */
static int fdstore_say(struct fdstore *s, const char *text, int fd)
{
	size_t len = strlen(text);
	struct fdstore_msg *m = malloc(sizeof(*m) + len + 1);
	int r;

	if (!m)
		return -ENOMEM;
	memcpy(m->text, text, len + 1);
	m->len = len;
	m->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
	list_init(&m->link);
	if (fd >= 0 && m->fd < 0) {
		r = -errno;
		free(m);
		return r;
	}
	/* Behind others that wait: it goes after them, in order. */
	if (!list_empty(&s->queue)) {
		list_add_tail(&m->link, &s->queue);
		return 0;
	}
	r = msg_send(s, m);
	if (r != -EAGAIN) {
		/* Sent, or refused at once (a connected socket tells). */
		msg_free(m);
		return r;
	}
	list_add_tail(&m->link, &s->queue);
	uv_poll_start(&s->poll, UV_WRITABLE, on_writable);
	s->polling = true;
	return 0;
}

static int fdstore_put(void *userdata, const char *name, int fd)
{
	char msg[64 + KEEP_NAME_MAX];

	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
	return fdstore_say(userdata, msg, fd);
}

static int fdstore_remove(void *userdata, const char *name)
{
	char msg[64 + KEEP_NAME_MAX];

	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	return fdstore_say(userdata, msg, -EBADF);
}

const struct keep_store_ops fdstore_ops = {
	.put = fdstore_put,
	.remove = fdstore_remove,
};

int fdstore_new(uv_loop_t *loop, struct fdstore **ret)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t salen;
	struct fdstore *s;
	size_t len;

	/* A path, or '@' for the abstract namespace; nothing else here. */
	if (!path || (path[0] != '/' && path[0] != '@') ||
	    (len = strlen(path)) >= sizeof(sa.sun_path))
		return -ENXIO;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	list_init(&s->queue);
	s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&sa, salen) < 0 ||
	    uv_poll_init(loop, &s->poll, s->fd) < 0) {
		int r = -errno ?: -EIO;

		safe_close(s->fd);
		free(s);
		return r;
	}
	s->poll.data = s;
	*ret = s;
	return 0;
}

static void poll_closed(uv_handle_t *h)
{
	struct fdstore *s = h->data;

	safe_close(s->fd);
	free(s);
}

struct fdstore *fdstore_free(struct fdstore *s)
{
	struct pollfd p;

	if (!s)
		return NULL;
	/* The last state and removals: worth a short wait at exit. */
	while (!list_empty(&s->queue) && queue_flush(s) == -EAGAIN) {
		p = (struct pollfd){ .fd = s->fd, .events = POLLOUT };
		if (poll(&p, 1, FDSTORE_FLUSH_MSEC) <= 0) {
			log_warning("Fd store: PID 1 took no message for %u ms; the regions' "
				    "last changes are not stored",
				    FDSTORE_FLUSH_MSEC);
			break;
		}
	}
	while (!list_empty(&s->queue))
		msg_free(list_first_entry(&s->queue, struct fdstore_msg, link));
	uv_close((uv_handle_t *)&s->poll, poll_closed);
	return NULL;
}

int fdstore_take(struct fdstore *s, struct fdstore_passed *ret)
{
	char **names = NULL;
	int n, r = 0;

	*ret = (struct fdstore_passed){ .socket = -1 };
	n = sd_listen_fds_with_names(1, &names);
	if (n < 0)
		return log_error_errno(n, "Cannot read the fds passed by systemd: %m");
	ret->stored = calloc(n > 0 ? (size_t)n : 1, sizeof(*ret->stored));
	if (!ret->stored) {
		r = -ENOMEM;
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		char *name = names ? names[i] : NULL;

		if (name && keep_is_store_name(name)) {
			ret->stored[ret->n_stored++] = (struct keep_passed){ name, fd };
			names[i] = NULL;
			continue;
		}
		if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
			if (ret->socket < 0) {
				ret->socket = fd;
				continue;
			}
			if (r == 0)
				r = log_error_errno(-EINVAL,
						    "systemd passed a second socket, fd %d (%s); "
						    "rdmamemd listens on one",
						    fd, name ?: "unnamed");
		} else {
			/* Not this daemon's (another version's, or stored by
			 * hand): out of the store, or every start meets it. */
			log_warning("systemd passed fd %d named '%s', which is neither the "
				    "socket nor a region's file: taking it out of the fd store",
				    fd, name ?: "unnamed");
			if (s && name && *name && strlen(name) < KEEP_NAME_MAX)
				(void)fdstore_remove(s, name);
		}
		close(fd);
	}
	for (int i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	if (r < 0)
		fdstore_passed_done(ret);
	return r;
}

void fdstore_passed_done(struct fdstore_passed *p)
{
	for (size_t i = 0; i < p->n_stored; i++) {
		safe_close(p->stored[i].fd);
		free(p->stored[i].name);
	}
	free(p->stored);
	if (p->socket >= 0)
		close(p->socket);
	*p = (struct fdstore_passed){ .socket = -1 };
}

unsigned fdstore_max(void)
{
	const char *e = getenv("FDSTORE");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return 0;
	errno = 0;
	v = strtoul(e, &end, 10);
	return errno || *end || v > UINT32_MAX ? 0 : (unsigned)v;
}
