/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "daemon/core/log.h"
#include "daemon/mem/membw.h"
#include "util/macro.h"

/* From <numaif.h>, which is libnuma's: the daemon needs two syscalls only. */
#define MPOL_BIND 2
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)
#define MPOL_MF_STRICT (1 << 0)

#define MEMBW_DEFAULT_SIZE (32ULL << 20)
#define ULONG_BITS (8 * sizeof(unsigned long))
#define MEMBW_PASSES 3

struct membw_result {
	uint64_t size;
	uint64_t node_bps[MEMBW_NODES_MAX];
	unsigned n_nodes;
	bool numa;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose);

static uint64_t now_nsec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The highest node number online + 1, from "0-1,3"; 1 when sysfs says none. */
static unsigned nodes_online(void)
{
	_cleanup_(fclosep) FILE *f = fopen("/sys/devices/system/node/online", "re");
	unsigned hi = 0, a, b;
	int c;

	if (!f)
		return 1;
	while (fscanf(f, "%u", &a) == 1) {
		b = a;
		c = fgetc(f);
		if (c == '-' && fscanf(f, "%u", &b) == 1)
			c = fgetc(f);
		if (b > hi)
			hi = b;
		if (c != ',')
			break;
	}
	return hi + 1 < MEMBW_NODES_MAX ? hi + 1 : MEMBW_NODES_MAX;
}

static int bind_to_node(void *p, uint64_t size, unsigned node)
{
	unsigned long mask[MEMBW_NODES_MAX / ULONG_BITS] = { 0 };

	mask[node / ULONG_BITS] = 1UL << (node % ULONG_BITS);
	if (syscall(SYS_mbind, p, size, MPOL_BIND, mask, MEMBW_NODES_MAX + 1, MPOL_MF_STRICT) < 0)
		return -errno;
	return 0;
}

/* Pool: the best of a few memcpy passes between two buffers on node (or
 * wherever the kernel puts them, when bind is false). 0 when it cannot. */
static uint64_t measure_node(unsigned node, bool bind, uint64_t size)
{
	uint64_t best = 0;
	char *src, *dst;

	src = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED)
		return 0;
	dst = src + size;
	if (bind && bind_to_node(src, 2 * size, node) < 0) {
		munmap(src, 2 * size);
		return 0;
	}
	/* Fault every page in before the clock runs. */
	memset(src, 0x5a, 2 * size);
	for (int i = 0; i < MEMBW_PASSES; i++) {
		uint64_t t0 = now_nsec(), dt;

		memcpy(dst, src, size);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		dt = now_nsec() - t0;
		if (dt > 0 && size * 1000000000ULL / dt > best)
			best = size * 1000000000ULL / dt;
	}
	munmap(src, 2 * size);
	return best;
}

/* MemAvailable from /proc/meminfo, in bytes; 0 when unknown. */
static uint64_t mem_available(void)
{
	_cleanup_(fclosep) FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	uint64_t kib;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
			return kib * 1024;
	return 0;
}

static void membw_run(struct offload_job *j)
{
	struct membw *bw = container_of(j, struct membw, job);
	struct membw_result *res = bw->pending;
	uint64_t avail = mem_available();
	int node = -1;

	/* The two buffers take at most a sixteenth of the memory available: a
	 * small machine gets a smaller (cache-flattered) probe, not pressure. */
	if (avail && 2 * res->size > avail / 16)
		res->size = (avail / 32) & ~4095ULL;
	if (res->size < 4096) {
		res->n_nodes = 0;
		return;
	}

	/* get_mempolicy answers ENOSYS on a kernel without NUMA. */
	res->numa = syscall(SYS_get_mempolicy, &node, NULL, 0, NULL, 0) == 0;
	res->n_nodes = res->numa ? nodes_online() : 1;
	for (unsigned n = 0; n < res->n_nodes; n++)
		res->node_bps[n] = measure_node(n, res->numa, res->size);
}

static void membw_done(struct offload_job *j)
{
	struct membw *bw = container_of(j, struct membw, job);
	_cleanup_free_ struct membw_result *res = TAKE_PTR(bw->pending);

	memcpy(bw->node_bps, res->node_bps, sizeof(bw->node_bps));
	bw->n_nodes = res->n_nodes;
	bw->numa = res->numa;
	bw->done = true;
	for (unsigned n = 0; n < bw->n_nodes; n++)
		log_debug("Host memory bandwidth, node %u: %" PRIu64 " MB/s", n,
			  bw->node_bps[n] / 1000000);
}

void membw_start(struct membw *bw, struct offload *o, uint64_t size)
{
	struct membw_result *res = calloc(1, sizeof(*res));

	if (!res) {
		log_warning("Host memory bandwidth not measured: out of memory");
		return;
	}
	res->size = size ?: MEMBW_DEFAULT_SIZE;
	bw->pending = res;
	bw->job = (struct offload_job){ .run = membw_run, .done = membw_done };
	offload_submit(o, &bw->job);
}

uint64_t membw_at(const struct membw *bw, const void *addr)
{
	int node = 0;

	if (!bw->done)
		return 0;
	if (bw->numa &&
	    syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) < 0)
		return 0;
	if (node < 0 || (unsigned)node >= bw->n_nodes)
		return 0;
	return bw->node_bps[node];
}

uint64_t membw_min(const struct membw *bw)
{
	uint64_t min = 0;

	if (!bw->done)
		return 0;
	for (unsigned i = 0; i < bw->n_nodes && i < MEMBW_NODES_MAX; i++)
		if (bw->node_bps[i] && (!min || bw->node_bps[i] < min))
			min = bw->node_bps[i];
	return min;
}
