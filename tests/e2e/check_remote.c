/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Descriptors, remote handles and plans over Varlink: ExportRegion,
 * ImportRemote/ReleaseRemote, PrepareTransfer/ReleasePlan. The host cases
 * need no RDMA device: descriptors are made here with the daemon's own
 * codec, imported, refused, capped, dropped with their session, and plans
 * checked against both lengths. The cases tagged "rdma" export a region
 * registered on Soft-RoCE (make vmtest) and hold the descriptor against
 * the registration.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "daemon/remote/descriptor.h"
#include "proto/json.h"
#include "proto/ranges.h"
#include "rdmamem.h"
#include "tests/testlib.h"

static struct test_daemon td;

static void setup(void)
{
	static const char *const args[] = { "--max-remotes-per-uid", "3", "--max-plans-per-uid",
					    "2", NULL };

	test_daemon_start(&td, args);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

/* A descriptor of length bytes with one endpoint and one device. */
static char *descriptor_of(uint64_t length, uint64_t id)
{
	struct descriptor d = {
		.access = DESCRIPTOR_ACCESS_READ | DESCRIPTOR_ACCESS_WRITE,
		.id = id,
		.length = length,
		.n_endpoints = 1,
		.n_devices = 1,
		.endpoints = { { .family = 4, .port = 7471, .addr = { 10, 0, 2, 15 } } },
		.devices = { { .name = "rxe0", .addr = 0x10000, .rkey = 0x1234, .port = 1 } },
	};
	const char *why;
	char *text;

	memset(d.token, 0x5a, sizeof(d.token));
	ck_assert_int_eq(descriptor_format(&d, &text, &why), 0);
	return text;
}

static uint64_t region_of(struct rdmamem_client *c, size_t size)
{
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("remote", size, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	return id;
}

/* used of quota in GetLimits. */
static unsigned long long limit_used(struct rdmamem_client *c, const char *quota)
{
	const cJSON *item;
	char *text = NULL;
	unsigned long long v = ~0ULL;
	cJSON *reply;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetLimits", NULL, NULL, 0, &text, NULL, NULL),
			 0);
	reply = cJSON_Parse(text);
	cJSON_ArrayForEach(item, cJSON_GetObjectItem(reply, "limits"))
		if (strcmp(test_str(item, "quota"), quota) == 0)
			v = strtoull(test_str(item, "used"), NULL, 10);
	cJSON_Delete(reply);
	free(text);
	ck_assert_uint_ne(v, ~0ULL);
	return v;
}

/* ExportRegion without a registration, or with a bad device list. */
START_TEST(test_export_refusals)
{
	struct rdmamem_client *c = test_client(td.socket), *other = test_client(td.socket);
	const char *const nosuch[] = { "nosuchdev0", NULL }, *const none[] = { NULL };
	const char *const twice[] = { "a", "a", NULL }, *const bad[] = { "a/b", NULL };
	uint64_t region = region_of(c, 4096);
	char *desc = NULL;

	ck_assert_int_eq(rdmamem_region_export(c, region, NULL, &desc, NULL, NULL), -ENOLINK);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NotRegistered");
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "RegisterOn"));
	ck_assert_int_eq(rdmamem_region_export(c, region, nosuch, &desc, NULL, NULL), -ENODEV);
	ck_assert_int_eq(rdmamem_region_export(c, region, none, &desc, NULL, NULL), -EINVAL);
	ck_assert_int_eq(rdmamem_region_export(c, region, twice, &desc, NULL, NULL), -EINVAL);
	ck_assert_int_eq(rdmamem_region_export(c, region, bad, &desc, NULL, NULL), -EINVAL);
	/* Owner only. */
	ck_assert_int_lt(rdmamem_region_export(other, region, NULL, &desc, NULL, NULL), 0);
	ck_assert_ptr_null(desc);
	/* Nothing was made: no token is left behind by a refusal. */
	ck_assert_uint_eq(limit_used(c, "tokens"), 0);
	rdmamem_client_close(other);
	rdmamem_client_close(c);
}
END_TEST

