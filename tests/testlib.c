/* SPDX-License-Identifier: BSD-3-Clause */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/json.h"
#include "proto/json_out.h"
#include "util/sockio.h"
#include "rdmamem.h"
#include "testlib.h"

#define START_TIMEOUT_MS 10000

void (*test_daemon_child_setup)(void);
const char *test_daemon_log_path;
#define STOP_TIMEOUT_MS 10000

static long long mono_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void make_notify_socket(struct test_daemon *td)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(td->notify, sizeof(td->notify), "%s/notify", td->dir);
	td->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(td->notify_fd, 0);
	strcpy(sa.sun_path, td->notify);
	ck_assert_int_eq(bind(td->notify_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

bool test_notify_wait(struct test_daemon *td, const char *needle, int timeout_ms)
{
	long long deadline = mono_msec() + timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = td->notify_fd, .events = POLLIN };
		long long left = deadline - mono_msec();
		char buf[4096];
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return false;
		n = recv(td->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strstr(buf, needle))
			return true;
	}
}

/* Copies arg with every placeholder replaced; the copy lives in pool. */
static const char *expand(const char *arg, const struct test_daemon *td, char *pool, size_t *used,
			  size_t size)
{
	char *out = pool + *used;
	size_t n = 0;

	while (*arg) {
		const char *with = NULL;
		size_t skip = 0;

		if (strncmp(arg, "@SOCKET@", 8) == 0)
			with = td->socket, skip = 8;
		else if (strncmp(arg, "@NOTIFY@", 8) == 0)
			with = td->notify, skip = 8;
		if (with) {
			ck_assert_uint_lt(*used + n + strlen(with), size);
			memcpy(out + n, with, strlen(with));
			n += strlen(with);
			arg += skip;
		} else {
			ck_assert_uint_lt(*used + n + 1, size);
			out[n++] = *arg++;
		}
	}
	out[n++] = '\0';
	*used += n;
	return out;
}

/*
 * One directory per run of the runner, which holds every test daemon's: a
 * case that fails, or kills its daemon, leaves its own behind, and the
 * runner removes the lot as it exits (test_run_dir_remove()). Made by the
 * runner before the first case forks, so every case inherits the path.
 */
static char run_dir[40];

void test_expect(const char *what)
{
	fprintf(stderr, "expected: %s\n", what);
}

