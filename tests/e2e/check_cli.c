/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl against a live daemon, in text and JSON. */
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

START_TEST(test_status_text)
{
	const char *argv[] = { CTL_BIN, "--socket", td.socket, "status", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_msg(strncmp(out, "rdmamemd 0.1.0 (pid ", 20) == 0, "stdout: %s", out);
	ck_assert_ptr_nonnull(strstr(out, td.socket));
	ck_assert_ptr_nonnull(strstr(out, "clients:"));
	ck_assert_ptr_nonnull(strstr(out, "regions:"));
	ck_assert_ptr_nonnull(strstr(out, "pinned:"));
	ck_assert_ptr_nonnull(strstr(out, "devices:"));
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
}
END_TEST

START_TEST(test_status_json)
{
	const char *argv[] = { CTL_BIN, "--json", "-s", td.socket, "status", NULL };
	char *out, *err;
	cJSON *root;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	root = cJSON_Parse(out);
	ck_assert_msg(root, "not JSON: %s", out);
	ck_assert_str_eq(cJSON_GetObjectItem(root, "version")->valuestring, "0.1.0");
	ck_assert_int_eq(cJSON_GetObjectItem(root, "pid")->valueint, td.pid);
	ck_assert_int_eq(cJSON_GetObjectItem(root, "clients")->valueint, 1);
	cJSON_Delete(root);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_ping)
{
	const char *argv[] = { CTL_BIN, "-s", td.socket, "ping", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "answers"));
	free(out);
	free(err);
}
END_TEST

START_TEST(test_not_running)
{
	const char *argv[] = { CTL_BIN, "--socket", "/nonexistent/x.sock", "status", NULL };
	const char *argv_default[] = { CTL_BIN, "status", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 1);
	ck_assert_str_eq(out, "");
	/* One line that names the socket and the likely cause. */
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.sock"));
	ck_assert_ptr_nonnull(strstr(err, "is the daemon running?"));
	ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
	free(out);
	free(err);

	setenv("RDMAMEM_SOCKET", "/nonexistent/y.sock", 1);
	ck_assert_int_eq(test_run(argv_default, &out, &err), 1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/y.sock"));
	unsetenv("RDMAMEM_SOCKET");
	free(out);
	free(err);
}
END_TEST

START_TEST(test_usage_errors)
{
	const char *unknown[] = { CTL_BIN, "-s", td.socket, "frobnicate", NULL };
	const char *help[] = { CTL_BIN, "--help", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(unknown, &out, &err), 2);
	ck_assert_ptr_nonnull(strstr(err, "unknown command"));
	free(out);
	free(err);
	ck_assert_int_eq(test_run(help, &out, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "status"));
	free(out);
	free(err);
}
END_TEST

/*
 * Every command against a live daemon with one region and a second client:
 * the text names what the command is about, --json prints one object that
 * holds the same. region ID and regions in detail: the regions suite;
 * devices with a device: the rdma suite.
 */
static const struct {
	const char *verb;
	const char *text; /* in the text output */
	const char *key;  /* in the JSON object */
} verbs[] = {
	{ "status", "regions:       1", "regions" },
	{ "regions", "1 region\n", "regions" },
	{ "region", "4096 bytes", "region" },
	{ "devices", "No RDMA devices", "devices" },
	{ "connections", "No connections.", "connections" },
	{ "peers", "No remote daemons", "peers" },
	{ "gpus", "CUDA driver:", "driver" },
	{ "clients", "(this)", "clients" },
	{ "stats", "io.rdmamemd.Register", "calls" },
	{ "limits", "pinned_bytes", "limits" },
	{ "doctor", "locked memory", "checks" },
	{ "ping", "answers", NULL },
};

START_TEST(test_every_command)
{
	struct rdmamem_client *c;
	uint64_t region;
	char id[32];
	const char *text[] = { CTL_BIN, "-s", td.socket, verbs[_i].verb, id, NULL };
	const char *json[] = { CTL_BIN, "-s", td.socket, "--json", verbs[_i].verb, id, NULL };
	char *out, *err;
	cJSON *root;
	int fd, rc;

	ck_assert_int_eq(rdmamem_client_connect(td.socket, &c), 0);
	ck_assert_int_eq(rdmamem_memfd_create("cli", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &region), 0);
	snprintf(id, sizeof(id), "%" PRIu64, region);
	if (strcmp(verbs[_i].verb, "region") != 0)
		text[4] = json[5] = NULL;

	rc = test_run(text, &out, &err);
	/* doctor fails when a check fails (a user without CAP_IPC_LOCK and
	 * a low memlock limit, say), and its exit status says so. */
	ck_assert_int_eq(rc, strncmp(out, "FAIL", 4) == 0 || strstr(out, "\nFAIL") ? 1 : 0);
	ck_assert_msg(strstr(out, verbs[_i].text), "%s: '%s' not in:\n%s", verbs[_i].verb,
		      verbs[_i].text, out);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);

	ck_assert_int_eq(test_run(json, &out, &err), rc);
	root = cJSON_Parse(out);
	ck_assert_msg(cJSON_IsObject(root), "%s --json: not a JSON object: %s", verbs[_i].verb,
		      out);
	ck_assert_msg(!verbs[_i].key || cJSON_GetObjectItem(root, verbs[_i].key),
		      "%s --json: no '%s' in %s", verbs[_i].verb, verbs[_i].key, out);
	ck_assert_str_eq(err, "");
	cJSON_Delete(root);
	free(out);
	free(err);

	rdmamem_client_close(c);
	close(fd);
}
END_TEST