/* ImportRemote shows what the descriptor says; ids are the connection's. */
START_TEST(test_import_release)
{
	struct rdmamem_client *c = test_client(td.socket), *other = test_client(td.socket);
	char *desc = descriptor_of(1 << 20, 42), *params, *text = NULL;
	uint64_t remote, again;
	cJSON *reply, *dev;

	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	ck_assert_int_eq(rdmamem_remote_import(c, desc, &again), 0);
	ck_assert_uint_ne(remote, again);
	ck_assert_int_eq(asprintf(&params, "{\"descriptor\":\"%s\"}", desc),
			 (int)strlen(desc) + 17);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ImportRemote", params, NULL, 0, &text, NULL,
				      NULL),
			 0);
	reply = cJSON_Parse(text);
	ck_assert_str_eq(test_str(reply, "export"), "42");
	ck_assert_str_eq(test_str(reply, "length"), "1048576");
	ck_assert_str_eq(
		cJSON_GetArrayItem(cJSON_GetObjectItem(reply, "endpoints"), 0)->valuestring,
		"10.0.2.15:7471");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(reply, "access")), 2);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItem(reply, "devices"), 0);
	ck_assert_str_eq(test_str(dev, "name"), "rxe0");
	ck_assert_str_eq(test_str(dev, "rkey"), "4660");
	ck_assert_str_eq(test_str(dev, "addr"), "65536");
	/* The token stays out of the answer. */
	ck_assert_ptr_null(strstr(text, "5a5a"));
	ck_assert_ptr_null(cJSON_GetObjectItem(reply, "token"));
	ck_assert_uint_eq(limit_used(c, "remotes"), 3);

	/* Another connection of the same uid cannot name it. */
	ck_assert_int_eq(rdmamem_remote_release(other, remote), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(other), "io.rdmamemd.NoSuchRemote");
	ck_assert_int_eq(rdmamem_remote_release(c, remote), 0);
	ck_assert_int_eq(rdmamem_remote_release(c, remote), -ENOENT);
	ck_assert_uint_eq(limit_used(c, "remotes"), 2);
	cJSON_Delete(reply);
	free(text);
	free(params);
	free(desc);
	rdmamem_client_close(other);
	rdmamem_client_close(c);
}
END_TEST

/* rdmamemctl descriptor: what a descriptor names, parsed by the daemon; a
 * malformed one is refused with the daemon's reason. */
START_TEST(test_cli_descriptor)
{
	char *desc = descriptor_of(1 << 20, 42), *out = NULL, *err = NULL;
	const char *argv[] = { CTL_BIN, "-s", td.socket, "descriptor", desc, NULL };
	const char *bad[] = { CTL_BIN, "-s", td.socket, "descriptor", "rdmamem1.AAAA", NULL };
	const char *json[] = { CTL_BIN, "--json", "-s", td.socket, "descriptor", desc, NULL };
	cJSON *reply;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_msg(strstr(out, "export 42 of a region of 1.0 MiB (1048576 bytes)"), "%s", out);
	ck_assert_msg(strstr(out, "10.0.2.15:7471"), "%s", out);
	ck_assert_msg(strstr(out, "rxe0 port 1") && strstr(out, "rkey 0x1234"), "%s", out);
	ck_assert_msg(!strstr(out, "5a5a"), "the token leaked: %s", out);
	free(out);
	free(err);
	ck_assert_int_ne(test_run(bad, &out, &err), 0);
	ck_assert_msg(strstr(err, "InvalidParameter"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(test_run(json, &out, &err), 0);
	reply = cJSON_Parse(out);
	ck_assert_ptr_nonnull(reply);
	ck_assert_str_eq(test_str(reply, "export"), "42");
	cJSON_Delete(reply);
	free(out);
	free(err);
	free(desc);
}
END_TEST

/* Hostile descriptors: refused with InvalidParameter naming descriptor and
 * why, and nothing imported. */
START_TEST(test_hostile_descriptors)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *good = descriptor_of(4096, 1), *huge;
	static const char *const bad[] = {
		"",
		"rdmamem1.",
		"rdmamem2.AQMB",
		"rdmamem1.AQMBAQ==",
		"rdmamem1.!!!!",
		"RDMAMEM1.AQMBAQ",
	};
	size_t n = strlen(good);
	uint64_t remote;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ck_assert_int_eq(rdmamem_remote_import(c, bad[i], &remote), -EINVAL);
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "descriptor"));
	}
	/* Truncated, one character more, one flipped. */
	good[n - 1] = '\0';
	ck_assert_int_eq(rdmamem_remote_import(c, good, &remote), -EINVAL);
	free(good);
	good = descriptor_of(4096, 1);
	good[12] = good[12] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(rdmamem_remote_import(c, good, &remote), -EINVAL);
	/* A megabyte of it: refused by its length, before any decoding. */
	huge = malloc(1 << 20);
	memset(huge, 'A', (1 << 20) - 1);
	memcpy(huge, "rdmamem1.", 9);
	huge[(1 << 20) - 1] = '\0';
	ck_assert_int_eq(rdmamem_remote_import(c, huge, &remote), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "descriptor"));
	/* Not a string. */
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ImportRemote", "{\"descriptor\":7}", NULL, 0,
				      NULL, NULL, NULL),
			 -EINVAL);
	ck_assert_uint_eq(limit_used(c, "remotes"), 0);
	free(huge);
	free(good);
	rdmamem_client_close(c);
}
END_TEST

