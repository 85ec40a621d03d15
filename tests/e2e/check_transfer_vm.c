/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfer on real verbs: one Soft-RoCE VM (tag "rdma", make vmtest), one
 * daemon listening for rdmacm on rxe0's address. Client 1 owns region A and
 * exports it; client 2 owns region B, imports A's descriptor and has the
 * daemon move bytes between B and A over its own link to its own endpoint
 * (rxe loopback: the same code path as between two hosts, one device). The
 * two-host cases are in check_hosts.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#define MIB (1ULL << 20)
/* Room for a 16 MiB transfer at an offset past 17 MiB. */
#define XFER_REGION (36 * MIB)
/* A transfer long enough to be hit in flight under TCG. */
#define BIG_OPS 64U
#define BIG_LEN (16 * MIB)
/* The big transfer is under way this long after it was asked for. */
#define BIG_SETTLE_MS 2000
#define EXAMPLE_BIN BUILD_DIR "/examples/remote-copy"

static struct test_daemon td;
static const char *dev_name;
static char listen_arg[64];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void setup(void)
{
	const char *addr = getenv("RDMAMEM_RXE_ADDR");
	/* Links go when idle for a second: the cases see them leave. */
	const char *args[] = {
		"--socket-mode",    "0666", "--rdmacm-listen", listen_arg, "--link-idle-sec=1",
		"--log-level=info", NULL
	};

	dev_name = getenv("RDMAMEM_RXE_DEV");
	ck_assert_msg(dev_name && addr,
		      "RDMA cases run inside the Soft-RoCE VM (make vmtest), which sets "
		      "RDMAMEM_RXE_DEV and RDMAMEM_RXE_ADDR");
	snprintf(listen_arg, sizeof(listen_arg), "%s:7471", addr);
	test_daemon_start(&td, args);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

static struct rdmamem_client *client(void)
{
	struct rdmamem_client *c = test_client(td.socket);

	/* TCG: a 16 MiB transfer takes seconds. */
	ck_assert_int_eq(rdmamem_client_set_timeout(c, 120000), 0);
	return c;
}

/* A region of size bytes on the device, mapped at *ret_map. */
static uint64_t region_on(struct rdmamem_client *c, size_t size, uint8_t **ret_map)
{
	struct rdmamem_registration reg;
	uint64_t id;
	void *addr;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("xfer", size, &fd, &addr), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	ck_assert_msg(rdmamem_register_on(c, id, dev_name, &reg) == 0, "RegisterOn: %s",
		      rdmamem_client_error_message(c));
	*ret_map = addr;
	return id;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 11));
}

/* Client 1's exported A and client 2's B with A imported. */
struct pair {
	struct rdmamem_client *c1, *c2;
	uint64_t a, b, remote, export_id;
	uint8_t *ma, *mb;
	char *desc;
	char token[RDMAMEM_TOKEN_LEN + 1];
};

static void pair_open(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->c1 = client();
	p->a = region_on(p->c1, XFER_REGION, &p->ma);
	ck_assert_msg(rdmamem_region_export(p->c1, p->a, NULL, &p->desc, p->token, &p->export_id) ==
			      0,
		      "ExportRegion: %s", rdmamem_client_error_message(p->c1));
	p->c2 = client();
	p->b = region_on(p->c2, XFER_REGION, &p->mb);
	fill(p->mb, XFER_REGION, 5);
	ck_assert_msg(rdmamem_remote_import(p->c2, p->desc, &p->remote) == 0, "ImportRemote: %s",
		      rdmamem_client_error_message(p->c2));
}

static void pair_close(struct pair *p)
{
	if (p->c2)
		rdmamem_client_close(p->c2);
	if (p->c1)
		rdmamem_client_close(p->c1);
	munmap(p->ma, XFER_REGION);
	munmap(p->mb, XFER_REGION);
	free(p->desc);
}

static struct rdmamem_transfer_op xop(const struct pair *p, int op, uint64_t b_off, uint64_t a_off,
				      uint64_t len)
{
	return (struct rdmamem_transfer_op){ .op = op,
					     .region = p->b,
					     .offset = b_off,
					     .remote = p->remote,
					     .remote_offset = a_off,
					     .length = len };
}

