/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host memory regions end to end: a real daemon, several client processes
 * (some under another uid), librdmamem and raw Varlink where the test needs
 * to see a call that has not been answered yet.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/memfd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/mem/region_memfd.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#define OTHER_UID TEST_OTHER_UID
#define OTHER_GID 65534

static struct test_daemon td;

static void start_with(const char *const *extra)
{
	const char *args[16] = { "--socket-mode", "0666" };
	size_t n = 2;

	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	test_daemon_start(&td, args);
}

static void setup(void)
{
	start_with(NULL);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

/* A sealed memfd of size bytes, mapped; filled with byte fill. */
static int memfd_of(size_t size, int fill, void **ret_addr)
{
	void *addr;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("test", size, &fd, &addr), 0);
	memset(addr, fill, size);
	if (ret_addr)
		*ret_addr = addr;
	else
		munmap(addr, size);
	return fd;
}

static uint64_t register_new(struct rdmamem_client *c, size_t size, int fill)
{
	uint64_t id;
	int fd = memfd_of(size, fill, NULL);

	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	return id;
}

/* Runs fn in a child as OTHER_UID; returns fn's exit code. */
static int as_other_user(int (*fn)(void *arg), void *arg)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (test_become_other_uid() < 0)
			_exit(99);
		_exit(fn(arg));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static uint64_t status_field(const char *name)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	cJSON *root, *item;
	uint64_t v = 0;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetStatus", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	root = cJSON_Parse(reply);
	item = cJSON_GetObjectItem(root, name);
	if (cJSON_IsNumber(item))
		v = (uint64_t)item->valuedouble;
	else
		ck_assert_int_eq(json_to_u64(item, &v), 0);
	cJSON_Delete(root);
	free(reply);
	rdmamem_client_close(c);
	return v;
}

/* GetRegion as a parsed tree. */
static cJSON *get_region(struct rdmamem_client *c, uint64_t id)
{
	char params[64], *reply = NULL;
	cJSON *root;

	snprintf(params, sizeof(params), "{\"region\":\"%llu\"}", (unsigned long long)id);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetRegion", params, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	root = cJSON_Parse(reply);
	free(reply);
	return root;
}

static int lock_count(struct rdmamem_client *c, uint64_t id, const char *what)
{
	cJSON *r = get_region(c, id);
	int v = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "leases"), what)->valueint;

	cJSON_Delete(r);
	return v;
}

/* Register a region, write, read back, copy, unregister. */
START_TEST(test_register_write_read_copy)
{
	struct rdmamem_client *c = test_client(td.socket);
	char buf[64], *big = malloc(3 << 20), *back = malloc(3 << 20);
	uint64_t a, b;
	void *addr;
	int fd = memfd_of(8 << 20, 0, &addr);

	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &a), 0);
	/* A second region over part of the same memfd: a region of its own. */
	ck_assert_int_eq(rdmamem_register(c, fd, 4 << 20, 4 << 20, &b), 0);
	ck_assert_uint_gt(b, a);

	ck_assert_int_eq(rdmamem_write(c, a, 13, "hello, region", 13, RDMAMEM_LOCK_EXCLUSIVE, 0),
			 0);
	/* The client's own mapping sees the daemon's write... */
	ck_assert_int_eq(memcmp((char *)addr + 13, "hello, region", 13), 0);
	/* ...and the daemon sees the client's. */
	memcpy((char *)addr + 100, "XYZ", 3);
	ck_assert_int_eq(rdmamem_read(c, a, 99, buf, 5, 0), 0);
	ck_assert_int_eq(memcmp(buf, "\0XYZ\0", 5), 0);

	/* Large transfers: through the library's staging region, a Copy on
	 * the pool in the daemon (one more region, of 4 MiB: client/staging.c). */
	for (size_t i = 0; i < (3u << 20); i++)
		big[i] = (char)(i * 7 + i / 4096);
	ck_assert_int_eq(rdmamem_write(c, a, 1000, big, 3 << 20, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	ck_assert_int_eq(rdmamem_read(c, a, 1000, back, 3 << 20, 0), 0);
	ck_assert_int_eq(memcmp(big, back, 3 << 20), 0);

	/* Copy from region a into region b (bytes 4 MiB + x of the file). */
	{
		struct rdmamem_copy cp = { .from_region = a,
					   .from_offset = 1000,
					   .to_region = b,
					   .to_offset = 12345,
					   .length = 2 << 20,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
		ck_assert_int_eq(memcmp((char *)addr + (4 << 20) + 12345, big, 2 << 20), 0);
	}
	/* Overlapping copy inside one region behaves like memmove. */
	{
		struct rdmamem_copy cp = { .from_region = a,
					   .from_offset = 1000,
					   .to_region = a,
					   .to_offset = 1001,
					   .length = 100000,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
		ck_assert_int_eq(memcmp((char *)addr + 1001, big, 100000), 0);
	}

	ck_assert_uint_eq(status_field("regions"), 3);
	ck_assert_uint_eq(status_field("pinned_bytes"), 16 << 20);
	ck_assert_int_eq(rdmamem_unregister(c, a), 0);
	ck_assert_int_eq(rdmamem_read(c, a, 0, buf, 1, 0), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_NO_SUCH_REGION);
	ck_assert_int_eq(rdmamem_read(c, a, 0, back, 8192, 0), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_NO_SUCH_REGION);
	ck_assert_int_eq(rdmamem_unregister(c, a), -ENOENT);
	ck_assert_uint_eq(status_field("regions"), 2);

	munmap(addr, 8 << 20);
	close(fd);
	free(big);
	free(back);
	rdmamem_client_close(c);
}
END_TEST

/*
 * Copies between two regions over one memfd whose file ranges overlap end
 * as memmove() would leave the file, whichever way the ranges lie and
 * however far apart: the daemon's two mappings of the same pages sit at
 * unrelated addresses, so neither their order nor a split over threads may
 * decide the direction. Large copies, which are split over threads when
 * the ranges do not overlap, and small ones that run on the event loop.
 */
#define ALIAS_FILE (96U << 20)
#define ALIAS_A_OFF (0U)
#define ALIAS_A_LEN (80U << 20)
#define ALIAS_B_OFF (8U << 20)
#define ALIAS_B_LEN (80U << 20)

/* GetRegion's bandwidth figures are measured, never made up: a host region
 * gets its NUMA node's memcpy rate once the start-up measurement is done
 * (it runs on the pool, so poll), and no GPU figure (no GPU touched it). */
START_TEST(test_region_bandwidth)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 1 << 20, 1), bps = 0;
	const cJSON *host = NULL;
	cJSON *r = NULL;

	for (int i = 0; i < 200 && !host; i++) {
		cJSON_Delete(r);
		r = get_region(c, id);
		host = cJSON_GetObjectItemCaseSensitive(r, "direct_access_host_bandwidth");
		if (!host)
			usleep(50 * 1000);
	}
	ck_assert_msg(host, "no direct_access_host_bandwidth after 10 s");
	ck_assert_int_eq(json_to_u64(host, &bps), 0);
	/* Any machine copies faster than 10 MB/s, and none at 10 TB/s. */
	ck_assert_uint_gt(bps, 10000000);
	ck_assert_uint_lt(bps, 10000000000000ULL);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(r, "direct_access_device_bandwidth"));
	cJSON_Delete(r);
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_copy_between_views_of_one_memfd)
{
	static const struct {
		bool a_to_b;               /* else b to a */
		uint64_t from, to, length; /* offsets in the regions */
	} copies[] = {
		/* Destination before the source in the file, far apart. */
		{ true, 24U << 20, 0, 40U << 20 },
		/* Destination after the source. */
		{ false, 0, 20U << 20, 40U << 20 },
		/* A page and a byte apart, either way. */
		{ true, 10U << 20, (2U << 20) + 4097, 33U << 20 },
		{ false, (2U << 20) + 4097, 10U << 20, 33U << 20 },
		{ true, 10U << 20, (2U << 20) + 1, 48U << 20 },
		{ false, 5U << 20, (13U << 20) - 3, 32U << 20 },
		/* Small: on the event loop. */
		{ true, 8U << 20, 1, 60000 },
		{ false, 1, 8U << 20, 60000 },
		/* Overlapping nothing although one memfd: split over threads. */
		{ true, 0, 48U << 20, 32U << 20 },
	};
	struct rdmamem_client *c = test_client(td.socket);
	uint32_t *ref = malloc(ALIAS_FILE);
	uint64_t a, b;
	void *addr;
	int fd;

	ck_assert_ptr_nonnull(ref);
	ck_assert_int_eq(rdmamem_memfd_create("alias", ALIAS_FILE, &fd, &addr), 0);
	/* Every 4 bytes different, so any shift shows. */
	for (uint32_t k = 0; k < ALIAS_FILE / 4; k++)
		((uint32_t *)addr)[k] = k * 2654435761U;
	memcpy(ref, addr, ALIAS_FILE);
	ck_assert_int_eq(rdmamem_register(c, fd, ALIAS_A_OFF, ALIAS_A_LEN, &a), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, ALIAS_B_OFF, ALIAS_B_LEN, &b), 0);

	for (size_t k = 0; k < ELEMENTSOF(copies); k++) {
		uint64_t from_base = copies[k].a_to_b ? ALIAS_A_OFF : ALIAS_B_OFF;
		uint64_t to_base = copies[k].a_to_b ? ALIAS_B_OFF : ALIAS_A_OFF;
		struct rdmamem_copy cp = {
			.from_region = copies[k].a_to_b ? a : b,
			.from_offset = copies[k].from,
			.to_region = copies[k].a_to_b ? b : a,
			.to_offset = copies[k].to,
			.length = copies[k].length,
			.mode = RDMAMEM_LOCK_EXCLUSIVE,
		};

		memmove((char *)ref + to_base + copies[k].to,
			(char *)ref + from_base + copies[k].from, copies[k].length);
		ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
		ck_assert_msg(memcmp(addr, ref, ALIAS_FILE) == 0,
			      "copy %zu (%s, %llu bytes from %llu to %llu) differs from memmove", k,
			      copies[k].a_to_b ? "a to b" : "b to a",
			      (unsigned long long)copies[k].length,
			      (unsigned long long)(from_base + copies[k].from),
			      (unsigned long long)(to_base + copies[k].to));
	}
	munmap(addr, ALIAS_FILE);
	close(fd);
	free(ref);
	rdmamem_client_close(c);
}
END_TEST