/* max-remotes-per-uid and max-plans-per-uid (3 and 2 here), across connections. */
START_TEST(test_caps)
{
	struct rdmamem_client *c = test_client(td.socket), *c2 = test_client(td.socket);
	const struct rdmamem_range r = { 0, 0, 16 };
	char *desc = descriptor_of(4096, 1);
	uint64_t remote[3], x, plan[2], region = region_of(c, 4096);

	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote[0]), 0);
	ck_assert_int_eq(rdmamem_remote_import(c2, desc, &remote[1]), 0);
	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote[2]), 0);
	ck_assert_int_eq(rdmamem_remote_import(c2, desc, &x), -EDQUOT);
	ck_assert_str_eq(rdmamem_client_error_name(c2), "io.rdmamemd.QuotaExceeded");
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote[0], &r, 1, &plan[0]), 0);
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote[2], &r, 1, &plan[1]), 0);
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote[0], &r, 1, &x), -EDQUOT);
	ck_assert_uint_eq(limit_used(c2, "plans"), 2);
	ck_assert_int_eq(rdmamem_plan_release(c, plan[0]), 0);
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote[0], &r, 1, &plan[0]), 0);
	ck_assert_int_eq(rdmamem_remote_release(c2, remote[1]), 0);
	ck_assert_int_eq(rdmamem_remote_import(c2, desc, &remote[1]), 0);
	free(desc);
	rdmamem_client_close(c2);
	rdmamem_client_close(c);
}
END_TEST

/* A closed connection's plans and remotes go with it, uncharged. */
START_TEST(test_session_drop)
{
	struct rdmamem_client *c = test_client(td.socket), *watch = test_client(td.socket);
	const struct rdmamem_range r = { 0, 0, 16 };
	char *desc = descriptor_of(4096, 1);
	uint64_t remote, plan, region = region_of(c, 4096);

	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, &r, 1, &plan), 0);
	/* The plan keeps its remote: releasing the handle does not end it. */
	ck_assert_int_eq(rdmamem_remote_release(c, remote), 0);
	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	ck_assert_uint_eq(limit_used(watch, "remotes"), 1);
	ck_assert_uint_eq(limit_used(watch, "plans"), 1);
	rdmamem_client_close(c);
	/* Closing is asynchronous: GetLimits on another connection sees it soon. */
	for (int i = 0; i < 200 && limit_used(watch, "plans") + limit_used(watch, "remotes"); i++)
		usleep(10000);
	ck_assert_uint_eq(limit_used(watch, "remotes"), 0);
	ck_assert_uint_eq(limit_used(watch, "plans"), 0);
	free(desc);
	rdmamem_client_close(watch);
}
END_TEST

/* PrepareTransfer with n listed ranges, as a raw call. */
static int prepare_listed(struct rdmamem_client *c, uint64_t region, uint64_t remote, size_t n)
{
	size_t cap = 128 + n * 64, len;
	char *params = malloc(cap);
	int r;

	len = (size_t)snprintf(params, cap,
			       "{\"region\":\"%" PRIu64 "\",\"remote\":\"%" PRIu64
			       "\",\"ranges\":[",
			       region, remote);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(params + len, cap - len,
					"%s{\"local_offset\":\"%zu\",\"remote_offset\":\"0\","
					"\"length\":\"1\"}",
					i ? "," : "", i % 4096);
	snprintf(params + len, cap - len, "]}");
	r = rdmamem_call(c, "io.rdmamemd.PrepareTransfer", params, NULL, 0, NULL, NULL, NULL);
	free(params);
	return r;
}

/* Ranges are checked against both lengths, once, at PrepareTransfer. */
START_TEST(test_plan_ranges)
{
	struct rdmamem_client *c = test_client(td.socket), *other = test_client(td.socket);
	char *desc = descriptor_of(4096, 1);
	uint64_t remote, plan, region = region_of(c, 8192);
	const struct rdmamem_range ok[] = { { 0, 0, 4096 }, { 8191, 4095, 1 }, { 4096, 0, 4096 } };
	const struct {
		struct rdmamem_range r;
		const char *why;
	} bad[] = {
		{ { 0, 0, 0 }, "length 0" },        { { 8192, 0, 1 }, "region" },
		{ { 4097, 0, 4096 }, "region" },    { { 0, 4096, 1 }, "remote" },
		{ { 0, 1, 4096 }, "remote" },       { { UINT64_MAX, 0, 2 }, "region" },
		{ { 0, UINT64_MAX, 2 }, "remote" },
	};
	struct rdmamem_range *many;

	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, ok, ELEMENTSOF(ok), &plan), 0);
	ck_assert_int_eq(rdmamem_plan_release(c, plan), 0);
	ck_assert_int_eq(rdmamem_plan_release(c, plan), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NoSuchPlan");
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct rdmamem_range rs[2] = { ok[0], bad[i].r };

		ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, rs, 2, &plan),
				 -ERANGE);
		/* The second range is the one named. */
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "range 1"));
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), bad[i].why));
	}
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, ok, 0, &plan), -EINVAL);
	/* One more than the most a plan holds (packed, as the library sends
	 * them): refused by count. */
	many = calloc(131073, sizeof(*many));
	for (size_t i = 0; i < 131073; i++)
		many[i] = (struct rdmamem_range){ i % 4096, i % 4096, 1 };
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, many, 131073, &plan), -EINVAL);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "'packed_fd'"));
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, many, 131072, &plan), 0);
	ck_assert_int_eq(rdmamem_plan_release(c, plan), 0);
	/* The last range of a full plan is checked as the first. */
	many[131071].length = 8192;
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, many, 131072, &plan), -ERANGE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "range 131071"));
	free(many);
	/* Listed: what a message's JSON values allow, 16000. */
	ck_assert_int_eq(prepare_listed(c, region, remote, 16000), 0);
	ck_assert_int_eq(prepare_listed(c, region, remote, 16001), -EINVAL);
	/* Another connection has neither the remote nor, uid aside, a right
	 * the owner did not give: its own remote on this region works (same
	 * uid), someone else's remote id does not. */
	ck_assert_int_eq(rdmamem_transfer_prepare(other, region, remote, ok, 1, &plan), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(other), "io.rdmamemd.NoSuchRemote");
	ck_assert_int_eq(rdmamem_transfer_prepare(c, 999999, remote, ok, 1, &plan), -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NoSuchRegion");
	ck_assert_int_eq(
		rdmamem_call(c, "io.rdmamemd.PrepareTransfer",
			     "{\"region\":\"1\",\"remote\":\"1\",\"ranges\":[{\"length\":\"1\"}]}",
			     NULL, 0, NULL, NULL, NULL),
		-EINVAL);
	free(desc);
	rdmamem_client_close(other);
	rdmamem_client_close(c);
}
END_TEST

