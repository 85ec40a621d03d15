/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics text (daemon/rpc/metrics.c) from contexts the suite fills in:
 * the series a test daemon without devices or peers never shows (a device,
 * per-peer histograms, a name that needs escaping) in both formats, the
 * Prometheus one through promtool; histogram buckets cumulative and their
 * bounds in seconds; the uid filter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/mem/region.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/remote.h"
#include "daemon/rpc/metrics.h"
#include "daemon/rpc/rpc.h"
#include "tests/testlib.h"

static uv_loop_t loop;
static struct core core;
static struct account_table accounts;
static struct region_registry regions;
static struct rdma_ctx rdma;
static struct remote_ctx remote;
static struct device dev;
static struct remote_peer_stats peers[2];
static struct account accts[2];
static struct rpc_ctx ctx;

static void setup(void)
{
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	core = (struct core){ .loop = &loop, .accounts = &accounts };
	account_table_init(&accounts);
	accts[0] = (struct account){ .uid = 1000, .pinned_bytes = 4096, .n_regions = 1 };
	accts[1] = (struct account){ .uid = 1001, .pinned_bytes = 8192, .n_regions = 2 };
	ck_assert_int_eq(idmap_put(&accounts.by_uid, 1000, &accts[0]), 0);
	ck_assert_int_eq(idmap_put(&accounts.by_uid, 1001, &accts[1]), 0);
	regions = (struct region_registry){ .core = &core, .n_regions = 3, .pinned_bytes = 12288 };
	rdma = (struct rdma_ctx){ .core = &core };
	list_init(&rdma.devices);
	dev = (struct device){ .n_mrs = 2, .mr_bytes = 8192 };
	snprintf(dev.info.name, sizeof(dev.info.name), "odd\"dev\\");
	dev.xfer = (struct xfer_count){ .reads = 1, .bytes_in = 10, .writes = 2, .bytes_out = 20 };
	list_add_tail(&dev.link, &rdma.devices);
	remote = (struct remote_ctx){ .core = &core, .peers = peers, .n_peers = 2 };
	list_init(&remote.links.links);
	peers[0] =
		(struct remote_peer_stats){ .peer = "10.0.0.2:7471", .transfers = 2, .bytes = 100 };
	peers[1] = (struct remote_peer_stats){ .peer = "[fd00::3]:7471" };
	histogram_observe(&peers[0].latency, 40000);    /* 40 us */
	histogram_observe(&peers[0].latency, 20000000); /* 20 ms */
	histogram_observe(&core.stats.import_latency, 5000);
	histogram_observe(&core.stats.import_latency, 99000000000ULL); /* past every bound */
	ctx = (struct rpc_ctx){ .core = &core,
				.regions = &regions,
				.rdma = &rdma,
				.remote = &remote };
}

