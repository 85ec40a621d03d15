/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "util/idseq.h"
#include "daemon/core/log.h"
#include "daemon/core/offload.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "proto/json_out.h"
#include "daemon/rpc/rpc.h"
#include "daemon/core/session.h"

static const struct rpc_method *const method_tables[] = {
	rpc_service_methods, rpc_core_methods,   rpc_region_methods,
	rpc_data_methods,    rpc_rdma_methods,   rpc_remote_methods,
	rpc_links_methods,   rpc_notify_methods, rpc_gpu_methods,
};

int rpc_message_measure(struct rpc_message *m)
{
	const cJSON *item;
	size_t n = 0;

	cJSON_ArrayForEach(item, m->vc.parameters)
		if (cJSON_IsString(item) &&
		    strnlen(item->valuestring, RPC_STRING_MEASURE_MIN) == RPC_STRING_MEASURE_MIN)
			n++;
	if (n == 0)
		return 0;
	m->long_strings = calloc(n, sizeof(*m->long_strings));
	if (!m->long_strings)
		return -ENOMEM;
	cJSON_ArrayForEach(item, m->vc.parameters)
		if (cJSON_IsString(item) &&
		    strnlen(item->valuestring, RPC_STRING_MEASURE_MIN) == RPC_STRING_MEASURE_MIN)
			m->long_strings[m->n_long_strings++] =
				(struct rpc_string){ item->valuestring, strlen(item->valuestring) };
	return 0;
}

void rpc_message_done(struct rpc_ctx *ctx, struct rpc_message *m)
{
	/* Freeing the tree of a large message takes as long as a tenth of
	 * parsing it. */
	if (m->big) {
		offload_json_delete(ctx->core->offload, m->root, &m->charge);
	} else {
		cJSON_Delete(m->root);
		json_slot_give(m->slot);
		budget_charge_release(&m->charge);
	}
	free(m->long_strings);
	*m = (struct rpc_message){};
}

size_t rpc_strlen(const struct rpc_call *call, const char *s)
{
	for (size_t i = 0; i < call->n_long_strings; i++)
		if (call->long_strings[i].s == s)
			return call->long_strings[i].len;
	return strlen(s);
}

int rpc_call_new(const struct rpc_transport *transport, void *owner, struct session *session,
		 struct rpc_ctx *ctx, struct rpc_message *m, int *fds, size_t n_fds,
		 struct rpc_call *storage, struct rpc_call **ret)
{
	struct rpc_call *call = storage;

	if (call) {
		memset(call, 0, offsetof(struct rpc_call, fds));
	} else {
		call = calloc(1, sizeof(*call));
		if (!call) {
			rpc_message_done(ctx, m);
			close_many(fds, n_fds);
			return -ENOMEM;
		}
		call->allocated = true;
	}
	call->transport = transport;
	call->owner = owner;
	call->session = session_ref(session);
	call->ctx = ctx;
	call->root = m->root;
	call->vc = m->vc;
	call->big = m->big;
	call->slot = m->slot;
	call->long_strings = m->long_strings;
	call->n_long_strings = m->n_long_strings;
	call->charge = m->charge;
	*m = (struct rpc_message){};
	call->n_fds = n_fds;
	memcpy(call->fds, fds, n_fds * sizeof(int));
	*ret = call;
	return 0;
}

/* The call's reply is queued, or never will be: its reservation goes. */
static void rpc_unreserve(struct rpc_call *call)
{
	if (call->reserved)
		call->transport->unreserve(call->owner, call->reserved);
	call->reserved = 0;
}

int rpc_deferred_reserve(struct rpc_deferred *d, uint64_t bytes, void (*granted)(void *userdata))
{
	struct rpc_call *call = d->call;

	if (bytes < RPC_RESERVE_MIN)
		return 1;
	if (call->transport->reserve(call->owner, bytes) == 0) {
		d->granted = granted;
		return 0;
	}
	call->reserved = bytes;
	return 1;
}

void rpc_call_reserved(struct rpc_call *call, uint64_t bytes)
{
	struct rpc_deferred *d = &call->deferred;

	call->reserved = bytes;
	d->granted(d->userdata);
}

