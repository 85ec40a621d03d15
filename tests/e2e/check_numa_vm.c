/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The nearest device on a real kernel with real NUMA nodes (tag "numa",
 * make vmtest-numa): one VM with nodes 0 and 1 and a NIC on each node's
 * PCI expander bridge (run-vm.sh --numa), rxe0 on node 0's and rxe1 on
 * node 1's, each looped to the daemon's own rdmacm endpoint on its
 * address. The guest's sysfs, not a tree of the test's own
 * (tests/unit/check_paths.c), tells the daemon where each device is.
 *
 * Client 1 owns region A, registered on both devices, and exports it (the
 * descriptor names both). Client 2 owns region B, whose pages it binds to
 * one node before it first touches them (mbind of its mapping of the
 * memfd: the binding is the memfd's shared policy, so the daemon's own
 * mapping finds them there too), registers it on both devices and moves
 * bytes between B and A. The rule (remote/paths.h): a batch under 4 MiB
 * goes on the device nearest B's node, a larger one stripes over both.
 * Who carried what: GetStats's per-device transfer counters (the daemon's
 * own view) and rxe's hw_counters (the kernel's: packets the device sent,
 * both ends of the loop being on the one device).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#define MIB (1ULL << 20)
#define REGION_SIZE (20 * MIB)
/* A batch under TRANSFER_STRIPE_MIN (4 MiB): 8 ops of 256 KiB, apart. */
#define SMALL_OPS 8U
#define SMALL_LEN (256 * 1024ULL)
#define SMALL_STRIDE (MIB + 4096)
#define LARGE_LEN (16 * MIB)
/* rxe's MTU on virtio-net's 1500: a packet carries at most this. */
#define RXE_MTU 1024U
/* Packets a device that carried none of a transfer may still send in the
 * meantime (connection management): far below one carried batch. */
#define IDLE_PKTS_MAX 64U

static struct test_daemon td;
static char log_path[128];
static const char *devs[2];

static void setup(void)
{
	const char *a0 = getenv("RDMAMEM_RXE_ADDR"), *a1 = getenv("RDMAMEM_RXE_ADDR1");
	char listen[64];
	const char *args[] = { "--socket-mode",    "0666", "--rdmacm-listen", listen,
			       "--log-level=info", NULL };

	devs[0] = getenv("RDMAMEM_RXE_DEV");
	devs[1] = getenv("RDMAMEM_RXE_DEV1");
	ck_assert_msg(getenv("RDMAMEM_NUMA") && devs[0] && devs[1] && a0 && a1,
		      "NUMA cases run inside the NUMA VM (make vmtest-numa), which sets "
		      "RDMAMEM_NUMA and RDMAMEM_RXE_DEV[1]/RDMAMEM_RXE_ADDR[1]");
	snprintf(listen, sizeof(listen), "%s:7471,%s:7471", a0, a1);
	snprintf(log_path, sizeof(log_path), "/tmp/rdmamemd-numa.%d.log", (int)getpid());
	test_daemon_log_path = log_path;
	test_daemon_start(&td, args);
	test_daemon_log_path = NULL;
}

static void teardown(void)
{
	test_daemon_stop(&td);
	unlink(log_path);
}

static struct rdmamem_client *client(void)
{
	struct rdmamem_client *c = test_client(td.socket);

	/* TCG: a 16 MiB transfer takes seconds. */
	ck_assert_int_eq(rdmamem_client_set_timeout(c, 120000), 0);
	return c;
}

/* The first line of a sysfs file, without its newline (test_read_file()
 * takes a file's size from stat, which is a page for every sysfs file). */
static char *sysfs_line(const char *path)
{
	char buf[1024], *line;
	FILE *f = fopen(path, "re");

	ck_assert_msg(f, "%s: %m", path);
	ck_assert_msg(fgets(buf, sizeof(buf), f), "%s: empty", path);
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	line = strdup(buf);
	ck_assert_ptr_nonnull(line);
	return line;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 11));
}

/* The node the kernel says each page of [p, p + len) is on, all of them
 * node: move_pages() without a target only asks. */
static void assert_pages_on(const uint8_t *p, size_t len, int node)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page;
	void **pages = calloc(n, sizeof(*pages));
	int *status = calloc(n, sizeof(*status));

	ck_assert(pages && status);
	for (size_t i = 0; i < n; i++)
		pages[i] = (void *)(p + i * page);
	ck_assert_int_eq(syscall(SYS_move_pages, 0, n, pages, NULL, status, 0), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(status[i] == node, "page %zu of %zu is on node %d, not %d", i, n,
			      status[i], node);
	free(pages);
	free(status);
}

