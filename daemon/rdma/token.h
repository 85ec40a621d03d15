/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Access tokens: what a remote peer must present to be admitted into a uid's
 * protection domain. The owner of the memory asks for one (CreateAccessToken)
 * and hands it to its peers out of band, with the addr/rkey of its regions.
 * A token lives until revoked or until the connection that created it
 * closes; either way the connections it admitted are torn down with it.
 */
#ifndef RDMAMEMD_TOKEN_H
#define RDMAMEMD_TOKEN_H

#include <stdint.h>
#include <sys/types.h>

#include "util/idmap.h"
#include "util/list.h"
#include "daemon/core/session.h"

struct rdma_ctx;
struct errinfo;

#define TOKEN_BYTES 16

/*
 * What a token let in (a remote connection, endpoint.c), embedded in it:
 * revoking the token calls revoke() on each, which must end it and take it
 * off the token (token_unadmit()). The token knows nothing else of it.
 */
struct token_admission {
	struct list_head link; /* in token->admitted */
	void (*revoke)(struct token_admission *a, const char *why);
};

/* Notifications that arrived on connections an export's token admitted
 * (remote/notify.c): received = queued + dropped. */
struct notify_count {
	uint64_t received, queued, dropped;
};

struct token {
	struct list_head link;          /* in rdma->tokens.all */
	struct session_link owner_link; /* SESSION_TOKEN, in its creator's session */
	struct rdma_ctx *rdma;
	uid_t uid;
	uint8_t raw[TOKEN_BYTES];
	char hex[TOKEN_BYTES * 2 + 1];
	uint64_t created_msec;
	/* The ExportRegion that made it (remote/export.c), or 0: connections
	 * it admits get receive buffers for that export's notifications. */
	uint64_t export_id;
	struct notify_count notify; /* on every connection it admitted */
	struct list_head admitted;  /* struct token_admission, of what it let in */
	uint64_t n_admitted;
};

/* Also registers the drop hook of SESSION_TOKEN. */
void token_registry_init(struct rdma_ctx *rdma);
void token_registry_done(struct rdma_ctx *rdma);

/* A token for owner's uid; QuotaExceeded ("tokens") in *e past the per-uid cap. */
int token_create(struct rdma_ctx *rdma, struct session *owner, struct token **ret,
		 struct errinfo *e);
/* The live token with these bytes, compared in constant time; or NULL. */
struct token *token_find(struct rdma_ctx *rdma, const uint8_t raw[TOKEN_BYTES]);
/* t let a in: a is revoked with t. */
void token_admit(struct token *t, struct token_admission *a);
/* a is going by itself: t need not revoke it. */
void token_unadmit(struct token_admission *a);
/* Parses 32 hex digits; -EINVAL otherwise. */
int token_parse_hex(const char *hex, uint8_t raw[TOKEN_BYTES]);
/* Tears down the connections it admitted and forgets it. */
void token_revoke(struct token *t, const char *why);

#endif