static void teardown(void)
{
	idmap_done(&accounts.by_uid);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static char *text_of(enum metrics_format f, uid_t only)
{
	char *text;
	size_t len;

	ck_assert_int_eq(metrics_text(&ctx, f, only, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	return text;
}

#define ck_has(text, s) ck_assert_msg(strstr(text, s), "no '%s' in:\n%s", s, text)

START_TEST(test_series)
{
	char *t = text_of(METRICS_OPENMETRICS, METRICS_ALL_UIDS);

	ck_has(t, "rdmamemd_pinned_bytes 12288\n");
	ck_has(t, "rdmamemd_uid_pinned_bytes{uid=\"1000\"} 4096\n");
	ck_has(t, "rdmamemd_uid_regions{uid=\"1001\"} 2\n");
	/* Escaped: a quote and a backslash. */
	ck_has(t, "rdmamemd_device_registered_bytes{device=\"odd\\\"dev\\\\\"} 8192\n");
	ck_has(t,
	       "rdmamemd_device_transfer_bytes_total{device=\"odd\\\"dev\\\\\",direction=\"out\"} 20\n");
	/* Cumulative buckets, bounds in seconds, the sum exact. */
	ck_has(t, "rdmamemd_peer_transfer_latency_seconds_bucket{peer=\"10.0.0.2:7471\","
		  "le=\"0.000025000\"} 0\n");
	ck_has(t, "rdmamemd_peer_transfer_latency_seconds_bucket{peer=\"10.0.0.2:7471\","
		  "le=\"0.000050000\"} 1\n");
	ck_has(t, "rdmamemd_peer_transfer_latency_seconds_bucket{peer=\"10.0.0.2:7471\","
		  "le=\"0.100000000\"} 2\n");
	ck_has(t, "rdmamemd_peer_transfer_latency_seconds_sum{peer=\"10.0.0.2:7471\"} "
		  "0.020040000\n");
	ck_has(t, "rdmamemd_peer_transfer_latency_seconds_count{peer=\"[fd00::3]:7471\"} 0\n");
	ck_has(t, "rdmamemd_peer_transfers_total{peer=\"10.0.0.2:7471\"} 2\n");
	ck_has(t, "rdmamemd_import_latency_seconds_bucket{le=\"10.000000000\"} 1\n");
	ck_has(t, "rdmamemd_import_latency_seconds_bucket{le=\"+Inf\"} 2\n");
	ck_has(t, "# TYPE rdmamemd_peer_transfers counter\n");
	ck_assert_str_eq(t + strlen(t) - 6, "# EOF\n");
	free(t);

	t = text_of(METRICS_PROMETHEUS, METRICS_ALL_UIDS);
	ck_has(t, "# TYPE rdmamemd_peer_transfers_total counter\n");
	ck_assert_ptr_null(strstr(t, "# EOF"));
	free(t);
}
END_TEST

/* Another uid's series are left out when asked. */
START_TEST(test_only_uid)
{
	char *t = text_of(METRICS_OPENMETRICS, 1001);

	ck_has(t, "rdmamemd_uid_pinned_bytes{uid=\"1001\"} 8192\n");
	ck_assert_ptr_null(strstr(t, "uid=\"1000\""));
	free(t);
}
END_TEST

/* Runs cmd (%s: a file holding text) through sh; its exit status, its
 * output in *out. */
static int run_on(const char *text, const char *cmd_fmt, char **out)
{
	char path[] = "/tmp/rdmamem-metrics-unit.XXXXXX", cmd[256], *err;
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int fd = mkstemp(path), rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), cmd_fmt, path);
	rc = test_run(argv, out, &err);
	unlink(path);
	free(err);
	return rc;
}

/* promtool lints every series above, labelled histograms included. */
START_TEST(test_promtool)
{
	char *t = text_of(METRICS_PROMETHEUS, METRICS_ALL_UIDS), *out;

	ck_assert_msg(run_on(t, "promtool check metrics < %s 2>&1", &out) == 0,
		      "promtool:\n%s\non:\n%s", out, t);
	free(out);
	free(t);
}
END_TEST

/* prometheus_client's OpenMetrics parser, which is strict (names, suffixes,
 * label syntax, bucket order, # EOF), takes the OpenMetrics text. */
START_TEST(test_openmetrics_parser)
{
	static const char cmd[] =
		"/usr/bin/python3 -c 'import sys\n"
		"from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n"
		"f = list(p(open(sys.argv[1]).read()))\n"
		"print(len(f))' %s 2>&1";
	char *t = text_of(METRICS_OPENMETRICS, METRICS_ALL_UIDS), *out;

	ck_assert_msg(run_on(t, cmd, &out) == 0, "parser:\n%s\non:\n%s", out, t);
	ck_assert_int_gt(atoi(out), 40);
	free(out);
	free(t);
}
END_TEST

Suite *metrics_text_suite(void)
{
	Suite *s = suite_create("metrics_text");
	TCase *tc = tcase_create("metrics_text");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_series);
	tcase_add_test(tc, test_only_uid);
	tcase_add_test(tc, test_promtool);
	tcase_add_test(tc, test_openmetrics_parser);
	suite_add_tcase(s, tc);
	return s;
}
