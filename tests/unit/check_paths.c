/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which device carries a transfer (daemon/remote/paths.c, core/topo.c) and
 * GPU regions as transfer endpoints, over the fake verbs with two devices
 * and a sysfs tree of the test's own:
 *
 *   fake0  PCI pci0000:00/0000:00:01.0/0000:01:00.0, NUMA node 0 (its
 *          class/infiniband entry links to the function, as a NIC's does)
 *   fake1  PCI pci0000:80/0000:80:01.0/0000:81:00.0, NUMA node 1 (no device
 *          link: its "parent" names netdev eth1, as rxe's does, whose
 *          device is a virtio device under the function, as virtio-net's is)
 *   GPU 1  of the fake CUDA (bus id 0000:11:00.0) behind pci0000:80's
 *          second port: 4 hops from fake1, 6 from fake0
 *   nodes  0 and 1 at distance 21 (the SLIT), both measured at 10 GB/s
 *
 * Device i of the fake has the address 10.0.<i>.1/24 and routes 10.0.<i>.x
 * (fake.h); the test gives the path cache that interface list. The remote
 * region has two devices, one on each network, and every connection lands
 * on this process's own endpoint (the fake's passive side is fake0, where
 * the link fixture's "remote" buffer is registered), so bytes move by the
 * fake's checked memcpy. The per-device counters (device.h's xfer) tell
 * which device carried what.
 *
 * The GPU cases use the fake CUDA, whose device memory is host memory at
 * the device address, so the fake verbs can reach a dma-buf MR's bytes at
 * its iova (fake_verbs_dmabuf_at_iova) and check READ and WRITE byte by
 * byte. The GPU machine has no RDMA device: there, the "cuda" case hands a
 * real VMM allocation's dma-buf to the (fake) verbs and checks what they
 * were given; bytes through a NIC are not tested anywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/core/topo.h"
#include "daemon/gpu/cuda.h"
#include "daemon/rdma/mreg.h"
#include "daemon/remote/descriptor.h"
#include "daemon/remote/export.h"
#include "daemon/remote/paths.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/remote.h"
#include "daemon/remote/transfer.h"
#include "proto/errors.h"
#include "tests/fakes/fake.h"
#include "tests/unit/link-fixture.h"
#include "tests/testlib.h"

#if HAVE_CUDA_H
#include "daemon/gpu/cuda-ops.h"
#include "daemon/gpu/gpu.h"
#include "tests/fakes/fake-cuda.h"
#endif

#define LOCAL_SIZE (8U << 20)
#define PIECE 60000U
/* READs of PIECE bytes that together pass TRANSFER_STRIPE_MIN. */
#define N_LARGE ((unsigned)(TRANSFER_STRIPE_MIN / PIECE) + 2)

static char root[64];
static struct link_fixture lf;
static struct remote_ctx ctx;
static struct device *dev0, *dev1;

/* ---- the sysfs tree ---- */

static void mkdirs(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void link_to(const char *target, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	ck_assert_int_eq(symlink(target, path), 0);
}

static void make_tree(void)
{
	snprintf(root, sizeof(root), "/tmp/rdmamemd-sysfs.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	mkdirs("devices/pci0000:00/0000:00:01.0/0000:01:00.0");
	put("devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node", "0\n");
	mkdirs("devices/pci0000:80/0000:80:01.0/0000:81:00.0");
	put("devices/pci0000:80/0000:80:01.0/0000:81:00.0/numa_node", "1\n");
	mkdirs("devices/pci0000:80/0000:80:02.0/0000:11:00.0");
	put("devices/pci0000:80/0000:80:02.0/0000:11:00.0/numa_node", "1\n");
	mkdirs("devices/system/node/node0");
	mkdirs("devices/system/node/node1");
	put("devices/system/node/node0/distance", "10 21\n");
	put("devices/system/node/node1/distance", "21 10\n");
	mkdirs("class/infiniband/fake0");
	link_to("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
		"class/infiniband/fake0/device");
	mkdirs("class/infiniband/fake1");
	put("class/infiniband/fake1/parent", "eth1\n");
	mkdirs("class/net/eth1");
	/* As virtio-net's: the virtio device under the PCI function, with no
	 * numa_node of its own. */
	mkdirs("devices/pci0000:80/0000:80:01.0/0000:81:00.0/virtio1");
	link_to("../../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/virtio1",
		"class/net/eth1/device");
	mkdirs("bus/pci/devices");
	link_to("../../../devices/pci0000:80/0000:80:02.0/0000:11:00.0",
		"bus/pci/devices/0000:11:00.0");
}

static void remove_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* ---- the fixture ---- */

struct outcome {
	bool done;
	int result;
	struct errinfo e;
};

static void on_done(void *userdata, struct transfer *t, int result, struct errinfo *e)
{
	struct outcome *o = userdata;

	(void)t;
	o->done = true;
	o->result = result;
	o->e = *e;
	*e = (struct errinfo){};
}

static const struct transfer_cb cb = { .done = on_done };

static void setup(void)
{
	vb = &fake_vb_ops;
	fake_verbs_reset();
	fake_verbs_devices(2);
	make_tree();
	link_fixture_init_at(&lf, "0.0.0.0:7471", NULL, root);
	dev0 = device_find(&lf.rdma, "fake0");
	dev1 = device_find(&lf.rdma, "fake1");
	ck_assert_ptr_nonnull(dev0);
	ck_assert_ptr_nonnull(dev1);
	remote_ctx_init(&ctx, &lf.f.core, &lf.rdma);
	plan_init(&ctx);
	link_pool_init(&ctx.links, &lf.f.loop,
		       &(struct link_pool_config){ .window = 16, .idle_sec = 60 });
	transfer_engine_init(&ctx, &lf.f.regions);
	/* The fake devices' networks, for good. */
	ctx.paths.ifs[0] =
		(struct paths_ifaddr){ .addr = htonl(0x0a000001), .mask = htonl(0xffffff00) };
	ctx.paths.ifs[1] =
		(struct paths_ifaddr){ .addr = htonl(0x0a000101), .mask = htonl(0xffffff00) };
	ctx.paths.n_ifs = 2;
	ctx.paths.ifs_known = true;
	ctx.paths.ifs_expiry = UINT64_MAX;
	/* Both nodes measured alike: the distance decides. */
	lf.f.regions.membw.done = true;
	lf.f.regions.membw.numa = true;
	lf.f.regions.membw.n_nodes = 2;
	lf.f.regions.membw.node_bps[0] = lf.f.regions.membw.node_bps[1] = 10000000000ULL;
}

static void teardown(void)
{
	ck_assert_uint_eq(ctx.n_transfers, 0);
	link_pool_stop(&ctx.links);
	LINK_RUN_UNTIL(&lf, ctx.links.n_links == 0);
	ck_assert_int_eq(link_pool_done(&ctx.links), 0);
	session_close(lf.f.owner);
	link_fixture_done(&lf);
	remote_ctx_done(&ctx);
	fake_verbs_reset();
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
	remove_tree();
}

static void register_on(struct region *r, struct device *dev)
{
	struct mreg *m = mreg_ensure(r, dev, NULL);

	ck_assert_ptr_nonnull(m);
	LINK_RUN_UNTIL(&lf, m->state != MREG_PENDING);
	ck_assert_msg(m->state == MREG_REGISTERED, "%s", m->error ?: "");
}

/* The fixture's "remote" buffer as a region with a device on each
 * network: 10.0.0.2 and 10.0.1.2, as the remote daemon would export it. */
static struct remote *import_remote(void)
{
	struct descriptor d = { .access = DESCRIPTOR_ACCESS_READ | DESCRIPTOR_ACCESS_WRITE,
				.id = 77,
				.length = LINK_FIXTURE_SIZE,
				.n_endpoints = 2,
				.n_devices = 2 };
	struct errinfo e = {};
	struct remote *rem;

	memcpy(d.token, lf.token->raw, TOKEN_BYTES);
	for (int i = 0; i < 2; i++) {
		uint8_t a[4] = { 10, 0, (uint8_t)i, 2 };

		d.endpoints[i].family = 4;
		d.endpoints[i].port = 7471;
		memcpy(d.endpoints[i].addr, a, 4);
		snprintf(d.devices[i].name, sizeof(d.devices[i].name), "rfake%d", i);
		d.devices[i].addr = (uint64_t)(uintptr_t)lf.remote.buf;
		d.devices[i].rkey = lf.remote.rkey;
		d.devices[i].port = 1;
		d.devices[i].gid[10] = d.devices[i].gid[11] = 0xff;
		memcpy(d.devices[i].gid + 12, a, 4);
	}
	ck_assert_int_eq(remote_import(&ctx, lf.f.owner, &d, &rem, &e), 0);
	return rem;
}

static void run(const struct transfer_op *ops, size_t n)
{
	struct transfer *t = NULL;
	struct errinfo e = {};
	struct outcome o = {};
	int res;

	res = transfer_start(&ctx, lf.f.owner, ops, n, NULL, 0, &cb, &o, &t, &e);
	ck_assert_msg(res == 0, "transfer_start: %d %s", res, e.message);
	LINK_RUN_UNTIL(&lf, o.done);
	transfer_free(t);
	ck_assert_msg(o.result == 0, "transfer: %d %s", o.result, o.e.message);
}

static struct transfer_op op(uint8_t code, const struct region *r, uint64_t off,
			     const struct remote *rem, uint64_t roff, uint64_t len)
{
	return (struct transfer_op){ .opcode = code,
				     .region = r->id,
				     .offset = off,
				     .remote = rem->id,
				     .remote_offset = roff,
				     .length = len };
}

/* Bytes each device carried, both ways, since setup. */
static uint64_t carried(const struct device *dev)
{
	return dev->xfer.bytes_in + dev->xfer.bytes_out;
}

/* N_LARGE READs of the remote's first PIECE bytes into r at i * PIECE (a
 * batch past TRANSFER_STRIPE_MIN); each piece checked at bytes(). */
static void read_large(struct region *r, struct remote *rem, uint8_t *(*bytes)(struct region *))
{
	struct transfer_op *ops = calloc(N_LARGE, sizeof(*ops));

	ck_assert_ptr_nonnull(ops);
	for (unsigned i = 0; i < N_LARGE; i++)
		ops[i] = op(WR_READ, r, (uint64_t)i * PIECE, rem, 0, PIECE);
	run(ops, N_LARGE);
	for (unsigned i = 0; i < N_LARGE; i++)
		ck_assert_mem_eq(bytes(r) + (size_t)i * PIECE, lf.remote.buf, PIECE);
	free(ops);
}

static uint8_t *host_bytes(struct region *r)
{
	return r->addr;
}

/* ---- topology ---- */

START_TEST(test_topology)
{
	struct topo_place p;

	/* Read at discovery: a NIC through its device link, rxe through its
	 * netdev, up from its virtio device to the PCI function. */
	ck_assert_str_eq(dev0->place.pci, "pci0000:00/0000:00:01.0/0000:01:00.0");
	ck_assert_int_eq(dev0->place.numa_node, 0);
	ck_assert_str_eq(dev1->place.pci, "pci0000:80/0000:80:01.0/0000:81:00.0");
	ck_assert_int_eq(dev1->place.numa_node, 1);
	/* A GPU by its bus id, as CUDA and NVML write it. */
	topo_pci_bus_id(root, "0000:11:00.0", &p);
	ck_assert_str_eq(p.pci, "pci0000:80/0000:80:02.0/0000:11:00.0");
	topo_pci_bus_id(root, "00000000:11:00.0", &p);
	ck_assert_str_eq(p.pci, "pci0000:80/0000:80:02.0/0000:11:00.0");
	topo_pci_bus_id(root, "0000:12:00.0", &p);
	ck_assert_str_eq(p.pci, "");
	ck_assert_int_eq(p.numa_node, -1);
	topo_rdma_device(root, "nosuch0", &p);
	ck_assert_str_eq(p.pci, "");
	/* Hops: up to the common bridge and down. */
	ck_assert_int_eq(topo_pci_hops("pci0000:80/0000:80:02.0/0000:11:00.0", dev1->place.pci), 4);
	ck_assert_int_eq(topo_pci_hops("pci0000:80/0000:80:02.0/0000:11:00.0", dev0->place.pci), 6);
	ck_assert_int_eq(topo_pci_hops(dev1->place.pci, dev1->place.pci), 0);
	ck_assert_int_eq(topo_pci_hops("a/b", "a/bc"), 2);
	ck_assert_int_eq(topo_pci_hops("", dev1->place.pci), -1);
	/* The SLIT. */
	ck_assert_int_eq(topo_numa_distance(root, 0, 1), 21);
	ck_assert_int_eq(topo_numa_distance(root, 1, 1), TOPO_NUMA_LOCAL);
	ck_assert_int_eq(topo_numa_distance(root, 0, 2), -1);
	ck_assert_int_eq(topo_numa_distance(root, -1, 0), -1);
}
END_TEST

/* Host memory on node 1: a small transfer goes on fake1 (node 1), though
 * fake0 comes first; on node 0, on fake0; a large one stripes over both.
 * The interface list is the cache's: no dump per transfer. */
START_TEST(test_host_nearest_numa)
{
	struct region *r = mem_fixture_import(&lf.f, LOCAL_SIZE);
	struct remote *rem = import_remote();
	struct transfer_op o1;
	uint64_t before0, before1;

	r->access |= REGION_ACCESS_LOCAL_WRITE;
	register_on(r, dev0);
	register_on(r, dev1);
	for (size_t i = 0; i < LOCAL_SIZE; i++)
		host_bytes(r)[i] = (uint8_t)(i * 7 + 1);

	/* The memory's node is the import's finding on this machine; the
	 * test puts it where the tree has a NIC. */
	r->numa_node = 1;
	o1 = op(WR_WRITE, r, 3, rem, 5, 1001);
	run(&o1, 1);
	ck_assert_mem_eq(host_bytes(r) + 3, lf.remote.buf + 5, 1001);
	ck_assert_uint_eq(dev1->xfer.bytes_out, 1001);
	ck_assert_uint_eq(carried(dev0), 0);

	r->numa_node = 0;
	o1 = op(WR_READ, r, 100001, rem, 7, 999);
	run(&o1, 1);
	ck_assert_mem_eq(host_bytes(r) + 100001, lf.remote.buf + 7, 999);
	ck_assert_uint_eq(dev0->xfer.bytes_in, 999);
	ck_assert_uint_eq(carried(dev1), 1001);

	/* Past TRANSFER_STRIPE_MIN: both device pairs carry bytes. */
	before0 = carried(dev0);
	before1 = carried(dev1);
	read_large(r, rem, host_bytes);
	ck_assert_uint_gt(carried(dev0), before0);
	ck_assert_uint_gt(carried(dev1), before1);
	ck_assert_uint_eq(carried(dev0) - before0 + carried(dev1) - before1,
			  (uint64_t)N_LARGE * PIECE);
	ck_assert_uint_eq(ctx.paths.n_ifs_fetched, 0);
}
END_TEST

/* The measured bandwidth decides between nodes: a leg over memory on both
 * nodes goes nearest the slower one. */
START_TEST(test_host_slowest_node_decides)
{
	struct region *a = mem_fixture_import(&lf.f, 65536), *b = mem_fixture_import(&lf.f, 65536);
	struct remote *rem = import_remote();
	struct transfer_op ops[2];

	register_on(a, dev0);
	register_on(a, dev1);
	register_on(b, dev0);
	register_on(b, dev1);
	a->numa_node = 0;
	b->numa_node = 1;
	ops[0] = op(WR_WRITE, a, 0, rem, 0, 100);
	ops[1] = op(WR_WRITE, b, 0, rem, 200, 100);
	lf.f.regions.membw.node_bps[1] = 2000000000ULL; /* node 1 is the slow one */
	run(ops, 2);
	ck_assert_uint_eq(dev1->xfer.bytes_out, 200);
	ck_assert_uint_eq(carried(dev0), 0);

	lf.f.regions.membw.node_bps[1] = 10000000000ULL;
	lf.f.regions.membw.node_bps[0] = 2000000000ULL; /* now node 0 */
	run(ops, 2);
	ck_assert_uint_eq(dev0->xfer.bytes_out, 200);
	ck_assert_uint_eq(carried(dev1), 200);
}
END_TEST

/* A device whose node sysfs does not give ranks just behind one on the
 * memory's node and ahead of one across the interconnect. */
START_TEST(test_unknown_node_ranks_behind_local)
{
	struct region *r = mem_fixture_import(&lf.f, 65536);
	struct remote *rem = import_remote();
	struct paths_choice c[PATHS_MAX];
	struct errinfo e = {};
	uint32_t n = 0;

	register_on(r, dev0);
	register_on(r, dev1);
	dev0->place.numa_node = -1; /* first discovered, node unknown */
	r->numa_node = 1;           /* fake1 local: it wins over the unknown */
	ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_eq(c[0].dev, dev1);
	r->numa_node = 0; /* fake1 at distance 21: the unknown fake0 wins */
	ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), 0);
	ck_assert_ptr_eq(c[0].dev, dev0);
	r->numa_node = -1; /* the memory's node unknown: discovery order */
	ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), 0);
	ck_assert_ptr_eq(c[0].dev, dev0);
	/* The SLIT was read once for the pair (1, 0), not per choice. */
	ck_assert_int_eq(ctx.paths.numa_distance[0][1], 21);
}
END_TEST