/*
 * A region of REGION_SIZE registered on both devices, mapped at *ret_map;
 * with node >= 0 its pages bound to node before anything touches them
 * (then filled), checked page by page, and GetRegion says that node too.
 */
static uint64_t region_on_both(struct rdmamem_client *c, int node, uint8_t **ret_map)
{
	struct rdmamem_registration reg;
	uint64_t id;
	void *addr;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("numa", REGION_SIZE, &fd, &addr), 0);
	if (node >= 0) {
		unsigned long mask = 1UL << node;

		ck_assert_msg(syscall(SYS_mbind, addr, REGION_SIZE, MPOL_BIND, &mask,
				      sizeof(mask) * 8, 0) == 0,
			      "mbind to node %d: %s", node, strerror(errno));
		fill(addr, REGION_SIZE, 5);
		assert_pages_on(addr, REGION_SIZE, node);
	}
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(rdmamem_register_on(c, id, devs[i], &reg) == 0, "RegisterOn %s: %s",
			      devs[i], rdmamem_client_error_message(c));
	if (node >= 0) {
		char params[64], *reply = NULL;
		cJSON *root, *loc;

		snprintf(params, sizeof(params), "{\"region\":\"%" PRIu64 "\"}", id);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetRegion", params, NULL, 0, &reply,
					      NULL, NULL),
				 0);
		root = cJSON_Parse(reply);
		loc = cJSON_GetObjectItem(root, "location");
		ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItem(loc, "numa_node")) &&
				      cJSON_GetObjectItem(loc, "numa_node")->valueint == node,
			      "GetRegion's location: %s", reply);
		cJSON_Delete(root);
		free(reply);
	}
	*ret_map = addr;
	return id;
}

/* Client 1's exported A (pages wherever the kernel puts them) and client
 * 2's B on node, with A imported. */
struct pair {
	struct rdmamem_client *c1, *c2;
	uint64_t a, b, remote;
	uint8_t *ma, *mb;
	char *desc;
};

static void pair_open(struct pair *p, int node)
{
	char token[RDMAMEM_TOKEN_LEN + 1];

	memset(p, 0, sizeof(*p));
	p->c1 = client();
	p->a = region_on_both(p->c1, -1, &p->ma);
	ck_assert_msg(rdmamem_region_export(p->c1, p->a, NULL, &p->desc, token, NULL) == 0,
		      "ExportRegion: %s", rdmamem_client_error_message(p->c1));
	p->c2 = client();
	p->b = region_on_both(p->c2, node, &p->mb);
	ck_assert_msg(rdmamem_remote_import(p->c2, p->desc, &p->remote) == 0, "ImportRemote: %s",
		      rdmamem_client_error_message(p->c2));
}

static void pair_close(struct pair *p)
{
	rdmamem_client_close(p->c2);
	rdmamem_client_close(p->c1);
	munmap(p->ma, REGION_SIZE);
	munmap(p->mb, REGION_SIZE);
	free(p->desc);
}

/* What each device carried so far: the daemon's counters and rxe's. */
struct carried {
	uint64_t reads, bytes_in, writes, bytes_out;
	uint64_t sent_pkts;
};

static uint64_t sent_pkts(const char *dev)
{
	char path[128], *text;
	uint64_t v;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts", dev);
	text = sysfs_line(path);
	v = strtoull(text, NULL, 10);
	free(text);
	return v;
}

static void carried_now(struct rdmamem_client *c, struct carried ret[2])
{
	char *reply = NULL;
	const cJSON *d;
	cJSON *root;
	bool seen[2] = {};

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetStats", NULL, NULL, 0, &reply, NULL, NULL),
			 0);
	root = cJSON_Parse(reply);
	cJSON_ArrayForEach(d, cJSON_GetObjectItem(root, "transfer_devices")) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(d, "device"));

		for (int i = 0; i < 2; i++) {
			if (!name || strcmp(name, devs[i]) != 0)
				continue;
			ck_assert_int_eq(json_get_u64(d, "reads", &ret[i].reads), 0);
			ck_assert_int_eq(json_get_u64(d, "bytes_in", &ret[i].bytes_in), 0);
			ck_assert_int_eq(json_get_u64(d, "writes", &ret[i].writes), 0);
			ck_assert_int_eq(json_get_u64(d, "bytes_out", &ret[i].bytes_out), 0);
			seen[i] = true;
		}
	}
	ck_assert_msg(seen[0] && seen[1], "GetStats's transfer_devices lacks a device: %s", reply);
	cJSON_Delete(root);
	free(reply);
	for (int i = 0; i < 2; i++)
		ret[i].sent_pkts = sent_pkts(devs[i]);
}

