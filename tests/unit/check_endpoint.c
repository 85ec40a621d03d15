/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Access tokens (daemon/token.c) and the admission of remote peers
 * (daemon/endpoint.c) through an rdma_ctx over the fake verbs, with
 * sessions, without a daemon. Peers come in by ConnectQueuePair
 * (endpoint_connect_qp()), which applies the same admit() as rdmacm; the
 * rdmacm path itself (listeners, CM events, private data) needs real
 * rdmacm and is left to the rdma suite in the Soft-RoCE VM.
 */
#include <errno.h>
#include <string.h>

#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "daemon/rdma/verbs.h"
#include "proto/errors.h"
#include "tests/fakes/fake.h"
#include "tests/unit/mem-fixture.h"
#include "tests/testlib.h"

static struct mem_fixture f;
static struct rdma_ctx rdma;
static struct device *dev;

static void setup(void)
{
	mem_fixture_init(&f);
	memset(&rdma, 0, sizeof(rdma));
	rdma.core = &f.core;
	vb = &fake_vb_ops;
	endpoint_init(&rdma);
	token_registry_init(&rdma);
	ck_assert_int_eq(devices_open(&rdma), 0);
	ck_assert_int_eq(endpoint_start(&rdma), 0);
	dev = device_find(&rdma, "fake0");
	ck_assert_ptr_nonnull(dev);
}

static void teardown(void)
{
	f.core.cfg.rdma_allow = NULL;
	endpoint_stop(&rdma);
	ck_assert_uint_eq(rdma.n_rconns, 0);
	session_close(f.owner);
	session_close(f.other);
	devices_stop(&rdma);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	devices_free(&rdma);
	ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
	token_registry_done(&rdma);
	mem_fixture_done(&f);
}

static struct token *new_token(struct session *s)
{
	struct errinfo e = {};
	struct token *t = NULL;

	ck_assert_int_eq(token_create(&rdma, s, &t, &e), 0);
	return t;
}

/* A peer at GID fe80::n asks with raw on device. */
static int connect_qp(struct session *ctl, const char *device, const uint8_t *raw, uint8_t n,
		      int gid_index, struct errinfo *e)
{
	struct vb_qp_endpoint peer = { .qpn = 77, .gid = { 0xfe, 0x80 } }, local = {};
	int r;

	peer.gid[15] = n;
	r = endpoint_connect_qp(&rdma, ctl, device, raw, &peer, gid_index, &local, e);
	if (r == 0)
		ck_assert_uint_ne(local.qpn, 0);
	return r;
}

/* Found by its bytes (hex round trip), not by one byte more or less;
 * counted against its uid; gone once revoked. */
START_TEST(test_token_lifecycle)
{
	struct token *t = new_token(f.owner), *u = new_token(f.owner), *over = NULL;
	uint8_t raw[TOKEN_BYTES];
	struct errinfo e = {};

	ck_assert_uint_eq(strlen(t->hex), 2 * TOKEN_BYTES);
	ck_assert_int_eq(token_parse_hex(t->hex, raw), 0);
	ck_assert_ptr_eq(token_find(&rdma, raw), t);
	ck_assert_ptr_eq(token_find(&rdma, u->raw), u);
	ck_assert(memcmp(t->raw, u->raw, TOKEN_BYTES) != 0);
	raw[TOKEN_BYTES - 1] ^= 1;
	ck_assert_ptr_null(token_find(&rdma, raw));
	ck_assert_int_eq(token_parse_hex("xyz", raw), -EINVAL);
	ck_assert_uint_eq(t->uid, 1000);
	ck_assert_uint_eq(f.owner->account->n_tokens, 2);
	ck_assert_uint_eq(session_count(f.owner, SESSION_TOKEN), 2);

	/* The per-uid limit. */
	f.core.cfg.max_tokens_per_uid = 2;
	ck_assert_int_lt(token_create(&rdma, f.owner, &over, &e), 0);
	ck_assert_ptr_null(over);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_QUOTA_EXCEEDED);
	errinfo_done(&e);
	memcpy(raw, u->raw, TOKEN_BYTES);
	token_revoke(u, "test");
	ck_assert_ptr_null(token_find(&rdma, raw));
	ck_assert_ptr_eq(token_find(&rdma, t->raw), t);
	ck_assert_uint_eq(f.owner->account->n_tokens, 1);
	ck_assert_uint_eq(session_count(f.owner, SESSION_TOKEN), 1);
	/* Room for one again. */
	ck_assert_ptr_nonnull(new_token(f.owner));
}
END_TEST

/* Admitted with a live token into its uid's PD; the queue pair goes with
 * the token, and with the session that set it up. */
