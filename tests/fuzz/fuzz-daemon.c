/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The whole daemon, the way systemd's fuzz-varlink.c drives sd-varlink: a
 * real daemon (its own loop, listening socket, tick, signals) over fake
 * verbs and a fake CUDA driver, two clients on socketpairs handed to
 * conn_new() as if accepted, bytes written in small chunks so partial reads
 * happen (one turn of the loop after each, which reads it), and the loop run
 * until idle after each record.
 *
 * Input: [flags] then records, each [what][n_fds] and a message up to and
 * including its NUL (the last may stop short of one).
 *   flags bit 0    client A is uid 1000 and B root (else the other way)
 *   flags bit 1    A shuts its sending side down after the last record
 *   flags bit 2    the daemon is stopped with clients still connected
 *   flags bit 3    every RDMA registration fails
 *   flags bits 4-7 chunk size (table below; piece_size() says which
 *                  parts of a long record go in chunks)
 *   what bits 0-3  the kind of fd to attach (table below)
 *   what bit 4     sent by client B instead of A
 *   n_fds          how many fds ride on the record's first byte (mod 32)
 *
 * After each input: every fd the harness gave away is closed again, and
 * once the clients left, nothing they registered, locked or pinned is left
 * (regions, bytes, leases, MRs, GPU imports); the daemon then shuts down
 * cleanly with an empty loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/ipc/conn.h"
#include "daemon/daemon.h"
#include "daemon/core/log.h"
#include "daemon/rpc/rpc.h"
#include "daemon/ipc/server.h"
#include "daemon/rdma/verbs.h"
#include "fuzz.h"
#include "util/macro.h"
#include "util/sockio.h"
#include "tests/fakes/fake.h"

#define FUZZ_UID 1000
#define MEMFD_SMALL (64U * 1024U)
#define MEMFD_LARGE (1024U * 1024U)

static const size_t chunk_sizes[16] = {
	143, 1, 2, 3, 7, 16, 64, 100, 143, 256, 1000, 4096, 8192, 65536, 143, 143,
};

enum fd_kind {
	FD_MEMFD,          /* sealed shrink|grow|seal, 64 KiB */
	FD_MEMFD_LARGE,    /* the same, 1 MiB: transfers on the pool */
	FD_MEMFD_GROWABLE, /* shrink only; grown after it was sent */
	FD_MEMFD_UNSEALED,
	FD_PIPE,
	FD_SOCKET,
	FD_DEV_ZERO,
	FD_DIRECTORY,
	FD_MEMFD_WRITE_SEALED, /* a read-only region */
	FD_MEMFD_RDONLY,       /* opened O_RDONLY */
	FD_MEMFD_EMPTY,
};

static char socket_dir[64];
/* RDMAMEM_FUZZ_VERBOSE=1: print the replies, to see what a seed reaches. */
static bool verbose;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	fuzz_check(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own fd */
}

static int memfd_sealed(size_t size, unsigned seals)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	fuzz_check(fd >= 0);
	fuzz_check(ftruncate(fd, size) == 0);
	if (seals)
		fuzz_check(fcntl(fd, F_ADD_SEALS, seals) == 0);
	return fd;
}

