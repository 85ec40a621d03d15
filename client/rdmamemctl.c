/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: look at what rdmamemd is doing. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "proto/json.h"
#include "util/macro.h"
#include "util/sockpath.h"
#include "rdmamem.h"

static const char *arg_socket;
static bool arg_json;

static void help(void)
{
	printf("Usage: rdmamemctl [OPTIONS] COMMAND\n"
	       "\n"
	       "Query rdmamemd, the memory-registration daemon.\n"
	       "\n"
	       "Commands:\n"
	       "  status            daemon version, uptime, clients, regions, devices\n"
	       "  regions           the regions this user may see (all of them for root)\n"
	       "  region ID         one region: owner, source, lock, leases, shares\n"
	       "  devices           RDMA devices: ports, GIDs, MRs, pinned bytes, events\n"
	       "  connections       remote peers' queue pairs, by device and uid\n"
	       "  peers             remote daemons, by address: links to them and their\n"
	       "                    state, bytes and work requests each way, errors,\n"
	       "                    notifications\n"
	       "  gpus              CUDA driver, GPUs, dma-buf and peer-memory support\n"
	       "  clients           connected clients (yours; all of them for root)\n"
	       "  stats             calls by method, errors by name, bytes moved\n"
	       "  limits            your uid's limits and what it uses of each\n"
	       "  doctor            check what the daemon needs, say what to fix\n"
	       "  ping              check that the daemon answers\n"
	       "  descriptor DESC   what a region descriptor names (endpoints, devices, keys)\n"
	       "\n"
	       "Options:\n"
	       "  -s, --socket=PATH daemon socket (default: $RDMAMEM_SOCKET, the per-user\n"
	       "                    socket, then /run/rdmamemd/rdmamemd.sock)\n"
	       "  -j, --json        print JSON instead of a table\n"
	       "  -h, --help        show this help\n");
}

/* Prints a byte count the way people read them: 1.5 GiB. */
static void format_bytes(uint64_t v, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", v);
	else
		snprintf(buf, size, "%.1f %s", d, units[u]);
}

static void format_duration(uint64_t msec, char *buf, size_t size)
{
	uint64_t s = msec / 1000;

	if (s >= 86400)
		snprintf(buf, size, "%" PRIu64 "d %" PRIu64 "h", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, size, "%" PRIu64 "h %" PRIu64 "min", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, size, "%" PRIu64 "min %" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, size, "%" PRIu64 ".%03" PRIu64 "s", s, msec % 1000);
}

static const char *get_string(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(i) ? i->valuestring : "?";
}

static double get_number(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(i) ? i->valuedouble : -1;
}

static bool get_bool(const cJSON *o, const char *name)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static uint64_t get_u64(const cJSON *o, const char *name)
{
	uint64_t v = 0;

	json_to_u64(cJSON_GetObjectItemCaseSensitive(o, name), &v);
	return v;
}

/* Calls method (every page of it when paged) and hands back the parsed
 * reply; prints the error itself. */
static int call_paged(struct rdmamem_client *c, const char *method, const char *params, bool paged,
		      cJSON **ret)
{
	char *reply = NULL;
	int r;

	r = paged ? rdmamem_list(c, method, &reply) :
		    rdmamem_call(c, method, params, NULL, 0, &reply, NULL, NULL);
	if (r < 0) {
		const char *name = rdmamem_client_error_name(c);
		const char *msg = rdmamem_client_error_message(c);

		fprintf(stderr, "rdmamemctl: %s%s%s\n", name ? name : "", name ? ": " : "",
			msg ? msg : strerror(-r));
		free(reply);
		return r;
	}
	*ret = cJSON_Parse(reply);
	free(reply);
	if (!*ret) {
		fprintf(stderr, "rdmamemctl: the daemon's reply is not valid JSON\n");
		return -EPROTO;
	}
	return 0;
}

