/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Method dispatch and replies. Loop thread only.
 *
 * The life of a call. The connection makes a call of each message
 * (rpc_call_new()) and runs it (rpc_dispatch()); it serves no other call of
 * that client until this one ends. The handler either answers before it
 * returns (rpc_reply(), rpc_error…() on the call), or defers: rpc_defer()
 * gives it the call's handle, and the handler returns 0. From then on the
 * holder of the handle answers through it — rpc_deferred_reply(),
 * _reply_text(), _error(), _fail() — or ends it without an answer,
 * rpc_deferred_drop(). Every rpc_defer() is ended exactly once, by one of
 * those; until then the call (its parameters, its fds, the message's
 * memory) stays, so the holder may keep pointing into it, and the
 * connection takes no other call. An answer given before the handler
 * returned (the work was done at once) ends the call when the handler
 * returns.
 *
 * When the client goes away first, the connection cancels the call
 * (rpc_call_cancel()): on_cancel(userdata) runs once, on the loop, while the
 * handle is live. It stops what can be stopped (work on the pool cannot be)
 * and ends the handle there or later, when the work is done; answers given
 * after a cancel are dropped, harmlessly. The connection learns that a
 * deferred call ended from the rpc layer (transport->ended), never from the
 * model: the model answers no calls, it reports through completion
 * callbacks that the method files turn into answers.
 *
 * Handlers return a negative errno they did not answer themselves and the
 * dispatcher answers InternalError.
 */
#ifndef RDMAMEMD_RPC_H
#define RDMAMEMD_RPC_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "daemon/core/budget.h"
#include "daemon/core/json_arena.h"
#include "proto/dispatch.h"
#include "util/macro.h"
#include "proto/varlink.h"
#include "daemon/mem/region.h"

struct core;
struct errinfo;
struct gpu_ctx;
struct rdma_ctx;
struct region_registry;
struct remote_ctx;
struct idseq;
struct idseq_node;
struct rpc_call;
struct session;

/* What GetStatus shows of the server. */
struct rpc_server_status {
	const char *path;             /* the socket's */
	unsigned n_clients;           /* connections admitted */
	unsigned n_rejected;          /* refused connections open now, to be told why */
	unsigned n_rejected_max;      /* at most that many */
	uint64_t n_refused_total;     /* connections refused since start */
	uint64_t bytes[BUDGET_KINDS]; /* held for clients' messages, daemon-wide */
};

/* What ListClients shows of one connection, besides its session's. */
struct rpc_client {
	const struct session *session;
	uint64_t id;
	uint64_t n_calls;
	bool refused; /* over a connection limit */
	bool in_call;
};

/*
 * The server as the handlers see it: the transport (ipc) sits above rpc,
 * which sees no connection, so the server hands rpc these (server.c's
 * server_rpc_ops), called on the loop with rpc_ctx.server.
 */
struct rpc_server_ops {
	void (*status)(const void *server, struct rpc_server_status *ret);
	/* Its connections by id; client() describes one of their nodes. */
	const struct idseq *(*clients)(const void *server);
	void (*client)(const struct idseq_node *node, struct rpc_client *ret);
};

/*
 * What the method handlers reach: each subsystem's context, composed by
 * daemon.c (a test gives only those its handlers use). Loop only.
 */
struct rpc_ctx {
	struct core *core;
	struct region_registry *regions;
	struct rdma_ctx *rdma;
	struct remote_ctx *remote;
	struct gpu_ctx *gpu;
	const struct rpc_server_ops *server_ops;
	const void *server; /* server_ops' */
	/* Methods served besides the tables, found before them (a NULL name
	 * ends it): a unit suite's own, which drives a real connection
	 * through calls the suite controls (tests/unit/check_conn.c). NULL
	 * in the daemon, which serves the tables alone. */
	const struct rpc_method *extra_methods;
};
#define RDMAMEMD_INTERFACE "io.rdmamemd"

/* The method takes file descriptors; calls to other methods may not carry any. */
#define RPC_ACCEPTS_FDS (1U << 0)

