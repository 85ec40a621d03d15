/* SPDX-License-Identifier: BSD-3-Clause */
/* librdmamem against a real daemon. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/errors.h"
#include "proto/ranges.h"
#include "rdmamem.h"
#include "tests/testlib.h"

static struct test_daemon td;

static void setup(void)
{
	test_daemon_start(&td, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

START_TEST(test_connect_and_call)
{
	struct rdmamem_client *c = NULL;
	char *reply = NULL;
	cJSON *root;

	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);
	ck_assert_str_eq(rdmamem_client_socket_path(c), td.socket);
	ck_assert_int_eq(rdmamem_ping(c), 0);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetStatus", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	root = cJSON_Parse(reply);
	ck_assert_ptr_nonnull(root);
	ck_assert_int_eq(cJSON_GetObjectItem(root, "pid")->valueint, td.pid);
	cJSON_Delete(root);
	free(reply);
	ck_assert_ptr_null(rdmamem_client_error_name(c));
	ck_assert_ptr_null(rdmamem_client_error_message(c));

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Ping", "{\"data\":\"x\"}", NULL, 0, &reply,
				      NULL, NULL),
			 0);
	ck_assert_str_eq(reply, "{\"data\":\"x\"}");
	free(reply);
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_default_path_from_env)
{
	struct rdmamem_client *c = NULL;

	setenv("RDMAMEM_SOCKET", td.socket, 1);
	ck_assert_int_eq(rdmamem_client_connect(NULL, &c), 0);
	ck_assert_str_eq(rdmamem_client_socket_path(c), td.socket);
	ck_assert_int_eq(rdmamem_ping(c), 0);
	rdmamem_client_close(c);
	unsetenv("RDMAMEM_SOCKET");
}
END_TEST

START_TEST(test_errors_named)
{
	struct rdmamem_client *c = NULL;
	char *reply = NULL;
	int devnull;

	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Nope", NULL, NULL, 0, NULL, NULL, NULL),
			 -EOPNOTSUPP);
	ck_assert_str_eq(rdmamem_client_error_name(c), VARLINK_ERROR_METHOD_NOT_FOUND);
	ck_assert_ptr_nonnull(rdmamem_client_error_message(c));

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Ping", "{\"bogus\":1}", NULL, 0, &reply, NULL,
				      NULL),
			 -EINVAL);
	ck_assert_str_eq(rdmamem_client_error_name(c), VARLINK_ERROR_INVALID_PARAMETER);
	ck_assert_ptr_nonnull(strstr(reply, "\"parameter\":\"bogus\""));
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "bogus"));
	free(reply);

	/* Local mistakes are caught before anything is sent. */
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Ping", "[1]", NULL, 0, NULL, NULL, NULL),
			 -EINVAL);
	ck_assert_ptr_null(rdmamem_client_error_name(c));
	ck_assert_ptr_nonnull(rdmamem_client_error_message(c));
	ck_assert_int_eq(rdmamem_call(NULL, "io.rdmamemd.Ping", NULL, NULL, 0, NULL, NULL, NULL),
			 -EINVAL);

	/* fds stay the caller's, also when the daemon refuses them. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Ping", NULL, &devnull, 1, NULL, NULL, NULL),
			 -ETOOMANYREFS);
	ck_assert_int_eq(fcntl(devnull, F_GETFD), FD_CLOEXEC);
	close(devnull);

	/* After all that, the connection still works. */
	ck_assert_int_eq(rdmamem_ping(c), 0);
	ck_assert_ptr_null(rdmamem_client_error_name(c));
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_no_daemon)
{
	struct rdmamem_client *c = NULL;

	ck_assert_int_eq(rdmamem_client_connect("/nonexistent/rdmamemd.sock", &c), -ENOENT);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(rdmamem_client_connect("", &c), -EINVAL);
	ck_assert_ptr_null(rdmamem_client_close(NULL));
}
END_TEST

/* A server that accepts but never answers: the call times out and the
 * connection is marked broken. */
START_TEST(test_timeout)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct rdmamem_client *c = NULL;
	char path[64] = "/tmp/rdmamem-silent.XXXXXX";
	int lfd;

	ck_assert_ptr_nonnull(mkdtemp(path));
	strcat(path, "/s");
	strcpy(sa.sun_path, path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);

	ck_assert_int_eq(rdmamem_client_connect(path, &c), 0);
	ck_assert_int_eq(rdmamem_client_set_timeout(c, 200), 0);
	ck_assert_int_eq(rdmamem_ping(c), -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "in time"));
	ck_assert_int_eq(rdmamem_ping(c), -ENOTCONN);
	rdmamem_client_close(c);
	close(lfd);
	unlink(path);
	*strrchr(path, '/') = '\0';
	rmdir(path);
}
END_TEST