/* Both streams of a run, freed together. */
struct ran {
	int rc;
	char *out, *err;
};

static struct ran run(const char *const *argv)
{
	struct ran r;

	r.rc = test_run(argv, &r.out, &r.err);
	return r;
}

static void ran_free(struct ran *r)
{
	free(r->out);
	free(r->err);
}

/* out parsed as JSON; the test fails when it is not an object. */
static cJSON *ran_json(const struct ran *r)
{
	cJSON *root = cJSON_Parse(r->out);

	ck_assert_msg(cJSON_IsObject(root), "not a JSON object: '%s' (stderr '%s')", r->out,
		      r->err);
	return root;
}

START_TEST(test_version)
{
	const char *text[] = { CTL_BIN, "--version", NULL };
	const char *json[] = { CTL_BIN, "--json", "--version", NULL };
	struct ran r = run(text);
	cJSON *root;

	ck_assert_int_eq(r.rc, 0);
	ck_assert_str_eq(r.out, "rdmamemctl 0.1.0\n");
	ran_free(&r);
	r = run(json);
	ck_assert_int_eq(r.rc, 0);
	root = ran_json(&r);
	ck_assert_str_eq(test_str(root, "version"), "0.1.0");
	cJSON_Delete(root);
	ran_free(&r);
}
END_TEST

/* call METHOD [JSON]: any method, its reply's parameters as JSON; a
 * Varlink error on stderr (and with --json as an object on stdout). */
START_TEST(test_call_any_method)
{
	const char *status[] = { CTL_BIN, "-s", td.socket, "call", "GetStatus", NULL };
	const char *ping[] = {
		CTL_BIN, "-s", td.socket, "call", "io.rdmamemd.Ping", "{\"data\":\"x\"}", NULL
	};
	const char *missing[] = { CTL_BIN, "-s",        td.socket,
				  "call",  "GetRegion", "{\"region\":\"424242\"}",
				  NULL };
	const char *missing_json[] = {
		CTL_BIN, "-s", td.socket, "--json", "call", "GetRegion", "{\"region\":\"424242\"}",
		NULL
	};
	const char *no_method[] = { CTL_BIN, "-s", td.socket, "call", "Frobnicate", NULL };
	const char *not_object[] = { CTL_BIN, "-s", td.socket, "call", "Ping", "[1]", NULL };
	const char *not_json[] = { CTL_BIN, "-s", td.socket, "call", "Ping", "{data", NULL };
	const char *no_args[] = { CTL_BIN, "-s", td.socket, "call", NULL };
	char cmd[512];
	const char *piped[] = { "/bin/sh", "-c", cmd, NULL };
	struct ran r;
	cJSON *root;

	r = run(status);
	ck_assert_int_eq(r.rc, 0);
	root = ran_json(&r);
	ck_assert_int_eq(cJSON_GetObjectItem(root, "pid")->valueint, td.pid);
	cJSON_Delete(root);
	ran_free(&r);

	r = run(ping);
	ck_assert_int_eq(r.rc, 0);
	root = ran_json(&r);
	ck_assert_str_eq(test_str(root, "data"), "x");
	cJSON_Delete(root);
	ran_free(&r);

	/* The parameters from standard input. */
	snprintf(cmd, sizeof(cmd), "echo '{\"data\":\"piped\"}' | %s -s %s call Ping -", CTL_BIN,
		 td.socket);
	r = run(piped);
	ck_assert_int_eq(r.rc, 0);
	root = ran_json(&r);
	ck_assert_str_eq(test_str(root, "data"), "piped");
	cJSON_Delete(root);
	ran_free(&r);

	r = run(missing);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_str_eq(r.out, "");
	ck_assert_msg(strstr(r.err, "io.rdmamemd.NoSuchRegion: there is no region 424242"), "%s",
		      r.err);
	ran_free(&r);
	r = run(missing_json);
	ck_assert_int_eq(r.rc, 1);
	root = ran_json(&r);
	ck_assert_str_eq(test_str(root, "error"), "io.rdmamemd.NoSuchRegion");
	ck_assert_ptr_nonnull(strstr(test_str(cJSON_GetObjectItem(root, "parameters"), "message"),
				     "424242"));
	cJSON_Delete(root);
	ran_free(&r);

	r = run(no_method);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_msg(strstr(r.err, "MethodNotFound") && strstr(r.err, "io.rdmamemd.Frobnicate"),
		      "%s", r.err);
	ran_free(&r);
	/* Parameters that are no object never reach the daemon: usage errors. */
	r = run(not_object);
	ck_assert_int_eq(r.rc, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "must be a JSON object"));
	ran_free(&r);
	r = run(not_json);
	ck_assert_int_eq(r.rc, 2);
	ran_free(&r);
	r = run(no_args);
	ck_assert_int_eq(r.rc, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "usage: rdmamemctl call METHOD [JSON]"));
	ran_free(&r);
}
END_TEST