static int call(struct rdmamem_client *c, const char *method, const char *params, cJSON **ret)
{
	return call_paged(c, method, params, false, ret);
}

static int print_json(const cJSON *reply)
{
	char *text = cJSON_Print(reply);

	if (!text)
		return -ENOMEM;
	printf("%s\n", text);
	free(text);
	return 0;
}

static void show_status(const cJSON *reply)
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

static void show_ping(const cJSON *reply)
{
	(void)reply;
	printf("rdmamemd at %s answers\n", arg_socket);
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

static void show_regions(const cJSON *reply)
{
	cJSON *list, *reg;

	list = cJSON_GetObjectItemCaseSensitive(reply, "regions");
	printf("%-8s %-8s %-8s %10s  %-8s %-18s %s\n", "REGION", "UID", "PID", "SIZE", "WHERE",
	       "LOCK HELD/WAIT", "REGISTRATIONS");
	cJSON_ArrayForEach(reg, list) {
		const cJSON *owner = cJSON_GetObjectItemCaseSensitive(reg, "owner");
		char size[32], lock[64], loc[32];

		format_bytes(get_u64(reg, "size"), size, sizeof(size));
		printf("%-8s %-8.0f %-8.0f %10s  %-8s %-18s %d\n", get_string(reg, "region"),
		       get_number(owner, "uid"), get_number(owner, "pid"), size,
		       location_of(reg, loc, sizeof(loc)), lock_summary(reg, lock, sizeof(lock)),
		       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reg, "registrations")));
	}
	printf("%d regions\n", cJSON_GetArraySize(list));
}

/* GetRegion's parameters from the id on the command line. */
static int region_params(const char *arg, char **ret)
{
	cJSON *params;
	uint64_t id;

	if (!arg || json_parse_u64(arg, &id) < 0) {
		fprintf(stderr,
			"rdmamemctl: 'region' wants a region id, as 'regions' lists them\n");
		return -EINVAL;
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
static int descriptor_params(const char *arg, char **ret)
{
	cJSON *params;

	if (!arg || !*arg) {
		fprintf(stderr, "rdmamemctl: 'descriptor' wants a descriptor (rdmamem1....)\n");
		return -EINVAL;
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

static void show_descriptor(const cJSON *reply)
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

static void show_region(const cJSON *reply)
{
	const cJSON *owner, *src, *item;
	char buf[128], size[32];

	owner = cJSON_GetObjectItemCaseSensitive(reply, "owner");
	src = cJSON_GetObjectItemCaseSensitive(reply, "source");
	format_bytes(get_u64(reply, "size"), size, sizeof(size));
	printf("region %s\n", get_string(reply, "region"));
	printf("  %-15s %s (%" PRIu64 " bytes)%s\n", "size:", size, get_u64(reply, "size"),
	       get_bool(reply, "writable") ? "" : ", read-only");
	printf("  %-15s uid %.0f gid %.0f pid %.0f\n", "owner:", get_number(owner, "uid"),
	       get_number(owner, "gid"), get_number(owner, "pid"));
	printf("  %-15s %s\n", "location:", location_of(reply, buf, sizeof(buf)));
	printf("  %-15s %s at offset %" PRIu64 " of %" PRIu64 " bytes, seals:", "source:",
	       get_string(src, "type"), get_u64(src, "offset"), get_u64(src, "file_size"));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(src, "seals"))
		printf(" %s", cJSON_IsString(item) ? item->valuestring : "?");
	printf("\n  %-15s", "access:");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "access"))
		printf(" %s", cJSON_IsString(item) ? item->valuestring : "?");
	printf("\n  %-15s %s\n", "lock:", lock_summary(reply, buf, sizeof(buf)));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "lease_list"))
		printf("  %-15s %s %s %s by pid %.0f\n", "lease:", get_string(item, "lease"),
		       get_string(item, "mode"), get_string(item, "state"),
		       get_number(item, "pid"));
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "shares")) {
		double uid = get_number(item, "uid");

		printf("  %-15s %s %.0f%s\n", "shared with:", uid >= 0 ? "uid" : "gid",
		       uid >= 0 ? uid : get_number(item, "gid"),
		       get_bool(item, "readonly") ? " (read-only)" : "");
	}
	printf("  %-15s %d\n", "registrations:",
	       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "registrations")));
}