/* A transfer split in chunks that fails part-way reports that failure, not
 * the outcome of giving back the lease the library took for it. */
START_TEST(test_chunked_failure_keeps_error)
{
	struct rdmamem_client *c = NULL;
	char *buf = calloc(1, 8 << 20);
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);
	ck_assert_int_eq(rdmamem_memfd_create("x", 6 << 20, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	/* The first 4 MiB chunk fits, the second does not. */
	ck_assert_int_eq(rdmamem_write(c, id, 0, buf, 8 << 20, RDMAMEM_LOCK_EXCLUSIVE, 0), -ERANGE);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_OUT_OF_RANGE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "outside region"));
	ck_assert_int_eq(rdmamem_read(c, id, 2 << 20, buf, 5 << 20, 0), -ERANGE);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_OUT_OF_RANGE);
	/* The lease went back all the same: an exclusive one is free to take. */
	{
		uint64_t lease;

		ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease), 0);
	}
	close(fd);
	free(buf);
	rdmamem_client_close(c);
}
END_TEST

/* How many regions c sees: its own, here. */
static int count_regions(struct rdmamem_client *c)
{
	char *reply = NULL, *p;
	int n = 0;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListRegions", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	for (p = reply; (p = strstr(p, "\"region\":")); p++)
		n++;
	free(reply);
	return n;
}

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(seed + i * 7 + (i >> 12));
}

/*
 * Reads and Writes from 4 KiB on go through the connection's staging
 * region (client/staging.c), one more region that lives as long as the
 * connection: byte-exact at odd offsets and lengths, below the staging
 * size, across it (two Copies under a lease the library takes) and at its
 * limit, and unchanged below 4 KiB (base64); with the lock the caller
 * names, and under a lease of the caller's.
 */
START_TEST(test_staged_transfers)
{
	static const size_t lengths[] = { 100,      4095,           4096,           65537,
					  4U << 20, (4U << 20) + 3, (9U << 20) + 11 };
	const size_t size = 12U << 20;
	struct rdmamem_client *c = test_client(td.socket);
	char *map, *buf = malloc(size), *back = malloc(size);
	uint64_t id, lease;
	int fd;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(rdmamem_memfd_create("staged", size, &fd, (void **)&map), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	ck_assert_int_eq(count_regions(c), 1);
	for (size_t i = 0; i < ELEMENTSOF(lengths); i++) {
		size_t n = lengths[i], off = 4096 * i + i;

		fill(buf, n, (unsigned)i);
		ck_assert_int_eq(rdmamem_write(c, id, off, buf, n,
					       i % 2 ? RDMAMEM_LOCK_DISJOINT :
						       RDMAMEM_LOCK_EXCLUSIVE,
					       0),
				 0);
		ck_assert_msg(memcmp(map + off, buf, n) == 0, "write of %zu bytes at %zu", n, off);
		memset(back, 0, n);
		ck_assert_int_eq(rdmamem_read(c, id, off, back, n, 0), 0);
		ck_assert_msg(memcmp(back, buf, n) == 0, "read of %zu bytes at %zu", n, off);
		/* The first staged transfer made the staging region. */
		ck_assert_int_eq(count_regions(c), n < 4096 ? 1 : 2);
	}

	/* Under the caller's lease: the library takes none of its own. */
	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease), 0);
	fill(buf, 5U << 20, 99);
	ck_assert_int_eq(rdmamem_write(c, id, 1, buf, 5U << 20, RDMAMEM_LOCK_EXCLUSIVE, lease), 0);
	ck_assert_int_eq(rdmamem_read(c, id, 1, back, 5U << 20, lease), 0);
	ck_assert_int_eq(memcmp(back, buf, 5U << 20), 0);
	ck_assert_int_eq(memcmp(map + 1, buf, 5U << 20), 0);
	ck_assert_int_eq(rdmamem_unlock(c, lease), 0);

	/* The region went with the connection. */
	rdmamem_client_close(c);
	c = test_client(td.socket);
	ck_assert_int_eq(count_regions(c), 0);
	rdmamem_client_close(c);
	munmap(map, size);
	close(fd);
	free(buf);
	free(back);
}
END_TEST

/* A daemon that will not take the staging region (here: the uid's pinned
 * bytes) gets the bytes as base64, as before; nobody hears of it. */
