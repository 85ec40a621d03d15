/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/sockpath.h"

static int format_path(char *buf, size_t size, const char *fmt, const char *dir)
{
	int n = snprintf(buf, size, fmt, dir);

	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int sockpath_server_default(char *buf, size_t size)
{
	const char *v;

	v = env_nonempty(SOCKPATH_ENV);
	if (v)
		return format_path(buf, size, "%s", v);
	/* RuntimeDirectory= may list several; systemd joins them with ':'
	 * and ours comes first in the unit. */
	v = env_nonempty("RUNTIME_DIRECTORY");
	if (v) {
		size_t n = strcspn(v, ":");
		int r = snprintf(buf, size, "%.*s/" SOCKPATH_NAME, (int)n, v);

		return r < 0 || (size_t)r >= size ? -ENAMETOOLONG : 0;
	}
	if (geteuid() == 0)
		return format_path(buf, size, "%s", SOCKPATH_SYSTEM);
	v = env_nonempty("XDG_RUNTIME_DIR");
	if (v)
		return format_path(buf, size, "%s/rdmamemd/" SOCKPATH_NAME, v);
	return -ENXIO;
}

int sockpath_client_default(char *buf, size_t size)
{
	const char *v;
	struct stat st;
	int r;

	v = env_nonempty(SOCKPATH_ENV);
	if (v)
		return format_path(buf, size, "%s", v);
	v = env_nonempty("XDG_RUNTIME_DIR");
	if (v && geteuid() != 0) {
		r = format_path(buf, size, "%s/rdmamemd/" SOCKPATH_NAME, v);
		if (r == 0 && stat(buf, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
	}
	return format_path(buf, size, "%s", SOCKPATH_SYSTEM);
}

int sockpath_to_addr(const char *path, struct sockaddr_un *ret, unsigned *ret_len)
{
	size_t len = strlen(path);

	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(ret->sun_path))
		return -ENAMETOOLONG;
	memset(ret, 0, sizeof(*ret));
	ret->sun_family = AF_UNIX;
	memcpy(ret->sun_path, path, len + 1);
	*ret_len = offsetof(struct sockaddr_un, sun_path) + len + 1;
	return 0;
}
