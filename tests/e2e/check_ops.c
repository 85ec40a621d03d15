/* SPDX-License-Identifier: BSD-3-Clause */
/* Operating the daemon: units checked by systemd's own tools, the watchdog,
 * configuration files and SIGHUP reload, journal fields. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/core/log.h"
#include "proto/errors.h"
#include "rdmamem.h"
#include "tests/testlib.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void copy_with(const char *from, const char *to, const char *token, const char *value)
{
	char line[1024], *at;
	FILE *in = fopen(from, "re"), *out = fopen(to, "we");

	ck_assert_msg(in && out, "%s or %s: %s", from, to, strerror(errno));
	while (fgets(line, sizeof(line), in)) {
		at = token ? strstr(line, token) : NULL;
		if (at)
			fprintf(out, "%.*s%s%s", (int)(at - line), line, value, at + strlen(token));
		else
			fputs(line, out);
	}
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

static void run_ok(const char *const *argv)
{
	char *out, *err;
	int rc = test_run(argv, &out, &err);

	/* systemd's tools often warn and still exit 0: a warning is a failure. */
	ck_assert_msg(rc == 0 && err[0] == '\0', "%s exited %d: %s%s", argv[0], rc, out, err);
	free(out);
	free(err);
}

static void require_tool(const char *tool)
{
	ck_assert_msg(access(tool, X_OK) == 0, "%s is missing (package systemd)", tool);
}

/* The units as installed, with ExecStart pointing at the binary just built
 * (verify checks that it exists). */
START_TEST(test_units_verify)
{
	static const char *const tool = "/usr/bin/systemd-analyze";
	char dir[] = "/tmp/rdmamemd-units.XXXXXX", service[96], socket[96];
	const char *argv[] = { tool, "verify", "--man=no", socket, service, NULL };

	require_tool(tool);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(service, sizeof(service), "%s/rdmamemd.service", dir);
	snprintf(socket, sizeof(socket), "%s/rdmamemd.socket", dir);
	copy_with(SRC_DIR "/systemd/rdmamemd.service.in", service, "@SBINDIR@", BUILD_DIR);
	copy_with(SRC_DIR "/systemd/rdmamemd.socket", socket, NULL, NULL);
	run_ok(argv);

	/* The check has teeth: a misspelt setting is reported. */
	write_file(service, "[Service]\nType=notify\nExecStart=/bin/true\nWatchdogSecs=30\n");
	{
		char *out, *err;

		test_run(argv, &out, &err);
		ck_assert_msg(strstr(err, "WatchdogSecs"), "no complaint: %s", err);
		free(out);
		free(err);
	}
	unlink(service);
	unlink(socket);
	rmdir(dir);
}
END_TEST

/* The id of name in root's /etc/passwd or /etc/group. */
static bool db_lookup(const char *root, const char *db, const char *name, unsigned *ret_id)
{
	char path[128], line[256], want[64];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/etc/%s", root, db);
	snprintf(want, sizeof(want), "%s:x:%%u:", name);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, want, ret_id) == 1;
	fclose(f);
	return found;
}

/* sysusers.d makes the user and the socket's group, tmpfiles.d the socket
 * directory owned by that group: applied to an empty root. */
START_TEST(test_sysusers_tmpfiles)
{
	static const char *const sysusers = "/usr/bin/systemd-sysusers";
	static const char *const tmpfiles = "/usr/bin/systemd-tmpfiles";
	char root[] = "/tmp/rdmamemd-root.XXXXXX", arg[96], path[128];
	const char *mk_users[] = { sysusers, arg, SRC_DIR "/systemd/rdmamemd.sysusers", NULL };
	const char *mk_dirs[] = { tmpfiles, arg, "--create", SRC_DIR "/systemd/rdmamemd.tmpfiles",
				  NULL };
	const char *cleanup[] = { "/bin/rm", "-rf", root, NULL };
	unsigned user, group;
	char *out, *err;
	struct stat st;

	require_tool(sysusers);
	require_tool(tmpfiles);
	/* tmpfiles gives /run/rdmamemd to the rdmamemd user it just made. */
	if (!test_root_or_skip(__func__, "let systemd-tmpfiles chown to the rdmamemd user"))
		return;
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(arg, sizeof(arg), "--root=%s", root);
	snprintf(path, sizeof(path), "%s/etc", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);

	ck_assert_int_eq(test_run(mk_users, &out, &err), 0);
	free(out);
	free(err);
	ck_assert(db_lookup(root, "passwd", "rdmamemd", &user));
	ck_assert(db_lookup(root, "group", "rdmamem", &group));

	run_ok(mk_dirs);
	snprintf(path, sizeof(path), "%s/run/rdmamemd", root);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_uint_eq(st.st_gid, group);
	ck_assert_int_eq(test_run(cleanup, &out, &err), 0);
	free(out);
	free(err);
}
END_TEST

