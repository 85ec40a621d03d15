/* SPDX-License-Identifier: BSD-3-Clause */
/* Typed helpers for regions, transfers and leases. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client-internal.h"
#include "params_text.h"
#include "staging.h"
#include "proto/base64.h"
#include "proto/hex.h"
#include "proto/json.h"
#include "proto/ranges.h"

/* What one Read or Write call moves: well inside the daemon's default
 * inline limit (4 MiB) and, base64-encoded, inside the 16 MiB message. */
#define CHUNK_READ (1U << 20)
#define CHUNK_WRITE (4U << 20)

static const char *const mode_names[] = {
	[RDMAMEM_LOCK_SHARED] = "shared",
	[RDMAMEM_LOCK_DISJOINT] = "disjoint",
	[RDMAMEM_LOCK_EXCLUSIVE] = "exclusive",
};

static bool mode_is_valid(enum rdmamem_lock_mode m)
{
	return (unsigned)m <= RDMAMEM_LOCK_EXCLUSIVE;
}

/* Builds {"name": "decimal", ...} objects without ceremony at call sites. */
static cJSON *params_new(void)
{
	return cJSON_CreateObject();
}

static int add_id(cJSON *p, const char *name, uint64_t v)
{
	return p ? json_add_u64(p, name, v) : -ENOMEM;
}

/* Calls and frees params; hands back the reply's u64 field name if asked. */
static int call_u64(struct rdmamem_client *c, const char *method, cJSON *params, const int *fds,
		    size_t n_fds, int extra_wait_ms, const char *name, uint64_t *ret)
{
	_cleanup_json_ cJSON *p = params;
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL;
	uint64_t v;
	int r;

	if (!p)
		return -ENOMEM;
	r = rdmamem__call(c, method, p, fds, n_fds, extra_wait_ms, &root, &reply, NULL, NULL);
	if (r < 0 || !name)
		return r;
	if (json_to_u64(cJSON_GetObjectItemCaseSensitive(reply, name), &v) < 0) {
		rdmamem__set_error(c, NULL, "the reply to %s lacks '%s'", method, name);
		return -EPROTO;
	}
	*ret = v;
	return 0;
}

