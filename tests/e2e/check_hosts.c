/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two hosts: these cases carry the tag "hosts" and run on host A of the
 * two-VM bed (make vmtest2, tests/vm/README.md). Host B runs its own
 * rdmamemd at $RDMAMEM_HOST_SOCKET, listening for rdmacm on both of its
 * addresses, and an agent through which a case runs commands there
 * (test_remote_sh()). region-owner on B owns a region registered on B's
 * rxe0 and rxe1; rdma-peer on A reaches it across the VMs with the token and
 * {addr, rkey} the owner printed, as a remote host would.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "daemon/remote/link.h"
#include "daemon/remote/transfer.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#define OWNER_BIN BUILD_DIR "/region-owner"
#define HOSTD "/vmtest/hostd.sh"
#define RDMACM_PORT "7471"
#define N_PAIRS 2

/* Repeated over the owner's region: 43 bytes, so that no offset a case
 * picks lines up with a page or a power of two. */
static const char fill[] = "host B's region, byte by byte: 0123456789.";

/* What region-owner printed: its region on B, reachable over both pairs. */
struct owner {
	pid_t pid;
	int fd;
	char token[64];
	unsigned long long addr[N_PAIRS];
	unsigned rkey[N_PAIRS];
	/* With --export: the descriptor and the export's own token. */
	char *desc;
	char xtoken[64];
};

static const char *peer_addr[N_PAIRS];
static struct owner owners[4];
static size_t n_owners;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* B's NIC on its second network (RDMAMEM_RXE_ADDR1, device rxe1) goes
 * down or up: no packet in or out, no reset, no disconnect — the peer
 * falls silent. The agent listens on the first network. */
static void b_link(const char *how)
{
	char cmd[256];

	snprintf(
		cmd, sizeof(cmd),
		"nic=$(/bin/ip -o -4 addr show | awk -v a=\"$RDMAMEM_RXE_ADDR1/\" "
		"'index($4, a) == 1 { print $2 }'); [ -n \"$nic\" ] && /bin/ip link set \"$nic\" %s",
		how);
	ck_assert_msg(test_remote_sh(cmd, 20, NULL) == 0, "B's second NIC not %s", how);
}

static void setup(void)
{
	const char *host = getenv("RDMAMEM_HOST");

	ck_assert_msg(host && strcmp(host, "a") == 0 && getenv("RDMAMEM_HOST_SOCKET"),
		      "cases tagged hosts run on host A of the two-VM bed (make vmtest2)");
	peer_addr[0] = getenv("RDMAMEM_PEER_ADDR");
	peer_addr[1] = getenv("RDMAMEM_PEER_ADDR1");
	ck_assert_ptr_nonnull(peer_addr[0]);
	ck_assert_ptr_nonnull(peer_addr[1]);
	/* A case that failed between killing B's daemon and restarting it
	 * leaves it down: every case starts with it up. */
	ck_assert_int_eq(test_remote_sh(HOSTD " start", 40, NULL), 0);
	/* And its second network, which the silent-peer case cuts. */
	b_link("up");
	n_owners = 0;
}

/* The owners a case started go, whether it passed or not. */
static void teardown(void)
{
	char cmd[64];

	for (size_t i = 0; i < n_owners; i++) {
		snprintf(cmd, sizeof(cmd), "kill %d", (int)owners[i].pid);
		test_remote_sh(cmd, 10, NULL);
		free(owners[i].desc);
	}
}

/* Starts region-owner on B with a region of size bytes registered on the
 * devices rxeI of the bits I in pairs; extra: more of its options
 * ("--export"). */
static struct owner *owner_start_on(size_t size, unsigned pairs, const char *extra)
{
	struct owner *o = &owners[n_owners++];
	char cmd[4096], *line, *p;

	ck_assert_uint_le(n_owners, ELEMENTSOF(owners));
	*o = (struct owner){};
	snprintf(cmd, sizeof(cmd),
		 "exec %s --socket \"$RDMAMEM_HOST_SOCKET\" %s%s--size %zu --fill \"%s\" %s",
		 OWNER_BIN, pairs & 1 ? "--device rxe0 " : "", pairs & 2 ? "--device rxe1 " : "",
		 size, fill, extra);
	o->pid = test_remote_spawn(cmd, 30, &line);
	ck_assert_int_eq(sscanf(line, "region=%*u fd=%d token=%63s", &o->fd, o->token), 2);
	for (int i = 0; i < N_PAIRS; i++) {
		char key[32];

		if (!(pairs & (1U << i)))
			continue;

		snprintf(key, sizeof(key), " rxe%d=", i);
		p = strstr(line, key);
		ck_assert_msg(p && sscanf(p + strlen(key), "%llu/%u", &o->addr[i], &o->rkey[i]) ==
					      2,
			      "no rxe%d registration in '%s'", i, line);
	}
	p = strstr(line, " descriptor=");
	if (p) {
		o->desc = strdup(p + strlen(" descriptor="));
		ck_assert_ptr_nonnull(o->desc);
		o->desc[strcspn(o->desc, " \n")] = '\0';
		p = strstr(line, " xtoken=");
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(sscanf(p, " xtoken=%63s", o->xtoken), 1);
	}
	free(line);
	return o;
}

static struct owner *owner_start_with(size_t size, const char *extra)
{
	return owner_start_on(size, 3, extra);
}

static struct owner *owner_start(size_t size)
{
	return owner_start_with(size, "");
}

/* The owner's bytes [off, off + len) as the fill makes them. */
static char *filled(size_t off, size_t len)
{
	char *s = malloc(len + 1);

	ck_assert_ptr_nonnull(s);
	for (size_t i = 0; i < len; i++)
		s[i] = fill[(off + i) % (sizeof(fill) - 1)];
	s[len] = '\0';
	return s;
}

/* rdma-peer's command line, for a peer on A against B's daemon over device
 * pair `pair`, with token, at the owner's region + off; more with
 * peer_arg(). */
struct peer_cmd {
	char endpoint[64], addr[32], rkey[16];
	const char *argv[16];
	size_t n;
};

static void peer_arg(struct peer_cmd *c, const char *arg)
{
	ck_assert_uint_lt(c->n, ELEMENTSOF(c->argv) - 1);
	c->argv[c->n++] = arg;
	c->argv[c->n] = NULL;
}

static void peer_cmd_init(struct peer_cmd *c, int pair, const char *token, const struct owner *o,
			  size_t off)
{
	snprintf(c->endpoint, sizeof(c->endpoint), "%s:%s", peer_addr[pair], RDMACM_PORT);
	snprintf(c->addr, sizeof(c->addr), "%llu", o->addr[pair] + off);
	snprintf(c->rkey, sizeof(c->rkey), "%u", o->rkey[pair]);
	c->n = 0;
	peer_arg(c, PEER_BIN);
	peer_arg(c, "--rdmacm");
	peer_arg(c, c->endpoint);
	peer_arg(c, "--token");
	peer_arg(c, token);
	peer_arg(c, "--addr");
	peer_arg(c, c->addr);
	peer_arg(c, "--rkey");
	peer_arg(c, c->rkey);
}

/*
 * Runs rdma-peer (peer_cmd_init()) with op "--read" (value: the length;
 * expect: the bytes) or "--write" (value: the bytes). Returns its exit
 * status; prints the start of what it said.
 */
