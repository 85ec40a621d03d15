/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: the text view of each reply. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "ctl/ctl.h"

void show_status(const cJSON *reply)
{
	char up[64], pinned[64], input[64], output[64];

	format_duration(get_u64(reply, "uptime_msec"), up, sizeof(up));
	format_bytes(get_u64(reply, "pinned_bytes"), pinned, sizeof(pinned));
	format_bytes(get_u64(reply, "input_bytes"), input, sizeof(input));
	format_bytes(get_u64(reply, "output_bytes"), output, sizeof(output));
	printf("rdmamemd %s (pid %.0f), up %s\n", get_string(reply, "version"),
	       get_number(reply, "pid"), up);
	printf("  %-14s %s\n", "socket:", get_string(reply, "socket"));
	printf("  %-14s %.0f\n", "clients:", get_number(reply, "clients"));
	printf("  %-14s %.0f\n", "regions:", get_number(reply, "regions"));
	printf("  %-14s %s\n", "pinned:", pinned);
	printf("  %-14s %s\n", "input held:", input);
	printf("  %-14s %s\n", "output held:", output);
	printf("  %-14s %.0f\n", "devices:", get_number(reply, "devices"));
}

void show_ping(const cJSON *reply)
{
	(void)reply;
	printf("rdmamemd at %s answers\n", arg_socket);
}

void show_metrics(const cJSON *reply)
{
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(reply, "text");

	if (cJSON_IsString(text))
		fputs(text->valuestring, stdout);
}

static const char *lock_summary(const cJSON *r, char *buf, size_t size)
{
	const cJSON *lock = cJSON_GetObjectItemCaseSensitive(r, "lock");
	const cJSON *leases = cJSON_GetObjectItemCaseSensitive(r, "leases");

	snprintf(buf, size, "%s %.0f/%.0f", get_string(lock, "state"), get_number(leases, "held"),
		 get_number(leases, "waiting"));
	return buf;
}

static const char *location_of(const cJSON *r, char *buf, size_t size)
{
	const cJSON *loc = cJSON_GetObjectItemCaseSensitive(r, "location");
	double node = get_number(loc, "numa_node");

	if (node >= 0)
		snprintf(buf, size, "%s:%.0f", get_string(loc, "type"), node);
	else
		snprintf(buf, size, "%s", get_string(loc, "type"));
	return buf;
}

void show_regions(const cJSON *reply)
{
	cJSON *list, *reg;

	list = cJSON_GetObjectItemCaseSensitive(reply, "regions");
	if (!cJSON_GetArraySize(list)) {
		table_empty("regions", NULL);
		return;
	}
	printf("%s%-8s %-16s %-22s %10s  %-8s %-18s %s%s\n", color(COLOR_BOLD), "REGION", "USER",
	       "PROCESS", "SIZE", "WHERE", "LOCK HELD/WAIT", "REGISTRATIONS", color(COLOR_OFF));
	cJSON_ArrayForEach(reg, list) {
		const cJSON *owner = cJSON_GetObjectItemCaseSensitive(reg, "owner");
		const cJSON *regs = cJSON_GetObjectItemCaseSensitive(reg, "registrations");
		char size[32], lock[64], loc[32], user[64], proc[64], failed[32] = "";
		const cJSON *m;
		int n = 0;

		cJSON_ArrayForEach(m, regs)
			n += strcmp(get_string(m, "state"), "failed") == 0;
		if (n)
			snprintf(failed, sizeof(failed), " (%s%d failed%s)", color(COLOR_RED), n,
				 color(COLOR_OFF));
		format_bytes(get_u64(reg, "size"), size, sizeof(size));
		/* Kept from before a restart: no process holds it yet. */
		if (cJSON_HasObjectItem(reg, "reclaim_in_msec"))
			snprintf(proc, sizeof(proc), "(reclaim in %" PRIu64 " s)",
				 (get_u64(reg, "reclaim_in_msec") + 999) / 1000);
		else
			process_of(get_number(owner, "pid"), proc, sizeof(proc));
		printf("%-8s %-16s %-22s %10s  %-8s %-18s %d%s\n", get_string(reg, "region"),
		       user_of(get_number(owner, "uid"), user, sizeof(user)), proc, size,
		       location_of(reg, loc, sizeof(loc)), lock_summary(reg, lock, sizeof(lock)),
		       cJSON_GetArraySize(regs), failed);
	}
	table_count(cJSON_GetArraySize(list), "region", "regions");
}