_public_ int rdmamem_memfd_create(const char *name, size_t size, int *ret_fd, void **ret_addr)
{
	_cleanup_close_ int fd = -EBADF;
	void *addr = NULL;

	if (!ret_fd || size == 0)
		return -EINVAL;
	fd = memfd_create(name ?: "rdmamem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return negative_errno();
	if (ftruncate(fd, (off_t)size) < 0)
		return negative_errno();
	/* Fixed size from here on: the daemon's mapping can never SIGBUS. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return negative_errno();
	if (ret_addr) {
		addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (addr == MAP_FAILED)
			return negative_errno();
		*ret_addr = addr;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Register, and what the library remembers of its answer: the reclaim
 * token of a region the daemon keeps across its restarts. Takes params. */
static int register_call(struct rdmamem_client *c, cJSON *params, const int *fds, size_t n_fds,
			 int extra_wait_ms, uint64_t *ret_region)
{
	_cleanup_json_ cJSON *p = params;
	_cleanup_json_ cJSON *root = NULL;
	const cJSON *token;
	cJSON *reply = NULL;
	int r;

	if (!p)
		return -ENOMEM;
	r = rdmamem__call(c, "io.rdmamemd.Register", p, fds, n_fds, extra_wait_ms, &root, &reply,
			  NULL, NULL);
	if (r < 0)
		return r;
	if (json_get_u64(reply, "region", ret_region) < 0) {
		rdmamem__set_error(c, NULL, "the reply to io.rdmamemd.Register lacks 'region'");
		return -EPROTO;
	}
	/* Kept across the daemon's restarts: reclaimed after a reconnect. */
	token = cJSON_GetObjectItemCaseSensitive(reply, "reclaim_token");
	if (cJSON_IsString(token))
		(void)rdmamem__kept_add(c, *ret_region, token->valuestring);
	return 0;
}

int rdmamem__register_memfd(struct rdmamem_client *c, int fd, uint64_t offset, uint64_t length,
			    bool keep, uint64_t *ret_region)
{
	cJSON *p;

	if (!ret_region || fd < 0)
		return -EINVAL;
	p = params_new();
	if (p && (json_add_int(p, "fd", 0) < 0 || add_id(p, "offset", offset) < 0 ||
		  (length && add_id(p, "length", length) < 0) ||
		  (!keep && !cJSON_AddFalseToObject(p, "keep"))))
		p = (cJSON_Delete(p), NULL);
	return register_call(c, p, &fd, 1, 0, ret_region);
}

_public_ int rdmamem_register(struct rdmamem_client *c, int fd, uint64_t offset, uint64_t length,
			      uint64_t *ret_region)
{
	return rdmamem__register_memfd(c, fd, offset, length, true, ret_region);
}

_public_ int rdmamem_unregister(struct rdmamem_client *c, uint64_t region)
{
	cJSON *p = params_new();

	int r;

	if (add_id(p, "region", region) < 0)
		p = (cJSON_Delete(p), NULL);
	r = call_u64(c, "io.rdmamemd.Unregister", p, NULL, 0, 0, NULL, NULL);
	/* Gone, or never this connection's: nothing to reclaim either way. */
	if (r == 0 || r == -ENOENT)
		rdmamem__kept_forget(c, region);
	return r;
}

static int read_chunk(struct rdmamem_client *c, uint64_t region, uint64_t offset, void *buf,
		      size_t length, uint64_t lease)
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *data;
	ssize_t n;
	int r;

	if (add_id(p, "region", region) < 0 || add_id(p, "offset", offset) < 0 ||
	    add_id(p, "length", length) < 0 || (lease && add_id(p, "lease", lease) < 0))
		return -ENOMEM;
	r = rdmamem__call(c, "io.rdmamemd.Read", p, NULL, 0, -1, &root, &reply, NULL, NULL);
	if (r < 0)
		return r;
	data = cJSON_GetObjectItemCaseSensitive(reply, "data");
	n = -1;
	if (cJSON_IsString(data))
		n = base64_decoded_len(data->valuestring, strlen(data->valuestring));
	if (n != (ssize_t)length) {
		rdmamem__set_error(c, NULL, "the daemon sent %zd bytes for a read of %zu", n,
				   length);
		return -EPROTO;
	}
	base64_decode(data->valuestring, strlen(data->valuestring), buf);
	return 0;
}

static int write_chunk(struct rdmamem_client *c, uint64_t region, uint64_t offset, const void *buf,
		       size_t length, enum rdmamem_lock_mode mode, uint64_t lease)
{
	cJSON *p = params_new();
	char *text;
	cJSON *s;

	text = malloc(base64_encoded_len(length) + 1);
	if (!text || !p) {
		free(text);
		cJSON_Delete(p);
		return -ENOMEM;
	}
	base64_encode(buf, length, text);
	s = cJSON_CreateString(text);
	free(text);
	if (!s) {
		cJSON_Delete(p);
		return -ENOMEM;
	}
	cJSON_AddItemToObject(p, "data", s);
	if (add_id(p, "region", region) < 0 || add_id(p, "offset", offset) < 0 ||
	    json_add_string(p, "mode", mode_names[mode]) < 0 ||
	    (lease && add_id(p, "lease", lease) < 0))
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.Write", p, NULL, 0, -1, NULL, NULL);
}

/*
 * One chunk through the staging region: a Copy out of it after the bytes
 * went in (write), or into it before they come out (read). The staging end
 * takes its own lock, exclusive: nobody else knows it.
 */
static int staged_chunk(struct rdmamem_client *c, const struct rdmamem__staging *s, uint64_t region,
			uint64_t offset, char *buf, size_t length, bool write,
			enum rdmamem_lock_mode mode, uint64_t lease)
{
	struct rdmamem_copy cp = { .length = length, .mode = RDMAMEM_LOCK_EXCLUSIVE };
	int r;

	if (write) {
		memcpy(s->map, buf, length);
		cp.from_region = s->region;
		cp.to_region = region;
		cp.to_offset = offset;
		cp.to_lease = lease;
		cp.mode = mode;
		return rdmamem_copy(c, &cp);
	}
	cp.from_region = region;
	cp.from_offset = offset;
	cp.from_lease = lease;
	cp.to_region = s->region;
	r = rdmamem_copy(c, &cp);
	if (r >= 0)
		memcpy(buf, s->map, length);
	return r;
}

/*
 * Runs a transfer in chunks: through the staging region from STAGING_MIN
 * bytes on when the daemon took one, else as base64. A transfer of several
 * chunks without a lease takes one for its duration, so that nobody sees
 * or makes half of it.
 */
static int chunked_on(struct rdmamem_client *c, uint64_t region, uint64_t offset, char *buf,
		      size_t length, bool write, enum rdmamem_lock_mode mode, uint64_t lease);

static int chunked(struct rdmamem_client *c, uint64_t region, uint64_t offset, char *buf,
		   size_t length, bool write, enum rdmamem_lock_mode mode, uint64_t lease)
{
	int r;

	if (!c || (length && !buf) || !mode_is_valid(mode) || offset + length < offset)
		return -EINVAL;
	/* Reconnected here, if need be, or not at all: the calls below share
	 * the staging region and the lease of one connection. */
	r = rdmamem__reclaim_if_needed(c);
	if (r < 0)
		return r;
	c->op_depth++;
	r = chunked_on(c, region, offset, buf, length, write, mode, lease);
	c->op_depth--;
	return r;
}

static int chunked_on(struct rdmamem_client *c, uint64_t region, uint64_t offset, char *buf,
		      size_t length, bool write, enum rdmamem_lock_mode mode, uint64_t lease)
{
	size_t chunk = write ? CHUNK_WRITE : CHUNK_READ, done = 0;
	struct rdmamem__staging *staging = NULL;
	uint64_t own = 0;
	int r = 0, q;

	if (length >= STAGING_MIN) {
		r = rdmamem__staging_get(c, &staging);
		if (r < 0)
			return r;
		if (r > 0)
			chunk = STAGING_SIZE;
		r = 0;
	}
	if (length > chunk && !lease) {
		r = rdmamem_lock(c, region, write ? mode : RDMAMEM_LOCK_SHARED, -1, &own);
		if (r < 0)
			return r;
		lease = own;
	}
	while (r >= 0 && (done < length || length == 0)) {
		size_t n = MIN(chunk, length - done);

		if (staging)
			r = staged_chunk(c, staging, region, offset + done, buf + done, n, write,
					 mode, lease);
		else if (write)
			r = write_chunk(c, region, offset + done, buf + done, n, mode, lease);
		else
			r = read_chunk(c, region, offset + done, buf + done, n, lease);
		done += n;
		if (length == 0)
			break;
	}
	if (own) {
		char *name = NULL, *message = NULL;

		/* The caller must hear why the transfer failed, not how giving
		 * the lease back went (on a broken connection: it could not). */
		if (r < 0)
			rdmamem__take_error(c, &name, &message);
		q = rdmamem_unlock(c, own);
		if (r >= 0)
			r = q;
		else
			rdmamem__put_error(c, name, message);
	}
	return r;
}

_public_ int rdmamem_read(struct rdmamem_client *c, uint64_t region, uint64_t offset, void *buf,
			  size_t length, uint64_t lease)
{
	return chunked(c, region, offset, buf, length, false, RDMAMEM_LOCK_SHARED, lease);
}

_public_ int rdmamem_write(struct rdmamem_client *c, uint64_t region, uint64_t offset,
			   const void *buf, size_t length, enum rdmamem_lock_mode mode,
			   uint64_t lease)
{
	if (mode == RDMAMEM_LOCK_SHARED)
		return -EINVAL;
	return chunked(c, region, offset, (char *)buf, length, true, mode, lease);
}

/* A Copy's end; what the daemon takes as the default (offset 0, no lease)
 * is left out: each field is parsed and checked on both sides. */
static void end_text(struct params_text *t, const char *name, uint64_t region, uint64_t offset,
		     uint64_t lease)
{
	params_text_open(t, name);
	params_text_id(t, "region", region);
	if (offset)
		params_text_id(t, "offset", offset);
	if (lease)
		params_text_id(t, "lease", lease);
	params_text_close(t);
}

_public_ int rdmamem_copy(struct rdmamem_client *c, const struct rdmamem_copy *cp)
{
	struct params_text t;

	if (!c || !cp || !mode_is_valid(cp->mode) || cp->mode == RDMAMEM_LOCK_SHARED)
		return -EINVAL;
	params_text_init(&t);
	end_text(&t, "from", cp->from_region, cp->from_offset, cp->from_lease);
	end_text(&t, "to", cp->to_region, cp->to_offset, cp->to_lease);
	params_text_id(&t, "length", cp->length);
	/* Exclusive is the daemon's default mode for a Copy's destination. */
	if (cp->mode != RDMAMEM_LOCK_EXCLUSIVE)
		params_text_name(&t, "mode", mode_names[cp->mode]);
	return call_u64(c, "io.rdmamemd.Copy", params_text_done(&t), NULL, 0, -1, NULL, NULL);
}

_public_ int rdmamem_lock(struct rdmamem_client *c, uint64_t region, enum rdmamem_lock_mode mode,
			  int timeout_ms, uint64_t *ret_lease)
{
	struct params_text t;

	if (!ret_lease || !mode_is_valid(mode) || timeout_ms < -1)
		return -EINVAL;
	params_text_init(&t);
	params_text_id(&t, "region", region);
	params_text_name(&t, "mode", mode_names[mode]);
	params_text_int(&t, "timeout_ms", timeout_ms);
	/* The daemon answers once the lock is free or timeout_ms passed. */
	return call_u64(c, "io.rdmamemd.Lock", params_text_done(&t), NULL, 0, timeout_ms, "lease",
			ret_lease);
}

_public_ int rdmamem_unlock(struct rdmamem_client *c, uint64_t lease)
{
	struct params_text t;

	params_text_init(&t);
	params_text_id(&t, "lease", lease);
	return call_u64(c, "io.rdmamemd.Unlock", params_text_done(&t), NULL, 0, 0, NULL, NULL);
}

_public_ int rdmamem_share(struct rdmamem_client *c, uint64_t region, uint32_t id, unsigned flags)
{
	cJSON *p;

	if (flags & ~(RDMAMEM_SHARE_GROUP | RDMAMEM_SHARE_READONLY))
		return -EINVAL;
	p = params_new();
	if (add_id(p, "region", region) < 0 ||
	    json_add_int(p, flags & RDMAMEM_SHARE_GROUP ? "gid" : "uid", id) < 0 ||
	    json_add_bool(p, "readonly", flags & RDMAMEM_SHARE_READONLY) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.Share", p, NULL, 0, 0, NULL, NULL);
}

_public_ int rdmamem_unshare(struct rdmamem_client *c, uint64_t region, uint32_t id, unsigned flags)
{
	cJSON *p;

	if (flags & ~RDMAMEM_SHARE_GROUP)
		return -EINVAL;
	p = params_new();
	if (add_id(p, "region", region) < 0 ||
	    json_add_int(p, flags & RDMAMEM_SHARE_GROUP ? "gid" : "uid", id) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.Unshare", p, NULL, 0, 0, NULL, NULL);
}

_public_ int rdmamem_register_on(struct rdmamem_client *c, uint64_t region, const char *device,
				 struct rdmamem_registration *ret)
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *list, *reg, *item;
	int r;

	if (!device || !ret || strlen(device) >= sizeof(ret->device))
		return -EINVAL;
	list = p ? cJSON_AddArrayToObject(p, "devices") : NULL;
	if (!list || add_id(p, "region", region) < 0)
		return -ENOMEM;
	cJSON_AddItemToArray(list, cJSON_CreateString(device));
	/* Registration pins memory: no deadline of ours on it. */
	r = rdmamem__call(c, "io.rdmamemd.RegisterOn", p, NULL, 0, -1, &root, &reply, NULL, NULL);
	if (r < 0)
		return r;
	reg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reply, "registrations"), 0);
	item = cJSON_GetObjectItemCaseSensitive(reg, "error");
	if (cJSON_IsString(item)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(reg, "errno");

		rdmamem__set_error(c, NULL, "%s", item->valuestring);
		return cJSON_IsNumber(e) && e->valueint > 0 ? -e->valueint : -EIO;
	}
	if (rdmamem__registration_parse(reg, ret) < 0) {
		rdmamem__set_error(c, NULL, "the daemon's registration lacks its keys");
		return -EPROTO;
	}
	rdmamem__kept_device(c, region, device);
	return 0;
}