/* A memfd holding bytes [0, len) of data, with seals (F_SEAL_*) added. */
static int ranges_fd(const void *data, size_t len, int seals)
{
	int fd = memfd_create("test-ranges", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	if (seals)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* A raw call's error: its name, and what its message must hold (for
 * InvalidParameter, the parameter: the reason goes to the daemon's log). */
static void assert_refused(struct rdmamem_client *c, const char *method, const char *params,
			   const char *name, const char *needle)
{
	char *err = NULL;

	ck_assert_int_lt(rdmamem_call(c, method, params, NULL, 0, NULL, NULL, NULL), 0);
	ck_assert_str_eq(rdmamem_client_error_name(c), name);
	err = strdup(rdmamem_client_error_message(c) ?: "");
	ck_assert_msg(strstr(err, needle), "%s: '%s' lacks '%s'", params, err, needle);
	free(err);
}

/*
 * The packed forms (PROTOCOL.md, "Packed ranges"): PrepareTransfer's packed
 * and Transfer's batch are refused for their form with InvalidParameter
 * naming the parameter, for their bounds with OutOfRange naming
 * the range, past max-transfer-ops by count; a good batch gets as far as
 * the registration, which this host has none of.
 */
START_TEST(test_packed_forms)
{
	static const char *const inval = "org.varlink.service.InvalidParameter";
	struct rdmamem_client *c = test_client(td.socket);
	char *desc = descriptor_of(65536, 3), params[512];
	uint64_t remote, region = region_of(c, 65536), bytes = 0, plan;
	struct rdmamem_range r[2] = { { 0, 0, 4096 }, { 4096, 8192, 4096 } }, *big;
	struct rdmamem_remote_info info;
	const struct rdmamem_transfer_options too_long = { .notify = r,
							   .notify_len = RDMAMEM_NOTIFY_MAX + 1 };
	/* One range (0, 4096, 16), and 23 bytes of one. */
	const char *one = "AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA",
		   *short23 = "AAAAAAAAAAAAEAAAAAAAABAAAAAAAAA=";

	ck_assert_int_eq(rdmamem_remote_import_info(c, desc, &remote, &info), 0);
	ck_assert_uint_eq(info.length, 65536);
	ck_assert_uint_eq(info.export_id, 3);
	ck_assert_uint_eq(info.access, RDMAMEM_REMOTE_READ | RDMAMEM_REMOTE_WRITE);
	ck_assert_uint_eq(info.n_devices, 1);

	/* PrepareTransfer: one of ranges or packed; packed well formed. */
#define PREP(extra)                                                                            \
	(snprintf(params, sizeof(params),                                                      \
		  "{\"region\":\"%" PRIu64 "\",\"remote\":\"%" PRIu64 "\"%s}", region, remote, \
		  extra),                                                                      \
	 params)
	assert_refused(c, "io.rdmamemd.PrepareTransfer", PREP(""), inval, "ranges");
	assert_refused(c, "io.rdmamemd.PrepareTransfer",
		       PREP(",\"packed\":\"AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA\",\"ranges\":[]"),
		       inval, "packed");
	assert_refused(c, "io.rdmamemd.PrepareTransfer", PREP(",\"packed\":\"\""), inval,
		       "'packed'");
	assert_refused(c, "io.rdmamemd.PrepareTransfer", PREP(",\"packed\":\"AAAA AAA\""), inval,
		       "'packed'");
	assert_refused(c, "io.rdmamemd.PrepareTransfer",
		       PREP(",\"packed\":\"AAAAAAAAAAAAEAAAAAAAABAAAAAAAAA=\""), inval, "'packed'");
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.PrepareTransfer",
				      PREP(",\"packed\":\"AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA\""),
				      NULL, 0, NULL, NULL, NULL),
			 0);
#undef PREP

	/* Transfer's batch: one form at a time, each field checked. */
#define BATCH(fmt, ...) (snprintf(params, sizeof(params), fmt, __VA_ARGS__), params)
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"copy\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"}}",
			     region, remote, one),
		       inval, "'batch'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"}}}",
			     region, remote),
		       inval, "'batch'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"},"
			     "\"plan\":\"1\"}",
			     region, remote, one),
		       inval, "'plan'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"}}",
			     region, remote, short23),
		       inval, "'batch'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"},"
			     "\"indices\":[\"0\"]}",
			     region, remote, one),
		       inval, "'indices'");
	/* A plan post's packed indices: one of the two forms, well formed,
	 * with a plan only; an index past the plan named by its entry. */
	ck_assert_int_eq(rdmamem_transfer_prepare(c, region, remote, r, 2, &plan), 0);
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"plan\":\"%" PRIu64 "\",\"op\":\"write\",\"indices\":[\"0\"],"
			     "\"packed_indices\":\"AAAAAA==\"}",
			     plan),
		       inval, "'packed_indices'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"plan\":\"%" PRIu64 "\",\"op\":\"write\","
			     "\"packed_indices\":\"AAAA\"}",
			     plan),
		       inval, "'packed_indices'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"plan\":\"%" PRIu64 "\",\"op\":\"write\","
			     "\"packed_indices\":\"\"}",
			     plan),
		       inval, "'packed_indices'");
	assert_refused(c, "io.rdmamemd.Transfer",
		       BATCH("{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64
			     "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"},"
			     "\"packed_indices\":\"AAAAAA==\"}",
			     region, remote, one),
		       inval, "'packed_indices'");
	/* Entry 1 (the library packs them) is past the plan's two ranges. */
	ck_assert_int_eq(rdmamem_transfer_post(c, plan, RDMAMEM_TRANSFER_WRITE,
					       (uint64_t[]){ 1, 2 }, 2, NULL, NULL, &bytes),
			 -ERANGE);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.OutOfRange");
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "index 1"));
	/* Past 32 bits: listed, and past any plan. */
	ck_assert_int_eq(rdmamem_transfer_post(c, plan, RDMAMEM_TRANSFER_WRITE,
					       (uint64_t[]){ 0, 1ULL << 32 }, 2, NULL, NULL,
					       &bytes),
			 -ERANGE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "index 1"));
	/* In range: decoded and resolved, refused only for want of a device. */
	ck_assert_int_eq(rdmamem_transfer_post(c, plan, RDMAMEM_TRANSFER_WRITE,
					       (uint64_t[]){ 1, 0 }, 2, NULL, NULL, &bytes),
			 -ENOLINK);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NotRegistered");
