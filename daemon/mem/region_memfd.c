/* SPDX-License-Identifier: BSD-3-Clause */
/* The memory kind "memfd": host memory the daemon maps from a client's memfd. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "proto/errors.h"
#include "proto/json_out.h"
#include "daemon/mem/region.h"
#include "daemon/mem/region_memfd.h"
#include "daemon/core/session.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
/* Mappings up to this size are unmapped on the loop, larger ones on the pool. */
#define REGION_UNMAP_INLINE_MAX (1U << 20)
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)

/* A memfd region: the region, then what only this file knows of it. The
 * mapping itself (map_base, map_len, addr) is in the region: page-locking
 * it for GPU copies needs it too. Immutable once published. */
struct memfd_region {
	struct region r; /* first: region.c frees the whole */
	int fd;          /* keeps the file; closed after the unmap */
	uint64_t file_offset;
	uint64_t file_size; /* st_size at import */
	/* The memfd's file, so that a copy can tell two regions over one
	 * memfd (different mappings of the same pages) from two pieces of
	 * memory: memfd_same_memory(). */
	dev_t file_dev;
	ino_t file_ino;
	unsigned seals;
};

static const struct region_mem_ops memfd_ops;

static struct memfd_region *memfd_region_of(struct region *r)
{
	return container_of(r, struct memfd_region, r);
}

static const struct memfd_region *memfd_region_of_const(const struct region *r)
{
	return container_of(r, const struct memfd_region, r);
}

/* Pool-safe: the mapping, then the fd. */
static void memfd_release(struct region *r)
{
	struct memfd_region *m = memfd_region_of(r);

	if (r->map_base && munmap(r->map_base, r->map_len) < 0)
		log_full_fields(LOG_WARNING, -errno, LOG_REGION(r),
				"Region %" PRIu64 ": munmap failed: %m", r->id);
	r->map_base = NULL;
	m->fd = safe_close(m->fd);
}

/*
 * Pool: the mapping is fresh (Register maps it and never touches it), so
 * ibv_reg_mr would fault it in a page at a time while it pins. One
 * MADV_POPULATE_READ first is about twice as fast on shmem: read faults map
 * the pages already in the file 16 at a time (fault-around), and on a
 * shared mapping of shmem they are mapped writable, so the pin finds every
 * page present. Best effort: a kernel before 5.14 (EINVAL) or a range it
 * cannot fill leaves the work to ibv_reg_mr, which reports what fails.
 */
static int memfd_mr_source(struct region *r, struct region_mr_source *ret)
{
	if (r->map_base)
		(void)madvise(r->map_base, r->map_len, MADV_POPULATE_READ);
	*ret = (struct region_mr_source){
		.addr = r->addr,
		.dmabuf_fd = -EBADF,
		.iova = (uint64_t)(uintptr_t)r->addr,
	};
	return 0;
}

static void add_seals(struct json_out *o, unsigned seals)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{ F_SEAL_SEAL, "seal" },
		{ F_SEAL_SHRINK, "shrink" },
		{ F_SEAL_GROW, "grow" },
		{ F_SEAL_WRITE, "write" },
		{ F_SEAL_FUTURE_WRITE, "future_write" },
	};

	json_out_array(o, "seals");
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (seals & names[i].bit)
			json_out_string(o, NULL, names[i].name);
	json_out_end(o);
}

static void memfd_describe(const struct region *r, struct json_out *source)
{
	const struct memfd_region *m = memfd_region_of_const(r);

	json_out_u64(source, "offset", m->file_offset);
	json_out_u64(source, "file_size", m->file_size);
	add_seals(source, m->seals);
}

/* Two regions over one memfd map the same pages at unrelated addresses:
 * the file tells, by st_dev/st_ino. */
static bool memfd_same_memory(const struct region *a, const struct region *b, int64_t *ret_delta)
{
	const struct memfd_region *ma = memfd_region_of_const(a), *mb = memfd_region_of_const(b);

	if (ma->file_dev != mb->file_dev || ma->file_ino != mb->file_ino)
		return false;
	*ret_delta = (int64_t)(mb->file_offset - ma->file_offset);
	return true;
}

/* The memfd itself goes into the fd store: the next process maps it again. */
static int memfd_keep(const struct region *r, struct region_keep *ret)
{
	const struct memfd_region *m = memfd_region_of_const(r);

	ret->fds[0] = m->fd;
	ret->n_fds = 1;
	ret->offset = m->file_offset;
	ret->text[0] = '\0';
	return 0;
}