/* The daemon's mapping keeps the memory: the client may drop its own. */
START_TEST(test_keepalive)
{
	struct rdmamem_client *c = test_client(td.socket);
	char buf[4];
	uint64_t id;
	void *addr;
	int fd = memfd_of(4096, 'k', &addr);

	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	munmap(addr, 4096);
	close(fd);
	ck_assert_int_eq(rdmamem_read(c, id, 4092, buf, 4, 0), 0);
	ck_assert_int_eq(memcmp(buf, "kkkk", 4), 0);
	rdmamem_client_close(c);
}
END_TEST

static int raw_register(int sock, int fd, const char *params, cJSON **ret)
{
	char msg[512];
	char *text;

	snprintf(msg, sizeof(msg), "{\"method\":\"io.rdmamemd.Register\",\"parameters\":%s}",
		 params);
	test_send_msg(sock, msg, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	ck_assert_int_gt(test_recv_msg(sock, &text, 5000), 0);
	*ret = cJSON_Parse(text);
	free(text);
	return 0;
}

/*
 * Expects error; InvalidParameter must name param and carry nothing else
 * (org.varlink.service declares only that), every other rejection says in
 * its message what to do.
 */
static void expect_register_error(int sock, int fd, const char *params, const char *error,
				  const char *param)
{
	const cJSON *p, *named;
	cJSON *reply;

	raw_register(sock, fd, params, &reply);
	ck_assert_msg(test_reply_error(reply) && strcmp(test_reply_error(reply), error) == 0,
		      "%s: expected %s, got %s", params, error, cJSON_PrintUnformatted(reply));
	p = cJSON_GetObjectItem(reply, "parameters");
	if (param) {
		named = cJSON_GetObjectItem(p, "parameter");
		ck_assert_msg(cJSON_IsString(named) && strcmp(named->valuestring, param) == 0 &&
				      cJSON_GetArraySize(p) == 1,
			      "%s: expected only parameter '%s', got %s", params, param,
			      cJSON_PrintUnformatted(reply));
	} else {
		ck_assert_int_gt(strlen(cJSON_GetObjectItem(p, "message")->valuestring), 20);
	}
	cJSON_Delete(reply);
}

/* Sends io.rdmamemd.method with fd (if >= 0); expects InvalidParameter naming param. */
static void expect_param_error(int sock, int fd, const char *method, const char *params,
			       const char *param)
{
	char msg[512], *text;
	cJSON *reply, *p;

	snprintf(msg, sizeof(msg), "{\"method\":\"io.rdmamemd.%s\",\"parameters\":%s}", method,
		 params);
	test_send_msg(sock, msg, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	ck_assert_int_gt(test_recv_msg(sock, &text, 5000), 0);
	reply = cJSON_Parse(text);
	free(text);
	p = cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "parameters"), "parameter");
	ck_assert_msg(test_reply_error(reply) &&
			      strcmp(test_reply_error(reply), VARLINK_ERROR_INVALID_PARAMETER) ==
				      0 &&
			      cJSON_IsString(p) && strcmp(p->valuestring, param) == 0,
		      "%s %s: expected InvalidParameter '%s', got %s", method, params, param,
		      cJSON_PrintUnformatted(reply));
	cJSON_Delete(reply);
}

/* Parameters that must each be refused, naming param. */
struct bad_param {
	const char *extra, *param;
};

/* Calls method with {prefix, extra} for each; expects InvalidParameter naming param. */
static void expect_bad_params(int sock, const char *method, const char *prefix,
			      const struct bad_param *bad, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		char params[384];

		snprintf(params, sizeof(params), "{%s%s%s}", prefix, bad[k].extra[0] ? "," : "",
			 bad[k].extra);
		expect_param_error(sock, -1, method, params, bad[k].param);
	}
}

/* A raw call on sock: its error name, or NULL when it succeeded. */
static const char *raw_error(int sock, const char *method, const char *fmt, ...) _printf_(3, 4);
static const char *raw_error(int sock, const char *method, const char *fmt, ...)
{
	static char name[128];
	char params[384], msg[512];
	cJSON *reply;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(params, sizeof(params), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "{\"method\":\"io.rdmamemd.%s\",\"parameters\":%s}", method,
		 params);
	reply = test_call(sock, msg);
	snprintf(name, sizeof(name), "%s", test_reply_error(reply) ?: "");
	cJSON_Delete(reply);
	return name[0] ? name : NULL;
}

