/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RDMA on real Soft-RoCE: these cases carry the tag "rdma" and run inside the
 * project's qemu VM (make vmtest), where rxe0 exists at RDMAMEM_RXE_ADDR.
 * A separate program, rdma-peer, plays the remote host: it knows only the
 * daemon's endpoint, an access token and a region's {addr, rkey}.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#define OTHER_UID TEST_OTHER_UID

static struct test_daemon td;
static const char *dev_name, *dev_addr;
static char listen_arg[64];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void setup_env(void)
{
	dev_name = getenv("RDMAMEM_RXE_DEV");
	dev_addr = getenv("RDMAMEM_RXE_ADDR");
	ck_assert_msg(dev_name && dev_addr,
		      "RDMA cases run inside the Soft-RoCE VM (make vmtest), which sets "
		      "RDMAMEM_RXE_DEV and RDMAMEM_RXE_ADDR");
	snprintf(listen_arg, sizeof(listen_arg), "%s:7471", dev_addr);
}

static void start(void)
{
	const char *args[] = { "--socket-mode", "0666", "--rdmacm-listen", listen_arg, NULL };

	test_daemon_start(&td, args);
}

static void setup(void)
{
	setup_env();
	start();
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

/* A region of size bytes holding text at 0, registered on the device. */
static uint64_t region_with(struct rdmamem_client *c, size_t size, const char *text,
			    struct rdmamem_registration *reg, char **ret_map)
{
	uint64_t id;
	void *addr;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("rdma", size, &fd, &addr), 0);
	memcpy(addr, text, strlen(text));
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	ck_assert_msg(rdmamem_register_on(c, id, dev_name, reg) == 0, "RegisterOn: %s",
		      rdmamem_client_error_message(c));
	ck_assert_uint_ne(reg->rkey, 0);
	ck_assert_uint_eq(reg->length, size);
	if (ret_map)
		*ret_map = addr;
	else
		munmap(addr, size);
	return id;
}

/*
 * Runs rdma-peer; returns its exit status and (optionally) what it printed,
 * stdout then stderr. extra: more arguments (NULL-terminated), or NULL.
 */
static int peer_ex(bool rdmacm, const char *token, const struct rdmamem_registration *reg,
		   const char *op, const char *value, const char *expect, const char *const *extra,
		   char **ret_out)
{
	char addr[32], rkey[16];
	const char *argv[32];
	char *out, *err;
	size_t n = 0;
	int r;

	snprintf(addr, sizeof(addr), "%llu", (unsigned long long)reg->addr);
	snprintf(rkey, sizeof(rkey), "%u", reg->rkey);
	argv[n++] = PEER_BIN;
	if (rdmacm) {
		argv[n++] = "--rdmacm";
		argv[n++] = listen_arg;
	} else {
		argv[n++] = "--socket";
		argv[n++] = td.socket;
		argv[n++] = "--device";
		argv[n++] = dev_name;
	}
	if (token) {
		argv[n++] = "--token";
		argv[n++] = token;
	}
	argv[n++] = "--addr";
	argv[n++] = addr;
	argv[n++] = "--rkey";
	argv[n++] = rkey;
	argv[n++] = op;
	argv[n++] = value;
	if (expect) {
		argv[n++] = "--expect";
		argv[n++] = expect;
	}
	for (; extra && *extra && n < ELEMENTSOF(argv) - 1; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	r = test_run(argv, &out, &err);
	fprintf(stderr, "rdma-peer %s %s: exit %d: %s%s", op, value, r, out, err);
	if (ret_out)
		ck_assert_int_ge(asprintf(ret_out, "%s%s", out, err), 0);
	free(out);
	free(err);
	return r;
}

static int peer(bool rdmacm, const char *token, const struct rdmamem_registration *reg,
		const char *op, const char *value, const char *expect, char **ret_out)
{
	return peer_ex(rdmacm, token, reg, op, value, expect, NULL, ret_out);
}

static uint64_t device_field(const char *field)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	cJSON *root, *dev;
	uint64_t v = 0;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListDevices", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	root = cJSON_Parse(reply);
	if (strcmp(field, "rejected_connections") == 0) {
		ck_assert_int_eq(json_to_u64(cJSON_GetObjectItem(root, field), &v), 0);
	} else {
		dev = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
		ck_assert_ptr_nonnull(dev);
		if (cJSON_IsNumber(cJSON_GetObjectItem(dev, field)))
			v = (uint64_t)cJSON_GetObjectItem(dev, field)->valuedouble;
		else
			ck_assert_int_eq(json_to_u64(cJSON_GetObjectItem(dev, field), &v), 0);
	}
	cJSON_Delete(root);
	free(reply);
	rdmamem_client_close(c);
	return v;
}

static bool no_mrs(void)
{
	return device_field("mrs") == 0;
}

/* A peer that knows only {addr, rkey}, the endpoint and a token reads and
 * writes the region, through rdmacm and through ConnectQueuePair. */