/* Under WatchdogSec= the loop pings; STATUS= counts what the daemon holds. */
START_TEST(test_watchdog_and_status)
{
	const char *args[] = { "/usr/bin/env", "WATCHDOG_USEC=200000",
			       DAEMON_BIN,     "--socket",
			       "@SOCKET@",     NULL };
	struct test_daemon td;
	int fd;

	test_daemon_start_argv(&td, args);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(test_notify_wait(&td, "WATCHDOG=1", 2000), "ping %d missing", i);
	fd = test_connect(td.socket);
	test_assert_serving_fd(fd);
	ck_assert(test_notify_wait(&td, "STATUS=Serving 1 clients, 0 regions, 0 bytes pinned",
				   5000));
	close(fd);
	kill(td.pid, SIGTERM);
	ck_assert(test_notify_wait(&td, "STOPPING=1", 5000));
	test_daemon_wait_exit(&td, false);
}
END_TEST

/* Without a watchdog in the environment there are no pings. */
START_TEST(test_no_watchdog_without_request)
{
	struct test_daemon td;

	test_daemon_start(&td, NULL);
	ck_assert(!test_notify_wait(&td, "WATCHDOG=1", 700));
	test_daemon_stop(&td);
}
END_TEST

static const char *connect_error(const char *path)
{
	static char name[128];
	int fd = test_connect(path);
	cJSON *reply = test_call(fd, "{\"method\":\"io.rdmamemd.Ping\"}");
	const char *e = test_reply_error(reply);

	snprintf(name, sizeof(name), "%s", e ?: "");
	cJSON_Delete(reply);
	close(fd);
	/* The daemon counts a connection until it has seen it close. */
	usleep(50000);
	return name;
}

static void reload(struct test_daemon *td)
{
	kill(td->pid, SIGHUP);
	ck_assert(test_notify_wait(td, "RELOADING=1", 5000));
	ck_assert(test_notify_wait(td, "READY=1", 5000));
}

/*
 * SIGHUP reads the file again: a lowered quota applies to new connections
 * while the connected clients stay; a broken file changes nothing; a
 * setting that needs a restart is kept as it was.
 */
