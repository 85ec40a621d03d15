/* SPDX-License-Identifier: BSD-3-Clause */
/* org.varlink.service: what every Varlink service answers. */
#include <errno.h>
#include <string.h>

#include "daemon/core/core.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "daemon/rpc/rpc.h"

#define RDMAMEMD_URL "https://github.com/rdmamemd/rdmamemd"

/* clang-format off */
RPC_DEFINE_METHOD(GetInfo,
		  "Get a list of all the interfaces a service provides and information\n"
		  "about the implementation.",
		  VARLINK_OUTPUT(vendor, VARLINK_STRING, 0),
		  VARLINK_OUTPUT(product, VARLINK_STRING, 0),
		  VARLINK_OUTPUT(version, VARLINK_STRING, 0),
		  VARLINK_OUTPUT(url, VARLINK_STRING, 0),
		  VARLINK_OUTPUT(interfaces, VARLINK_STRING, VARLINK_ARRAY));
/* clang-format on */

static int method_get_info(struct rpc_call *call, _unused_ void *params)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *ifaces;

	if (!p)
		return -ENOMEM;
	if (json_add_string(p, "vendor", "rdmamemd") < 0 ||
	    json_add_string(p, "product", "rdmamemd") < 0 ||
	    json_add_string(p, "version", RDMAMEMD_VERSION) < 0 ||
	    json_add_string(p, "url", RDMAMEMD_URL) < 0)
		return -ENOMEM;
	ifaces = cJSON_AddArrayToObject(p, "interfaces");
	if (!ifaces)
		return -ENOMEM;
	for (const struct rpc_interface *i = rpc_interfaces; i->name; i++) {
		cJSON *name = cJSON_CreateString(i->name);

		if (!name)
			return -ENOMEM;
		cJSON_AddItemToArray(ifaces, name);
	}
	return rpc_reply(call, TAKE_PTR(p));
}

struct get_interface_description_params {
	const char *interface;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	GetInterfaceDescription,
	"Get the description of an interface that is implemented by this service.",
	VARLINK_INPUT(struct get_interface_description_params, interface, VARLINK_STRING, 0),
	VARLINK_OUTPUT(description, VARLINK_STRING, 0));
/* clang-format on */

static int method_get_interface_description(struct rpc_call *call, void *params)
{
	const struct get_interface_description_params *p = params;
	_cleanup_json_ cJSON *reply = NULL;
	_cleanup_free_ char *desc = NULL;
	int r;

	/* Echoed in InterfaceNotFound: only what could be an interface name. */
	if (strnlen(p->interface, VARLINK_METHOD_MAX + 1) > VARLINK_METHOD_MAX)
		return rpc_invalid_param(call, "interface",
					 "parameter 'interface' is longer than any interface name");
	r = rpc_idl_text(p->interface, &desc);
	if (r == -ENOENT) {
		reply = cJSON_CreateObject();
		if (!reply || json_add_string(reply, "interface", p->interface) < 0)
			return -ENOMEM;
		return rpc_error(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, TAKE_PTR(reply));
	}
	if (r < 0)
		return r;

	reply = cJSON_CreateObject();
	if (!reply || json_add_string(reply, "description", desc) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

const struct rpc_method rpc_service_methods[] = {
	RPC_METHOD(VARLINK_SERVICE_INTERFACE, GetInfo, method_get_info),
	RPC_METHOD(VARLINK_SERVICE_INTERFACE, GetInterfaceDescription,
		   method_get_interface_description,
		   RPC_PARAMS(struct get_interface_description_params)),
	{},
};