static int peer_at(int pair, const char *token, const struct owner *o, size_t off, const char *op,
		   const char *value, const char *expect)
{
	struct peer_cmd c;
	char *out, *err;
	int r;

	peer_cmd_init(&c, pair, token, o, off);
	peer_arg(&c, op);
	peer_arg(&c, value);
	if (expect) {
		peer_arg(&c, "--expect");
		peer_arg(&c, expect);
	}
	r = test_run(c.argv, &out, &err);
	fprintf(stderr, "rdma-peer %s %.20s at +%zu over %s: exit %d: %.120s%s\n", op, value, off,
		c.endpoint, r, out, err);
	free(out);
	free(err);
	return r;
}

/* The owner's bytes [off, off + len), read on B from its memfd. */
static char *owner_bytes(const struct owner *o, size_t off, size_t len)
{
	char cmd[128], *out;

	snprintf(cmd, sizeof(cmd), "tail -c +%zu /proc/%d/fd/%d | head -c %zu", off + 1,
		 (int)o->pid, o->fd, len);
	ck_assert_int_eq(test_remote_sh(cmd, 30, &out), 0);
	return out;
}

/* The agent runs what A asks on B, returns its status and output, and
 * bounds it in time. */
START_TEST(test_agent)
{
	double t0;
	char *out;

	ck_assert_int_eq(test_remote_sh("echo \"host $RDMAMEM_HOST\"; exit 3", 10, &out), 3);
	ck_assert_str_eq(out, "host b\n");
	free(out);
	t0 = now_ms();
	ck_assert_int_eq(test_remote_sh("sleep 60", 1, NULL), 124);
	ck_assert_double_lt(now_ms() - t0, 15000);
}
END_TEST

/* A client on B registers a region on both of B's devices; a peer on A
 * reads it over each device pair byte-exact at odd offsets and lengths, and
 * writes into it, which B sees in its memory and nothing beside. */
START_TEST(test_read_write_across)
{
	static const size_t size = 256 << 10;
	static const struct {
		size_t off, len;
	} reads[] = { { 0, 1 }, { 1, 4093 }, { 65537, 99991 } };
	struct owner *o = owner_start(size);

	for (int pair = 0; pair < N_PAIRS; pair++) {
		char len[16], text[64], *want, *got;
		size_t off = 12345 + 1001 * pair;

		for (size_t i = 0; i < ELEMENTSOF(reads); i++) {
			want = filled(reads[i].off, reads[i].len);
			snprintf(len, sizeof(len), "%zu", reads[i].len);
			ck_assert_int_eq(peer_at(pair, o->token, o, reads[i].off, "--read", len,
						 want),
					 0);
			free(want);
		}

		snprintf(text, sizeof(text), "written from host A over rxe%d", pair);
		ck_assert_int_eq(peer_at(pair, o->token, o, off, "--write", text, NULL), 0);
		/* One byte either side, untouched. */
		want = filled(off - 1, strlen(text) + 2);
		memcpy(want + 1, text, strlen(text));
		got = owner_bytes(o, off - 1, strlen(text) + 2);
		ck_assert_str_eq(got, want);
		free(got);
		free(want);
	}
}
END_TEST

/*
 * B's daemon is SIGKILLed under a peer of A's that is connected: the peer's
 * next access fails within a bounded time, a new connection is refused
 * while the daemon is down, and once it is restarted a new region is read
 * again while the old token is refused.
 */
START_TEST(test_peer_daemon_killed)
{
	char *line, *want = filled(0, 42);
	struct owner *o = owner_start(4096), *o2;
	struct peer_cmd step_cmd;
	int out_fd, status;
	double t0;
	pid_t step;

	ck_assert_int_eq(peer_at(0, o->token, o, 0, "--read", "42", want), 0);

	peer_cmd_init(&step_cmd, 0, o->token, o, 0);
	peer_arg(&step_cmd, "--read");
	peer_arg(&step_cmd, "42");
	peer_arg(&step_cmd, "--step");
	step = test_spawn(step_cmd.argv, &out_fd);
	line = test_read_line(out_fd, 30000);
	ck_assert_msg(line && strcmp(line, "connected") == 0, "stepping peer: %s", line);
	free(line);
	line = test_read_line(out_fd, 30000);
	ck_assert_msg(line && strncmp(line, "read '", 6) == 0, "stepping peer: %s", line);
	free(line);

	ck_assert_int_eq(test_remote_sh(HOSTD " kill", 40, NULL), 0);
	t0 = now_ms();
	kill(step, SIGUSR1);
	/* 3: the work request failed; 6: the connection went down first. */
	status = test_wait(step, 40000);
	fprintf(stderr, "the stepping peer ended with %d %.0f ms after the kill\n", status,
		now_ms() - t0);
	ck_assert_msg(status == 3 || status == 6, "stepping peer exit %d", status);
	close(out_fd);

	/* Nobody listens on B: refused. */
	ck_assert_int_eq(peer_at(0, o->token, o, 0, "--read", "42", want), 2);

	ck_assert_int_eq(test_remote_sh(HOSTD " start", 40, NULL), 0);
	o2 = owner_start(4096);
	ck_assert_int_eq(peer_at(0, o2->token, o2, 0, "--read", "42", want), 0);
	ck_assert_int_eq(peer_at(1, o2->token, o2, 0, "--read", "42", want), 0);
	/* The old daemon's token died with it. */
	ck_assert_int_eq(peer_at(0, o->token, o, 0, "--read", "42", want), 2);
	free(want);
}
END_TEST

/* ---- Transfer: A's daemon moves the bytes, B's region exported ---- */

/* A client of A's own daemon with a memfd region of size bytes registered
 * on both of A's devices, and, with a descriptor, B's export imported. */
struct local {
	struct rdmamem_client *c;
	int fd;
	unsigned char *map;
	size_t size;
	uint64_t region, remote;
};

static void local_init(struct local *l, size_t size, const char *desc)
{
	struct rdmamem_registration reg;

	*l = (struct local){ .size = size };
	l->c = test_client(getenv("RDMAMEM_HOST_SOCKET"));
	ck_assert_int_eq(rdmamem_memfd_create("hosts", size, &l->fd, (void **)&l->map), 0);
	ck_assert_int_eq(rdmamem_register(l->c, l->fd, 0, 0, &l->region), 0);
	for (int i = 0; i < N_PAIRS; i++) {
		char dev[16];

		snprintf(dev, sizeof(dev), "rxe%d", i);
		ck_assert_msg(rdmamem_register_on(l->c, l->region, dev, &reg) == 0,
			      "RegisterOn %s: %s", dev, rdmamem_client_error_message(l->c));
	}
	if (desc)
		ck_assert_msg(rdmamem_remote_import(l->c, desc, &l->remote) == 0,
			      "ImportRemote: %s", rdmamem_client_error_message(l->c));
}

static void local_done(struct local *l)
{
	rdmamem_client_close(l->c);
	munmap(l->map, l->size);
	close(l->fd);
}