START_TEST(test_remote_read_write)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], *map, *out;
	uint64_t id = region_with(c, 4096, "hello from the owner", &reg, &map);

	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	for (int rdmacm = 1; rdmacm >= 0; rdmacm--) {
		ck_assert_int_eq(peer(rdmacm, token, &reg, "--read", "20", "hello from the owner",
				      &out),
				 0);
		ck_assert_ptr_nonnull(strstr(out, "read 'hello from the owner'"));
		free(out);
		ck_assert_int_eq(peer(rdmacm, token, &reg, "--write",
				      rdmacm ? "written by rdmacm!!" : "written by a QP ex!", NULL,
				      NULL),
				 0);
		/* The owner sees the peer's bytes in its own mapping. */
		ck_assert_int_eq(memcmp(map, rdmacm ? "written by rdmacm!!" : "written by a QP ex!",
					19),
				 0);
		memcpy(map, "hello from the owner", 20);
	}
	ck_assert_uint_eq(device_field("mrs"), 1);
	ck_assert_uint_eq(device_field("pinned_bytes"), 4096);

	/* Unregister: the MR goes (before the memory), and the same READ
	 * now fails at the remote end. */
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	test_wait_until(no_mrs, 10000, "the MR to be deregistered");
	ck_assert_int_eq(peer(true, token, &reg, "--read", "20", NULL, &out), 3);
	ck_assert_ptr_nonnull(strstr(out, "remote access error"));
	free(out);
	munmap(map, 4096);
	rdmamem_client_close(c);
}
END_TEST

/* The registering client is killed: its regions, MRs with them, go; a peer
 * admitted by a token of another connection of the same uid keeps its
 * queue pair but its READ fails with a remote access error. */
START_TEST(test_killed_client)
{
	struct rdmamem_client *holder = test_client(td.socket);
	char token[RDMAMEM_TOKEN_LEN + 1], *out;
	struct rdmamem_registration reg;
	int sync[2], status;
	pid_t pid;

	ck_assert_int_eq(rdmamem_access_token_create(holder, token), 0);
	ck_assert_int_eq(pipe(sync), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rdmamem_client *c = test_client(td.socket);
		struct rdmamem_registration r;

		region_with(c, 8192, "soon gone", &r, NULL);
		if (write(sync[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		pause();
		_exit(0);
	}
	close(sync[1]);
	ck_assert_int_eq(read(sync[0], &reg, sizeof(reg)), (ssize_t)sizeof(reg));
	close(sync[0]);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "9", "soon gone", NULL), 0);

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	test_wait_until(no_mrs, 10000, "the killed client's MR to go");
	ck_assert_int_eq(peer(true, token, &reg, "--read", "9", NULL, &out), 3);
	ck_assert_ptr_nonnull(strstr(out, "remote access error"));
	free(out);
	rdmamem_client_close(holder);
}
END_TEST

/* A child as OTHER_UID with a region of its own on the device and a token,
 * both handed to the parent; it stays until killed. */
struct other_region {
	char token[RDMAMEM_TOKEN_LEN + 1];
	struct rdmamem_registration reg;
};

static pid_t other_uid_region(const char *text, struct other_region *ret)
{
	int p[2];
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rdmamem_client *oc = NULL;
		struct other_region o = {};
		uint64_t id;
		void *addr;
		int fd;

		if (test_become_other_uid() < 0)
			_exit(99);
		if (rdmamem_client_connect(td.socket, &oc) < 0 ||
		    rdmamem_memfd_create("other", 4096, &fd, &addr) < 0)
			_exit(10);
		memcpy(addr, text, strlen(text));
		if (rdmamem_register(oc, fd, 0, 0, &id) < 0 ||
		    rdmamem_register_on(oc, id, dev_name, &o.reg) < 0 ||
		    rdmamem_access_token_create(oc, o.token) < 0)
			_exit(11);
		if (write(p[1], &o, sizeof(o)) != sizeof(o))
			_exit(12);
		pause();
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], ret, sizeof(*ret)), (ssize_t)sizeof(*ret));
	close(p[0]);
	return pid;
}

/* A valid rkey is useless with another uid's token, and without a token
 * nothing connects. */
START_TEST(test_isolation)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	struct other_region other;
	uint64_t rejected_before;
	char *out;
	int status;
	pid_t pid;

	region_with(c, 4096, "uid 0 only", &reg, NULL);
	pid = other_uid_region("not uid 0's", &other);

	/* Another uid's token: admitted into that uid's PD, where the rkey
	 * means nothing. */
	ck_assert_int_eq(peer(true, other.token, &reg, "--read", "10", NULL, &out), 3);
	ck_assert_ptr_nonnull(strstr(out, "remote access error"));
	free(out);
	ck_assert_int_eq(peer(true, other.token, &reg, "--write", "overwrite!", NULL, &out), 3);
	free(out);
	ck_assert_int_eq(peer(false, other.token, &reg, "--read", "10", NULL, &out), 3);
	free(out);

	/* No token, or a made-up one: refused, and counted. */
	rejected_before = device_field("rejected_connections");
	ck_assert_int_eq(peer(true, NULL, &reg, "--read", "10", NULL, NULL), 2);
	ck_assert_int_eq(peer(true, "0123456789abcdef0123456789abcdef", &reg, "--read", "10", NULL,
			      NULL),
			 2);
	ck_assert_int_eq(peer(false, "0123456789abcdef0123456789abcdef", &reg, "--read", "10", NULL,
			      NULL),
			 2);
	ck_assert_uint_eq(device_field("rejected_connections"), rejected_before + 3);

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	rdmamem_client_close(c);
}
END_TEST