static void transfer_ok(struct pair *p, const struct rdmamem_transfer_op *ops, size_t n,
			uint64_t bytes)
{
	uint64_t done = 0;
	double t0 = now_ms();

	ck_assert_msg(rdmamem_transfer(p->c2, ops, n, NULL, NULL, &done) == 0, "Transfer: %s: %s",
		      rdmamem_client_error_name(p->c2), rdmamem_client_error_message(p->c2));
	ck_assert_uint_eq(done, bytes);
	fprintf(stderr, "transfer of %zu ops, %" PRIu64 " bytes: %.1f ms\n", n, bytes,
		now_ms() - t0);
}

/* WRITE B→A, then READ A→B over B's bytes scrambled: byte-exact both ways,
 * at odd offsets, from one byte to 16 MiB (rxe's max message is 8 MiB: the
 * daemon splits). */
START_TEST(test_write_read_exact)
{
	static const struct {
		uint64_t len, b_off, a_off;
	} cases[] = {
		{ 1, 1, 3 },
		{ 4093, 4097, 8191 },
		{ MIB + 7, 3, 2 * MIB + 5 },
		{ 16 * MIB, 5, 17 * MIB + 1 },
	};
	struct pair p;

	pair_open(&p);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct rdmamem_transfer_op o;
		uint64_t len = cases[i].len;
		uint8_t *a = p.ma + cases[i].a_off, *b = p.mb + cases[i].b_off;

		ck_assert(memcmp(a, b, len) != 0 || len == 1);
		o = xop(&p, RDMAMEM_TRANSFER_WRITE, cases[i].b_off, cases[i].a_off, len);
		transfer_ok(&p, &o, 1, len);
		ck_assert_msg(memcmp(a, b, len) == 0, "WRITE of %" PRIu64 " bytes", len);
		/* A's neighbours untouched. */
		ck_assert_uint_eq(a[-1], 0);
		ck_assert_uint_eq(a[len], 0);

		fill(b, len, 77 + (unsigned)i);
		ck_assert(memcmp(a, b, len) != 0 || len == 1);
		if (len == 1)
			b[0] = (uint8_t)~a[0];
		o = xop(&p, RDMAMEM_TRANSFER_READ, cases[i].b_off, cases[i].a_off, len);
		transfer_ok(&p, &o, 1, len);
		ck_assert_msg(memcmp(a, b, len) == 0, "READ of %" PRIu64 " bytes", len);
	}
	pair_close(&p);
}
END_TEST

/*
 * A 10,000-descriptor batch in one call, packed (rdmamem_transfer_ranges():
 * 10,000 ranges not adjacent, so 10,000 WRs), WRITE then READ back over
 * scrambled bytes, byte-exact, the gaps between untouched; 1,000 listed
 * ops in one call (the listed form holds about 7,000); then 10,000 ranges
 * as a plan, posted whole and by index: only the indices named move.
 */
