/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "conn.h"
#include "daemon.h"
#include "endpoint.h"
#include "log.h"
#include "proto/hex.h"
#include "server.h"
#include "token.h"

int token_create(struct conn *owner, struct token **ret)
{
	struct daemon *d = owner->server->daemon;
	struct token *t;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* 128 bits from the kernel's CSPRNG: unguessable, unlike rkeys. */
	if (getrandom(t->raw, sizeof(t->raw), 0) != sizeof(t->raw)) {
		free(t);
		return -EIO;
	}
	hex_encode(t->raw, TOKEN_BYTES, t->hex);
	t->owner = owner;
	t->uid = owner->cred.uid;
	t->created_msec = uv_now(d->loop);
	list_init(&t->rconns);
	list_add_tail(&t->link, &d->tokens);
	list_add_tail(&t->owner_link, &owner->tokens);
	log_debug("Access token for uid %u created by pid %d", (unsigned)t->uid,
		  (int)owner->cred.pid);
	*ret = t;
	return 0;
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t diff = 0;

	/* No early exit: timing must not tell how much of a guess was right. */
	for (size_t i = 0; i < n; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

struct token *token_find(struct daemon *d, const uint8_t raw[TOKEN_BYTES])
{
	struct token *t, *found = NULL;

	list_for_each_entry(t, &d->tokens, link)
		if (same_bytes(t->raw, raw, TOKEN_BYTES))
			found = t;
	return found;
}

int token_parse_hex(const char *hex, uint8_t raw[TOKEN_BYTES])
{
	return hex_decode(hex, raw, TOKEN_BYTES);
}

void token_revoke(struct token *t, const char *why)
{
	log_info("Access token of uid %u revoked (%s); closing %s", (unsigned)t->uid, why,
		 list_empty(&t->rconns) ? "no connections" : "its connections");
	while (!list_empty(&t->rconns))
		rconn_destroy(list_first_entry(&t->rconns, struct rconn, token_link),
			      "its access token was revoked");
	list_del(&t->link);
	list_del(&t->owner_link);
	free(t);
}