/* retry REGION DEVICE against the real daemon: a region without a recorded
 * failure has nothing to forget (the daemon's InvalidParameter, exit 1);
 * arguments that are no region id are usage errors. The answer to a
 * failure that is recorded: test_fake_region_and_retry, and the rdma suite
 * (test_memlock_failure). */
START_TEST(test_retry_errors)
{
	struct rdmamem_client *c = test_client(td.socket);
	const char *bad_id[] = { CTL_BIN, "-s", td.socket, "retry", "abc", "rxe0", NULL };
	const char *one_arg[] = { CTL_BIN, "-s", td.socket, "retry", "1", NULL };
	char id[32];
	const char *nothing[] = { CTL_BIN, "-s", td.socket, "retry", id, "nosuchdev0", NULL };
	const char *nothing_json[] = { CTL_BIN, "-s", td.socket,    "-j",
				       "retry", id,   "nosuchdev0", NULL };
	uint64_t region;
	struct ran r;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("retry", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &region), 0);
	close(fd);
	snprintf(id, sizeof(id), "%" PRIu64, region);
	r = run(nothing);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_str_eq(r.out, "");
	ck_assert_msg(strstr(r.err, "InvalidParameter") &&
			      strstr(r.err, "has no recorded failure on 'nosuchdev0'"),
		      "%s", r.err);
	ran_free(&r);
	r = run(nothing_json);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_str_eq(r.out, "");
	ck_assert_ptr_nonnull(strstr(r.err, "InvalidParameter"));
	ran_free(&r);
	r = run(bad_id);
	ck_assert_int_eq(r.rc, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "'retry' wants a region id"));
	ran_free(&r);
	r = run(one_arg);
	ck_assert_int_eq(r.rc, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "usage: rdmamemctl retry REGION DEVICE"));
	ran_free(&r);
	rdmamem_client_close(c);
}
END_TEST

/*
 * A daemon of one connection and one answer, to show what the real one
 * answers only with an RDMA device (a recorded registration failure):
 * runs argv (its -s names path), takes the one call it makes, answers it
 * with reply, and hands back the call's text and what argv printed.
 */
