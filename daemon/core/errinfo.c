/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "daemon/core/errinfo.h"
#include "proto/errors.h"
#include "proto/json.h"

int errinfo_set(struct errinfo *e, const char *name, int err, const char *fmt, ...)
{
	va_list ap;

	e->name = name;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return err;
}

int errinfo_invalid_param(struct errinfo *e, const char *param, int err, const char *fmt, ...)
{
	va_list ap;

	e->name = VARLINK_ERROR_INVALID_PARAMETER;
	e->parameter = param;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return err;
}

int errinfo_quota(struct errinfo *e, const char *quota, uint64_t limit, uint64_t used,
		  uint64_t requested, const char *fmt, ...)
{
	cJSON *p = cJSON_CreateObject();
	va_list ap;

	e->name = RDMAMEM_ERROR_QUOTA_EXCEEDED;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	/* Out of memory: the error goes without its numbers. */
	if (p && (json_add_string(p, "quota", quota) < 0 || json_add_u64(p, "limit", limit) < 0 ||
		  json_add_u64(p, "used", used) < 0 || json_add_u64(p, "requested", requested) < 0))
		p = (cJSON_Delete(p), NULL);
	cJSON_Delete(e->params);
	e->params = p;
	return -EDQUOT;
}

void errinfo_done(struct errinfo *e)
{
	cJSON_Delete(e->params);
	e->params = NULL;
}