#undef BATCH

	/* Through the library: the daemon's refusals, by name. */
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote + 100,
						 r, 2, NULL, &bytes),
			 -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NoSuchRemote");
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region + 100, 0, remote,
						 r, 2, NULL, &bytes),
			 -ENOENT);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NoSuchRegion");
	r[1].remote_offset = 65536 - 4095;
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote, r, 2,
						 NULL, &bytes),
			 -ERANGE);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "op 1"));
	r[1] = (struct rdmamem_range){ 65535, 0, 2 };
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote, r, 2,
						 NULL, &bytes),
			 -ERANGE);
	r[1] = (struct rdmamem_range){ 4096, 8192, 4096 };
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote, r, 2,
						 NULL, &bytes),
			 -ENOLINK);
	ck_assert_str_eq(rdmamem_client_error_name(c), "io.rdmamemd.NotRegistered");
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote, r, 2,
						 &too_long, &bytes),
			 -EMSGSIZE);
	ck_assert_int_eq(rdmamem_transfer_ranges(c, 7, region, 0, remote, r, 2, NULL, &bytes),
			 -EINVAL);
	/* Past max-transfer-ops (100,000 here): by count, before any is read. */
	big = calloc(100001, sizeof(*big));
	for (size_t i = 0; i < 100001; i++)
		big[i] = (struct rdmamem_range){ 0, 0, 1 };
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_READ, region, 0, remote, big,
						 100001, NULL, &bytes),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "'batch'"));
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_READ, region, 0, remote, big,
						 100000, NULL, &bytes),
			 -ENOLINK);
	/* As text past TRANSFER_INLINE_OPS (decoded and checked on the pool,
	 * after the call returned): the same answers, by the same names. */
	{
		size_t n = 5000, len = ranges_encoded_len(n);
		char *text = malloc(len + 1), *call = malloc(len + 256);

		ck_assert_ptr_nonnull(text);
		ck_assert_ptr_nonnull(call);
#define TEXT_BATCH()                                                             \
	(ranges_encode((const struct ranges_item *)big, n, text),                \
	 snprintf(call, len + 256,                                               \
		  "{\"batch\":{\"op\":\"read\",\"local\":{\"region\":\"%" PRIu64 \
		  "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed\":\"%s\"}}", \
		  region, remote, text),                                         \
	 call)
		assert_refused(c, "io.rdmamemd.Transfer", TEXT_BATCH(), "io.rdmamemd.NotRegistered",
			       "");
		big[4999] = (struct rdmamem_range){ 65536, 0, 1 };
		assert_refused(c, "io.rdmamemd.Transfer", TEXT_BATCH(), "io.rdmamemd.OutOfRange",
			       "op 4999");
		big[4999] = (struct rdmamem_range){ 0, 0, 1 };
		/* A character that is no base64, past the first range. */
		(void)TEXT_BATCH();
		memcpy(strstr(call, text) + 4000, "!", 1);
		assert_refused(c, "io.rdmamemd.Transfer", call, inval, "'batch'");
#undef TEXT_BATCH
		free(call);
		free(text);
	}
	free(big);
	ck_assert_uint_eq(bytes, 0);
	test_assert_serving(td.socket);
	free(desc);
	rdmamem_client_close(c);
}
END_TEST