/* Revoking a token tears down the connections it admitted. */
START_TEST(test_revoke)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], addr[32], rkey[16], *line;
	const char *argv[] = { PEER_BIN, "--rdmacm", listen_arg, "--token",
			       token,    "--addr",   addr,       "--rkey",
			       rkey,     "--read",   "7",        "--repeat-until-fail",
			       "30",     NULL };
	char *reply = NULL;
	int out, status;
	pid_t pid;

	region_with(c, 4096, "revoked", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	snprintf(addr, sizeof(addr), "%llu", (unsigned long long)reg.addr);
	snprintf(rkey, sizeof(rkey), "%u", reg.rkey);
	pid = test_spawn(argv, &out);
	line = test_read_line(out, 60000);
	ck_assert_str_eq(line, "connected");
	free(line);
	line = test_read_line(out, 60000);
	ck_assert_str_eq(line, "read 'revoked'");
	free(line);

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListConnections", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	ck_assert_ptr_nonnull(strstr(reply, "\"kind\":\"rdmacm\""));
	free(reply);

	ck_assert_int_eq(rdmamem_access_token_revoke(c, token), 0);
	/* The peer learns it from rdmacm, or from a failed work request. */
	status = test_wait(pid, 60000);
	ck_assert_msg(status == 6 || status == 3, "peer exit status %d", status);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListConnections", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	ck_assert_str_eq(reply, "{\"connections\":[]}");
	free(reply);
	/* A revoked token admits nobody. */
	ck_assert_int_eq(peer(true, token, &reg, "--read", "7", NULL, NULL), 2);
	ck_assert_int_eq(rdmamem_access_token_revoke(c, token), -EKEYREJECTED);
	close(out);
	rdmamem_client_close(c);
}
END_TEST

/* A device that does not exist: a failure with its reason in the answer,
 * kept nowhere (a client may name any number of them), while the devices
 * that exist are not affected. */
START_TEST(test_unknown_device_not_recorded)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	char params[128], *reply = NULL;
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("x", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(rdmamem_register_on(c, id, "nosuchdev0", &reg), -ENODEV);
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c),
					     "no RDMA device 'nosuchdev0'"));
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), dev_name));
		/* Asked again: the same answer, not a recorded one. */
		ck_assert_ptr_null(strstr(rdmamem_client_error_message(c), "not retried"));
	}
	ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), 0);

	/* Nothing recorded: nothing for RetryRegistration to clear. */
	snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"device\":\"nosuchdev0\"}",
		 (unsigned long long)id);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.RetryRegistration", params, NULL, 0, NULL,
				      NULL, NULL),
			 -EINVAL);

	/* GetRegion shows the registration in force and no failure. */
	snprintf(params, sizeof(params), "{\"region\":\"%llu\"}", (unsigned long long)id);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetRegion", params, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	ck_assert_ptr_nonnull(strstr(reply, "\"state\":\"registered\""));
	ck_assert_ptr_null(strstr(reply, "\"state\":\"failed\""));
	free(reply);
	rdmamem_client_close(c);
}
END_TEST

/* As root the daemon has CAP_IPC_LOCK: take it away and lower the limit. */
static void no_ipc_lock(void)
{
	struct rlimit rl = { 65536, 65536 };

	prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0);
	setrlimit(RLIMIT_MEMLOCK, &rl);
}

START_TEST(test_memlock_failure)
{
	struct rdmamem_client *c;
	struct rdmamem_registration reg;
	char params[128], ids[32], want[128], *out, *err;
	const char *show[] = { CTL_BIN, "-s", td.socket, "region", ids, NULL };
	const char *retry[] = { CTL_BIN, "-s", td.socket, "retry", ids, dev_name, NULL };
	uint64_t id;
	int fd;

	test_daemon_stop(&td);
	test_daemon_child_setup = no_ipc_lock;
	start();
	test_daemon_child_setup = NULL;
	c = test_client(td.socket);
	ck_assert_int_eq(rdmamem_memfd_create("big", 1 << 20, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), -ENOMEM);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "RLIMIT_MEMLOCK"));
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "65536"));
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "1048576 bytes"));
	ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), -ENOMEM);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "not retried"));
	ck_assert_uint_eq(device_field("mrs"), 0);
	/* rdmamemctl region shows the failure, its cause and the command
	 * that clears it. */
	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
	snprintf(want, sizeof(want), "as root: rdmamemctl retry %s %s\n", ids, dev_name);
	ck_assert_int_eq(test_run(show, &out, &err), 0);
	ck_assert_msg(strstr(out, " failed: ") && strstr(out, "RLIMIT_MEMLOCK") &&
			      strstr(out, "(errno 12)") && strstr(out, want),
		      "%s", out);
	free(out);
	free(err);
	/* Root clears the record (rdmamemctl retry): the next request tries
	 * again. */
	ck_assert_int_eq(test_run(retry, &out, &err), 0);
	ck_assert_msg(strstr(out, "is forgotten"), "%s (stderr %s)", out, err);
	free(out);
	free(err);
	ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), -ENOMEM);
	ck_assert_ptr_null(strstr(rdmamem_client_error_message(c), "not retried"));
	/* And again through the call itself, with nothing left to clear after. */
	snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"device\":\"%s\"}",
		 (unsigned long long)id, dev_name);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.RetryRegistration", params, NULL, 0, NULL,
				      NULL, NULL),
			 0);
	ck_assert_int_eq(test_run(retry, &out, &err), 1);
	ck_assert_msg(strstr(err, "has no recorded failure"), "%s", err);
	free(out);
	free(err);
	rdmamem_client_close(c);
}
END_TEST