START_TEST(test_register_rejections)
{
	int sock = test_connect(td.socket), before, pipefd[2], sp[2];
	int unsealed, sealed, empty, dir, zero, file;
	char path[128];

	test_assert_serving_fd(sock);
	before = test_settled_fds(td.pid);

	ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	zero = open("/dev/zero", O_RDWR | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/plain", td.dir);
	file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_eq(ftruncate(file, 4096), 0);
	unsealed = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(unsealed, 4096), 0);
	/* Sealed against growth only: shrinking is what crashes mappers. */
	ck_assert_int_eq(fcntl(unsealed, F_ADD_SEALS, F_SEAL_GROW), 0);
	sealed = memfd_of(4096, 0, NULL);
	ck_assert_int_eq(rdmamem_memfd_create("x", 1, &empty, NULL), 0);

	expect_register_error(sock, pipefd[0], "{\"fd\":0}", RDMAMEM_ERROR_NOT_A_MEMFD, NULL);
	expect_register_error(sock, sp[0], "{\"fd\":0}", RDMAMEM_ERROR_NOT_A_MEMFD, NULL);
	expect_register_error(sock, dir, "{\"fd\":0}", RDMAMEM_ERROR_NOT_A_MEMFD, NULL);
	expect_register_error(sock, zero, "{\"fd\":0}", RDMAMEM_ERROR_NOT_A_MEMFD, NULL);
	/* A regular file: on tmpfs it cannot take seals, elsewhere no seals
	 * at all; either way the daemon refuses it by name. */
	{
		cJSON *reply;
		const char *e;

		raw_register(sock, file, "{\"fd\":0}", &reply);
		e = test_reply_error(reply);
		ck_assert(e && (strcmp(e, RDMAMEM_ERROR_NOT_A_MEMFD) == 0 ||
				strcmp(e, RDMAMEM_ERROR_MISSING_SEAL) == 0));
		cJSON_Delete(reply);
	}
	expect_register_error(sock, unsealed, "{\"fd\":0}", RDMAMEM_ERROR_MISSING_SEAL, NULL);
	expect_register_error(sock, sealed, "{\"fd\":0,\"offset\":\"4097\"}",
			      RDMAMEM_ERROR_OUT_OF_RANGE, NULL);
	expect_register_error(sock, sealed, "{\"fd\":0,\"offset\":\"1\",\"length\":\"4096\"}",
			      RDMAMEM_ERROR_OUT_OF_RANGE, NULL);
	expect_register_error(sock, sealed,
			      "{\"fd\":0,\"offset\":\"18446744073709551615\",\"length\":\"2\"}",
			      RDMAMEM_ERROR_OUT_OF_RANGE, NULL);
	expect_register_error(sock, sealed, "{\"fd\":0,\"offset\":\"4096\"}",
			      VARLINK_ERROR_INVALID_PARAMETER, "offset");
	/* Absent length is "to the end"; an explicit 0 is an empty range. */
	expect_param_error(sock, sealed, "Register", "{\"fd\":0,\"length\":\"0\"}", "length");
	expect_param_error(sock, sealed, "Register", "{\"fd\":0,\"offset\":\"4096\"}", "offset");
	expect_param_error(sock, sealed, "Register", "{\"fd\":0,\"offset\":\"4095\",\"length\":0}",
			   "length");
	expect_register_error(sock, sealed, "{\"fd\":1}", VARLINK_ERROR_INVALID_PARAMETER, "fd");
	expect_register_error(sock, -1, "{\"fd\":0}", VARLINK_ERROR_INVALID_PARAMETER, "fd");
	expect_register_error(sock, sealed, "{}", VARLINK_ERROR_INVALID_PARAMETER, "fd");
	expect_register_error(sock, sealed, "{\"fd\":0,\"access\":[\"everything\"]}",
			      VARLINK_ERROR_INVALID_PARAMETER, "access");
	expect_register_error(sock, sealed, "{\"fd\":0,\"length\":-5}",
			      VARLINK_ERROR_INVALID_PARAMETER, "length");
	/* An empty memfd: sizing it is the client's job (the fd is what is
	 * wrong: no offset or length would help). */
	ck_assert_int_eq(close(empty), 0);
	empty = memfd_create("empty", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(fcntl(empty, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	expect_register_error(sock, empty, "{\"fd\":0}", VARLINK_ERROR_INVALID_PARAMETER, "fd");

	/* Nothing was kept: not the fds, not a region. */
	ck_assert_int_eq(test_settled_fds(td.pid), before);
	ck_assert_uint_eq(status_field("regions"), 0);

	close_many((int[]){ pipefd[0], pipefd[1], sp[0], sp[1], dir, zero, file, unsealed, sealed,
			    empty },
		   10);
	close(sock);
}
END_TEST

/* A memfd sealed against writes is registered read-only. */
START_TEST(test_read_only_region)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id;
	char buf[3];
	int fd;

	fd = memfd_create("ro", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(pwrite(fd, "abc", 3, 0), 3);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	ck_assert_int_eq(rdmamem_read(c, id, 0, buf, 3, 0), 0);
	ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
	ck_assert_int_eq(rdmamem_write(c, id, 0, "x", 1, RDMAMEM_LOCK_EXCLUSIVE, 0), -EROFS);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_READ_ONLY);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_bounds)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 4096, 0), other = register_new(c, 100, 0);
	char buf[16];
	char *reply = NULL;

	ck_assert_int_eq(rdmamem_read(c, id, 4090, buf, 7, 0), -ERANGE);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_int_eq(rdmamem_read(c, id, 4096, buf, 0, 0), 0);
	ck_assert_int_eq(rdmamem_write(c, id, 4095, "ab", 2, RDMAMEM_LOCK_EXCLUSIVE, 0), -ERANGE);
	ck_assert_int_eq(rdmamem_read(c, id, UINT64_MAX, buf, 2, 0), -EINVAL);
	{
		char params[160];

		/* Offset + length wraps around 2^64: refused, not wrapped. */
		snprintf(
			params, sizeof(params),
			"{\"region\":\"%llu\",\"offset\":\"18446744073709551615\",\"length\":\"2\"}",
			(unsigned long long)id);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Read", params, NULL, 0, NULL, NULL,
					      NULL),
				 -ERANGE);
	}
	{
		struct rdmamem_copy cp = { .from_region = id,
					   .to_region = other,
					   .length = 101,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		ck_assert_int_eq(rdmamem_copy(c, &cp), -ERANGE);
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "destination"));
	}
	/* Bad base64 is refused before a byte lands. */
	{
		char params[160];

		snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"data\":\"QUJD!EVG\"}",
			 (unsigned long long)id);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Write", params, NULL, 0, &reply, NULL,
					      NULL),
				 -EINVAL);
		ck_assert_ptr_nonnull(strstr(reply, "\"parameter\":\"data\""));
		free(reply);
		ck_assert_int_eq(rdmamem_read(c, id, 0, buf, 6, 0), 0);
		ck_assert_int_eq(memcmp(buf, "\0\0\0\0\0\0", 6), 0);
	}
	rdmamem_client_close(c);
}
END_TEST

/* Read answers at most --read-inline-max bytes; the library splits. */
START_TEST(test_inline_limit)
{
	const char *extra[] = { "--read-inline-max", "65536", NULL };
	struct rdmamem_client *c;
	char params[128], *buf = malloc(2 << 20);
	uint64_t id;

	test_daemon_stop(&td);
	start_with(extra);
	c = test_client(td.socket);
	id = register_new(c, 2 << 20, 'q');
	snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"length\":\"65537\"}",
		 (unsigned long long)id);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Read", params, NULL, 0, NULL, NULL, NULL),
			 -E2BIG);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_TRANSFER_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "65536"));
	rdmamem_client_close(c);
	free(buf);
}
END_TEST

struct share_args {
	const char *socket;
	uint64_t region;
	int expect_read; /* errno expected from a read, 0 for success */
	int expect_write;
	char expect_byte;
};

static int other_user_access(void *arg)
{
	struct share_args *a = arg;
	struct rdmamem_client *c = NULL;
	char buf[8];
	uint64_t lease;
	int r;

	if (rdmamem_client_connect(a->socket, &c) < 0)
		return 10;
	r = rdmamem_read(c, a->region, 0, buf, sizeof(buf), 0);
	if (r != a->expect_read)
		return 11;
	if (r == 0 && buf[0] != a->expect_byte)
		return 12;
	if (r == -EACCES && strcmp(rdmamem_client_error_name(c), RDMAMEM_ERROR_PERMISSION_DENIED))
		return 13;
	/* No hint of what exists: the message names neither owner nor size. */
	if (r == -EACCES && (strstr(rdmamem_client_error_message(c), "bytes") ||
			     strstr(rdmamem_client_error_message(c), "uid 0")))
		return 14;
	if (rdmamem_write(c, a->region, 0, "w", 1, RDMAMEM_LOCK_EXCLUSIVE, 0) != a->expect_write)
		return 15;
	/* Only the owner may unregister or share. */
	r = rdmamem_unregister(c, a->region);
	if (r != -EACCES)
		return 16;
	if (rdmamem_share(c, a->region, OTHER_UID, 0) != -EACCES)
		return 17;
	/* Shared read-only: shared leases yes, write leases no. */
	if (a->expect_read == 0 && a->expect_write == -EACCES) {
		if (rdmamem_lock(c, a->region, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease) != -EACCES)
			return 18;
		if (rdmamem_lock(c, a->region, RDMAMEM_LOCK_SHARED, 0, &lease) != 0)
			return 19;
	}
	rdmamem_client_close(c);
	return 0;
}

static int other_user_lists(void *arg)
{
	struct share_args *a = arg;
	struct rdmamem_client *c = NULL;
	char *reply = NULL;
	int r;

	if (rdmamem_client_connect(a->socket, &c) < 0)
		return 10;
	if (rdmamem_call(c, "io.rdmamemd.ListRegions", NULL, NULL, 0, &reply, NULL, NULL) < 0)
		return 11;
	/* Only the regions shared with this user show. */
	r = a->expect_read == 0 ? !strstr(reply, "\"region\":") : !!strstr(reply, "\"region\":");
	free(reply);
	rdmamem_client_close(c);
	return r ? 12 : 0;
}

