/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's tables, in process: the idseq that listings page through,
 * the token registry's constant-work lookup, and the keyed hash and string
 * set behind them.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "util/idseq.h"
#include "daemon/core/log.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "proto/errors.h"
#include "util/siphash.h"
#include "util/strset.h"
#include "tests/unit/session-fixture.h"
#include "tests/testlib.h"

START_TEST(test_siphash_vectors)
{
	uint8_t key[SIPHASH_KEY_SIZE], msg[63];

	/* The reference vectors: key 00..0f, message 00, 01, ... */
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	ck_assert_uint_eq(siphash24(msg, 0, key), 0x726fdb47dd0e0e31ULL);
	ck_assert_uint_eq(siphash24(msg, 8, key), 0x93f5f5799a932462ULL);
	ck_assert_uint_eq(siphash24(msg, 15, key), 0xa129ca6149be45e5ULL);
	ck_assert_uint_eq(siphash24(msg, 63, key), 0x958a324ceb064572ULL);
	ck_assert_ptr_eq(siphash_process_key(), siphash_process_key());
}
END_TEST

START_TEST(test_strset)
{
	static const char *const names[] = { "a", "b", "a", "", "mlx5_0", "", "b", "mlx5_1" };
	struct strset s = {};
	int added = 0;

	ck_assert_int_eq(strset_init(&s, ELEMENTSOF(names)), 0);
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		added += strset_add(&s, names[i]);
	ck_assert_int_eq(added, 5);
	strset_done(&s);
}
END_TEST

#define N_SEQ 1000

START_TEST(test_idseq_order_and_holes)
{
	static struct idseq_node nodes[N_SEQ];
	struct idseq s;

	idseq_init(&s);
	for (size_t i = 0; i < N_SEQ; i++) {
		idseq_node_init(&nodes[i]);
		/* Ids 10, 20, ...: seeks between them too. */
		ck_assert_int_eq(idseq_add(&s, (i + 1) * 10, &nodes[i]), 0);
	}
	ck_assert_int_eq(idseq_add(&s, 10, &(struct idseq_node){}), -EEXIST);
	/* Three of every four go: compactions happen on the way. */
	for (size_t i = 0; i < N_SEQ; i++)
		if (i % 4 != 1)
			idseq_remove(&s, &nodes[i]);
	idseq_remove(&s, &nodes[0]); /* twice: a no-op */
	ck_assert_uint_lt(s.n, N_SEQ / 2);
	for (size_t i = 0; i < N_SEQ; i++) {
		if (i % 4 == 1) {
			ck_assert_uint_lt(nodes[i].pos, s.n);
			ck_assert_ptr_eq(s.slots[nodes[i].pos].node, &nodes[i]);
			ck_assert_uint_eq(s.slots[nodes[i].pos].id, (i + 1) * 10);
		} else {
			ck_assert_uint_eq(nodes[i].pos, IDSEQ_NONE);
		}
	}
	/* The first live slot above any id is the next one that lives. */
	for (uint64_t after = 0; after <= N_SEQ * 10 + 5; after += 5) {
		size_t i = idseq_seek(&s, after);

		while (i < s.n && !s.slots[i].node)
			i++;
		if (after >= (N_SEQ - 2) * 10) {
			ck_assert_uint_eq(i, s.n);
			continue;
		}
		ck_assert_uint_lt(i, s.n);
		ck_assert_uint_gt(s.slots[i].id, after);
		ck_assert_uint_le(s.slots[i].id, after + 40);
		ck_assert_uint_eq((s.slots[i].id / 10 - 1) % 4, 1);
	}
	/* Holes at the end go at once. */
	for (size_t i = N_SEQ / 2; i < N_SEQ; i++)
		idseq_remove(&s, &nodes[i]);
	ck_assert_ptr_nonnull(s.slots[s.n - 1].node);
	idseq_done(&s);
}
END_TEST

/* Ids below the last (regions restored under their old ids) go in their
 * place, into a hole of the same id too, and every node knows its slot. */
START_TEST(test_idseq_insert)
{
	static struct idseq_node nodes[N_SEQ];
	uint64_t ids[N_SEQ];
	struct idseq s;

	idseq_init(&s);
	/* 1000 ids in a scrambled order: 10, 20, ... as (i * 7919) % N. */
	for (size_t i = 0; i < N_SEQ; i++) {
		ids[i] = ((i * 7919) % N_SEQ + 1) * 10;
		idseq_node_init(&nodes[i]);
		ck_assert_int_eq(idseq_add(&s, ids[i], &nodes[i]), 0);
	}
	ck_assert_int_eq(idseq_add(&s, ids[17], &(struct idseq_node){}), -EEXIST);
	ck_assert_uint_eq(s.n, N_SEQ);
	for (size_t i = 0; i < N_SEQ; i++) {
		ck_assert_ptr_eq(s.slots[nodes[i].pos].node, &nodes[i]);
		ck_assert_uint_eq(s.slots[nodes[i].pos].id, ids[i]);
		if (i > 0)
			ck_assert_uint_lt(s.slots[i - 1].id, s.slots[i].id);
	}
	/* A hole in the middle takes its id back; 15 goes between 10 and 20. */
	idseq_remove(&s, &nodes[3]);
	ck_assert_uint_eq(s.n_holes, 1);
	ck_assert_int_eq(idseq_add(&s, ids[3], &nodes[3]), 0);
	ck_assert_uint_eq(s.n_holes, 0);
	ck_assert_uint_eq(s.slots[nodes[3].pos].id, ids[3]);
	{
		struct idseq_node extra;

		idseq_node_init(&extra);
		ck_assert_int_eq(idseq_add(&s, 15, &extra), 0);
		ck_assert_uint_eq(extra.pos, 1);
		ck_assert_uint_eq(s.slots[idseq_seek(&s, 10)].id, 15);
		idseq_remove(&s, &extra);
	}
	idseq_done(&s);
}
END_TEST