START_TEST(test_batch_and_plan)
{
	enum { N_LISTED = 1000, N = 10000 };
	struct rdmamem_transfer_op *ops = calloc(N_LISTED, sizeof(*ops));
	struct rdmamem_range *ranges = calloc(N, sizeof(*ranges));
	uint64_t idx[3] = { 9999, 17, 4242 }, plan, done = 0, bytes = 0;
	double t0;
	struct pair p;

	pair_open(&p);
	for (size_t i = 0; i < N; i++) {
		ranges[i] = (struct rdmamem_range){ .local_offset = 4 * MIB + i * 40 + 1,
						    .remote_offset = 5 * MIB + i * 56 + 7,
						    .length = 1 + i % 29 };
		bytes += ranges[i].length;
	}
	t0 = now_ms();
	ck_assert_msg(rdmamem_transfer_ranges(p.c2, RDMAMEM_TRANSFER_WRITE, p.b, 0, p.remote,
					      ranges, N, NULL, &done) == 0,
		      "Transfer batch: %s: %s", rdmamem_client_error_name(p.c2),
		      rdmamem_client_error_message(p.c2));
	fprintf(stderr, "batch of %d ranges, %" PRIu64 " bytes: %.1f ms\n", N, bytes,
		now_ms() - t0);
	ck_assert_uint_eq(done, bytes);
	for (size_t i = 0; i < N; i++) {
		const struct rdmamem_range *r = &ranges[i];

		ck_assert(memcmp(p.ma + r->remote_offset, p.mb + r->local_offset, r->length) == 0);
		ck_assert_uint_eq(p.ma[r->remote_offset + r->length], 0);
	}
	for (size_t i = 0; i < N; i++)
		memset(p.mb + ranges[i].local_offset, 0x5a, ranges[i].length);
	ck_assert_int_eq(rdmamem_transfer_ranges(p.c2, RDMAMEM_TRANSFER_READ, p.b, 0, p.remote,
						 ranges, N, NULL, &done),
			 0);
	ck_assert_uint_eq(done, bytes);
	for (size_t i = 0; i < N; i++)
		ck_assert(memcmp(p.ma + ranges[i].remote_offset, p.mb + ranges[i].local_offset,
				 ranges[i].length) == 0);
	memset(p.ma + 5 * MIB, 0, N * 56 + 64);

	bytes = 0;
	for (size_t i = 0; i < N_LISTED; i++) {
		uint64_t len = 1 + i % 13;

		ops[i] = xop(&p, RDMAMEM_TRANSFER_WRITE, i * 32 + 1, i * 48 + 7, len);
		bytes += len;
	}
	transfer_ok(&p, ops, N_LISTED, bytes);
	for (size_t i = 0; i < N_LISTED; i++) {
		ck_assert(memcmp(p.ma + ops[i].remote_offset, p.mb + ops[i].offset,
				 ops[i].length) == 0);
		ck_assert_uint_eq(p.ma[ops[i].remote_offset + ops[i].length], 0);
	}

	bytes = 0;
	for (size_t i = 0; i < N; i++) {
		ranges[i] = (struct rdmamem_range){ .local_offset = MIB + i * 32 + 3,
						    .remote_offset = 2 * MIB + i * 48 + 5,
						    .length = 1 + i % 17 };
		bytes += ranges[i].length;
	}
	ck_assert_msg(rdmamem_transfer_prepare(p.c2, p.b, p.remote, ranges, N, &plan) == 0,
		      "PrepareTransfer: %s", rdmamem_client_error_message(p.c2));
	/* By index: those three, and nothing else. */
	ck_assert_int_eq(rdmamem_transfer_post(p.c2, plan, RDMAMEM_TRANSFER_WRITE, idx, 3, NULL,
					       NULL, &done),
			 0);
	ck_assert_uint_eq(done, ranges[9999].length + ranges[17].length + ranges[4242].length);
	for (size_t i = 0; i < N; i++) {
		bool posted = i == 9999 || i == 17 || i == 4242;
		const struct rdmamem_range *r = &ranges[i];
		bool untouched = true;

		for (uint64_t k = 0; k < r->length; k++)
			untouched &= p.ma[r->remote_offset + k] == 0;
		if (posted)
			ck_assert(memcmp(p.ma + r->remote_offset, p.mb + r->local_offset,
					 r->length) == 0);
		else
			ck_assert_msg(untouched, "range %zu", i);
	}
	/* Whole, 10,000 WRs in one post. */
	ck_assert_int_eq(rdmamem_transfer_post(p.c2, plan, RDMAMEM_TRANSFER_WRITE, NULL, 0, NULL,
					       NULL, &done),
			 0);
	ck_assert_uint_eq(done, bytes);
	for (size_t i = 0; i < N; i++)
		ck_assert(memcmp(p.ma + ranges[i].remote_offset, p.mb + ranges[i].local_offset,
				 ranges[i].length) == 0);
	/* And READ back whole over scrambled bytes. */
	for (size_t i = 0; i < N; i++)
		memset(p.mb + ranges[i].local_offset, 0xa5, ranges[i].length);
	ck_assert_int_eq(rdmamem_transfer_post(p.c2, plan, RDMAMEM_TRANSFER_READ, NULL, 0, NULL,
					       NULL, &done),
			 0);
	for (size_t i = 0; i < N; i++)
		ck_assert(memcmp(p.ma + ranges[i].remote_offset, p.mb + ranges[i].local_offset,
				 ranges[i].length) == 0);
	ck_assert_int_eq(rdmamem_plan_release(p.c2, plan), 0);
	pair_close(&p);
	free(ops);
	free(ranges);
}
END_TEST