/* The interface list is fetched once, and again once it is old. */
START_TEST(test_interfaces_cached)
{
	struct region *r = mem_fixture_import(&lf.f, 65536);
	struct remote *rem = import_remote();
	struct paths_choice c[PATHS_MAX];
	struct errinfo e = {};
	uint32_t n = 0;

	register_on(r, dev0);
	ctx.paths.ifs_expiry = 0;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), 0);
	ck_assert_uint_eq(ctx.paths.n_ifs_fetched, 1);
	ck_assert_uint_ge(n, 1);
	ctx.paths.ifs_expiry = 0;
	ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), 0);
	ck_assert_uint_eq(ctx.paths.n_ifs_fetched, 2);

	/* Registered nowhere: NotRegistered, before anything starts. */
	r = mem_fixture_import(&lf.f, 65536);
	ck_assert_int_eq(paths_choose(&ctx.paths, &r, 1, &rem->desc, c, &n, &e), -ENOLINK);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NOT_REGISTERED);
	errinfo_done(&e);
}
END_TEST

/* ---- links ---- */

static void run_for(uint64_t ms)
{
	uint64_t until = uv_now(&lf.f.loop) + ms;

	LINK_RUN_UNTIL(&lf, uv_now(&lf.f.loop) >= until);
}

static struct link *link_on(const struct device *dev)
{
	struct link *l;