/* In the VM: a region on rxe exported, the descriptor holds its registration. */
START_TEST(test_export_rdma)
{
	const char *dev_name = getenv("RDMAMEM_RXE_DEV"), *dev_addr = getenv("RDMAMEM_RXE_ADDR");
	struct rdmamem_registration reg;
	struct test_daemon tv;
	struct rdmamem_client *c;
	struct descriptor d;
	char listen[64], token[RDMAMEM_TOKEN_LEN + 1], *desc = NULL, *again = NULL;
	const char *why;
	uint64_t region, id, remote;

	ck_assert_msg(dev_name && dev_addr, "RDMA cases run inside the Soft-RoCE VM (make vmtest)");
	snprintf(listen, sizeof(listen), "%s:7471", dev_addr);
	{
		const char *args[] = { "--rdmacm-listen", listen, NULL };

		test_daemon_start(&tv, args);
	}
	c = test_client(tv.socket);
	region = region_of(c, 65536);
	ck_assert_int_eq(rdmamem_region_export(c, region, NULL, &desc, token, &id), -ENOLINK);
	ck_assert_int_eq(rdmamem_register_on(c, region, dev_name, &reg), 0);
	ck_assert_msg(rdmamem_region_export(c, region, NULL, &desc, token, &id) == 0, "%s",
		      rdmamem_client_error_message(c));
	ck_assert_int_eq(descriptor_parse(desc, strlen(desc), &d, &why), 0);
	ck_assert_uint_eq(d.id, id);
	ck_assert_uint_eq(d.length, 65536);
	ck_assert_uint_eq(d.n_devices, 1);
	ck_assert_str_eq(d.devices[0].name, dev_name);
	ck_assert_uint_eq(d.devices[0].rkey, reg.rkey);
	ck_assert_uint_eq(d.devices[0].addr, reg.addr);
	ck_assert_uint_eq(d.n_endpoints, 1);
	ck_assert_uint_eq(d.endpoints[0].port, 7471);
	ck_assert_uint_eq(limit_used(c, "tokens"), 1);
	/* A second export: another token, another id. */
	ck_assert_int_eq(rdmamem_region_export(c, region, (const char *const[]){ dev_name, NULL },
					       &again, NULL, &remote),
			 0);
	ck_assert_uint_ne(remote, id);
	ck_assert_str_ne(again, desc);
	ck_assert_uint_eq(limit_used(c, "tokens"), 2);
	/* Its own descriptor imports like any other. */
	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	ck_assert_int_eq(rdmamem_access_token_revoke(c, token), 0);
	ck_assert_uint_eq(limit_used(c, "tokens"), 1);
	free(again);
	free(desc);
	rdmamem_client_close(c);
	test_daemon_stop(&tv);
}
END_TEST

/*
 * WaitNotifications where nothing sends any (the host has no RDMA): the
 * poll form answers none at once, a wait answers none after its timeout, a
 * stream answers nothing and ends with its connection.
 */
static uint64_t now_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * ListLinks on a daemon that opened none (no RDMA device here: the
 * links themselves are the unit suite's and the two-host bed's): an empty
 * page without next, the page parameters checked as every listing's, and
 * the Transfer counters of GetStats all zero with nothing started.
 */
START_TEST(test_list_links_none)
{
	struct rdmamem_client *c = test_client(td.socket);
	static const char *const zero[] = { "transfers_started", "transfers_done",
					    "transfers_failed", "transfers_cancelled",
					    "transfers_running" };
	char *reply = NULL;
	cJSON *stats;

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListLinks", "{\"limit\":1}", NULL, 0, &reply,
				      NULL, NULL),
			 0);
	ck_assert_str_eq(reply, "{\"links\":[]}");
	free(reply);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.ListLinks", "{\"limit\":0}", NULL, 0, &reply,
				      NULL, NULL),
			 -EINVAL);
	ck_assert_str_eq(rdmamem_client_error_name(c), "org.varlink.service.InvalidParameter");
	/* An error's parameters come back too (rdmamem_call()). */
	free(reply);
	ck_assert_int_eq(rdmamem_list(c, "io.rdmamemd.ListLinks", &reply), 0);
	ck_assert_ptr_nonnull(strstr(reply, "\"links\":[]"));
	free(reply);

	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.GetStats", NULL, NULL, 0, &reply, NULL, NULL),
			 0);
	stats = cJSON_Parse(reply);
	free(reply);
	ck_assert_ptr_nonnull(stats);
	for (size_t i = 0; i < ELEMENTSOF(zero); i++)
		ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(stats, zero[i])), "0");
	ck_assert(cJSON_IsArray(cJSON_GetObjectItem(stats, "transfer_devices")));
	cJSON_Delete(stats);
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_notifications_none)
{
	static struct rdmamem_notification got[4];
	struct rdmamem_client *c = test_client(td.socket);
	uint64_t t0;
	char *reply = NULL;
	int fd;

	ck_assert_int_eq(rdmamem_notifications_wait(c, 0, got, 4), 0);
	t0 = now_msec();
	ck_assert_int_eq(rdmamem_notifications_wait(c, 60, got, 4), 0);
	ck_assert_uint_ge(now_msec() - t0, 55);
	ck_assert_int_eq(rdmamem_notifications_wait(c, 0, got, 0), -EINVAL);
	ck_assert_int_eq(rdmamem_notifications_wait(c, 0, got, 257), -EINVAL);

	fd = test_connect(td.socket);
	test_send_msg(fd, "{\"method\":\"io.rdmamemd.WaitNotifications\",\"more\":true}", NULL, 0);
	ck_assert_int_lt(test_recv_msg(fd, &reply, 150), 0);
	close(fd);
	test_assert_serving(td.socket);
	ck_assert_int_eq(rdmamem_notifications_wait(c, 0, got, 1), 0);
	rdmamem_client_close(c);
}
END_TEST

