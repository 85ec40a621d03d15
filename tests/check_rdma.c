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
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "testlib.h"

#define OTHER_UID 65534

static struct test_daemon td;
static const char *dev_name, *dev_addr;
static char listen_arg[64];

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

/* Runs rdma-peer; returns its exit status and (optionally) its output. */
static int peer(bool rdmacm, const char *token, const struct rdmamem_registration *reg,
		const char *op, const char *value, const char *expect, char **ret_out)
{
	char addr[32], rkey[16];
	const char *argv[24];
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
	argv[n] = NULL;
	r = test_run(argv, &out, &err);
	fprintf(stderr, "rdma-peer %s %s: exit %d: %s%s", op, value, r, out, err);
	if (ret_out)
		*ret_out = out;
	else
		free(out);
	free(err);
	return r;
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

struct token_out {
	char token[RDMAMEM_TOKEN_LEN + 1];
};

/* A valid rkey is useless with another uid's token, and without a token
 * nothing connects. */
START_TEST(test_isolation)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	uint64_t rejected_before;
	char *out;
	int p[2], status;
	pid_t pid;
	struct token_out other;

	region_with(c, 4096, "uid 0 only", &reg, NULL);
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rdmamem_client *oc = NULL;
		struct token_out t;

		if (setgroups(0, NULL) < 0 || setgid(OTHER_UID) < 0 || setuid(OTHER_UID) < 0)
			_exit(99);
		if (rdmamem_client_connect(td.socket, &oc) < 0 ||
		    rdmamem_access_token_create(oc, t.token) < 0)
			_exit(10);
		if (write(p[1], &t, sizeof(t)) != sizeof(t))
			_exit(11);
		pause();
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &other, sizeof(other)), (ssize_t)sizeof(other));
	close(p[0]);

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
	ck_assert_int_eq(peer(false, "0123456789abcdef0123456789abcdef", &reg, "--read", "10",
			      NULL, NULL),
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
	const char *argv[] = { PEER_BIN, "--rdmacm", listen_arg, "--token", token, "--addr", addr,
			       "--rkey", rkey, "--read", "7", "--repeat-until-fail", "30", NULL };
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
	char params[128];
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
	/* Root clears the record: the next request tries again. */
	snprintf(params, sizeof(params), "{\"region\":\"%llu\",\"device\":\"%s\"}",
		 (unsigned long long)id, dev_name);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.RetryRegistration", params, NULL, 0, NULL,
				      NULL, NULL),
			 0);
	ck_assert_int_eq(rdmamem_register_on(c, id, dev_name, &reg), -ENOMEM);
	ck_assert_ptr_null(strstr(rdmamem_client_error_message(c), "not retried"));
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
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"),
								   0),
					     "backend")
				 ->valuestring,
			 "ibv");
	cJSON_Delete(root);
	free(out);
	free(err);
	rdmamem_client_close(c);
}
END_TEST

/* Peers from outside the allowed networks are refused, and counted. */
START_TEST(test_network_allow_list)
{
	const char *args[] = { "--socket-mode", "0666", "--rdmacm-listen", listen_arg,
			       "--rdma-allow-network", "10.99.0.0/16", NULL };
	struct rdmamem_client *c;
	struct rdmamem_registration reg;
	char token[RDMAMEM_TOKEN_LEN + 1], *out;

	test_daemon_stop(&td);
	test_daemon_start(&td, args);
	c = test_client(td.socket);
	region_with(c, 4096, "fenced", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "6", NULL, &out), 2);
	free(out);
	ck_assert_uint_eq(device_field("rejected_connections"), 1);
	rdmamem_client_close(c);

	/* The VM's own network is let in when listed. */
	test_daemon_stop(&td);
	args[5] = "10.9.0.0/24";
	test_daemon_start(&td, args);
	c = test_client(td.socket);
	region_with(c, 4096, "fenced", &reg, NULL);
	ck_assert_int_eq(rdmamem_access_token_create(c, token), 0);
	ck_assert_int_eq(peer(true, token, &reg, "--read", "6", "fenced", NULL), 0);
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
	suite_add_tcase(s, tc);
	return s;
}