	list_for_each_entry(l, &ctx.links.links, node)
		if (l->key.dev == dev && l->state == LINK_READY)
			return l;
	return NULL;
}

static struct region *two_device_region(void)
{
	struct region *r = mem_fixture_import(&lf.f, LOCAL_SIZE);

	r->access |= REGION_ACCESS_LOCAL_WRITE;
	register_on(r, dev0);
	register_on(r, dev1);
	r->numa_node = 0; /* path 0: fake0 */
	return r;
}

/* idle_sec below the connect time: the link of a path that is READY at
 * once is held while the transfer waits for its other path, and closes as
 * idle only once the transfer is over. */
START_TEST(test_waiting_link_not_idle)
{
	struct region *r = two_device_region();
	/* Registered on fake0 alone: its transfer brings up fake0's link only
	 * (links are per device, uid and endpoint: r's transfer shares it). */
	struct region *r0 = mem_fixture_import(&lf.f, 65536);
	struct remote *rem = import_remote();
	struct transfer_op o1;
	struct transfer_op *ops = calloc(N_LARGE, sizeof(*ops));
	struct transfer *t = NULL;
	struct errinfo e = {};
	struct outcome o = {};
	struct link *l0;
	int res;

	ck_assert_ptr_nonnull(ops);
	register_on(r0, dev0);
	o1 = op(WR_WRITE, r0, 0, rem, 0, 4096);
	ctx.links.cfg.idle_sec = 1;
	run(&o1, 1);
	ck_assert_uint_eq(ctx.links.n_links, 1);
	l0 = link_on(dev0);
	ck_assert_ptr_nonnull(l0);

	/* The second path's connect stalls past idle_sec. */
	fake_verbs_hold_routes(true);
	for (unsigned i = 0; i < N_LARGE; i++)
		ops[i] = op(WR_READ, r, (uint64_t)i * PIECE, rem, 0, PIECE);
	res = transfer_start(&ctx, lf.f.owner, ops, N_LARGE, NULL, 0, &cb, &o, &t, &e);
	ck_assert_msg(res == 0, "transfer_start: %d %s", res, e.message);
	run_for(1500);
	ck_assert(!o.done);
	ck_assert_ptr_eq(link_on(dev0), l0);
	ck_assert_uint_eq(l0->n_hold, 1);

	fake_verbs_hold_routes(false);
	LINK_RUN_UNTIL(&lf, o.done);
	transfer_free(t);
	ck_assert_msg(o.result == 0, "transfer: %d %s", o.result, o.e.message);
	for (unsigned i = 0; i < N_LARGE; i++)
		ck_assert_mem_eq(host_bytes(r) + (size_t)i * PIECE, lf.remote.buf, PIECE);
	ck_assert_uint_gt(carried(dev1), 0);
	free(ops);

	/* Released: both go idle and close. */
	ck_assert_uint_eq(l0->n_hold, 0);
	LINK_RUN_UNTIL(&lf, ctx.links.n_links == 0);
}
END_TEST

