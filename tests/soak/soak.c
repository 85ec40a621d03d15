/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Soak test: N client processes call every method of a real daemon in a
 * random mix for a bounded time — registrations of all sizes, transfers on
 * the loop and on the pool, leases in every mode with and without timeouts,
 * sharing, tokens, introspection, invalid calls and abrupt disconnects —
 * while a monitor samples the daemon. Afterwards its fd count, memfd
 * mappings, regions and pinned bytes must be back at their start values and
 * its RSS near it (the allocator may keep some of what it freed).
 *
 *   soak --daemon PATH [--clients N] [--seconds S] [--rss-slack-mib M]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "rdmamem.h"

#define MAX_CLIENTS 64
#define MAX_REGIONS 8

struct sample {
	long rss_kib;
	int fds;
	int maps;
	uint64_t pinned;
	uint64_t regions;
	int clients;
};

/* What a client process reports back through its pipe. */
struct report {
	unsigned long calls;
	unsigned long named_errors; /* expected refusals: NoSuchRegion, LockTimeout, ... */
	unsigned long reconnects;
	char unexpected[256]; /* the first unexpected failure, if any */
};

static const char *daemon_path;
static char sock_path[108];
static pid_t daemon_pid;

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static void read_proc(pid_t pid, struct sample *s)
{
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	s->rss_kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &s->rss_kib) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	s->maps = 0;
	while (f && fgets(line, sizeof(line), f))
		s->maps += strstr(line, "/memfd:") != NULL;
	if (f)
		fclose(f);
	s->fds = count_fds(pid);
}

static uint64_t json_u64(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItem(o, name);

	if (cJSON_IsNumber(i))
		return (uint64_t)i->valuedouble;
	return cJSON_IsString(i) ? strtoull(i->valuestring, NULL, 10) : 0;
}

static int sample(struct rdmamem_client *mon, struct sample *s)
{
	char *reply = NULL;
	cJSON *root;

	if (rdmamem_call(mon, "io.rdmamemd.GetStatus", NULL, NULL, 0, &reply, NULL, NULL) < 0)
		return -1;
	root = cJSON_Parse(reply);
	free(reply);
	s->pinned = json_u64(root, "pinned_bytes");
	s->regions = json_u64(root, "regions");
	s->clients = (int)json_u64(root, "clients");
	cJSON_Delete(root);
	read_proc(daemon_pid, s);
	return 0;
}

/* ---- one client ---- */

struct client {
	struct rdmamem_client *c;
	struct report *rep;
	unsigned seed;
	uint64_t regions[MAX_REGIONS];
	uint64_t sizes[MAX_REGIONS];
	size_t n_regions;
	uint64_t leases[4], lease_regions[4];
	size_t n_leases;
	char token[RDMAMEM_TOKEN_LEN + 1];
	char *buf;
};

#define BUF_SIZE (4U << 20)

static unsigned rnd(struct client *cl, unsigned n)
{
	return n ? (unsigned)(rand_r(&cl->seed) % n) : 0;
}

/* Errors a client can cause and expect; anything else is a failure. */
static bool expected_error(const char *name)
{
	static const char *const ok[] = {
		"io.rdmamemd.NoSuchRegion",
		"io.rdmamemd.NoSuchLease",
		"io.rdmamemd.LockTimeout",
		"io.rdmamemd.LeaseConflict",
		"io.rdmamemd.PermissionDenied",
		"io.rdmamemd.OutOfRange",
		"io.rdmamemd.QuotaExceeded",
		"io.rdmamemd.NoSuchDevice",
		"io.rdmamemd.InvalidToken",
		"io.rdmamemd.CudaUnavailable",
		"io.rdmamemd.TransferTooLarge",
		"io.rdmamemd.InvalidMessage",
		"org.varlink.service.InvalidParameter",
		"org.varlink.service.MethodNotFound",
	};

	for (size_t i = 0; name && i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(name, ok[i]) == 0)
			return true;
	return false;
}

static void check(struct client *cl, const char *what, int r)
{
	const char *name = rdmamem_client_error_name(cl->c);

	cl->rep->calls++;
	if (r >= 0)
		return;
	if (expected_error(name)) {
		cl->rep->named_errors++;
		return;
	}
	if (!cl->rep->unexpected[0])
		snprintf(cl->rep->unexpected, sizeof(cl->rep->unexpected), "%s: %s (%s: %s)", what,
			 strerror(-r), name ?: "no error name",
			 rdmamem_client_error_message(cl->c) ?: "");
}