static int fake_daemon(const char *path, const char *const *argv, const char *reply,
		       char **ret_call, char **ret_out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd pfd;
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int lfd, cfd, out, rc;
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	pid = test_spawn(argv, &out);
	pfd = (struct pollfd){ .fd = lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_gt(test_recv_msg(cfd, ret_call, 10000), 0);
	test_send_msg(cfd, reply, NULL, 0);
	while ((n = read(out, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	buf[len] = '\0';
	rc = test_wait(pid, 10000);
	close(out);
	close(cfd);
	close(lfd);
	unlink(path);
	*ret_out = strdup(buf);
	return rc;
}

/* GetRegion's answer for a region with one registration in force and one
 * failure recorded, as the daemon words them (mreg_to_json). */
static const char fake_region[] =
	"{\"parameters\":{\"region\":\"7\",\"size\":\"8192\",\"writable\":true,"
	"\"owner\":{\"uid\":0,\"gid\":0,\"pid\":1,\"connection\":\"3\"},"
	"\"location\":{\"type\":\"cpu\"},"
	"\"source\":{\"type\":\"memfd\",\"offset\":\"0\",\"file_size\":\"8192\",\"seals\":[]},"
	"\"access\":[],\"lock\":{\"state\":\"idle\"},\"leases\":{\"held\":0,\"waiting\":0},"
	"\"registrations\":["
	"{\"device\":\"rxe0\",\"state\":\"registered\",\"backend\":\"ibv\",\"lkey\":\"4660\","
	"\"rkey\":\"4661\",\"addr\":\"65536\",\"length\":\"8192\",\"via\":\"host-memory\"},"
	"{\"device\":\"mlx5_0\",\"state\":\"failed\",\"error\":\"ibv_reg_mr: Cannot allocate "
	"memory (recorded when first tried and not retried; RetryRegistration clears it)\","
	"\"errno\":12,\"recorded\":true}]}}";

/* region ID shows each registration: the keys of one in force, a failure
 * with its cause and the retry command; retry's own answer. */
START_TEST(test_fake_region_and_retry)
{
	char path[160];
	const char *region[] = { CTL_BIN, "-s", path, "region", "7", NULL };
	const char *regions[] = { CTL_BIN, "-s", path, "regions", NULL };
	const char *retry[] = { CTL_BIN, "-s", path, "retry", "7", "mlx5_0", NULL };
	const char *retry_json[] = { CTL_BIN, "-s", path, "--json", "retry", "7", "mlx5_0", NULL };
	char *call, *out, list[sizeof(fake_region) + 64];

	snprintf(path, sizeof(path), "%s/fake.sock", td.dir);
	ck_assert_int_eq(fake_daemon(path, region, fake_region, &call, &out), 0);
	ck_assert_msg(strstr(call, "\"method\":\"io.rdmamemd.GetRegion\"") &&
			      strstr(call, "\"region\":\"7\""),
		      "%s", call);
	ck_assert_msg(strstr(out, "registration:   rxe0 registered (ibv, host-memory): lkey "
				  "0x1234 rkey 0x1235 addr 0x10000, 8.0 KiB\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "registration:   mlx5_0 failed: ibv_reg_mr: Cannot allocate "
				  "memory (recorded"),
		      "%s", out);
	ck_assert_msg(strstr(out, "(errno 12)\n"), "%s", out);
	ck_assert_msg(strstr(out, "as root: rdmamemctl retry 7 mlx5_0\n"), "%s", out);
	free(call);
	free(out);

	/* The listing counts the failures beside the registrations. */
	snprintf(list, sizeof(list), "{\"parameters\":{\"regions\":[%.*s]}}",
		 (int)(strlen(fake_region) - strlen("{\"parameters\":") - 1),
		 fake_region + strlen("{\"parameters\":"));
	ck_assert_int_eq(fake_daemon(path, regions, list, &call, &out), 0);
	ck_assert_msg(strstr(out, " 2 (1 failed)\n"), "%s", out);
	free(call);
	free(out);

	ck_assert_int_eq(fake_daemon(path, retry, "{\"parameters\":{}}", &call, &out), 0);
	ck_assert_msg(strstr(call, "\"method\":\"io.rdmamemd.RetryRegistration\"") &&
			      strstr(call, "\"region\":\"7\"") &&
			      strstr(call, "\"device\":\"mlx5_0\""),
		      "%s", call);
	ck_assert_str_eq(out, "region 7: the failure on mlx5_0 is forgotten; the next "
			      "registration there tries again\n");
	free(call);
	free(out);
	ck_assert_int_eq(fake_daemon(path, retry_json, "{\"parameters\":{}}", &call, &out), 0);
	ck_assert_str_eq(out, "{\n}\n");
	free(call);
	free(out);

	/* Root's answer to anyone else. */
	ck_assert_int_eq(fake_daemon(path, retry,
				     "{\"error\":\"io.rdmamemd.PermissionDenied\",\"parameters\":"
				     "{\"message\":\"RetryRegistration is for root\"}}",
				     &call, &out),
			 1);
	ck_assert_str_eq(out, "");
	free(call);
	free(out);
}
END_TEST

/* Empty tables say so, one line each, the same way. */
START_TEST(test_empty_tables)
{
	static const struct {
		const char *verb, *text;
	} empty[] = {
		{ "regions", "No regions.\n" },
		{ "connections", "No connections.\n" },
		{ "peers", "No remote daemons: no links opened, none connected.\n" },
		{ "devices", "No RDMA devices: regions work; registrations on devices fail.\n"
			     "0 RDMA connections rejected\n" },
	};
	const char *json[] = { CTL_BIN, "-s", td.socket, "--json", "regions", NULL };
	struct ran r;
	cJSON *root;

	for (size_t i = 0; i < ELEMENTSOF(empty); i++) {
		const char *argv[] = { CTL_BIN, "-s", td.socket, empty[i].verb, NULL };

		r = run(argv);
		ck_assert_int_eq(r.rc, 0);
		ck_assert_str_eq(r.out, empty[i].text);
		ran_free(&r);
	}
	r = run(json);
	root = ran_json(&r);
	ck_assert(cJSON_IsArray(cJSON_GetObjectItem(root, "regions")));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "regions")), 0);
	cJSON_Delete(root);
	ran_free(&r);
}
END_TEST

/* Names beside uids and pids: this process owns a region. */
START_TEST(test_names)
{
	struct rdmamem_client *c = test_client(td.socket);
	const char *regions[] = { CTL_BIN, "-s", td.socket, "regions", NULL };
	const char *clients[] = { CTL_BIN, "-s", td.socket, "clients", NULL };
	const char *clients_json[] = { CTL_BIN, "-s", td.socket, "-j", "clients", NULL };
	char id[32], user[96], proc[96], comm[32] = "", *nl;
	const char *region[] = { CTL_BIN, "-s", td.socket, "region", id, NULL };
	const char *region_json[] = { CTL_BIN, "-s", td.socket, "-j", "region", id, NULL };
	struct passwd *pw = getpwuid(getuid());
	const cJSON *owner, *item;
	FILE *f = fopen("/proc/self/comm", "r");
	uint64_t regno;
	struct ran r;
	cJSON *root;
	bool found = false;
	int fd;

	ck_assert_ptr_nonnull(pw);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(comm, sizeof(comm), f));
	fclose(f);
	nl = strchr(comm, '\n');
	if (nl)
		*nl = '\0';
	snprintf(user, sizeof(user), "%u (%s)", (unsigned)getuid(), pw->pw_name);
	snprintf(proc, sizeof(proc), "%d (%s)", (int)getpid(), comm);
	ck_assert_int_eq(rdmamem_memfd_create("names", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &regno), 0);
	close(fd);
	snprintf(id, sizeof(id), "%" PRIu64, regno);

	r = run(regions);
	ck_assert_msg(strstr(r.out, "USER") && strstr(r.out, "PROCESS") && strstr(r.out, user) &&
			      strstr(r.out, proc),
		      "'%s', '%s' not in:\n%s", user, proc, r.out);
	ran_free(&r);
	r = run(region);
	ck_assert_msg(strstr(r.out, user) && strstr(r.out, proc), "%s", r.out);
	ran_free(&r);
	r = run(clients);
	ck_assert_msg(strstr(r.out, proc) && strstr(r.out, user), "%s", r.out);
	ran_free(&r);

	r = run(region_json);
	root = ran_json(&r);
	owner = cJSON_GetObjectItem(root, "owner");
	ck_assert_str_eq(test_str(owner, "user"), pw->pw_name);
	ck_assert_str_eq(test_str(owner, "process"), comm);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(owner, "group"));
	cJSON_Delete(root);
	ran_free(&r);
	r = run(clients_json);
	root = ran_json(&r);
	cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "clients"))
		if (cJSON_GetObjectItem(item, "pid")->valueint == getpid())
			found = strcmp(test_str(item, "process"), comm) == 0 &&
				strcmp(test_str(item, "user"), pw->pw_name) == 0;
	ck_assert_msg(found, "%s", r.out);
	cJSON_Delete(root);
	ran_free(&r);
	rdmamem_client_close(c);
}
END_TEST