/* Transfers n ops; returns its status and prints the error and the time. */
static int transfer(struct local *l, const struct rdmamem_transfer_op *ops, size_t n,
		    uint64_t *ret_bytes)
{
	uint64_t bytes = 0, total = 0;
	double t0 = now_ms();
	int r;

	for (size_t i = 0; i < n; i++)
		total += ops[i].length;
	r = rdmamem_transfer(l->c, ops, n, NULL, NULL, &bytes);
	fprintf(stderr, "Transfer of %zu ops, %s %llu bytes: %d %s%s%s in %.0f ms\n", n,
		ops[0].op == RDMAMEM_TRANSFER_READ ? "READ" : "WRITE", (unsigned long long)total, r,
		r < 0 ? rdmamem_client_error_name(l->c) : "", r < 0 ? ": " : "",
		r < 0 ? rdmamem_client_error_message(l->c) : "", now_ms() - t0);
	if (ret_bytes)
		*ret_bytes = bytes;
	return r;
}

static int transfer1(struct local *l, int op, size_t loff, size_t roff, size_t len)
{
	struct rdmamem_transfer_op o = { .op = op,
					 .region = l->region,
					 .offset = loff,
					 .remote = l->remote,
					 .remote_offset = roff,
					 .length = len };

	return transfer(l, &o, 1, NULL);
}

/* A's bytes for WRITEs: no period that lines up with the fill's. */
static void pattern(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(((i + seed) * 2654435761U) >> 13);
}

/* md5sum's line for bytes (run here, on A). */
static char *md5_of(const void *p, size_t len)
{
	static const char *const argv[] = { "/bin/sh", "-c", "md5sum < /tmp/hosts-expect", NULL };
	char *out, *err;
	FILE *f = fopen("/tmp/hosts-expect", "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	free(err);
	unlink("/tmp/hosts-expect");
	return out;
}

/* md5sum's line for the owner's bytes [off, off + len) on B. */
static char *owner_md5(const struct owner *o, size_t off, size_t len)
{
	char cmd[160], *out;

	snprintf(cmd, sizeof(cmd), "tail -c +%zu /proc/%d/fd/%d | head -c %zu | md5sum", off + 1,
		 (int)o->pid, o->fd, len);
	ck_assert_int_eq(test_remote_sh(cmd, 40, &out), 0);
	return out;
}

/* B's bytes [off - 1, off + len + 1) are the fill's with [off, +len) from
 * src: what a WRITE there of len bytes of src made, and nothing beside. */
static void assert_written(const struct owner *o, size_t off, const unsigned char *src, size_t len)
{
	char *want = filled(off - 1, len + 2), *a, *b;

	memcpy(want + 1, src, len);
	a = md5_of(want, len + 2);
	b = owner_md5(o, off - 1, len + 2);
	ck_assert_msg(strcmp(a, b) == 0, "B's bytes at %zu (+%zu): md5 %.32s, want %.32s", off, len,
		      b, a);
	free(a);
	free(b);
	free(want);
}

#define BIG (64U << 20)

/*
 * A client on A reads B's exported region through its own daemon, byte
 * exact at odd offsets and lengths from 1 B to 64 MiB, each byte beside
 * untouched; then writes into it, which B sees in its memory.
 */
START_TEST(test_transfer_read_write)
{
	static const struct {
		size_t loff, roff, len;
	} reads[] = { { 1, 0, 1 },
		      { 3, 7, 4093 },
		      { 4099, 65537, 99991 },
		      { 8191, 1048577, (1 << 20) + 3 },
		      { 4097, 4095, BIG } },
	  writes[] = { { 0, 1, 1 }, { 5, 4099, 4093 }, { 70001, 131071, 99991 }, { 3, 4097, BIG } };
	static const size_t size = BIG + 8192;
	struct owner *o = owner_start_with(size, "--export");
	struct local l;

	local_init(&l, size, o->desc);
	for (size_t i = 0; i < ELEMENTSOF(reads); i++) {
		char *want = filled(reads[i].roff, reads[i].len);

		memset(l.map, 0xee, size);
		ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, reads[i].loff, reads[i].roff,
					   reads[i].len),
				 0);
		ck_assert_msg(memcmp(l.map + reads[i].loff, want, reads[i].len) == 0,
			      "READ of %zu bytes at %zu differs", reads[i].len, reads[i].roff);
		ck_assert_uint_eq(l.map[reads[i].loff - !!reads[i].loff],
				  reads[i].loff ? 0xee : want[0]);
		ck_assert_uint_eq(l.map[reads[i].loff + reads[i].len], 0xee);
		free(want);
	}
	pattern(l.map, size, 1);
	for (size_t i = 0; i < ELEMENTSOF(writes); i++) {
		ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_WRITE, writes[i].loff,
					   writes[i].roff, writes[i].len),
				 0);
		/* The earlier WRITEs lie inside the last one: each is checked
		 * before the next. */
		assert_written(o, writes[i].roff, l.map + writes[i].loff, writes[i].len);
	}
	local_done(&l);
}
END_TEST

/*
 * A large batch (3000 READs of 97 bytes, neither side contiguous) in one
 * Transfer, and a prepared plan of 1000 ranges posted by index (every third
 * WRITE): the bytes each names, and nothing beside.
 */
START_TEST(test_transfer_batch_plan)
{
	enum { N_BATCH = 3000, N_PLAN = 1000 };
	static const size_t size = 4 << 20;
	struct owner *o = owner_start_with(size, "--export");
	struct rdmamem_transfer_op *ops = calloc(N_BATCH, sizeof(*ops));
	struct rdmamem_range *ranges = calloc(N_PLAN, sizeof(*ranges));
	uint64_t *idx = calloc(N_PLAN, sizeof(*idx)), plan, bytes;
	size_t n_idx = 0, span = 1031 * N_PLAN + 300;
	char *want, *a, *b;
	struct local l;

	ck_assert(ops && ranges && idx);
	local_init(&l, size, o->desc);
	memset(l.map, 0xee, size);
	for (size_t i = 0; i < N_BATCH; i++)
		ops[i] = (struct rdmamem_transfer_op){ .op = RDMAMEM_TRANSFER_READ,
						       .region = l.region,
						       .offset = i * 128,
						       .remote = l.remote,
						       .remote_offset = 1 + i * 131,
						       .length = 97 };
	ck_assert_int_eq(transfer(&l, ops, N_BATCH, &bytes), 0);
	ck_assert_uint_eq(bytes, 97 * N_BATCH);
	for (size_t i = 0; i < N_BATCH; i++) {
		want = filled(1 + i * 131, 97);
		ck_assert_msg(memcmp(l.map + i * 128, want, 97) == 0, "op %zu differs", i);
		for (size_t k = 97; k < 128; k++)
			ck_assert_uint_eq(l.map[i * 128 + k], 0xee);
		free(want);
	}

	pattern(l.map, size, 2);
	for (size_t i = 0; i < N_PLAN; i++) {
		ranges[i] = (struct rdmamem_range){ .local_offset = i * 1024 + 5,
						    .remote_offset = i * 1031 + 7,
						    .length = 100 + i % 151 };
		if (i % 3 == 0)
			idx[n_idx++] = i;
	}
	ck_assert_int_eq(rdmamem_transfer_prepare(l.c, l.region, l.remote, ranges, N_PLAN, &plan),
			 0);
	ck_assert_msg(rdmamem_transfer_post(l.c, plan, RDMAMEM_TRANSFER_WRITE, idx, n_idx, NULL,
					    NULL, &bytes) == 0,
		      "posting the plan: %s", rdmamem_client_error_message(l.c));
	want = filled(0, span);
	for (size_t k = 0; k < n_idx; k++) {
		const struct rdmamem_range *rg = &ranges[idx[k]];

		memcpy(want + rg->remote_offset, l.map + rg->local_offset, rg->length);
	}
	a = md5_of(want, span);
	b = owner_md5(o, 0, span);
	ck_assert_str_eq(b, a);
	ck_assert_int_eq(rdmamem_plan_release(l.c, plan), 0);
	free(a);
	free(b);
	free(want);
	free(ops);
	free(ranges);
	free(idx);
	local_done(&l);
}
END_TEST