static void show_devices(const cJSON *reply)
{
	cJSON *dev, *port;

	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "devices")) == 0)
		printf("No RDMA devices: regions work; registrations on devices fail.\n");
	cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(reply, "devices")) {
		char pinned[32];
		const cJSON *ev;

		format_bytes(get_u64(dev, "pinned_bytes"), pinned, sizeof(pinned));
		printf("%s (%s backend, node guid %s)%s\n", get_string(dev, "name"),
		       get_string(dev, "backend"), get_string(dev, "node_guid"),
		       get_bool(dev, "fatal") ? "  FATAL: takes no new registrations" : "");
		printf("  %-15s %" PRIu64 " (%s pinned)\n", "MRs:", get_u64(dev, "mrs"), pinned);
		printf("  %-15s %.0f\n", "domains:", get_number(dev, "protection_domains"));
		printf("  %-15s %.0f\n", "connections:", get_number(dev, "connections"));
		cJSON_ArrayForEach(port, cJSON_GetObjectItemCaseSensitive(dev, "ports")) {
			const cJSON *gid;

			printf("  port %.0f:        %s, %s, MTU %.0f, LID %.0f\n",
			       get_number(port, "port"), get_string(port, "state"),
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

static void show_connections(const cJSON *reply)
{
	cJSON *item;

	printf("%-6s %-10s %-10s %-6s %-8s %-12s %s\n", "ID", "KIND", "DEVICE", "UID", "QPN",
	       "STATE", "PEER");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "connections"))
		printf("%-6s %-10s %-10s %-6.0f %-8.0f %-12s %s\n", get_string(item, "id"),
		       get_string(item, "kind"), get_string(item, "device"),
		       get_number(item, "uid"), get_number(item, "qpn"),
		       get_bool(item, "established") ? "established" : "connecting",
		       get_string(item, "peer"));
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

static void show_gpus(const cJSON *reply)
{
	cJSON *driver, *peer, *g;

	driver = cJSON_GetObjectItemCaseSensitive(reply, "driver");
	peer = cJSON_GetObjectItemCaseSensitive(reply, "peer_memory");
	if (get_bool(driver, "loaded"))
		printf("CUDA driver: loaded\n");
	else
		printf("CUDA driver: not loaded: %s\n", get_string(driver, "message"));
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(reply, "gpus")) {
		char mem[32];

		format_bytes(get_u64(g, "memory"), mem, sizeof(mem));
		printf("gpu %.0f: %s (%s), %s\n", get_number(g, "ordinal"), get_string(g, "name"),
		       get_string(g, "pci_bus_id"), mem);
		printf("  %-22s %s\n", "dma-buf:",
		       get_bool(g, "dma_buf") ? "supported (ibv_reg_dmabuf_mr)" : "not supported");
		printf("  %-22s %s\n",
		       "VMM POSIX fd export:", get_bool(g, "vmm_posix_fd") ? "yes" : "no");
		printf("  %-22s %.0f regions, %.0f context references\n",
		       "in use:", get_number(g, "regions"), get_number(g, "primary_context_refs"));
		show_gpu_peers(g);
	}
	printf("peer memory (%s): %s\n", get_string(peer, "module"),
	       get_bool(peer, "loaded") ? "loaded: ibv_reg_mr works on GPU addresses" :
					  "not loaded: GPU memory registers only through dma-buf");
}

static void show_clients(const cJSON *reply)
{
	cJSON *item;

	printf("%-6s %-8s %-6s %-6s %8s %8s %7s %7s  %s\n", "ID", "PID", "UID", "GID", "CALLS",
	       "REGIONS", "LEASES", "TOKENS", "STATE");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "clients"))
		printf("%-6s %-8.0f %-6.0f %-6.0f %8s %8.0f %7.0f %7.0f  %s%s\n",
		       get_string(item, "id"), get_number(item, "pid"), get_number(item, "uid"),
		       get_number(item, "gid"), get_string(item, "calls"),
		       get_number(item, "regions"), get_number(item, "leases"),
		       get_number(item, "tokens"), get_string(item, "state"),
		       get_bool(item, "self") ? " (this)" : "");
}