/* GetRegion's parameters from the id on the command line. */
int region_params(char *const *args, char **ret)
{
	const char *arg = args[0];
	cJSON *params;
	uint64_t id;

	if (!arg || json_parse_u64(arg, &id) < 0) {
		fprintf(stderr,
			"rdmamemctl: 'region' wants a region id, as 'regions' lists them\n");
		return -EUSAGE;
	}
	params = cJSON_CreateObject();
	if (!params || json_add_u64(params, "region", id) < 0) {
		cJSON_Delete(params);
		return -ENOMEM;
	}
	*ret = cJSON_PrintUnformatted(params);
	cJSON_Delete(params);
	return *ret ? 0 : -ENOMEM;
}

/* A descriptor is parsed by the daemon (ImportRemote): the handle this
 * connection gets dies with it when rdmamemctl exits. */
int descriptor_params(char *const *args, char **ret)
{
	const char *arg = args[0];
	cJSON *params;

	if (!arg || !*arg) {
		fprintf(stderr, "rdmamemctl: 'descriptor' wants a descriptor (rdmamem1....)\n");
		return -EUSAGE;
	}
	params = cJSON_CreateObject();
	if (!params || !cJSON_AddStringToObject(params, "descriptor", arg)) {
		cJSON_Delete(params);
		return -ENOMEM;
	}
	*ret = cJSON_PrintUnformatted(params);
	cJSON_Delete(params);
	return *ret ? 0 : -ENOMEM;
}

void show_descriptor(const cJSON *reply)
{
	const cJSON *item;
	char size[32];

	format_bytes(get_u64(reply, "length"), size, sizeof(size));
	printf("export %s of a region of %s (%" PRIu64 " bytes)\n", get_string(reply, "export"),
	       size, get_u64(reply, "length"));
	printf("  %-15s", "access:");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "access"))
		printf(" %s", cJSON_IsString(item) ? item->valuestring : "?");
	printf("\n");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "endpoints"))
		printf("  %-15s %s\n", "endpoint:", cJSON_IsString(item) ? item->valuestring : "?");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "devices"))
		printf("  %-15s %s port %.0f gid %s addr 0x%" PRIx64 " rkey 0x%" PRIx64 "\n",
		       "device:", get_string(item, "name"), get_number(item, "port"),
		       get_string(item, "gid"), get_u64(item, "addr"), get_u64(item, "rkey"));
}

/*
 * A region's registrations, one line each: the keys of one in force, the
 * cause of a failure and how to have it tried again (a failure is recorded
 * and not retried until root says so).
 */
static void show_registrations(const cJSON *reply)
{
	const cJSON *regs = cJSON_GetObjectItemCaseSensitive(reply, "registrations"), *m;

	if (!cJSON_GetArraySize(regs))
		printf("  %-15s none\n", "registrations:");
	cJSON_ArrayForEach(m, regs) {
		const char *state = get_string(m, "state");
		char len[32];

		printf("  %-15s %s %s%s%s", "registration:", get_string(m, "device"),
		       color_of_status(state), state, color(COLOR_OFF));
		if (strcmp(state, "registered") == 0) {
			format_bytes(get_u64(m, "length"), len, sizeof(len));
			printf(" (%s, %s): lkey 0x%" PRIx64 " rkey 0x%" PRIx64 " addr 0x%" PRIx64
			       ", %s\n",
			       get_string(m, "backend"), get_string(m, "via"), get_u64(m, "lkey"),
			       get_u64(m, "rkey"), get_u64(m, "addr"), len);
		} else if (strcmp(state, "failed") == 0) {
			printf(": %s (errno %.0f)\n", get_string(m, "error"),
			       get_number(m, "errno"));
			printf("  %-15s → fix the cause, then as root: rdmamemctl retry %s %s\n",
			       "", get_string(reply, "region"), get_string(m, "device"));
		} else {
			printf("\n");
		}
	}
}