const char *test_run_dir(void)
{
	if (!run_dir[0]) {
		strcpy(run_dir, "/tmp/rdmamemd-test.XXXXXX");
		/* Made before any case runs: no ck_assert here. */
		if (!mkdtemp(run_dir)) {
			perror("mkdtemp /tmp/rdmamemd-test.XXXXXX");
			abort();
		}
		/* Cases that become another uid reach their daemon's socket. */
		chmod(run_dir, 0755);
	}
	return run_dir;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void test_run_dir_remove(void)
{
	if (run_dir[0])
		nftw(run_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void test_daemon_spawn(struct test_daemon *td, const char *const *argv)
{
	const char *args[64];
	char pool[4096];
	size_t n = 0, used = 0;
	bool own_config = false;

	memset(td, 0, sizeof(*td));
	snprintf(td->dir, sizeof(td->dir), "%s/d.XXXXXX", test_run_dir());
	ck_assert_ptr_nonnull(mkdtemp(td->dir));
	chmod(td->dir, 0755);
	snprintf(td->socket, sizeof(td->socket), "%s/rdmamemd.sock", td->dir);
	make_notify_socket(td);

	/* RDMAMEM_TEST_DAEMON_WRAPPER ("valgrind --error-exitcode=99 ...",
	 * split at spaces) runs each daemon under a tool; a tool's failure is
	 * then the daemon's exit status, which the tests check. */
	if (strcmp(argv[0], DAEMON_BIN) == 0 && getenv("RDMAMEM_TEST_DAEMON_WRAPPER")) {
		char *w = (char *)expand(getenv("RDMAMEM_TEST_DAEMON_WRAPPER"), td, pool, &used,
					 sizeof(pool));

		for (char *save = NULL, *t = strtok_r(w, " ", &save); t && n < 32;
		     t = strtok_r(NULL, " ", &save))
			args[n++] = t;
	}
	for (size_t i = 0; argv[i] && n < ELEMENTSOF(args) - 1; i++) {
		args[n++] = expand(argv[i], td, pool, &used, sizeof(pool));
		if (strncmp(argv[i], "--config", 8) == 0 || strcmp(argv[i], "--no-config") == 0)
			own_config = true;
	}
	/* A test daemon reads the file its case gives or none: never the
	 * installed one, which an administrator may have edited. */
	if (strcmp(argv[0], DAEMON_BIN) == 0 && !own_config && n < ELEMENTSOF(args) - 1)
		args[n++] = "--no-config";
	args[n] = NULL;

	td->pid = fork();
	ck_assert_int_ge(td->pid, 0);
	if (td->pid == 0) {
		if (test_daemon_log_path) {
			int fd = open(test_daemon_log_path,
				      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

			if (fd >= 0)
				dup2(fd, STDERR_FILENO);
		}
		if (test_daemon_child_setup)
			test_daemon_child_setup();
		setenv("NOTIFY_SOCKET", td->notify, 1);
		unsetenv("RDMAMEM_SOCKET");
		/* The path is searched for a wrapper such as "valgrind". */
		execvp(args[0], (char *const *)args);
		_exit(127);
	}
}

void test_daemon_wait_ready(struct test_daemon *td)
{
	if (!test_notify_wait(td, "READY=1", START_TIMEOUT_MS)) {
		int status;

		kill(td->pid, SIGKILL);
		waitpid(td->pid, &status, 0);
		ck_abort_msg("the daemon did not become ready");
	}
}

void test_daemon_start_argv(struct test_daemon *td, const char *const *argv)
{
	test_daemon_spawn(td, argv);
	test_daemon_wait_ready(td);
}

void test_daemon_start(struct test_daemon *td, const char *const *extra_args)
{
	/* Quiet unless asked: RDMAMEM_TEST_LOG=debug shows what the daemon did. */
	const char *level = getenv("RDMAMEM_TEST_LOG") ?: "warning";
	/* A small bandwidth probe: every test daemon makes one at start. */
	const char *argv[64] = { DAEMON_BIN,    "--socket", "@SOCKET@",
				 "--log-level", level,      "--bandwidth-probe-size=4M" };
	size_t n = 6;

	for (; extra_args && *extra_args && n < ELEMENTSOF(argv) - 1; extra_args++)
		argv[n++] = *extra_args;
	argv[n] = NULL;
	test_daemon_start_argv(td, argv);
}

/* Where each thread of a process that will not exit is waiting, for the
 * failure message: "tid:state:wchan" and its signal masks per thread. */
static void describe_threads(pid_t pid, char *buf, size_t size)
{
	char path[320], wchan[64], stat[512], *state;
	struct dirent *de;
	size_t len = 0;
	DIR *d;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && len < size) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		wchan[0] = stat[0] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/task/%s/wchan", (int)pid, de->d_name);
		if ((f = fopen(path, "re"))) {
			if (!fgets(wchan, sizeof(wchan), f))
				wchan[0] = '\0';
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		if ((f = fopen(path, "re"))) {
			if (!fgets(stat, sizeof(stat), f))
				stat[0] = '\0';
			fclose(f);
		}
		state = strrchr(stat, ')');
		len += snprintf(buf + len, size - len, " %s:%c:%s", de->d_name,
				state && state[1] ? state[2] : '?', wchan[0] ? wchan : "-");
		/* A signal that is pending or blocked says why it was not acted on. */
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, de->d_name);
		if ((f = fopen(path, "re"))) {
			char line[128];

			while (fgets(line, sizeof(line), f) && len < size)
				if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7) ||
				    !strncmp(line, "SigBlk:", 7) || !strncmp(line, "SigCgt:", 7))
					len += snprintf(buf + len, size - len, " %.*s",
							(int)strcspn(line, "\n"), line);
			fclose(f);
		}
	}
	closedir(d);
}

