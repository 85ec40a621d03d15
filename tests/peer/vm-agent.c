/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vm-agent: lets a test on host A of the two-VM bed (make vmtest2) act on
 * host B. B's /init runs the server; A's tests and scripts run the client.
 *
 *   vm-agent --listen ADDR:PORT [--lifetime SEC]
 *   vm-agent --connect ADDR:PORT [--wait SEC] VERB [SEC] [COMMAND...]
 *
 * One request per TCP connection, a line "VERB SEC COMMAND\n":
 *
 *   run SEC CMD    runs `sh -c CMD` (stdin /dev/null, stdout and stderr
 *                  captured) and answers when it exits; after SEC seconds
 *                  its process group is killed and rc is 124
 *   spawn SEC CMD  starts `sh -c CMD` in its own process group, its output
 *                  going to a log file, and answers with its pid once it has
 *                  printed its first line (what a holder prints when it is
 *                  ready), or at once when SEC is 0. Still running: rc 0;
 *                  exited before: its status; no line within SEC seconds:
 *                  killed, rc 124
 *   wait SEC PID   waits for a spawned PID to exit; the output is its whole
 *                  log. After SEC seconds it is killed and rc is 124
 *   quit           kills every process group spawned and exits 0
 *
 * The answer is a line "vm-agent rc=N pid=P len=L\n" and L bytes of output.
 * rc is the exit status, 128+N for a signal N, 124 for a time limit, -1 when
 * the request itself was wrong (the output says why). The client writes the
 * output to stdout and the line to stderr, and exits with rc (255 for -1 and
 * for every failure of its own, which it names on stderr without that line).
 *
 * The server serves one request at a time: a test on A is sequential, and a
 * request is bounded by its SEC. Everything it starts runs as root inside a
 * throw-away VM on a private network: there is no authentication. It is a
 * child subreaper, so daemons started by a command and orphaned are reaped
 * here, and their exit is seen at once (kill -0 fails for them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/macro.h"

#define AGENT_LOG_DIR "/tmp/vm-agent"
/* Output kept of one command; the rest is read and dropped. */
#define AGENT_OUTPUT_MAX (4u << 20)
#define AGENT_REQUEST_MAX (64u << 10)
/* How long a connected client may take to send its request line. */
#define AGENT_REQUEST_TIMEOUT_MS 10000
#define AGENT_SPAWNED_MAX 256
#define RC_TIMEOUT 124
#define RC_BAD_REQUEST (-1)
#define CLIENT_FAILED 255

static const char *arg_listen, *arg_connect;
static double arg_lifetime = 3600, arg_wait;

/* What was spawned: pid, and its status once reaped (the loop reaps every
 * child, and those orphaned below us, between requests). */
struct spawned {
	pid_t pid;
	bool exited;
	int status;
};

static struct spawned spawned[AGENT_SPAWNED_MAX];
static size_t n_spawned;

struct buf {
	char *data;
	size_t len, size;
};

static void buf_done(struct buf *b)
{
	free(b->data);
	*b = (struct buf){};
}

static int buf_append(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > AGENT_OUTPUT_MAX)
		n = AGENT_OUTPUT_MAX - b->len;
	if (b->len + n > b->size) {
		size_t size = MAX(b->size * 2, b->len + n);
		char *d = realloc(b->data, size);

		if (!d)
			return -ENOMEM;
		b->data = d;
		b->size = size;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

static int buf_printf(struct buf *b, const char *fmt, ...) _printf_(2, 3);

static int buf_printf(struct buf *b, const char *fmt, ...)
{
	_cleanup_free_ char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	return buf_append(b, s, (size_t)n);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Parses "ADDR:PORT" (IPv4). */
static int parse_inet(const char *text, struct sockaddr_in *ret)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strrchr(text, ':');
	char *end;
	unsigned long port;

	if (!colon || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = '\0';
	port = strtoul(colon + 1, &end, 10);
	if (*end || port == 0 || port > 65535)
		return -EINVAL;
	*ret = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &ret->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

static int rc_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return RC_BAD_REQUEST;
}

static struct spawned *spawned_find(pid_t pid)
{
	for (size_t i = 0; i < n_spawned; i++)
		if (spawned[i].pid == pid)
			return &spawned[i];
	return NULL;
}

/* Reaps every child that has exited (ours and the orphans we adopted),
 * keeping the status of the spawned ones. */
static void reap(void)
{
	struct spawned *s;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		s = spawned_find(pid);
		if (s) {
			s->exited = true;
			s->status = status;
		}
	}
}

/* Waits for a child up to deadline; its status, or -ETIMEDOUT. */
static int wait_until(pid_t pid, int64_t deadline, int *ret_status)
{
	struct spawned *s = spawned_find(pid);
	pid_t r;

	for (;;) {
		if (s && s->exited) {
			*ret_status = s->status;
			return 0;
		}
		r = waitpid(pid, ret_status, WNOHANG);
		if (r == pid) {
			if (s) {
				s->exited = true;
				s->status = *ret_status;
			}
			return 0;
		}
		if (r < 0)
			return -errno;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		usleep(20000);
	}
}

/* Ends a process group that ran out of time and reaps its leader. */
static int kill_group(pid_t pid)
{
	int status;

	kill(-pid, SIGKILL);
	(void)wait_until(pid, now_ms() + 10000, &status);
	return RC_TIMEOUT;
}

static void log_path(pid_t pid, char *path, size_t size)
{
	snprintf(path, size, "%s/%d.log", AGENT_LOG_DIR, (int)pid);
}

/* Forks `sh -c cmd` in a process group of its own, stdin /dev/null, stdout
 * and stderr on out_fd (or its own log file when out_fd < 0). */
static int start(const char *cmd, int out_fd, pid_t *ret_pid)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char path[64];
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		setpgid(0, 0);
		if (out_fd < 0) {
			log_path(getpid(), path, sizeof(path));
			out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		}
		if (null < 0 || out_fd < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 ||
		    dup2(out_fd, 2) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	/* Also here, so that kill(-pid) works before the child got to run. */
	setpgid(pid, pid);
	*ret_pid = pid;
	return 0;
}

/* Reads the whole of a spawned command's log, or what fits. */
static int read_log(pid_t pid, struct buf *out)
{
	char path[64], chunk[65536];
	_cleanup_close_ int fd = -EBADF;
	ssize_t n;

	log_path(pid, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (buf_append(out, chunk, (size_t)n) < 0)
			return -ENOMEM;
	return n < 0 ? -errno : 0;
}

static int do_run(const char *cmd, int64_t deadline, struct buf *out, pid_t *ret_pid)
{
	_cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
	int fds[2], status, r;
	char chunk[65536];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	rfd = fds[0];
	wfd = fds[1];
	r = start(cmd, wfd, &pid);
	if (r < 0)
		return r;
	*ret_pid = pid;
	wfd = safe_close(wfd);
	/* Until end of file: a command that leaves something running on its
	 * output runs into its time limit (start those with spawn). */
	for (;;) {
		struct pollfd pfd = { .fd = rfd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0)
			return kill_group(pid);
		r = poll(&pfd, 1, (int)MIN(left, 1000));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		n = read(rfd, chunk, sizeof(chunk));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == 0)
			break;
		if (n > 0 && buf_append(out, chunk, (size_t)n) < 0)
			return -ENOMEM;
	}
	if (wait_until(pid, deadline, &status) < 0)
		return kill_group(pid);
	return rc_of(status);
}

static int do_spawn(const char *cmd, int64_t deadline, bool wait_line, struct buf *out,
		    pid_t *ret_pid)
{
	struct spawned *s;
	int status, r;
	pid_t pid;

	if (n_spawned == AGENT_SPAWNED_MAX) {
		buf_printf(out, "vm-agent: %d commands spawned already\n", AGENT_SPAWNED_MAX);
		return RC_BAD_REQUEST;
	}
	r = start(cmd, -1, &pid);
	if (r < 0)
		return r;
	*ret_pid = pid;
	s = &spawned[n_spawned++];
	*s = (struct spawned){ .pid = pid };
	if (!wait_line)
		return 0;
	for (;;) {
		out->len = 0;
		/* The child may not have created its log yet. */
		(void)read_log(pid, out);
		if (memchr(out->data ?: "", '\n', out->len))
			return 0;
		if (wait_until(pid, now_ms(), &status) == 0) {
			(void)read_log(pid, out);
			return rc_of(status);
		}
		if (now_ms() >= deadline)
			return kill_group(pid);
		usleep(20000);
	}
}

static int do_wait(const char *arg, int64_t deadline, struct buf *out, pid_t *ret_pid)
{
	char *end;
	long pid = strtol(arg, &end, 10);
	int status, rc;

	if (*arg == '\0' || *end || pid <= 0 || !spawned_find((pid_t)pid)) {
		buf_printf(out, "vm-agent: '%s' is no pid this agent spawned\n", arg);
		return RC_BAD_REQUEST;
	}
	*ret_pid = (pid_t)pid;
	rc = wait_until((pid_t)pid, deadline, &status) < 0 ? kill_group((pid_t)pid) : rc_of(status);
	(void)read_log((pid_t)pid, out);
	return rc;
}

static void kill_spawned(void)
{
	for (size_t i = 0; i < n_spawned; i++)
		if (!spawned[i].exited)
			kill(-spawned[i].pid, SIGKILL);
}

/* Reads one request line from a client within the request timeout. */
static int read_request(int fd, struct buf *req)
{
	int64_t deadline = now_ms() + AGENT_REQUEST_TIMEOUT_MS;
	char c;

	while (req->len < AGENT_REQUEST_MAX) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -ETIMEDOUT;
		n = read(fd, &c, 1);
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		if (c == '\n')
			return buf_append(req, "", 1);
		if (buf_append(req, &c, 1) < 0)
			return -ENOMEM;
	}
	return -E2BIG;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Serves one connection. Returns true when asked to quit. */
static bool serve(int fd)
{
	_cleanup_(buf_done) struct buf req = {}, out = {};
	char *verb, *sec_text, *arg = NULL, *end = NULL, head[96];
	bool quit = false;
	pid_t pid = 0;
	double sec = 0;
	int64_t deadline;
	int rc, r;

	r = read_request(fd, &req);
	if (r < 0) {
		fprintf(stderr, "vm-agent: bad request: %s\n", strerror(-r));
		return false;
	}
	verb = strtok_r(req.data, " ", &arg);
	sec_text = strtok_r(NULL, " ", &arg);
	if (sec_text)
		sec = strtod(sec_text, &end);
	deadline = now_ms() + (int64_t)(sec * 1000);
	fprintf(stderr, "vm-agent:%s%s%s%s%s%s\n", verb ? " " : "", verb ?: "", sec_text ? " " : "",
		sec_text ?: "", arg && *arg ? " " : "", arg ?: "");
	if (verb && strcmp(verb, "quit") == 0) {
		kill_spawned();
		quit = true;
		rc = 0;
	} else if (!verb || !sec_text || *end || sec < 0 || sec > 86400 || !arg || !*arg) {
		buf_printf(&out,
			   "vm-agent: a request is VERB SEC COMMAND (tests/peer/vm-agent.c)\n");
		rc = RC_BAD_REQUEST;
	} else if (strcmp(verb, "run") == 0) {
		rc = do_run(arg, deadline, &out, &pid);
	} else if (strcmp(verb, "spawn") == 0) {
		rc = do_spawn(arg, deadline, sec > 0, &out, &pid);
	} else if (strcmp(verb, "wait") == 0) {
		rc = do_wait(arg, deadline, &out, &pid);
	} else {
		buf_printf(&out, "vm-agent: unknown verb '%s' (run, spawn, wait, quit)\n", verb);
		rc = RC_BAD_REQUEST;
	}
	if (rc < RC_BAD_REQUEST) {
		out.len = 0;
		buf_printf(&out, "vm-agent: %s failed: %s\n", verb, strerror(-rc));
		rc = RC_BAD_REQUEST;
	}
	snprintf(head, sizeof(head), "vm-agent rc=%d pid=%d len=%zu\n", rc, (int)pid, out.len);
	if (write_all(fd, head, strlen(head)) < 0 || write_all(fd, out.data ?: "", out.len) < 0)
		fprintf(stderr, "vm-agent: the client went away before its answer\n");
	return quit;
}

static int server(void)
{
	struct sockaddr_in sa;
	_cleanup_close_ int lfd = -EBADF;
	int64_t end = now_ms() + (int64_t)(arg_lifetime * 1000);
	int one = 1;

	if (parse_inet(arg_listen, &sa) < 0) {
		fprintf(stderr, "vm-agent: --listen wants ADDR:PORT, not '%s'\n", arg_listen);
		return 1;
	}
	/* Orphans of what we run (a daemon a script started) become our
	 * children, so that reap() collects them. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 ||
	    (mkdir(AGENT_LOG_DIR, 0755) < 0 && errno != EEXIST)) {
		fprintf(stderr, "vm-agent: %m\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 8) < 0) {
		fprintf(stderr, "vm-agent: cannot listen on %s: %m\n", arg_listen);
		return 1;
	}
	fprintf(stderr, "vm-agent: listening on %s for %.0f s\n", arg_listen, arg_lifetime);
	for (;;) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		_cleanup_close_ int fd = -EBADF;

		reap();
		if (now_ms() >= end) {
			fprintf(stderr, "vm-agent: FAILED: no quit within %.0f s\n", arg_lifetime);
			kill_spawned();
			return 1;
		}
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0 && serve(fd))
			return 0;
	}
}

/* Connects to the agent, retrying while it is not up yet (host B boots
 * beside us) until arg_wait seconds have passed. */
static int client_connect(const struct sockaddr_in *sa)
{
	int64_t end = now_ms() + (int64_t)(arg_wait * 1000);

	for (;;) {
		_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -errno;
		if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
			return TAKE_FD(fd);
		if ((errno != ECONNREFUSED && errno != EHOSTUNREACH && errno != ENETUNREACH &&
		     errno != ETIMEDOUT) ||
		    now_ms() >= end)
			return -errno;
		usleep(200000);
	}
}

static int client(int argc, char **argv)
{
	_cleanup_(buf_done) struct buf req = {}, reply = {};
	_cleanup_close_ int fd = -EBADF;
	double sec = 0;
	struct sockaddr_in sa;
	char chunk[65536], *nl;
	int64_t deadline;
	int rc, pid;
	size_t len;

	if (argc < 1 || parse_inet(arg_connect, &sa) < 0) {
		fprintf(stderr,
			"vm-agent: usage: vm-agent --connect ADDR:PORT VERB [SEC] [COMMAND...]\n");
		return CLIENT_FAILED;
	}
	if (argc >= 2)
		sec = strtod(argv[1], NULL);
	for (int i = 0; i < argc; i++)
		if (buf_printf(&req, "%s%s", i ? " " : "", argv[i]) < 0)
			return CLIENT_FAILED;
	if (buf_append(&req, "\n", 1) < 0)
		return CLIENT_FAILED;
	fd = client_connect(&sa);
	if (fd < 0) {
		fprintf(stderr, "vm-agent: cannot reach the agent at %s: %s\n", arg_connect,
			strerror(-fd));
		return CLIENT_FAILED;
	}
	if (write_all(fd, req.data, req.len) < 0) {
		fprintf(stderr, "vm-agent: sending the request: %m\n");
		return CLIENT_FAILED;
	}
	/* The agent bounds the command by sec; the margin covers its kill
	 * (up to 10 s) and the answer. */
	deadline = now_ms() + (int64_t)(sec * 1000) + 15000;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
			fprintf(stderr, "vm-agent: no answer from %s in time\n", arg_connect);
			return CLIENT_FAILED;
		}
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			fprintf(stderr, "vm-agent: reading the answer: %m\n");
			return CLIENT_FAILED;
		}
		if (n == 0)
			break;
		if (buf_append(&reply, chunk, (size_t)n) < 0)
			return CLIENT_FAILED;
	}
	nl = reply.data ? memchr(reply.data, '\n', reply.len) : NULL;
	if (!nl || sscanf(reply.data, "vm-agent rc=%d pid=%d len=%zu\n", &rc, &pid, &len) != 3 ||
	    len != reply.len - (size_t)(nl + 1 - reply.data)) {
		fprintf(stderr, "vm-agent: a malformed answer from %s (%zu bytes)\n", arg_connect,
			reply.len);
		return CLIENT_FAILED;
	}
	if (write_all(STDOUT_FILENO, nl + 1, len) < 0)
		return CLIENT_FAILED;
	fprintf(stderr, "%.*s\n", (int)(nl - reply.data), reply.data);
	return rc < 0 ? CLIENT_FAILED : rc;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "lifetime", required_argument, NULL, 'L' },
		{ "connect", required_argument, NULL, 'c' },
		{ "wait", required_argument, NULL, 'w' },
		{},
	};
	int c;

	/* "+": stop at the verb, the command's own options are not ours. */
	while ((c = getopt_long(argc, argv, "+", options, NULL)) >= 0) {
		switch (c) {
		case 'l':
			arg_listen = optarg;
			break;
		case 'L':
			arg_lifetime = strtod(optarg, NULL);
			break;
		case 'c':
			arg_connect = optarg;
			break;
		case 'w':
			arg_wait = strtod(optarg, NULL);
			break;
		default:
			return CLIENT_FAILED;
		}
	}
	if (!arg_listen == !arg_connect) {
		fprintf(stderr, "vm-agent: --listen or --connect (see tests/peer/vm-agent.c)\n");
		return CLIENT_FAILED;
	}
	if (arg_listen)
		return server();
	return client(argc - optind, argv + optind);
}
