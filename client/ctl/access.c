/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: connecting to the daemon, and why the socket may refuse this
 * user (the connection's error and doctor say the same). */
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/sockpath.h"
#include "rdmamem.h"
#include "ctl/ctl.h"

static char socket_buf[108];

const char *socket_path(void)
{
	if (!arg_socket && sockpath_client_default(socket_buf, sizeof(socket_buf)) == 0)
		arg_socket = socket_buf;
	return arg_socket ?: SOCKPATH_SYSTEM;
}

int ctl_connect(struct rdmamem_client **ret)
{
	int r = rdmamem_client_connect(socket_path(), ret);

	if (r == 0)
		arg_socket = rdmamem_client_socket_path(*ret);
	return r;
}

void connect_error(int r, char *buf, size_t size)
{
	int n = snprintf(buf, size, "cannot connect to rdmamemd at '%s': %s", socket_path(),
			 strerror(-r));

	if (n < 0 || (size_t)n >= size)
		return;
	if (r == -ENOENT || r == -ECONNREFUSED) {
		snprintf(buf + n, size - n, " (is the daemon running?)");
	} else if (r == -EACCES || r == -EPERM) {
		char why[384];

		socket_access(socket_path(), why, sizeof(why));
		snprintf(buf + n, size - n, " (%s)", why);
	}
}

/* Whether the group database lists this user in gid, which the session
 * does not have yet: the user was added after logging in. */
static bool listed_in_group(gid_t gid)
{
	struct passwd *pw = getpwuid(getuid());
	gid_t groups[256];
	int n = ELEMENTSOF(groups);

	if (!pw || getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

static bool session_has_group(gid_t gid)
{
	gid_t groups[256];
	int n = getgroups(ELEMENTSOF(groups), groups);

	if (getegid() == gid)
		return true;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

static void group_name(gid_t gid, char *buf, size_t size)
{
	struct group *gr = getgrgid(gid);

	if (gr)
		snprintf(buf, size, "%s", gr->gr_name);
	else
		snprintf(buf, size, "%u", (unsigned)gid);
}

static void user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, size, "%s", pw->pw_name);
	else
		snprintf(buf, size, "%u", (unsigned)uid);
}

/*
 * Connecting takes write permission on the socket and search permission on
 * its folders. Checked the way the kernel does, for the effective ids: root
 * passes, then the owner's bits, the group's (the session's groups), the
 * others'. A user whom the group would let in is told how to join it.
 */
const char *socket_access(const char *path, char *buf, size_t size)
{
	_cleanup_free_ char *copy = strdup(path);
	char group[64], owner[64], me[64];
	uid_t uid = geteuid();
	struct stat st;
	mode_t m;

	if (stat(path, &st) < 0) {
		int err = errno;

		if (err == EACCES && copy)
			snprintf(buf, size, "this user may not enter %s", dirname(copy));
		else
			snprintf(buf, size, "%s: %s", path, strerror(err));
		return err == ENOENT ? "WARN" : "FAIL";
	}
	m = st.st_mode;
	group_name(st.st_gid, group, sizeof(group));
	user_name(st.st_uid, owner, sizeof(owner));
	user_name(uid, me, sizeof(me));
	if (uid == 0) {
		snprintf(buf, size, "root may connect (mode %04o, owner %s, group %s)",
			 (unsigned)(m & 07777), owner, group);
		return "PASS";
	}
	if (st.st_uid == uid) {
		snprintf(buf, size, "%s owns it (mode %04o)", me, (unsigned)(m & 07777));
		return m & S_IWUSR ? "PASS" : "FAIL";
	}
	if (session_has_group(st.st_gid) && (m & S_IWGRP)) {
		snprintf(buf, size, "%s may connect as a member of group '%s' (mode %04o)", me,
			 group, (unsigned)(m & 07777));
		return "PASS";
	}
	if (m & S_IWOTH) {
		snprintf(buf, size, "every user may connect (mode %04o)", (unsigned)(m & 07777));
		return "PASS";
	}
	if (!(m & S_IWGRP))
		snprintf(buf, size, "the socket (mode %04o) lets only %s in", (unsigned)(m & 07777),
			 owner);
	else if (listed_in_group(st.st_gid))
		snprintf(buf, size,
			 "%s is in group '%s' now, but this session started before: log in "
			 "again, or run 'newgrp %s'",
			 me, group, group);
	else
		snprintf(buf, size,
			 "only group '%s' may connect: 'sudo usermod -aG %s %s', then log in "
			 "again",
			 group, group, me);
	return "FAIL";
}