/* A raw call with fd as its fd 0, refused: the error's name and a needle
 * of its message. */
static void assert_fd_refused(struct rdmamem_client *c, const char *method, const char *params,
			      int fd, const char *name, const char *needle)
{
	ck_assert_int_lt(rdmamem_call(c, method, params, &fd, 1, NULL, NULL, NULL), 0);
	ck_assert_str_eq(rdmamem_client_error_name(c), name);
	ck_assert_msg(strstr(rdmamem_client_error_message(c) ?: "", needle), "%s: '%s' lacks '%s'",
		      params, rdmamem_client_error_message(c), needle);
	close(fd);
}

/*
 * The fd form of packed ranges (PROTOCOL.md, "Packed ranges"): a sealed
 * memfd as PrepareTransfer's packed_fd or Transfer's batch.packed_fd. Its
 * seals, size and count are checked before anything is used; a good one
 * makes a plan, or gets a batch as far as the registration (none here);
 * the daemon keeps neither the fd nor its mapping once the call ends.
 */
START_TEST(test_packed_fd)
{
	static const char *const inval = "org.varlink.service.InvalidParameter";
	static const int sealed = F_SEAL_SHRINK | F_SEAL_WRITE;
	struct rdmamem_client *c = test_client(td.socket);
	char *desc = descriptor_of(65536, 3), prep[256], batch[256];
	uint64_t remote, region = region_of(c, 65536);
	const struct rdmamem_range ok[2] = { { 0, 0, 4096 }, { 4096, 8192, 4096 } };
	const struct rdmamem_range bad[2] = { { 0, 0, 4096 }, { 4096, 65536 - 4095, 4096 } };
	uint8_t one_over[sizeof(ok) + 1] = {}; /* a byte past whole ranges */
	struct rdmamem_range *many;
	int fds_before, fd, pipefd[2];
	char *reply = NULL;

	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	snprintf(prep, sizeof(prep),
		 "{\"region\":\"%" PRIu64 "\",\"remote\":\"%" PRIu64 "\",\"packed_fd\":0}", region,
		 remote);
	snprintf(batch, sizeof(batch),
		 "{\"batch\":{\"op\":\"write\",\"local\":{\"region\":\"%" PRIu64
		 "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed_fd\":0}}",
		 region, remote);
	fds_before = test_settled_fds(td.pid);

	/* Good: a plan of its two ranges; a batch up to the registration. */
	fd = ranges_fd(ok, sizeof(ok), sealed);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.PrepareTransfer", prep, &fd, 1, &reply, NULL,
				      NULL),
			 0);
	ck_assert_ptr_nonnull(strstr(reply, "plan"));
	free(reply);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Transfer", batch, &fd, 1, NULL, NULL, NULL),
			 -ENOLINK);
	close(fd);
	/* Bounds as for the other forms: the range by its index. */
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep,
			  ranges_fd(bad, sizeof(bad), sealed), "io.rdmamemd.OutOfRange", "range 1");
	/* Seals: a writable or shrinkable memfd could change under the checks. */
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep, ranges_fd(ok, sizeof(ok), 0),
			  inval, "'packed_fd'");
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep,
			  ranges_fd(ok, sizeof(ok), F_SEAL_SHRINK), inval, "'packed_fd'");
	assert_fd_refused(c, "io.rdmamemd.Transfer", batch, ranges_fd(ok, sizeof(ok), F_SEAL_WRITE),
			  inval, "'batch'");
	/* Size: whole ranges, at least one, at most what the call takes. */
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep,
			  ranges_fd(ok, sizeof(ok) - 1, sealed), inval, "'packed_fd'");
	memcpy(one_over, ok, sizeof(ok));
	assert_fd_refused(c, "io.rdmamemd.Transfer", batch,
			  ranges_fd(one_over, sizeof(one_over), sealed), inval, "'batch'");
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep, ranges_fd(ok, 0, sealed), inval,
			  "'packed_fd'");
	many = calloc(131073, sizeof(*many));
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep,
			  ranges_fd(many, 131073 * sizeof(*many), sealed), inval, "'packed_fd'");
	assert_fd_refused(c, "io.rdmamemd.Transfer", batch,
			  ranges_fd(many, 100001 * sizeof(*many), sealed), inval, "'batch'");
	free(many);
	/* Not a memfd. */
	ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
	close(pipefd[1]);
	assert_fd_refused(c, "io.rdmamemd.PrepareTransfer", prep, pipefd[0], inval, "'packed_fd'");
	/* One form at a time; the index names an fd the message carries. */
	fd = ranges_fd(ok, sizeof(ok), sealed);
	ck_assert_int_lt(rdmamem_call(c, "io.rdmamemd.PrepareTransfer", prep, NULL, 0, NULL, NULL,
				      NULL),
			 0);
	ck_assert_str_eq(rdmamem_client_error_name(c), inval);
	snprintf(prep, sizeof(prep),
		 "{\"region\":\"%" PRIu64 "\",\"remote\":\"%" PRIu64
		 "\",\"packed_fd\":0,\"packed\":\"AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA\"}",
		 region, remote);
	ck_assert_int_lt(rdmamem_call(c, "io.rdmamemd.PrepareTransfer", prep, &fd, 1, NULL, NULL,
				      NULL),
			 0);
	ck_assert_str_eq(rdmamem_client_error_name(c), inval);
	snprintf(batch, sizeof(batch),
		 "{\"batch\":{\"op\":\"write\",\"local\":{\"region\":\"%" PRIu64
		 "\"},\"remote\":{\"id\":\"%" PRIu64 "\"},\"packed_fd\":0,\"packed\":"
		 "\"AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA\"}}",
		 region, remote);
	assert_fd_refused(c, "io.rdmamemd.Transfer", batch, fd, inval, "'batch'");
	/* Every fd closed and every mapping gone once the calls ended. */
	ck_assert_int_eq(test_settled_fds(td.pid), fds_before);
	ck_assert_int_eq(test_memfd_maps(td.pid), 1); /* the region's own */
	free(desc);
	rdmamem_client_close(c);
}
END_TEST