/* Waits for pid to exit; meanwhile reads what it says on notify_fd (if
 * >= 0), as systemd would: a daemon whose notifications are not read
 * blocks in sd_notify() once the socket's queue is full. */
static int wait_exit(pid_t pid, int timeout_ms, int notify_fd)
{
	long long deadline = mono_msec() + timeout_ms;
	char discard[4096];
	int status;

	for (;;) {
		pid_t r;

		while (notify_fd >= 0 &&
		       recv(notify_fd, discard, sizeof(discard), MSG_DONTWAIT) > 0)
			;
		r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (mono_msec() > deadline) {
			char threads[2048];

			describe_threads(pid, threads, sizeof(threads));
			fprintf(stderr, "pid %d did not exit in %d ms; threads:%s\n", (int)pid,
				timeout_ms, threads);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(5000);
	}
}

void test_daemon_wait_exit(struct test_daemon *td, bool keep_socket)
{
	struct stat st;
	int status;

	status = wait_exit(td->pid, STOP_TIMEOUT_MS, td->notify_fd);
	ck_assert_msg(status >= 0, "daemon did not exit");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "daemon exit status 0x%x, expected a clean exit", status);
	if (keep_socket) {
		ck_assert_int_eq(stat(td->socket, &st), 0);
		unlink(td->socket);
	} else {
		ck_assert_msg(stat(td->socket, &st) < 0 && errno == ENOENT, "socket %s left behind",
			      td->socket);
	}
	td->notify_fd = safe_close(td->notify_fd);
	unlink(td->notify);
	rmdir(td->dir);
}

void test_daemon_stop(struct test_daemon *td)
{
	ck_assert_int_eq(kill(td->pid, SIGTERM), 0);
	test_daemon_wait_exit(td, false);
}

int test_count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int test_settled_fds(pid_t pid)
{
	int last = test_count_fds(pid), same = 0;

	for (int i = 0; i < 500 && same < 5; i++) {
		int n;

		usleep(20000);
		n = test_count_fds(pid);
		same = n == last ? same + 1 : 0;
		last = n;
	}
	return last;
}

struct rdmamem_client *test_client(const char *socket)
{
	struct rdmamem_client *c = NULL;

	ck_assert_int_eq(rdmamem_client_connect(socket, &c), 0);
	return c;
}

void test_wait_until(bool (*cond)(void), int timeout_ms, const char *what)
{
	for (int waited = 0; !cond(); waited += 10) {
		if (waited >= timeout_ms)
			ck_abort_msg("timed out waiting for %s", what);
		usleep(10000);
	}
}

char *test_read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long len;

	ck_assert_msg(f, "%s: %m", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, len, f), len);
	fclose(f);
	return buf;
}

int test_memfd_maps(pid_t pid)
{
	char path[64], line[512];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/memfd:"))
			n++;
	fclose(f);
	return n;
}

void test_baseline_take(const struct test_daemon *td, struct test_baseline *base)
{
	base->fds = test_settled_fds(td->pid);
	base->memfd_maps = test_memfd_maps(td->pid);
}

static void baseline_wait_settled(const struct test_baseline *base)
{
	if (base->settled)
		test_wait_until(base->settled, base->timeout_ms, base->what);
}

void test_baseline_assert(const struct test_daemon *td, const struct test_baseline *base)
{
	baseline_wait_settled(base);
	ck_assert_int_eq(test_settled_fds(td->pid), base->fds);
	ck_assert_int_eq(test_memfd_maps(td->pid), base->memfd_maps);
}

void test_kill_client_mid_call(const struct test_daemon *td, const struct test_baseline *base,
			       int (*client)(const char *socket, void *arg), void *arg,
			       unsigned settle_us)
{
	int sync[2], status;
	pid_t pid;
	char ok;

	ck_assert_int_eq(pipe2(sync, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int r;

		close(sync[0]);
		r = client(td->socket, arg);
		if (r != 0)
			_exit(r);
		if (write(sync[1], "x", 1) != 1)
			_exit(100);
		pause();
		_exit(0);
	}
	close(sync[1]);
	/* EOF: the child failed before its calls were under way. */
	ck_assert_int_eq(read(sync[0], &ok, 1), 1);
	close(sync[0]);
	if (settle_us)
		usleep(settle_us);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);

	baseline_wait_settled(base);
	/* The checks above may have opened and closed connections of their
	 * own: test_settled_fds waits for the daemon to close them. */
	test_assert_serving(td->socket);
	test_baseline_assert(td, base);
}