#if HAVE_CUDA_H
static struct gpu_ctx gpu;

struct imported {
	bool done;
	struct region *r;
	char error[512];
};

static void on_imported(void *userdata, struct region *r, struct errinfo *e)
{
	struct imported *im = userdata;

	im->done = true;
	im->r = r;
	snprintf(im->error, sizeof(im->error), "%s", e->message ?: "");
}

/* A VMM region of the whole allocation (fd taken), registrable for
 * everything. */
static struct region *import_vmm(int fd, uint64_t size)
{
	struct gpu_import_params p = { .memory = GPU_MEMORY_VMM,
				       .fds = { fd },
				       .n_fds = 1,
				       .alloc_size = size };
	struct gpu_import *job = NULL;
	struct imported im = {};
	struct errinfo e = {};

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(gpu_import_start(&gpu, lf.f.owner, &p, on_imported, &im, &job, &e), 0);
	LINK_RUN_UNTIL(&lf, im.done);
	ck_assert_msg(im.r, "import: %s", im.error);
	im.r->access |= REGION_ACCESS_LOCAL_WRITE | REGION_ACCESS_REMOTE_READ |
			REGION_ACCESS_REMOTE_WRITE;
	return im.r;
}

/* The fake's device memory is host heap at the device address. */
static uint8_t *dev_bytes(struct region *r)
{
	return (uint8_t *)(uintptr_t)r->dptr;
}