/*
 * The library sends ranges as text below 1024 and in a memfd from 1024 on
 * (test_plan_ranges sees the form named in a refusal): either way a batch
 * past max-transfer-ops (1000 here) is refused, one within it gets as far
 * as the registration, and the daemon keeps no fd of it.
 */
START_TEST(test_packed_switch)
{
	static const char *const args[] = { "--max-transfer-ops", "1000", NULL };
	static const size_t counts[] = { 1001, 1023, 1024, 5000 };
	struct test_daemon small;
	struct rdmamem_client *c;
	struct rdmamem_range *r = calloc(5000, sizeof(*r));
	uint64_t remote, region, bytes;
	char *desc = descriptor_of(65536, 3);
	int fds;

	test_daemon_start(&small, args);
	c = test_client(small.socket);
	region = region_of(c, 65536);
	ck_assert_int_eq(rdmamem_remote_import(c, desc, &remote), 0);
	/* Settled: under valgrind the daemon may still be closing what the
	 * setup used when a plain count is taken. */
	fds = test_settled_fds(small.pid);
	for (size_t i = 0; i < 5000; i++)
		r[i] = (struct rdmamem_range){ i, i, 1 };
	for (size_t k = 0; k < ELEMENTSOF(counts); k++) {
		ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0,
							 remote, r, counts[k], NULL, &bytes),
				 -EINVAL);
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "'batch'"));
	}
	ck_assert_int_eq(rdmamem_transfer_ranges(c, RDMAMEM_TRANSFER_WRITE, region, 0, remote, r,
						 1000, NULL, &bytes),
			 -ENOLINK);
	ck_assert_int_eq(test_settled_fds(small.pid), fds);
	ck_assert_int_eq(test_memfd_maps(small.pid), 1);
	rdmamem_client_close(c);
	test_daemon_stop(&small);
	free(desc);
	free(r);
}
END_TEST

Suite *remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("host"), *rx = tcase_create("rxe");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_export_refusals);
	tcase_add_test(tc, test_list_links_none);
	tcase_add_test(tc, test_import_release);
	tcase_add_test(tc, test_cli_descriptor);
	tcase_add_test(tc, test_hostile_descriptors);
	tcase_add_test(tc, test_caps);
	tcase_add_test(tc, test_session_drop);
	tcase_add_test(tc, test_plan_ranges);
	tcase_add_test(tc, test_packed_forms);
	tcase_add_test(tc, test_packed_fd);
	tcase_add_test(tc, test_packed_switch);
	tcase_add_test(tc, test_notifications_none);
	suite_add_tcase(s, tc);
	tcase_set_tags(rx, "rdma");
	tcase_set_timeout(rx, 120);
	test_add_tagged(rx, "rdma", test_export_rdma);
	suite_add_tcase(s, rx);
	return s;
}