/* argv on a terminal (a pty) with NO_COLOR as given (NULL: unset); what
 * it printed. */
static char *run_on_tty(const char *const *argv, const char *no_color, int *ret_rc)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	int master;
	ssize_t n;
	pid_t pid;

	ck_assert_ptr_nonnull(buf);
	pid = forkpty(&master, NULL, NULL, NULL);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (no_color)
			setenv("NO_COLOR", no_color, 1);
		else
			unsetenv("NO_COLOR");
		setenv("TERM", "xterm", 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	/* EIO once the child is gone and the pty closed. */
	while ((n = read(master, buf + len, cap - 1 - len)) > 0)
		len += n;
	buf[len] = '\0';
	close(master);
	*ret_rc = test_wait(pid, 10000);
	return buf;
}

/* Colour on a terminal; none with NO_COLOR, on a pipe, or with --json. */
START_TEST(test_color)
{
	const char *doctor[] = { CTL_BIN, "-s", td.socket, "doctor", NULL };
	const char *json[] = { CTL_BIN, "-s", td.socket, "--json", "doctor", NULL };
	char *out;
	struct ran r;
	int rc;

	out = run_on_tty(doctor, NULL, &rc);
	ck_assert_msg(strstr(out, "\033[32mPASS\033[0m"), "no green PASS on a tty:\n%s", out);
	free(out);
	/* NO_COLOR set to anything but the empty string. */
	out = run_on_tty(doctor, "1", &rc);
	ck_assert_msg(strstr(out, "PASS") && !strchr(out, '\033'), "%s", out);
	free(out);
	out = run_on_tty(json, NULL, &rc);
	ck_assert_msg(strstr(out, "\"checks\"") && !strchr(out, '\033'), "%s", out);
	free(out);
	r = run(doctor);
	ck_assert_msg(strstr(r.out, "PASS") && !strchr(r.out, '\033'), "%s", r.out);
	ran_free(&r);
}
END_TEST