static void gpu_setup(void)
{
	setup();
	ck_assert_int_eq(cu_set_ops(&fake_cu_ops), 0);
	gpu_ctx_init(&gpu, &lf.f.loop, &lf.f.regions, 0);
	atomic_store(&fake_verbs_dmabuf_at_iova, true);
}

/* A GPU region registered on both devices: its dma-buf MR is what the
 * fake verbs were given (offset, length, iova = the device address), and
 * a small transfer goes on fake1, 4 PCIe hops from the GPU (fake0 is 6),
 * byte-exact both ways. */
START_TEST(test_gpu_nearest_pcie)
{
	struct region *g = import_vmm(open("/dev/null", O_RDONLY | O_CLOEXEC), 3 * FAKE_CUDA_GRAN);
	struct remote *rem = import_remote();
	struct transfer_op ops[2];

	ck_assert_str_eq(g->pci_bus_id, "0000:11:00.0");
	register_on(g, dev0);
	ck_assert_str_eq(mreg_find(g, "fake0")->how, "dma-buf");
	ck_assert(fake_verbs_last_dmabuf.fd_open);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.iova, g->dptr);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.len, g->size);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.offset, 0);
	register_on(g, dev1);
	for (size_t i = 0; i < g->size; i++)
		dev_bytes(g)[i] = (uint8_t)(i * 13 + 5);

	ops[0] = op(WR_WRITE, g, 3, rem, 11, 40001);
	ops[1] = op(WR_READ, g, 1000003, rem, 50001, 7777);
	run(ops, 2);
	ck_assert_mem_eq(dev_bytes(g) + 3, lf.remote.buf + 11, 40001);
	ck_assert_mem_eq(dev_bytes(g) + 1000003, lf.remote.buf + 50001, 7777);
	ck_assert_uint_eq(dev1->xfer.bytes_out, 40001);
	ck_assert_uint_eq(dev1->xfer.bytes_in, 7777);
	ck_assert_uint_eq(carried(dev0), 0);
}
END_TEST