/*
 * A method, as the dispatcher runs it. Its symbol (proto/idl.h) declares
 * its parameters and reply once: the IDL is printed from it (rpc_idl.c),
 * and the dispatcher decodes the parameters by it into a struct of
 * params_size bytes (at most RPC_PARAMS_MAX), first set to *params_init
 * (zeroes when NULL), before the handler runs:
 *
 *	decoding (types, mandatory and unknown parameters: InvalidParameter
 *	naming the parameter; presence flags; long strings' lengths),
 *	then check(), then the region parameters looked up for the caller
 *	(NoSuchRegion, PermissionDenied), then handler(call, params).
 *
 * The handler sees only calls whose parameters are well-formed; what it
 * adds of its own (values in range, combinations) it answers itself.
 */
struct rpc_method {
	const char *name; /* interface.Method; NULL ends a table */
	const struct varlink_symbol *symbol;
	int (*handler)(struct rpc_call *call, void *params);
	unsigned flags;
	size_t params_size;
	const void *params_init;
	/* What the parameters alone decide and must come before a region is
	 * looked up: answers and returns a negative errno to end the call. */
	int (*check)(struct rpc_call *call, void *params);
};

#define RPC_PARAMS_MAX 256

/* A table entry: the method Name of interface, its symbol rpc_symbol_Name
 * (RPC_DEFINE_METHOD), its handler; then RPC_PARAMS() and other members. */
/* clang-format off */
#define RPC_METHOD(_iface, _name, _handler, ...)                                      \
	{ .name = _iface "." #_name, .symbol = &rpc_symbol_##_name, .handler = (_handler), \
	  __VA_ARGS__ }
/* clang-format on */
#define RPC_PARAMS(_struct)                                                                      \
	.params_size =                                                                           \
		sizeof(_struct) + 0 * sizeof(struct {                                            \
					  _Static_assert(sizeof(_struct) <= RPC_PARAMS_MAX,      \
							 "params too large for RPC_PARAMS_MAX"); \
					  int unused;                                            \
				  })
/* The symbol of method Name, with its doc and fields (proto/idl.h). */
#define RPC_DEFINE_METHOD(_name, _doc, ...)                     \
	static const struct varlink_symbol rpc_symbol_##_name = \
		VARLINK_DEFINE_METHOD(_name, _doc, __VA_ARGS__)

/* What the dispatcher makes of a parameter once decoded (varlink_field.resolve). */
enum rpc_resolve {
	RPC_RESOLVE_NONE,
	RPC_RESOLVE_LENGTH, /* a string: struct rpc_string, its length filled in */
	RPC_RESOLVE_REGION, /* + enum region_right: struct rpc_region, looked up */
};

/*
 * A region parameter: the id sent, and the region it names, looked up for
 * the caller with the right the method declares. The reference is the
 * dispatcher's, dropped once the handler returns: a handler that keeps the
 * region takes its own (region_ref()). A region parameter is mandatory.
 */
struct rpc_region {
	uint64_t id;
	struct region *region;
};

/* clang-format off */
#define RPC_INPUT_REGION(_struct, _name, _right)                                  \
	{ .name = #_name, .type = VARLINK_U64, .offset = offsetof(_struct, _name), \
	  .resolve = RPC_RESOLVE_REGION + (_right) }
/* A string parameter with its length (struct rpc_string), measured once. */
#define RPC_INPUT_MEASURED(_struct, _name, _flags)                                          \
	{ .name = #_name, .type = VARLINK_STRING, .flags = (_flags),                        \
	  .offset = offsetof(_struct, _name), .resolve = RPC_RESOLVE_LENGTH }
/* clang-format on */

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
	struct varlink_call vc; /* points into root */
	bool big;               /* from a large message: root is freed off the loop */
	struct json_slot *slot; /* where root was parsed, given back after it */
	struct rpc_string *long_strings;
	size_t n_long_strings;
	struct budget_charge charge; /* a large message's bytes, until root is freed */
};

/* Measures m's long string parameters (see rpc_string); -ENOMEM. Touches
 * nothing but m: runs on the pool. */
int rpc_message_measure(struct rpc_message *m);
/* Frees what m holds: the tree off the loop when it is big. */
void rpc_message_done(struct rpc_ctx *ctx, struct rpc_message *m);

/*
 * What carries a call's answers: the client's connection (conn.c), or a
 * test's. owner is the transport's own pointer, given to rpc_call_new().
 */
