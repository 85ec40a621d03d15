/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>

#include "errinfo.h"
#include "proto/errors.h"

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

void errinfo_done(struct errinfo *e)
{
	cJSON_Delete(e->params);
	e->params = NULL;
}
