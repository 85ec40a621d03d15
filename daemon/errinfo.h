/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What went wrong, for the client: a Varlink error name, a message that says
 * what to change, and optional extra parameters (the numbers of a quota).
 * Modules fill one when a failure is the client's doing; the RPC layer turns
 * it into the reply. Modules never log client mistakes above debug.
 */
#ifndef RDMAMEMD_ERRINFO_H
#define RDMAMEMD_ERRINFO_H

#include <cjson/cJSON.h>

#include "proto/macro.h"

struct errinfo {
	const char *name;
	char message[512];
	cJSON *params;		/* extra parameters, owned */
};

/* Records the error and returns err (a negative errno) for "return errinfo_set(…)". */
int errinfo_set(struct errinfo *e, const char *name, int err, const char *fmt, ...)
	_printf_(4, 5);
/* org.varlink.service.InvalidParameter naming param (its declared parameter). */
int errinfo_invalid_param(struct errinfo *e, const char *param, const char *fmt, ...)
	_printf_(3, 4);
void errinfo_done(struct errinfo *e);

#endif
