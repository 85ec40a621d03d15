/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "errors.h"
#include "macro.h"

static const struct {
	const char *name;
	int err;
} error_table[] = {
	{ VARLINK_ERROR_INTERFACE_NOT_FOUND, EPROTONOSUPPORT },
	{ VARLINK_ERROR_METHOD_NOT_FOUND, EOPNOTSUPP },
	{ VARLINK_ERROR_METHOD_NOT_IMPLEMENTED, EOPNOTSUPP },
	{ VARLINK_ERROR_INVALID_PARAMETER, EINVAL },
	{ VARLINK_ERROR_PERMISSION_DENIED, EACCES },
	{ VARLINK_ERROR_EXPECTED_MORE, EINVAL },
	{ RDMAMEM_ERROR_INVALID_MESSAGE, EBADMSG },
	{ RDMAMEM_ERROR_MESSAGE_TOO_LARGE, EMSGSIZE },
	{ RDMAMEM_ERROR_TOO_MANY_FDS, ETOOMANYREFS },
	{ RDMAMEM_ERROR_TOO_MANY_CONNECTIONS, EUSERS },
	{ RDMAMEM_ERROR_SHUTTING_DOWN, ESHUTDOWN },
	{ RDMAMEM_ERROR_INTERNAL, EIO },
};

int rdmamem_error_to_errno(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(error_table); i++)
		if (strcmp(error_table[i].name, name) == 0)
			return -error_table[i].err;
	return -EREMOTEIO;
}