void show_region(const cJSON *reply)
{
	const cJSON *owner, *src, *item;
	char buf[128], size[32], offset[32], file_size[32], user[64], group[64], proc[64];

	owner = cJSON_GetObjectItemCaseSensitive(reply, "owner");
	src = cJSON_GetObjectItemCaseSensitive(reply, "source");
	format_bytes(get_u64(reply, "size"), size, sizeof(size));
	printf("region %s\n", get_string(reply, "region"));
	printf("  %-15s %s (%" PRIu64 " bytes)%s\n", "size:", size, get_u64(reply, "size"),
	       get_bool(reply, "writable") ? "" : ", read-only");
	printf("  %-15s uid %s gid %s pid %s\n",
	       "owner:", user_of(get_number(owner, "uid"), user, sizeof(user)),
	       group_of(get_number(owner, "gid"), group, sizeof(group)),
	       process_of(get_number(owner, "pid"), proc, sizeof(proc)));
	if (cJSON_HasObjectItem(reply, "reclaim_in_msec"))
		printf("  %-15s kept from before a restart: released in %" PRIu64
		       " s unless its owner reclaims it\n",
		       "reclaim:", (get_u64(reply, "reclaim_in_msec") + 999) / 1000);
	printf("  %-15s %s\n", "location:", location_of(reply, buf, sizeof(buf)));
	format_bytes(get_u64(src, "offset"), offset, sizeof(offset));
	format_bytes(get_u64(src, "file_size"), file_size, sizeof(file_size));
	printf("  %-15s %s at offset %s of %s, seals:", "source:", get_string(src, "type"), offset,
	       file_size);
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(src, "seals"))
		printf(" %s", cJSON_IsString(item) ? item->valuestring : "?");
	printf("\n  %-15s", "access:");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "access"))
		printf(" %s", cJSON_IsString(item) ? item->valuestring : "?");
	printf("\n  %-15s %s\n", "lock:", lock_summary(reply, buf, sizeof(buf)));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "lease_list"))
		printf("  %-15s %s %s %s by pid %s\n", "lease:", get_string(item, "lease"),
		       get_string(item, "mode"), get_string(item, "state"),
		       process_of(get_number(item, "pid"), proc, sizeof(proc)));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "shares")) {
		double uid = get_number(item, "uid");

		printf("  %-15s %s %s%s\n", "shared with:", uid >= 0 ? "uid" : "gid",
		       uid >= 0 ? user_of(uid, user, sizeof(user)) :
				  group_of(get_number(item, "gid"), group, sizeof(group)),
		       get_bool(item, "readonly") ? " (read-only)" : "");
	}
	show_registrations(reply);
}

void show_devices(const cJSON *reply)
{
	cJSON *dev, *port;

	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "devices")) == 0)
		table_empty("RDMA devices", "regions work; registrations on devices fail");
	cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(reply, "devices")) {
		char pinned[32];
		const cJSON *ev;

		format_bytes(get_u64(dev, "pinned_bytes"), pinned, sizeof(pinned));
		printf("%s%s%s (%s backend, node guid %s)%s%s%s\n", color(COLOR_BOLD),
		       get_string(dev, "name"), color(COLOR_OFF), get_string(dev, "backend"),
		       get_string(dev, "node_guid"), color(COLOR_RED),
		       get_bool(dev, "fatal") ? "  FATAL: takes no new registrations" : "",
		       color(COLOR_OFF));
		printf("  %-15s %" PRIu64 " (%s pinned)\n", "MRs:", get_u64(dev, "mrs"), pinned);
		printf("  %-15s %.0f\n", "domains:", get_number(dev, "protection_domains"));
		printf("  %-15s %.0f\n", "connections:", get_number(dev, "connections"));
		cJSON_ArrayForEach(port, cJSON_GetObjectItemCaseSensitive(dev, "ports")) {
			const cJSON *gid;

			printf("  port %.0f:        %s%s%s, %s, MTU %.0f, LID %.0f\n",
			       get_number(port, "port"), color_of_status(get_string(port, "state")),
			       get_string(port, "state"), color(COLOR_OFF),
			       get_string(port, "link_layer"), get_number(port, "mtu"),
			       get_number(port, "lid"));
			cJSON_ArrayForEach(gid, cJSON_GetObjectItemCaseSensitive(port, "gids"))
				printf("    gid %-3.0f %-8s %s\n", get_number(gid, "index"),
				       get_string(gid, "type"), get_string(gid, "gid"));
		}
		cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(dev, "events"))
			printf("  %-15s %s (%" PRIu64 " ms ago)\n",
			       "event:", get_string(ev, "event"), get_u64(ev, "age_msec"));
	}
	printf("%" PRIu64 " RDMA connections rejected\n", get_u64(reply, "rejected_connections"));
}