/* Two connections ask for the same registration at the same moment: one
 * MR, the same keys for both. */
START_TEST(test_concurrent_registration)
{
	struct rdmamem_client *c = test_client(td.socket);
	char msg[256], *a, *b;
	uint64_t id;
	int fd, s1 = test_connect(td.socket), s2 = test_connect(td.socket);

	ck_assert_int_eq(rdmamem_memfd_create("x", 4 << 20, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.RegisterOn\",\"parameters\":{\"region\":\"%llu\","
		 "\"devices\":[\"%s\"]}}",
		 (unsigned long long)id, dev_name);
	test_send_msg(s1, msg, NULL, 0);
	test_send_msg(s2, msg, NULL, 0);
	ck_assert_int_gt(test_recv_msg(s1, &a, 60000), 0);
	ck_assert_int_gt(test_recv_msg(s2, &b, 60000), 0);
	ck_assert_ptr_nonnull(strstr(a, "\"rkey\""));
	ck_assert_str_eq(a, b);
	ck_assert_uint_eq(device_field("mrs"), 1);
	free(a);
	free(b);
	close(s1);
	close(s2);
	rdmamem_client_close(c);
}
END_TEST

/* With MRs and connections alive, SIGTERM ends the daemon cleanly, and a
 * new one starts on the same devices. */
START_TEST(test_restart)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], *out;

	region_with(c, 4096, "before", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "6", "before", NULL), 0);
	test_daemon_stop(&td);
	rdmamem_client_close(c);

	start();
	c = test_client(td.socket);
	region_with(c, 4096, "after", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "5", "after", &out), 0);
	free(out);
	rdmamem_client_close(c);
}
END_TEST

/* rdmamemctl devices and region ID show the registrations. */
START_TEST(test_cli_devices)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	const char *devs[] = { CTL_BIN, "-s", td.socket, "devices", NULL };
	const char *devs_json[] = { CTL_BIN, "-s", td.socket, "--json", "devices", NULL };
	char *out, *err;
	cJSON *root;

	region_with(c, 8192, "x", &reg, NULL);
	ck_assert_int_eq(test_run(devs, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, dev_name));
	ck_assert_ptr_nonnull(strstr(out, "MRs:            1 (8.0 KiB pinned)"));
	ck_assert_ptr_nonnull(strstr(out, "ACTIVE"));
	ck_assert_ptr_nonnull(strstr(out, "RoCEv2"));
	free(out);
	free(err);
	ck_assert_int_eq(test_run(devs_json, &out, &err), 0);
	root = cJSON_Parse(out);
	ck_assert_ptr_nonnull(root);
	ck_assert_str_eq(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0),
				    "backend")
			->valuestring,
		"ibv");
	cJSON_Delete(root);
	free(out);
	free(err);
	rdmamem_client_close(c);
}
END_TEST

/*
 * Peers from outside the allowed networks are refused on both paths, with
 * the same reason: rdmacm by the peer's address (reject reason 3),
 * ConnectQueuePair by the peer's GID (NetworkNotAllowed). Refusals are
 * counted; a listed network lets both in.
 */
START_TEST(test_network_allow_list)
{
	const char *args[] = {
		"--socket-mode", "0666", "--rdmacm-listen", listen_arg, "--rdma-allow-network",
		"10.99.0.0/16",  NULL
	};
	static const char *const nets[] = { "10.99.0.0/16", "fe80::/10", "10.9.0.0/24",
					    "10.9.0.1" };
	struct rdmamem_client *c;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], *out;

	for (size_t i = 0; i < ELEMENTSOF(nets); i++) {
		bool allowed = i >= 2;

		test_daemon_stop(&td);
		args[5] = nets[i];
		test_daemon_start(&td, args);
		c = test_client(td.socket);
		region_with(c, 4096, "fenced", &reg, NULL);
		ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
		for (int rdmacm = 1; rdmacm >= 0; rdmacm--) {
			int r = peer(rdmacm, token, &reg, "--read", "6", allowed ? "fenced" : NULL,
				     &out);

			if (allowed) {
				ck_assert_msg(r == 0, "%s: %s", nets[i], out);
			} else {
				ck_assert_msg(r == 2, "%s: %s", nets[i], out);
				ck_assert_ptr_nonnull(
					strstr(out, rdmacm ? "reason 3" :
							     RDMAMEM_ERROR_NETWORK_NOT_ALLOWED));
			}
			free(out);
		}
		ck_assert_uint_eq(device_field("rejected_connections"), allowed ? 0 : 2);
		rdmamem_client_close(c);
	}
}
END_TEST