/* pinned_bytes as bytes, the others as counts. */
static void show_limits(const cJSON *reply)
{
	cJSON *item;

	printf("uid %.0f:\n", get_number(reply, "uid"));
	printf("  %-18s %12s %12s\n", "QUOTA", "USED", "LIMIT");
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
		printf("  (none)\n");
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

static void show_stats(const cJSON *reply)
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

/*
 * peers: the remote daemons this one talks to, by address: the links it
 * opened to their endpoints (ListLinks), and the rdmacm connections they
 * opened to it (ListConnections: where their notifications arrive).
 */
static const char *const peer_link_sums[] = { "reads",     "bytes_in", "writes",
					      "bytes_out", "flushed",  "notifications_sent" };
static const char *const peer_conn_sums[] = { "notifications_received", "notifications_queued",
					      "notifications_dropped" };

/* "10.0.0.2:7471" → "10.0.0.2"; "[fe80::1]:7471" → "[fe80::1]"; an
 * IPv4-mapped "[::ffff:10.0.0.2]:7471" → "10.0.0.2" (a daemon before its
 * addresses were written unmapped), so that a host is one peer whichever
 * socket saw it. */
static void peer_host(const char *addr, char *buf, size_t size)
{
	static const char mapped[] = "[::ffff:";
	const char *colon = strrchr(addr, ':');
	size_t n = colon ? (size_t)(colon - addr) : strlen(addr);

	if (n > sizeof(mapped) && strncasecmp(addr, mapped, sizeof(mapped) - 1) == 0 &&
	    addr[n - 1] == ']' && strchr(addr + sizeof(mapped) - 1, '.')) {
		addr += sizeof(mapped) - 1;
		n -= sizeof(mapped);
	}
	snprintf(buf, size, "%.*s", (int)MIN(n, size - 1), addr);
}

static cJSON *peer_get(cJSON *peers, const char *addr)
{
	char host[80];
	cJSON *p;

	peer_host(addr, host, sizeof(host));
	cJSON_ArrayForEach(p, peers)
		if (strcmp(get_string(p, "address"), host) == 0)
			return p;
	p = cJSON_CreateObject();
	if (!p || !cJSON_AddStringToObject(p, "address", host) ||
	    !cJSON_AddArrayToObject(p, "links") || !cJSON_AddArrayToObject(p, "connections") ||
	    json_add_u64(p, "errors", 0) < 0) {
		cJSON_Delete(p);
		return NULL;
	}
	for (size_t i = 0; i < ELEMENTSOF(peer_link_sums); i++)
		json_add_u64(p, peer_link_sums[i], 0);
	for (size_t i = 0; i < ELEMENTSOF(peer_conn_sums); i++)
		json_add_u64(p, peer_conn_sums[i], 0);
	cJSON_AddItemToArray(peers, p);
	return p;
}

/* p[name] += item[name], decimal strings both. */
static void peer_sum(cJSON *p, const cJSON *item, const char *name)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, get_u64(p, name) + get_u64(item, name));
	cJSON_ReplaceItemInObjectCaseSensitive(p, name, cJSON_CreateString(text));
}

