/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "errinfo.h"
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

int errinfo_invalid_param(struct errinfo *e, const char *param, const char *fmt, ...)
{
	va_list ap;

	e->name = VARLINK_ERROR_INVALID_PARAMETER;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	cJSON_Delete(e->params);
	e->params = cJSON_CreateObject();
	if (e->params && json_add_string(e->params, "parameter", param) < 0)
		e->params = (cJSON_Delete(e->params), NULL);
	return -EINVAL;
}

void errinfo_done(struct errinfo *e)
{
	cJSON_Delete(e->params);
	e->params = NULL;
}