_public_ int rdmamem_access_token_create(struct rdmamem_client *c, char ret[RDMAMEM_TOKEN_LEN + 1])
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *t;
	int r;

	if (!ret)
		return -EINVAL;
	r = rdmamem__call(c, "io.rdmamemd.CreateAccessToken", p, NULL, 0, 0, &root, &reply, NULL,
			  NULL);
	if (r < 0)
		return r;
	t = cJSON_GetObjectItemCaseSensitive(reply, "token");
	if (!cJSON_IsString(t) || strlen(t->valuestring) != RDMAMEM_TOKEN_LEN)
		return -EPROTO;
	memcpy(ret, t->valuestring, RDMAMEM_TOKEN_LEN + 1);
	return 0;
}

_public_ int rdmamem_access_token_revoke(struct rdmamem_client *c, const char *token)
{
	cJSON *p = params_new();

	if (!token) {
		cJSON_Delete(p);
		return -EINVAL;
	}
	if (p && json_add_string(p, "token", token) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.RevokeAccessToken", p, NULL, 0, 0, NULL, NULL);
}

_public_ int rdmamem_register_cuda_vmm_chunks(struct rdmamem_client *c, const int *fds, size_t n,
					      uint64_t alloc_size, uint64_t offset, uint64_t length,
					      uint64_t *ret_region)
{
	cJSON *p;

	if (!ret_region || !fds || n == 0 || n > RDMAMEM_CUDA_VMM_CHUNKS_MAX || alloc_size == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (fds[i] < 0)
			return -EINVAL;
	p = params_new();
	/* "chunks" only when there are several: a daemon of before knows one. */
	if (p && (json_add_string(p, "memory", "cuda-vmm") < 0 || json_add_int(p, "fd", 0) < 0 ||
		  add_id(p, "size", alloc_size) < 0 || add_id(p, "offset", offset) < 0 ||
		  (length && add_id(p, "length", length) < 0) ||
		  (n > 1 && json_add_int(p, "chunks", (int)n) < 0)))
		p = (cJSON_Delete(p), NULL);
	/* The first GPU import loads the driver and creates a context: slow. */
	return register_call(c, p, fds, n, -1, ret_region);
}

_public_ int rdmamem_register_cuda_vmm(struct rdmamem_client *c, int fd, uint64_t alloc_size,
				       uint64_t offset, uint64_t length, uint64_t *ret_region)
{
	return rdmamem_register_cuda_vmm_chunks(c, &fd, 1, alloc_size, offset, length, ret_region);
}

_public_ int rdmamem_register_cuda_ipc(struct rdmamem_client *c, const void *handle, int gpu,
				       uint64_t offset, uint64_t length, uint64_t *ret_region)
{
	char hex[2 * RDMAMEM_CUDA_IPC_HANDLE_SIZE + 1];
	cJSON *p;

	if (!ret_region || !handle || gpu < 0)
		return -EINVAL;
	hex_encode(handle, RDMAMEM_CUDA_IPC_HANDLE_SIZE, hex);
	p = params_new();
	if (p && (json_add_string(p, "memory", "cuda-ipc") < 0 ||
		  json_add_string(p, "ipc_handle", hex) < 0 || json_add_int(p, "gpu", gpu) < 0 ||
		  add_id(p, "offset", offset) < 0 || (length && add_id(p, "length", length) < 0)))
		p = (cJSON_Delete(p), NULL);
	return register_call(c, p, NULL, 0, -1, ret_region);
}

_public_ int rdmamem_region_export(struct rdmamem_client *c, uint64_t region,
				   const char *const *devices, char **ret_descriptor,
				   char ret_token[RDMAMEM_TOKEN_LEN + 1], uint64_t *ret_id)
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *d, *t, *list;
	uint64_t id;
	int r;

	if (!ret_descriptor)
		return -EINVAL;
	if (!p || add_id(p, "region", region) < 0)
		return -ENOMEM;
	if (devices) {
		list = cJSON_AddArrayToObject(p, "devices");
		if (!list)
			return -ENOMEM;
		for (const char *const *n = devices; *n; n++)
			if (!cJSON_AddItemToArray(list, cJSON_CreateString(*n)))
				return -ENOMEM;
	}
	r = rdmamem__call(c, "io.rdmamemd.ExportRegion", p, NULL, 0, 0, &root, &reply, NULL, NULL);
	if (r < 0)
		return r;
	d = cJSON_GetObjectItemCaseSensitive(reply, "descriptor");
	t = cJSON_GetObjectItemCaseSensitive(reply, "token");
	if (!cJSON_IsString(d) || !cJSON_IsString(t) ||
	    strlen(t->valuestring) != RDMAMEM_TOKEN_LEN ||
	    json_to_u64(cJSON_GetObjectItemCaseSensitive(reply, "id"), &id) < 0) {
		rdmamem__set_error(c, NULL, "the reply to ExportRegion lacks its descriptor");
		return -EPROTO;
	}
	*ret_descriptor = strdup(d->valuestring);
	if (!*ret_descriptor)
		return -ENOMEM;
	if (ret_token)
		memcpy(ret_token, t->valuestring, RDMAMEM_TOKEN_LEN + 1);
	if (ret_id)
		*ret_id = id;
	return 0;
}

_public_ int rdmamem_remote_import_info(struct rdmamem_client *c, const char *descriptor,
					uint64_t *ret_remote, struct rdmamem_remote_info *ret_info)
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	struct rdmamem_remote_info info = {};
	cJSON *reply = NULL;
	const cJSON *item;
	uint64_t id;
	int r;

	if (!descriptor || !ret_remote)
		return -EINVAL;
	if (!p || json_add_string(p, "descriptor", descriptor) < 0)
		return -ENOMEM;
	r = rdmamem__call(c, "io.rdmamemd.ImportRemote", p, NULL, 0, 0, &root, &reply, NULL, NULL);
	if (r < 0)
		return r;
	if (json_get_u64(reply, "remote", &id) < 0 ||
	    json_get_u64(reply, "export", &info.export_id) < 0 ||
	    json_get_u64(reply, "length", &info.length) < 0 ||
	    !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(reply, "access")) ||
	    !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(reply, "devices"))) {
		rdmamem__set_error(c, NULL, "the reply to ImportRemote lacks what it must say");
		return -EPROTO;
	}
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(reply, "access")) {
		const char *a = cJSON_GetStringValue(item);

		if (a && strcmp(a, "read") == 0)
			info.access |= RDMAMEM_REMOTE_READ;
		else if (a && strcmp(a, "write") == 0)
			info.access |= RDMAMEM_REMOTE_WRITE;
	}
	info.n_devices =
		(unsigned)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reply, "devices"));
	*ret_remote = id;
	if (ret_info)
		*ret_info = info;
	return 0;
}

