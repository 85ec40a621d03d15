/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What went wrong, for the client: a Varlink error name, a message that says
 * what to change, and optional extra parameters (the numbers of a quota, the
 * parameter an InvalidParameter names).
 * Modules fill one when a failure is the client's doing; the RPC layer turns
 * it into the reply. Modules never log client mistakes above debug.
 */
#ifndef RDMAMEMD_ERRINFO_H
#define RDMAMEMD_ERRINFO_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "util/macro.h"

struct errinfo {
	const char *name;
	char message[512];
	cJSON *params;         /* extra parameters of an io.rdmamemd error, owned */
	const char *parameter; /* InvalidParameter: the one it names (static) */
};

/* Records the error and returns err (a negative errno) for "return errinfo_set(…)". */
int errinfo_set(struct errinfo *e, const char *name, int err, const char *fmt, ...) _printf_(4, 5);

/*
 * org.varlink.service.InvalidParameter naming param (a static string). The
 * message does not travel with it (the error declares only the parameter):
 * the daemon logs it at debug.
 */
int errinfo_invalid_param(struct errinfo *e, const char *param, int err, const char *fmt, ...)
	_printf_(4, 5);

/*
 * QuotaExceeded with its numbers: quota (its name), limit, used and
 * requested. Returns -EDQUOT.
 */
int errinfo_quota(struct errinfo *e, const char *quota, uint64_t limit, uint64_t used,
		  uint64_t requested, const char *fmt, ...) _printf_(6, 7);
void errinfo_done(struct errinfo *e);

#endif