/* rdma-peer over rdmacm in --step mode, connected and its first READ of
 * expect done; each SIGUSR1 makes it read again. */
static pid_t step_peer(const char *token, const struct rdmamem_registration *reg,
		       const char *expect, int *ret_out)
{
	char addr[32], rkey[16], len[24], *line;
	const char *argv[] = { PEER_BIN, "--rdmacm", listen_arg, "--token", token,
			       "--addr", addr,       "--rkey",   rkey,      "--read",
			       len,      "--expect", expect,     "--step",  NULL };
	pid_t pid;

	snprintf(addr, sizeof(addr), "%llu", (unsigned long long)reg->addr);
	snprintf(rkey, sizeof(rkey), "%u", reg->rkey);
	snprintf(len, sizeof(len), "%zu", strlen(expect));
	pid = test_spawn(argv, ret_out);
	line = test_read_line(*ret_out, 60000);
	ck_assert_str_eq(line ?: "(nothing)", "connected");
	free(line);
	line = test_read_line(*ret_out, 60000);
	ck_assert_msg(line && strncmp(line, "read '", 6) == 0, "first READ: %s",
		      line ?: "(nothing)");
	free(line);
	return pid;
}

/* The step peer's next READ fails with a remote access error; it exits. */
static void step_peer_fails(pid_t pid, int out)
{
	char *line;

	kill(pid, SIGUSR1);
	line = test_read_line(out, 60000);
	ck_assert_str_eq(line ?: "(nothing)", "wc remote access error");
	free(line);
	ck_assert_int_eq(test_wait(pid, 60000), 3);
	close(out);
}

/*
 * Unregisters id while a peer is connected and a lease is held: Unregister
 * answers once the registrations are gone, so the peer's very next READ
 * fails.
 */
static void unregister_cuts_peer(struct rdmamem_client *c, uint64_t id, pid_t pid, int out)
{
	double t0, t1, t2;

	t0 = now_ms();
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	t1 = now_ms();
	step_peer_fails(pid, out);
	t2 = now_ms();
	ck_assert_uint_eq(device_field("mrs"), 0);
	ck_assert_uint_eq(device_field("pinned_bytes"), 0);
	fprintf(stderr,
		"Unregister took %.1f ms; the peer's next READ failed %.1f ms after it "
		"returned\n",
		t1 - t0, t2 - t1);
}

/* The owner's own lease keeps the memory, not the registration. New work
 * on the region, under that lease too, gets NoSuchRegion; the lease is
 * given back as usual. */
START_TEST(test_unregister_with_own_lease)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], buf[8];
	uint64_t id = region_with(c, 4096, "the owner's own lease", &reg, NULL), lease;
	int out;
	pid_t pid;

	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	pid = step_peer(token, &reg, "the owner's own lease", &out);
	ck_assert_int_eq(rdmamem_lock(c, id, RDMAMEM_LOCK_SHARED, -1, &lease), 0);
	unregister_cuts_peer(c, id, pid, out);
	ck_assert_int_eq(rdmamem_read(c, id, 0, buf, sizeof(buf), lease), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_NO_SUCH_REGION);
	ck_assert_int_eq(rdmamem_unlock(c, lease), 0);
	rdmamem_client_close(c);
}
END_TEST

struct lease_holder {
	pid_t pid;
	int to, from; /* pipes to and from the child */
};

/*
 * A child that will act as OTHER_UID. Started before the test connects
 * anything, so that it holds none of the test's connections open (a
 * disconnect must be seen as one). Told a region id (lease_holder_lock), it
 * takes a shared lease on it and says so; told to go on
 * (lease_holder_finish), it checks that the region is gone for it too
 * (NoSuchRegion, even under its lease), gives the lease back and exits 0.
 */
static void lease_holder_start(struct lease_holder *h)
{
	int to[2], from[2];

	ck_assert_int_eq(pipe(to), 0);
	ck_assert_int_eq(pipe(from), 0);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		struct rdmamem_client *oc = NULL;
		uint64_t id, lease;
		char buf[8], x;

		close(to[1]);
		close(from[0]);
		if (test_become_other_uid() < 0)
			_exit(99);
		if (read(to[0], &id, sizeof(id)) != sizeof(id))
			_exit(10);
		if (rdmamem_client_connect(td.socket, &oc) < 0 ||
		    rdmamem_lock(oc, id, RDMAMEM_LOCK_SHARED, -1, &lease) < 0)
			_exit(11);
		if (write(from[1], "L", 1) != 1 || read(to[0], &x, 1) != 1)
			_exit(12);
		if (rdmamem_read(oc, id, 0, buf, sizeof(buf), lease) != -ENOENT)
			_exit(13);
		if (rdmamem_unlock(oc, lease) < 0)
			_exit(14);
		rdmamem_client_close(oc);
		_exit(0);
	}
	close(to[0]);
	close(from[1]);
	h->to = to[1];
	h->from = from[0];
}