START_TEST(test_reload_changes_quota)
{
	char conf[128];
	const char *extra[] = { "--config", conf, NULL };
	struct test_daemon td;
	struct stat st;
	int a, b;

	snprintf(conf, sizeof(conf), "/tmp/rdmamemd-reload.%d.conf", getpid());
	write_file(conf, "[limits]\nmax-connections-per-uid = 3\n");
	test_daemon_start(&td, extra);
	a = test_connect(td.socket);
	b = test_connect(td.socket);
	test_assert_serving_fd(a);
	test_assert_serving_fd(b);

	write_file(conf, "[daemon]\nsocket-mode = 0600\n[limits]\nmax-connections-per-uid = 2\n");
	reload(&td);
	test_assert_serving_fd(a);
	test_assert_serving_fd(b);
	ck_assert_str_eq(connect_error(td.socket), RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	ck_assert_int_eq(stat(td.socket, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);

	test_expect("ops: a reload with a bad value (an error, the configuration in force kept)");
	write_file(conf, "[limits]\nmax-connections-per-uid = many\n");
	reload(&td);
	ck_assert_str_eq(connect_error(td.socket), RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);

	write_file(conf, "[limits]\nmax-connections-per-uid = 3\n");
	reload(&td);
	ck_assert_str_eq(connect_error(td.socket), "");
	test_assert_serving_fd(a);
	test_assert_serving_fd(b);
	close(a);
	close(b);
	test_daemon_stop(&td);
	unlink(conf);
}
END_TEST

static const struct {
	const char *text;
	const char *error;
} bad_configs[] = {
	{ "[daemon]\nlog-level = info\nbogus-key = 1\n", ":3: unknown setting 'bogus-key'" },
	{ "[limits]\n\nmax-connections = lots\n", ":3: max-connections wants a number" },
	{ "# comment\nno section here\n", ":2: not a 'key = value' line" },
	{ "[limits]\nread-inline-max = 64M\n", ":2: read-inline-max" },
	{ "[daemon]\nsocket-mode = 0999\n", ":2: socket-mode" },
	{ "[rdma]\nallow-networks = 10.0.0.0/99\n", ":2: allow-networks: '10.0.0.0/99' is not" },
	{ "[rdma]\nrdmacm-listen = 10.0.0.1:99999\n", ":2: rdmacm-listen: '10.0.0.1:99999'" },
};

/* --check-config names the file and line of the first error and fails. */
START_TEST(test_check_config_rejects)
{
	char conf[128];
	const char *argv[] = { DAEMON_BIN, "--config", conf, "--check-config", NULL };
	char *out, *err;

	snprintf(conf, sizeof(conf), "/tmp/rdmamemd-bad.%d.conf", getpid());
	write_file(conf, bad_configs[_i].text);
	ck_assert_int_eq(test_run(argv, &out, &err), 1);
	ck_assert_msg(strstr(err, conf) && strstr(err, bad_configs[_i].error),
		      "case %d: stderr '%s'", _i, err);
	free(out);
	free(err);
	unlink(conf);
}
END_TEST

/*
 * The shipped file documents every key and checks clean; what
 * --print-config prints is itself a valid file that gives the same
 * settings; the command line overrides the file.
 */
START_TEST(test_config_round_trip)
{
	char conf[128];
	const char *shipped[] = { DAEMON_BIN, "--config", SRC_DIR "/config/rdmamemd.conf",
				  "--check-config", NULL };
	const char *print[] = { DAEMON_BIN, "--config", conf, "--print-config", NULL };
	const char *override[] = { DAEMON_BIN, "--config",       conf, "--max-connections",
				   "7",        "--print-config", NULL };
	const char *defaults[] = { DAEMON_BIN, "--config", "/dev/null", "--print-config", NULL };
	char *out, *err, *again, *shipped_text;

	ck_assert_int_eq(test_run(shipped, &out, &err), 0);
	free(out);
	free(err);

	/* Every key that --print-config knows appears in the shipped file. */
	ck_assert_int_eq(test_run(defaults, &out, &err), 0);
	shipped_text = test_read_file(SRC_DIR "/config/rdmamemd.conf");
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char key[64];

		if (sscanf(line, "%63[a-z-] =", key) == 1) {
			char want[80];

			snprintf(want, sizeof(want), "#%s =", key);
			ck_assert_msg(strstr(shipped_text, want), "%s undocumented", key);
		}
	}
	free(shipped_text);
	free(out);
	free(err);

	snprintf(conf, sizeof(conf), "/tmp/rdmamemd-print.%d.conf", getpid());
	write_file(conf, "[daemon]\nbandwidth-probe-size = 1000001\n"
			 "[limits]\nmax-regions-per-uid = 12\nread-inline-max = 1M\n"
			 "[rdma]\nexclude-devices = mlx5_0, mlx5_1\n");
	ck_assert_int_eq(test_run(print, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "max-regions-per-uid = 12\n"));
	/* Sizes as the file spelled them; one no suffix divides, in bytes. */
	ck_assert_ptr_nonnull(strstr(out, "read-inline-max = 1M\n"));
	ck_assert_ptr_nonnull(strstr(out, "bandwidth-probe-size = 1000001\n"));
	ck_assert_ptr_nonnull(strstr(out, "exclude-devices = mlx5_0 mlx5_1\n"));
	free(err);
	write_file(conf, out);
	ck_assert_int_eq(test_run(print, &again, &err), 0);
	free(err);
	/* Only the header (which names the file) may differ. */
	ck_assert_str_eq(strchr(again, '\n'), strchr(out, '\n'));
	free(again);
	free(out);

	ck_assert_int_eq(test_run(override, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "\nmax-connections = 7\n"));
	ck_assert_ptr_nonnull(strstr(out, "max-regions-per-uid = 12\n"));
	free(out);
	free(err);
	unlink(conf);
}
END_TEST

/*
 * --no-config reads no file (the header says so), and it and --config
 * together are refused by name. The harness starts every test daemon with
 * it when the case names no file of its own: an installed, edited
 * /etc/rdmamemd/rdmamemd.conf never changes what a test sees.
 */
START_TEST(test_no_config)
{
	const char *print[] = { DAEMON_BIN, "--no-config", "--print-config", NULL };
	const char *both[] = { DAEMON_BIN,  "--no-config",    "--config",
			       "/dev/null", "--check-config", NULL };
	struct test_daemon td;
	char path[64], *out, *err, *cmdline;
	bool seen = false;
	int fd;
	ssize_t n;

	ck_assert_int_eq(test_run(print, &out, &err), 0);
	ck_assert_msg(strncmp(out, "# rdmamemd ", 11) == 0 && strstr(out, ": defaults, no file,") &&
			      strstr(out, ": defaults, no file,") < strchr(out, '\n'),
		      "header: %.80s", out);
	free(out);
	free(err);

	ck_assert_int_eq(test_run(both, &out, &err), 1);
	ck_assert_msg(strstr(err, "--config and --no-config"), "stderr: %s", err);
	free(out);
	free(err);

	test_daemon_start(&td, NULL);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)td.pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	cmdline = calloc(1, 4096);
	n = read(fd, cmdline, 4095);
	close(fd);
	ck_assert_int_gt(n, 0);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmdline + i) + 1)
		seen = seen || strcmp(cmdline + i, "--no-config") == 0;
	free(cmdline);
	test_daemon_stop(&td);
	ck_assert_msg(seen, "the harness started a daemon that reads the installed file");
}
END_TEST

