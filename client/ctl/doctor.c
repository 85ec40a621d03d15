/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl doctor: what the daemon needs, checked, with what to fix. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmamem.h"
#include "ctl/ctl.h"

/*
 * One line per check, and what to do about one that is not PASS; the
 * verdict counts the FAILs (exit status 1) and the WARNs.
 */
void check(struct checks *ck, const char *status, const char *what, const char *hint,
	   const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (strcmp(status, "FAIL") == 0)
		ck->failed++;
	else if (strcmp(status, "WARN") == 0)
		ck->warned++;
	if (arg_json) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "check", what);
		cJSON_AddStringToObject(o, "status", status);
		cJSON_AddStringToObject(o, "detail", detail);
		if (hint)
			cJSON_AddStringToObject(o, "hint", hint);
		cJSON_AddItemToArray(ck->list, o);
		return;
	}
	printf("%s%-4s%s  %-18s %s\n", color_of_status(status), status, color(COLOR_OFF), what,
	       detail);
	if (hint && strcmp(status, "PASS") != 0)
		printf("      %-18s → %s\n", "", hint);
}

static void doctor_memlock(struct rdmamem_client *c, struct checks *ck)
{
	cJSON *st = NULL;
	const cJSON *lim;
	char limit[64];

	if (call(c, "io.rdmamemd.GetStatus", NULL, &st) < 0)
		return;
	lim = cJSON_GetObjectItemCaseSensitive(st, "memlock_limit");
	format_bytes(get_u64(st, "memlock_limit"), limit, sizeof(limit));
	if (cJSON_IsString(lim) && strcmp(lim->valuestring, "infinity") == 0)
		check(ck, "PASS", "locked memory", NULL, "RLIMIT_MEMLOCK of rdmamemd is unlimited");
	else if (get_bool(st, "cap_ipc_lock"))
		check(ck, "PASS", "locked memory", NULL,
		      "rdmamemd has CAP_IPC_LOCK (RLIMIT_MEMLOCK %s does not apply)", limit);
	else
		check(ck, "FAIL", "locked memory",
		      "give the service LimitMEMLOCK=infinity (or CAP_IPC_LOCK)",
		      "RLIMIT_MEMLOCK of rdmamemd is %s: RDMA registrations beyond it fail", limit);
	cJSON_Delete(st);
}

/* Every connection and every region of a memfd holds an fd in the daemon:
 * what one uid may have under the limits must fit. */
static void doctor_fds(struct rdmamem_client *c, struct checks *ck)
{
	cJSON *st = NULL;
	uint64_t need;
	double limit;

	if (call(c, "io.rdmamemd.GetStatus", NULL, &st) < 0)
		return;
	limit = get_number(st, "fd_limit");
	need = get_u64(st, "fds_needed");
	if (limit >= (double)need)
		check(ck, "PASS", "file descriptors", NULL,
		      "limit %.0f, the configured limits need at most %" PRIu64 " for one uid",
		      limit, need);
	else
		check(ck, "WARN", "file descriptors",
		      "raise LimitNOFILE= (the daemon takes the hard limit), or lower "
		      "max-regions-per-uid or max-connections",
		      "limit %.0f, but one uid at its caps needs %" PRIu64 " (connections, "
		      "one per region): clients would meet \"too many open files\" before "
		      "their quota",
		      limit, need);
	cJSON_Delete(st);
}