long test_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kib, 0);
	return kib;
}

int test_lock_raw(const char *path, uint64_t region, const char *mode, int timeout_ms)
{
	char msg[256];
	int s = test_connect(path);

	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"%llu\","
		 "\"mode\":\"%s\",\"timeout_ms\":%d}}",
		 (unsigned long long)region, mode, timeout_ms);
	test_send_msg(s, msg, NULL, 0);
	return s;
}

int test_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
		      strerror(errno));
	return fd;
}

void test_send_raw(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		p += n;
		len -= n;
	}
}

void test_send_msg(int fd, const char *text, const int *fds, size_t n_fds)
{
	size_t len = strlen(text) + 1;
	ssize_t n;

	n = sockio_send(fd, text, len, fds, n_fds, 0);
	ck_assert_msg(n > 0, "sendmsg: %s", strerror((int)-n));
	if ((size_t)n < len)
		test_send_raw(fd, text + n, len - n);
}

ssize_t test_recv_msg(int fd, char **ret, int timeout_ms)
{
	long long deadline = mono_msec() + timeout_ms;
	char *buf = NULL;
	size_t len = 0, cap = 0;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = deadline - mono_msec();
		char chunk[65536];
		char *nul;
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
			free(buf);
			return -ETIMEDOUT;
		}
		/* Peek, then take exactly up to the terminator so the next
		 * message stays in the socket. */
		n = recv(fd, chunk, sizeof(chunk), MSG_PEEK);
		if (n <= 0) {
			free(buf);
			return n == 0 ? 0 : -errno;
		}
		nul = memchr(chunk, 0, n);
		if (nul)
			n = nul - chunk + 1;
		n = recv(fd, chunk, n, 0);
		ck_assert_int_gt(n, 0);
		/* Grown geometrically: a 16 MiB reply must not cost a copy per
		 * chunk (sanitizers' realloc always copies). */
		if (len + n + 1 > cap) {
			cap = MAX(cap * 2, len + n + 1);
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		memcpy(buf + len, chunk, n);
		len += n;
		if (nul) {
			*ret = buf;
			return (ssize_t)len - 1;
		}
	}
}

cJSON *test_call(int fd, const char *text)
{
	char *reply;
	cJSON *root;
	ssize_t n;

	test_send_msg(fd, text, NULL, 0);
	n = test_recv_msg(fd, &reply, 10000);
	ck_assert_msg(n > 0, "no reply to %s (%zd)", text, n);
	root = cJSON_Parse(reply);
	ck_assert_msg(root, "reply is not JSON: %s", reply);
	free(reply);
	return root;
}

cJSON *test_out_tree(struct json_out *o)
{
	const char *why = NULL;
	cJSON *tree = NULL;

	ck_assert_int_eq(o->err, 0);
	ck_assert_uint_eq(o->depth, 0);
	ck_assert_msg(json_parse(o->text, o->len, &tree, &why) == 0, "'%s': %s", o->text, why);
	json_out_free(o);
	return tree;
}

const char *test_reply_error(const cJSON *reply)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");

	return cJSON_IsString(e) ? e->valuestring : NULL;
}

void test_assert_serving_fd(int fd)
{
	cJSON *reply = test_call(fd, "{\"method\":\"io.rdmamemd.Ping\"}");

	ck_assert_ptr_null(test_reply_error(reply));
	ck_assert(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(reply, "parameters")));
	cJSON_Delete(reply);
}

void test_assert_serving(const char *path)
{
	int fd = test_connect(path);

	test_assert_serving_fd(fd);
	close(fd);
}

static char *slurp_fd(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
	}
	buf[len] = '\0';
	return buf;
}

