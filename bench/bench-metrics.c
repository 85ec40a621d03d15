/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a scrape costs the daemon's loop, with 10,000 regions: the loop
 * thread's CPU time (its schedstat, in nanoseconds) per GetMetrics call and
 * per HTTP scrape, beside the anchors measured in the same run on the same
 * daemon: a Ping (the cheapest call) and a GetStats (the counters as
 * JSON). Each is also measured before the regions exist: the text's cost
 * must not grow with them. The bound: at most 1 ms of loop time.
 *
 * A call's loop time is everything the loop does for it: read, parse,
 * make the text, print the reply, send. One client, calls in a row.
 *
 * The daemon keeps its regions across restarts here (FDSTORE set, a notify
 * socket of the bench's that takes and closes what the daemon stores), so
 * the run also measures what the other O(regions) job of the loop costs:
 * writing the regions' state after a change (a Share), beside GetMetrics
 * with the same 10,000 regions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"

#define N_REGIONS 10000U
#define REGION_SIZE 4096U
#define LOOP_BOUND_NS 1000000.0

static pid_t daemon_pid;
static int http_port;

/* The daemon's loop thread (its main thread) on CPU so far, in ns. */
static long long loop_cpu_ns(void)
{
	char path[64];
	long long ns = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)daemon_pid,
		 (int)daemon_pid);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%lld", &ns) != 1) {
		fprintf(stderr, "bench-metrics: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return ns;
}

static char reply_buf[1 << 20];

/* One Varlink call on fd, its reply read up to the NUL. */
static int varlink_call(int fd, const char *call)
{
	size_t len = 0;

	if (write(fd, call, strlen(call) + 1) != (ssize_t)strlen(call) + 1)
		return -EIO;
	for (;;) {
		ssize_t r = read(fd, reply_buf + len, sizeof(reply_buf) - len);

		if (r <= 0)
			return -EIO;
		len += (size_t)r;
		if (reply_buf[len - 1] == '\0')
			return strstr(reply_buf, "\"error\"") ? -EPROTO : 0;
		if (len == sizeof(reply_buf))
			return -E2BIG;
	}
}

/* One HTTP/1.0 GET /metrics on a fresh connection, read to its close. */
static int http_scrape(void)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)http_port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
	size_t len = 0;
	ssize_t r;

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, req, sizeof(req) - 1) != sizeof(req) - 1) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	while ((r = read(fd, reply_buf + len, sizeof(reply_buf) - 1 - len)) > 0)
		len += (size_t)r;
	reply_buf[len] = '\0';
	close(fd);
	ok = strncmp(reply_buf, "HTTP/1.1 200", 12) == 0 ||
	     strncmp(reply_buf, "HTTP/1.0 200", 12) == 0;
	return ok ? 0 : -EPROTO;
}

struct row {
	double loop_us, wall_us;
};

/* n calls in a row: the loop's CPU and the wall time, per call. */
static struct row measure(int fd, const char *call, unsigned n)
{
	long long cpu0 = loop_cpu_ns();
	uint64_t t0 = bench_now_ns();

	for (unsigned i = 0; i < n; i++)
		if ((call ? varlink_call(fd, call) : http_scrape()) < 0) {
			fprintf(stderr, "bench-metrics: %s failed: %.200s\n", call ?: "scrape",
				reply_buf);
			exit(1);
		}
	return (struct row){ .loop_us = (double)(loop_cpu_ns() - cpu0) / n / 1000.0,
			     .wall_us = (double)(bench_now_ns() - t0) / n / 1000.0 };
}

static const char ping[] = BENCH_PING_CALL;
static const char stats[] = "{\"method\":\"io.rdmamemd.GetStats\"}";
static const char metrics[] = "{\"method\":\"io.rdmamemd.GetMetrics\"}";

static void print_row(const char *what, struct row r, struct row anchor)
{
	printf("  %-34s %9.1f us %9.1f us %8.1fx\n", what, r.loop_us, r.wall_us,
	       r.loop_us / anchor.loop_us);
}

/* The three calls and a scrape, with regions registered. */
static double measure_all(int fd, unsigned regions, unsigned n)
{
	struct row p, s, m, h;
	char title[64];

	/* Warm: the first of each allocates what it keeps. */
	measure(fd, ping, 100);
	measure(fd, stats, 100);
	measure(fd, metrics, 100);
	measure(fd, NULL, 20);
	p = measure(fd, ping, n);
	s = measure(fd, stats, n);
	m = measure(fd, metrics, n);
	h = measure(fd, NULL, n / 4);
	snprintf(title, sizeof(title), "%u regions", regions);
	printf("%s (%u calls each, %u scrapes):\n", title, n, n / 4);
	printf("  %-34s %12s %12s %9s\n", "", "loop CPU", "round trip", "vs Ping");
	print_row("anchor: Ping", p, p);
	print_row("anchor: GetStats (JSON)", s, p);
	print_row("GetMetrics (OpenMetrics)", m, p);
	print_row("HTTP GET /metrics (new connection)", h, p);
	return m.loop_us > h.loop_us ? m.loop_us : h.loop_us;
}

/* systemd's part: a notify socket whose messages (and the fds stored with
 * them) a child reads and drops. Returns the child. */