/* The other way: a client on B reads a region that a client on A exports,
 * through B's daemon. */
START_TEST(test_transfer_from_b)
{
	static const size_t size = (1 << 20) + 77;
	char extra[4096], token[RDMAMEM_TOKEN_LEN + 1], *desc;
	unsigned long long bytes, fnv, want = 0xcbf29ce484222325ULL;
	struct owner *o;
	struct local l;
	char *p, *line;

	local_init(&l, size, NULL);
	pattern(l.map, size, 3);
	for (size_t i = 0; i < size; i++)
		want = (want ^ l.map[i]) * 0x100000001b3ULL;
	ck_assert_int_eq(rdmamem_region_export(l.c, l.region, NULL, &desc, token, NULL), 0);
	snprintf(extra, sizeof(extra), "--read-from %s", desc);
	free(desc);
	o = owner_start_with(size, extra);
	/* owner_start_with() kept no "read=": ask its log again. */
	snprintf(extra, sizeof(extra), "head -n 1 /tmp/vm-agent/%d.log", (int)o->pid);
	ck_assert_int_eq(test_remote_sh(extra, 10, &line), 0);
	p = strstr(line, " read=");
	ck_assert_msg(p && sscanf(p, " read=%llu fnv=%llx", &bytes, &fnv) == 2, "owner: %s", line);
	ck_assert_uint_eq(bytes, size);
	ck_assert_msg(fnv == want, "B read fnv %016llx, A holds %016llx", fnv, want);
	free(line);
	local_done(&l);
}
END_TEST

static bool named(const struct local *l, const char *const *names)
{
	const char *e = rdmamem_client_error_name(l->c);

	for (; e && *names; names++)
		if (strcmp(e, *names) == 0)
			return true;
	return false;
}

/* A peer's access ended: the named errors a Transfer may end with. */
static const char *const ended[] = { "io.rdmamemd.RemoteAccessError", "io.rdmamemd.PeerUnreachable",
				     "io.rdmamemd.TransferFailed", NULL };

/* Waits until region-owner on B said what (after a signal). */
static void owner_said(const struct owner *o, const char *what)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 100); do grep -qx %s /tmp/vm-agent/%d.log && exit 0; sleep 0.1; "
		 "done; exit 1",
		 what, (int)o->pid);
	ck_assert_msg(test_remote_sh(cmd, 30, NULL) == 0, "region-owner did not say %s", what);
}

static pid_t hostd_pid(void)
{
	char buf[32] = "";
	FILE *f = fopen("/run/rdmamemd-host.pid", "re");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	return atoi(buf);
}

/* A descriptor with a wrong token is refused. */
START_TEST(test_transfer_token_refused)
{
	struct owner *o = owner_start_with(1 << 20, "--export");
	char *wrong = strdup(o->desc);
	struct local w;

	/* The token is bytes 20 to 35 of the record: base64url characters 28
	 * to 31 hold bytes 21 to 23. */
	ck_assert_ptr_nonnull(wrong);
	wrong[strlen("rdmamem1.") + 29] = wrong[strlen("rdmamem1.") + 29] == 'A' ? 'B' : 'A';
	local_init(&w, 4096, wrong);
	ck_assert_int_lt(transfer1(&w, RDMAMEM_TRANSFER_READ, 0, 0, 4096), 0);
	ck_assert_str_eq(rdmamem_client_error_name(w.c), "io.rdmamemd.PeerUnreachable");
	local_done(&w);
	free(wrong);
}
END_TEST

/*
 * Mid-transfer events. A client on A WRITEs MID_OPS × MID_LEN (128 MiB:
 * the same 16 MiB of its region to the same 16 MiB of B's, op after op —
 * neither side contiguous from one op to the next, so nothing coalesces)
 * with progress, on a thread. At the first progress reply, which says how
 * much is done, the case ends B's side of it (revokes the token,
 * unregisters the region, kills B's daemon): the transfer must end with a
 * named error within MID_BOUND_MS of that, having done at most a quarter.
 */
#define MID_OPS 8U
#define MID_LEN (16U << 20)
#define MID_BOUND_MS 20000.0

struct midway {
	struct local *l;
	pthread_t th;
	int pipe[2]; /* a byte at the first progress reply, one at the end */
	double t0, first_ms, hit_ms, end_ms;
	uint64_t first_bytes, first_ops, last_bytes;
	unsigned n_progress;
	int result;
	char name[128], message[512];
};

static void mid_progress(void *userdata, uint64_t ops_done, uint64_t bytes_done, uint64_t n_ops,
			 uint64_t bytes)
{
	struct midway *m = userdata;

	(void)n_ops;
	(void)bytes;
	if (m->n_progress++ == 0) {
		m->first_ms = now_ms() - m->t0;
		m->first_ops = ops_done;
		m->first_bytes = bytes_done;
		(void)!write(m->pipe[1], "p", 1);
	}
	m->last_bytes = bytes_done;
}

static void *mid_thread(void *arg)
{
	struct midway *m = arg;
	struct rdmamem_transfer_op ops[MID_OPS];

	for (unsigned i = 0; i < MID_OPS; i++)
		ops[i] = (struct rdmamem_transfer_op){ .op = RDMAMEM_TRANSFER_WRITE,
						       .region = m->l->region,
						       .remote = m->l->remote,
						       .length = MID_LEN };
	m->result = rdmamem_transfer(m->l->c, ops, MID_OPS, mid_progress, m, NULL);
	if (m->result < 0) {
		snprintf(m->name, sizeof(m->name), "%s", rdmamem_client_error_name(m->l->c));
		snprintf(m->message, sizeof(m->message), "%s",
			 rdmamem_client_error_message(m->l->c));
	}
	m->end_ms = now_ms() - m->t0;
	(void)!write(m->pipe[1], "e", 1);
	return NULL;
}

/* What A's and B's daemons logged last, and what each host's NICs and
 * rxe devices counted: a case that fails only on a loaded machine has
 * nothing else to go by. */
#define HOST_STATE                                                                       \
	"tail -n 20 /tmp/rdmamemd-host.log; /bin/ip -s -o link | tr -s ' '; "            \
	"for d in /sys/class/infiniband/*/ports/1/hw_counters; do echo \"$d:\" "         \
	"$(grep -H . $d/* 2>/dev/null | sed 's|.*/||' | grep -v ':0$' | tr '\\n' ' '); " \
	"done"

/* sh -c cmd on this host (A) and on B: what each printed, NULL if nothing. */
static void sh_on_both(const char *cmd, char **ret_a, char **ret_b)
{
	const char *const argv[] = { "/bin/sh", "-c", cmd, NULL };
	char *err = NULL;

	*ret_a = *ret_b = NULL;
	test_run(argv, ret_a, &err);
	free(err);
	test_remote_sh(cmd, 20, ret_b);
}

