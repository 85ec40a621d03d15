/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ExportRegion's model: the descriptor of a region (descriptor.h) on the
 * devices it is registered on, with a fresh access token of its own. The
 * token is the export's lifetime: it belongs to the exporting session, so
 * RevokeAccessToken or the session's end (or Unregister, which takes the
 * rkeys) ends what the descriptor grants. Loop thread only.
 */
#ifndef RDMAMEMD_EXPORT_H
#define RDMAMEMD_EXPORT_H

#include <stddef.h>

struct descriptor;
struct errinfo;
struct region;
struct remote_ctx;
struct session;
struct token;

/*
 * Fills *ret for region r: its registrations in force on the devices named
 * (n names; n == 0: every device r is registered on, the first
 * DESCRIPTOR_DEVICES_MAX of them), the daemon's rdmacm endpoints (a
 * listener on 0.0.0.0 stands for the IPv4 addresses of the exported
 * devices' GIDs), and a new token for s (*ret_token); *ret_text is its
 * text (malloc()ed). Refusals in *e:
 * NoSuchDevice, NotRegistered, NoRdmaEndpoint, QuotaExceeded ("tokens").
 */
int remote_export(struct remote_ctx *ctx, struct session *s, struct region *r, char *const *names,
		  size_t n, struct descriptor *ret, char **ret_text, struct token **ret_token,
		  struct errinfo *e);

#endif