static void call(struct client *cl, const char *method, const char *params)
{
	check(cl, method, rdmamem_call(cl->c, method, params, NULL, 0, NULL, NULL, NULL));
}

static uint64_t some_region(struct client *cl, uint64_t *size)
{
	size_t i;

	/* Now and then an id that is not ours, or none at all. */
	if (!cl->n_regions || rnd(cl, 20) == 0) {
		*size = 4096;
		return 1 + rnd(cl, 2000);
	}
	i = rnd(cl, cl->n_regions);
	*size = cl->sizes[i];
	return cl->regions[i];
}

static void op_register(struct client *cl)
{
	static const uint64_t sizes[] = { 4096, 65536, 1 << 20, 5 << 20, 40 << 20 };
	uint64_t size = sizes[rnd(cl, rnd(cl, 10) == 0 ? 5 : 4)], id;
	int fd, r;

	if (cl->n_regions == MAX_REGIONS) {
		size_t i = rnd(cl, cl->n_regions);

		check(cl, "Unregister", rdmamem_unregister(cl->c, cl->regions[i]));
		cl->regions[i] = cl->regions[--cl->n_regions];
		cl->sizes[i] = cl->sizes[cl->n_regions];
		return;
	}
	if (rdmamem_memfd_create("soak", size, &fd, NULL) < 0) {
		snprintf(cl->rep->unexpected, sizeof(cl->rep->unexpected), "memfd_create failed");
		return;
	}
	r = rdmamem_register(cl->c, fd, 0, 0, &id);
	close(fd);
	check(cl, "Register", r);
	if (r == 0) {
		cl->regions[cl->n_regions] = id;
		cl->sizes[cl->n_regions++] = size;
	}
}

/*
 * Transfers wait at most TRANSFER_WAIT_MS for locks: clients hold leases
 * across other calls, and unbounded waits between them would deadlock the
 * clients (never the daemon), as any lock cycle does.
 */
#define TRANSFER_WAIT_MS 100

static char *base64_of(const char *buf, size_t len)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((len + 2) / 3 * 4 + 1), *p = out;

	for (size_t i = 0; out && i < len; i += 3) {
		uint32_t v = (uint8_t)buf[i] << 16;

		v |= i + 1 < len ? (uint8_t)buf[i + 1] << 8 : 0;
		v |= i + 2 < len ? (uint8_t)buf[i + 2] : 0;
		*p++ = alphabet[v >> 18];
		*p++ = alphabet[(v >> 12) & 63];
		*p++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		*p++ = i + 2 < len ? alphabet[v & 63] : '=';
	}
	if (out)
		*p = '\0';
	return out;
}

static void op_transfer(struct client *cl)
{
	uint64_t size, id = some_region(cl, &size), len, off;
	char head[256], *params;

	/* Small ones run on the loop, large ones (up to 4 MiB, the inline
	 * read limit) on the pool. */
	len = rnd(cl, 4) ? 1 + rnd(cl, 60000) : 65537 + rnd(cl, (4U << 20) - 65537);
	if (len > size)
		len = size;
	off = rnd(cl, (unsigned)(size - len + 1));
	switch (rnd(cl, 3)) {
	case 0:
		snprintf(head, sizeof(head),
			 "{\"region\":\"%llu\",\"offset\":\"%llu\",\"length\":\"%llu\","
			 "\"timeout_ms\":%d}",
			 (unsigned long long)id, (unsigned long long)off, (unsigned long long)len,
			 TRANSFER_WAIT_MS);
		call(cl, "io.rdmamemd.Read", head);
		break;
	case 1: {
		char *data = base64_of(cl->buf, len);

		if (!data ||
		    asprintf(&params,
			     "{\"region\":\"%llu\",\"offset\":\"%llu\",\"data\":\"%s\","
			     "\"mode\":\"%s\",\"timeout_ms\":%d}",
			     (unsigned long long)id, (unsigned long long)off, data,
			     rnd(cl, 2) ? "exclusive" : "disjoint", TRANSFER_WAIT_MS) < 0) {
			free(data);
			snprintf(cl->rep->unexpected, sizeof(cl->rep->unexpected), "out of memory");
			return;
		}
		free(data);
		call(cl, "io.rdmamemd.Write", params);
		free(params);
		break;
	}
	default: {
		uint64_t size2, to = some_region(cl, &size2), from_off = off;

		if (len > size2)
			len = size2;
		/* Whole 40 MiB regions: split over pool threads. */
		if (size >= (40U << 20) && size2 >= (40U << 20) && id != to)
			from_off = 0, len = size;
		snprintf(head, sizeof(head),
			 "{\"from\":{\"region\":\"%llu\",\"offset\":\"%llu\"},\"to\":{\"region\":"
			 "\"%llu\"},\"length\":\"%llu\",\"timeout_ms\":%d}",
			 (unsigned long long)id, (unsigned long long)from_off,
			 (unsigned long long)to, (unsigned long long)len, TRANSFER_WAIT_MS);
		call(cl, "io.rdmamemd.Copy", head);
	}
	}
}