static void lease_holder_lock(struct lease_holder *h, uint64_t id)
{
	char x;

	ck_assert_int_eq(write(h->to, &id, sizeof(id)), (ssize_t)sizeof(id));
	ck_assert_int_eq(read(h->from, &x, 1), 1);
}

static void lease_holder_finish(struct lease_holder *h)
{
	ck_assert_int_eq(write(h->to, "G", 1), 1);
	ck_assert_int_eq(test_wait(h->pid, 60000), 0);
	close(h->to);
	close(h->from);
}

/*
 * Another uid holds a lease on the owner's shared region while a peer
 * reads it; then the owner lets go, by Unregister or by disconnecting. The
 * lease keeps none of the owner's rkeys alive. The token comes from another
 * connection of the owner's uid, so the peer's queue pair outlives the
 * owner's connection.
 */
static void other_uid_lease(bool disconnect)
{
	struct rdmamem_client *c, *holder;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1];
	struct lease_holder h;
	uint64_t id;
	int out;
	pid_t pid;

	lease_holder_start(&h);
	c = test_client(td.socket);
	holder = test_client(td.socket);
	id = region_with(c, 4096, "another uid's lease", &reg, NULL);
	ck_assert_int_eq(rdmamem_share(c, id, OTHER_UID, RDMAMEM_SHARE_READONLY), 0);
	lease_holder_lock(&h, id);
	ck_assert_int_eq(rdmamem_access_token_create(holder, token), 0);
	pid = step_peer(token, &reg, "another uid's lease", &out);
	if (disconnect) {
		rdmamem_client_close(c);
		/* Nobody waits for an answer here: watch the MR go. */
		test_wait_until(no_mrs, 10000, "the disconnected owner's MR to go");
		step_peer_fails(pid, out);
	} else {
		unregister_cuts_peer(c, id, pid, out);
		rdmamem_client_close(c);
	}
	lease_holder_finish(&h);
	rdmamem_client_close(holder);
}

START_TEST(test_unregister_with_other_uid_lease)
{
	if (test_root_or_skip(__func__, "act as uid 65534"))
		other_uid_lease(false);
}
END_TEST

START_TEST(test_disconnect_with_other_uid_lease)
{
	if (test_root_or_skip(__func__, "act as uid 65534"))
		other_uid_lease(true);
}
END_TEST

/*
 * The connection caps, per uid and in all, apply on both paths with the
 * same reason: over its own cap a uid gets QuotaExceeded (rdmacm: reject
 * reason 4) while another uid is still admitted; over the daemon's cap
 * everyone gets TooManyConnections (reason 4).
 */
START_TEST(test_connection_caps)
{
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--rdmacm-listen",
			       listen_arg,
			       "--max-rdma-connections-per-uid",
			       "1",
			       "--max-rdma-connections",
			       "2",
			       NULL };
	struct rdmamem_client *c;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], *out;
	struct other_region other;
	int out1, out2, status;
	pid_t first, second, child;

	if (!test_root_or_skip(__func__, "act as uid 65534"))
		return;
	test_daemon_stop(&td);
	test_daemon_start(&td, args);
	c = test_client(td.socket);
	region_with(c, 4096, "capped", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	first = step_peer(token, &reg, "capped", &out1);

	/* uid 0 is at its cap: refused on both paths. */
	for (int rdmacm = 1; rdmacm >= 0; rdmacm--) {
		ck_assert_int_eq(peer(rdmacm, token, &reg, "--read", "6", NULL, &out), 2);
		ck_assert_ptr_nonnull(strstr(out,
					     rdmacm ? "reason 4" : RDMAMEM_ERROR_QUOTA_EXCEEDED));
		ck_assert_ptr_nonnull(rdmacm ? out : strstr(out, "\"quota\":\"rdma_connections\""));
		free(out);
	}

	/* Another uid still gets in: one uid cannot take them all. */
	child = other_uid_region("other uid", &other);
	second = step_peer(other.token, &other.reg, "other uid", &out2);

	/* Now the daemon is full: refused for everyone, on both paths. */
	for (int rdmacm = 1; rdmacm >= 0; rdmacm--) {
		ck_assert_int_eq(peer(rdmacm, other.token, &other.reg, "--read", "9", NULL, &out),
				 2);
		ck_assert_ptr_nonnull(strstr(out, rdmacm ? "reason 4" :
							   RDMAMEM_ERROR_TOO_MANY_CONNECTIONS));
		free(out);
	}
	ck_assert_uint_eq(device_field("rejected_connections"), 4);

	kill(first, SIGKILL);
	kill(second, SIGKILL);
	test_wait(first, 60000);
	test_wait(second, 60000);
	close(out1);
	close(out2);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	rdmamem_client_close(c);
}
END_TEST

/* The port's active MTU, from ListDevices. */
static unsigned port_mtu(void)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	cJSON *root, *port;
	unsigned mtu;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListDevices", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	root = cJSON_Parse(reply);
	port = cJSON_GetArrayItem(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0),
				    "ports"),
		0);
	ck_assert_ptr_nonnull(port);
	mtu = (unsigned)cJSON_GetObjectItem(port, "mtu")->valuedouble;
	cJSON_Delete(root);
	free(reply);
	rdmamem_client_close(c);
	return mtu;
}