/* doctor's verdict counts the FAILs and the WARNs it printed. */
START_TEST(test_doctor_verdict)
{
	const char *text[] = { CTL_BIN, "-s", td.socket, "doctor", NULL };
	const char *json[] = { CTL_BIN, "-s", td.socket, "--json", "doctor", NULL };
	int fails = 0, warns = 0, jfails = 0, jwarns = 0;
	const cJSON *item;
	char verdict[64];
	struct ran r;
	cJSON *root;

	r = run(text);
	for (const char *l = r.out; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		fails += strncmp(l, "FAIL  ", 6) == 0;
		warns += strncmp(l, "WARN  ", 6) == 0;
	}
	ck_assert_int_eq(r.rc, fails ? 1 : 0);
	if (fails || warns)
		snprintf(verdict, sizeof(verdict),
			 "\n%d failed, %d warning%s: see the hints above.\n", fails, warns,
			 warns == 1 ? "" : "s");
	else
		snprintf(verdict, sizeof(verdict), "\nAll good.\n");
	ck_assert_msg(strstr(r.out, verdict), "'%s' not in:\n%s", verdict, r.out);
	ran_free(&r);

	r = run(json);
	root = ran_json(&r);
	cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "checks")) {
		jfails += strcmp(test_str(item, "status"), "FAIL") == 0;
		jwarns += strcmp(test_str(item, "status"), "WARN") == 0;
	}
	ck_assert_int_eq(cJSON_GetObjectItem(root, "failed")->valueint, jfails);
	ck_assert_int_eq(cJSON_GetObjectItem(root, "warnings")->valueint, jwarns);
	ck_assert_int_eq(jfails, fails);
	ck_assert_int_eq(jwarns, warns);
	ck_assert(cJSON_IsBool(cJSON_GetObjectItem(root, "ok")));
	cJSON_Delete(root);
	ran_free(&r);
}
END_TEST

/* Sizes in units in doctor: a daemon under a 64 KiB memlock limit. */
static void low_memlock(void)
{
	struct rlimit rl = { 65536, 65536 };

	setrlimit(RLIMIT_MEMLOCK, &rl);
}

START_TEST(test_doctor_units)
{
	struct test_daemon d;
	const char *doctor[] = { CTL_BIN, "-s", d.socket, "doctor", NULL };
	struct ran r;
	char *line;

	test_daemon_child_setup = low_memlock;
	test_daemon_start(&d, NULL);
	test_daemon_child_setup = NULL;
	r = run(doctor);
	line = strstr(r.out, "locked memory");
	ck_assert_ptr_nonnull(line);
	*strchrnul(line, '\n') = '\0';
	/* Root's daemon has CAP_IPC_LOCK, anyone else's fails: 64.0 KiB both ways. */
	ck_assert_msg(strstr(line, "RLIMIT_MEMLOCK") && strstr(line, "64.0 KiB") &&
			      !strstr(line, "65536"),
		      "%s", line);
	ran_free(&r);
	test_daemon_stop(&d);
}
END_TEST

/* doctor with no daemon: says so, checks what needs none, exits 1. */
START_TEST(test_doctor_daemon_down)
{
	const char *text[] = { CTL_BIN, "-s", "/nonexistent/x.sock", "doctor", NULL };
	const char *json[] = { CTL_BIN, "-s", "/nonexistent/x.sock", "--json", "doctor", NULL };
	char stale[100];
	const char *stale_argv[] = { CTL_BIN, "-s", stale, "doctor", NULL };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const cJSON *item;
	bool daemon = false, memlock = false;
	struct ran r;
	cJSON *root;
	int fd;

	r = run(text);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_msg(strncmp(r.out, "FAIL  daemon", 12) == 0, "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "is the daemon running?"));
	ck_assert_ptr_nonnull(strstr(r.out, "\nFAIL  socket             /nonexistent/x.sock: No "
					    "such file or directory\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "  units  "));
	ck_assert_ptr_nonnull(strstr(r.out, "  locked memory  "));
	ck_assert_ptr_nonnull(strstr(r.out, " failed, "));
	ck_assert_str_eq(r.err, "");
	ran_free(&r);

	r = run(json);
	ck_assert_int_eq(r.rc, 1);
	root = ran_json(&r);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(root, "ok")));
	ck_assert_int_ge(cJSON_GetObjectItem(root, "failed")->valueint, 2);
	cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "checks")) {
		if (strcmp(test_str(item, "check"), "daemon") == 0)
			daemon = strcmp(test_str(item, "status"), "FAIL") == 0 &&
				 strstr(test_str(item, "hint"), "start it");
		memlock |= strcmp(test_str(item, "check"), "locked memory") == 0;
	}
	ck_assert(daemon && memlock);
	cJSON_Delete(root);
	ran_free(&r);

	/* A socket nobody listens on: left by a daemon that died. */
	snprintf(stale, sizeof(stale), "%s/stale.sock", td.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	ck_assert_int_eq(chmod(stale, 0660), 0);
	r = run(stale_argv);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_ptr_nonnull(strstr(r.out, "Connection refused"));
	ck_assert_msg(strstr(r.out, "\nWARN  socket ") && strstr(r.out, "no daemon answered"), "%s",
		      r.out);
	ran_free(&r);
	unlink(stale);
}
END_TEST