struct rpc_transport {
	/* Queue one message: a tree (not consumed), or text followed by its
	 * NUL (taken, also on failure). Dropped when the client left. */
	int (*send_json)(void *owner, const cJSON *msg);
	int (*send_buffer)(void *owner, char *text, size_t len);
	/* Optional: queue text[0..len) (not taken; its NUL is added), a reply
	 * made without a tree. NULL: such replies go through send_json. */
	int (*send_text)(void *owner, const char *text, size_t len);
	/* Output budgets (rpc_deferred_reserve()): 1 when reserved now; 0 when
	 * the call waits, and rpc_call_reserved() tells it once reserved. */
	int (*reserve)(void *owner, uint64_t bytes);
	void (*unreserve)(void *owner, uint64_t bytes);
	/* A deferred call ended after its handler returned: the transport
	 * frees it (rpc_call_free()) and goes on with the next. */
	void (*ended)(void *owner, struct rpc_call *call);
	/* Whether the queue holds less than RPC_CONTINUE_ROOM unsent; when
	 * not, rpc_call_room() tells the call once it does. NULL: always. */
	bool (*room)(void *owner);
};

/* A call's handle while it is deferred (rpc_defer()). */
struct rpc_deferred {
	struct rpc_call *call; /* valid until the handle ends */
	void (*on_cancel)(void *userdata);
	void *userdata;
	bool live;                       /* deferred and not ended yet */
	void (*granted)(void *userdata); /* rpc_deferred_reserve() waits */
	void (*room)(void *userdata);    /* rpc_deferred_room() waits */
};

struct rpc_call {
	const struct rpc_transport *transport;
	void *owner;             /* the transport's: the connection */
	struct session *session; /* the caller; a reference */
	struct rpc_ctx *ctx;
	cJSON *root;
	struct varlink_call vc;
	bool big; /* from a large message: root is freed off the loop */
	struct json_slot *slot;
	struct rpc_string *long_strings;
	size_t n_long_strings;
	struct budget_charge charge; /* the message's bytes, until root is freed */
	const struct rpc_method *method;
	size_t n_fds;
	uint64_t reserved; /* output bytes reserved for its reply */
	/* uv_hrtime() at dispatch when the log is at debug level, else 0: the
	 * answer logs how long the call took in the daemon. */
	uint64_t dispatched_ns;

	/* rpc.c's own; handlers use the functions below. */
	bool answered;   /* one answer per call */
	bool in_handler; /* rpc_dispatch() runs its handler */
	bool cancelled;  /* the client went away */
	bool allocated;  /* by rpc_call_new(), not in the transport's storage */
	struct rpc_deferred deferred;

	/* Last: rpc_call_new() sets all that comes before, these n_fds. */
	int fds[VARLINK_FDS_MAX];
};

/*
 * Takes what m holds, and fds (also on failure); takes a reference on session.
 * The call is made in storage when not NULL (the transport's, which must
 * outlive it: a connection serves one call at a time and keeps its memory
 * while the call holds it), else allocated.
 */
int rpc_call_new(const struct rpc_transport *transport, void *owner, struct session *session,
		 struct rpc_ctx *ctx, struct rpc_message *m, int *fds, size_t n_fds,
		 struct rpc_call *storage, struct rpc_call **ret);
struct rpc_call *rpc_call_free(struct rpc_call *call);

/* Runs the handler. Returns false when the call has ended (the transport
 * frees it), true when it was deferred and ends later (transport->ended). */
bool rpc_dispatch(struct rpc_call *call);

/* rpc_dispatch() once the method is found and the call fits it: runs m's
 * handler and answers what it left unanswered (a test runs its own m). */
bool rpc_call_run(struct rpc_call *call, const struct rpc_method *m);

/* The client went away: runs the deferred call's on_cancel, once. */
void rpc_call_cancel(struct rpc_call *call);

/*
 * The handler will answer later (see the life of a call above). on_cancel
 * (may be NULL: the answer is then simply dropped) runs on the loop if the
 * client goes away first; the holder must still end the handle exactly
 * once. A call is deferred at most once.
 */
struct rpc_deferred *rpc_defer(struct rpc_call *call, void (*on_cancel)(void *userdata),
			       void *userdata);
/* The handle changes hands (one wait after another): from now on a cancel
 * runs this on_cancel instead. */
void rpc_deferred_on_cancel(struct rpc_deferred *d, void (*on_cancel)(void *userdata),
			    void *userdata);
/* These end d; after a cancel they answer nothing. The error forms
 * return the errno the error stands for, negative, as rpc_error…() do. */