struct rpc_call *rpc_call_free(struct rpc_call *call)
{
	if (!call)
		return NULL;
	rpc_unreserve(call);
	close_many(call->fds, call->n_fds);
	rpc_message_done(call->ctx, &(struct rpc_message){ .root = call->root,
							   .big = call->big,
							   .slot = call->slot,
							   .long_strings = call->long_strings,
							   .charge = call->charge });
	session_unref(call->session);
	if (call->allocated)
		free(call);
	return NULL;
}

const struct rpc_method *rpc_method_next(size_t *i)
{
	size_t k = *i;

	for (size_t t = 0; t < ELEMENTSOF(method_tables); t++) {
		const struct rpc_method *m = method_tables[t];

		for (; m->name; m++)
			if (k-- == 0) {
				(*i)++;
				return m;
			}
	}
	return NULL;
}

/*
 * The tables' methods by name: an open-addressed hash table (FNV-1a, linear
 * probing), filled once, read-only after. A call's method is then one hash
 * and a comparison or two away, not a comparison with every name (which
 * share their interface's prefix).
 */
#define RPC_METHOD_INDEX_SIZE 256U
static const struct rpc_method *method_index[RPC_METHOD_INDEX_SIZE];
static pthread_once_t method_index_once = PTHREAD_ONCE_INIT;

/* Of the method's own name, after its interface's (interface_len bytes):
 * the names of one interface differ there. */