/* Client 1 waiting for a notification while client 2 transfers. */
struct waiter {
	struct pair *p;
	uint64_t a_off, b_off, len;
	int n;
	bool in_place;
	struct rdmamem_notification note;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->n = rdmamem_notifications_wait(w->p->c1, 60000, &w->note, 1);
	/* Checked now, as it arrives: the data came first. */
	if (w->n == 1)
		w->in_place = memcmp(w->p->ma + w->a_off, w->p->mb + w->b_off, w->len) == 0;
	return NULL;
}

/* Transfer{batch, notify} (rdmamem_transfer_ranges() with notify bytes):
 * client 1's WaitNotifications gets it with the bytes of that transfer in
 * A already. */
START_TEST(test_notify)
{
	struct waiter w = { .a_off = 1, .b_off = 333, .len = 8 * MIB + 11 };
	pthread_t th;
	struct pair p;
	int res;

	pair_open(&p);
	w.p = &p;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
	usleep(300 * 1000); /* waiting: it checks on arrival */
	/* The library's notify bytes, on the batch form. */
	{
		const struct rdmamem_range r = { w.b_off, w.a_off, w.len };
		const struct rdmamem_transfer_options o = { .notify = "done!!", .notify_len = 6 };

		res = rdmamem_transfer_ranges(p.c2, RDMAMEM_TRANSFER_WRITE, p.b, 0, p.remote, &r, 1,
					      &o, NULL);
	}
	ck_assert_msg(res == 0, "Transfer with notify: %s: %s", rdmamem_client_error_name(p.c2),
		      rdmamem_client_error_message(p.c2));
	pthread_join(th, NULL);
	ck_assert_int_eq(w.n, 1);
	ck_assert(w.in_place);
	ck_assert_uint_eq(w.note.len, 6);
	ck_assert_int_eq(memcmp(w.note.data, "done!!", 6), 0);
	ck_assert_uint_eq(w.note.export_id, p.export_id);
	ck_assert_uint_eq(w.note.sender_uid, getuid());
	pair_close(&p);
}
END_TEST

/* A transfer of BIG_OPS × BIG_LEN by client 2 on a thread. */
struct big {
	struct pair *p;
	pthread_t th;
	double t0;
	double hit_ms;       /* when the case asked for its deed */
	volatile double end; /* when the transfer ended, or 0 */
	int result;
	char name[128], message[512];
};

static void *big_thread(void *arg)
{
	struct big *g = arg;
	struct rdmamem_transfer_op ops[BIG_OPS];

	for (unsigned i = 0; i < BIG_OPS; i++)
		ops[i] = xop(g->p, RDMAMEM_TRANSFER_WRITE, 1 + (i % 2) * BIG_LEN, 3, BIG_LEN);
	g->result = rdmamem_transfer(g->p->c2, ops, BIG_OPS, NULL, NULL, NULL);
	if (g->result < 0) {
		snprintf(g->name, sizeof(g->name), "%s", rdmamem_client_error_name(g->p->c2));
		snprintf(g->message, sizeof(g->message), "%s",
			 rdmamem_client_error_message(g->p->c2));
	}
	g->end = now_ms() - g->t0;
	return NULL;
}

/* Under way: rxe under TCG completes the posted WRs late and together (no
 * progress reply comes before the end), so time says it. */
static void big_start(struct big *g, struct pair *p)
{
	memset(g, 0, sizeof(*g));
	g->p = p;
	g->t0 = now_ms();
	ck_assert_int_eq(pthread_create(&g->th, NULL, big_thread, g), 0);
	usleep(BIG_SETTLE_MS * 1000);
	ck_assert_msg(g->end == 0, "the transfer was over in %.0f ms", g->end);
}

