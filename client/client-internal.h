/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared between the files of librdmamem; nothing here is exported. */
#ifndef RDMAMEM_CLIENT_INTERNAL_H
#define RDMAMEM_CLIENT_INTERNAL_H

#include "proto/macro.h"
#include "rdmamem.h"

/* Records the failure of the current call; name NULL for local failures. */
void rdmamem__set_error(struct rdmamem_client *c, const char *name, const char *fmt, ...)
	_printf_(3, 4);

#endif