static void doctor_devices(struct rdmamem_client *c, struct checks *ck)
{
	cJSON *reply = NULL, *dev, *port;

	if (call(c, "io.rdmamemd.ListDevices", NULL, &reply) < 0)
		return;
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "devices")) == 0)
		check(ck, "WARN", "rdma devices",
		      "load the NIC's driver (or rdma_rxe over an Ethernet link to try Soft-RoCE) "
		      "and restart rdmamemd",
		      "none open: regions work, RDMA registrations fail");
	cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(reply, "devices")) {
		char what[80];

		snprintf(what, sizeof(what), "rdma %s", get_string(dev, "name"));
		if (get_bool(dev, "fatal"))
			check(ck, "FAIL", what, "repair the device, then restart rdmamemd",
			      "reported a fatal error: takes no registrations");
		cJSON_ArrayForEach(port, cJSON_GetObjectItemCaseSensitive(dev, "ports")) {
			bool active = strcmp(get_string(port, "state"), "ACTIVE") == 0;

			check(ck, active ? "PASS" : "FAIL", what,
			      active ? NULL :
				       "check the link (cable, switch, ip link) and the SM or "
				       "the netdev's address",
			      "port %.0f %s, %s, MTU %.0f, %d GIDs", get_number(port, "port"),
			      get_string(port, "state"), get_string(port, "link_layer"),
			      get_number(port, "mtu"),
			      cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(port, "gids")));
		}
	}
	cJSON_Delete(reply);
}

static void doctor_gpus(struct rdmamem_client *c, struct checks *ck)
{
	cJSON *reply = NULL, *driver, *g;
	bool peer;

	if (call(c, "io.rdmamemd.ListGpus", "{\"probe\":true}", &reply) < 0)
		return;
	driver = cJSON_GetObjectItemCaseSensitive(reply, "driver");
	peer = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(reply, "peer_memory"), "loaded"));
	if (!get_bool(driver, "loaded")) {
		check(ck, "SKIP", "cuda", "install the NVIDIA driver for GPU memory",
		      "no CUDA driver: %s", get_string(driver, "message"));
		cJSON_Delete(reply);
		return;
	}
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(reply, "gpus")) {
		bool dmabuf = get_bool(g, "dma_buf");
		char what[32];

		snprintf(what, sizeof(what), "gpu %.0f", get_number(g, "ordinal"));
		check(ck, dmabuf || peer ? "PASS" : "WARN", what,
		      "GPU memory registers with RDMA devices through dma-buf (kernel 5.12+, "
		      "open GPU kernel module) or nvidia_peermem: enable one",
		      "%s (%s): dma-buf %s, peer memory %s", get_string(g, "name"),
		      get_string(g, "pci_bus_id"), dmabuf ? "yes" : "no",
		      peer ? "yes (nvidia_peermem)" : "no");
	}
	cJSON_Delete(reply);
}

int verb_doctor(struct rdmamem_client *c, char *const *args)
{
	struct checks ck = {};
	cJSON *out = NULL;
	int r;

	(void)args;
	if (arg_json) {
		out = cJSON_CreateObject();
		ck.list = cJSON_AddArrayToObject(out, "checks");
	}
	r = ctl_connect(&c);
	if (r == 0) {
		check(&ck, "PASS", "daemon", NULL, "answers at %s", socket_path());
	} else {
		char why[512];

		connect_error(r, why, sizeof(why));
		check(&ck, "FAIL", "daemon",
		      r == -EACCES || r == -EPERM ?
			      "see 'access' below" :
			      "start it (systemctl start rdmamemd.socket, or rdmamemd), or point "
			      "--socket at it; the checks below that need it are left out",
		      "%s", why);
	}
	doctor_socket(&ck, c != NULL);
	doctor_units(&ck, c != NULL);
	if (c) {
		doctor_memlock(c, &ck);
		doctor_fds(c, &ck);
		doctor_devices(c, &ck);
		doctor_gpus(c, &ck);
		rdmamem_client_close(c);
	} else {
		doctor_memlock_here(&ck);
	}
	if (arg_json) {
		cJSON_AddBoolToObject(out, "ok", ck.failed == 0);
		cJSON_AddNumberToObject(out, "failed", ck.failed);
		cJSON_AddNumberToObject(out, "warnings", ck.warned);
		print_json(out);
		cJSON_Delete(out);
	} else if (ck.failed || ck.warned) {
		printf("%d failed, %d %s: see the hints above.\n", ck.failed, ck.warned,
		       ck.warned == 1 ? "warning" : "warnings");
	} else {
		printf("All good.\n");
	}
	return ck.failed ? -EIO : 0;
}