static pid_t notify_sink(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bench-metrics: notify socket");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		for (;;) {
			char buf[4096], cbuf[CMSG_SPACE(16 * sizeof(int))];
			struct iovec iov = { buf, sizeof(buf) };
			struct msghdr m = { .msg_iov = &iov,
					    .msg_iovlen = 1,
					    .msg_control = cbuf,
					    .msg_controllen = sizeof(cbuf) };
			struct cmsghdr *c;

			if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) < 0)
				_exit(0);
			for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
					for (size_t i = 0;
					     i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
						close(((int *)CMSG_DATA(c))[i]);
		}
	}
	close(s);
	return pid;
}

/* Loop time of a Share of region, then of the state write it causes (the
 * daemon writes 100 ms after a change, longer when a write took long). */
static double state_write_us(int fd, uint64_t region, unsigned n)
{
	char call[160];
	long long cpu0, total = 0;

	for (unsigned i = 0; i < n; i++) {
		snprintf(call, sizeof(call),
			 "{\"method\":\"io.rdmamemd.%s\",\"parameters\":{\"region\":\"%llu\","
			 "\"uid\":4242}}",
			 i % 2 ? "Unshare" : "Share", (unsigned long long)region);
		cpu0 = loop_cpu_ns();
		if (varlink_call(fd, call) < 0) {
			fprintf(stderr, "bench-metrics: %s failed: %.200s\n", call, reply_buf);
			exit(1);
		}
		usleep(400000);
		total += loop_cpu_ns() - cpu0;
	}
	return (double)total / n / 1000.0;
}

int main(int argc, char **argv)
{
	struct bench_args args = { .seconds = 2.0 };
	char path[128], listen_arg[64];
	const char *extra[] = { "--metrics-listen", listen_arg, "--bandwidth-probe-size", "0",
				NULL };
	struct rdmamem_client *c;
	double before, after, idle, state;
	uint64_t first = 0;
	pid_t sink;
	int fd, mfd, r;
	unsigned n;

	if (bench_parse_args(argc, argv, &args))
		return 2;
	/* About 2000 calls a second fit; seconds scales them. */
	n = args.seconds >= 1 ? (unsigned)(1000 * args.seconds) : 1000;
	{
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sa);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    getsockname(s, (struct sockaddr *)&sa, &len) < 0) {
			perror("bench-metrics: a free port");
			return 1;
		}
		http_port = ntohs(sa.sin_port);
		close(s);
	}
	snprintf(listen_arg, sizeof(listen_arg), "127.0.0.1:%d", http_port);
	snprintf(path, sizeof(path), "%s/notify", bench_dir());
	sink = notify_sink(path);
	setenv("NOTIFY_SOCKET", path, 1);
	setenv("FDSTORE", "65536", 1);
	snprintf(path, sizeof(path), "%s/rdmamemd.sock", bench_dir());
	daemon_pid = bench_daemon_start(args.daemon, path, -1, extra);
	fd = bench_connect(path);
	r = rdmamem_client_connect(path, &c);
	if (fd < 0 || r < 0) {
		fprintf(stderr, "bench-metrics: cannot connect to %s\n", path);
		return 1;
	}

	printf("== Metrics: the daemon loop's CPU per call (its main thread's schedstat), "
	       "beside Ping and GetStats on the same daemon, same run; %ld CPUs online\n\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	before = measure_all(fd, 0, n);

	r = rdmamem_memfd_create("bench-metrics", (size_t)N_REGIONS * REGION_SIZE, &mfd, NULL);
	for (unsigned i = 0; r == 0 && i < N_REGIONS; i++) {
		uint64_t id;

		r = rdmamem_register(c, mfd, (uint64_t)i * REGION_SIZE, REGION_SIZE, &id);
		first = first ?: id;
	}
	if (r < 0) {
		fprintf(stderr, "bench-metrics: registering %u regions: %s\n", N_REGIONS,
			strerror(-r));
		return 1;
	}
	printf("\n");
	after = measure_all(fd, N_REGIONS, n);

	printf("\nGetMetrics or a scrape with %u regions: %.1f us of loop time at most "
	       "(%.1f us with none); bound 1000 us: %s\n",
	       N_REGIONS, after, before, after * 1000.0 <= LOOP_BOUND_NS ? "met" : "NOT met");

	/* The state write: the loop over 400 ms after a Share, less the same
	 * wait after a Ping (timers, nothing else). */
	{
		long long cpu0 = loop_cpu_ns();

		for (unsigned i = 0; i < 4; i++) {
			varlink_call(fd, ping);
			usleep(400000);
		}
		idle = (double)(loop_cpu_ns() - cpu0) / 4 / 1000.0;
	}
	state = state_write_us(fd, first, 10);
	printf("\nThe regions' state for the fd store, %u regions kept, written after a "
	       "Share: %.1f us of loop time (a Ping and the same wait: %.1f us); GetMetrics "
	       "with them: %.1f us, so %.1fx GetMetrics\n",
	       N_REGIONS, state, idle, after, (state - idle) / after);
	close(mfd);
	close(fd);
	rdmamem_client_close(c);
	bench_stop(daemon_pid);
	kill(sink, SIGTERM);
	waitpid(sink, NULL, 0);
	bench_cleanup();
	return after * 1000.0 <= LOOP_BOUND_NS ? 0 : 1;
}