static void transfer_ok(struct pair *p, const struct rdmamem_transfer_op *ops, size_t n,
			uint64_t bytes)
{
	uint64_t done = 0;

	ck_assert_msg(rdmamem_transfer(p->c2, ops, n, NULL, NULL, &done) == 0, "Transfer: %s: %s",
		      rdmamem_client_error_name(p->c2), rdmamem_client_error_message(p->c2));
	ck_assert_uint_eq(done, bytes);
}

/* ops[0..n) of one kind, B's offset i * stride + 1 to A's i * stride + 3. */
static void ops_of(const struct pair *p, int op, size_t n, uint64_t len, uint64_t stride,
		   struct rdmamem_transfer_op *ret)
{
	for (size_t i = 0; i < n; i++)
		ret[i] = (struct rdmamem_transfer_op){ .op = op,
						       .region = p->b,
						       .offset = i * stride + 1,
						       .remote = p->remote,
						       .remote_offset = i * stride + 3,
						       .length = len };
}

static void assert_same(const struct pair *p, const struct rdmamem_transfer_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(memcmp(p->mb + ops[i].offset, p->ma + ops[i].remote_offset,
				     ops[i].length) == 0,
			      "op %zu: A and B differ", i);
}

/* The PCI function of dev's NIC (the parent of the virtio device its
 * netdev names), as a path under /sys/devices, into ret. */
static void nic_function(const char *dev, char ret[PATH_MAX])
{
	_cleanup_free_ char *parent = NULL;
	char path[PATH_MAX], real[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/parent", dev);
	parent = sysfs_line(path);
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/..", parent);
	ck_assert_ptr_nonnull(realpath(path, real));
	ck_assert_msg(strncmp(real, "/sys/devices/pci", 16) == 0, "%s's NIC %s at %s", dev, parent,
		      real);
	snprintf(ret, PATH_MAX, "%s", real + strlen("/sys/devices/"));
}

/* The guest is what the bed says: two nodes at distance 21, and each
 * device's NIC a PCI function of its own node (the virtio device under it
 * has no node of its own); the daemon found the same at discovery. */
START_TEST(test_places)
{
	_cleanup_free_ char *dist = sysfs_line("/sys/devices/system/node/node0/distance");
	_cleanup_free_ char *log = test_read_file(log_path);

	ck_assert_msg(strcmp(dist, "10 21") == 0, "node0/distance: %s", dist);
	ck_assert_ptr_nonnull(log);
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *node = NULL, *path = NULL, *head = NULL, *want = NULL;
		char fn[PATH_MAX];
		const char *line;
		size_t len;

		nic_function(devs[i], fn);
		ck_assert_int_ge(asprintf(&path, "/sys/devices/%s/numa_node", fn), 0);
		node = sysfs_line(path);
		ck_assert_msg(atoi(node) == i, "%s (PCI %s) is on node %s", devs[i], fn, node);
		/* "RDMA device rxe1 (... PCI pci0000:80/..., NUMA node 1)" */
		ck_assert_int_ge(asprintf(&head, "RDMA device %s (", devs[i]), 0);
		ck_assert_int_ge(asprintf(&want, "PCI %s, NUMA node %d)", fn, i), 0);
		line = strstr(log, head);
		ck_assert_msg(line, "the daemon did not log %s: %s", devs[i], log);
		len = strcspn(line, "\n");
		ck_assert_msg(memmem(line, len, want, strlen(want)),
			      "the daemon's line for %s lacks '%s': %.*s", devs[i], want, (int)len,
			      line);
	}
}
END_TEST

/*
 * A batch under 4 MiB, WRITE then READ, with B's pages on node: all of it
 * on the device of that node, none on the other, in the daemon's counters
 * and in the packets each device sent.
 */