static int peers_group(const cJSON *links, const cJSON *conns, cJSON *peers)
{
	const cJSON *l, *c, *e;

	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(links, "links")) {
		cJSON *p = peer_get(peers, get_string(l, "endpoint"));
		char text[24];
		uint64_t errors;

		if (!p)
			return -ENOMEM;
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(p, "links"),
				     cJSON_Duplicate(l, true));
		for (size_t i = 0; i < ELEMENTSOF(peer_link_sums); i++)
			peer_sum(p, l, peer_link_sums[i]);
		errors = get_u64(p, "errors");
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(l, "errors")) {
			uint64_t v = 0;

			json_to_u64(e, &v);
			errors += v;
		}
		snprintf(text, sizeof(text), "%" PRIu64, errors);
		cJSON_ReplaceItemInObjectCaseSensitive(p, "errors", cJSON_CreateString(text));
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(conns, "connections")) {
		cJSON *p;

		/* ConnectQueuePair peers are clients, not daemons. */
		if (strcmp(get_string(c, "kind"), "rdmacm") != 0)
			continue;
		p = peer_get(peers, get_string(c, "peer"));
		if (!p)
			return -ENOMEM;
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(p, "connections"),
				     cJSON_Duplicate(c, true));
		for (size_t i = 0; i < ELEMENTSOF(peer_conn_sums); i++)
			peer_sum(p, c, peer_conn_sums[i]);
	}
	return 0;
}

static void show_peers(const cJSON *reply)
{
	const cJSON *p, *l, *c;

	if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "peers")))
		printf("No remote daemons: no links opened, none connected\n");
	else
		printf("Peers by address (a daemon reached over several NICs shows once per "
		       "address)\n");
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(reply, "peers")) {
		char in[32], out[32];

		format_bytes(get_u64(p, "bytes_in"), in, sizeof(in));
		format_bytes(get_u64(p, "bytes_out"), out, sizeof(out));
		printf("peer %s\n", get_string(p, "address"));
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(p, "links"))
			printf("  link %-4s %-10s %-8s uid %-6.0f -> %s%s%s\n", get_string(l, "id"),
			       get_string(l, "state"), get_string(l, "device"),
			       get_number(l, "uid"), get_string(l, "endpoint"),
			       cJSON_GetObjectItemCaseSensitive(l, "reason") ? ": " : "",
			       cJSON_GetObjectItemCaseSensitive(l, "reason") ?
				       get_string(l, "reason") :
				       "");
		cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "connections"))
			printf("  from %-20s %-8s uid %-6.0f export %s\n", get_string(c, "peer"),
			       get_string(c, "device"), get_number(c, "uid"),
			       get_string(c, "export"));
		printf("  %-16s %s (%" PRIu64 " reads)\n", "in:", in, get_u64(p, "reads"));
		printf("  %-16s %s (%" PRIu64 " writes)\n", "out:", out, get_u64(p, "writes"));
		printf("  %-16s %" PRIu64 " (%" PRIu64 " work requests flushed)\n",
		       "errors:", get_u64(p, "errors"), get_u64(p, "flushed"));
		printf("  %-16s %" PRIu64 " sent; %" PRIu64 " received: %" PRIu64
		       " queued, %" PRIu64 " dropped\n",
		       "notifications:", get_u64(p, "notifications_sent"),
		       get_u64(p, "notifications_received"), get_u64(p, "notifications_queued"),
		       get_u64(p, "notifications_dropped"));
	}
}

static int verb_peers(struct rdmamem_client *c, const char *arg)
{
	_cleanup_json_ cJSON *links = NULL, *conns = NULL, *reply = NULL;
	cJSON *peers;
	int r;

	(void)arg;
	r = call_paged(c, "io.rdmamemd.ListLinks", NULL, true, &links);
	if (r < 0)
		return r;
	r = call_paged(c, "io.rdmamemd.ListConnections", NULL, true, &conns);
	if (r < 0)
		return r;
	reply = cJSON_CreateObject();
	/* Rows are grouped by the remote address (the link's endpoint host,
	 * the connection's source): said in the reply. */
	if (reply && !cJSON_AddStringToObject(reply, "grouped_by", "address"))
		return -ENOMEM;
	peers = reply ? cJSON_AddArrayToObject(reply, "peers") : NULL;
	if (!peers || peers_group(links, conns, peers) < 0)
		return -ENOMEM;
	if (arg_json)
		return print_json(reply);
	show_peers(reply);
	return 0;
}