START_TEST(test_permissions_and_sharing)
{
	struct rdmamem_client *c;
	struct share_args a;
	uint64_t id;

	if (!test_root_or_skip(__func__, "act as uid 65534"))
		return;
	c = test_client(td.socket);
	id = register_new(c, 4096, 's');
	a = (struct share_args){ .socket = td.socket, .region = id, .expect_byte = 's' };

	/* Not shared: nothing. */
	a.expect_read = -EACCES;
	a.expect_write = -EACCES;
	ck_assert_int_eq(as_other_user(other_user_access, &a), 0);
	ck_assert_int_eq(as_other_user(other_user_lists, &a), 0);

	/* Read-only share. */
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, RDMAMEM_SHARE_READONLY), 0);
	a.expect_read = 0;
	ck_assert_int_eq(as_other_user(other_user_access, &a), 0);
	ck_assert_int_eq(as_other_user(other_user_lists, &a), 0);

	/* Read-write share by group: the other user writes, the owner reads it. */
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	a.expect_write = 0;
	ck_assert_int_eq(as_other_user(other_user_access, &a), 0);
	{
		char b;

		ck_assert_int_eq(rdmamem_read(c, id, 0, &b, 1, 0), 0);
		ck_assert_int_eq(b, 'w');
	}
	ck_assert_int_eq(rdmamem_share(c, id, 1, RDMAMEM_SHARE_READONLY | 0x80), -EINVAL);
	rdmamem_client_close(c);
}
END_TEST

/*
 * Where a parameter's default is a value a client may also send, sending it
 * means what it says: length 0 is an empty range, lease 0 names a lease this
 * connection does not hold, uid -1 is no uid.
 */
START_TEST(test_absent_is_not_zero)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 4096, 'z');
	unsigned long long i = id;
	int sock = test_connect(td.socket), m = memfd_of(4096, 0, NULL);
	char zeros[129];

	/* GPU imports too, refused before any driver is needed. */
	memset(zeros, '0', 128);
	zeros[128] = '\0';
	{
		char params[256];

		snprintf(params, sizeof(params),
			 "{\"memory\":\"cuda-ipc\",\"ipc_handle\":\"%s\",\"length\":\"0\"}", zeros);
		expect_param_error(sock, -1, "Register", params, "length");
	}
	expect_param_error(
		sock, m, "Register",
		"{\"memory\":\"cuda-vmm\",\"fd\":0,\"size\":\"2097152\",\"length\":\"0\"}",
		"length");
	expect_param_error(sock, m, "Register", "{\"memory\":\"cuda-vmm\",\"fd\":0,\"size\":\"0\"}",
			   "size");

	/* Lease 0 is not "no lease". */
	ck_assert_str_eq(raw_error(sock, "Read",
				   "{\"region\":\"%llu\",\"length\":\"1\",\"lease\":\"0\"}", i),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_str_eq(raw_error(sock, "Write",
				   "{\"region\":\"%llu\",\"data\":\"eA==\",\"lease\":0}", i),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_str_eq(
		raw_error(sock, "Copy",
			  "{\"from\":{\"region\":\"%llu\",\"lease\":\"0\"},\"to\":{\"region\":"
			  "\"%llu\",\"offset\":\"8\"},\"length\":\"1\"}",
			  i, i),
		RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_str_eq(raw_error(sock, "Copy",
				   "{\"from\":{\"region\":\"%llu\"},\"to\":{\"region\":\"%llu\","
				   "\"offset\":\"8\",\"lease\":\"0\"},\"length\":\"1\"}",
				   i, i),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	/* Nothing was written under the lease that is none. */
	{
		char b[9];

		ck_assert_int_eq(rdmamem_read(c, id, 0, b, 9, 0), 0);
		ck_assert_int_eq(memcmp(b, "zzzzzzzzz", 9), 0);
	}
	/* A null lease is an absent one. */
	ck_assert_ptr_null(raw_error(sock, "Read",
				     "{\"region\":\"%llu\",\"length\":\"1\",\"lease\":null}", i));

	/* Zero-length transfers are valid: checked like others, nothing moves. */
	ck_assert_ptr_null(raw_error(sock, "Read",
				     "{\"region\":\"%llu\",\"offset\":\"4096\",\"length\":\"0\"}",
				     i));
	ck_assert_str_eq(raw_error(sock, "Read",
				   "{\"region\":\"%llu\",\"offset\":\"4097\",\"length\":\"0\"}", i),
			 RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_ptr_null(raw_error(sock, "Write", "{\"region\":\"%llu\",\"data\":\"\"}", i));
	ck_assert_ptr_null(raw_error(sock, "Copy",
				     "{\"from\":{\"region\":\"%llu\"},\"to\":{\"region\":\"%llu\"},"
				     "\"length\":\"0\"}",
				     i, i));

	/* timeout_ms -1 is the default spelled out; less is refused. */
	ck_assert_ptr_null(raw_error(sock, "Read",
				     "{\"region\":\"%llu\",\"length\":\"1\",\"timeout_ms\":-1}",
				     i));
	expect_param_error(sock, -1, "Read",
			   "{\"region\":\"1\",\"length\":\"1\",\"timeout_ms\":-2}", "timeout_ms");

	/* ConnectQueuePair: a sent mtu or gid_index must exist. */
	{
		static const struct bad_param bad[] = {
			{ "\"mtu\":0", "mtu" },
			{ "\"mtu\":128", "mtu" },
			{ "\"gid_index\":-1", "gid_index" },
			{ "\"gid_index\":256", "gid_index" },
		};
		cJSON *r = test_call(sock, "{\"method\":\"io.rdmamemd.CreateAccessToken\"}");
		const char *token =
			cJSON_GetObjectItem(cJSON_GetObjectItem(r, "parameters"), "token")
				->valuestring;
		char prefix[160];

		snprintf(
			prefix, sizeof(prefix),
			"\"device\":\"nodev\",\"token\":\"%s\",\"qpn\":1,\"psn\":0,\"gid\":\"fe80::1\"",
			token);
		expect_bad_params(sock, "ConnectQueuePair", prefix, bad, ELEMENTSOF(bad));
		/* Left out, or sound: on to the device, which does not exist. */
		ck_assert_str_eq(raw_error(sock, "ConnectQueuePair",
					   "{%s,\"mtu\":4096,\"gid_index\":0,\"lid\":0}", prefix),
				 RDMAMEM_ERROR_NO_SUCH_DEVICE);
		cJSON_Delete(r);
	}

	/* Share and Unshare take exactly one id, and a real one. */
	for (int k = 0; k < 2; k++) {
		static const struct bad_param bad[] = {
			{ "\"uid\":-1", "uid" },
			{ "\"uid\":-1,\"gid\":5", "uid" },
			{ "\"gid\":-7,\"uid\":5", "uid" },
			{ "\"gid\":-7", "gid" },
			{ "\"gid\":4294967295", "gid" },
			{ "\"uid\":4294967296", "uid" },
			{ "", "uid" },
			{ "\"uid\":null,\"gid\":null", "uid" },
		};
		const char *method = k ? "Unshare" : "Share";
		char prefix[64];

		snprintf(prefix, sizeof(prefix), "\"region\":\"%llu\"", i);
		expect_bad_params(sock, method, prefix, bad, ELEMENTSOF(bad));
		ck_assert_ptr_null(raw_error(sock, method, "{\"region\":\"%llu\",\"uid\":0}", i));
		ck_assert_ptr_null(raw_error(
			sock, method, "{\"region\":\"%llu\",\"gid\":4294967294,\"uid\":null}", i));
	}
	/* None of the refused Shares shared anything. */
	{
		cJSON *r = get_region(c, id);

		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "shares")), 0);
		cJSON_Delete(r);
	}
	close(m);
	close(sock);
	rdmamem_client_close(c);
}
END_TEST

/*
 * A hugetlb memfd on a host with no free huge pages of its size: the daemon
 * cannot map it, and says why by name (not InternalError). memfd_create and
 * ftruncate of a hugetlb file need no pages; the daemon's mapping reserves
 * them. Uses a page size of which the host has none available, so the test
 * does not depend on the machine's configuration.
 */
/* Free huge pages of page bytes that no mapping has reserved. */
static long long hugepages_available(uint64_t page)
{
	long long free_pages = hugetlb_pages(page, "free_hugepages");
	long long resv = hugetlb_pages(page, "resv_hugepages");

	return free_pages < 0 || resv < 0 ? -1 : free_pages - resv;
}

START_TEST(test_hugetlb_without_huge_pages)
{
	static const struct {
		unsigned flag;
		uint64_t size;
		const char *dir;
	} sizes[] = {
		{ MFD_HUGE_2MB, 2ULL << 20, "hugepages-2048kB" },
		{ MFD_HUGE_1GB, 1ULL << 30, "hugepages-1048576kB" },
	};
	struct rdmamem_client *c = test_client(td.socket);
	int sock = test_connect(td.socket), tried = 0, before;

	test_assert_serving_fd(sock);
	before = test_settled_fds(td.pid);
	for (size_t k = 0; k < ELEMENTSOF(sizes); k++) {
		long long avail = hugepages_available(sizes[k].size);
		const char *msg;
		uint64_t id;
		cJSON *reply;
		int fd;

		if (avail != 0)
			continue;
		fd = memfd_create("huge",
				  MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | sizes[k].flag);
		if (fd < 0)
			continue;
		ck_assert_int_eq(ftruncate(fd, (off_t)sizes[k].size), 0);
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
		/* Only if the host still has none now: the answer depends on it. */
		if (hugepages_available(sizes[k].size) != 0) {
			close(fd);
			continue;
		}
		raw_register(sock, fd, "{\"fd\":0}", &reply);
		ck_assert_msg(test_reply_error(reply) &&
				      strcmp(test_reply_error(reply),
					     RDMAMEM_ERROR_MEMORY_UNAVAILABLE) == 0,
			      "%s: %s", sizes[k].dir, cJSON_PrintUnformatted(reply));
		/* It says which pages, how many there are, and what to do. */
		msg = cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "parameters"), "message")
			      ->valuestring;
		ck_assert_ptr_nonnull(strstr(msg,
					     sizes[k].size == (2ULL << 20) ? "2 MiB" : "1 GiB"));
		ck_assert_ptr_nonnull(strstr(msg, "huge pages"));
		ck_assert_ptr_nonnull(strstr(msg, "0 free"));
		ck_assert_ptr_nonnull(strstr(msg, sizes[k].dir));
		cJSON_Delete(reply);
		/* The library maps it to ENOMEM. */
		ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), -ENOMEM);
		ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_MEMORY_UNAVAILABLE);
		close(fd);
		tried++;
	}
	if (!tried) {
		printf("SKIPPED test_hugetlb_without_huge_pages: every huge page size here has "
		       "free pages (or hugetlb memfds are not supported), so a hugetlb mapping "
		       "would succeed\n");
		goto out;
	}
	/* Nothing kept: no region, no charge, no fd. */
	ck_assert_uint_eq(status_field("regions"), 0);
	ck_assert_uint_eq(status_field("pinned_bytes"), 0);
	ck_assert_int_eq(test_settled_fds(td.pid), before);
