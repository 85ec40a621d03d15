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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	n_owners = 0;
}

/* The owners a case started go, whether it passed or not. */
static void teardown(void)
{
	char cmd[64];

	for (size_t i = 0; i < n_owners; i++) {
		snprintf(cmd, sizeof(cmd), "kill %d", (int)owners[i].pid);
		test_remote_sh(cmd, 10, NULL);
	}
}

/* Starts region-owner on B with a region of size bytes. */
static struct owner *owner_start(size_t size)
{
	struct owner *o = &owners[n_owners++];
	char cmd[512], *line, *p;

	ck_assert_uint_le(n_owners, ELEMENTSOF(owners));
	snprintf(cmd, sizeof(cmd),
		 "exec %s --socket \"$RDMAMEM_HOST_SOCKET\" --device rxe0 --device rxe1 --size %zu "
		 "--fill \"%s\"",
		 OWNER_BIN, size, fill);
	o->pid = test_remote_spawn(cmd, 30, &line);
	ck_assert_int_eq(sscanf(line, "region=%*u fd=%d token=%63s", &o->fd, o->token), 2);
	for (int i = 0; i < N_PAIRS; i++) {
		char key[32];

		snprintf(key, sizeof(key), " rxe%d=", i);
		p = strstr(line, key);
		ck_assert_msg(p && sscanf(p + strlen(key), "%llu/%u", &o->addr[i], &o->rkey[i]) ==
					      2,
			      "no rxe%d registration in '%s'", i, line);
	}
	free(line);
	return o;
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
	suite_add_tcase(s, tc);
	return s;
}