static struct core core;
static struct account_table accounts;
static struct rdma_ctx rdma;
static struct session *owner;
static uv_loop_t loop;

static void token_setup(void)
{
	memset(&core, 0, sizeof(core));
	memset(&rdma, 0, sizeof(rdma));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	core.loop = &loop;
	daemon_config_init(&core.cfg);
	account_table_init(&accounts);
	core.accounts = &accounts;
	rdma.core = &core;
	token_registry_init(&rdma);
	owner = test_session_new(&accounts, 1,
				 &(struct ucred){ .pid = 1, .uid = 1000, .gid = 1000 });
	/* One info line per token revoked is not what this is about. */
	log_set_max_level(LOG_WARNING);
}

static void token_teardown(void)
{
	while (!list_empty(&owner->sets[SESSION_TOKEN].items))
		token_revoke(list_first_entry(&owner->sets[SESSION_TOKEN].items, struct token,
					      owner_link.link),
			     "test");
	ck_assert_uint_eq(owner->account->n_tokens, 0);
	owner = session_unref(owner);
	token_registry_done(&rdma);
	account_table_done(&accounts);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}

#define N_TOKENS 100000

/* Whatever the number of tokens, a lookup compares one candidate at most:
 * a bogus token costs as little as a valid one, and leaks as little. */
START_TEST(test_token_lookup_constant)
{
	static struct token *tokens[N_TOKENS];
	struct errinfo e = {};
	uint8_t raw[TOKEN_BYTES];
	uint64_t before;
	int found = 0;

	core.cfg.max_tokens_per_uid = N_TOKENS;
	for (int i = 0; i < N_TOKENS; i++)
		ck_assert_int_eq(token_create(&rdma, owner, &tokens[i], &e), 0);
	ck_assert_uint_eq(session_count(owner, SESSION_TOKEN), N_TOKENS);

	before = rdma.tokens.n_compared;
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(getrandom(raw, sizeof(raw), 0), sizeof(raw));
		ck_assert_ptr_null(token_find(&rdma, raw));
	}
	/* A bogus token meets a live one's 64-bit hash about never. */
	ck_assert_uint_le(rdma.tokens.n_compared - before, 1);

	before = rdma.tokens.n_compared;
	for (int i = 0; i < N_TOKENS; i += 100) {
		memcpy(raw, tokens[i]->raw, sizeof(raw));
		found += token_find(&rdma, raw) == tokens[i];
		/* One bit off: no longer the token. */
		raw[i % TOKEN_BYTES] ^= 1;
		ck_assert_ptr_null(token_find(&rdma, raw));
	}
	ck_assert_int_eq(found, N_TOKENS / 100);
	ck_assert_uint_le(rdma.tokens.n_compared - before, N_TOKENS / 100 + 1);

	/* Revoked tokens are found no more. */
	memcpy(raw, tokens[7]->raw, sizeof(raw));
	token_revoke(tokens[7], "test");
	ck_assert_ptr_null(token_find(&rdma, raw));
}
END_TEST

START_TEST(test_token_quota)
{
	struct errinfo e = {};
	struct token *t;

	core.cfg.max_tokens_per_uid = 2;
	ck_assert_int_eq(token_create(&rdma, owner, &t, &e), 0);
	ck_assert_int_eq(token_create(&rdma, owner, &t, &e), 0);
	ck_assert_int_eq(token_create(&rdma, owner, &t, &e), -EDQUOT);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_QUOTA_EXCEEDED);
	ck_assert_str_eq(cJSON_GetObjectItem(e.params, "quota")->valuestring, "tokens");
	ck_assert_str_eq(cJSON_GetObjectItem(e.params, "limit")->valuestring, "2");
	ck_assert_str_eq(cJSON_GetObjectItem(e.params, "used")->valuestring, "2");
	ck_assert_str_eq(cJSON_GetObjectItem(e.params, "requested")->valuestring, "1");
	errinfo_done(&e);
	token_revoke(t, "test");
	ck_assert_int_eq(token_create(&rdma, owner, &t, &e), 0);
}
END_TEST

Suite *tables_suite(void)
{
	Suite *s = suite_create("tables");
	TCase *tc = tcase_create("hash");

	tcase_add_test(tc, test_siphash_vectors);
	tcase_add_test(tc, test_strset);
	tcase_add_test(tc, test_idseq_order_and_holes);
	tcase_add_test(tc, test_idseq_insert);
	suite_add_tcase(s, tc);

	tc = tcase_create("tokens");
	tcase_add_checked_fixture(tc, token_setup, token_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_token_lookup_constant);
	tcase_add_test(tc, test_token_quota);
	suite_add_tcase(s, tc);
	return s;
}