void show_connections(const cJSON *reply)
{
	cJSON *list, *item;

	list = cJSON_GetObjectItemCaseSensitive(reply, "connections");
	if (!cJSON_GetArraySize(list)) {
		table_empty("connections", NULL);
		return;
	}
	printf("%s%-6s %-10s %-10s %-16s %-8s %-12s %s%s\n", color(COLOR_BOLD), "ID", "KIND",
	       "DEVICE", "USER", "QPN", "STATE", "PEER", color(COLOR_OFF));
	cJSON_ArrayForEach(item, list) {
		const char *state = get_bool(item, "established") ? "established" : "connecting";
		char user[64];

		printf("%-6s %-10s %-10s %-16s %-8.0f %s%-12s%s %s\n", get_string(item, "id"),
		       get_string(item, "kind"), get_string(item, "device"),
		       user_of(get_number(item, "uid"), user, sizeof(user)),
		       get_number(item, "qpn"), color_of_status(state), state, color(COLOR_OFF),
		       get_string(item, "peer"));
	}
	table_count(cJSON_GetArraySize(list), "connection", "connections");
}

/* One line per other GPU: can this one reach it, how fast a link, how the
 * daemon copies between them and how often it did. */
static void show_gpu_peers(const cJSON *g)
{
	cJSON *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(g, "peers")) {
		const cJSON *rank = cJSON_GetObjectItemCaseSensitive(p, "performance_rank");
		char label[32], link[48] = "";

		snprintf(label, sizeof(label), "peer gpu %.0f:", get_number(p, "ordinal"));
		if (cJSON_IsNumber(rank))
			snprintf(link, sizeof(link), ", link rank %.0f", rank->valuedouble);
		printf("  %-22s %s%s; copies %s (%s peer, %s staged so far)\n", label,
		       get_bool(p, "access") ? "peer access" : "no peer access", link,
		       get_string(p, "copy_path"), get_string(p, "peer_copies"),
		       get_string(p, "staged_copies"));
	}
}

void show_gpus(const cJSON *reply)
{
	cJSON *driver, *peer, *g;

	driver = cJSON_GetObjectItemCaseSensitive(reply, "driver");
	peer = cJSON_GetObjectItemCaseSensitive(reply, "peer_memory");
	if (get_bool(driver, "loaded"))
		printf("CUDA driver: loaded\n");
	else
		printf("CUDA driver: not loaded: %s\n", get_string(driver, "message"));
	if (get_bool(driver, "loaded") &&
	    !cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "gpus")))
		table_empty("GPUs", "the driver sees none");
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(reply, "gpus")) {
		char mem[32];

		format_bytes(get_u64(g, "memory"), mem, sizeof(mem));
		printf("gpu %.0f: %s (%s), %s\n", get_number(g, "ordinal"), get_string(g, "name"),
		       get_string(g, "pci_bus_id"), mem);
		printf("  %-22s %s\n", "dma-buf:",
		       get_bool(g, "dma_buf") ? "supported (ibv_reg_dmabuf_mr)" : "not supported");
		printf("  %-22s %s\n",
		       "VMM POSIX fd export:", get_bool(g, "vmm_posix_fd") ? "yes" : "no");
		printf("  %-22s %.0f regions, %.0f context references%s\n",
		       "in use:", get_number(g, "regions"), get_number(g, "primary_context_refs"),
		       get_bool(g, "context_kept") ? " (one kept between regions)" : "");
		show_gpu_peers(g);
	}
	printf("peer memory (%s): %s\n", get_string(peer, "module"),
	       get_bool(peer, "loaded") ? "loaded: ibv_reg_mr works on GPU addresses" :
					  "not loaded: GPU memory registers only through dma-buf");
}

void show_clients(const cJSON *reply)
{
	cJSON *list = cJSON_GetObjectItemCaseSensitive(reply, "clients"), *item;

	/* The list has this connection at least; a daemon may hide it one day. */
	if (!cJSON_GetArraySize(list)) {
		table_empty("clients", NULL);
		return;
	}
	printf("%s%-6s %-22s %-16s %-16s %8s %8s %7s %7s  %s%s\n", color(COLOR_BOLD), "ID",
	       "PROCESS", "USER", "GROUP", "CALLS", "REGIONS", "LEASES", "TOKENS", "STATE",
	       color(COLOR_OFF));
	cJSON_ArrayForEach(item, list) {
		char proc[64], user[64], group[64];

		printf("%-6s %-22s %-16s %-16s %8s %8.0f %7.0f %7.0f  %s%s\n",
		       get_string(item, "id"),
		       process_of(get_number(item, "pid"), proc, sizeof(proc)),
		       user_of(get_number(item, "uid"), user, sizeof(user)),
		       group_of(get_number(item, "gid"), group, sizeof(group)),
		       get_string(item, "calls"), get_number(item, "regions"),
		       get_number(item, "leases"), get_number(item, "tokens"),
		       get_string(item, "state"), get_bool(item, "self") ? " (this)" : "");
	}
	table_count(cJSON_GetArraySize(list), "client", "clients");
}