out:
	test_assert_serving_fd(sock);
	close(sock);
	rdmamem_client_close(c);
}
END_TEST

/*
 * A hugetlb memfd where a huge page is free: a region over a few bytes of it
 * maps the whole page, works, and goes without a trace (a mapping of a
 * partial huge page cannot be unmapped: it stayed, holding the page). When
 * the host has no free 2 MiB page, root reserves one for the test and gives
 * it back after; otherwise the test is skipped.
 */
static long long hugepages_total(void)
{
	return hugetlb_pages(2 << 20, "nr_hugepages");
}

static bool hugepages_set(long long n)
{
	FILE *f = fopen(HUGETLB_SYSFS "-2048kB/nr_hugepages", "we");
	bool ok = f && fprintf(f, "%lld\n", n) > 0;

	if (f && fclose(f) != 0)
		ok = false;
	return ok && hugepages_total() == n;
}

/*
 * nr_hugepages as the case found it. The test runs in a child process that
 * a failed assertion or a timeout ends at once: the case's unchecked
 * teardown, in the runner's own process, puts it back then.
 */
static long long hugepages_at_start = -1;

static void hugepages_remember(void)
{
	hugepages_at_start = hugepages_total();
}

static void hugepages_restore(void)
{
	if (hugepages_at_start >= 0 && hugepages_total() != hugepages_at_start)
		hugepages_set(hugepages_at_start);
}

static bool no_memfd_maps(void)
{
	return test_memfd_maps(td.pid) == 0;
}

START_TEST(test_hugetlb_region)
{
	struct rdmamem_client *c;
	uint64_t id;
	char buf[6];
	void *addr;
	int fd;

	if (hugepages_available(2 << 20) < 1) {
		if (geteuid() == 0 && hugepages_at_start >= 0)
			hugepages_set(hugepages_at_start + 1);
		if (hugepages_available(2 << 20) < 1) {
			hugepages_restore();
			printf("SKIPPED test_hugetlb_region: no free 2 MiB huge page, and none "
			       "could be reserved for the test\n");
			return;
		}
	}
	c = test_client(td.socket);
	fd = memfd_create("huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_HUGE_2MB);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 2 << 20), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 4097, 4096, &id), 0);
	ck_assert_int_eq(rdmamem_write(c, id, 4090, "hugetl", 6, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	ck_assert_int_eq(rdmamem_write(c, id, 4091, "hugetl", 6, RDMAMEM_LOCK_EXCLUSIVE, 0),
			 -ERANGE);
	addr = mmap(NULL, 2 << 20, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(addr, MAP_FAILED);
	ck_assert_int_eq(memcmp((char *)addr + 4097 + 4090, "hugetl", 6), 0);
	ck_assert_int_eq(rdmamem_read(c, id, 4090, buf, 6, 0), 0);
	ck_assert_int_eq(memcmp(buf, "hugetl", 6), 0);
	munmap(addr, 2 << 20);
	close(fd);
	ck_assert_int_eq(test_memfd_maps(td.pid), 1);
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	test_wait_until(no_memfd_maps, 5000, "the daemon to unmap the huge page");
	rdmamem_client_close(c);
	hugepages_restore();
}
END_TEST

START_TEST(test_quotas)
{
	const char *extra[] = { "--max-regions-per-uid", "2", "--max-pinned-bytes-per-uid",
				"1048576", NULL };
	struct rdmamem_client *c;
	char *reply = NULL;
	cJSON *root;
	uint64_t id;
	int fd;

	test_daemon_stop(&td);
	start_with(extra);
	c = test_client(td.socket);
	register_new(c, 4096, 0);
	fd = memfd_of(1048576, 0, NULL);
	/* Bytes: 4096 + 1 MiB is over 1 MiB. */
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), -EDQUOT);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_QUOTA_EXCEEDED);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "1048576"));
	/* The reply carries the numbers. */
	{
		char params[32];

		snprintf(params, sizeof(params), "{\"fd\":0}");
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register", params, &fd, 1, &reply,
					      NULL, NULL),
				 -EDQUOT);
		root = cJSON_Parse(reply);
		ck_assert_str_eq(cJSON_GetObjectItem(root, "quota")->valuestring, "pinned_bytes");
		ck_assert_str_eq(cJSON_GetObjectItem(root, "limit")->valuestring, "1048576");
		ck_assert_str_eq(cJSON_GetObjectItem(root, "used")->valuestring, "4096");
		ck_assert_str_eq(cJSON_GetObjectItem(root, "requested")->valuestring, "1048576");
		cJSON_Delete(root);
		free(reply);
	}
	/* Count: a second small one fits, a third does not. */
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 4096, &id), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 4096, &id), -EDQUOT);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "regions"));
	/* Unregistering gives the quota back. */
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 4096, &id), 0);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

/* The reply to a Lock sent with send_lock: the lease id, or 0 with *error. */
static uint64_t lock_reply(int s, int timeout_ms, const char **error)
{
	static char name[128];
	char *text;
	cJSON *r;
	uint64_t lease = 0;
	ssize_t n = test_recv_msg(s, &text, timeout_ms);

	if (n == -ETIMEDOUT) {
		*error = "(no reply yet)";
		return 0;
	}
	ck_assert_int_gt(n, 0);
	r = cJSON_Parse(text);
	free(text);
	if (test_reply_error(r)) {
		snprintf(name, sizeof(name), "%s", test_reply_error(r));
		*error = name;
	} else {
		ck_assert_int_eq(
			json_parse_u64(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "parameters"),
							   "lease")
					       ->valuestring,
				       &lease),
			0);
		*error = NULL;
	}
	cJSON_Delete(r);
	return lease;
}

static void unlock_raw(int s, uint64_t lease)
{
	char msg[128];
	cJSON *r;

	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Unlock\",\"parameters\":{\"lease\":\"%llu\"}}",
		 (unsigned long long)lease);
	r = test_call(s, msg);
	ck_assert_ptr_null(test_reply_error(r));
	cJSON_Delete(r);
}

