/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Varlink message shapes (https://varlink.org): validation of calls and
 * replies, and the protocol limits both sides enforce. Pure functions over
 * cJSON trees; the framing lives in frame.h.
 */
#ifndef RDMAMEM_VARLINK_H
#define RDMAMEM_VARLINK_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* Largest message, NUL terminator not counted. */
#define VARLINK_BODY_MAX (16U * 1024U * 1024U)
/* Most file descriptors one message may carry: a Register of "cuda-vmm"
 * memory passes one per allocation, up to 64 (a tensor of PyTorch's
 * expandable segments spans one per 20 MiB). The kernel's own cap is 253. */
#define VARLINK_FDS_MAX 64U
/* Longest interface.Method name. */
#define VARLINK_METHOD_MAX 255U

#define VARLINK_SERVICE_INTERFACE "org.varlink.service"

/*
 * io.rdmamemd's listings (ListRegions, ListClients, ListConnections) answer
 * in pages: at most LIST_PAGE_MAX items (a larger limit is lowered to it),
 * LIST_PAGE_DEFAULT when the call names no limit. Measured on the build
 * machine, a page of 256 regions costs the daemon's loop about 0.6 ms
 * (2.1 µs a region), 1 ms when each is registered on two devices.
 */
#define LIST_PAGE_DEFAULT 128U
#define LIST_PAGE_MAX 256U

struct varlink_call {
	const char *method;   /* "interface.Method", points into the tree */
	size_t interface_len; /* length of the interface part */
	cJSON *parameters;    /* an object; NULL when the call had none */
	bool oneway;
	bool more;
	bool upgrade;
};

struct varlink_reply {
	const char *error; /* NULL on success */
	cJSON *parameters; /* may be NULL */
	bool continues;
};

/*
 * Checks that root is a well-formed call and fills *ret with pointers into
 * root. On failure returns -EBADMSG with *ret_reason set (static text).
 */
int varlink_call_parse(cJSON *root, struct varlink_call *ret, const char **ret_reason);
int varlink_reply_parse(cJSON *root, struct varlink_reply *ret, const char **ret_reason);

/* "org.example.Foo" style interface names and "Method" member names. */
bool varlink_interface_name_is_valid(const char *s, size_t len);
bool varlink_method_name_is_valid(const char *full);

/*
 * Builds the NUL-terminated text of a call. params may be NULL; it is not
 * consumed. *ret_len excludes the terminator.
 */
int varlink_call_format(const char *method, const cJSON *params, bool oneway, char **ret,
			size_t *ret_len);

#endif
