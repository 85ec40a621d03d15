/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one test runner: every suite, CK_RUN_SUITE/CK_RUN_CASE to narrow.
 * Each suite runs on its own, and says how it went as it ends (a line, and
 * its failures), so that a long run shows its progress; suites with no
 * case left by the filters (tags, CK_RUN_SUITE) say nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "daemon/core/log.h"
#include "testlib.h"

static const struct {
	const char *name; /* as suite_create() names it: the label of its line */
	Suite *(*make)(void);
} suites[] = {
	/* tests/unit: in process, no daemon. */
	{ "frame", frame_suite },
	{ "json", json_suite },
	{ "json_arena", json_arena_suite },
	{ "params_text", params_text_suite },
	{ "varlink", varlink_suite },
	{ "outq", outq_suite },
	{ "conn", conn_suite },
	{ "codec", codec_suite },
	{ "descriptor", descriptor_suite },
	{ "lock", lock_suite },
	{ "session", session_suite },
	{ "deferred", rpc_deferred_suite },
	{ "xfer", xfer_suite },
	{ "lease", lease_suite },
	{ "mreg", mreg_suite },
	{ "endpoint", endpoint_suite },
	{ "link", link_suite },
	{ "notify", notify_suite },
	{ "notify_conn", notify_conn_suite },
	{ "transfer", transfer_suite },
	{ "paths", paths_suite },
	{ "idl", idl_suite },
	{ "region", region_unit_suite },
	{ "keep", keep_suite },
	{ "fdstore", fdstore_suite },
	{ "tables", tables_suite },
	{ "cuda", cuda_suite },
	{ "gpu_unit", gpu_unit_suite },
	{ "sockpath", sockpath_suite },
	{ "loop_poll", loop_poll_suite },
	{ "wr_plan", wr_plan_suite },
	{ "window", window_suite },
	{ "metrics_text", metrics_text_suite },
	/* tests/e2e: real daemons over Varlink. */
	{ "daemon", daemon_suite },
	{ "lifecycle", lifecycle_suite },
	{ "client", client_suite },
	{ "async", async_suite },
	{ "regions", regions_suite },
	{ "hostile", hostile_suite },
	{ "faults", faults_suite },
	{ "cli", cli_suite },
	{ "metrics", metrics_suite },
	{ "rdma", rdma_suite },
	{ "remote", remote_suite },
	{ "transfer-vm", transfer_vm_suite },
	{ "numa-vm", numa_vm_suite },
	{ "gpu", gpu_suite },
	{ "ops", ops_suite },
	{ "hosts", hosts_suite },
};

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	int run = 0, failed = 0, ran_suites = 0, level;
	double t0 = now_sec();

	test_run_dir();
	/* The daemon's modules in this process (tests/unit) log as test daemons
	 * do: warnings and errors, unless RDMAMEM_TEST_LOG asks for more. */
	level = log_level_from_string(getenv("RDMAMEM_TEST_LOG") ?: "warning");
	log_set_max_level(level < 0 ? LOG_WARNING : level);

	for (size_t i = 0; i < ELEMENTSOF(suites); i++) {
		SRunner *sr = srunner_create(suites[i].make());
		double t = now_sec();

		srunner_run_all(sr, CK_SILENT);
		if (srunner_ntests_run(sr) > 0) {
			printf("[%2zu/%zu] %s, %.1f s: ", i + 1, ELEMENTSOF(suites), suites[i].name,
			       now_sec() - t);
			fflush(stdout);
			srunner_print(sr, CK_ENV);
			run += srunner_ntests_run(sr);
			failed += srunner_ntests_failed(sr);
			ran_suites++;
		}
		srunner_free(sr);
	}
	printf("%s: %d checks in %d suites, %d failed, %.0f s\n", failed ? "FAILED" : "Passed", run,
	       ran_suites, failed, now_sec() - t0);
	test_report_skipped();
	test_run_dir_remove();
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