int rpc_deferred_reply(struct rpc_deferred *d, cJSON *params);
int rpc_deferred_reply_u64(struct rpc_deferred *d, const char *name, uint64_t value);
struct rpc_field; /* rpc_reply_flat() */
int rpc_deferred_reply_flat(struct rpc_deferred *d, const struct rpc_field *fields, size_t n);
int rpc_deferred_reply_text(struct rpc_deferred *d, char *text, size_t len);
struct json_out; /* rpc_reply_out() */
int rpc_deferred_reply_out(struct rpc_deferred *d, struct json_out *o);
int rpc_deferred_error(struct rpc_deferred *d, struct errinfo *e);
/* InternalError for a negative errno nobody answered ("Method failed: …"). */
int rpc_deferred_fail(struct rpc_deferred *d, int err);
/* Ends d without an answer (after on_cancel, or for a oneway call). */
void rpc_deferred_drop(struct rpc_deferred *d);
/*
 * One reply of a call made with "more": true that is not its last
 * ({"parameters": …, "continues": true}); d stays live, and the call ends
 * later with one of the forms above. params is consumed. Dropped after a
 * cancel; -EINVAL (nothing sent) for a call made without "more".
 */
int rpc_deferred_continue(struct rpc_deferred *d, cJSON *params);

/*
 * A stream's replies go out while the connection holds less than this
 * unsent: one that the client does not read stops there, and what it has
 * not been sent stays with the holder, which bounds it (and counts what it
 * drops), instead of piling up in the connection's queue and the uid's
 * output budget.
 */
#define RPC_CONTINUE_ROOM (64U * 1024U)
/*
 * Whether d's connection has room for another rpc_deferred_continue()
 * (after a cancel: always, the reply is dropped). When it has not, room(d's
 * userdata) runs on the loop once it has, once; until then the holder
 * keeps what it would send. A cancel runs on_cancel instead.
 */
bool rpc_deferred_room(struct rpc_deferred *d, void (*room)(void *userdata));
/* For the transport: the queue has room again (rpc_deferred_room()). */
void rpc_call_room(struct rpc_call *call);

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
/*
 * A reply of a few flat fields printed straight to text, without a tree:
 * after the empty reply, the commonest (Copy's and Write's length, Lock's
 * lease and mode). A field is a u64, sent as its decimal string (the wire's
 * form of 64-bit values), when text is NULL, else text. A name is the
 * method's own constant: a plain field name, nothing to escape. Names and
 * texts of at most RPC_FLAT_TEXT_MAX bytes, texts of printable ASCII with
 * nothing to escape, go out this way; any other reply, or a transport that
 * takes no text, takes a tree, and the bytes on the wire are the same.
 */
struct rpc_field {
	const char *name;
	const char *text; /* NULL: the field is u64 */
	uint64_t u64;
};
#define RPC_FLAT_FIELDS_MAX 4U
#define RPC_FLAT_TEXT_MAX 64U
int rpc_reply_flat(struct rpc_call *call, const struct rpc_field *fields, size_t n);
/* {"parameters":{name:"value"}}. */
int rpc_reply_u64(struct rpc_call *call, const char *name, uint64_t value);
/* The whole reply message, made by the caller (on the pool, say): text is
 * {"parameters":{…}} followed by its NUL; taken, also on failure. */
int rpc_reply_text(struct rpc_call *call, char *text, size_t len);
/*
 * A reply written straight to text (proto/json_out.h), for answers too big
 * for rpc_reply_flat() that are sent often (a region's): rpc_reply_start()
 * opens {"parameters":{ in o, on buf (size bytes; the heap past them); the
 * handler writes its fields into that object; rpc_reply_out() closes it,
 * sends it (a transport without send_text gets the tree of the same text)
 * and frees o. o's failure (out of memory) is answered as any other.
 */
void rpc_reply_start(struct json_out *o, char *buf, size_t size);
int rpc_reply_out(struct rpc_call *call, struct json_out *o);

/*
 * A reply of this size or more that the handler makes elsewhere (a Read's)
 * is reserved in the output budgets before it is made; a smaller one is
 * like any other reply.
 */