/* Ended after the deed, with a named error, in bounded time (the client's
 * timeout). */
static void big_failed(struct big *g, const char *what)
{
	pthread_join(g->th, NULL);
	fprintf(stderr, "%s at %.0f ms: the transfer ended at %.0f ms: %d %s: %s\n", what,
		g->hit_ms, g->end, g->result, g->name, g->message);
	ck_assert_msg(g->result < 0, "%s: the transfer succeeded", what);
	ck_assert_msg(g->end > g->hit_ms, "%s: the transfer ended before", what);
	ck_assert_msg(strcmp(g->name, RDMAMEM_ERROR_REMOTE_ACCESS) == 0 ||
			      strcmp(g->name, RDMAMEM_ERROR_TRANSFER_FAILED) == 0 ||
			      strcmp(g->name, RDMAMEM_ERROR_PEER_UNREACHABLE) == 0,
		      "%s: %s", what, g->name);
}

/* Client 1 revokes the export's token during a large transfer: it ends
 * with a named error, and a new one is refused. */
START_TEST(test_revoke_mid_transfer)
{
	struct rdmamem_transfer_op o;
	struct big g;
	struct pair p;

	pair_open(&p);
	big_start(&g, &p);
	g.hit_ms = now_ms() - g.t0;
	ck_assert_int_eq(rdmamem_access_token_revoke(p.c1, p.token), 0);
	big_failed(&g, "revoked");
	o = xop(&p, RDMAMEM_TRANSFER_WRITE, 0, 0, 4096);
	ck_assert_int_lt(rdmamem_transfer(p.c2, &o, 1, NULL, NULL, NULL), 0);
	ck_assert_str_eq(rdmamem_client_error_name(p.c2), RDMAMEM_ERROR_PEER_UNREACHABLE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(p.c2), "access token"));
	pair_close(&p);
}
END_TEST

/* Client 1 unregisters A during a large transfer: a named error. */
START_TEST(test_unregister_mid_transfer)
{
	struct big g;
	struct pair p;

	pair_open(&p);
	big_start(&g, &p);
	g.hit_ms = now_ms() - g.t0;
	ck_assert_int_eq(rdmamem_unregister(p.c1, p.a), 0);
	big_failed(&g, "unregistered");
	pair_close(&p);
}
END_TEST

static int count_list(const char *method, const char *key)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	cJSON *root;
	int n;

	ck_assert_int_eq(rdmamem_list(c, method, &reply), 0);
	root = cJSON_Parse(reply);
	n = cJSON_GetArraySize(cJSON_GetObjectItem(root, key));
	cJSON_Delete(root);
	free(reply);
	rdmamem_client_close(c);
	return n;
}

static int base_regions, base_conns;

static bool back_to_baseline(void)
{
	return count_list("io.rdmamemd.ListRegions", "regions") == base_regions &&
	       count_list("io.rdmamemd.ListConnections", "connections") == base_conns;
}

/* Client 2 SIGKILLed during a large transfer: the daemon drains what was
 * posted, then lets go of everything: regions, links (and the connection
 * its endpoint admitted for them), fds, mappings. */
