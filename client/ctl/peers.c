/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl peers: remote daemons, from the links and the connections. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "proto/json.h"
#include "util/macro.h"
#include "ctl/ctl.h"

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
		table_empty("remote daemons", "no links opened, none connected");
	else
		printf("Peers by address (a daemon reached over several NICs shows once per "
		       "address)\n");
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(reply, "peers")) {
		char in[32], out[32], user[64];

		format_bytes(get_u64(p, "bytes_in"), in, sizeof(in));
		format_bytes(get_u64(p, "bytes_out"), out, sizeof(out));
		printf("peer %s\n", get_string(p, "address"));
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(p, "links"))
			printf("  link %-4s %-10s %-8s uid %-16s -> %s%s%s\n", get_string(l, "id"),
			       get_string(l, "state"), get_string(l, "device"),
			       user_of(get_number(l, "uid"), user, sizeof(user)),
			       get_string(l, "endpoint"),
			       cJSON_GetObjectItemCaseSensitive(l, "reason") ? ": " : "",
			       cJSON_GetObjectItemCaseSensitive(l, "reason") ?
				       get_string(l, "reason") :
				       "");
		cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "connections"))
			printf("  from %-20s %-8s uid %-16s export %s\n", get_string(c, "peer"),
			       get_string(c, "device"),
			       user_of(get_number(c, "uid"), user, sizeof(user)),
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

int verb_peers(struct rdmamem_client *c, char *const *args)
{
	_cleanup_json_ cJSON *links = NULL, *conns = NULL, *reply = NULL;
	cJSON *peers;
	int r;

	(void)args;
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
	annotate_ids(reply);
	if (arg_json)
		return print_json(reply);
	show_peers(reply);
	return 0;
}