/* A GPU region registered on fake0 only is never sent through fake1,
 * nearer as it is, even when the batch is large enough to stripe. */
START_TEST(test_gpu_unregistered_device_unused)
{
	struct region *g = import_vmm(open("/dev/null", O_RDONLY | O_CLOEXEC), 3 * FAKE_CUDA_GRAN);
	struct remote *rem = import_remote();
	struct transfer_op o1;

	register_on(g, dev0);
	ck_assert_ptr_null(mreg_find(g, "fake1"));
	o1 = op(WR_WRITE, g, 0, rem, 0, 4096);
	memset(dev_bytes(g), 0xa5, 4096);
	run(&o1, 1);
	ck_assert_mem_eq(dev_bytes(g), lf.remote.buf, 4096);
	read_large(g, rem, dev_bytes);
	ck_assert_uint_eq(carried(dev0), 4096 + (uint64_t)N_LARGE * PIECE);
	ck_assert_uint_eq(carried(dev1), 0);
}
END_TEST

/* A GPU region exported: the descriptor's address is the device address,
 * the iova its dma-buf MR was registered at, so a peer's WRs with the rkey
 * land in GPU memory. Here the peer is this daemon: READ and WRITE between
 * a host region and the exported GPU region, byte-exact. */
START_TEST(test_gpu_exported)
{
	struct region *g = import_vmm(open("/dev/null", O_RDONLY | O_CLOEXEC), FAKE_CUDA_GRAN);
	struct region *h = mem_fixture_import(&lf.f, 65536);
	struct descriptor d;
	struct remote *rem;
	struct token *tok;
	struct errinfo e = {};
	struct transfer_op ops[2];
	char *text = NULL;

	register_on(g, dev0);
	h->access |= REGION_ACCESS_LOCAL_WRITE;
	register_on(h, dev0);
	register_on(h, dev1);
	ck_assert_int_eq(remote_export(&ctx, lf.f.owner, g, NULL, 0, &d, &text, &tok, &e), 0);
	free(text);
	ck_assert_uint_eq(d.n_devices, 1);
	ck_assert_str_eq(d.devices[0].name, "fake0");
	ck_assert_uint_eq(d.devices[0].addr, g->dptr);
	ck_assert_uint_eq(d.devices[0].rkey, mreg_find(g, "fake0")->rkey);
	ck_assert_uint_eq(d.length, g->size);
	ck_assert_int_eq(remote_import(&ctx, lf.f.owner, &d, &rem, &e), 0);

	for (size_t i = 0; i < 65536; i++)
		host_bytes(h)[i] = (uint8_t)(i * 3 + 1);
	memset(dev_bytes(g), 0, g->size);
	ops[0] = op(WR_WRITE, h, 7, rem, 1000001, 30001);
	ops[1] = op(WR_READ, h, 40000, rem, 1000001 + 10, 99);
	run(ops, 1);
	ck_assert_mem_eq(dev_bytes(g) + 1000001, host_bytes(h) + 7, 30001);
	run(ops + 1, 1);
	ck_assert_mem_eq(host_bytes(h) + 40000, host_bytes(h) + 17, 99);
	/* The export's device, the one on the descriptor's network. */
	ck_assert_uint_eq(dev0->xfer.bytes_out, 30001);
	ck_assert_uint_eq(dev0->xfer.bytes_in, 99);
}
END_TEST

