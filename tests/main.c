/* SPDX-License-Identifier: BSD-3-Clause */
/* The one test runner: every suite, CK_RUN_SUITE/CK_RUN_CASE to narrow. */
#include <stdlib.h>

#include "testlib.h"

int main(void)
{
	SRunner *sr;
	int failed;

	/* tests/unit: in process, no daemon. */
	sr = srunner_create(frame_suite());
	srunner_add_suite(sr, json_suite());
	srunner_add_suite(sr, json_arena_suite());
	srunner_add_suite(sr, params_text_suite());
	srunner_add_suite(sr, varlink_suite());
	srunner_add_suite(sr, outq_suite());
	srunner_add_suite(sr, conn_suite());
	srunner_add_suite(sr, codec_suite());
	srunner_add_suite(sr, descriptor_suite());
	srunner_add_suite(sr, lock_suite());
	srunner_add_suite(sr, session_suite());
	srunner_add_suite(sr, rpc_deferred_suite());
	srunner_add_suite(sr, xfer_suite());
	srunner_add_suite(sr, lease_suite());
	srunner_add_suite(sr, mreg_suite());
	srunner_add_suite(sr, endpoint_suite());
	srunner_add_suite(sr, link_suite());
	srunner_add_suite(sr, notify_suite());
	srunner_add_suite(sr, notify_conn_suite());
	srunner_add_suite(sr, transfer_suite());
	srunner_add_suite(sr, paths_suite());
	srunner_add_suite(sr, idl_suite());
	srunner_add_suite(sr, region_unit_suite());
	srunner_add_suite(sr, tables_suite());
	srunner_add_suite(sr, cuda_suite());
	srunner_add_suite(sr, gpu_unit_suite());
	srunner_add_suite(sr, sockpath_suite());
	srunner_add_suite(sr, wr_plan_suite());
	srunner_add_suite(sr, window_suite());
	/* tests/e2e: real daemons over Varlink. */
	srunner_add_suite(sr, daemon_suite());
	srunner_add_suite(sr, lifecycle_suite());
	srunner_add_suite(sr, client_suite());
	srunner_add_suite(sr, async_suite());
	srunner_add_suite(sr, regions_suite());
	srunner_add_suite(sr, hostile_suite());
	srunner_add_suite(sr, faults_suite());
	srunner_add_suite(sr, cli_suite());
	srunner_add_suite(sr, rdma_suite());
	srunner_add_suite(sr, remote_suite());
	srunner_add_suite(sr, transfer_vm_suite());
	srunner_add_suite(sr, numa_vm_suite());
	srunner_add_suite(sr, gpu_suite());
	srunner_add_suite(sr, ops_suite());
	srunner_add_suite(sr, hosts_suite());

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	test_report_skipped();
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