/* Host memory: no copy op, memcpy() moves its bytes; nothing shared. */
static const struct region_mem_ops memfd_ops = {
	.type = "memfd",
	.release = memfd_release,
	.mr_source = memfd_mr_source,
	.keep = memfd_keep,
	.describe = memfd_describe,
	.same_memory = memfd_same_memory,
};

static const char *file_kind(mode_t m)
{
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISFIFO(m))
		return "a pipe";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

static int numa_node_of(void *addr)
{
	int node = -1;

	/* Looks at (and if need be faults in) the first page only: a hint
	 * for placement, not a guarantee for the whole range. */
	if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) < 0)
		return -1;
	return node;
}

/* Checks the fd and the range; fills st and seals. */
static int validate_memfd(struct memfd_import *imp, struct stat *st, int *ret_seals,
			  struct errinfo *e)
{
	int seals;

	if (fstat(imp->fd, st) < 0)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -errno,
				   "cannot inspect the file descriptor: %s", strerror(errno));
	if (!S_ISREG(st->st_mode))
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -EBADFD,
				   "the file descriptor is %s, not a memfd; create the buffer with "
				   "memfd_create(2) (rdmamem_memfd_create() does it)",
				   file_kind(st->st_mode));

	seals = fcntl(imp->fd, F_GET_SEALS);
	if (seals < 0)
		return errinfo_set(
			e, RDMAMEM_ERROR_NOT_A_MEMFD, -EBADFD,
			"the file descriptor is a regular file that cannot be sealed, not a "
			"memfd; create the buffer with memfd_create(2) and "
			"MFD_ALLOW_SEALING");
	if (!(seals & F_SEAL_SHRINK))
		return errinfo_set(
			e, RDMAMEM_ERROR_MISSING_SEAL, -EPERM,
			"the memfd is not sealed against shrinking, so truncating it would "
			"crash whoever maps it; seal it with fcntl(fd, F_ADD_SEALS, "
			"F_SEAL_SHRINK) before registering");

	if (imp->offset > (uint64_t)st->st_size)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "offset %" PRIu64 " is beyond the end of the memfd (%" PRIu64
				   " bytes)",
				   imp->offset, (uint64_t)st->st_size);
	/* The handler refused an explicit length 0: 0 here means "to the end". */
	if (imp->length == 0)
		imp->length = (uint64_t)st->st_size - imp->offset;
	if (imp->length == 0)
		return errinfo_invalid_param(
			e, imp->offset ? "offset" : "fd", -EINVAL,
			"the range is empty: the memfd has %" PRIu64 " bytes and offset %" PRIu64
			" is its end; ftruncate it first or pass a smaller offset",
			(uint64_t)st->st_size, imp->offset);
	if (imp->offset + imp->length < imp->offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -EOVERFLOW,
				   "offset %" PRIu64 " + length %" PRIu64 " overflows 64 bits",
				   imp->offset, imp->length);
	if (imp->offset + imp->length > (uint64_t)st->st_size)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "range [%" PRIu64 ", %" PRIu64 ") extends beyond the end of the "
				   "memfd (%" PRIu64 " bytes)",
				   imp->offset, imp->offset + imp->length, (uint64_t)st->st_size);
	*ret_seals = seals;
	return 0;
}

long long hugetlb_pages(uint64_t page, const char *what)
{
	char path[160];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), HUGETLB_SYSFS "-%" PRIu64 "kB/%s", page >> 10, what);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * A hugetlb mapping reserves its huge pages when it is made, so a host
 * without enough free ones of the memfd's size refuses it (ENOMEM): the
 * client chose memory this host cannot give. Says how many there are.
 */
static int hugetlb_unavailable(uint64_t page, uint64_t len, struct errinfo *e)
{
	long long free_pages = hugetlb_pages(page, "free_hugepages");
	long long resv = hugetlb_pages(page, "resv_hugepages");
	char size[32];

	if (page >= (1ULL << 30))
		snprintf(size, sizeof(size), "%" PRIu64 " GiB", page >> 30);
	else
		snprintf(size, sizeof(size), "%" PRIu64 " MiB", page >> 20);
	if (free_pages < 0 || resv < 0)
		return errinfo_set(
			e, RDMAMEM_ERROR_MEMORY_UNAVAILABLE, -ENOMEM,
			"the memfd is backed by %s huge pages and the host has none free "
			"to map its %" PRIu64 " pages; reserve huge pages of that size or "
			"register memory of normal pages",
			size, len / page);
	return errinfo_set(
		e, RDMAMEM_ERROR_MEMORY_UNAVAILABLE, -ENOMEM,
		"the memfd is backed by %s huge pages: mapping it needs up to %" PRIu64
		" of them, and the host has %lld free, %lld of those reserved by others; "
		"reserve more (" HUGETLB_SYSFS "-%" PRIu64 "kB/nr_hugepages, or "
		"hugepages= at boot) or register memory of normal pages",
		size, len / page, free_pages, resv, page >> 10);
}