/* An exclusive waiter gets in while readers keep arriving. */
START_TEST(test_fifo_fairness)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 4096, 0), l1, lw;
	int reader1, writer, late[3];
	const char *err;

	reader1 = test_lock_raw(td.socket, id, "shared", -1);
	l1 = lock_reply(reader1, 5000, &err);
	ck_assert_ptr_null(err);

	writer = test_lock_raw(td.socket, id, "exclusive", -1);
	ck_assert_uint_eq(lock_reply(writer, 200, &err), 0);
	ck_assert_str_eq(err, "(no reply yet)");

	/* Readers arriving now would be compatible with the holder, but the
	 * writer came first: they wait. */
	for (int i = 0; i < 3; i++) {
		late[i] = test_lock_raw(td.socket, id, "shared", -1);
		ck_assert_uint_eq(lock_reply(late[i], 100, &err), 0);
		ck_assert_str_eq(err, "(no reply yet)");
	}
	ck_assert_int_eq(lock_count(c, id, "held"), 1);
	ck_assert_int_eq(lock_count(c, id, "waiting"), 4);

	unlock_raw(reader1, l1);
	lw = lock_reply(writer, 5000, &err);
	ck_assert_ptr_null(err);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(lock_reply(late[i], 100, &err), 0);
		ck_assert_str_eq(err, "(no reply yet)");
	}

	/* The writer leaves: all three readers go in together. */
	unlock_raw(writer, lw);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_gt(lock_reply(late[i], 5000, &err), 0);
		ck_assert_ptr_null(err);
	}
	ck_assert_int_eq(lock_count(c, id, "held"), 3);
	for (int i = 0; i < 3; i++)
		close(late[i]);
	close(reader1);
	close(writer);
	rdmamem_client_close(c);
}
END_TEST

static uint64_t watched_region;
static struct rdmamem_client *watcher;

static bool no_leases(void)
{
	return lock_count(watcher, watched_region, "held") == 0 &&
	       lock_count(watcher, watched_region, "waiting") == 0;
}

/* Held and waiting leases go with their connection; timeouts answer. */
START_TEST(test_lease_release_and_timeout)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 4096, 0), lease;
	int holder, waiter, timed;
	const char *err;
	struct timespec t0, t1;

	watcher = c;
	watched_region = id;
	holder = test_lock_raw(td.socket, id, "exclusive", -1);
	ck_assert_uint_gt(lock_reply(holder, 5000, &err), 0);
	waiter = test_lock_raw(td.socket, id, "disjoint", -1);
	ck_assert_uint_eq(lock_reply(waiter, 100, &err), 0);

	/* Timeout: answered with LockTimeout, no lease left behind. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	timed = test_lock_raw(td.socket, id, "shared", 300);
	ck_assert_uint_eq(lock_reply(timed, 5000, &err), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_str_eq(err, RDMAMEM_ERROR_LOCK_TIMEOUT);
	ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 290);
	ck_assert_int_eq(lock_count(c, id, "waiting"), 1);
	/* timeout 0 does not wait at all. */
	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_SHARED, 0, &lease), -ETIMEDOUT);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_LOCK_TIMEOUT);

	/* The holder hangs up: the waiter gets the lock. */
	close(holder);
	ck_assert_uint_gt(lock_reply(waiter, 5000, &err), 0);
	ck_assert_ptr_null(err);

	/* A waiter hangs up while waiting: its place in the queue goes. */
	holder = test_lock_raw(td.socket, id, "exclusive", -1);
	ck_assert_uint_eq(lock_reply(holder, 100, &err), 0);
	ck_assert_int_eq(lock_count(c, id, "waiting"), 1);
	close(holder);
	close(waiter);
	test_wait_until(no_leases, 5000, "the leases of closed connections to go");

	/* Leases are per connection: another one cannot unlock them. */
	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_SHARED, -1, &lease), 0);
	{
		struct rdmamem_client *other = test_client(td.socket);

		ck_assert_int_eq(rdmamem_unlock(other, lease), -ENOENT);
		ck_assert_str_eq(rdmamem_client_error_name(other), RDMAMEM_ERROR_NO_SUCH_LEASE);
		ck_assert_int_eq(rdmamem_unlock(other, 999999), -ENOENT);
		rdmamem_client_close(other);
	}
	ck_assert_int_eq(rdmamem_unlock(c, lease), 0);
	ck_assert_int_eq(rdmamem_unlock(c, lease), -ENOENT);
	close(timed);
	rdmamem_client_close(c);
}
END_TEST

/* A lease holder's own operations run under the lease instead of
 * queueing behind it; the lease's mode bounds what they may do. */
START_TEST(test_operations_under_lease)
{
	struct rdmamem_client *c = test_client(td.socket), *other = test_client(td.socket);
	uint64_t a = register_new(c, 1 << 20, 'a'), b = register_new(c, 1 << 20, 'b');
	uint64_t la, lb, ls;
	char buf[4];

	ck_assert_int_eq(rdmamem_lock(c, a, RDMAMEM_LOCK_EXCLUSIVE, -1, &la), 0);
	ck_assert_int_eq(rdmamem_write(c, a, 0, "AAAA", 4, RDMAMEM_LOCK_EXCLUSIVE, la), 0);
	ck_assert_int_eq(rdmamem_read(c, a, 0, buf, 4, la), 0);
	/* Without the lease, the holder's own write would wait: bounded here. */
	{
		char params[128];

		snprintf(params, sizeof(params),
			 "{\"region\":\"%llu\",\"length\":\"4\",\"timeout_ms\":100}",
			 (unsigned long long)a);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Read", params, NULL, 0, NULL, NULL,
					      NULL),
				 -ETIMEDOUT);
	}
	/* Others wait too. */
	{
		char params[128];

		snprintf(params, sizeof(params),
			 "{\"region\":\"%llu\",\"length\":\"4\",\"timeout_ms\":100}",
			 (unsigned long long)a);
		ck_assert_int_eq(rdmamem_call(other, "io.rdmamemd.Read", params, NULL, 0, NULL,
					      NULL, NULL),
				 -ETIMEDOUT);
	}
	/* A lease on one region does not cover another... */
	ck_assert_int_eq(rdmamem_read(c, b, 0, buf, 4, la), -EBUSY);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_LEASE_CONFLICT);
	/* ...and a shared lease allows no writes. */
	ck_assert_int_eq(rdmamem_lock(c, b, RDMAMEM_LOCK_SHARED, -1, &ls), 0);
	ck_assert_int_eq(rdmamem_write(c, b, 0, "x", 1, RDMAMEM_LOCK_EXCLUSIVE, ls), -EBUSY);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "reads only"));
	/* Copy b (shared lease) → a (exclusive lease). */
	{
		struct rdmamem_copy cp = { .from_region = b,
					   .from_lease = ls,
					   .to_region = a,
					   .to_offset = 2,
					   .length = 2,
					   .to_lease = la,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
		ck_assert_int_eq(rdmamem_read(c, a, 0, buf, 4, la), 0);
		ck_assert_int_eq(memcmp(buf, "AAbb", 4), 0);
	}
	/* The other connection's leases are not ours to use. */
	ck_assert_int_eq(rdmamem_read(other, a, 0, buf, 4, la), -ENOENT);
	ck_assert_int_eq(rdmamem_unlock(c, la), 0);
	ck_assert_int_eq(rdmamem_read(other, a, 0, buf, 4, 0), 0);
	ck_assert_int_eq(rdmamem_lock(c, b, RDMAMEM_LOCK_SHARED, -1, &lb), 0);
	rdmamem_client_close(other);
	rdmamem_client_close(c);
}
END_TEST

/*
 * Readers never see a torn write: a writer keeps rewriting the whole region
 * with one byte value and a checksum while readers check every byte.
 */
#define TORN_SIZE (1U << 20)

static int torn_writer(const char *socket, uint64_t id, int rounds)
{
	struct rdmamem_client *c = NULL;
	unsigned char *buf = malloc(TORN_SIZE);

	if (rdmamem_client_connect(socket, &c) < 0)
		return 20;
	for (int i = 0; i < rounds; i++) {
		memset(buf, (unsigned char)(i + 1), TORN_SIZE);
		if (rdmamem_write(c, id, 0, buf, TORN_SIZE, RDMAMEM_LOCK_EXCLUSIVE, 0) < 0)
			return 21;
	}
	rdmamem_client_close(c);
	free(buf);
	return 0;
}