static void veth0_mtu(const char *mtu)
{
	const char *argv[] = { "/bin/ip", "link", "set", "veth0", "mtu", mtu, NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	free(out);
	free(err);
}

/*
 * ConnectQueuePair answers the path MTU its queue pair is in: the smaller of
 * the port's active MTU and what the peer asked for (1024 when it asks
 * nothing), rounded down to an IB MTU. The peer moves its own queue pair to
 * that MTU and a READ of several packets works. Run with rxe0's port at
 * 1024 (veth0's MTU 1500) and at 4096 (MTU 9000).
 */
START_TEST(test_connect_qp_mtu)
{
	struct rdmamem_client *c;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], text[3001], line[32], *out;
	static const struct {
		const char *ask;
		unsigned bytes; /* what it asks for, as an IB MTU */
	} cases[] = {
		{ NULL, 1024 },   { "4096", 4096 }, { "1500", 1024 },
		{ "2048", 2048 }, { "512", 512 },   { "256", 256 },
	};
	static const char *const veth_mtus[] = { "9000", "1500" };

	for (size_t i = 0; i < sizeof(text) - 1; i++)
		text[i] = (char)('a' + i % 26);
	text[sizeof(text) - 1] = '\0';
	for (size_t v = 0; v < ELEMENTSOF(veth_mtus); v++) {
		unsigned port;

		/* The daemon learns the port's MTU when it opens the device. */
		test_daemon_stop(&td);
		veth0_mtu(veth_mtus[v]);
		start();
		port = port_mtu();
		ck_assert_uint_eq(port, v == 0 ? 4096 : 1024);
		c = test_client(td.socket);
		region_with(c, 8192, text, &reg, NULL);
		ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
		for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
			const char *extra[] = { "--mtu", cases[i].ask, NULL };

			ck_assert_int_eq(peer_ex(false, token, &reg, "--read", "3000", text,
						 cases[i].ask ? extra : NULL, &out),
					 0);
			snprintf(line, sizeof(line), "mtu %u\n", MIN(cases[i].bytes, port));
			ck_assert_msg(strstr(out, line), "asked %s, port %u: %s",
				      cases[i].ask ?: "nothing", port, out);
			free(out);
		}
		rdmamem_client_close(c);
	}
	/* Less than the smallest IB MTU is no MTU. */
	{
		const char *extra[] = { "--mtu", "100", NULL };

		c = test_client(td.socket);
		region_with(c, 4096, "x", &reg, NULL);
		ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
		ck_assert_int_eq(peer_ex(false, token, &reg, "--read", "1", NULL, extra, &out), 2);
		ck_assert_ptr_nonnull(strstr(out, VARLINK_ERROR_INVALID_PARAMETER));
		ck_assert_ptr_nonnull(strstr(out, "\"parameter\":\"mtu\""));
		free(out);
		rdmamem_client_close(c);
	}
}
END_TEST

/* Linux release as major * 100 + minor (6.1 → 601). */
static unsigned kernel_release(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(sscanf(u.release, "%u.%u", &major, &minor), 2);
	return major * 100 + minor;
}

/* A memfd of 4096 bytes holding text, read-only one way or another. */
static int read_only_memfd(const char *text, bool rdonly)
{
	int fd = memfd_create("ro", MFD_CLOEXEC | MFD_ALLOW_SEALING), ro;
	char path[64];

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	ck_assert_int_eq(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
	if (!rdonly) {
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS,
				       F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE),
				 0);
		return fd;
	}
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(ro, 0);
	close(fd);
	return ro;
}

/*
 * Read-only regions (F_SEAL_FUTURE_WRITE, or a memfd opened O_RDONLY).
 * Before Linux 6.2 the kernel pins every RDMA registration for writing
 * (docs/kernel.md), which a read-only shared mapping refuses: the daemon
 * says so up front with ReadOnlyRegion, records nothing and pins nothing.
 * From 6.2 on they register with remote_read only. Either way a writable
 * memfd registered with access ["remote_read"] is what works everywhere.
 */