/* One fd of the kind asked for; *grow set when it is grown after sending. */
static int make_fd(unsigned kind, bool *grow)
{
	int fd, p[2];

	switch (kind) {
	case FD_MEMFD_LARGE:
		return memfd_sealed(MEMFD_LARGE, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	case FD_MEMFD_GROWABLE:
		*grow = true;
		return memfd_sealed(MEMFD_SMALL, F_SEAL_SHRINK);
	case FD_MEMFD_UNSEALED:
		return memfd_sealed(MEMFD_SMALL, 0);
	case FD_PIPE:
		fuzz_check(pipe2(p, O_CLOEXEC) == 0);
		close(p[1]);
		return p[0];
	case FD_SOCKET:
		fuzz_check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) == 0);
		close(p[1]);
		return p[0];
	case FD_DEV_ZERO:
		fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
		fuzz_check(fd >= 0);
		return fd;
	case FD_DIRECTORY:
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fuzz_check(fd >= 0);
		return fd;
	case FD_MEMFD_WRITE_SEALED:
		return memfd_sealed(MEMFD_SMALL, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
	case FD_MEMFD_RDONLY: {
		char path[64];
		int rw = memfd_sealed(MEMFD_SMALL, F_SEAL_SHRINK | F_SEAL_GROW);

		snprintf(path, sizeof(path), "/proc/self/fd/%d", rw);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		close(rw);
		fuzz_check(fd >= 0);
		return fd;
	}
	case FD_MEMFD_EMPTY:
		return memfd_sealed(0, F_SEAL_SHRINK | F_SEAL_GROW);
	default:
		return memfd_sealed(MEMFD_SMALL, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	}
}

/* Reads and discards what arrived; false once the daemon hung up. */
static bool drain_client(int fd, bool *progress)
{
	for (;;) {
		int fds[SOCKIO_FDS_MAX];
		char buf[65536];
		size_t n_fds;
		ssize_t n = sockio_recv(fd, buf, sizeof(buf), fds, &n_fds, MSG_DONTWAIT);

		close_many(fds, n_fds);
		if (n > 0) {
			if (verbose) {
				for (ssize_t i = 0; i < n; i++)
					fputc(buf[i] ? buf[i] : '\n', stderr);
			}
			*progress = true;
			continue;
		}
		return n == -EAGAIN || n == -EINTR;
	}
}

/*
 * Whether the loop has nothing to do right now: no fd of its own ready (the
 * epoll fd is readable while any is), no callback due without waiting (idle
 * handles, pending writes, closing handles: a timeout of 0), and no client
 * with a reply to read, which *ready says. One poll() instead of a round of
 * reads that find nothing.
 */
static bool loop_quiet(struct daemon *d, const int *clients, size_t n, bool *ready)
{
	struct pollfd p[3] = { { .fd = uv_backend_fd(d->core.loop), .events = POLLIN } };
	int r;

	fuzz_check(n < ELEMENTSOF(p));
	for (size_t i = 0; i < n; i++)
		p[i + 1] = (struct pollfd){ .fd = clients[i], .events = POLLIN };
	/* poll() is never restarted after a signal handler, and libFuzzer's
	 * -timeout is a SIGALRM every few seconds: a broken invariant here
	 * once in 16,000 inputs was that, not the daemon. */
	do
		r = poll(p, n + 1, 0);
	while (r < 0 && errno == EINTR);
	fuzz_check(r >= 0);
	for (size_t i = 0; i < n; i++)
		ready[i] = p[i + 1].revents != 0;
	return r == 0 && uv_backend_timeout(d->core.loop) != 0;
}

/*
 * Runs the loop until nothing moves: no replies, no pool work. A lock wait
 * without timeout legitimately stays; timers are not waited for. Stops at
 * once when the loop is quiet, or after three rounds that moved nothing (a
 * connection that does not read leaves its fd ready).
 */
static void pump(struct daemon *d, int *clients, size_t n)
{
	for (unsigned idle = 0; idle < 3;) {
		bool progress = false, ready[2];

		uv_run(d->core.loop, UV_RUN_NOWAIT);
		if (d->core.loop->active_reqs.count > 0) {
			/* Work on the pool: its completion wakes the loop. */
			uv_run(d->core.loop, UV_RUN_ONCE);
			idle = 0;
			continue;
		}
		if (loop_quiet(d, clients, n, ready))
			break;
		for (size_t i = 0; i < n; i++)
			if (ready[i] && !drain_client(clients[i], &progress))
				clients[i] = safe_close(clients[i]);
		idle = progress ? 0 : idle + 1;
	}
}

/*
 * The size of the piece of a record that starts at off: chunk bytes, except
 * that the middle of a record longer than 2 * EDGE_PIECES chunks goes in one
 * piece. The partial reads that matter are at a message's edges (the fds on
 * its first byte, the head before any NUL, the NUL alone); a byte at a time
 * through the middle of a 2 KiB message read the same way 2000 times, and
 * that was most of the target's time. The framing reader's every split is
 * fuzz-frame's job.
 */
#define EDGE_PIECES 4U

static size_t piece_size(size_t off, size_t len, size_t chunk)
{
	size_t edge = chunk * EDGE_PIECES;

	if (len > 2 * edge && off >= edge && off < len - edge)
		return len - edge - off;
	return MIN(chunk, len - off);
}

/* Sends len bytes in pieces, fds with the first; false if it cannot go on. */
static bool send_record(struct daemon *d, int *clients, size_t n_clients, int which,
			const uint8_t *p, size_t len, const int *fds, size_t n_fds, size_t chunk)
{
	size_t off = 0;

	while (off < len || n_fds > 0) {
		size_t n = piece_size(off, len, chunk);
		ssize_t r;

		if (clients[which] < 0)
			return false;
		r = sockio_send(clients[which], p + off, n, fds, n_fds, MSG_DONTWAIT);
		if (r == -EAGAIN) {
			bool progress = false;

			/* The daemon stopped reading (a call waits): stop
			 * when serving what it has does not free space. */
			pump(d, clients, n_clients);
			r = sockio_send(clients[which], p + off, n, fds, n_fds, MSG_DONTWAIT);
			if (r == -EAGAIN) {
				drain_client(clients[which], &progress);
				return false;
			}
		}
		if (r < 0)
			return false;
		off += r;
		n_fds = 0;
		if (len == 0)
			break;
		/*
		 * Mid-record, the daemon can only read: the message is not
		 * complete, and the last record's pump left no reply or
		 * pool work behind (a due timer may still answer a lock
		 * wait: the record's pump drains that). One turn of the
		 * loop reads what came, a partial read of its own, without
		 * the idle rounds of a pump: a byte at a time it was most
		 * of the target's time.
		 */
		if (off < len)
			uv_run(d->core.loop, UV_RUN_NOWAIT);
	}
	pump(d, clients, n_clients);
	return true;
}

static struct daemon *daemon_start(bool fail_mr)
{
	struct daemon_config cfg;
	struct daemon *d = NULL;
	char path[128];

	daemon_config_init(&cfg);
	snprintf(path, sizeof(path), "%s/sock", socket_dir);
	cfg.socket_path = strdup(path);
	fuzz_check(cfg.socket_path);
	/* Calls left at shutdown get no grace period: no real time passes. */
	cfg.drain_timeout_ms = 1;
	cfg.log_level = LOG_CRIT;
	cfg.max_pinned_bytes_per_uid = 64U << 20;
	/* No host bandwidth probe: it would copy 128 MiB per input. */
	cfg.bandwidth_probe_size = 0;
	atomic_store(&fake_verbs_fail_mr, fail_mr);
	fuzz_check(daemon_new(&cfg, &d) == 0);
	return d;
}

static void daemon_stop_and_free(struct daemon *d, int *clients, size_t n)
{
	daemon_shutdown(d, "fuzz");
	/* The loop ends once every connection and handle is gone. */
	for (;;) {
		bool progress = false;
		int alive = uv_run(d->core.loop, UV_RUN_NOWAIT);

		for (size_t i = 0; i < n; i++)
			if (clients[i] >= 0 && !drain_client(clients[i], &progress)) {
				/* Answered or closed: every client hears EOF. */
				clients[i] = safe_close(clients[i]);
			}
		if (!alive && d->core.loop->active_reqs.count == 0)
			break;
		if (d->core.loop->active_reqs.count > 0)
			uv_run(d->core.loop, UV_RUN_ONCE);
	}
	for (size_t i = 0; i < n; i++) {
		bool progress = false;

		/* The daemon closed its side of every connection. */
		if (clients[i] >= 0)
			fuzz_check(!drain_client(clients[i], &progress));
		clients[i] = safe_close(clients[i]);
	}
	fuzz_check(!uv_loop_alive(d->core.loop));
	fuzz_check(d->regions.n_regions == 0 && d->regions.pinned_bytes == 0);
	daemon_free(d);
	fuzz_check(atomic_load(&fake_verbs_live) == 0);
	fuzz_check(fake_cuda_live() == 0);
}

/* Says which fds are open, to tell a leak from a harness mistake. */
static void list_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	fuzz_check(d);
	while ((de = readdir(d))) {
		char path[300], target[256];
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		fprintf(stderr, "  fd %s -> %s\n", de->d_name, target);
	}
	closedir(d);
}