static int torn_reader(const char *socket, uint64_t id, int rounds)
{
	struct rdmamem_client *c = NULL;
	unsigned char *buf = malloc(TORN_SIZE);
	int changes = 0, last = -1;

	if (rdmamem_client_connect(socket, &c) < 0)
		return 30;
	for (int i = 0; i < rounds; i++) {
		if (rdmamem_read(c, id, 0, buf, TORN_SIZE, 0) < 0)
			return 31;
		for (size_t k = 1; k < TORN_SIZE; k++)
			if (buf[k] != buf[0])
				return 32; /* torn */
		if (buf[0] != last)
			changes++;
		last = buf[0];
	}
	rdmamem_client_close(c);
	free(buf);
	/* The reader saw the writer's progress, not one frozen value. */
	return changes > 1 ? 0 : 33;
}

START_TEST(test_no_torn_reads)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, TORN_SIZE, 0);
	pid_t pids[3];
	int status;

	for (int i = 0; i < 3; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(i == 0 ? torn_writer(td.socket, id, 60) :
				       torn_reader(td.socket, id, 60));
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "process %d: status 0x%x", i, status);
	}
	rdmamem_client_close(c);
}
END_TEST

/* Disjoint writers in parallel, each on its own slice, all land intact. */
#define SLICES 4
#define SLICE (256U * 1024U)

static int slice_writer(const char *socket, uint64_t id, int slice)
{
	struct rdmamem_client *c = NULL;
	unsigned char *buf = malloc(SLICE);

	if (rdmamem_client_connect(socket, &c) < 0)
		return 40;
	for (int round = 0; round < 40; round++) {
		memset(buf, (unsigned char)(slice * 50 + round), SLICE);
		if (rdmamem_write(c, id, (uint64_t)slice * SLICE, buf, SLICE, RDMAMEM_LOCK_DISJOINT,
				  0) < 0)
			return 41;
	}
	rdmamem_client_close(c);
	free(buf);
	return 0;
}

START_TEST(test_disjoint_writers)
{
	struct rdmamem_client *c = test_client(td.socket);
	void *addr;
	int fd = memfd_of(SLICES * SLICE, 0, &addr), status;
	uint64_t id;
	pid_t pids[SLICES];

	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	for (int i = 0; i < SLICES; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(slice_writer(td.socket, id, i));
	}
	for (int i = 0; i < SLICES; i++) {
		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (int i = 0; i < SLICES; i++) {
		unsigned char *s = (unsigned char *)addr + (size_t)i * SLICE;

		for (size_t k = 0; k < SLICE; k++)
			ck_assert_int_eq(s[k], i * 50 + 39);
	}
	munmap(addr, SLICES * SLICE);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

/*
 * A client killed with regions, a lease, queued lock waits and a large copy
 * in flight leaves nothing behind: fds, mappings, regions, leases.
 */
static bool back_to_baseline_regions(void)
{
	return status_field("regions") == 0 && status_field("clients") == 1;
}

/* Two connections with regions, a lease and a queued lock wait, and two
 * raw ones with copies in flight. */
static int disconnecting_client(const char *socket, void *arg)
{
	struct rdmamem_client *c = NULL, *c2 = NULL;
	uint64_t a, b, lease;
	int s;

	(void)arg;
	if (rdmamem_client_connect(socket, &c) < 0 || rdmamem_client_connect(socket, &c2) < 0)
		return 1;
	a = register_new(c, 64 << 20, 1);
	b = register_new(c, 64 << 20, 2);
	register_new(c2, 4096, 3);
	if (rdmamem_lock(c, a, RDMAMEM_LOCK_SHARED, -1, &lease) < 0)
		return 2;
	/* c2 queues behind the lease with a write; raw, so we do not
	 * wait for the answer. */
	s = test_lock_raw(td.socket, a, "exclusive", -1);
	(void)s;
	/* A big copy inside b runs on the pool; one into a waits
	 * behind the lease and the queued writer. */
	{
		char msg[256];
		int raw = test_connect(socket), raw2 = test_connect(socket);

		snprintf(msg, sizeof(msg),
			 "{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{"
			 "\"region\":\"%llu\"},\"to\":{\"region\":\"%llu\",\"offset\":"
			 "\"33554432\"},\"length\":\"33554432\"}}",
			 (unsigned long long)b, (unsigned long long)b);
		test_send_msg(raw, msg, NULL, 0);
		snprintf(msg, sizeof(msg),
			 "{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{"
			 "\"region\":\"%llu\"},\"to\":{\"region\":\"%llu\"},"
			 "\"length\":\"33554432\"}}",
			 (unsigned long long)b, (unsigned long long)a);
		test_send_msg(raw2, msg, NULL, 0);
	}
	return 0;
}

START_TEST(test_disconnect_leaves_nothing)
{
	struct test_baseline base = {
		.settled = back_to_baseline_regions,
		.timeout_ms = 5000,
		.what = "the killed client's regions to go",
	};

	test_assert_serving(td.socket);
	test_baseline_take(&td, &base);
	ck_assert_int_eq(base.memfd_maps, 0);
	test_kill_client_mid_call(&td, &base, disconnecting_client, NULL, 20000);
	ck_assert_uint_eq(status_field("pinned_bytes"), 0);
}
END_TEST

/*
 * n raw connections made by a process of OTHER_UID: the daemon knows a
 * connection by the credentials of the process that connected it, so the
 * test can then drive them itself, one step at a time.
 */
static void other_user_connections(int *fds, size_t n)
{
	char cmsg_buf[CMSG_SPACE(8 * sizeof(int))] = {};
	struct iovec iov = { .iov_base = (char[1]){ 0 }, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cmsg_buf,
			     .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	int sp[2], status;
	pid_t pid;

	ck_assert_uint_le(n, 8);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		if (strlen(td.socket) >= sizeof(sa.sun_path))
			_exit(96);
		memcpy(sa.sun_path, td.socket, strlen(td.socket) + 1);
		if (test_become_other_uid() < 0)
			_exit(99);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		for (size_t i = 0; i < n; i++) {
			int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
				_exit(98);
			memcpy(CMSG_DATA(cm) + i * sizeof(int), &s, sizeof(int));
		}
		_exit(sendmsg(sp[1], &mh, 0) == 1 ? 0 : 97);
	}
	close(sp[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
	ck_assert_int_eq(recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC), 1);
	ck_assert_ptr_nonnull(CMSG_FIRSTHDR(&mh));
	ck_assert_uint_eq(CMSG_FIRSTHDR(&mh)->cmsg_len, CMSG_LEN(n * sizeof(int)));
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), n * sizeof(int));
	close(sp[0]);
}

/* A raw Lock on an open connection: the lease, or 0 with *error. */
static uint64_t lock_on(int s, uint64_t region, const char *mode, int timeout_ms,
			const char **error)
{
	char msg[256];

	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"%llu\","
		 "\"mode\":\"%s\",\"timeout_ms\":%d}}",
		 (unsigned long long)region, mode, timeout_ms);
	test_send_msg(s, msg, NULL, 0);
	return lock_reply(s, 5000, error);
}

/* The reply to a call sent earlier has not come within ms. */
static void assert_no_reply(int s, int ms)
{
	char *text = NULL;

	ck_assert_int_eq(test_recv_msg(s, &text, ms), -ETIMEDOUT);
}

/* The reply to a call sent earlier: its error name, or "" on success. */
static const char *reply_error(int s)
{
	static char name[128];
	char *text = NULL;
	cJSON *r;

	ck_assert_int_gt(test_recv_msg(s, &text, 5000), 0);
	r = cJSON_Parse(text);
	free(text);
	snprintf(name, sizeof(name), "%s", test_reply_error(r) ?: "");
	cJSON_Delete(r);
	return name;
}

/*
 * Unshare takes back what Share gave: new calls are refused at once, a
 * waiting Lock and a waiting transfer of the other uid are refused, its held
 * leases end (its Unlock answers NoSuchLease), and the region leaves its
 * listings. Rights it keeps another way keep their leases.
 */
