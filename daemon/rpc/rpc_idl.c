/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interfaces served and their IDL text, printed from the method tables
 * and the error table: what GetInterfaceDescription answers, and what
 * `make idl` writes to proto/ (rdmamemd --print-idl).
 */
#include <errno.h>
#include <string.h>

#include "proto/errors.h"
#include "proto/idl.h"
#include "proto/varlink.h"
#include "daemon/rpc/rpc.h"

/* Methods one interface may have: far more than ours has. */
#define INTERFACE_METHODS_MAX 128

const struct rpc_interface rpc_interfaces[] = {
	{ VARLINK_SERVICE_INTERFACE,
	  "The Varlink Service Interface is provided by every varlink service. It\n"
	  "describes the service and the interfaces it implements." },
	{ RDMAMEMD_INTERFACE,
	  "rdmamemd: a memory-registration broker for RDMA and GPU hosts.\n"
	  "\n"
	  "Clients hand the daemon buffers (sealed memfds, CUDA allocations) and get\n"
	  "regions that the daemon keeps alive and registers with RDMA devices.\n"
	  "\n"
	  "Conventions (see PROTOCOL.md):\n"
	  "- 64-bit quantities (addresses, sizes, offsets, ids, keys, byte counts)\n"
	  "  are decimal strings, because JSON numbers are doubles.\n"
	  "- File descriptors travel as SCM_RIGHTS on the message that uses them and\n"
	  "  are named by their index among that message's descriptors.\n"
	  "- Every error of io.rdmamemd carries a human-readable \"message\"; the\n"
	  "  errors of org.varlink.service carry only the parameter they declare, and\n"
	  "  the daemon logs the explanation (PROTOCOL.md, \"Errors\")." },
	{},
};

int rpc_idl_text(const char *name, char **ret)
{
	const struct varlink_symbol *methods[INTERFACE_METHODS_MAX];
	const struct rpc_interface *iface;
	const struct rpc_method *m;
	size_t len = strlen(name), n = 0, i = 0;

	for (iface = rpc_interfaces; iface->name; iface++)
		if (strcmp(iface->name, name) == 0)
			break;
	if (!iface->name)
		return -ENOENT;
	while ((m = rpc_method_next(&i)))
		if (strncmp(m->name, name, len) == 0 && m->name[len] == '.') {
			if (n == INTERFACE_METHODS_MAX)
				return -E2BIG;
			methods[n++] = m->symbol;
		}
	return varlink_idl_format(iface->name, iface->doc, methods, n, rdmamem_errors, ret);
}
