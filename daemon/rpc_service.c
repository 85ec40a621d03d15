/* SPDX-License-Identifier: BSD-3-Clause */
/* org.varlink.service: what every Varlink service answers. */
#include <errno.h>
#include <string.h>

#include "core.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "rpc.h"

#define RDMAMEMD_URL "https://github.com/rdmamemd/rdmamemd"

static int method_get_info(struct rpc_call *call)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *ifaces;
	int r;

	r = rpc_params(call, (const struct json_field[]){ {} }, NULL);
	if (r < 0)
		return r;
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
	cJSON_AddItemToArray(ifaces, cJSON_CreateString(VARLINK_SERVICE_INTERFACE));
	cJSON_AddItemToArray(ifaces, cJSON_CreateString("io.rdmamemd"));
	if (cJSON_GetArraySize(ifaces) != 2)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

static int method_get_interface_description(struct rpc_call *call)
{
	struct {
		const char *interface;
	} p = {};
	static const struct json_field fields[] = {
		{ "interface", JSON_STRING, 0, JSON_MANDATORY },
		{},
	};
	_cleanup_json_ cJSON *reply = NULL;
	const char *desc;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;

	/* Echoed in InterfaceNotFound: only what could be an interface name. */
	if (strnlen(p.interface, VARLINK_METHOD_MAX + 1) > VARLINK_METHOD_MAX)
		return rpc_invalid_param(call, "interface",
					 "parameter 'interface' is longer than any interface name");
	if (strcmp(p.interface, "io.rdmamemd") == 0)
		desc = rpc_idl_io_rdmamemd;
	else if (strcmp(p.interface, VARLINK_SERVICE_INTERFACE) == 0)
		desc = rpc_idl_org_varlink_service;
	else {
		reply = cJSON_CreateObject();
		if (!reply || json_add_string(reply, "interface", p.interface) < 0)
			return -ENOMEM;
		return rpc_error(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, TAKE_PTR(reply));
	}

	reply = cJSON_CreateObject();
	if (!reply || json_add_string(reply, "description", desc) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

const struct rpc_method rpc_service_methods[] = {
	{ "org.varlink.service.GetInfo", method_get_info, 0 },
	{ "org.varlink.service.GetInterfaceDescription", method_get_interface_description, 0 },
	{},
};