static uint32_t rpc_name_hash(const char *name, size_t interface_len)
{
	uint32_t h = 2166136261U ^ (uint32_t)interface_len;

	for (name += interface_len; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619U;
	return h;
}

static void rpc_method_index_fill(void)
{
	const struct rpc_method *m;
	size_t i = 0;

	while ((m = rpc_method_next(&i))) {
		uint32_t h = rpc_name_hash(m->name, strrchr(m->name, '.') - m->name);

		/* Half full at most, so every probe ends at an empty slot. */
		assert(i <= RPC_METHOD_INDEX_SIZE / 2);
		while (method_index[h % RPC_METHOD_INDEX_SIZE])
			h++;
		method_index[h % RPC_METHOD_INDEX_SIZE] = m;
	}
}

static const struct rpc_method *rpc_find_method(const struct rpc_ctx *ctx,
						const struct varlink_call *vc)
{
	const char *name = vc->method;
	const struct rpc_method *m;
	uint32_t h;

	for (m = ctx->extra_methods; m && m->name; m++)
		if (strcmp(m->name, name) == 0)
			return m;
	pthread_once(&method_index_once, rpc_method_index_fill);
	for (h = rpc_name_hash(name, vc->interface_len);
	     (m = method_index[h % RPC_METHOD_INDEX_SIZE]); h++)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

static bool rpc_interface_known(const char *method, size_t len)
{
	for (const struct rpc_interface *i = rpc_interfaces; i->name; i++)
		if (strlen(i->name) == len && memcmp(i->name, method, len) == 0)
			return true;
	return false;
}

static const char rpc_empty_reply[] = "{\"parameters\":{}}";

/* {"error": error, "parameters": params}, error when not NULL; takes params. */
static int rpc_send_tree(struct rpc_call *call, const char *error, cJSON *params)
{
	_cleanup_json_ cJSON *p = params;
	_cleanup_json_ cJSON *msg = cJSON_CreateObject();

	if (!msg)
		return -ENOMEM;
	if (error && json_add_string(msg, "error", error) < 0)
		return -ENOMEM;
	if (!p)
		p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	/* A constant key: not copied. */
	cJSON_AddItemToObjectCS(msg, "parameters", TAKE_PTR(p));
	return call->transport->send_json(call->owner, msg);
}

static int rpc_fail(struct rpc_call *call, int err);

/* Whether call's answer goes out now: 1; 0 for a oneway call (it asked for
 * none); -EALREADY when it was answered (one answer per call). */
static int rpc_answering(struct rpc_call *call)
{
	if (call->answered)
		return -EALREADY;
	call->answered = true;
	if (call->dispatched_ns)
		log_debug("Connection %" PRIu64 ": %s answered %.1f us after its dispatch",
			  call->session->id, call->vc.method,
			  (double)(uv_hrtime() - call->dispatched_ns) / 1e3);
	return call->vc.oneway ? 0 : 1;
}

/* r: how queueing the answer went. */
static int rpc_answer_queued(struct rpc_call *call, int r)
{
	if (r < 0)
		log_warning_errno(r, "Connection %" PRIu64 ": cannot queue reply: %m",
				  call->session->id);
	return r;
}

static int rpc_send(struct rpc_call *call, const char *error, cJSON *params)
{
	_cleanup_json_ cJSON *p = params;
	int r = rpc_answering(call);

	if (r <= 0)
		return r;
	/* The commonest reply (Ping's, Unlock's…) is a constant: no tree. */
	if (!error && !p && call->transport->send_text)
		r = call->transport->send_text(call->owner, rpc_empty_reply,
					       sizeof(rpc_empty_reply) - 1);
	else
		r = rpc_send_tree(call, error, TAKE_PTR(p));
	return rpc_answer_queued(call, r);
}

/* Whether s goes into a JSON string as it is, within RPC_FLAT_TEXT_MAX. */
static bool flat_plain(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		if (++n > RPC_FLAT_TEXT_MAX || *s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
			return false;
	return true;
}

static int reply_flat_tree(struct rpc_call *call, const struct rpc_field *f, size_t n)
{
	_cleanup_json_ cJSON *p = cJSON_CreateObject();

	if (!p)
		return rpc_fail(call, -ENOMEM);
	for (size_t i = 0; i < n; i++)
		if ((f[i].text ? json_add_string(p, f[i].name, f[i].text) :
				 json_add_u64(p, f[i].name, f[i].u64)) < 0)
			return rpc_fail(call, -ENOMEM);
	return rpc_reply(call, TAKE_PTR(p));
}

int rpc_reply_flat(struct rpc_call *call, const struct rpc_field *f, size_t n)
{
	char text[sizeof("{\"parameters\":{}}") +
		  RPC_FLAT_FIELDS_MAX * (sizeof("\"\":\"\",") + 2 * RPC_FLAT_TEXT_MAX)];
	char digits[JSON_U64_DIGITS_MAX], *end;
	bool plain = call->transport->send_text && n <= RPC_FLAT_FIELDS_MAX;
	int r;

	/* Names are the methods' own constants, plain by contract: only
	 * their length is checked. */
	for (size_t i = 0; i < n && plain; i++)
		plain = strlen(f[i].name) <= RPC_FLAT_TEXT_MAX &&
			(!f[i].text || flat_plain(f[i].text));
	if (!plain)
		return reply_flat_tree(call, f, n);
	r = rpc_answering(call);
	if (r <= 0)
		return r;
	end = stpcpy(text, "{\"parameters\":{");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			*end++ = ',';
		*end++ = '"';
		end = stpcpy(end, f[i].name);
		end = stpcpy(end, "\":\"");
		end = stpcpy(end, f[i].text ?: json_u64_digits(f[i].u64, digits));
		*end++ = '"';
	}
	end = stpcpy(end, "}}");
	return rpc_answer_queued(call, call->transport->send_text(call->owner, text,
								  (size_t)(end - text)));
}

int rpc_reply_u64(struct rpc_call *call, const char *name, uint64_t value)
{
	const struct rpc_field f = { .name = name, .u64 = value };

	return rpc_reply_flat(call, &f, 1);
}

int rpc_reply(struct rpc_call *call, cJSON *params)
{
	return rpc_send(call, NULL, params);
}

void rpc_reply_start(struct json_out *o, char *buf, size_t size)
{
	json_out_init(o, buf, size);
	json_out_object(o, NULL);
	json_out_object(o, "parameters");
}

/* The tree of o's text, for a transport that takes no text. */
static int send_out_tree(struct rpc_call *call, const struct json_out *o)
{
	_cleanup_json_ cJSON *msg = cJSON_ParseWithLength(o->text, o->len);

	return msg ? call->transport->send_json(call->owner, msg) : -ENOMEM;
}

int rpc_reply_out(struct rpc_call *call, struct json_out *o)
{
	int r;

	json_out_end(o);
	json_out_end(o);
	if (o->err < 0 || o->depth != 0) {
		r = o->err ?: -EINVAL;
		json_out_free(o);
		return rpc_fail(call, r);
	}
	r = rpc_answering(call);
	if (r > 0)
		r = rpc_answer_queued(call, call->transport->send_text ?
						    call->transport->send_text(call->owner, o->text,
									       o->len) :
						    send_out_tree(call, o));
	json_out_free(o);
	return r;
}

int rpc_reply_text(struct rpc_call *call, char *text, size_t len)
{
	int r = rpc_answering(call);

	if (r <= 0) {
		free(text);
		if (r < 0)
			return r;
	} else {
		r = rpc_answer_queued(call, call->transport->send_buffer(call->owner, text, len));
	}
	/* The queue holds the reply now (or nobody does). */
	rpc_unreserve(call);
	return r;
}

/*
 * Every error goes out here. why, the explanation, is logged at debug with
 * the client's pid: org.varlink.service's errors carry only the parameter
 * they declare, so for them the log is where the explanation lives (the
 * client library composes a line from the parameter).
 */
static int send_error(struct rpc_call *call, const char *name, cJSON *params, const char *why)
{
	const struct ucred *cred = &call->session->cred;

	counters_bump(&call->ctx->core->stats.errors, name, false);
	log_full_fields(LOG_DEBUG, 0, LOG_CLIENT(cred),
			"Connection %" PRIu64 " (pid %d uid %u): %s → %s%s%s", call->session->id,
			(int)cred->pid, (unsigned)cred->uid, call->vc.method, name, why ? ": " : "",
			why ?: "");
	rpc_send(call, name, params);
	return rdmamem_error_to_errno(name);
}

static bool is_service_error(const char *name)
{
	static const char prefix[] = VARLINK_SERVICE_INTERFACE ".";

	return strncmp(name, prefix, sizeof(prefix) - 1) == 0;
}

int rpc_error(struct rpc_call *call, const char *name, cJSON *params)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");

	return send_error(call, name, params, cJSON_IsString(m) ? m->valuestring : NULL);
}

/*
 * An error and its explanation: io.rdmamemd's carry it as "message" beside
 * the parameters they declare; org.varlink.service's declare no message,
 * so theirs is only logged.
 */
static int error_explained(struct rpc_call *call, const char *name, cJSON *params, const char *text)
{
	if (is_service_error(name)) {
		cJSON_Delete(params);
		return send_error(call, name, cJSON_CreateObject(), text);
	}
	if (!params)
		params = cJSON_CreateObject();
	if (params && json_add_string(params, "message", text) < 0)
		params = (cJSON_Delete(params), NULL);
	return send_error(call, name, params, text);
}

int rpc_errorf(struct rpc_call *call, const char *name, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return error_explained(call, name, NULL, text);
}

static int invalid_param(struct rpc_call *call, const char *param, const char *why)
{
	cJSON *params = cJSON_CreateObject();

	if (params && json_add_string(params, "parameter", param) < 0)
		params = (cJSON_Delete(params), NULL);
	send_error(call, VARLINK_ERROR_INVALID_PARAMETER, params, why);
	return -EINVAL;
}

int rpc_invalid_param(struct rpc_call *call, const char *param, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return invalid_param(call, param, text);
}

int rpc_error_info(struct rpc_call *call, struct errinfo *e)
{
	const char *name = e->name ?: RDMAMEM_ERROR_INTERNAL;

	if (strcmp(name, VARLINK_ERROR_INVALID_PARAMETER) == 0) {
		errinfo_done(e);
		return invalid_param(call, e->parameter ?: "parameters", e->message);
	}
	return error_explained(call, name, TAKE_PTR(e->params), e->message);
}

int rpc_region_lookup(struct rpc_call *call, uint64_t id, enum region_right right,
		      struct region **ret)
{
	struct errinfo err = {};
	int r;

	r = region_lookup(call->ctx->regions, id, call->session, right, ret, &err);
	return r < 0 ? rpc_error_info(call, &err) : 0;
}

/* "Method failed: reason", for a negative errno nobody answered. */
static int rpc_fail(struct rpc_call *call, int err)
{
	return rpc_errorf(call, RDMAMEM_ERROR_INTERNAL, "%s failed: %s", call->vc.method,
			  strerror(-err));
}

struct rpc_deferred *rpc_defer(struct rpc_call *call, void (*on_cancel)(void *userdata),
			       void *userdata)
{
	struct rpc_deferred *d = &call->deferred;

	assert(!call->answered && !d->call);
	*d = (struct rpc_deferred){
		.call = call,
		.on_cancel = on_cancel,
		.userdata = userdata,
		.live = true,
	};
	return d;
}

void rpc_deferred_on_cancel(struct rpc_deferred *d, void (*on_cancel)(void *userdata),
			    void *userdata)
{
	d->on_cancel = on_cancel;
	d->userdata = userdata;
}

/* The holder is done with d; a call whose handler returned ends here. */
static void rpc_deferred_end(struct rpc_deferred *d)
{
	struct rpc_call *call = d->call;

	assert(d->live);
	d->live = false;
	d->on_cancel = NULL;
	d->room = NULL;
	if (!call->in_handler)
		call->transport->ended(call->owner, call);
}

int rpc_deferred_reply(struct rpc_deferred *d, cJSON *params)
{
	int r = 0;

	if (d->call->cancelled)
		cJSON_Delete(params);
	else
		r = rpc_reply(d->call, params);
	rpc_deferred_end(d);
	return r;
}

int rpc_deferred_reply_flat(struct rpc_deferred *d, const struct rpc_field *fields, size_t n)
{
	int r = 0;

	if (!d->call->cancelled)
		r = rpc_reply_flat(d->call, fields, n);
	rpc_deferred_end(d);
	return r;
}

int rpc_deferred_reply_u64(struct rpc_deferred *d, const char *name, uint64_t value)
{
	const struct rpc_field f = { .name = name, .u64 = value };

	return rpc_deferred_reply_flat(d, &f, 1);
}

int rpc_deferred_reply_text(struct rpc_deferred *d, char *text, size_t len)
{
	int r = 0;

	if (d->call->cancelled)
		free(text);
	else
		r = rpc_reply_text(d->call, text, len);
	rpc_deferred_end(d);
	return r;
}

int rpc_deferred_reply_out(struct rpc_deferred *d, struct json_out *o)
{
	int r = 0;

	if (d->call->cancelled)
		json_out_free(o);
	else
		r = rpc_reply_out(d->call, o);
	rpc_deferred_end(d);
	return r;
}

int rpc_deferred_error(struct rpc_deferred *d, struct errinfo *e)
{
	int r;

	if (d->call->cancelled) {
		r = rdmamem_error_to_errno(e->name ?: RDMAMEM_ERROR_INTERNAL);
		errinfo_done(e);
	} else
		r = rpc_error_info(d->call, e);
	rpc_deferred_end(d);
	return r;
}

int rpc_deferred_fail(struct rpc_deferred *d, int err)
{
	int r = err;

	if (!d->call->cancelled)
		r = rpc_fail(d->call, err);
	rpc_deferred_end(d);
	return r;
}

void rpc_deferred_drop(struct rpc_deferred *d)
{
	rpc_deferred_end(d);
}

int rpc_deferred_continue(struct rpc_deferred *d, cJSON *params)
{
	_cleanup_json_ cJSON *p = params;
	_cleanup_json_ cJSON *msg = NULL;
	struct rpc_call *call = d->call;
	int r;

	assert(d->live);
	if (!call->vc.more)
		return -EINVAL;
	if (call->cancelled)
		return 0;
	msg = cJSON_CreateObject();
	if (!msg || (!p && !(p = cJSON_CreateObject())))
		return -ENOMEM;
	cJSON_AddItemToObjectCS(msg, "parameters", TAKE_PTR(p));
	if (!cJSON_AddTrueToObject(msg, "continues"))
		return -ENOMEM;
	r = call->transport->send_json(call->owner, msg);
	if (r < 0)
		log_warning_errno(r, "Connection %" PRIu64 ": cannot queue reply: %m",
				  call->session->id);
	return r;
}

bool rpc_deferred_room(struct rpc_deferred *d, void (*room)(void *userdata))
{
	struct rpc_call *call = d->call;

	assert(d->live);
	if (call->cancelled || !call->transport->room || call->transport->room(call->owner))
		return true;
	d->room = room;
	return false;
}

void rpc_call_room(struct rpc_call *call)
{
	struct rpc_deferred *d = &call->deferred;
	void (*room)(void *userdata) = d->room;

	d->room = NULL;
	if (d->live && room)
		room(d->userdata);
}

void rpc_call_cancel(struct rpc_call *call)
{
	struct rpc_deferred *d = &call->deferred;
	void (*on_cancel)(void *userdata) = d->on_cancel;

	if (call->cancelled)
		return;
	call->cancelled = true;
	/* The hook may end the handle, and with it free the call. */
	if (d->live && on_cancel) {
		d->on_cancel = NULL;
		on_cancel(d->userdata);
	}
}

/* The decoder's first problem, as InvalidParameter naming the parameter. */
static int invalid_params(struct rpc_call *call, const struct json_dispatch_error *err)
{
	if (err->parent)
		return rpc_invalid_param(call, err->parent, "parameter '%s.%.64s' %s", err->parent,
					 err->field ?: "", err->reason);
	if (!err->field)
		return rpc_invalid_param(call, "parameters", "'parameters' %s", err->reason);
	/* The name is the client's: one that is no name of ours and could be
	 * megabytes is not echoed. */
	if (strnlen(err->field, VARLINK_METHOD_MAX + 1) > VARLINK_METHOD_MAX)
		return rpc_invalid_param(
			call, "parameters",
			"'parameters' has a parameter whose name is longer than %u "
			"bytes",
			VARLINK_METHOD_MAX);
	return rpc_invalid_param(call, err->field, "parameter '%s' %s", err->field, err->reason);
}

/*
 * Everything the handler of m may take for granted: its parameters decoded
 * into params (see struct rpc_method), checked, and its regions looked up.
 * Answers what it refuses and returns its errno.
 */
static int rpc_call_prepare(struct rpc_call *call, const struct rpc_method *m, void *params)
{
	struct json_dispatch_error err;
	const struct varlink_field *f;
	int r;

	if (m->params_init)
		memcpy(params, m->params_init, m->params_size);
	else
		memset(params, 0, m->params_size);
	if (json_dispatch(call->vc.parameters, m->symbol->fields, params, &err) < 0)
		return invalid_params(call, &err);
	for (f = m->symbol->fields; f->name; f++)
		if (f->resolve == RPC_RESOLVE_LENGTH) {
			struct rpc_string *s = (void *)((char *)params + f->offset);

			s->len = s->s ? rpc_strlen(call, s->s) : 0;
		}
	if (m->check) {
		r = m->check(call, params);
		if (r < 0)
			return r;
	}
	for (f = m->symbol->fields; f->name; f++)
		if (f->resolve >= RPC_RESOLVE_REGION) {
			struct rpc_region *reg = (void *)((char *)params + f->offset);

			r = rpc_region_lookup(call, reg->id, f->resolve - RPC_RESOLVE_REGION,
					      &reg->region);
			if (r < 0)
				return r;
		}
	return 0;
}

/* The handler returned: the regions looked up for it go. */
static void rpc_call_params_done(const struct rpc_method *m, void *params)
{
	for (const struct varlink_field *f = m->symbol->fields; f->name; f++)
		if (f->resolve >= RPC_RESOLVE_REGION) {
			struct rpc_region *reg = (void *)((char *)params + f->offset);

			reg->region = region_unref(reg->region);
		}
}

/* Objects a page may look at, seen by the caller or not: the bound on the
 * loop's time when a caller sees few of many. */
#define LIST_PAGE_SCAN_MAX (8 * LIST_PAGE_MAX)

const struct rpc_page_params rpc_page_init = { .limit = LIST_PAGE_DEFAULT };

int rpc_reply_page(struct rpc_call *call, const struct rpc_page_params *p, const struct idseq *s,
		   const char *name,
		   int (*item)(struct rpc_call *call, struct idseq_node *node, cJSON **ret))
{
	_cleanup_json_ cJSON *reply = NULL;
	size_t i, scanned = 0, n = 0;
	int64_t limit;
	cJSON *list;
	int r;

	if (p->limit < 1)
		return rpc_invalid_param(call, "limit", "parameter 'limit' must be at least 1");
	limit = MIN(p->limit, (int64_t)LIST_PAGE_MAX);

	reply = cJSON_CreateObject();
	list = reply ? cJSON_AddArrayToObject(reply, name) : NULL;
	if (!list)
		return -ENOMEM;
	for (i = idseq_seek(s, p->after);
	     i < s->n && n < (size_t)limit && scanned < LIST_PAGE_SCAN_MAX; i++, scanned++) {
		cJSON *o = NULL;

		if (!s->slots[i].node)
			continue;
		r = item(call, s->slots[i].node, &o);
		if (r < 0)
			return r;
		if (!o)
			continue;
		cJSON_AddItemToArray(list, o);
		n++;
	}
	/* The idseq keeps no holes at its end: a slot left means more. */
	if (i < s->n && json_add_u64(reply, "next", s->slots[i - 1].id) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

int rpc_take_fd(struct rpc_call *call, const char *param, uint32_t index, int *ret_fd)
{
	if (index >= call->n_fds || call->fds[index] < 0)
		return rpc_invalid_param(call, param,
					 "parameter '%s' names file descriptor %u, but the message "
					 "carries %zu and each may be used once",
					 param, index, call->n_fds);
	*ret_fd = TAKE_FD(call->fds[index]);
	return 0;
}

bool rpc_dispatch(struct rpc_call *call)
{
	const struct varlink_call *vc = &call->vc;
	const struct rpc_method *m;

	if (log_get_max_level() >= LOG_DEBUG)
		call->dispatched_ns = uv_hrtime();
	m = rpc_find_method(call->ctx, vc);
	/* Known methods by their static name; others under one label, so a
	 * client cannot grow the table without bound. */
	counters_bump(&call->ctx->core->stats.calls, m ? m->name : "(unknown method)", false);
	if (!m) {
		_cleanup_json_ cJSON *params = cJSON_CreateObject();
		bool known = rpc_interface_known(vc->method, vc->interface_len);

		if (!known && params) {
			char iface[VARLINK_METHOD_MAX + 1];

			snprintf(iface, sizeof(iface), "%.*s", (int)vc->interface_len, vc->method);
			json_add_string(params, "interface", iface);
		} else if (params) {
			json_add_string(params, "method", vc->method);
		}
		rpc_error(call,
			  known ? VARLINK_ERROR_METHOD_NOT_FOUND :
				  VARLINK_ERROR_INTERFACE_NOT_FOUND,
			  TAKE_PTR(params));
		return false;
	}
	call->method = m;

	if (vc->upgrade) {
		rpc_invalid_param(call, "upgrade", "no method of this service supports 'upgrade'");
		return false;
	}
	if (call->n_fds > 0 && !(m->flags & RPC_ACCEPTS_FDS)) {
		rpc_errorf(call, RDMAMEM_ERROR_TOO_MANY_FDS,
			   "%s takes no file descriptors, but the message carries %zu", vc->method,
			   call->n_fds);
		return false;
	}

	return rpc_call_run(call, m);
}

bool rpc_call_run(struct rpc_call *call, const struct rpc_method *m)
{
	_Alignas(max_align_t) unsigned char params[RPC_PARAMS_MAX];
	int r;

	call->method = m;
	call->in_handler = true;
	r = rpc_call_prepare(call, m, params);
	if (r == 0)
		r = m->handler(call, params);
	rpc_call_params_done(m, params);
	call->in_handler = false;
	/* Deferred: the holder answers (a handler that deferred returns 0). */
	if (call->deferred.live)
		return true;
	/* Deferred and ended already, answered or not: nothing to add. */
	if (call->deferred.call)
		return false;
	if (r < 0 && !call->answered)
		rpc_fail(call, r);
	else if (!call->answered)
		rpc_reply(call, NULL);
	return false;
}