static void logs_tail(void)
{
	char *a, *b;

	sh_on_both(HOST_STATE, &a, &b);
	fprintf(stderr, "A:\n%sB:\n%s", a ? a : "", b ? b : "");
	free(a);
	free(b);
}

/*
 * One line of what tells a slow bed from a lost link: each rxe device's
 * resends as requester (completer_retry_err), failures by them
 * (retry_exceeded_err) and packets, on this host or (remote) on B. CI
 * shows only the end of a failed run, so a failing case puts this in its
 * message.
 */
#define RXE_RETRIES                                                                      \
	"for d in /sys/class/infiniband/*; do c=$d/ports/1/hw_counters; printf '%s "     \
	"retry %s exceeded %s rcvd %s sent %s; ' ${d##*/} $(cat $c/completer_retry_err " \
	"$c/retry_exceeded_err $c/rcvd_pkts $c/sent_pkts 2>/dev/null); done"

static void rxe_retries(char *buf, size_t size)
{
	char *a, *b;

	sh_on_both(RXE_RETRIES, &a, &b);
	snprintf(buf, size, "A: %s B: %s", a ? a : "?", b ? b : "?");
	free(a);
	free(b);
}

/* Starts the transfer and returns at its first progress reply, which must
 * come before its end with at most a quarter done. */
static void mid_start(struct midway *m, struct local *l)
{
	char c = 0, retries[1024] = "";
	struct pollfd pfd;

	*m = (struct midway){ .l = l };
	ck_assert_int_eq(pipe(m->pipe), 0);
	m->t0 = now_ms();
	ck_assert_int_eq(pthread_create(&m->th, NULL, mid_thread, m), 0);
	pfd = (struct pollfd){ .fd = m->pipe[0], .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 150000), 1);
	ck_assert_int_eq(read(m->pipe[0], &c, 1), 1);
	if (c != 'p') {
		/* Why, and what the links said: a case that never got going
		 * is the one whose logs matter. */
		fprintf(stderr, "the transfer ended at %.0f ms: %d %s: %s\n", m->end_ms, m->result,
			m->name, m->message);
		logs_tail();
		rxe_retries(retries, sizeof(retries));
	}
	ck_assert_msg(c == 'p',
		      "the transfer ended (%d %s after %.0f ms: %s) before any progress reply; %s",
		      m->result, m->name, m->end_ms, m->message, retries);
	fprintf(stderr, "first progress at %.0f ms: %llu ops, %llu of %llu bytes\n", m->first_ms,
		(unsigned long long)m->first_ops, (unsigned long long)m->first_bytes,
		(unsigned long long)MID_OPS * MID_LEN);
	ck_assert_uint_gt(m->first_bytes, 0);
	ck_assert_uint_le(m->first_bytes, (uint64_t)MID_OPS * MID_LEN / 4);
}

/* The deed was done (hit_ms set): the transfer ends with a named error
 * after it, within MID_BOUND_MS. */
static void mid_failed(struct midway *m, const char *what)
{
	pthread_join(m->th, NULL);
	close(m->pipe[0]);
	close(m->pipe[1]);
	fprintf(stderr,
		"%s at %.0f ms: the transfer ended at %.0f ms (%.0f ms after), %llu bytes done: "
		"%d %s: %s\n",
		what, m->hit_ms, m->end_ms, m->end_ms - m->hit_ms,
		(unsigned long long)m->last_bytes, m->result, m->name, m->message);
	logs_tail();
	ck_assert_msg(m->result < 0, "%s: the transfer succeeded", what);
	ck_assert_msg(m->end_ms > m->hit_ms, "%s: the transfer ended before", what);
	ck_assert_msg(named(m->l, ended), "%s: %s", what, m->name);
	ck_assert_double_lt(m->end_ms - m->hit_ms, MID_BOUND_MS);
}

/* After a mid-transfer event and the client's close: A's daemon holds as
 * many descriptors as before the client came (its links to B are gone),
 * and a transfer to a new export of B works. */
static void mid_after(pid_t ad, int fds)
{
	struct owner *o;
	struct local l;

	ck_assert_int_eq(test_settled_fds(ad), fds);
	o = owner_start_with(1 << 20, "--export");
	local_init(&l, 1 << 20, o->desc);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, 0, 0, 4096), 0);
	local_done(&l);
}

/* The deed of the revoke and unregister cases: signal sig to the owner on
 * B, which says what it did; the transfer must then fail by that. */
static void mid_signal_owner(struct midway *m, struct owner *o, const char *sig, const char *said)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "kill -%s %d", sig, (int)o->pid);
	m->hit_ms = now_ms() - m->t0;
	ck_assert_int_eq(test_remote_sh(cmd, 10, NULL), 0);
	owner_said(o, said);
	mid_failed(m, said);
}

/* The owner revokes its export's token mid-transfer (B's daemon closes the
 * queue pairs it admitted with it): a named error, and the token is
 * refused after. */
START_TEST(test_transfer_revoked_midway)
{
	struct owner *o = owner_start_with(MID_LEN, "--export");
	pid_t ad = hostd_pid();
	struct midway m;
	struct local l;
	int fds;

	fds = test_settled_fds(ad);
	local_init(&l, MID_LEN, o->desc);
	mid_start(&m, &l);
	mid_signal_owner(&m, o, "HUP", "revoked");
	ck_assert_int_lt(transfer1(&l, RDMAMEM_TRANSFER_READ, 0, 0, 4096), 0);
	ck_assert_str_eq(rdmamem_client_error_name(l.c), "io.rdmamemd.PeerUnreachable");
	local_done(&l);
	mid_after(ad, fds);
}
END_TEST

/* The owner unregisters its region mid-transfer: a named error. */
START_TEST(test_transfer_unregistered_midway)
{
	struct owner *o = owner_start_with(MID_LEN, "--export");
	pid_t ad = hostd_pid();
	struct midway m;
	struct local l;
	int fds;

	fds = test_settled_fds(ad);
	local_init(&l, MID_LEN, o->desc);
	mid_start(&m, &l);
	mid_signal_owner(&m, o, "USR1", "unregistered");
	local_done(&l);
	mid_after(ad, fds);
}
END_TEST

static size_t a_links(struct local *l);

/*
 * B's daemon is SIGKILLed mid-transfer: a named error within the bound,
 * nothing left in A's daemon, and once B's daemon is back a new export is
 * reached again. Links to B that earlier cases left idle (closed after
 * link-idle-sec) die with B's daemon too: each held two descriptors (its
 * rdmacm channel and its completion channel, link.h), which the count
 * after does not find again.
 */
START_TEST(test_transfer_peer_killed_midway)
{
	struct owner *o = owner_start_with(MID_LEN, "--export");
	pid_t ad = hostd_pid();
	struct midway m;
	struct local l;
	size_t idle_links;
	int fds;

	fds = test_settled_fds(ad);
	local_init(&l, MID_LEN, o->desc);
	idle_links = a_links(&l);
	mid_start(&m, &l);
	m.hit_ms = now_ms() - m.t0;
	ck_assert_int_eq(test_remote_sh(HOSTD " kill", 40, NULL), 0);
	mid_failed(&m, "killed");
	local_done(&l);
	ck_assert_int_eq(test_remote_sh(HOSTD " start", 40, NULL), 0);
	mid_after(ad, fds - 2 * (int)idle_links);
}
END_TEST