static void op_lock(struct client *cl)
{
	static const enum rdmamem_lock_mode modes[] = { RDMAMEM_LOCK_SHARED, RDMAMEM_LOCK_DISJOINT,
							RDMAMEM_LOCK_EXCLUSIVE };
	uint64_t size, id, lease;
	int r;

	if (cl->n_leases && rnd(cl, 2)) {
		size_t i = rnd(cl, cl->n_leases);

		/* Work under it once, then give it back. */
		check(cl, "Read",
		      rdmamem_read(cl->c, cl->lease_regions[i], 0, cl->buf, 1, cl->leases[i]));
		/* (Under a lease nothing waits.) */
		check(cl, "Unlock", rdmamem_unlock(cl->c, cl->leases[i]));
		cl->n_leases--;
		cl->leases[i] = cl->leases[cl->n_leases];
		cl->lease_regions[i] = cl->lease_regions[cl->n_leases];
		return;
	}
	if (cl->n_leases == 4)
		return;
	id = some_region(cl, &size);
	/* Short waits only: other clients hold leases too. */
	r = rdmamem_lock(cl->c, id, modes[rnd(cl, 3)], (int)rnd(cl, 50), &lease);
	check(cl, "Lock", r);
	if (r == 0) {
		cl->lease_regions[cl->n_leases] = id;
		cl->leases[cl->n_leases++] = lease;
	}
}

static void op_misc(struct client *cl)
{
	char params[256];
	uint64_t size, id = some_region(cl, &size);

	switch (rnd(cl, 14)) {
	case 0:
		check(cl, "Ping", rdmamem_ping(cl->c));
		break;
	case 1:
		call(cl, "io.rdmamemd.GetStatus", NULL);
		break;
	case 2:
		call(cl, "io.rdmamemd.ListRegions", NULL);
		break;
	case 3:
		snprintf(params, sizeof(params), "{\"region\":\"%llu\"}", (unsigned long long)id);
		call(cl, "io.rdmamemd.GetRegion", params);
		break;
	case 4:
		check(cl, "Share",
		      rdmamem_share(cl->c, id, 1000 + rnd(cl, 3),
				    rnd(cl, 2) ? RDMAMEM_SHARE_READONLY : 0));
		break;
	case 5:
		call(cl, "org.varlink.service.GetInfo", NULL);
		break;
	case 6:
		call(cl, "org.varlink.service.GetInterfaceDescription",
		     "{\"interface\":\"io.rdmamemd\"}");
		break;
	case 7:
		call(cl, "io.rdmamemd.ListDevices", NULL);
		break;
	case 8:
		if (cl->token[0]) {
			snprintf(params, sizeof(params), "{\"token\":\"%s\"}", cl->token);
			call(cl, "io.rdmamemd.RevokeAccessToken", params);
			cl->token[0] = '\0';
		} else {
			check(cl, "CreateAccessToken",
			      rdmamem_access_token_create(cl->c, cl->token));
		}
		break;
	case 9:
		snprintf(
			params, sizeof(params),
			"{\"device\":\"mlx5_0\",\"token\":\"%s\",\"qpn\":17,\"psn\":1,\"gid\":\"fe80::1\"}",
			cl->token[0] ? cl->token : "00000000000000000000000000000000");
		call(cl, "io.rdmamemd.ConnectQueuePair", params);
		break;
	case 10:
		call(cl, "io.rdmamemd.ListConnections", NULL);
		break;
	case 11:
		snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"devices\":\"all\"}",
			 (unsigned long long)id);
		call(cl, "io.rdmamemd.RegisterOn", params);
		break;
	case 12:
		snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"device\":\"mlx5_0\"}",
			 (unsigned long long)id);
		call(cl, "io.rdmamemd.RetryRegistration", params);
		break;
	default:
		/* A mistake: the daemon names it and goes on. */
		call(cl, "io.rdmamemd.Read", "{\"region\":true}");
		break;
	}
}

