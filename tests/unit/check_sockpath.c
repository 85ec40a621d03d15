/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/sockpath.h"
#include "tests/testlib.h"

static void clear_env(void)
{
	unsetenv("RDMAMEM_SOCKET");
	unsetenv("RUNTIME_DIRECTORY");
	unsetenv("XDG_RUNTIME_DIR");
}

START_TEST(test_server_default)
{
	char buf[108];

	clear_env();
	setenv("RDMAMEM_SOCKET", "/tmp/x.sock", 1);
	ck_assert_int_eq(sockpath_server_default(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/tmp/x.sock");

	clear_env();
	setenv("RUNTIME_DIRECTORY", "/run/rdmamemd:/run/other", 1);
	ck_assert_int_eq(sockpath_server_default(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/run/rdmamemd/rdmamemd.sock");

	clear_env();
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	ck_assert_int_eq(sockpath_server_default(buf, sizeof(buf)), 0);
	if (geteuid() == 0)
		ck_assert_str_eq(buf, SOCKPATH_SYSTEM);
	else
		ck_assert_str_eq(buf, "/run/user/1000/rdmamemd/rdmamemd.sock");

	clear_env();
	setenv("RDMAMEM_SOCKET",
	       "/a/very/long/path/that/goes/on/and/on/and/on/and/on/and/on/and/"
	       "on/and/on/and/on/and/on/and/on/and/on/x.sock",
	       1);
	ck_assert_int_eq(sockpath_server_default(buf, 40), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_client_default)
{
	char buf[108];

	clear_env();
	ck_assert_int_eq(sockpath_client_default(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, SOCKPATH_SYSTEM);
	setenv("RDMAMEM_SOCKET", "/tmp/y.sock", 1);
	ck_assert_int_eq(sockpath_client_default(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/tmp/y.sock");
}
END_TEST

START_TEST(test_to_addr)
{
	struct sockaddr_un sa;
	unsigned len;
	char longp[200];

	ck_assert_int_eq(sockpath_to_addr("/tmp/s", &sa, &len), 0);
	ck_assert_str_eq(sa.sun_path, "/tmp/s");
	ck_assert_uint_eq(len, offsetof(struct sockaddr_un, sun_path) + 7);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	ck_assert_int_eq(sockpath_to_addr(longp, &sa, &len), -ENAMETOOLONG);
	ck_assert_int_eq(sockpath_to_addr("", &sa, &len), -EINVAL);
}
END_TEST

Suite *sockpath_suite(void)
{
	Suite *s = suite_create("sockpath");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_server_default);
	tcase_add_test(tc, test_client_default);
	tcase_add_test(tc, test_to_addr);
	suite_add_tcase(s, tc);
	return s;
}