static unsigned long long sent_pkts(int dev);

/* ---- what A's daemon shows of its links, and B's of the connections ---- */

/* A's daemon's answer to method (list: a listing, every page) as JSON. */
static cJSON *a_json(struct local *l, const char *method, bool list)
{
	char *reply = NULL;
	cJSON *j;
	int r = list ? rdmamem_list(l->c, method, &reply) :
		       rdmamem_call(l->c, method, NULL, NULL, 0, &reply, NULL, NULL);

	ck_assert_msg(r == 0, "%s: %s", method, rdmamem_client_error_message(l->c));
	j = cJSON_Parse(reply);
	ck_assert_msg(j, "%s: not JSON: %.200s", method, reply);
	free(reply);
	return j;
}

/* How many links A's daemon lists. */
static size_t a_links(struct local *l)
{
	cJSON *j = a_json(l, "io.rdmamemd.ListLinks", true);
	size_t n = (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "links"));

	cJSON_Delete(j);
	return n;
}

static uint64_t u64_of(const cJSON *o, const char *name)
{
	uint64_t v = 0;

	ck_assert_msg(json_get_u64(o, name, &v) == 0, "no number %s", name);
	return v;
}

/* The largest link id A's daemon lists: the links a case makes after it
 * are the ones with larger ids (ids only grow). */
static uint64_t last_link_id(struct local *l)
{
	cJSON *j = a_json(l, "io.rdmamemd.ListLinks", true), *it;
	uint64_t last = 0;

	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "links"))
		last = MAX(last, u64_of(it, "id"));
	cJSON_Delete(j);
	return last;
}

/* A GetStats figure of A's daemon: name, or name.key of a map. */
static uint64_t a_stat(struct local *l, const char *name, const char *key)
{
	cJSON *j = a_json(l, "io.rdmamemd.GetStats", false);
	uint64_t v = key ? u64_of(cJSON_GetObjectItemCaseSensitive(j, name), key) : u64_of(j, name);

	cJSON_Delete(j);
	return v;
}

/* The sum over B's peers (rdmamemctl peers --json there) of field. */
static uint64_t b_peers_sum(const char *field)
{
	cJSON *j, *p;
	uint64_t sum = 0;
	char *out;

	ck_assert_int_eq(test_remote_sh("rdmamemctl --socket \"$RDMAMEM_HOST_SOCKET\" --json peers",
					30, &out),
			 0);
	j = cJSON_Parse(out);
	ck_assert_msg(j, "B's peers: not JSON: %.200s", out);
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(j, "peers"))
		sum += u64_of(p, field);
	cJSON_Delete(j);
	free(out);
	return sum;
}

/* What the links with ids above `after` carried, and how many there are. */
struct link_sums {
	unsigned n, ready;
	uint64_t reads, bytes_in, writes, bytes_out, wrs, flushed, errors, in_flight;
};

/* Each new link as ListLinks and `rdmamemctl peers --json` show it: the
 * same figures in both, its endpoint B's address on its device's network,
 * uid root; the sums in *ret. */
static void new_links(struct local *l, uint64_t after, struct link_sums *ret)
{
	static const char *const argv[] = { "/bin/sh", "-c",
					    "rdmamemctl --socket \"$RDMAMEM_HOST_SOCKET\" --json "
					    "peers",
					    NULL };
	cJSON *j = a_json(l, "io.rdmamemd.ListLinks", true), *peers, *it, *p, *pl, *e;
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	peers = cJSON_Parse(out);
	ck_assert_msg(peers, "A's peers: not JSON: %.200s", out);
	free(out);
	free(err);
	*ret = (struct link_sums){};
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "links")) {
		uint64_t id = u64_of(it, "id");
		const char *dev = cJSON_GetStringValue(cJSON_GetObjectItem(it, "device"));
		const char *ep = cJSON_GetStringValue(cJSON_GetObjectItem(it, "endpoint"));
		const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(it, "state"));
		char want[64];
		bool found = false;

		if (id <= after)
			continue;
		ret->n++;
		ck_assert_msg(dev && ep && state, "link %llu: no device, endpoint or state",
			      (unsigned long long)id);
		ck_assert_msg(strcmp(dev, "rxe0") == 0 || strcmp(dev, "rxe1") == 0, "device %s",
			      dev);
		snprintf(want, sizeof(want), "%s:%s", peer_addr[dev[3] - '0'], RDMACM_PORT);
		ck_assert_str_eq(ep, want);
		ck_assert_int_eq((int)cJSON_GetNumberValue(cJSON_GetObjectItem(it, "uid")),
				 (int)getuid());
		ret->ready += strcmp(state, "ready") == 0;
		ret->reads += u64_of(it, "reads");
		ret->bytes_in += u64_of(it, "bytes_in");
		ret->writes += u64_of(it, "writes");
		ret->bytes_out += u64_of(it, "bytes_out");
		ret->wrs += u64_of(it, "wrs_posted");
		ret->flushed += u64_of(it, "flushed");
		ret->in_flight +=
			(uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(it, "in_flight"));
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(it, "errors")) {
			uint64_t v = 0;

			ck_assert_int_eq(json_to_u64(e, &v), 0);
			ret->errors += v;
		}
		/* rdmamemctl peers: under B's address, the same figures. */
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(peers, "peers"))
			cJSON_ArrayForEach(pl, cJSON_GetObjectItemCaseSensitive(p, "links"))
				if (u64_of(pl, "id") == id) {
					found = true;
					ck_assert_str_eq(cJSON_GetStringValue(
								 cJSON_GetObjectItem(p, "address")),
							 peer_addr[dev[3] - '0']);
					ck_assert_uint_eq(u64_of(pl, "bytes_in"),
							  u64_of(it, "bytes_in"));
					ck_assert_uint_eq(u64_of(pl, "bytes_out"),
							  u64_of(it, "bytes_out"));
					ck_assert_str_eq(cJSON_GetStringValue(
								 cJSON_GetObjectItem(pl, "state")),
							 state);
				}
		ck_assert_msg(found, "link %llu not in rdmamemctl peers", (unsigned long long)id);
	}
	fprintf(stderr,
		"new links: %u (%u ready): %llu reads %llu bytes in, %llu writes %llu bytes out, "
		"%llu WRs, %llu flushed, %llu errors\n",
		ret->n, ret->ready, (unsigned long long)ret->reads,
		(unsigned long long)ret->bytes_in, (unsigned long long)ret->writes,
		(unsigned long long)ret->bytes_out, (unsigned long long)ret->wrs,
		(unsigned long long)ret->flushed, (unsigned long long)ret->errors);
	cJSON_Delete(peers);
	cJSON_Delete(j);
}

/* The WRs an op of n bytes is posted as on one pair. */
#define PIECES(n) (((n) + TRANSFER_PIECE - 1) / TRANSFER_PIECE)

/*
 * With links up, ListLinks and `rdmamemctl peers --json` on A show each
 * link to B (endpoint, device, state) with the bytes and ops each way that
 * the case moved, GetStats the transfers and the devices' bytes; after B's
 * owner revokes its token, the links' errors stay counted in GetStats
 * though the failed links are gone.
 */
