/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Method dispatch and replies. A call is dispatched once; its handler either
 * replies before returning, or returns RPC_PENDING and replies later from a
 * completion callback on the loop thread. Handlers return a negative errno
 * they did not answer themselves and the dispatcher answers InternalError.
 */
#ifndef RDMAMEMD_RPC_H
#define RDMAMEMD_RPC_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "account.h"
#include "proto/dispatch.h"
#include "proto/macro.h"
#include "proto/varlink.h"
#include "region.h"

struct conn;
struct daemon;
struct errinfo;
struct rpc_call;
struct session;

#define RPC_PENDING 1

/* The method takes file descriptors; calls to other methods may not carry any. */
#define RPC_ACCEPTS_FDS (1U << 0)

struct rpc_method {
	const char *name;
	int (*handler)(struct rpc_call *call);
	unsigned flags;
};

/*
 * A call's string parameter of RPC_STRING_MEASURE_MIN bytes or more, measured
 * where its message was parsed (on the pool, for a large message): a string
 * of megabytes is not measured again on the loop.
 */
#define RPC_STRING_MEASURE_MIN (16U * 1024U)
struct rpc_string {
	const char *s;
	size_t len;
};

/* A message parsed into a call, as rpc_call_new() takes it. */
struct rpc_message {
	cJSON *root;
	struct varlink_call vc;		/* points into root */
	bool big;			/* from a large message: root is freed off the loop */
	struct rpc_string *long_strings;
	size_t n_long_strings;
	struct budget_charge charge;	/* a large message's bytes, until root is freed */
};

/* Measures m's long string parameters (see rpc_string); -ENOMEM. Touches
 * nothing but m: runs on the pool. */
int rpc_message_measure(struct rpc_message *m);
/* Frees what m holds: the tree off the loop when it is big. */
void rpc_message_done(struct daemon *d, struct rpc_message *m);

struct rpc_call {
	struct conn *conn;	/* holds a reference */
	struct session *session;	/* the caller; a reference */
	struct daemon *daemon;
	cJSON *root;
	struct varlink_call vc;
	bool big;		/* from a large message: root is freed off the loop */
	struct rpc_string *long_strings;
	size_t n_long_strings;
	struct budget_charge charge;	/* the message's bytes, until root is freed */
	const struct rpc_method *method;
	int fds[VARLINK_FDS_MAX];
	size_t n_fds;
	bool replied;
	bool pending;		/* the handler returned RPC_PENDING */
	uint64_t reserved;	/* output bytes reserved for its reply (rpc_reserve_reply) */
	void (*on_reserved)(struct rpc_call *call);

	/* Set by handlers that return RPC_PENDING: called on the loop thread
	 * when the connection goes away before the reply. */
	void (*cancel)(struct rpc_call *call);
	void *userdata;
};

/* Takes what m holds, and fds (also on failure). */
int rpc_call_new(struct conn *conn, struct rpc_message *m, int *fds, size_t n_fds,
		 struct rpc_call **ret);
struct rpc_call *rpc_call_free(struct rpc_call *call);

/* Runs the handler. Returns 0 when the call is finished, RPC_PENDING otherwise. */
int rpc_dispatch(struct rpc_call *call);

/*
 * Replies. params is consumed (may be NULL for an empty object). The error
 * forms return the errno that the error name stands for, negative, so that
 * a handler can "return rpc_errorf(call, …);". Every error and its
 * explanation is logged at debug with the client's pid. rpc_errorf() sends
 * the explanation as "message", which every io.rdmamemd error declares;
 * org.varlink.service's errors declare none and go without it:
 * rpc_invalid_param() sends only {"parameter": param}.
 */
int rpc_reply(struct rpc_call *call, cJSON *params);
/* The whole reply message, made by the caller (on the pool, say): text is
 * {"parameters":{…}} followed by its NUL; taken, also on failure. */
int rpc_reply_text(struct rpc_call *call, char *text, size_t len);

/*
 * A reply of this size or more that the handler makes elsewhere (a Read's)
 * is reserved in the output budgets before it is made; a smaller one is
 * like any other reply.
 */
#define RPC_RESERVE_MIN (64U * 1024U)
/*
 * Reserves bytes, the size of the reply the handler is to make and send
 * with rpc_reply_text(), in the caller's output budgets (conn.c). Returns 1
 * when reserved (or too small to need it); 0 when the connection waits for
 * room: the handler then returns RPC_PENDING, with call->cancel set, and
 * granted(call) runs on the loop once the bytes are reserved. They are given
 * back when the reply is queued, or when the call is freed without it.
 */
int rpc_reserve_reply(struct rpc_call *call, uint64_t bytes, void (*granted)(struct rpc_call *call));
/* For conn.c: the bytes the call waited for are reserved. */
void rpc_call_reserved(struct rpc_call *call, uint64_t bytes);
int rpc_error(struct rpc_call *call, const char *name, cJSON *params);
int rpc_errorf(struct rpc_call *call, const char *name, const char *fmt, ...) _printf_(3, 4);
int rpc_invalid_param(struct rpc_call *call, const char *param, const char *fmt, ...)
	_printf_(3, 4);

/* Replies with the error e describes; consumes e->params. */
int rpc_error_info(struct rpc_call *call, struct errinfo *e);

/* region_lookup() for the caller's connection; on failure answers the
 * error (NoSuchRegion, PermissionDenied) and returns its errno. */
int rpc_region_lookup(struct rpc_call *call, uint64_t id, enum region_right right,
		      struct region **ret);

/* Ends a pending call whose connection went away, without a reply. */
void rpc_call_abandon(struct rpc_call *call);

/* strlen() of a string parameter of the call, measured already when long. */
size_t rpc_strlen(const struct rpc_call *call, const char *s);

/* Decodes call parameters; on failure answers InvalidParameter and returns -EINVAL. */
int rpc_params(struct rpc_call *call, const struct json_field *fields, void *out);

/*
 * Takes fd number index of the call (a parameter's value) out of the call;
 * answers InvalidParameter naming param when there is no such fd.
 */
int rpc_take_fd(struct rpc_call *call, const char *param, uint32_t index, int *ret_fd);

struct idseq;
struct idseq_node;

/*
 * Answers a listing method whose parameters are limit and after: {name:
 * [items], next} with the objects of s whose ids are above after, in id
 * order, at most limit of them (LIST_PAGE_DEFAULT, at most LIST_PAGE_MAX).
 * item makes an object's JSON, or leaves *ret NULL for one the caller may
 * not see; it may not add objects to s or remove any. next, the id of the
 * last object looked at, is there when more may follow: a page looks at no
 * more than 8 × LIST_PAGE_MAX slots, so one whose caller sees few of them
 * may be short, even empty, and still have a next.
 */
int rpc_reply_page(struct rpc_call *call, const struct idseq *s, const char *name,
		   int (*item)(struct rpc_call *call, struct idseq_node *node, cJSON **ret));

/* Method tables of each module. */
extern const struct rpc_method rpc_service_methods[];
extern const struct rpc_method rpc_core_methods[];
extern const struct rpc_method rpc_region_methods[];
extern const struct rpc_method rpc_data_methods[];
extern const struct rpc_method rpc_rdma_methods[];

/* The interface descriptions served by GetInterfaceDescription. */
extern const char rpc_idl_io_rdmamemd[];
extern const char rpc_idl_org_varlink_service[];

#endif