/*
 * socket-group: the socket the daemon creates belongs to that group (as
 * root any gid; otherwise one of the test's own groups), and an unknown
 * group fails the start by name. The log says where the configuration came
 * from before it says where the daemon listens.
 */
START_TEST(test_socket_group_and_log_order)
{
	char gid_arg[64], log_path[64], *log, *conf, *listen, *out, *err;
	const char *unknown[] = { DAEMON_BIN, "--no-config", "--socket-group=no-such-group-rdmamem",
				  "--check-config", NULL };
	struct test_daemon td;
	struct stat st;
	gid_t groups[64], gid;
	int n;

	if (geteuid() == 0) {
		gid = 4242;
	} else {
		n = getgroups(ELEMENTSOF(groups), groups);
		gid = n > 0 ? groups[n - 1] : getegid();
	}
	snprintf(gid_arg, sizeof(gid_arg), "--socket-group=%u", (unsigned)gid);
	snprintf(log_path, sizeof(log_path), "/tmp/rdmamemd-ops-log.%d", (int)getpid());
	test_daemon_log_path = log_path;
	test_daemon_start(&td, (const char *const[]){ gid_arg, "--log-level=info", NULL });
	test_daemon_log_path = NULL;
	ck_assert_int_eq(stat(td.socket, &st), 0);
	ck_assert_uint_eq(st.st_gid, gid);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);
	test_daemon_stop(&td);

	log = test_read_file(log_path);
	unlink(log_path);
	conf = strstr(log, "Configuration: built-in defaults");
	listen = strstr(log, "Listening on");
	ck_assert_msg(conf && listen && conf < listen, "log: %s", log);
	free(log);

	ck_assert_int_eq(test_run(unknown, &out, &err), 1);
	ck_assert_msg(strstr(err, "socket-group 'no-such-group-rdmamem': no such group"),
		      "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/*
 * Not root and no XDG_RUNTIME_DIR (a cron job, a su without a session):
 * no default socket, and the daemon says so in one line that names
 * --socket, and exits 1 (as root, the case runs it as another uid).
 */
START_TEST(test_no_runtime_dir_one_line)
{
	int p[2], status;
	char *err;
	pid_t pid;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *const argv[] = { DAEMON_BIN, "--no-config", "--bandwidth-probe-size=0",
				       NULL };
		/* Opened as root: the other uid may not enter the build's
		 * directory (a clone under /tmp is 0700), but it may run the
		 * file it is handed. */
		int exe = open(DAEMON_BIN, O_RDONLY | O_CLOEXEC);

		if (exe < 0 || (geteuid() == 0 && test_become_other_uid() < 0))
			_exit(99);
		unsetenv("XDG_RUNTIME_DIR");
		unsetenv("RUNTIME_DIRECTORY");
		unsetenv("RDMAMEM_SOCKET");
		dup2(p[1], STDERR_FILENO);
		fexecve(exe, argv, environ);
		_exit(127);
	}
	close(p[1]);
	err = test_read_line(p[0], 10000);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "XDG_RUNTIME_DIR") && strstr(err, "--socket=PATH"), "%s", err);
	free(err);
	/* One line: nothing after it. */
	err = test_read_line(p[0], 1000);
	ck_assert_msg(!err, "a second line: %s", err ?: "");
	close(p[0]);
}
END_TEST