#define RPC_RESERVE_MIN (64U * 1024U)
/*
 * Reserves bytes, the size of the reply the holder of d is to make and send
 * with rpc_deferred_reply_text(), in the caller's output budgets (conn.c).
 * Returns 1 when reserved (or too small to need it); 0 when the connection
 * waits for room: granted(d's userdata) runs on the loop once the bytes are
 * reserved (a cancel stops the wait: on_cancel runs instead). They are given
 * back when the reply is queued, or when the call is freed without it.
 */
int rpc_deferred_reserve(struct rpc_deferred *d, uint64_t bytes, void (*granted)(void *userdata));
/* For the transport: the bytes the call waited for are reserved. */
void rpc_call_reserved(struct rpc_call *call, uint64_t bytes);
int rpc_error(struct rpc_call *call, const char *name, cJSON *params);
int rpc_errorf(struct rpc_call *call, const char *name, const char *fmt, ...) _printf_(3, 4);
int rpc_invalid_param(struct rpc_call *call, const char *param, const char *fmt, ...)
	_printf_(3, 4);

/* Replies with the error e describes; consumes e->params. */
int rpc_error_info(struct rpc_call *call, struct errinfo *e);

/* region_lookup() for the caller; on failure answers the
 * error (NoSuchRegion, PermissionDenied) and returns its errno. */
int rpc_region_lookup(struct rpc_call *call, uint64_t id, enum region_right right,
		      struct region **ret);

/* strlen() of a string parameter of the call, measured already when long. */
size_t rpc_strlen(const struct rpc_call *call, const char *s);

/*
 * Takes fd number index of the call (a parameter's value) out of the call;
 * answers InvalidParameter naming param when there is no such fd.
 */
int rpc_take_fd(struct rpc_call *call, const char *param, uint32_t index, int *ret_fd);

struct idseq;
struct idseq_node;

/* A listing method's parameters (RPC_PAGE_INPUTS), from RPC_PAGE_PARAMS. */
struct rpc_page_params {
	int64_t limit;
	uint64_t after;
};
extern const struct rpc_page_params rpc_page_init;
#define RPC_PAGE_INPUTS                                                              \
	VARLINK_INPUT(struct rpc_page_params, limit, VARLINK_INT, VARLINK_NULLABLE), \
		VARLINK_INPUT(struct rpc_page_params, after, VARLINK_U64, VARLINK_NULLABLE)
#define RPC_PAGE_PARAMS RPC_PARAMS(struct rpc_page_params), .params_init = &rpc_page_init

/*
 * Answers a listing method: {name: [items], next} with the objects of s
 * whose ids are above p->after, in id order, at most p->limit of them
 * (LIST_PAGE_DEFAULT, at most LIST_PAGE_MAX).
 * item makes an object's JSON, or leaves *ret NULL for one the caller may
 * not see; it may not add objects to s or remove any. next, the id of the
 * last object looked at, is there when more may follow: a page looks at no
 * more than 8 × LIST_PAGE_MAX slots, so one whose caller sees few of them
 * may be short, even empty, and still have a next.
 */
int rpc_reply_page(struct rpc_call *call, const struct rpc_page_params *p, const struct idseq *s,
		   const char *name,
		   int (*item)(struct rpc_call *call, struct idseq_node *node, cJSON **ret));

/* Method tables of each module. */
extern const struct rpc_method rpc_service_methods[];
extern const struct rpc_method rpc_core_methods[];
extern const struct rpc_method rpc_region_methods[];
extern const struct rpc_method rpc_data_methods[];
extern const struct rpc_method rpc_rdma_methods[];
extern const struct rpc_method rpc_remote_methods[];
extern const struct rpc_method rpc_links_methods[];
extern const struct rpc_method rpc_notify_methods[];
extern const struct rpc_method rpc_gpu_methods[];

/* The interfaces served, with their doc (rpc_idl.c); a NULL name ends it. */
struct rpc_interface {
	const char *name;
	const char *doc;
};
extern const struct rpc_interface rpc_interfaces[];

/*
 * The IDL text of interface name, printed from the method tables and the
 * error table (proto/errors.c): what GetInterfaceDescription serves and
 * proto/<name>.varlink holds (make idl). -ENOENT for an interface not
 * served, -ENOMEM.
 */
int rpc_idl_text(const char *name, char **ret);

/* Each method of the tables in turn (NULL after the last): i from 0. */
const struct rpc_method *rpc_method_next(size_t *i);

#endif