/*
 * Permission denied, as another user: the socket lets a group in that
 * the user is not in; rdmamemctl names it and says how to join, and
 * doctor's access check says the same. Run with setpriv(1).
 */
START_TEST(test_permission_hint)
{
	static const char *const args[] = { "--socket-mode", "0660", NULL };
	struct test_daemon d;
	const char *status[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
				 "--clear-groups",   CTL_BIN,         "-s",
				 d.socket,           "status",        NULL };
	const char *doctor[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
				 "--clear-groups",   CTL_BIN,         "-s",
				 d.socket,           "doctor",        NULL };
	struct passwd *pw = getpwuid(TEST_OTHER_UID);
	struct group *gr = getgrgid(100);
	char group[64], join[160];
	struct ran r;

	if (!test_root_or_skip(__func__, "connect as another user"))
		return;
	if (access("/usr/bin/setpriv", X_OK) < 0) {
		printf("SKIP test_permission_hint: no /usr/bin/setpriv (util-linux)\n");
		return;
	}
	test_daemon_start(&d, args);
	ck_assert_int_eq(chmod(d.dir, 0755), 0);
	ck_assert_int_eq(chown(d.socket, 0, 100), 0);
	snprintf(group, sizeof(group), "%s", gr ? gr->gr_name : "100");
	snprintf(join, sizeof(join), "'sudo usermod -aG %s %s', then log in again", group,
		 pw ? pw->pw_name : "65534");

	r = run(status);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_msg(strstr(r.err, "Permission denied") && strstr(r.err, join), "%s", r.err);
	ck_assert_ptr_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1);
	ran_free(&r);

	r = run(doctor);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_msg(strstr(r.out, "FAIL  daemon ") && strstr(r.out, "FAIL  access ") &&
			      strstr(r.out, join),
		      "%s", r.out);
	ran_free(&r);

	/* Only the owner's bits: no group to join. */
	ck_assert_int_eq(chmod(d.socket, 0600), 0);
	r = run(status);
	ck_assert_int_eq(r.rc, 1);
	ck_assert_msg(strstr(r.err, "lets only root in"), "%s", r.err);
	ran_free(&r);
	test_daemon_stop(&d);
}
END_TEST

/* The bash completion parses and completes commands, options and, from a
 * live daemon, region ids and method names; zsh's parses. */
START_TEST(test_completion)
{
	struct rdmamem_client *c = test_client(td.socket);
	char script[2048], id[32];
	const char *bash[] = { "/bin/bash", "-c", script, NULL };
	const char *zsh[] = { "/usr/bin/zsh", "-n", SRC_DIR "/shell-completion/zsh/_rdmamemctl",
			      NULL };
	uint64_t region;
	struct ran r;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("comp", 4096, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &region), 0);
	close(fd);
	snprintf(id, sizeof(id), "%" PRIu64, region);
	snprintf(script, sizeof(script),
		 "PATH=%s:$PATH; set -e; source %s/shell-completion/bash/rdmamemctl\n"
		 "c() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _rdmamemctl; "
		 "echo \"${COMPREPLY[*]}\"; }\n"
		 "c rdmamemctl re\n"
		 "c rdmamemctl --j\n"
		 "c rdmamemctl -s %s region ''\n"
		 "c rdmamemctl -s %s call GetSt\n"
		 "c rdmamemctl -s %s status ''\n",
		 BUILD_DIR, SRC_DIR, td.socket, td.socket, td.socket);
	r = run(bash);
	ck_assert_int_eq(r.rc, 0);
	snprintf(script, sizeof(script), "regions region retry\n--json\n%s\nGetStats GetStatus\n\n",
		 id);
	/* compgen keeps the order of its word list. */
	ck_assert_msg(strcmp(r.out, script) == 0 ||
			      (strncmp(r.out, "regions region retry\n--json\n", 28) == 0 &&
			       strstr(r.out, "GetStatus")),
		      "%s (stderr %s)", r.out, r.err);
	ck_assert_msg(strstr(r.out, id), "region %s not completed:\n%s", id, r.out);
	ran_free(&r);

	if (access(zsh[0], X_OK) == 0) {
		r = run(zsh);
		ck_assert_msg(r.rc == 0, "zsh -n: %s", r.err);
		ran_free(&r);
	} else {
		printf("SKIP test_completion (zsh part): no %s\n", zsh[0]);
	}
	rdmamem_client_close(c);
}
END_TEST