START_TEST(test_transfer_visibility)
{
	static const size_t rlen = (3 << 20) + 5, wlen = (1 << 20) + 7, size = 4 << 20;
	struct owner *o = owner_start_with(size, "--export");
	uint64_t after, done0, failed0, in0 = 0, out0 = 0, in1 = 0, out1 = 0, disc0, connect0;
	struct link_sums sums, gone;
	char cmd[64];
	struct local l;
	cJSON *j, *d;

	local_init(&l, size, o->desc);
	after = last_link_id(&l);
	done0 = a_stat(&l, "transfers_done", NULL);
	failed0 = a_stat(&l, "transfers_failed", NULL);
	disc0 = a_stat(&l, "link_errors", "disconnect");
	connect0 = a_stat(&l, "link_errors", "connect");
	j = a_json(&l, "io.rdmamemd.GetStats", false);
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "transfer_devices")) {
		in0 += u64_of(d, "bytes_in");
		out0 += u64_of(d, "bytes_out");
	}
	cJSON_Delete(j);

	/* Below the striping threshold: on one pair, in WRs of TRANSFER_PIECE. */
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, 1, 3, rlen), 0);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_WRITE, 5, 7, wlen), 0);
	new_links(&l, after, &sums);
	ck_assert_uint_ge(sums.n, 1);
	ck_assert_uint_le(sums.n, N_PAIRS);
	ck_assert_uint_eq(sums.ready, sums.n);
	/* reads and writes count WRs, as wrs does. */
	ck_assert_uint_eq(sums.reads, PIECES(rlen));
	ck_assert_uint_eq(sums.bytes_in, rlen);
	ck_assert_uint_eq(sums.writes, PIECES(wlen));
	ck_assert_uint_eq(sums.bytes_out, wlen);
	ck_assert_uint_eq(sums.wrs, PIECES(rlen) + PIECES(wlen));
	ck_assert_uint_eq(sums.in_flight, 0);
	ck_assert_uint_eq(sums.flushed, 0);
	ck_assert_uint_eq(sums.errors, 0);
	ck_assert_uint_eq(a_stat(&l, "transfers_done", NULL) - done0, 2);
	ck_assert_uint_eq(a_stat(&l, "transfers_failed", NULL) - failed0, 0);
	j = a_json(&l, "io.rdmamemd.GetStats", false);
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "transfer_devices")) {
		in1 += u64_of(d, "bytes_in");
		out1 += u64_of(d, "bytes_out");
	}
	cJSON_Delete(j);
	ck_assert_uint_eq(in1 - in0, rlen);
	ck_assert_uint_eq(out1 - out0, wlen);

	/* The owner revokes its export's token: B closes the links it
	 * admitted with it (each an error on A: disconnected), and the next
	 * transfer's connect is refused. The failed links leave the listing;
	 * their errors stay counted. */
	snprintf(cmd, sizeof(cmd), "kill -HUP %d", (int)o->pid);
	ck_assert_int_eq(test_remote_sh(cmd, 10, NULL), 0);
	owner_said(o, "revoked");
	for (int i = 0; i < 200; i++) {
		new_links(&l, after, &gone);
		if (gone.n == 0)
			break;
		usleep(50000);
	}
	ck_assert_uint_eq(gone.n, 0);
	ck_assert_uint_eq(a_stat(&l, "link_errors", "disconnect") - disc0, sums.n);
	ck_assert_int_lt(transfer1(&l, RDMAMEM_TRANSFER_WRITE, 0, 0, 4096), 0);
	ck_assert_str_eq(rdmamem_client_error_name(l.c), "io.rdmamemd.PeerUnreachable");
	ck_assert_uint_eq(a_stat(&l, "transfers_failed", NULL) - failed0, 1);
	/* One refused connect per pair the transfer tries again. */
	ck_assert_uint_eq(a_stat(&l, "link_errors", "connect") - connect0, sums.n);
	local_done(&l);
}
END_TEST

/*
 * B's network falls silent mid-transfer (its NIC on the second network
 * goes down: no disconnect, no reset, nothing comes back). A's links resend
 * for link-ack-timeout × 7 and fail: the transfer ends with PeerUnreachable
 * within that bound (LINK_ACK_TIMEOUT_DEFAULT, the daemon's default, at the
 * most the IB spec allows a device to wait) plus the time to say so; A's
 * daemon's descriptors are back to where they were; once B's NIC is up
 * again, the next transfer over the same pair works.
 */
#define SILENT_SLACK_MS 4000.0

START_TEST(test_transfer_silent_peer)
{
	struct link_pool_config cfg = { .ack_timeout = LINK_ACK_TIMEOUT_DEFAULT,
					.retry_count = LINK_RETRY_COUNT };
	double bound = (double)link_silent_peer_ms(&cfg) + SILENT_SLACK_MS;
	struct owner *o = owner_start_on(MID_LEN, 2, "--export");
	pid_t ad = hostd_pid();
	uint64_t retry0;
	struct midway m;
	struct local l;
	int fds;

	fds = test_settled_fds(ad);
	local_init(&l, MID_LEN, o->desc);
	retry0 = a_stat(&l, "link_errors", "retry_exceeded");
	mid_start(&m, &l);
	m.hit_ms = now_ms() - m.t0;
	b_link("down");
	mid_failed(&m, "silent");
	ck_assert_str_eq(m.name, "io.rdmamemd.PeerUnreachable");
	ck_assert_ptr_nonnull(strstr(m.message, "retry"));
	ck_assert_msg(m.end_ms - m.hit_ms < bound, "detected after %.0f ms, bound %.0f ms",
		      m.end_ms - m.hit_ms, bound);
	ck_assert_uint_eq(a_stat(&l, "link_errors", "retry_exceeded") - retry0, 1);
	local_done(&l);
	ck_assert_int_eq(test_settled_fds(ad), fds);

	/* Back: B's rxe1 port active again, the same export reached. */
	b_link("up");
	ck_assert_int_eq(test_remote_sh("for i in $(seq 100); do grep -q ACTIVE "
					"/sys/class/infiniband/rxe1/ports/1/state && exit 0; "
					"sleep 0.1; done; exit 1",
					20, NULL),
			 0);
	/* (The cut WRITE left B's bytes half replaced: write, then read back.) */
	local_init(&l, 1 << 20, o->desc);
	pattern(l.map, 4096, 13);
	memset(l.map + 4096, 0xee, 8192);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_WRITE, 0, 4099, 4096), 0);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, 4097, 4099, 4096), 0);
	ck_assert_int_eq(memcmp(l.map + 4097, l.map, 4096), 0);
	local_done(&l);
}
END_TEST