START_TEST(test_client_killed_mid_transfer)
{
	struct test_baseline base = { .settled = back_to_baseline,
				      .timeout_ms = 60000,
				      .what = "regions and RDMA connections back to baseline" };
	struct rdmamem_client *c1 = client();
	char token[RDMAMEM_TOKEN_LEN + 1], *desc = NULL;
	struct rdmamem_transfer_op o;
	struct pair p = {};
	uint8_t *ma;
	int sync[2], status;
	uint64_t a;
	char c;
	pid_t pid;

	a = region_on(c1, XFER_REGION, &ma);
	ck_assert_int_eq(rdmamem_region_export(c1, a, NULL, &desc, token, NULL), 0);
	base_regions = count_list("io.rdmamemd.ListRegions", "regions");
	base_conns = count_list("io.rdmamemd.ListConnections", "connections");
	test_baseline_take(&td, &base);
	ck_assert_int_eq(pipe(sync), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct big g;

		close(sync[0]);
		p.c2 = client();
		p.b = region_on(p.c2, XFER_REGION, &p.mb);
		if (rdmamem_remote_import(p.c2, desc, &p.remote) < 0)
			_exit(2);
		big_start(&g, &p);
		if (write(sync[1], "m", 1) != 1)
			_exit(3);
		pthread_join(g.th, NULL);
		_exit(4);
	}
	close(sync[1]);
	ck_assert_int_eq(read(sync[0], &c, 1), 1);
	close(sync[0]);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	test_baseline_assert(&td, &base);
	ck_assert_uint_eq(count_list("io.rdmamemd.ListRegions", "regions"), base_regions);

	/* A's owner is served, and a new importer's transfer works. */
	p.c1 = c1;
	p.a = a;
	p.ma = ma;
	p.desc = desc;
	p.c2 = client();
	p.b = region_on(p.c2, XFER_REGION, &p.mb);
	fill(p.mb, 4096, 9);
	ck_assert_int_eq(rdmamem_remote_import(p.c2, desc, &p.remote), 0);
	o = xop(&p, RDMAMEM_TRANSFER_WRITE, 0, 0, 4096);
	transfer_ok(&p, &o, 1, 4096);
	ck_assert_int_eq(memcmp(p.ma, p.mb, 4096), 0);
	pair_close(&p);
}
END_TEST

/* examples/remote-copy: one process exports a region and waits, another
 * imports the descriptor and READs the whole region, checksum checked. */
START_TEST(test_example_remote_copy)
{
	const char *exp_argv[] = { EXAMPLE_BIN, "export", td.socket, dev_name, "1048583", NULL };
	char *desc_line, *sum_line, *out = NULL, *err = NULL, *d, *s;
	int out_fd, r;
	pid_t exp;

	exp = test_spawn(exp_argv, &out_fd);
	desc_line = test_read_line(out_fd, 60000);
	sum_line = test_read_line(out_fd, 60000);
	ck_assert_ptr_nonnull(desc_line);
	ck_assert_ptr_nonnull(sum_line);
	ck_assert_msg(strncmp(desc_line, "descriptor ", 11) == 0, "%s", desc_line);
	ck_assert_msg(strncmp(sum_line, "checksum ", 9) == 0, "%s", sum_line);
	d = desc_line + 11;
	s = sum_line + 9;
	d[strcspn(d, "\n")] = 0;
	s[strcspn(s, "\n")] = 0;
	{
		const char *imp_argv[] = { EXAMPLE_BIN, "import", td.socket, dev_name, d, s, NULL };

		r = test_run(imp_argv, &out, &err);
	}
	fprintf(stderr, "remote-copy import: exit %d: %s%s", r, out, err);
	ck_assert_int_eq(r, 0);
	ck_assert_ptr_nonnull(strstr(out, "checksum ok"));
	/* A wrong checksum is said so. */
	free(out);
	free(err);
	{
		const char *imp_argv[] = {
			EXAMPLE_BIN, "import", td.socket, dev_name, d, "1", NULL
		};

		r = test_run(imp_argv, &out, &err);
	}
	ck_assert_int_ne(r, 0);
	ck_assert_ptr_nonnull(strstr(err, "checksum"));
	free(out);
	free(err);
	kill(exp, SIGKILL);
	ck_assert_int_eq(waitpid(exp, NULL, 0), exp);
	close(out_fd);
	free(desc_line);
	free(sum_line);
}
END_TEST

Suite *transfer_vm_suite(void)
{
	Suite *s = suite_create("transfer-vm");
	TCase *tc = tcase_create("rxe-transfer");

	tcase_set_tags(tc, "rdma");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	test_add_tagged(tc, "rdma", test_write_read_exact);
	test_add_tagged(tc, "rdma", test_batch_and_plan);
	test_add_tagged(tc, "rdma", test_notify);
	test_add_tagged(tc, "rdma", test_revoke_mid_transfer);
	test_add_tagged(tc, "rdma", test_unregister_mid_transfer);
	test_add_tagged(tc, "rdma", test_client_killed_mid_transfer);
	test_add_tagged(tc, "rdma", test_example_remote_copy);
	suite_add_tcase(s, tc);
	return s;
}
