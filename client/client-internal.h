/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared between the files of librdmamem; nothing here is exported. */
#ifndef RDMAMEM_CLIENT_INTERNAL_H
#define RDMAMEM_CLIENT_INTERNAL_H

#include <cjson/cJSON.h>

#include "util/macro.h"
#include "rdmamem.h"

/* Records the failure of the current call; name NULL for local failures. */
void rdmamem__set_error(struct rdmamem_client *c, const char *name, const char *fmt, ...)
	_printf_(3, 4);

/* Hands over the last error's name and message (NULL when none) and clears
 * them; rdmamem__put_error() puts such a pair back, taking ownership. */
void rdmamem__take_error(struct rdmamem_client *c, char **ret_name, char **ret_message);
void rdmamem__put_error(struct rdmamem_client *c, char *name, char *message);

/*
 * The call behind every helper: params (may be NULL) is not consumed. On
 * return (also for Varlink errors) *ret_root owns the reply and *ret_params
 * points into it (may be NULL). extra_wait_ms lengthens the deadline for
 * calls that wait in the daemon (-1: no deadline).
 */
int rdmamem__call(struct rdmamem_client *c, const char *method, const cJSON *params, const int *fds,
		  size_t n_fds, int extra_wait_ms, cJSON **ret_root, cJSON **ret_params,
		  int *ret_fds, size_t *ret_n_fds);
/* The same with "more": on_continues sees each progress reply's parameters
 * before the final reply comes back as rdmamem__call()'s does. */
int rdmamem__call_more(struct rdmamem_client *c, const char *method, const cJSON *params,
		       const int *fds, size_t n_fds, int extra_wait_ms,
		       void (*on_continues)(void *userdata, const cJSON *params), void *userdata,
		       cJSON **ret_root, cJSON **ret_params, int *ret_fds, size_t *ret_n_fds);

#endif