static int client_main(int index, int seconds, int out)
{
	struct report rep = {};
	struct client cl = { .rep = &rep, .seed = 0x5eed + index };
	double end = now_sec() + seconds;

	cl.buf = calloc(1, BUF_SIZE);
	if (!cl.buf || rdmamem_client_connect(sock_path, &cl.c) < 0)
		return 2;
	while (now_sec() < end && !rep.unexpected[0]) {
		unsigned what = rnd(&cl, 100);

		if (what < 15)
			op_register(&cl);
		else if (what < 55)
			op_transfer(&cl);
		else if (what < 70)
			op_lock(&cl);
		else if (what < 99)
			op_misc(&cl);
		else {
			/* Leave abruptly with everything held; come back. */
			rdmamem_client_close(cl.c);
			cl.n_regions = cl.n_leases = 0;
			cl.token[0] = '\0';
			rep.reconnects++;
			if (rdmamem_client_connect(sock_path, &cl.c) < 0)
				snprintf(rep.unexpected, sizeof(rep.unexpected),
					 "reconnect failed");
		}
	}
	rdmamem_client_close(cl.c);
	free(cl.buf);
	return write(out, &rep, sizeof(rep)) == sizeof(rep) ? 0 : 3;
}

/* ---- the daemon ---- */

static int start_daemon(char *dir)
{
	char notify[160];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int nfd;

	snprintf(sock_path, sizeof(sock_path), "%s/rdmamemd.sock", dir);
	snprintf(notify, sizeof(notify), "%s/notify", dir);
	nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	strcpy(sa.sun_path, notify);
	if (nfd < 0 || bind(nfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;

	daemon_pid = fork();
	if (daemon_pid < 0)
		return -errno;
	if (daemon_pid == 0) {
		setenv("NOTIFY_SOCKET", notify, 1);
		/* glibc raises its mmap threshold after the first large free and
		 * then keeps freed buffers in per-thread arenas: the pool
		 * threads' base64 buffers would look like growth. A fixed
		 * threshold makes RSS show what the daemon holds. */
		setenv("GLIBC_TUNABLES",
		       "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072", 0);
		execl(daemon_path, daemon_path, "--socket", sock_path, "--log-level", "warning",
		      "--socket-mode", "0666", (char *)NULL);
		_exit(127);
	}
	for (double end = now_sec() + 20; now_sec() < end;) {
		struct pollfd p = { .fd = nfd, .events = POLLIN };
		char buf[512];
		ssize_t n;

		if (poll(&p, 1, 500) <= 0)
			continue;
		n = recv(nfd, buf, sizeof(buf) - 1, 0);
		if (n > 0 && (buf[n] = '\0', strstr(buf, "READY=1"))) {
			close(nfd);
			unlink(notify);
			return 0;
		}
	}
	close(nfd);
	return -ETIMEDOUT;
}

static void print_row(const char *what, double a, double b, double c, const char *unit)
{
	printf("  %-12s %12.1f %12.1f %12.1f %s\n", what, a, b, c, unit);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "daemon", required_argument, NULL, 'd' },
		{ "clients", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "rss-slack-mib", required_argument, NULL, 'r' },
		{},
	};
	int n_clients = 8, seconds = 60, slack_mib = 8, c, failed = 0, status;
	struct sample start = {}, peak = {}, end = {}, s;
	struct rdmamem_client *mon = NULL;
	unsigned long calls = 0, named = 0, reconnects = 0;
	char dir[] = "/tmp/rdmamemd-soak.XXXXXX";
	pid_t pids[MAX_CLIENTS];
	int pipes[MAX_CLIENTS];
	double t0, warm;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
		if (c == 'd')
			daemon_path = optarg;
		else if (c == 'n')
			n_clients = atoi(optarg);
		else if (c == 's')
			seconds = atoi(optarg);
		else if (c == 'r')
			slack_mib = atoi(optarg);
		else
			return 2;
	}
	if (!daemon_path || n_clients < 1 || n_clients > MAX_CLIENTS || seconds < 1) {
		fprintf(stderr, "usage: soak --daemon PATH [--clients 1-64] [--seconds S] "
				"[--rss-slack-mib M]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0 || start_daemon(dir) < 0 ||
	    rdmamem_client_connect(sock_path, &mon) < 0) {
		fprintf(stderr, "soak: cannot start %s\n", daemon_path);
		return 1;
	}

	/* A short warm-up with every client, so that the daemon's pool
	 * threads and allocator arenas exist before the start figures. */
	warm = seconds / 10.0 < 2 ? 2 : seconds / 10.0;
	for (int phase = 0; phase < 2; phase++) {
		int secs = phase == 0 ? (int)warm : seconds;

		for (int i = 0; i < n_clients; i++) {
			int p[2];

			if (pipe2(p, O_CLOEXEC) < 0)
				return 1;
			pids[i] = fork();
			if (pids[i] == 0)
				_exit(client_main(i + phase * MAX_CLIENTS, secs, p[1]));
			close(p[1]);
			pipes[i] = p[0];
		}
		if (phase == 1) {
			peak = start;
			t0 = now_sec();
			while (now_sec() < t0 + secs + 1) {
				if (sample(mon, &s) == 0) {
					peak.rss_kib = s.rss_kib > peak.rss_kib ? s.rss_kib :
										  peak.rss_kib;
					peak.fds = s.fds > peak.fds ? s.fds : peak.fds;
					peak.maps = s.maps > peak.maps ? s.maps : peak.maps;
					peak.pinned = s.pinned > peak.pinned ? s.pinned :
									       peak.pinned;
					peak.regions = s.regions > peak.regions ? s.regions :
										  peak.regions;
				}
				usleep(200000);
			}
		}
		for (int i = 0; i < n_clients; i++) {
			struct report rep = {};

			if (read(pipes[i], &rep, sizeof(rep)) != sizeof(rep))
				snprintf(rep.unexpected, sizeof(rep.unexpected), "no report");
			close(pipes[i]);
			waitpid(pids[i], &status, 0);
			if (rep.unexpected[0] || !WIFEXITED(status) || WEXITSTATUS(status)) {
				fprintf(stderr, "soak: client %d: %s (status 0x%x)\n", i,
					rep.unexpected, status);
				failed = 1;
			}
			if (phase == 1) {
				calls += rep.calls;
				named += rep.named_errors;
				reconnects += rep.reconnects;
			}
		}
		/* Quiet again: only the monitor left, regions released, fds
		 * closed on the daemon's next turns. */
		for (int i = 0; i < 1000; i++) {
			if (sample(mon, &s) == 0 && s.clients == 1 && s.regions == 0) {
				struct sample again;

				usleep(100000);
				if (sample(mon, &again) == 0 && again.fds == s.fds)
					break;
			}
			usleep(20000);
		}
		if (phase == 0 && sample(mon, &start) < 0)
			failed = 1;
	}
	if (sample(mon, &end) < 0) {
		fprintf(stderr, "soak: the daemon stopped answering\n");
		return 1;
	}
	rdmamem_client_close(mon);

	printf("soak: %d clients for %d s (after %.0f s of warm-up): %lu calls (%.0f/s), "
	       "%lu refused as expected, %lu abrupt reconnects\n",
	       n_clients, seconds, warm, calls, calls / (double)seconds, named, reconnects);
	printf("  %-12s %12s %12s %12s\n", "", "start", "peak", "end");
	print_row("rss", start.rss_kib / 1024.0, peak.rss_kib / 1024.0, end.rss_kib / 1024.0,
		  "MiB");
	print_row("fds", start.fds, peak.fds, end.fds, "");
	print_row("memfd maps", start.maps, peak.maps, end.maps, "");
	print_row("regions", start.regions, peak.regions, end.regions, "");
	print_row("pinned", start.pinned / 1048576.0, peak.pinned / 1048576.0,
		  end.pinned / 1048576.0, "MiB");

	if (end.fds != start.fds || end.maps != start.maps || end.regions != start.regions ||
	    end.pinned != start.pinned) {
		fprintf(stderr, "soak: the daemon did not return to its start figures\n");
		failed = 1;
	}
	if (end.rss_kib > start.rss_kib + slack_mib * 1024L) {
		fprintf(stderr,
			"soak: RSS grew by %ld KiB, more than the %d MiB the allocator may keep\n",
			end.rss_kib - start.rss_kib, slack_mib);
		failed = 1;
	}
	if (calls == 0)
		failed = 1;

	kill(daemon_pid, SIGTERM);
	waitpid(daemon_pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "soak: the daemon exited with status 0x%x\n", status);
		failed = 1;
	}
	rmdir(dir);
	printf("soak: %s\n", failed ? "FAILED" : "passed");
	return failed;
}