int test_run(const char *const *argv, char **ret_out, char **ret_err)
{
	char out_path[] = "/tmp/rdmamem-out.XXXXXX", err_path[] = "/tmp/rdmamem-err.XXXXXX";
	int out = mkstemp(out_path), err = mkstemp(err_path);
	int status;
	pid_t pid;

	ck_assert_int_ge(out, 0);
	ck_assert_int_ge(err, 0);
	unlink(out_path);
	unlink(err_path);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(out, STDOUT_FILENO);
		dup2(err, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	status = wait_exit(pid, 60000, -1);

	lseek(out, 0, SEEK_SET);
	lseek(err, 0, SEEK_SET);
	*ret_out = slurp_fd(out);
	*ret_err = slurp_fd(err);
	close(out);
	close(err);
	ck_assert_msg(status >= 0 && WIFEXITED(status), "%s did not exit; stdout: %s; stderr: %s",
		      argv[0], *ret_out, *ret_err);
	return WEXITSTATUS(status);
}

pid_t test_spawn(const char *const *argv, int *ret_stdout)
{
	int p[2];
	pid_t pid;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	*ret_stdout = p[0];
	return pid;
}

int test_wait(pid_t pid, int timeout_ms)
{
	int status = wait_exit(pid, timeout_ms, -1);

	if (status < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

char *test_read_line(int fd, int timeout_ms)
{
	long long deadline = mono_msec() + timeout_ms;
	char buf[1024];
	size_t n = 0;

	while (n < sizeof(buf) - 1) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = deadline - mono_msec();
		ssize_t r;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return NULL;
		r = read(fd, buf + n, 1);
		if (r <= 0)
			return NULL;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return strdup(buf);
}

static unsigned n_rdma_cases, n_cuda_cases, n_hosts_cases, n_numa_cases;

void test_count_tagged(const char *tag)
{
	if (strcmp(tag, "rdma") == 0)
		n_rdma_cases++;
	else if (strcmp(tag, "cuda") == 0)
		n_cuda_cases++;
	else if (strcmp(tag, "hosts") == 0)
		n_hosts_cases++;
	else if (strcmp(tag, "numa") == 0)
		n_numa_cases++;
}

static const char *not_built[8][2];
static size_t n_not_built;

void test_note_not_built(const char *what, const char *missing)
{
	if (n_not_built < ELEMENTSOF(not_built)) {
		not_built[n_not_built][0] = what;
		not_built[n_not_built++][1] = missing;
	}
}

static long root_skips(void);

void test_report_skipped(void)
{
	const char *ex = getenv("CK_EXCLUDE_TAGS"), *in = getenv("CK_INCLUDE_TAGS");

	if (root_skips())
		printf("SKIPPED %ld cases or parts of cases here that need root (each said why above, "
		       "'SKIP ...: needs root'): make check as root runs them\n",
		       root_skips());
	for (size_t i = 0; i < n_not_built; i++)
		printf("SKIPPED %s: this build found no %s (CUDA_HOME/include, the CUDA "
		       "toolkit's header); a build with it runs them, here with the fake driver "
		       "and on the GPU machine for real (tests/gpu/README.md)\n",
		       not_built[i][0], not_built[i][1]);

	if (ex && strstr(ex, "rdma") && n_rdma_cases)
		printf("SKIPPED %u cases tagged rdma here: they need an RDMA device and run "
		       "inside the Soft-RoCE VM (make vmtest, part of make check)\n",
		       n_rdma_cases);
	if (ex && strstr(ex, "cuda") && n_cuda_cases)
		printf("SKIPPED %u cases tagged cuda here: they need a GPU and run on the GPU "
		       "machine (tests/gpu/README.md)\n",
		       n_cuda_cases);
	/* The one-VM run includes only "rdma": these are left out there too. */
	if (((ex && strstr(ex, "hosts")) || (in && !strstr(in, "hosts"))) && n_hosts_cases)
		printf("SKIPPED %u cases tagged hosts here: they need two hosts and run in the "
		       "two-VM bed (make vmtest2, part of make check)\n",
		       n_hosts_cases);
	if (((ex && strstr(ex, "numa")) || (in && !strstr(in, "numa"))) && n_numa_cases)
		printf("SKIPPED %u cases tagged numa here: they need two NUMA nodes with a NIC "
		       "each and run in the NUMA VM (make vmtest-numa, part of make check)\n",
		       n_numa_cases);
}

/* One request to host B's agent (tests/peer/vm-agent.c): the command's
 * status (>= 0), the pid the agent names and the output. */
static int remote(const char *verb, int timeout_s, const char *arg, pid_t *ret_pid, char **ret_out)
{
	const char *agent = getenv("RDMAMEM_PEER_AGENT");
	char sec[16], *out, *err;
	const char *argv[] = {
		AGENT_BIN, "--connect", agent, "--wait", "10", verb, sec, arg, NULL
	};
	const char *line;
	int status, rc = -1, pid = 0;

	ck_assert_msg(agent, "cases tagged hosts run on host A of the two-VM bed (make vmtest2), "
			     "which sets RDMAMEM_PEER_AGENT");
	ck_assert_int_le(timeout_s, TEST_REMOTE_TIMEOUT_MAX);
	snprintf(sec, sizeof(sec), "%d", timeout_s);
	status = test_run(argv, &out, &err);
	line = strstr(err, "vm-agent rc=");
	ck_assert_msg(line && sscanf(line, "vm-agent rc=%d pid=%d", &rc, &pid) == 2 && rc >= 0 &&
			      rc == status,
		      "host B's agent did not answer '%s %s %s': exit %d: %s%s", verb, sec, arg,
		      status, out, err);
	free(err);
	if (ret_pid)
		*ret_pid = pid;
	if (ret_out)
		*ret_out = out;
	else
		free(out);
	return rc;
}

int test_remote_sh(const char *cmd, int timeout_s, char **ret_out)
{
	return remote("run", timeout_s, cmd, NULL, ret_out);
}

pid_t test_remote_spawn(const char *cmd, int timeout_s, char **ret_line)
{
	char *out, *nl;
	pid_t pid;
	int rc;

	ck_assert_int_gt(timeout_s, 0);
	rc = remote("spawn", timeout_s, cmd, &pid, &out);
	nl = strchr(out, '\n');
	ck_assert_msg(rc == 0 && nl, "'%s' on host B: exit %d before its first line: %s", cmd, rc,
		      out);
	*nl = '\0';
	if (ret_line)
		*ret_line = out;
	else
		free(out);
	return pid;
}

int test_remote_wait(pid_t pid, int timeout_s, char **ret_out)
{
	char arg[16];

	snprintf(arg, sizeof(arg), "%d", (int)pid);
	return remote("wait", timeout_s, arg, NULL, ret_out);
}

long long test_thread_cpu_ns(pid_t pid, pid_t tid)
{
	char path[64];
	long long ns = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	f = fopen(path, "re");
	ck_assert_msg(f, "%s: %m", path);
	ck_assert_int_eq(fscanf(f, "%lld", &ns), 1);
	fclose(f);
	return ns;
}

bool test_timing_is_real(const char **ret_why)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	*ret_why = "this build has sanitizers";
	return false;
#endif
	if (getenv("RDMAMEM_TEST_DAEMON_WRAPPER")) {
		*ret_why = "the daemon runs under RDMAMEM_TEST_DAEMON_WRAPPER";
		return false;
	}
	*ret_why = NULL;
	return true;
}

bool test_root_or_skip(const char *test, const char *why)
{
	size_t n = strlen(test);

	if (geteuid() == 0)
		return true;
	/* __func__ of a START_TEST case is its name with "_fn" appended. */
	if (n > 3 && strcmp(test + n - 3, "_fn") == 0)
		n -= 3;
	printf("SKIP %.*s: needs root to %s\n", (int)n, test, why);
	test_count_root_skip();
	return false;
}

/* Cases run in forked children: the count goes through a file in the
 * run's directory, a byte per skip, which the runner reads at the end. */
void test_count_root_skip(void)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "%s/root-skips", test_run_dir());
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	if (fd >= 0) {
		(void)!write(fd, "x", 1);
		close(fd);
	}
}