START_TEST(test_read_only_region)
{
	struct rdmamem_client *c = test_client(td.socket);
	bool can = kernel_release() >= 602;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], params[256], *reply = NULL, *out;
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	for (int rdonly = 0; rdonly <= 1; rdonly++) {
		fd = read_only_memfd("read-only bytes", rdonly);
		ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
		close(fd);
		if (!can) {
			for (int again = 0; again < 2; again++) {
				ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg),
						 -EROFS);
				ck_assert_str_eq(rdmamem_client_error_name(c),
						 RDMAMEM_ERROR_READ_ONLY);
				ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c),
							     "Linux 6.2"));
				ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c),
							     "[\"remote_read\"]"));
				/* Nothing tried, nothing recorded. */
				ck_assert_ptr_null(strstr(rdmamem_client_error_message(c),
							  "not retried"));
			}
			snprintf(params, sizeof(params), "{\"region\":\"%llu\"}",
				 (unsigned long long)id);
			ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetRegion", params, NULL, 0,
						      &reply, NULL, NULL),
					 0);
			ck_assert_ptr_nonnull(strstr(reply, "\"registrations\":[]"));
			free(reply);
			ck_assert_uint_eq(device_field("mrs"), 0);
		} else {
			ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), 0);
			ck_assert_int_eq(peer(true, token, &reg, "--read", "15", "read-only bytes",
					      NULL),
					 0);
			ck_assert_int_eq(peer(true, token, &reg, "--write", "x", NULL, NULL), 3);
		}
		ck_assert_int_eq(rdmamem_unregister(c, id), 0);
		if (can)
			continue;
		/* Register with devices: the same answer, and no region kept. */
		fd = read_only_memfd("read-only bytes", rdonly);
		snprintf(params, sizeof(params), "{\"fd\":0,\"devices\":[\"%s\"]}", dev_name);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register", params, &fd, 1, NULL, NULL,
					      NULL),
				 -EROFS);
		close(fd);
		ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListRegions", NULL, NULL, 0, &reply,
					      NULL, NULL),
				 0);
		ck_assert_ptr_nonnull(strstr(reply, "\"regions\":[]"));
		free(reply);
	}

	/* What works on every kernel: a writable memfd, remote_read only. */
	ck_assert_int_eq(rdmamem_memfd_create("rr", 4096, &fd, NULL), 0);
	ck_assert_int_eq(pwrite(fd, "readable", 8, 0), 8);
	snprintf(params, sizeof(params),
		 "{\"fd\":0,\"access\":[\"remote_read\"],\"devices\":[\"%s\"]}", dev_name);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register", params, &fd, 1, &reply, NULL,
				      NULL),
			 0);
	close(fd);
	{
		cJSON *root = cJSON_Parse(reply), *r;
		uint64_t v;

		r = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "registrations"), 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "access")), 1);
		ck_assert_str_eq(
			cJSON_GetArrayItem(cJSON_GetObjectItem(r, "access"), 0)->valuestring,
			"remote_read");
		ck_assert_int_eq(json_to_u64(cJSON_GetObjectItem(r, "addr"), &reg.addr), 0);
		ck_assert_int_eq(json_to_u64(cJSON_GetObjectItem(r, "rkey"), &v), 0);
		reg.rkey = (uint32_t)v;
		cJSON_Delete(root);
	}
	free(reply);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "8", "readable", NULL), 0);
	ck_assert_int_eq(peer(true, token, &reg, "--write", "x", NULL, &out), 3);
	ck_assert_ptr_nonnull(strstr(out, "remote access error"));
	free(out);
	rdmamem_client_close(c);
}
END_TEST

static bool saw_event(const char *what)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	bool seen;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListDevices", NULL, NULL, 0, &reply, NULL,
				      NULL),
			 0);
	seen = strstr(reply, what) != NULL;
	free(reply);
	rdmamem_client_close(c);
	return seen;
}

static bool saw_port_error(void)
{
	return saw_event("port error");
}

static bool saw_port_active(void)
{
	return saw_event("port active");
}

/* Asynchronous device events are watched and shown. */
START_TEST(test_port_events)
{
	const char *down[] = { "/bin/ip", "link", "set", "veth0", "down", NULL };
	const char *up[] = { "/bin/ip", "link", "set", "veth0", "up", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(down, &out, &err), 0);
	free(out);
	free(err);
	test_wait_until(saw_port_error, 10000, "IBV_EVENT_PORT_ERR to show in ListDevices");
	ck_assert_int_eq(test_run(up, &out, &err), 0);
	free(out);
	free(err);
	test_wait_until(saw_port_active, 10000, "IBV_EVENT_PORT_ACTIVE to show in ListDevices");
}
END_TEST

Suite *rdma_suite(void)
{
	Suite *s = suite_create("rdma");
	TCase *tc = tcase_create("rxe");

	tcase_set_tags(tc, "rdma");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	test_add_tagged(tc, "rdma", test_remote_read_write);
	test_add_tagged(tc, "rdma", test_killed_client);
	test_add_tagged(tc, "rdma", test_isolation);
	test_add_tagged(tc, "rdma", test_revoke);
	test_add_tagged(tc, "rdma", test_unknown_device_not_recorded);
	test_add_tagged(tc, "rdma", test_memlock_failure);
	test_add_tagged(tc, "rdma", test_concurrent_registration);
	test_add_tagged(tc, "rdma", test_restart);
	test_add_tagged(tc, "rdma", test_cli_devices);
	test_add_tagged(tc, "rdma", test_network_allow_list);
	test_add_tagged(tc, "rdma", test_port_events);
	test_add_tagged(tc, "rdma", test_unregister_with_own_lease);
	test_add_tagged(tc, "rdma", test_unregister_with_other_uid_lease);
	test_add_tagged(tc, "rdma", test_disconnect_with_other_uid_lease);
	test_add_tagged(tc, "rdma", test_connection_caps);
	test_add_tagged(tc, "rdma", test_connect_qp_mtu);
	test_add_tagged(tc, "rdma", test_read_only_region);
	suite_add_tcase(s, tc);
	return s;
}