/*
 * Maps [map_off, map_off + reg->map_len) of fd, writable when the open mode
 * and the seals allow. Failures the client's fd causes get their own error.
 */
static int map_memfd(struct region *reg, int fd, int flags, int *seals, uint64_t map_off,
		     struct errinfo *e)
{
	struct statfs sfs;
	int prot;

	for (;;) {
		/* Write seals forbid a writable shared mapping: map read-only. */
		reg->writable = (flags & O_ACCMODE) == O_RDWR &&
				!(*seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE));
		prot = PROT_READ | (reg->writable ? PROT_WRITE : 0);
		reg->map_base = mmap(NULL, reg->map_len, prot, MAP_SHARED, fd, (off_t)map_off);
		if (reg->map_base != MAP_FAILED)
			return 0;
		reg->map_base = NULL;
		/* The client may add a write seal after validate_memfd() read
		 * the seals: then map read-only, as if it had been there. */
		if (errno == EPERM && reg->writable) {
			int now = fcntl(fd, F_GET_SEALS);

			if (now >= 0 && (now & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) {
				*seals = now;
				continue;
			}
			errno = EPERM;
		}
		break;
	}
	if (errno == ENOMEM && fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC)
		return hugetlb_unavailable((uint64_t)sfs.f_bsize, reg->map_len, e);
	return errinfo_set(e, RDMAMEM_ERROR_INTERNAL, -errno,
			   "cannot map %" PRIu64 " bytes of the memfd: %s", reg->map_len,
			   strerror(errno));
}

int region_import_memfd(struct region_registry *registry, struct session *owner,
			struct memfd_import *imp, struct region **ret, struct errinfo *e)
{
	struct memfd_region *m;
	struct region *reg;
	struct stat st;
	uint64_t page, map_off;
	int seals = 0, flags, r;

	r = validate_memfd(imp, &st, &seals, e);
	if (r < 0)
		return r;

	flags = fcntl(imp->fd, F_GETFL);
	if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -EACCES,
				   "the memfd must be open for reading");

	r = region_prepare(registry, owner, imp->length, &memfd_ops, sizeof(*m), &reg, e);
	if (r < 0)
		return r;
	m = memfd_region_of(reg);
	m->fd = -EBADF;

	/* hugetlbfs reports its page size as the block size. */
	page = MAX((uint64_t)st.st_blksize, (uint64_t)sysconf(_SC_PAGESIZE));
	if (page & (page - 1))
		page = (uint64_t)sysconf(_SC_PAGESIZE);
	map_off = imp->offset & ~(page - 1);
	/* Whole pages: munmap() of a hugetlb mapping refuses a length that
	 * is not a multiple of its page size (and hugetlbfs files are). */
	reg->map_len = (imp->offset - map_off + imp->length + page - 1) & ~(page - 1);
	/* Unmapping a large mapping drops every page the daemon touched (25
	 * ms a GiB here): not on the loop. */
	reg->release_on_pool = reg->map_len >= REGION_UNMAP_INLINE_MAX;
	r = map_memfd(reg, imp->fd, flags, &seals, map_off, e);
	if (r < 0) {
		/* The client's doing is logged at debug with the answer; what
		 * is left is the daemon's own trouble. */
		if (strcmp(e->name, RDMAMEM_ERROR_INTERNAL) == 0)
			log_full_fields(LOG_WARNING, r, LOG_CLIENT(&owner->cred), "Register: %s",
					e->message);
		region_unref(reg);
		return r;
	}
	reg->addr = (char *)reg->map_base + (imp->offset - map_off);
	m->fd = TAKE_FD(imp->fd);
	m->file_offset = imp->offset;
	m->file_size = st.st_size;
	m->file_dev = st.st_dev;
	m->file_ino = st.st_ino;
	m->seals = seals;
	reg->access = imp->access;
	reg->numa_node = numa_node_of(reg->addr);

	r = region_publish(reg, owner);
	if (r < 0) {
		region_unref(reg);
		return r;
	}
	*ret = reg;
	return 0;
}