static void small_batch_on(int node)
{
	struct rdmamem_transfer_op ops[SMALL_OPS];
	struct carried before[2], after[2];
	const uint64_t bytes = SMALL_OPS * SMALL_LEN;
	int near = node, far = 1 - node;
	struct pair p;

	pair_open(&p, node);
	carried_now(p.c2, before);
	ops_of(&p, RDMAMEM_TRANSFER_WRITE, SMALL_OPS, SMALL_LEN, SMALL_STRIDE, ops);
	transfer_ok(&p, ops, SMALL_OPS, bytes);
	assert_same(&p, ops, SMALL_OPS);
	fill(p.mb, REGION_SIZE, 9);
	ck_assert(memcmp(p.mb + ops[0].offset, p.ma + ops[0].remote_offset, SMALL_LEN) != 0);
	ops_of(&p, RDMAMEM_TRANSFER_READ, SMALL_OPS, SMALL_LEN, SMALL_STRIDE, ops);
	transfer_ok(&p, ops, SMALL_OPS, bytes);
	assert_same(&p, ops, SMALL_OPS);
	carried_now(p.c2, after);
	fprintf(stderr,
		"B on node %d: %s wrote %" PRIu64 " and read %" PRIu64 " bytes, sent %" PRIu64
		" packets; %s wrote %" PRIu64 " and read %" PRIu64 ", sent %" PRIu64 "\n",
		node, devs[near], after[near].bytes_out - before[near].bytes_out,
		after[near].bytes_in - before[near].bytes_in,
		after[near].sent_pkts - before[near].sent_pkts, devs[far],
		after[far].bytes_out - before[far].bytes_out,
		after[far].bytes_in - before[far].bytes_in,
		after[far].sent_pkts - before[far].sent_pkts);
	ck_assert_uint_eq(after[near].bytes_out - before[near].bytes_out, bytes);
	ck_assert_uint_eq(after[near].bytes_in - before[near].bytes_in, bytes);
	ck_assert_uint_eq(after[far].bytes_out, before[far].bytes_out);
	ck_assert_uint_eq(after[far].bytes_in, before[far].bytes_in);
	ck_assert_uint_eq(after[far].writes, before[far].writes);
	ck_assert_uint_eq(after[far].reads, before[far].reads);
	/* The kernel's side: the WRITEs' data and the READ responses went out
	 * of the near device, packet by packet. */
	ck_assert_uint_ge(after[near].sent_pkts - before[near].sent_pkts, 2 * bytes / RXE_MTU);
	ck_assert_uint_le(after[far].sent_pkts - before[far].sent_pkts, IDLE_PKTS_MAX);
	pair_close(&p);
}

/* Node 1: rxe1, which comes second in the discovery order. */
START_TEST(test_small_node1)
{
	small_batch_on(1);
}
END_TEST

START_TEST(test_small_node0)
{
	small_batch_on(0);
}
END_TEST

/* 16 MiB in one op from B on node 1: striped, both devices carry some of
 * it (the daemon's counters and rxe's packets), and the bytes arrive. */
START_TEST(test_large_stripes)
{
	struct carried before[2], after[2];
	struct rdmamem_transfer_op op;
	uint64_t sum = 0;
	struct pair p;

	pair_open(&p, 1);
	carried_now(p.c2, before);
	ops_of(&p, RDMAMEM_TRANSFER_WRITE, 1, LARGE_LEN, 0, &op);
	transfer_ok(&p, &op, 1, LARGE_LEN);
	assert_same(&p, &op, 1);
	carried_now(p.c2, after);
	for (int i = 0; i < 2; i++) {
		uint64_t b = after[i].bytes_out - before[i].bytes_out;
		uint64_t pkts = after[i].sent_pkts - before[i].sent_pkts;

		fprintf(stderr,
			"16 MiB from node 1: %s wrote %" PRIu64 " bytes, sent %" PRIu64
			" packets\n",
			devs[i], b, pkts);
		ck_assert_msg(b > 0, "%s carried nothing of a 16 MiB transfer", devs[i]);
		ck_assert_uint_ge(pkts, b / RXE_MTU);
		sum += b;
	}
	ck_assert_uint_eq(sum, LARGE_LEN);
	pair_close(&p);
}
END_TEST

Suite *numa_vm_suite(void)
{
	Suite *s = suite_create("numa-vm");
	TCase *tc = tcase_create("rxe-numa");

	tcase_set_tags(tc, "numa");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	test_add_tagged(tc, "numa", test_places);
	test_add_tagged(tc, "numa", test_small_node1);
	test_add_tagged(tc, "numa", test_small_node0);
	test_add_tagged(tc, "numa", test_large_stripes);
	suite_add_tcase(s, tc);
	return s;
}