/*
 * Under systemd, stderr is the journal's stream and messages go to the
 * journal natively with their fields, through a socket at a fixed path.
 * The case listens there: in its own mount namespace over a private /run
 * where it can have one, else (a chroot, whose / is no mount point) at the
 * real path when no journald holds it.
 */
#define JOURNAL_SOCKET "/run/systemd/journal/socket"

enum journal_where { JOURNAL_NAMESPACE, JOURNAL_IN_PLACE, JOURNAL_NOWHERE };

static int journal_private_run(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/run", "tmpfs", 0, "mode=0755") < 0)
		return -errno;
	return 0;
}

/* Tried once, in a child, before the suite is made. */
static enum journal_where journal_where(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0)
		_exit(journal_private_run() == 0 ? 0 : 1);
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0)
		return JOURNAL_NAMESPACE;
	if (geteuid() == 0 && access(JOURNAL_SOCKET, F_OK) < 0 && errno == ENOENT)
		return JOURNAL_IN_PLACE;
	return JOURNAL_NOWHERE;
}

static enum journal_where journal_mode;

static int journal_listen(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = JOURNAL_SOCKET };
	int fd;

	if (journal_mode == JOURNAL_NAMESPACE)
		ck_assert_int_eq(journal_private_run(), 0);
	mkdir("/run/systemd", 0755);
	mkdir("/run/systemd/journal", 0755);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "%s: %s", JOURNAL_SOCKET,
		      strerror(errno));
	return fd;
}

static void journal_unlisten(int fd)
{
	close(fd);
	if (journal_mode == JOURNAL_IN_PLACE)
		unlink(JOURNAL_SOCKET);
}

/*
 * Reads the journal socket while the case runs, as journald would: a
 * datagram socket's queue is short, and a sender blocks when it is full.
 * Entries are separated by a blank line.
 */
struct journal_reader {
	pthread_t thread;
	int fd;
	atomic_bool stop;
	size_t len;
	char all[1 << 20];
};

static void *journal_read(void *userdata)
{
	struct journal_reader *j = userdata;
	struct pollfd pfd = { .fd = j->fd, .events = POLLIN };

	while (!atomic_load(&j->stop) || poll(&pfd, 1, 0) > 0) {
		ssize_t n;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = recv(j->fd, j->all + j->len, sizeof(j->all) - j->len - 2, 0);
		if (n <= 0)
			break;
		j->len += (size_t)n;
		j->all[j->len++] = '\n';
		if (sizeof(j->all) - j->len < 65536)
			j->len = 0; /* keep only the latest; the cases need few */
	}
	j->all[j->len] = '\0';
	return NULL;
}

static bool entry_has(const char *all, const char *a, const char *b)
{
	for (const char *e = all; e && *e;) {
		const char *end = strstr(e, "\n\n");
		size_t n = end ? (size_t)(end - e) : strlen(e);
		char *entry = strndup(e, n);
		bool both = strstr(entry, a) && strstr(entry, b);

		free(entry);
		if (both)
			return true;
		e = end ? end + 2 : NULL;
	}
	return false;
}