/* The daemon's fd limit starts low, with room above it. */
static void low_soft_fd_limit(void)
{
	struct rlimit rl = { .rlim_cur = 200, .rlim_max = 3000 };

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		_exit(96);
}

/* Starts a daemon under the low soft limit; its doctor's fd line and the
 * fd_limit of GetStatus. */
static char *doctor_fd_line(const char *const *args, int *ret_limit)
{
	struct test_daemon d;
	const char *doctor[] = { CTL_BIN, "-s", d.socket, "doctor", NULL };
	char *out, *err, *line, *nl;
	cJSON *st;
	int fd;

	test_daemon_child_setup = low_soft_fd_limit;
	test_daemon_start(&d, args);
	test_daemon_child_setup = NULL;
	fd = test_connect(d.socket);
	st = test_call(fd, "{\"method\":\"io.rdmamemd.GetStatus\"}");
	*ret_limit =
		cJSON_GetObjectItem(cJSON_GetObjectItem(st, "parameters"), "fd_limit")->valueint;
	cJSON_Delete(st);
	close(fd);
	test_run(doctor, &out, &err);
	line = strstr(out, "file descriptors");
	ck_assert_msg(line, "no fd check in:\n%s", out);
	/* From the status column to the end of the line. */
	while (line > out && line[-1] != '\n')
		line--;
	nl = strchr(line, '\n');
	line = strndup(line, nl ? (size_t)(nl - line) : strlen(line));
	free(out);
	free(err);
	test_daemon_stop(&d);
	return line;
}

/* The daemon raises its soft fd limit to the hard one, reports it, and
 * doctor warns when one uid at its caps could need more. */
START_TEST(test_doctor_fd_limit)
{
	static const char *const small[] = { "--max-connections", "100", "--max-regions-per-uid",
					     "1000", NULL };
	char *line;
	int limit;

	if (getenv("RDMAMEM_TEST_DAEMON_WRAPPER")) {
		/* valgrind keeps RLIMIT_NOFILE for itself: it reserves fds
		 * above what it lets the program see and raise. */
		printf("SKIP test_doctor_fd_limit: the daemon runs under "
		       "RDMAMEM_TEST_DAEMON_WRAPPER, which owns its fd limit\n");
		return;
	}
	line = doctor_fd_line(small, &limit);
	ck_assert_int_eq(limit, 3000);
	ck_assert_msg(strncmp(line, "PASS", 4) == 0 && strstr(line, "limit 3000"), "%s", line);
	free(line);
	/* The defaults: 4096 connections and 16384 regions per uid. */
	line = doctor_fd_line(NULL, &limit);
	ck_assert_int_eq(limit, 3000);
	ck_assert_msg(strncmp(line, "WARN", 4) == 0 && strstr(line, "limit 3000"), "%s", line);
	free(line);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_status_text);
	tcase_add_test(tc, test_status_json);
	tcase_add_test(tc, test_ping);
	tcase_add_test(tc, test_not_running);
	tcase_add_test(tc, test_usage_errors);
	tcase_add_loop_test(tc, test_every_command, 0, ELEMENTSOF(verbs));
	suite_add_tcase(s, tc);

	/* rdmamemctl's own features (issue 16): each in text and --json. */
	tc = tcase_create("ctl");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_call_any_method);
	tcase_add_test(tc, test_retry_errors);
	tcase_add_test(tc, test_fake_region_and_retry);
	tcase_add_test(tc, test_empty_tables);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_color);
	tcase_add_test(tc, test_doctor_verdict);
	tcase_add_test(tc, test_doctor_units);
	tcase_add_test(tc, test_doctor_daemon_down);
	tcase_add_test(tc, test_permission_hint);
	tcase_add_test(tc, test_completion);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_doctor_fd_limit);
	suite_add_tcase(s, tc);
	return s;
}