_public_ int rdmamem_remote_import(struct rdmamem_client *c, const char *descriptor,
				   uint64_t *ret_remote)
{
	return rdmamem_remote_import_info(c, descriptor, ret_remote, NULL);
}

_public_ int rdmamem_remote_release(struct rdmamem_client *c, uint64_t remote)
{
	cJSON *p = params_new();

	if (add_id(p, "remote", remote) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.ReleaseRemote", p, NULL, 0, 0, NULL, NULL);
}

/*
 * From this many ranges on (24 KiB of records) they travel in a sealed
 * memfd: its fixed cost (memfd_create, write, seals; the daemon's fstat,
 * mmap, munmap: some 20 us) is then below what the text costs both ends
 * (encode, format, the daemon's text check, parse and decode: about 0.1 us
 * a range), and a batch of any size is a small message.
 */
#define RANGES_FD_MIN 1024

/* ranges[0..n) as packed text (proto/ranges.h), malloc()ed; quoted as a
 * JSON string when quoted is set. NULL when out of memory or too many. */
static char *ranges_text(const struct rdmamem_range *ranges, size_t n, bool quoted)
{
	_Static_assert(sizeof(struct rdmamem_range) == sizeof(struct ranges_item) &&
			       offsetof(struct rdmamem_range, remote_offset) ==
				       offsetof(struct ranges_item, remote_offset) &&
			       offsetof(struct rdmamem_range, length) ==
				       offsetof(struct ranges_item, length),
		       "the public range is the codec's");
	size_t len, q = quoted ? 1 : 0;
	char *text;

	if (n > (SIZE_MAX - 3) / 32)
		return NULL;
	len = ranges_encoded_len(n);
	text = malloc(len + 2 * q + 1);
	if (!text)
		return NULL;
	ranges_encode((const struct ranges_item *)ranges, n, text + q);
	if (quoted) {
		text[0] = '"';
		text[len + 1] = '"';
	}
	text[len + 2 * q] = '\0';
	return text;
}

_public_ int rdmamem_ranges_pack(const struct rdmamem_range *ranges, size_t n, char **ret_text,
				 int *ret_fd)
{
	int r;

	if (!ranges || n == 0 || !ret_text || !ret_fd)
		return -EINVAL;
	*ret_text = NULL;
	*ret_fd = -EBADF;
	if (n >= RANGES_FD_MIN) {
		r = ranges_memfd((const struct ranges_item *)ranges, n, ret_fd);
		return r < 0 ? r : 1;
	}
	*ret_text = ranges_text(ranges, n, false);
	return *ret_text ? 0 : -ENOMEM;
}

_public_ int rdmamem_indices_pack(const uint64_t *indices, size_t n, char **ret_text)
{
	char *text;

	if (!indices || n == 0 || !ret_text)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (indices[i] > UINT32_MAX)
			return -ERANGE;
	text = malloc(ranges_indices_encoded_len(n) + 1);
	if (!text)
		return -ENOMEM;
	ranges_indices_encode(indices, n, text);
	*ret_text = text;
	return 0;
}

/*
 * Adds "packed": the packed form of ranges[0..n) (proto/ranges.h). A raw
 * item holding the quoted text: printing a megabyte string is then one
 * copy, not a scan for characters to escape (base64 has none). From
 * RANGES_FD_MIN ranges on, "packed_fd": 0 instead, the records in a new
 * sealed memfd, *ret_fd (the caller's to close after the call; -EBADF when
 * none was made), fd 0 of the message.
 */
static int add_packed(cJSON *o, const struct rdmamem_range *ranges, size_t n, int *ret_fd)
{
	_cleanup_free_ char *text = NULL;
	cJSON *raw;

	*ret_fd = -EBADF;
	if (!o)
		return -ENOMEM;
	if (n >= RANGES_FD_MIN) {
		int r = ranges_memfd((const struct ranges_item *)ranges, n, ret_fd);

		if (r < 0)
			return r;
		return json_add_int(o, "packed_fd", 0);
	}
	text = ranges_text(ranges, n, true);
	if (!text)
		return -ENOMEM;
	raw = cJSON_CreateRaw("");
	if (!raw)
		return -ENOMEM;
	/* The item takes the text as it is (cJSON_CreateRaw copies). */
	free(raw->valuestring);
	raw->valuestring = TAKE_PTR(text);
	if (!cJSON_AddItemToObject(o, "packed", raw)) {
		cJSON_Delete(raw);
		return -ENOMEM;
	}
	return 0;
}

_public_ int rdmamem_transfer_prepare(struct rdmamem_client *c, uint64_t region, uint64_t remote,
				      const struct rdmamem_range *ranges, size_t n_ranges,
				      uint64_t *ret_plan)
{
	_cleanup_close_ int fd = -EBADF;
	cJSON *p = params_new();

	if (!ret_plan || !ranges || n_ranges == 0) {
		cJSON_Delete(p);
		return -EINVAL;
	}
	if (add_id(p, "region", region) < 0 || add_id(p, "remote", remote) < 0 ||
	    add_packed(p, ranges, n_ranges, &fd) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.PrepareTransfer", p, &fd, fd >= 0, 0, "plan", ret_plan);
}

static int notification_parse(const cJSON *o, struct rdmamem_notification *ret)
{
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "sender_uid");
	ssize_t len;

	if (!cJSON_IsString(data) || !cJSON_IsNumber(uid) ||
	    json_to_u64(cJSON_GetObjectItemCaseSensitive(o, "export"), &ret->export_id) < 0 ||
	    json_to_u64(cJSON_GetObjectItemCaseSensitive(o, "received_usec"), &ret->received_usec) <
		    0)
		return -EPROTO;
	len = base64_decoded_len(data->valuestring, strlen(data->valuestring));
	if (len < 0 || len > RDMAMEM_NOTIFY_MAX)
		return -EPROTO;
	base64_decode(data->valuestring, strlen(data->valuestring), ret->data);
	ret->len = (size_t)len;
	ret->sender_uid = (uint32_t)uid->valuedouble;
	return 0;
}

_public_ int rdmamem_notifications_wait(struct rdmamem_client *c, int timeout_ms,
					struct rdmamem_notification *ret, size_t n)
{
	_cleanup_json_ cJSON *p = params_new();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *item;
	const cJSON *list;
	size_t k = 0;
	int r;

	if (!ret || n == 0 || n > 256 || timeout_ms < 0)
		return -EINVAL;
	if (!p || !cJSON_AddNumberToObject(p, "timeout_ms", timeout_ms) ||
	    !cJSON_AddNumberToObject(p, "max", (double)n))
		return -ENOMEM;
	r = rdmamem__call(c, "io.rdmamemd.WaitNotifications", p, NULL, 0, timeout_ms, &root, &reply,
			  NULL, NULL);
	if (r < 0)
		return r;
	list = cJSON_GetObjectItemCaseSensitive(reply, "notifications");
	if (!cJSON_IsArray(list) || (size_t)cJSON_GetArraySize(list) > n)
		goto bad;
	cJSON_ArrayForEach(item, list)
		if (notification_parse(item, &ret[k++]) < 0)
			goto bad;
	return (int)k;
bad:
	rdmamem__set_error(c, NULL, "the reply to WaitNotifications is malformed");
	return -EPROTO;
}

_public_ int rdmamem_plan_release(struct rdmamem_client *c, uint64_t plan)
{
	cJSON *p = params_new();

	if (add_id(p, "plan", plan) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_u64(c, "io.rdmamemd.ReleasePlan", p, NULL, 0, 0, NULL, NULL);
}

struct transfer_progress_ctx {
	rdmamem_transfer_progress_fn fn;
	void *userdata;
};

static void transfer_continues(void *userdata, const cJSON *params)
{
	struct transfer_progress_ctx *pc = userdata;
	uint64_t ops_done = 0, bytes_done = 0, n = 0, bytes = 0;

	json_get_u64(params, "ops_done", &ops_done);
	json_get_u64(params, "bytes_done", &bytes_done);
	json_get_u64(params, "ops", &n);
	json_get_u64(params, "bytes", &bytes);
	pc->fn(pc->userdata, ops_done, bytes_done, n, bytes);
}

/* Adds the options' notify bytes to p (freeing p when it cannot). */
static int add_options(cJSON **p, const struct rdmamem_transfer_options *opts)
{
	_cleanup_free_ char *text = NULL;

	if (!opts || !opts->notify)
		return 0;
	if (opts->notify_len > RDMAMEM_NOTIFY_MAX)
		return -EMSGSIZE;
	text = malloc(base64_encoded_len(opts->notify_len) + 1);
	if (!text)
		return -ENOMEM;
	base64_encode(opts->notify, opts->notify_len, text);
	if (*p && json_add_string(*p, "notify", text) < 0)
		*p = (cJSON_Delete(*p), NULL);
	return 0;
}

static int call_transfer(struct rdmamem_client *c, cJSON *params, int fd,
			 const struct rdmamem_transfer_options *opts, uint64_t *ret_bytes)
{
	_cleanup_json_ cJSON *p = params;
	_cleanup_json_ cJSON *root = NULL;
	struct transfer_progress_ctx pc = { opts ? opts->progress : NULL,
					    opts ? opts->userdata : NULL };
	cJSON *reply = NULL;
	int r;

	r = add_options(&p, opts);
	if (r < 0)
		return r;
	if (!p)
		return -ENOMEM;
	r = rdmamem__call_more(c, "io.rdmamemd.Transfer", p, &fd, fd >= 0, -1,
			       pc.fn ? transfer_continues : NULL, &pc, &root, &reply, NULL, NULL);
	if (r < 0)
		return r;
	if (ret_bytes && json_get_u64(reply, "bytes_done", ret_bytes) < 0) {
		rdmamem__set_error(c, NULL, "the reply to Transfer lacks 'bytes_done'");
		return -EPROTO;
	}
	return 0;
}

static const char *opcode_name(int op)
{
	return op == RDMAMEM_TRANSFER_READ ? "read" : op == RDMAMEM_TRANSFER_WRITE ? "write" : NULL;
}

_public_ int rdmamem_transfer_with(struct rdmamem_client *c, const struct rdmamem_transfer_op *ops,
				   size_t n_ops, const struct rdmamem_transfer_options *opts,
				   uint64_t *ret_bytes)
{
	cJSON *p = params_new(), *list = NULL;

	if (!ops || n_ops == 0) {
		cJSON_Delete(p);
		return -EINVAL;
	}
	if (p && !(list = cJSON_AddArrayToObject(p, "ops")))
		p = (cJSON_Delete(p), NULL);
	for (size_t i = 0; p && i < n_ops; i++) {
		const struct rdmamem_transfer_op *o = &ops[i];
		cJSON *x = cJSON_CreateObject(), *l = NULL, *r = NULL;

		if (!opcode_name(o->op)) {
			cJSON_Delete(x);
			cJSON_Delete(p);
			return -EINVAL;
		}
		/* x is p's once added: freed with it. */
		if (x)
			cJSON_AddItemToArray(list, x);
		if (!x || json_add_string(x, "op", opcode_name(o->op)) < 0 ||
		    !(l = cJSON_AddObjectToObject(x, "local")) ||
		    !(r = cJSON_AddObjectToObject(x, "remote")) ||
		    add_id(l, "region", o->region) < 0 || add_id(l, "offset", o->offset) < 0 ||
		    (o->lease && add_id(l, "lease", o->lease) < 0) ||
		    add_id(r, "id", o->remote) < 0 || add_id(r, "offset", o->remote_offset) < 0 ||
		    add_id(x, "length", o->length) < 0)
			p = (cJSON_Delete(p), NULL);
	}
	return call_transfer(c, p, -EBADF, opts, ret_bytes);
}

_public_ int rdmamem_transfer(struct rdmamem_client *c, const struct rdmamem_transfer_op *ops,
			      size_t n_ops, rdmamem_transfer_progress_fn progress, void *userdata,
			      uint64_t *ret_bytes)
{
	const struct rdmamem_transfer_options o = { .progress = progress, .userdata = userdata };

	return rdmamem_transfer_with(c, ops, n_ops, &o, ret_bytes);
}

_public_ int rdmamem_transfer_ranges(struct rdmamem_client *c, int op, uint64_t region,
				     uint64_t lease, uint64_t remote,
				     const struct rdmamem_range *ranges, size_t n,
				     const struct rdmamem_transfer_options *opts,
				     uint64_t *ret_bytes)
{
	_cleanup_close_ int fd = -EBADF;
	cJSON *p = params_new(), *b = NULL, *l = NULL, *r = NULL;

	if (!opcode_name(op) || !ranges || n == 0) {
		cJSON_Delete(p);
		return -EINVAL;
	}
	if (!p || !(b = cJSON_AddObjectToObject(p, "batch")) ||
	    json_add_string(b, "op", opcode_name(op)) < 0 ||
	    !(l = cJSON_AddObjectToObject(b, "local")) || add_id(l, "region", region) < 0 ||
	    (lease && add_id(l, "lease", lease) < 0) ||
	    !(r = cJSON_AddObjectToObject(b, "remote")) || add_id(r, "id", remote) < 0 ||
	    add_packed(b, ranges, n, &fd) < 0)
		p = (cJSON_Delete(p), NULL);
	return call_transfer(c, p, fd, opts, ret_bytes);
}

_public_ int rdmamem_transfer_post_with(struct rdmamem_client *c, uint64_t plan, int op,
					const uint64_t *indices, size_t n,
					const struct rdmamem_transfer_options *opts,
					uint64_t *ret_bytes)
{
	cJSON *p = params_new(), *list = NULL;

	if (!opcode_name(op) || (n > 0 && !indices)) {
		cJSON_Delete(p);
		return -EINVAL;
	}
	if (p && (add_id(p, "plan", plan) < 0 || json_add_string(p, "op", opcode_name(op)) < 0))
		p = (cJSON_Delete(p), NULL);
	/* Packed (4 bytes an index, no JSON value each) when every index
	 * fits; one past 32 bits is past any plan, and goes listed for the
	 * daemon to say so. */
	if (p && n > 0) {
		_cleanup_free_ char *text = NULL;
		int r = rdmamem_indices_pack(indices, n, &text);

		if (r == 0) {
			if (json_add_string(p, "packed_indices", text) < 0)
				p = (cJSON_Delete(p), NULL);
			n = 0;
		} else if (r != -ERANGE) {
			p = (cJSON_Delete(p), NULL);
		}
	}
	if (p && n > 0 && !(list = cJSON_AddArrayToObject(p, "indices")))
		p = (cJSON_Delete(p), NULL);
	for (size_t i = 0; p && i < n; i++) {
		char num[24];

		snprintf(num, sizeof(num), "%" PRIu64, indices[i]);
		if (!cJSON_AddItemToArray(list, cJSON_CreateString(num)))
			p = (cJSON_Delete(p), NULL);
	}
	return call_transfer(c, p, -EBADF, opts, ret_bytes);
}

_public_ int rdmamem_transfer_post(struct rdmamem_client *c, uint64_t plan, int op,
				   const uint64_t *indices, size_t n,
				   rdmamem_transfer_progress_fn progress, void *userdata,
				   uint64_t *ret_bytes)
{
	const struct rdmamem_transfer_options o = { .progress = progress, .userdata = userdata };

	return rdmamem_transfer_post_with(c, plan, op, indices, n, &o, ret_bytes);
}