/*
 * Tag "cuda", on the GPU machine, with the real driver: a VMM allocation's
 * dma-buf (cu_dmabuf_fd_for()) reaches the verbs with the region's offset
 * and length and the device address as iova. The verbs are the fake's: that
 * machine has no RDMA device, so no byte crosses a NIC here.
 */
START_TEST(test_real_cuda_dmabuf)
{
	const struct cu_ops *cu;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes =
					     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	CUmemGenericAllocationHandle h;
	size_t gran = 0;
	struct region *g;
	struct mreg *m;
	int fd = -1;

	printf("cuda: the GPU machine has no RDMA device: the dma-buf goes to fake verbs\n");
	ck_assert_msg(cu_load() == 0, "no GPU here (%s): cases tagged cuda run on a GPU machine",
		      cu_last_error());
	cu = cu_get_ops();
	ck_assert_int_eq(cu_primary_ctx_retain(0), 0);
	ck_assert_int_eq(cu->cuMemGetAllocationGranularity(&gran, &prop,
							   CU_MEM_ALLOC_GRANULARITY_MINIMUM),
			 CUDA_SUCCESS);
	ck_assert_int_eq(cu->cuMemCreate(&h, 2 * gran, &prop, 0), CUDA_SUCCESS);
	ck_assert_int_eq(cu->cuMemExportToShareableHandle(&fd, h,
							  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
							  0),
			 CUDA_SUCCESS);
	g = import_vmm(fd, 2 * gran);
	register_on(g, dev0);
	m = mreg_find(g, "fake0");
	ck_assert_str_eq(m->how, "dma-buf");
	ck_assert(fake_verbs_last_dmabuf.fd_open);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.iova, g->dptr);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.len, g->size);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.len, 2 * gran);
	ck_assert_uint_eq(fake_verbs_last_dmabuf.offset, 0);
	printf("cuda: dma-buf MR of %zu bytes at iova 0x%llx, offset %llu\n", 2 * gran,
	       (unsigned long long)fake_verbs_last_dmabuf.iova,
	       (unsigned long long)fake_verbs_last_dmabuf.offset);
	cu->cuMemRelease(h);
	cu_primary_ctx_release(0);
}
END_TEST