/* FNV-1a 64, as region-owner hashes its region. */
static unsigned long long fnv1a(const unsigned char *p, size_t n)
{
	unsigned long long h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * A notification on a striped WRITE (16 MiB over both device pairs): B's
 * owner gets it only once both pairs' bytes are in place — it hashes its
 * whole region when the notification arrives, and that is A's bytes; both
 * of A's devices carried a share; B counts it received, none dropped.
 */
START_TEST(test_transfer_notify_striped)
{
	static const size_t size = 16 << 20;
	struct owner *o = owner_start_with(size, "--export --await-notify 1");
	unsigned long long before[N_PAIRS], fnv, want;
	uint64_t recv0 = b_peers_sum("notifications_received"),
		 drop0 = b_peers_sum("notifications_dropped");
	char params[512], cmd[256], *reply = NULL, *line, *p;
	struct local l;

	local_init(&l, size, o->desc);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, 0, 0, 1), 0);
	pattern(l.map, size, 11);
	want = fnv1a(l.map, size);
	for (int i = 0; i < N_PAIRS; i++)
		before[i] = sent_pkts(i);
	/* notify: base64 of "striped". */
	snprintf(params, sizeof(params),
		 "{\"ops\":[{\"op\":\"write\",\"local\":{\"region\":\"%llu\",\"offset\":\"0\"},"
		 "\"remote\":{\"id\":\"%llu\",\"offset\":\"0\"},\"length\":\"%zu\"}],"
		 "\"notify\":\"c3RyaXBlZA==\"}",
		 (unsigned long long)l.region, (unsigned long long)l.remote, size);
	ck_assert_msg(rdmamem_call(l.c, "io.rdmamemd.Transfer", params, NULL, 0, &reply, NULL,
				   NULL) == 0,
		      "Transfer with notify: %s: %s", rdmamem_client_error_name(l.c),
		      rdmamem_client_error_message(l.c));
	free(reply);
	for (int i = 0; i < N_PAIRS; i++) {
		unsigned long long sent = sent_pkts(i) - before[i];

		fprintf(stderr, "rxe%d sent %llu packets\n", i, sent);
		ck_assert_uint_ge(sent, size / 1024 / 4);
	}
	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 300); do grep '^notified' /tmp/vm-agent/%d.log && exit 0; "
		 "sleep 0.1; done; exit 1",
		 (int)o->pid);
	ck_assert_msg(test_remote_sh(cmd, 40, &line) == 0, "B's owner heard no notification");
	fprintf(stderr, "B's owner: %s", line);
	p = strstr(line, "data=striped fnv=");
	ck_assert_msg(p && sscanf(p, "data=striped fnv=%llx", &fnv) == 1, "owner: %s", line);
	ck_assert_msg(fnv == want,
		      "B's region when the notification came: fnv %016llx, A wrote %016llx", fnv,
		      want);
	free(line);
	ck_assert_uint_eq(b_peers_sum("notifications_received") - recv0, 1);
	ck_assert_uint_eq(b_peers_sum("notifications_dropped") - drop0, 0);
	local_done(&l);
}
END_TEST

/* B's rdmacm connections (ListConnections as root: all of them). */
static int peer_connections(void)
{
	char *out;
	int n;

	ck_assert_int_eq(test_remote_sh("rdmamemctl --socket \"$RDMAMEM_HOST_SOCKET\" --json "
					"connections | grep -o '\"rdmacm\"' | wc -l",
					30, &out),
			 0);
	n = atoi(out);
	free(out);
	return n;
}

/* Several sessions on A of one uid, one export: one link per device pair,
 * shared (B accepted two connections, and A's daemon holds no more
 * descriptors for three sessions than for one). */
START_TEST(test_transfer_links_shared)
{
	struct owner *o = owner_start_with(1 << 20, "--export");
	int before = peer_connections(), fds[3];
	struct local l[3];
	pid_t ad = hostd_pid();

	for (size_t i = 0; i < ELEMENTSOF(l); i++) {
		int f0 = test_settled_fds(ad);

		local_init(&l[i], 1 << 20, o->desc);
		ck_assert_int_eq(transfer1(&l[i], RDMAMEM_TRANSFER_READ, 0, i * 4096, 4096), 0);
		fds[i] = test_settled_fds(ad) - f0;
		fprintf(stderr, "session %zu: %d more descriptors in A's daemon\n", i, fds[i]);
	}
	ck_assert_int_eq(peer_connections() - before, N_PAIRS);
	/* The first session's transfer brought the links up; the others' only
	 * their own connection and region. */
	ck_assert_int_gt(fds[0], fds[1]);
	ck_assert_int_eq(fds[1], fds[2]);
	for (size_t i = 0; i < ELEMENTSOF(l); i++)
		local_done(&l[i]);
}
END_TEST

static unsigned long long sent_pkts(int dev)
{
	char path[96];
	unsigned long long n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/rxe%d/ports/1/hw_counters/sent_pkts",
		 dev);
	f = fopen(path, "re");
	ck_assert_msg(f, "no %s", path);
	ck_assert_int_eq(fscanf(f, "%llu", &n), 1);
	fclose(f);
	return n;
}

/* A large WRITE with both device pairs registered stripes: both of A's
 * devices send a good share of its packets. */
START_TEST(test_transfer_striped)
{
	static const size_t size = 16 << 20;
	struct owner *o = owner_start_with(size, "--export");
	unsigned long long before[N_PAIRS], sent[N_PAIRS];
	struct local l;

	local_init(&l, size, o->desc);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_READ, 0, 0, 1), 0);
	pattern(l.map, size, 7);
	for (int i = 0; i < N_PAIRS; i++)
		before[i] = sent_pkts(i);
	ck_assert_int_eq(transfer1(&l, RDMAMEM_TRANSFER_WRITE, 1, 1, size - 2), 0);
	for (int i = 0; i < N_PAIRS; i++) {
		sent[i] = sent_pkts(i) - before[i];
		fprintf(stderr, "rxe%d sent %llu packets\n", i, sent[i]);
	}
	/* 1024-byte packets (the MTU on virtio-net's 1500): a quarter each
	 * at least. */
	for (int i = 0; i < N_PAIRS; i++)
		ck_assert_uint_ge(sent[i], size / 1024 / 4);
	assert_written(o, 1, l.map + 1, size - 2);
	local_done(&l);
}
END_TEST

Suite *hosts_suite(void)
{
	Suite *s = suite_create("hosts");
	TCase *tc = tcase_create("two-vms");

	tcase_set_tags(tc, "hosts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	test_add_tagged(tc, "hosts", test_agent);
	test_add_tagged(tc, "hosts", test_read_write_across);
	test_add_tagged(tc, "hosts", test_peer_daemon_killed);
	test_add_tagged(tc, "hosts", test_transfer_read_write);
	test_add_tagged(tc, "hosts", test_transfer_batch_plan);
	test_add_tagged(tc, "hosts", test_transfer_from_b);
	test_add_tagged(tc, "hosts", test_transfer_token_refused);
	test_add_tagged(tc, "hosts", test_transfer_links_shared);
	test_add_tagged(tc, "hosts", test_transfer_striped);
	test_add_tagged(tc, "hosts", test_transfer_notify_striped);
	test_add_tagged(tc, "hosts", test_transfer_visibility);
	suite_add_tcase(s, tc);

	/* Events in the middle of a large transfer (CK_RUN_CASE=midway). */
	tc = tcase_create("midway");
	tcase_set_tags(tc, "hosts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	test_add_tagged(tc, "hosts", test_transfer_revoked_midway);
	test_add_tagged(tc, "hosts", test_transfer_unregistered_midway);
	test_add_tagged(tc, "hosts", test_transfer_peer_killed_midway);
	test_add_tagged(tc, "hosts", test_transfer_silent_peer);
	suite_add_tcase(s, tc);
	return s;
}