/* pinned_bytes as bytes, the others as counts. */
void show_limits(const cJSON *reply)
{
	cJSON *item;
	char user[64];

	printf("uid %s:\n", user_of(get_number(reply, "uid"), user, sizeof(user)));
	printf("%s  %-18s %12s %12s%s\n", color(COLOR_BOLD), "QUOTA", "USED", "LIMIT",
	       color(COLOR_OFF));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "limits")) {
		char used[32], limit[32];

		if (strcmp(get_string(item, "quota"), "pinned_bytes") == 0) {
			format_bytes(get_u64(item, "used"), used, sizeof(used));
			format_bytes(get_u64(item, "limit"), limit, sizeof(limit));
		} else {
			snprintf(used, sizeof(used), "%" PRIu64, get_u64(item, "used"));
			snprintf(limit, sizeof(limit), "%" PRIu64, get_u64(item, "limit"));
		}
		printf("  %-18s %12s %12s\n", get_string(item, "quota"), used, limit);
	}
	printf("  %-18s %12s %12.0f\n", "shares per region", "",
	       get_number(reply, "shares_per_region"));
}

static void print_counters(const char *title, const cJSON *o)
{
	const cJSON *item;

	printf("%s:\n", title);
	if (!o || !o->child)
		printf("  none\n");
	cJSON_ArrayForEach(item, o) {
		uint64_t v = 0;

		json_to_u64(item, &v);
		printf("  %-46s %" PRIu64 "\n", item->string, v);
	}
}

/* Transfers this daemon initiated, and what each device carried. */
static void show_transfer_stats(const cJSON *reply)
{
	const cJSON *dev;

	printf("transfers:\n");
	printf("  %-14s %" PRIu64 "\n  %-14s %" PRIu64 "\n  %-14s %" PRIu64 "\n  %-14s %" PRIu64
	       "\n  %-14s %" PRIu64 "\n",
	       "started:", get_u64(reply, "transfers_started"),
	       "done:", get_u64(reply, "transfers_done"),
	       "failed:", get_u64(reply, "transfers_failed"),
	       "cancelled:", get_u64(reply, "transfers_cancelled"),
	       "running:", get_u64(reply, "transfers_running"));
	cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(reply, "transfer_devices")) {
		char in[32], out[32];

		format_bytes(get_u64(dev, "bytes_in"), in, sizeof(in));
		format_bytes(get_u64(dev, "bytes_out"), out, sizeof(out));
		printf("  %-14s %s in (%" PRIu64 " reads), %s out (%" PRIu64 " writes)\n",
		       get_string(dev, "device"), in, get_u64(dev, "reads"), out,
		       get_u64(dev, "writes"));
	}
}

void show_stats(const cJSON *reply)
{
	char a[32], b[32], d[32], p[32], pk[32];

	format_bytes(get_u64(reply, "bytes_read"), a, sizeof(a));
	format_bytes(get_u64(reply, "bytes_written"), b, sizeof(b));
	format_bytes(get_u64(reply, "bytes_copied"), d, sizeof(d));
	format_bytes(get_u64(reply, "pinned_bytes"), p, sizeof(p));
	format_bytes(get_u64(reply, "pinned_bytes_peak"), pk, sizeof(pk));
	print_counters("calls", cJSON_GetObjectItemCaseSensitive(reply, "calls"));
	print_counters("errors", cJSON_GetObjectItemCaseSensitive(reply, "errors"));
	printf("bytes:\n  %-14s %s\n  %-14s %s\n  %-14s %s\n", "read:", a, "written:", b,
	       "copied:", d);
	printf("memory:\n  %-14s %s (peak %s)\n  %-14s %" PRIu64 "\n", "pinned:", p, pk,
	       "regions made:", get_u64(reply, "regions_registered"));
	printf("rdma:\n  %-14s %" PRIu64 "\n  %-14s %" PRIu64 "\n  %-14s %" PRIu64 "\n",
	       "registrations:", get_u64(reply, "rdma_registrations"),
	       "failures:", get_u64(reply, "rdma_registration_failures"),
	       "refused peers:", get_u64(reply, "rdma_rejected_connections"));
	show_transfer_stats(reply);
}