static void remove_socket_dir(void)
{
	rmdir(socket_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup();
	log_set_max_level(LOG_CRIT);
	vb = &fake_vb_ops;
	fake_cuda_install();
	verbose = getenv("RDMAMEM_FUZZ_VERBOSE");
	snprintf(socket_dir, sizeof(socket_dir), "/tmp/rdmamemd-fuzz.%d", (int)getpid());
	if (mkdir(socket_dir, 0700) < 0 && errno != EEXIST)
		abort();
	/* Each daemon removes its socket when it stops; the directory goes
	 * with the process. */
	atexit(remove_socket_dir);
	/* The first daemon opens whatever a library keeps for the process
	 * (the libraries' one-time state): the inputs' fd counts start after
	 * that. */
	daemon_stop_and_free(daemon_start(false), NULL, 0);
	return 0;
}

static void add_client(struct daemon *d, uid_t uid, int *ret)
{
	struct ucred cred = { .pid = getpid(), .uid = uid, .gid = uid };
	struct conn *c;
	int sv[2];

	fuzz_check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
	/* conn_new takes sv[0] whatever happens. */
	fuzz_check(conn_new(d->server, sv[0], &cred, &c) == 0);
	*ret = sv[1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int clients[2] = { -EBADF, -EBADF };
	struct daemon *d;
	int baseline_fds;
	uint8_t flags;
	size_t chunk, off = 1;

	if (size < 1)
		return 0;
	flags = data[0];
	chunk = chunk_sizes[flags >> 4];

	/* Counted per input: between inputs libFuzzer may start a symbolizer
	 * on pipes of its own. */
	baseline_fds = count_fds();
	d = daemon_start(flags & 8);
	add_client(d, flags & 1 ? FUZZ_UID : 0, &clients[0]);
	add_client(d, flags & 1 ? 0 : FUZZ_UID, &clients[1]);

	while (off + 2 <= size) {
		unsigned what = data[off], n_fds = data[off + 1] % 32;
		const uint8_t *msg = data + off + 2, *nul;
		size_t len;
		int fds[32];
		bool grow = false, ok;

		nul = memchr(msg, 0, size - (off + 2));
		len = nul ? (size_t)(nul - msg) + 1 : size - (off + 2);
		off += 2 + len;
		for (unsigned i = 0; i < n_fds; i++)
			fds[i] = make_fd(what & 15, &grow);
		ok = send_record(d, clients, 2, (what >> 4) & 1, msg, len, fds, n_fds, chunk);
		/* A memfd without F_SEAL_GROW may grow under a region: the
		 * region keeps its range. */
		for (unsigned i = 0; grow && i < n_fds; i++)
			fuzz_check(ftruncate(fds[i], 2 * MEMFD_SMALL) == 0);
		close_many(fds, n_fds);
		if (!ok)
			break;
	}
	if (flags & 2 && clients[0] >= 0)
		shutdown(clients[0], SHUT_WR);
	pump(d, clients, 2);

	if (!(flags & 4)) {
		/* The clients leave: what they held goes with them. */
		clients[0] = safe_close(clients[0]);
		clients[1] = safe_close(clients[1]);
		for (unsigned i = 0; i < 100000 && (!list_empty(&d->server->conns) ||
						    d->core.loop->active_reqs.count > 0);
		     i++)
			uv_run(d->core.loop,
			       d->core.loop->active_reqs.count ? UV_RUN_ONCE : UV_RUN_NOWAIT);
		if (!list_empty(&d->server->conns)) {
			struct conn *c;

			list_for_each_entry(c, &d->server->conns, link)
				fprintf(stderr,
					"connection %llu left: call %p %s, draining %d, "
					"close_after_flush %d, input_eof %d, out %zu, in %zu, "
					"poll %#x\n",
					(unsigned long long)c->id, (void *)c->call,
					c->call ? c->call->vc.method : "", c->draining,
					c->close_after_flush, c->input_eof, outq_pending(&c->out),
					frame_reader_pending(&c->in), (unsigned)c->poll_events);
		}
		fuzz_check(list_empty(&d->server->conns));
		fuzz_check(d->regions.n_regions == 0 && d->regions.pinned_bytes == 0);
		fuzz_check(d->regions.leases.n_entries == 0);
	}
	daemon_stop_and_free(d, clients, 2);
	if (count_fds() != baseline_fds) {
		fprintf(stderr, "%d fds open, %d before:\n", count_fds(), baseline_fds);
		list_fds();
		fuzz_check(count_fds() == baseline_fds);
	}
	return 0;
}
