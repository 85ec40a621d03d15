/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/rdma/rdma.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "proto/hex.h"
#include "util/siphash.h"
#include "daemon/core/session.h"
#include "daemon/rdma/token.h"

/* Its creator's session closed. */
static void token_session_drop(struct session_link *link)
{
	token_revoke(container_of(link, struct token, owner_link), "its creator disconnected");
}

void token_registry_init(struct rdma_ctx *rdma)
{
	session_kind_register(SESSION_TOKEN, token_session_drop);
	list_init(&rdma->tokens.all);
	idmap_init(&rdma->tokens.by_hash);
	rdma->tokens.n_compared = 0;
}

void token_registry_done(struct rdma_ctx *rdma)
{
	idmap_done(&rdma->tokens.by_hash);
}

static uint64_t token_hash(const uint8_t raw[TOKEN_BYTES])
{
	return siphash24(raw, TOKEN_BYTES, siphash_process_key());
}

int token_create(struct rdma_ctx *rdma, struct session *owner, struct token **ret,
		 struct errinfo *e)
{
	struct account *a = owner->account;
	unsigned max = rdma->core->cfg.max_tokens_per_uid;
	struct token *t;
	int r;

	if (a->n_tokens >= max)
		return errinfo_quota(e, "tokens", max, a->n_tokens, 1,
				     "uid %u holds %u access tokens, the limit is %u; revoke some "
				     "first (a token admits any number of peers)",
				     (unsigned)a->uid, a->n_tokens, max);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* 128 bits from the kernel's CSPRNG: unguessable, unlike rkeys. Two
	 * tokens whose 64-bit hashes meet (never seen, but possible) would
	 * share a slot: draw again. */
	do {
		if (getrandom(t->raw, sizeof(t->raw), 0) != sizeof(t->raw)) {
			free(t);
			return -EIO;
		}
		r = idmap_put(&rdma->tokens.by_hash, token_hash(t->raw), t);
	} while (r == -EEXIST);
	if (r < 0) {
		free(t);
		return r;
	}
	hex_encode(t->raw, TOKEN_BYTES, t->hex);
	t->rdma = rdma;
	t->uid = owner->cred.uid;
	t->created_msec = uv_now(rdma->core->loop);
	list_init(&t->admitted);
	list_add_tail(&t->link, &rdma->tokens.all);
	session_add(owner, SESSION_TOKEN, &t->owner_link);
	a->n_tokens++;
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

struct token *token_find(struct rdma_ctx *rdma, const uint8_t raw[TOKEN_BYTES])
{
	struct token *t = idmap_get(&rdma->tokens.by_hash, token_hash(raw));

	if (!t)
		return NULL;
	rdma->tokens.n_compared++;
	return same_bytes(t->raw, raw, TOKEN_BYTES) ? t : NULL;
}

void token_admit(struct token *t, struct token_admission *a)
{
	list_add_tail(&a->link, &t->admitted);
	t->n_admitted++;
}

void token_unadmit(struct token_admission *a)
{
	list_del(&a->link);
}

int token_parse_hex(const char *hex, uint8_t raw[TOKEN_BYTES])
{
	return hex_decode(hex, raw, TOKEN_BYTES);
}

void token_revoke(struct token *t, const char *why)
{
	struct rdma_ctx *rdma = t->rdma;

	log_info("Access token of uid %u revoked (%s); closing %s", (unsigned)t->uid, why,
		 list_empty(&t->admitted) ? "no connections" : "its connections");
	while (!list_empty(&t->admitted)) {
		struct token_admission *a =
			list_first_entry(&t->admitted, struct token_admission, link);

		a->revoke(a, "its access token was revoked");
	}
	idmap_remove(&rdma->tokens.by_hash, token_hash(t->raw));
	list_del(&t->link);
	/* In its creator's session until now: that holds the account. */
	t->owner_link.session->account->n_tokens--;
	session_remove(&t->owner_link);
	free(t);
}