START_TEST(test_unshare)
{
	struct rdmamem_client *c;
	uint64_t id, lo, own, l2;
	unsigned long long i;
	const char *err;
	int o[4];
	char b;

	if (!test_root_or_skip(__func__, "act as uid 65534"))
		return;
	c = test_client(td.socket);
	id = register_new(c, 4096, 'u');
	i = id;
	other_user_connections(o, ELEMENTSOF(o));
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, 0), 0);

	/* The other uid holds a shared lease, the owner another; a write lease
	 * and a write without a lease of the other uid queue behind them. */
	lo = lock_on(o[0], id, "shared", -1, &err);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_SHARED, -1, &own), 0);
	{
		char msg[160];

		snprintf(msg, sizeof(msg),
			 "{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"%llu\","
			 "\"mode\":\"exclusive\"}}",
			 i);
		test_send_msg(o[1], msg, NULL, 0);
		snprintf(msg, sizeof(msg),
			 "{\"method\":\"io.rdmamemd.Write\",\"parameters\":{\"region\":\"%llu\","
			 "\"data\":\"d2FpdGVk\"}}",
			 i);
		test_send_msg(o[2], msg, NULL, 0);
	}
	assert_no_reply(o[1], 200);
	assert_no_reply(o[2], 50);
	ck_assert_int_eq(lock_count(c, id, "held"), 2);
	ck_assert_int_eq(lock_count(c, id, "waiting"), 1);

	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_UID, 0), 0);
	/* The waiting Lock is answered; the held lease is gone. */
	ck_assert_uint_eq(lock_reply(o[1], 5000, &err), 0);
	ck_assert_str_eq(err, RDMAMEM_ERROR_PERMISSION_DENIED);
	ck_assert_str_eq(raw_error(o[0], "Unlock", "{\"lease\":\"%llu\"}", (unsigned long long)lo),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_int_eq(lock_count(c, id, "held"), 1);
	ck_assert_int_eq(lock_count(c, id, "waiting"), 0);
	/* The owner's lease is untouched; once it goes, the queued write is
	 * refused instead of landing. */
	ck_assert_int_eq(rdmamem_unlock(c, own), 0);
	ck_assert_str_eq(reply_error(o[2]), RDMAMEM_ERROR_PERMISSION_DENIED);
	ck_assert_int_eq(rdmamem_read(c, id, 0, &b, 1, 0), 0);
	ck_assert_int_eq(b, 'u');

	/* New calls: refused at once, and the region is out of sight. */
	ck_assert_str_eq(raw_error(o[3], "Read", "{\"region\":\"%llu\",\"length\":\"1\"}", i),
			 RDMAMEM_ERROR_PERMISSION_DENIED);
	ck_assert_str_eq(raw_error(o[3], "GetRegion", "{\"region\":\"%llu\"}", i),
			 RDMAMEM_ERROR_PERMISSION_DENIED);
	{
		cJSON *r = test_call(o[3], "{\"method\":\"io.rdmamemd.ListRegions\"}");

		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
					 cJSON_GetObjectItem(r, "parameters"), "regions")),
				 0);
		cJSON_Delete(r);
	}
	/* Only the owner unshares; unsharing what is not shared does nothing. */
	ck_assert_str_eq(raw_error(o[3], "Unshare", "{\"region\":\"%llu\",\"uid\":%d}", i,
				   OTHER_UID),
			 RDMAMEM_ERROR_PERMISSION_DENIED);
	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_UID, 0), 0);
	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_UID, RDMAMEM_SHARE_READONLY), -EINVAL);

	/* A gid share taken back: a write lease it gave ends, although a
	 * read-only uid share remains; a shared lease stays on that share. */
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, RDMAMEM_SHARE_READONLY), 0);
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	lo = lock_on(o[0], id, "exclusive", -1, &err);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	ck_assert_str_eq(raw_error(o[0], "Unlock", "{\"lease\":\"%llu\"}", (unsigned long long)lo),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	l2 = lock_on(o[3], id, "shared", -1, &err);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(rdmamem_unshare(c, id, OTHER_GID, RDMAMEM_SHARE_GROUP), 0);
	ck_assert_ptr_null(raw_error(o[3], "Read",
				     "{\"region\":\"%llu\",\"length\":\"1\",\"lease\":\"%llu\"}", i,
				     (unsigned long long)l2));
	ck_assert_ptr_null(raw_error(o[3], "Unlock", "{\"lease\":\"%llu\"}",
				     (unsigned long long)l2));

	/* A share turned read-only ends the write leases it gave. */
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, 0), 0);
	lo = lock_on(o[0], id, "disjoint", -1, &err);
	ck_assert_ptr_null(err);
	l2 = lock_on(o[3], id, "disjoint", -1, &err);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, RDMAMEM_SHARE_READONLY), 0);
	ck_assert_str_eq(raw_error(o[0], "Unlock", "{\"lease\":\"%llu\"}", (unsigned long long)lo),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_str_eq(raw_error(o[3], "Unlock", "{\"lease\":\"%llu\"}", (unsigned long long)l2),
			 RDMAMEM_ERROR_NO_SUCH_LEASE);
	ck_assert_ptr_null(raw_error(o[3], "Read", "{\"region\":\"%llu\",\"length\":\"1\"}", i));
	ck_assert_int_eq(lock_count(c, id, "held"), 0);

	close_many(o, ELEMENTSOF(o));
	rdmamem_client_close(c);
}
END_TEST

/* rdmamemctl regions and region ID, text and JSON. */
START_TEST(test_cli_regions)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t id = register_new(c, 8192, 0), lease;
	char ids[32];
	const char *list[] = { CTL_BIN, "-s", td.socket, "regions", NULL };
	const char *list_json[] = { CTL_BIN, "-s", td.socket, "--json", "regions", NULL };
	const char *one[] = { CTL_BIN, "-s", td.socket, "region", ids, NULL };
	const char *one_json[] = { CTL_BIN, "-s", td.socket, "--json", "region", ids, NULL };
	const char *missing[] = { CTL_BIN, "-s", td.socket, "region", "424242", NULL };
	char *out, *err;
	cJSON *root;

	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_SHARED, -1, &lease), 0);
	ck_assert_int_eq(rdmamem_share(c, id, 4242, RDMAMEM_SHARE_READONLY), 0);
	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);

	ck_assert_int_eq(test_run(list, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "REGION"));
	ck_assert_ptr_nonnull(strstr(out, "8.0 KiB"));
	ck_assert_ptr_nonnull(strstr(out, "reading 1/0"));
	ck_assert_ptr_nonnull(strstr(out, "\n1 region\n"));
	free(out);
	free(err);

	ck_assert_int_eq(test_run(list_json, &out, &err), 0);
	root = cJSON_Parse(out);
	ck_assert_ptr_nonnull(root);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "regions")), 1);
	cJSON_Delete(root);
	free(out);
	free(err);

	ck_assert_int_eq(test_run(one, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "8192 bytes"));
	ck_assert_ptr_nonnull(strstr(out, "shrink"));
	ck_assert_ptr_nonnull(strstr(out, "shared held"));
	ck_assert_ptr_nonnull(strstr(out, "uid 4242 (read-only)"));
	free(out);
	free(err);

	ck_assert_int_eq(test_run(one_json, &out, &err), 0);
	root = cJSON_Parse(out);
	ck_assert_ptr_nonnull(root);
	ck_assert_str_eq(cJSON_GetObjectItem(root, "region")->valuestring, ids);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "lease_list")), 1);
	cJSON_Delete(root);
	free(out);
	free(err);

	ck_assert_int_eq(test_run(missing, &out, &err), 1);
	ck_assert_ptr_nonnull(strstr(err, "NoSuchRegion"));
	free(out);
	free(err);
	rdmamem_client_close(c);
}
END_TEST

Suite *regions_suite(void)
{
	Suite *s = suite_create("regions");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_register_write_read_copy);
	tcase_add_test(tc, test_keepalive);
	tcase_add_test(tc, test_copy_between_views_of_one_memfd);
	tcase_add_test(tc, test_region_bandwidth);
	tcase_add_test(tc, test_read_only_region);
	tcase_add_test(tc, test_cli_regions);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_register_rejections);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_inline_limit);
	tcase_add_test(tc, test_permissions_and_sharing);
	tcase_add_test(tc, test_quotas);
	tcase_add_test(tc, test_absent_is_not_zero);
	tcase_add_test(tc, test_hugetlb_without_huge_pages);
	suite_add_tcase(s, tc);

	tc = tcase_create("hugetlb");
	tcase_add_unchecked_fixture(tc, hugepages_remember, hugepages_restore);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_hugetlb_region);
	suite_add_tcase(s, tc);

	tc = tcase_create("locks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fifo_fairness);
	tcase_add_test(tc, test_lease_release_and_timeout);
	tcase_add_test(tc, test_operations_under_lease);
	tcase_add_test(tc, test_no_torn_reads);
	tcase_add_test(tc, test_disjoint_writers);
	tcase_add_test(tc, test_disconnect_leaves_nothing);
	tcase_add_test(tc, test_unshare);
	suite_add_tcase(s, tc);
	return s;
}
