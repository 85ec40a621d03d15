/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl doctor: the checks that need no daemon (its socket, who may
 * connect, the systemd units, locked memory), so that a daemon that is
 * down is diagnosed too. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/macro.h"
#include "ctl/ctl.h"

void doctor_socket(struct checks *ck, bool answered)
{
	const char *path = socket_path(), *status;
	char why[384], group[64];
	struct stat st;

	if (stat(path, &st) < 0) {
		int err = errno;

		check(ck, answered ? "WARN" : "FAIL", "socket",
		      answered ? NULL : "the daemon (or rdmamemd.socket) creates it when it starts",
		      "%s: %s", path, strerror(err));
		/* Who may not even reach it: access says why. */
		if (err != EACCES)
			return;
	} else if (!answered && S_ISSOCK(st.st_mode)) {
		check(ck, "WARN", "socket",
		      "a daemon that died left it, or one that hangs holds it: (re)start rdmamemd",
		      "%s mode %04o: there, but no daemon answered on it", path,
		      (unsigned)(st.st_mode & 07777));
	} else if (st.st_mode & 0007) {
		check(ck, "WARN", "socket",
		      "limit it to a group (SocketMode=0660, SocketGroup=rdmamem) unless every "
		      "user should pin memory within the per-uid quotas",
		      "%s mode %04o: every user may connect", path, (unsigned)(st.st_mode & 07777));
	} else {
		check(ck, "PASS", "socket", NULL, "%s mode %04o, group %s", path,
		      (unsigned)(st.st_mode & 07777), group_of(st.st_gid, group, sizeof(group)));
	}
	status = socket_access(path, why, sizeof(why));
	check(ck, status, "access", strcmp(status, "FAIL") == 0 ? why : NULL, "%s", why);
}

/* `systemctl show` of one unit: LoadState, ActiveState, SubState and
 * UnitFileState into fields (empty when systemctl said nothing). */
struct unit_state {
	char load[32], active[32], sub[32], file[32], memlock[32];
};

static void unit_show(const char *unit, struct unit_state *u)
{
	char cmd[256], line[256];
	FILE *f;

	memset(u, 0, sizeof(*u));
	snprintf(cmd, sizeof(cmd),
		 "systemctl show --property=LoadState,ActiveState,SubState,UnitFileState,"
		 "LimitMEMLOCK %s 2>/dev/null",
		 unit);
	f = popen(cmd, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		static const struct {
			const char *key;
			size_t off;
		} keys[] = {
			{ "LoadState=", offsetof(struct unit_state, load) },
			{ "ActiveState=", offsetof(struct unit_state, active) },
			{ "SubState=", offsetof(struct unit_state, sub) },
			{ "UnitFileState=", offsetof(struct unit_state, file) },
			{ "LimitMEMLOCK=", offsetof(struct unit_state, memlock) },
		};

		line[strcspn(line, "\n")] = '\0';
		for (size_t i = 0; i < ELEMENTSOF(keys); i++)
			if (strncmp(line, keys[i].key, strlen(keys[i].key)) == 0)
				snprintf((char *)u + keys[i].off, sizeof(u->load), "%s",
					 line + strlen(keys[i].key));
	}
	pclose(f);
}

static bool systemd_running(void)
{
	struct stat st;

	return stat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * The units: the socket listens and starts the service; a failed service
 * is a FAIL whatever else, no unit active while the daemon does not answer
 * too. A daemon that answers without them was started by hand: fine.
 */
void doctor_units(struct checks *ck, bool answered)
{
	struct unit_state sock, svc;
	const char *status = "PASS", *hint = NULL;

	if (!systemd_running()) {
		check(ck, "SKIP", "units", NULL, "systemd does not run here: no units to check");
		return;
	}
	unit_show("rdmamemd.socket", &sock);
	unit_show("rdmamemd.service", &svc);
	if (strcmp(svc.load, "loaded") != 0 && strcmp(sock.load, "loaded") != 0) {
		check(ck, answered ? "SKIP" : "WARN", "units",
		      answered ? NULL :
				 "install them (make install), then systemctl daemon-reload and "
				 "systemctl enable --now rdmamemd.socket",
		      "rdmamemd.service and rdmamemd.socket are not installed");
		return;
	}
	if (strcmp(svc.active, "failed") == 0) {
		status = "FAIL";
		hint = "journalctl -u rdmamemd -b says why; then systemctl restart rdmamemd";
	} else if (!answered && strcmp(svc.active, "active") != 0 &&
		   strcmp(sock.active, "active") != 0) {
		status = "FAIL";
		hint = "systemctl enable --now rdmamemd.socket";
	} else if (strcmp(sock.file, "enabled") != 0 && strcmp(svc.file, "enabled") != 0) {
		status = "WARN";
		hint = "systemctl enable rdmamemd.socket, so that it listens after a reboot";
	}
	check(ck, status, "units", hint,
	      "rdmamemd.socket %s (%s, %s), rdmamemd.service %s (%s, %s)", sock.active, sock.sub,
	      sock.file[0] ? sock.file : "?", svc.active, svc.sub, svc.file[0] ? svc.file : "?");
}

/* Root's effective capabilities include CAP_IPC_LOCK (bit 14). */
static bool have_cap_ipc_lock(void)
{
	char line[128];
	bool cap = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "CapEff: %llx", &v) == 1)
			cap = v & (1ULL << 14);
	}
	fclose(f);
	return cap;
}

/*
 * Locked memory while the daemon is down: what the service unit gives it,
 * or where there is none what a daemon started from this shell would get.
 */
void doctor_memlock_here(struct checks *ck)
{
	struct unit_state svc = {};
	struct rlimit rl;
	char limit[32];

	if (systemd_running())
		unit_show("rdmamemd.service", &svc);
	if (strcmp(svc.load, "loaded") == 0) {
		uint64_t v;

		if (strcmp(svc.memlock, "infinity") == 0) {
			check(ck, "PASS", "locked memory", NULL,
			      "rdmamemd.service sets LimitMEMLOCK=infinity");
			return;
		}
		v = strtoull(svc.memlock, NULL, 10);
		format_bytes(v, limit, sizeof(limit));
		check(ck, "WARN", "locked memory",
		      "LimitMEMLOCK=infinity in the unit, unless it grants CAP_IPC_LOCK",
		      "rdmamemd.service sets LimitMEMLOCK=%s", limit);
		return;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY) {
		check(ck, "PASS", "locked memory", NULL,
		      "a daemon started from here: RLIMIT_MEMLOCK unlimited");
		return;
	}
	format_bytes(rl.rlim_cur, limit, sizeof(limit));
	if (have_cap_ipc_lock())
		check(ck, "PASS", "locked memory", NULL,
		      "a daemon started from here has CAP_IPC_LOCK (RLIMIT_MEMLOCK %s does not "
		      "apply)",
		      limit);
	else
		check(ck, "WARN", "locked memory",
		      "start it with 'ulimit -l unlimited' (or CAP_IPC_LOCK), or through "
		      "rdmamemd.service, which sets LimitMEMLOCK=infinity",
		      "a daemon started from here: RLIMIT_MEMLOCK %s; RDMA registrations beyond "
		      "it fail",
		      limit);
}