static long root_skips(void)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/root-skips", test_run_dir());
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

int test_become_other_uid(void)
{
	if (setgroups(0, NULL) < 0 || setgid(TEST_OTHER_UID) < 0 || setuid(TEST_OTHER_UID) < 0)
		return -errno;
	return 0;
}

void test_assert_bystander_p99(const char *what, const char *socket,
			       int (*attacker)(const char *socket, void *arg), void *arg)
{
	const char *why;
	bool real = test_timing_is_real(&why);
	long p99 = 0;

	for (int attempt = 0; attempt < (real ? 3 : 1); attempt++) {
		p99 = test_bystander_p99_us(socket, attacker, arg);
		if (p99 < 10000)
			break;
	}
	if (!real) {
		printf("%s: SKIP the p99 bound: %s (p99 %ld us)\n", what, why, p99);
		return;
	}
	ck_assert_msg(p99 < 10000, "%s: a bystander's Ping p99 was %ld us", what, p99);
}

static long long mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

/* One Ping and its answer on a raw connection; false when not answered. */
static bool bystander_ping(int fd)
{
	static const char ping[] = "{\"method\":\"io.rdmamemd.Ping\"}";
	char buf[256];
	size_t got = 0;

	if (send(fd, ping, sizeof(ping), MSG_NOSIGNAL) != (ssize_t)sizeof(ping))
		return false;
	/* The answer is small and ends with the only NUL. */
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 60000) <= 0)
			return false;
		n = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (n <= 0)
			return false;
		got += n;
		if (buf[got - 1] == '\0')
			return !memmem(buf, got, "\"error\"", 7);
		if (got == sizeof(buf))
			return false;
	}
}