static void real_cuda_setup(void)
{
	setup();
	gpu_ctx_init(&gpu, &lf.f.loop, &lf.f.regions, 0);
	/* A real GPU's memory is not host memory: nothing may touch it. */
	atomic_store(&fake_verbs_dmabuf_at_iova, false);
}
#endif

Suite *paths_suite(void)
{
	Suite *su = suite_create("paths");
	TCase *tc = tcase_create("paths");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_topology);
	tcase_add_test(tc, test_host_nearest_numa);
	tcase_add_test(tc, test_host_slowest_node_decides);
	tcase_add_test(tc, test_unknown_node_ranks_behind_local);
	tcase_add_test(tc, test_interfaces_cached);
	tcase_add_test(tc, test_waiting_link_not_idle);
	suite_add_tcase(su, tc);
#if HAVE_CUDA_H
	tc = tcase_create("paths_gpu");
	tcase_add_checked_fixture(tc, gpu_setup, teardown);
	tcase_add_test(tc, test_gpu_nearest_pcie);
	tcase_add_test(tc, test_gpu_unregistered_device_unused);
	tcase_add_test(tc, test_gpu_exported);
	suite_add_tcase(su, tc);
	tc = tcase_create("paths_cuda");
	tcase_set_tags(tc, "cuda");
	tcase_add_checked_fixture(tc, real_cuda_setup, teardown);
	test_add_tagged(tc, "cuda", test_real_cuda_dmabuf);
	suite_add_tcase(su, tc);
#else
	test_note_not_built("paths: GPU paths (tcases paths_gpu, paths_cuda)", "cuda.h");
#endif
	return su;
}