START_TEST(test_staging_refused)
{
	const char *extra[] = { "--max-pinned-bytes-per-uid", "6291456", NULL };
	struct test_daemon small;
	struct rdmamem_client *c;
	char *map, buf[65536], back[65536];
	uint64_t id;
	int fd;

	test_daemon_start(&small, extra);
	c = test_client(small.socket);
	ck_assert_int_eq(rdmamem_memfd_create("refused", 4U << 20, &fd, (void **)&map), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	fill(buf, sizeof(buf), 5);
	ck_assert_int_eq(rdmamem_write(c, id, 3, buf, sizeof(buf), RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	ck_assert_ptr_null(rdmamem_client_error_name(c));
	ck_assert_int_eq(memcmp(map + 3, buf, sizeof(buf)), 0);
	ck_assert_int_eq(rdmamem_read(c, id, 3, back, sizeof(back), 0), 0);
	ck_assert_int_eq(memcmp(back, buf, sizeof(buf)), 0);
	ck_assert_int_eq(count_regions(c), 1);
	rdmamem_client_close(c);
	munmap(map, 4U << 20);
	close(fd);
	test_daemon_stop(&small);
}
END_TEST

/* The daemon dies: the library says so, and a restarted daemon on the same
 * path takes new connections. */
START_TEST(test_daemon_killed)
{
	struct test_daemon d;
	struct rdmamem_client *c = NULL;
	const char *args[] = { DAEMON_BIN, "--socket", NULL, NULL };
	char path[128];
	int status;

	test_daemon_start(&d, NULL);
	strcpy(path, d.socket);
	ck_assert_int_eq(rdmamem_client_connect(path, &c), 0);
	ck_assert_int_eq(rdmamem_ping(c), 0);

	kill(d.pid, SIGKILL);
	waitpid(d.pid, &status, 0);
	ck_assert_int_eq(rdmamem_ping(c), -ECONNRESET);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "closed the connection"));
	ck_assert_int_eq(rdmamem_ping(c), -ENOTCONN);
	rdmamem_client_close(c);

	/* SIGKILL left the socket behind: the next daemon replaces it. */
	args[2] = path;
	{
		struct test_daemon d2;

		test_daemon_start_argv(&d2, args);
		ck_assert_int_eq(rdmamem_client_connect(path, &c), 0);
		ck_assert_int_eq(rdmamem_ping(c), 0);
		rdmamem_client_close(c);
		strcpy(d2.socket, path);
		test_daemon_stop(&d2);
	}
	close(d.notify_fd);
	unlink(d.notify);
	rmdir(d.dir);
}
END_TEST

/* The packed forms a binding sends with its own calls: what the typed
 * calls send, text below 1,024 ranges and a sealed memfd from 1,024 on. */
START_TEST(test_pack_helpers)
{
	enum { N_FD = 1024 };
	struct rdmamem_range *ranges = calloc(N_FD, sizeof(*ranges));
	struct ranges_item *back = NULL;
	uint64_t idx[3] = { 0, 1, 2 };
	size_t n_back = 0;
	const char *why;
	char *text = NULL;
	struct stat st;
	int fd, seals;

	ck_assert_ptr_nonnull(ranges);
	for (size_t i = 0; i < N_FD; i++)
		ranges[i] = (struct rdmamem_range){ 3 * i, 5 * i + 1, i + 7 };

	ck_assert_int_eq(rdmamem_ranges_pack(ranges, 0, &text, &fd), -EINVAL);
	ck_assert_int_eq(rdmamem_ranges_pack(ranges, N_FD - 1, &text, &fd), 0);
	ck_assert_int_lt(fd, 0);
	ck_assert_int_eq(ranges_decode(text, strlen(text), N_FD, &back, &n_back, &why), 0);
	ck_assert_uint_eq(n_back, N_FD - 1);
	ck_assert_mem_eq(back, ranges, (N_FD - 1) * sizeof(*ranges));
	free(back);
	free(text);

	ck_assert_int_eq(rdmamem_ranges_pack(ranges, N_FD, &text, &fd), 1);
	ck_assert_ptr_null(text);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, N_FD * 24);
	seals = fcntl(fd, F_GET_SEALS);
	ck_assert_int_eq(seals & (F_SEAL_SHRINK | F_SEAL_WRITE), F_SEAL_SHRINK | F_SEAL_WRITE);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);

	ck_assert_int_eq(rdmamem_indices_pack(idx, 3, &text), 0);
	ck_assert_str_eq(text, "AAAAAAEAAAACAAAA");
	free(text);
	idx[1] = 1ULL << 32;
	ck_assert_int_eq(rdmamem_indices_pack(idx, 3, &text), -ERANGE);
	free(ranges);
}
END_TEST

Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_connect_and_call);
	tcase_add_test(tc, test_default_path_from_env);
	tcase_add_test(tc, test_errors_named);
	tcase_add_test(tc, test_chunked_failure_keeps_error);
	tcase_add_test(tc, test_staged_transfers);
	tcase_add_test(tc, test_staging_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_test(tc, test_no_daemon);
	tcase_add_test(tc, test_timeout);
	tcase_add_test(tc, test_daemon_killed);
	tcase_add_test(tc, test_pack_helpers);
	suite_add_tcase(s, tc);
	return s;
}