long test_bystander_p99_us(const char *socket, int (*attacker)(const char *socket, void *arg),
			   void *arg)
{
	size_t n = 0, cap = 4096;
	long *rtt = malloc(cap * sizeof(*rtt)), p50, p99;
	int fd = test_connect(socket), status = -1;
	long long start, due;
	bool done = false;
	pid_t pid;

	ck_assert_ptr_nonnull(rtt);
	/* Connected and answered before the attack starts. */
	ck_assert(bystander_ping(fd));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fd);
		/* What the attacker does here is the test's own load; on a
		 * small machine it must not be what delays the Pings. */
		if (setpriority(PRIO_PROCESS, 0, 10) < 0)
			_exit(95);
		_exit(attacker(socket, arg));
	}

	start = mono_usec();
	for (due = start; !done || n < TEST_BYSTANDER_MIN_PINGS;
	     due += TEST_BYSTANDER_INTERVAL_US) {
		long long now = mono_usec();

		if (now < due) {
			struct timespec ts = { .tv_sec = due / 1000000,
					       .tv_nsec = (due % 1000000) * 1000 };

			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
		}
		ck_assert_msg(bystander_ping(fd), "bystander: Ping %zu not answered", n);
		if (n == cap) {
			cap *= 2;
			rtt = realloc(rtt, cap * sizeof(*rtt));
			ck_assert_ptr_nonnull(rtt);
		}
		/* From when it was due: a Ping held up behind a stall counts
		 * the whole stall. */
		rtt[n++] = (long)(mono_usec() - due);
		if (!done && waitpid(pid, &status, WNOHANG) == pid)
			done = true;
	}
	close(fd);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker: status 0x%x",
		      status);

	qsort(rtt, n, sizeof(*rtt), cmp_long);
	p50 = rtt[n / 2];
	p99 = rtt[(n * 99 + 99) / 100 - 1];
	printf("bystander Ping over %.1f s of attack: %zu pings, p50 %ld us, p99 %ld us, "
	       "max %ld us\n",
	       (mono_usec() - start) / 1e6, n, p50, p99, rtt[n - 1]);
	fflush(stdout);
	free(rtt);
	return p99;
}

uint64_t test_rng_below(uint64_t *state, uint64_t n)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return n ? (x * 2685821657736338717ULL) % n : 0;
}

const char *test_str(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, name);

	ck_assert_msg(cJSON_IsString(i), "'%s' is not a string", name);
	return i->valuestring;
}