START_TEST(test_journal_fields)
{
	const char *extra[] = { "--log-level", "debug", NULL };
	char env[64], want[64];
	struct test_daemon td;
	struct journal_reader *j = calloc(1, sizeof(*j));
	struct rdmamem_client *c;
	uint64_t region;
	struct stat st;
	int fd, mfd;
	cJSON *reply;
	char *all;

	ck_assert_ptr_nonnull(j);
	j->fd = journal_listen();
	ck_assert_int_eq(pthread_create(&j->thread, NULL, journal_read, j), 0);
	ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
	snprintf(env, sizeof(env), "%lu:%lu", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	test_daemon_start(&td, extra);

	/* The fields of a registration failure, from the daemon's log module
	 * in this process. */
	log_setup();
	log_full_fields(LOG_WARNING, -ENOMEM, LOG_DEVICE("rxe7"), "Region 5 on RDMA device rxe7");
	unsetenv("JOURNAL_STREAM");
	log_setup();

	/* A client error, at debug, with the client's pid and uid. */
	fd = test_connect(td.socket);
	reply = test_call(fd, "{\"method\":\"io.rdmamemd.Unregister\",\"parameters\":"
			      "{\"region\":\"999\"}}");
	ck_assert_str_eq(test_reply_error(reply), RDMAMEM_ERROR_NO_SUCH_REGION);
	cJSON_Delete(reply);
	close(fd);

	/* A region's life, with its id. */
	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);
	ck_assert_int_eq(rdmamem_memfd_create("journal", 4096, &mfd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, mfd, 0, 0, &region), 0);
	ck_assert_int_eq(rdmamem_unregister(c, region), 0);
	/* A GPU import the driver refuses (or, without one, cannot try) is a
	 * registration failure: a warning, with the client. */
	ck_assert_int_lt(rdmamem_register_cuda_vmm(c, mfd, 4096, 0, 0, &region), 0);
	rdmamem_client_close(c);
	close(mfd);
	test_daemon_stop(&td);

	atomic_store(&j->stop, true);
	pthread_join(j->thread, NULL);
	all = j->all;
	snprintf(want, sizeof(want), "REGION=%" PRIu64 "\n", region);
	ck_assert_msg(entry_has(all, want, "released"), "%s", all);
	ck_assert_msg(entry_has(all, want, "bytes of a memfd"), "%s", all);
	snprintf(want, sizeof(want), "CLIENT_PID=%d\n", getpid());
	ck_assert_msg(entry_has(all, "PRIORITY=7\n", "io.rdmamemd.Unregister"), "%s", all);
	ck_assert_msg(entry_has(all, want, RDMAMEM_ERROR_NO_SUCH_REGION), "%s", all);
	snprintf(want, sizeof(want), "CLIENT_UID=%u\n", (unsigned)getuid());
	ck_assert_msg(entry_has(all, want, RDMAMEM_ERROR_NO_SUCH_REGION), "%s", all);
	ck_assert_msg(entry_has(all, "SYSLOG_IDENTIFIER=rdmamemd\n", "MESSAGE="), "%s", all);
	ck_assert_msg(entry_has(all, "CODE_FILE=", "CODE_LINE="), "%s", all);
	snprintf(want, sizeof(want), "CLIENT_PID=%d\n", getpid());
	ck_assert_msg(entry_has(all, want, "PRIORITY=4\nSYSLOG_IDENTIFIER=rdmamemd\n"), "%s", all);
	ck_assert_msg(entry_has(all, "GPU memory import failed", "PRIORITY=4\n"), "%s", all);
	ck_assert_msg(entry_has(all, "DEVICE=rxe7\n", "ERRNO=12\n"), "%s", all);
	ck_assert_msg(entry_has(all, "DEVICE=rxe7\n", "PRIORITY=4\n"), "%s", all);
	journal_unlisten(j->fd);
	free(j);
}
END_TEST

Suite *ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("systemd");

	tcase_add_test(tc, test_units_verify);
	tcase_add_test(tc, test_sysusers_tmpfiles);
	tcase_add_test(tc, test_watchdog_and_status);
	tcase_add_test(tc, test_no_watchdog_without_request);
	journal_mode = journal_where();
	if (journal_mode != JOURNAL_NOWHERE)
		tcase_add_test(tc, test_journal_fields);
	else
		printf("SKIPPED ops:test_journal_fields: it needs a mount namespace (CAP_SYS_ADMIN) "
		       "or, as root, a host without journald; it runs as root in make check\n");
	suite_add_tcase(s, tc);

	tc = tcase_create("config");
	tcase_add_test(tc, test_reload_changes_quota);
	tcase_add_loop_test(tc, test_check_config_rejects, 0, ELEMENTSOF(bad_configs));
	tcase_add_test(tc, test_config_round_trip);
	tcase_add_test(tc, test_no_config);
	tcase_add_test(tc, test_socket_group_and_log_order);
	tcase_add_test(tc, test_no_runtime_dir_one_line);
	suite_add_tcase(s, tc);
	return s;
}