START_TEST(test_admit_and_teardown)
{
	struct token *t = new_token(f.owner);
	struct errinfo e = {};
	struct account *a = f.owner->account;

	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 1, -1, &e), 0);
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 2, -1, &e), 0);
	ck_assert_uint_eq(rdma.n_rconns, 2);
	ck_assert_uint_eq(t->n_admitted, 2);
	ck_assert_uint_eq(dev->n_connections, 2);
	/* Counted against the token's uid, held by the asking session. */
	ck_assert_uint_eq(a->n_rdma_connections, 2);
	ck_assert_uint_eq(f.other->account->n_rdma_connections, 0);
	ck_assert_uint_eq(session_count(f.other, SESSION_RCONN), 2);
	ck_assert_uint_eq(dev->n_pds, 1);

	/* The session that set one up closes: its queue pairs go, the token stays. */
	session_close(f.other);
	ck_assert_uint_eq(rdma.n_rconns, 0);
	ck_assert_uint_eq(a->n_rdma_connections, 0);
	ck_assert_ptr_eq(token_find(&rdma, t->raw), t);

	/* The token is revoked: what it admitted goes with it. */
	ck_assert_int_eq(connect_qp(f.owner, "fake0", t->raw, 3, -1, &e), 0);
	ck_assert_uint_eq(rdma.n_rconns, 1);
	session_close(f.owner);
	ck_assert_uint_eq(rdma.n_rconns, 0);
	ck_assert_uint_eq(dev->n_connections, 0);
	ck_assert_uint_eq(rdma.rejected, 0);
}
END_TEST

/* Each rule refuses with its error, and counts the refusal; nothing is
 * left behind, even when the queue pair fails after admission. */
START_TEST(test_refusals)
{
	struct token *t = new_token(f.owner);
	uint8_t wrong[TOKEN_BYTES] = {};
	struct errinfo e = {};
	int live;

	ck_assert_int_eq(connect_qp(f.other, "fake0", wrong, 1, -1, &e), -EKEYREJECTED);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_INVALID_TOKEN);
	errinfo_done(&e);
	ck_assert_int_eq(connect_qp(f.other, "fake0", NULL, 1, -1, &e), -EKEYREJECTED);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_INVALID_TOKEN);
	errinfo_done(&e);
	ck_assert_int_eq(connect_qp(f.other, "mlx5_9", t->raw, 1, -1, &e), -ENODEV);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_DEVICE);
	errinfo_done(&e);
	dev->fatal = true;
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 1, -1, &e), -EIO);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NO_SUCH_DEVICE);
	errinfo_done(&e);
	dev->fatal = false;
	ck_assert_uint_eq(rdma.rejected, 4);

	/* The daemon's limit, then the uid's. */
	f.core.cfg.max_rdma_connections = 1;
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 1, -1, &e), 0);
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 2, -1, &e), -EUSERS);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_TOO_MANY_CONNECTIONS);
	errinfo_done(&e);
	f.core.cfg.max_rdma_connections = 10;
	f.core.cfg.max_rdma_connections_per_uid = 1;
	ck_assert_int_lt(connect_qp(f.other, "fake0", t->raw, 2, -1, &e), 0);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_QUOTA_EXCEEDED);
	errinfo_done(&e);
	ck_assert_uint_eq(rdma.rejected, 6);
	ck_assert_uint_eq(rdma.n_rconns, 1);

	/* Admitted, but the device cannot connect it (the fake refuses GID
	 * index 1): named as the peer's gid, and the connection is undone. */
	f.core.cfg.max_rdma_connections_per_uid = 10;
	live = atomic_load(&fake_verbs_live);
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 3, 1, &e), -EINVAL);
	ck_assert_str_eq(e.name, VARLINK_ERROR_INVALID_PARAMETER);
	errinfo_done(&e);
	ck_assert_uint_eq(rdma.n_rconns, 1);
	ck_assert_uint_eq(session_count(f.other, SESSION_RCONN), 1);
	ck_assert_int_eq(atomic_load(&fake_verbs_live), live);
}
END_TEST

/* Peers outside the allowed networks are refused before their token is
 * looked at; a bad list on reload keeps the one in force. */
START_TEST(test_networks)
{
	static char *allow[] = { "fe80::/126", NULL };
	static char *bad[] = { "not a network", NULL };
	struct token *t = new_token(f.owner);
	uint8_t wrong[TOKEN_BYTES] = {};
	uint64_t compared;
	struct errinfo e = {};

	f.core.cfg.rdma_allow = allow;
	endpoint_reload(&rdma);
	ck_assert_uint_eq(rdma.n_allow, 1);
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 3, -1, &e), 0);
	compared = rdma.tokens.n_compared;
	ck_assert_int_eq(connect_qp(f.other, "fake0", wrong, 4, -1, &e), -ECONNREFUSED);
	ck_assert_str_eq(e.name, RDMAMEM_ERROR_NETWORK_NOT_ALLOWED);
	errinfo_done(&e);
	ck_assert_uint_eq(rdma.tokens.n_compared, compared);

	test_expect("endpoint: a reload with a bad network (an error, and the list in force kept)");
	f.core.cfg.rdma_allow = bad;
	endpoint_reload(&rdma);
	ck_assert_uint_eq(rdma.n_allow, 1);
	ck_assert_int_eq(connect_qp(f.other, "fake0", t->raw, 4, -1, &e), -ECONNREFUSED);
	errinfo_done(&e);
}
END_TEST

Suite *endpoint_suite(void)
{
	Suite *su = suite_create("endpoint");
	TCase *tc = tcase_create("endpoint");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_token_lifecycle);
	tcase_add_test(tc, test_admit_and_teardown);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_networks);
	suite_add_tcase(su, tc);
	return su;
}
