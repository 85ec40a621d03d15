/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/core/log.h"
#include "daemon/fdstore.h"
#include "util/macro.h"

static int fdstore_put(void *userdata, const char *name, int fd)
{
	char msg[64 + KEEP_NAME_MAX];
	int r;

	(void)userdata;
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
	r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	return r < 0 ? r : r == 0 ? -ENOTCONN : 0;
}

static int fdstore_remove(void *userdata, const char *name)
{
	char msg[64 + KEEP_NAME_MAX];
	int r;

	(void)userdata;
	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	r = sd_notify(0, msg);
	return r < 0 ? r : r == 0 ? -ENOTCONN : 0;
}

const struct keep_store_ops fdstore_ops = {
	.put = fdstore_put,
	.remove = fdstore_remove,
};

static bool is_stored(const char *name)
{
	return strncmp(name, KEEP_REGION_PREFIX, strlen(KEEP_REGION_PREFIX)) == 0 ||
	       strncmp(name, KEEP_STATE_PREFIX, strlen(KEEP_STATE_PREFIX)) == 0;
}

int fdstore_take(struct fdstore_passed *ret)
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

		if (name && is_stored(name)) {
			ret->stored[ret->n_stored++] = (struct keep_passed){ name, fd };
			names[i] = NULL;
			continue;
		}
		if (ret->socket < 0 && sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
			ret->socket = fd;
			continue;
		}
		if (r == 0)
			r = log_error_errno(-EINVAL,
					    ret->socket < 0 ?
						    "systemd passed fd %d (%s), which is not a "
						    "listening Unix stream socket" :
						    "systemd passed a second socket, fd %d (%s); "
						    "rdmamemd listens on one",
					    fd, name ?: "unnamed");
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