/* doctor: one line per check, and what to do about a failing one. */
struct checks {
	cJSON *list; /* --json */
	int failed;
};

static void check(struct checks *ck, const char *status, const char *what, const char *hint,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void check(struct checks *ck, const char *status, const char *what, const char *hint,
		  const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (strcmp(status, "FAIL") == 0)
		ck->failed++;
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
	printf("%-4s  %-18s %s\n", status, what, detail);
	if (hint && strcmp(status, "PASS") != 0)
		printf("      %-18s → %s\n", "", hint);
}

static void doctor_memlock(struct rdmamem_client *c, struct checks *ck)
{
	cJSON *st = NULL;
	const cJSON *lim;

	if (call(c, "io.rdmamemd.GetStatus", NULL, &st) < 0)
		return;
	lim = cJSON_GetObjectItemCaseSensitive(st, "memlock_limit");
	if (cJSON_IsString(lim) && strcmp(lim->valuestring, "infinity") == 0)
		check(ck, "PASS", "locked memory", NULL, "RLIMIT_MEMLOCK of rdmamemd is unlimited");
	else if (get_bool(st, "cap_ipc_lock"))
		check(ck, "PASS", "locked memory", NULL,
		      "rdmamemd has CAP_IPC_LOCK (RLIMIT_MEMLOCK %s bytes does not apply)",
		      get_string(st, "memlock_limit"));
	else
		check(ck, "FAIL", "locked memory",
		      "give the service LimitMEMLOCK=infinity (or CAP_IPC_LOCK)",
		      "RLIMIT_MEMLOCK of rdmamemd is %s bytes: RDMA registrations beyond it fail",
		      get_string(st, "memlock_limit"));
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

static void doctor_socket(struct rdmamem_client *c, struct checks *ck)
{
	const char *path = rdmamem_client_socket_path(c);
	struct stat st;

	if (stat(path, &st) < 0) {
		check(ck, "WARN", "socket", NULL, "%s: %s", path, strerror(errno));
		return;
	}
	if (st.st_mode & 0007)
		check(ck, "WARN", "socket",
		      "limit it to a group (SocketMode=0660, SocketGroup=rdmamem) unless every "
		      "user should pin memory within the per-uid quotas",
		      "%s mode %04o: every user may connect", path, (unsigned)(st.st_mode & 07777));
	else
		check(ck, "PASS", "socket", NULL, "%s mode %04o, group %u", path,
		      (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid);
}

static int verb_doctor(struct rdmamem_client *c, const char *arg)
{
	struct checks ck = {};
	cJSON *out = NULL;

	(void)arg;
	if (arg_json) {
		out = cJSON_CreateObject();
		ck.list = cJSON_AddArrayToObject(out, "checks");
	}
	check(&ck, "PASS", "daemon", NULL, "answers at %s", rdmamem_client_socket_path(c));
	doctor_memlock(c, &ck);
	doctor_fds(c, &ck);
	doctor_devices(c, &ck);
	doctor_gpus(c, &ck);
	doctor_socket(c, &ck);
	if (arg_json) {
		cJSON_AddBoolToObject(out, "ok", ck.failed == 0);
		print_json(out);
		cJSON_Delete(out);
	} else {
		printf("%s\n",
		       ck.failed ? "Some checks failed: see the hints above." : "All good.");
	}
	return ck.failed ? -EIO : 0;
}

/*
 * A verb calls one method and shows its reply: as JSON with --json, else
 * as text through show. doctor calls several and runs on its own.
 */
struct verb {
	const char *name;
	const char *method;
	const char *params;                              /* fixed parameters */
	int (*make_params)(const char *arg, char **ret); /* from the argument */
	void (*show)(const cJSON *reply);
	int (*run)(struct rdmamem_client *c, const char *arg);
	bool takes_arg;
	bool paged; /* a listing: every page, shown as one */
};

static const struct verb verbs[] = {
	{ "clients", "io.rdmamemd.ListClients", .show = show_clients, .paged = true },
	{ "stats", "io.rdmamemd.GetStats", .show = show_stats },
	{ "limits", "io.rdmamemd.GetLimits", .show = show_limits },
	{ "doctor", .run = verb_doctor },
	/* probe: an operator asking may load the driver in the daemon. */
	{ "gpus", "io.rdmamemd.ListGpus", "{\"probe\":true}", .show = show_gpus },
	{ "devices", "io.rdmamemd.ListDevices", .show = show_devices },
	{ "connections", "io.rdmamemd.ListConnections", .show = show_connections, .paged = true },
	{ "peers", .run = verb_peers },
	{ "status", "io.rdmamemd.GetStatus", .show = show_status },
	{ "regions", "io.rdmamemd.ListRegions", .show = show_regions, .paged = true },
	{ "region", "io.rdmamemd.GetRegion", .make_params = region_params, .show = show_region,
	  .takes_arg = true },
	{ "ping", "io.rdmamemd.Ping", .show = show_ping },
	{ "descriptor", "io.rdmamemd.ImportRemote", .make_params = descriptor_params,
	  .show = show_descriptor, .takes_arg = true },
};

static int query(struct rdmamem_client *c, const struct verb *v, const char *arg)
{
	_cleanup_free_ char *params = NULL;
	cJSON *reply;
	int r;

	if (v->make_params) {
		r = v->make_params(arg, &params);
		if (r < 0)
			return r;
	}
	r = call_paged(c, v->method, params ?: v->params, v->paged, &reply);
	if (r < 0)
		return r;
	if (arg_json)
		r = print_json(reply);
	else
		v->show(reply);
	cJSON_Delete(reply);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct rdmamem_client *c = NULL;
	char path[108];
	const char *verb;
	int opt, r;

	while ((opt = getopt_long(argc, argv, "s:jh", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			arg_socket = optarg;
			break;
		case 'j':
			arg_json = true;
			break;
		case 'h':
			help();
			return EXIT_SUCCESS;
		default:
			return 2;
		}
	}
	verb = optind < argc ? argv[optind] : "status";

	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		const char *arg = optind + 1 < argc ? argv[optind + 1] : NULL;

		if (strcmp(verbs[i].name, verb) != 0)
			continue;
		if (optind + 1 + verbs[i].takes_arg < argc || (verbs[i].takes_arg && !arg)) {
			fprintf(stderr, "rdmamemctl: usage: rdmamemctl %s%s\n", verb,
				verbs[i].takes_arg ? " ID" : "");
			return 2;
		}
		if (!arg_socket && sockpath_client_default(path, sizeof(path)) == 0)
			arg_socket = path;
		r = rdmamem_client_connect(arg_socket, &c);
		if (r < 0) {
			bool absent = r == -ENOENT || r == -ECONNREFUSED;

			fprintf(stderr, "rdmamemctl: cannot connect to rdmamemd at '%s': %s%s\n",
				arg_socket ?: "the default socket", strerror(-r),
				absent ? " (is the daemon running?)" : "");
			return EXIT_FAILURE;
		}
		arg_socket = rdmamem_client_socket_path(c);
		r = verbs[i].run ? verbs[i].run(c, arg) : query(c, &verbs[i], arg);
		rdmamem_client_close(c);
		return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	fprintf(stderr, "rdmamemctl: unknown command '%s' (try --help)\n", verb);
	return 2;
}
