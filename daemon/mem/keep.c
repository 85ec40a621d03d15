/* SPDX-License-Identifier: BSD-3-Clause */
/* Regions kept across a restart: the store names, the state, the restore. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/core/session.h"
#include "daemon/mem/keep.h"
#include "daemon/mem/region.h"
#include "daemon/mem/region_memfd.h"
#include "proto/errors.h"
#include "proto/hex.h"
#include "util/idmap.h"
#include "util/textbuf.h"

/* The largest state the daemon reads back. */
#define KEEP_STATE_MAX (UINT64_C(256) << 20)

/* A uid's restored regions wait for Reclaim in its holder's session. */
struct keep_holder {
	struct list_head link; /* in keep_ctx.holders */
	struct session *session;
};

/* What a kept region carries: its name in the store, its token. */
struct keep_hook {
	struct region_hook h;
	struct list_head link; /* in keep_ctx.kept while in the store */
	struct keep_ctx *k;
	bool awaiting; /* restored, in a holder's session */
	char token[KEEP_TOKEN_HEX + 1];
	char name[KEEP_NAME_MAX];
};

static struct keep_hook *keep_hook_of(struct region_hook *h)
{
	return container_of(h, struct keep_hook, h);
}

/* The owner let go (or the grace ended): the store forgets the region,
 * unless the daemon is shutting down. */
static void keep_hook_revoke(struct region_hook *h)
{
	struct keep_hook *kh = keep_hook_of(h);
	struct keep_ctx *k = kh->k;
	int r;

	if (kh->awaiting) {
		kh->awaiting = false;
		k->n_awaiting--;
	}
	if (!kh->name[0])
		return;
	list_del(&kh->link);
	k->n_kept--;
	if (k->frozen)
		return;
	r = k->store->remove(k->store_data, kh->name);
	if (r < 0)
		log_warning_errno(r, "Region %" PRIu64 ": cannot take it out of the fd store: %m",
				  h->region->id);
	kh->name[0] = '\0';
	keep_changed(k);
}

static void keep_hook_finish(struct region_hook *h)
{
	free(keep_hook_of(h));
}

static const struct region_hook_ops keep_hook_ops = {
	.rank = REGION_HOOK_OTHER,
	.revoke = keep_hook_revoke,
	.finish = keep_hook_finish,
};

static struct region_hook *keep_hook_make(struct region *r, void *userdata)
{
	struct keep_hook *kh = calloc(1, sizeof(*kh));

	(void)r;
	if (!kh)
		return NULL;
	kh->k = userdata;
	list_init(&kh->link);
	return &kh->h;
}

static struct keep_hook *keep_hook_find(const struct region *r)
{
	struct region_hook *h = region_hook_find(r, &keep_hook_ops);

	return h ? keep_hook_of(h) : NULL;
}

const char *keep_token(const struct region *r)
{
	struct keep_hook *kh = keep_hook_find(r);

	return kh && kh->name[0] ? kh->token : NULL;
}

bool keep_awaiting(const struct region *r, uint64_t *ret_msec)
{
	struct keep_hook *kh = keep_hook_find(r);
	uint64_t now;

	if (!kh || !kh->awaiting)
		return false;
	now = uv_now(kh->k->regions->core->loop);
	*ret_msec = kh->k->grace_end_msec > now ? kh->k->grace_end_msec - now : 0;
	return true;
}

int keep_name_format(const struct keep_name *n, char *buf, size_t size)
{
	int len = snprintf(buf, size,
			   KEEP_REGION_PREFIX "%" PRIu64 ".%u.%u.%" PRIu64 ".%" PRIu64 ".%u.%s",
			   n->id, (unsigned)n->uid, (unsigned)n->gid, n->offset, n->length,
			   n->access, n->token);

	return len < 0 || (size_t)len >= size ? -ENAMETOOLONG : 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool keep_is_store_name(const char *name)
{
	return has_prefix(name, KEEP_REGION_PREFIX) || has_prefix(name, KEEP_STATE_PREFIX);
}

/* One decimal field of a name, up to the next '.' or the end. */
static int name_field(const char **p, uint64_t max, uint64_t *ret)
{
	char *end;
	uint64_t v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(*p, &end, 10);
	if (errno || v > max || *end != '.')
		return -EINVAL;
	*p = end + 1;
	*ret = v;
	return 0;
}

int keep_name_parse(const char *name, struct keep_name *ret)
{
	const char *p = name;
	uint64_t uid, gid, access;
	uint8_t raw[KEEP_TOKEN_BYTES];

	if (!has_prefix(p, KEEP_REGION_PREFIX))
		return -EINVAL;
	p += strlen(KEEP_REGION_PREFIX);
	if (name_field(&p, KEEP_ID_MAX, &ret->id) < 0 || ret->id == 0 ||
	    name_field(&p, UINT32_MAX - 1, &uid) < 0 || name_field(&p, UINT32_MAX - 1, &gid) < 0 ||
	    name_field(&p, UINT64_MAX, &ret->offset) < 0 ||
	    name_field(&p, UINT64_MAX, &ret->length) < 0 || ret->length == 0 ||
	    ret->offset + ret->length < ret->offset || name_field(&p, 0xf, &access) < 0)
		return -EINVAL;
	if (strlen(p) != KEEP_TOKEN_HEX || hex_decode(p, raw, sizeof(raw)) < 0)
		return -EINVAL;
	ret->uid = (uid_t)uid;
	ret->gid = (gid_t)gid;
	ret->access = (unsigned)access;
	memcpy(ret->token, p, KEEP_TOKEN_HEX + 1);
	return 0;
}

/* --- the state: shares and devices, in one sealed memfd ------------------ */

/*
 * The state is text, a line per region that differs from a fresh one,
 * written by hand: at 10,000 regions it costs the loop a few ms, where
 * building cJSON objects cost ten times that.
 *
 *   rdmamem-state 1
 *   next NEXT_REGION_ID
 *   ID [u<uid>r|u<uid>w|g<gid>r|g<gid>w]... [@DEVICE]...
 */
#define STATE_MAGIC "rdmamem-state 1\n"

/* One region's line, begun with its first token: a region like a fresh
 * one (no share, no device) writes none. */
struct state_line {
	struct textbuf *b;
	uint64_t id;
	bool begun;
};

static void line_begin(struct state_line *l)
{
	if (!l->begun)
		textbuf_printf(l->b, "%" PRIu64, l->id);
	l->begun = true;
}

static void add_device(void *ctx, const char *device)
{
	struct state_line *l = ctx;

	line_begin(l);
	textbuf_printf(l->b, " @%s", device);
}

static void state_line(struct keep_ctx *k, struct region *r, struct textbuf *b)
{
	struct state_line l = { .b = b, .id = r->id };

	for (size_t i = 0; i < r->n_shares; i++) {
		line_begin(&l);
		textbuf_printf(b, " %c%u%c", r->shares[i].is_group ? 'g' : 'u', r->shares[i].id,
			       r->shares[i].readonly ? 'r' : 'w');
	}
	if (k->devices)
		k->devices->each(k->devices_data, r, add_device, &l);
	if (l.begun)
		textbuf_printf(b, "\n");
}

/* A sealed memfd with len bytes of text in it. */
static int sealed_memfd(const char *text, size_t len, int *ret)
{
	_cleanup_close_ int fd = memfd_create("rdmamemd-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t done = 0;

	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	*ret = TAKE_FD(fd);
	return 0;
}

/*
 * Writes the state of every kept region as a new generation, then takes
 * the one before out of the store: a crash between the two leaves both,
 * and the next start reads the newer.
 */
static int state_write(struct keep_ctx *k)
{
	struct keep_hook *kh;
	struct textbuf b = {};
	_cleanup_close_ int fd = -EBADF;
	char name[KEEP_NAME_MAX];
	int r;

	k->state_dirty = false;
	/* Ids are not handed out twice across a restart either: the state
	 * names an id above every one given so far, with room for those
	 * given until the next write (on_publish() asks for it). */
	k->stated_next = k->regions->next_region_id + KEEP_ID_HEADROOM;
	textbuf_printf(&b, STATE_MAGIC "next %" PRIu64 "\n", k->stated_next);
	list_for_each_entry(kh, &k->kept, link)
		state_line(k, kh->h.region, &b);
	r = b.oom ? -ENOMEM : sealed_memfd(b.p, b.len, &fd);
	free(b.p);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), KEEP_STATE_PREFIX "%" PRIu64, k->state_gen + 1);
	r = k->store->put(k->store_data, name, fd);
	if (r < 0)
		return r;
	if (k->state_gen > 0) {
		snprintf(name, sizeof(name), KEEP_STATE_PREFIX "%" PRIu64, k->state_gen);
		(void)k->store->remove(k->store_data, name);
	}
	k->state_gen++;
	return 0;
}

static void state_flush(struct keep_ctx *k)
{
	uint64_t start = uv_hrtime();
	int r;

	if (!k->store || !k->state_dirty || k->frozen)
		return;
	r = state_write(k);
	if (r < 0)
		log_warning_errno(r, "Cannot write the regions' state to the fd store: %m");
	/* Writing it is O(regions) on the loop: the next write waits twenty
	 * times as long as this one took, so that it takes at most 5% of
	 * the loop however many regions there are. */
	k->state_delay_msec =
		MAX((uint64_t)KEEP_STATE_DELAY_MSEC, 20 * (uv_hrtime() - start) / 1000000);
}

static void on_state_timer(uv_timer_t *t)
{
	state_flush(t->data);
}

/* Each id given: the state is written again well before ids pass what it
 * names as next. */
static void on_publish(void *userdata, uint64_t id)
{
	struct keep_ctx *k = userdata;

	if (id + KEEP_ID_HEADROOM / 2 >= k->stated_next)
		keep_changed(k);
}

void keep_changed(struct keep_ctx *k)
{
	/* Nothing kept, nothing to keep: no state to write. */
	if (!k || !k->store || k->frozen || k->state_dirty || (k->max == 0 && k->n_kept == 0))
		return;
	k->state_dirty = true;
	uv_timer_start(&k->state_timer, on_state_timer,
		       MAX(k->state_delay_msec, (uint64_t)KEEP_STATE_DELAY_MSEC), 0);
}

/* --- keeping a new region --------------------------------------------- */

void keep_init(struct keep_ctx *k, struct region_registry *regions,
	       const struct keep_store_ops *store, void *store_data, unsigned max)
{
	*k = (struct keep_ctx){
		.regions = regions,
		.store = store,
		.store_data = store_data,
		.max = max,
	};
	list_init(&k->holders);
	list_init(&k->kept);
	uv_timer_init(regions->core->loop, &k->state_timer);
	k->state_timer.data = k;
	uv_timer_init(regions->core->loop, &k->grace_timer);
	k->grace_timer.data = k;
	regions->keep = k;
	regions->on_publish = on_publish;
	regions->on_publish_data = k;
}

void keep_set_devices(struct keep_ctx *k, const struct keep_device_ops *ops, void *userdata)
{
	k->devices = ops;
	k->devices_data = userdata;
}

/* r's hook, in the store under kh->name now: its token, and counted. */
static void keep_enlist(struct keep_ctx *k, struct keep_hook *kh, const char *token)
{
	memcpy(kh->token, token, sizeof(kh->token));
	list_add_tail(&kh->link, &k->kept);
	k->n_kept++;
}

/* The hook for r, with name (already in the store) or none yet. */
static struct keep_hook *keep_attach(struct keep_ctx *k, struct region *r)
{
	struct region_hook *h = region_hook_get(r, &keep_hook_ops, keep_hook_make, k);

	return h ? keep_hook_of(h) : NULL;
}

bool keep_region(struct keep_ctx *k, struct region *r)
{
	struct keep_name n = { .id = r->id,
			       .uid = r->owner_uid,
			       .gid = r->owner_gid,
			       .length = r->size,
			       .access = r->access };
	uint8_t raw[KEEP_TOKEN_BYTES];
	struct keep_hook *kh;
	int fd, own, res;

	if (!k || !k->store || k->frozen || !r->mem->keep || r->dead || k->max == 0)
		return false;
	/* Room for two generations of the state besides. */
	if (k->n_kept + 2 >= k->max) {
		if (!k->warned_full)
			log_warning("The fd store holds %u regions and their state, as many "
				    "as FileDescriptorStoreMax= allows: newer regions are not "
				    "kept across a restart",
				    k->n_kept);
		k->warned_full = true;
		return false;
	}
	if (r->mem->keep(r, &fd, &n.offset) < 0)
		return false;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return false;
	hex_encode(raw, sizeof(raw), n.token);
	kh = keep_attach(k, r);
	if (!kh || keep_name_format(&n, kh->name, sizeof(kh->name)) < 0)
		return false;
	/* A file of its own: systemd keeps one fd per open file, so a second
	 * region over the same fd (or a dup of it) would not be stored. */
	{
		char path[64];
		int flags = fcntl(fd, F_GETFL);

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		own = flags < 0 ? -EBADF : open(path, (flags & O_ACCMODE) | O_CLOEXEC);
		if (own < 0) {
			log_warning_errno(-errno,
					  "Region %" PRIu64 ": cannot reopen its file for "
					  "the fd store: %m; it is not kept",
					  r->id);
			kh->name[0] = '\0';
			return false;
		}
	}
	res = k->store->put(k->store_data, kh->name, own);
	safe_close(own);
	if (res < 0) {
		/* A store that refused once is not trusted with the next. */
		log_warning_errno(res,
				  "Region %" PRIu64 ": cannot put it in the fd store: %m; "
				  "regions registered from now on are not kept",
				  r->id);
		kh->name[0] = '\0';
		k->max = 0;
		return false;
	}
	keep_enlist(k, kh, n.token);
	return true;
}

/* --- reclaim and the grace ---------------------------------------------- */

int keep_reclaim(struct keep_ctx *k, struct region *r, struct session *caller, const char *token,
		 struct errinfo *e)
{
	struct keep_hook *kh = keep_hook_find(r);
	unsigned char diff = 0;

	if (!kh || !kh->awaiting)
		return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_REGION, -ENOENT,
				   "region %" PRIu64 " is not waiting to be reclaimed: it is "
				   "held by a client already, or was registered after the "
				   "restart",
				   r->id);
	if (caller->cred.uid != r->owner_uid)
		return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
				   "region %" PRIu64 " belongs to uid %u; only that uid can "
				   "reclaim it",
				   r->id, (unsigned)r->owner_uid);
	/* In constant time: the token is a capability (its length is not). */
	if (strlen(token) == KEEP_TOKEN_HEX)
		for (size_t i = 0; i < KEEP_TOKEN_HEX; i++)
			diff |= (unsigned char)(kh->token[i] ^ token[i]);
	if (diff || strlen(token) != KEEP_TOKEN_HEX)
		return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
				   "the reclaim token does not match region %" PRIu64
				   "'s; use the one its Register answered",
				   r->id);
	kh->awaiting = false;
	k->n_awaiting--;
	k->n_reclaimed++;
	session_remove(&r->owner_link);
	session_add(caller, SESSION_REGION, &r->owner_link);
	r->owner_conn_id = caller->id;
	r->owner_pid = caller->cred.pid;
	r->owner_gid = caller->cred.gid;
	log_full_fields(LOG_INFO, 0, LOG_REGION(r),
			"Region %" PRIu64 " reclaimed by pid %d uid %u after the restart", r->id,
			(int)caller->cred.pid, (unsigned)caller->cred.uid);
	return 0;
}

/* Drops every region still waiting: each holder's session closes. */
static void holders_close(struct keep_ctx *k)
{
	struct keep_holder *h, *n;

	list_for_each_entry_safe(h, n, &k->holders, link) {
		list_del(&h->link);
		session_close(h->session);
		session_unref(h->session);
		free(h);
	}
}

static void on_grace_end(uv_timer_t *t)
{
	struct keep_ctx *k = t->data;

	if (k->n_awaiting > 0)
		log_notice("Reclaim grace over: releasing %u regions nobody reclaimed",
			   k->n_awaiting);
	k->n_expired += k->n_awaiting;
	holders_close(k);
}

static struct session *holder_for(struct keep_ctx *k, uid_t uid, gid_t gid)
{
	struct keep_holder *h;
	struct account *a;
	struct ucred cred = { .pid = 0, .uid = uid, .gid = gid };
	int r;

	list_for_each_entry(h, &k->holders, link)
		if (h->session->cred.uid == uid)
			return h->session;
	h = calloc(1, sizeof(*h));
	a = account_get(k->regions->core->accounts, uid);
	r = h && a ? session_new(0, &cred, NULL, 0, a, &h->session) : -ENOMEM;
	account_unref(a);
	if (r < 0) {
		free(h);
		return NULL;
	}
	list_add_tail(&h->link, &k->holders);
	return h->session;
}

void keep_freeze(struct keep_ctx *k)
{
	if (k->frozen)
		return;
	state_flush(k);
	k->frozen = true;
	uv_timer_stop(&k->state_timer);
	uv_timer_stop(&k->grace_timer);
	holders_close(k);
}

void keep_stop(struct keep_ctx *k)
{
	if (!uv_is_closing((uv_handle_t *)&k->state_timer))
		uv_close((uv_handle_t *)&k->state_timer, NULL);
	if (!uv_is_closing((uv_handle_t *)&k->grace_timer))
		uv_close((uv_handle_t *)&k->grace_timer, NULL);
}

/* --- restore -------------------------------------------------------------- */

struct restored {
	struct keep_name name;
	const char *store_name;
	int fd;
};

static int by_id(const void *a, const void *b)
{
	const struct restored *x = a, *y = b;

	return x->name.id < y->name.id ? -1 : x->name.id > y->name.id;
}

/* The newest state's text, or NULL. Read, not mapped: a file that is
 * not what this daemon sealed could shrink under a mapping. */
static char *state_read(int fd)
{
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > KEEP_STATE_MAX)
		return NULL;
	text = malloc((size_t)st.st_size + 1);
	if (!text)
		return NULL;
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, text + done, (size_t)st.st_size - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	text[done] = '\0';
	if (strlen(text) != done || strncmp(text, STATE_MAGIC, strlen(STATE_MAGIC)) != 0)
		return NULL;
	return TAKE_PTR(text);
}

/*
 * The state's lines by region id (the line's first byte after the id), in
 * an idmap; the lines are split in place. Returns "next"'s value, or 0.
 */
static uint64_t state_index(char *text, struct idmap *lines)
{
	uint64_t next = 0;
	char *line = text + strlen(STATE_MAGIC), *end;

	for (; *line; line = end) {
		char *nl = strchr(line, '\n');
		uint64_t id;

		end = nl ? nl + 1 : line + strlen(line);
		if (nl)
			*nl = '\0';
		if (strncmp(line, "next ", 5) == 0) {
			errno = 0;
			next = strtoull(line + 5, &nl, 10);
			if (errno || line[5] < '0' || line[5] > '9' || next > KEEP_ID_MAX)
				next = 0;
			continue;
		}
		errno = 0;
		id = strtoull(line, &nl, 10);
		if (!errno && id > 0 && id <= KEEP_ID_MAX && nl != line)
			(void)idmap_put(lines, id, nl);
	}
	return next;
}

static void forget(struct keep_ctx *k, const char *name, int fd, const char *why)
{
	log_warning("Fd store: dropping %s: %s", name, why);
	(void)k->store->remove(k->store_data, name);
	safe_close(fd);
}

/*
 * A second file under a restored region's name: taking the name out of the
 * store takes both, so the region's own file goes back in after.
 */
static void forget_second(struct keep_ctx *k, struct restored *x)
{
	struct region *r = idmap_get(&k->regions->regions, x->name.id);
	struct keep_hook *kh = r ? keep_hook_find(r) : NULL;
	uint64_t offset;
	int fd;

	forget(k, x->store_name, x->fd, "a second file of one region");
	if (kh && kh->name[0] && strcmp(kh->name, x->store_name) == 0 &&
	    r->mem->keep(r, &fd, &offset) == 0 && k->store->put(k->store_data, kh->name, fd) < 0)
		log_warning("Fd store: region %" PRIu64 " could not be put back; it is not "
			    "kept across the next restart",
			    r->id);
}

/* Applies a state line's shares and devices (" u4242r @rxe0") to a
 * restored region; what it cannot read it skips. */
static void apply_state(struct keep_ctx *k, struct region *r, char *line)
{
	struct errinfo e = {};
	char *token, *save = NULL;

	for (token = line ? strtok_r(line, " ", &save) : NULL; token;
	     token = strtok_r(NULL, " ", &save)) {
		if (token[0] == '@') {
			if (k->devices && token[1])
				k->devices->register_on(k->devices_data, r, token + 1);
		} else if (token[0] == 'u' || token[0] == 'g') {
			char *end;
			unsigned long id;

			errno = 0;
			id = strtoul(token + 1, &end, 10);
			if (errno || end == token + 1 || id >= UINT32_MAX ||
			    (strcmp(end, "r") && strcmp(end, "w")))
				continue;
			(void)region_share(r, token[0] == 'g', (uint32_t)id, *end == 'r', &e);
			errinfo_done(&e);
		}
	}
}

static bool restore_one(struct keep_ctx *k, struct restored *x, struct idmap *state)
{
	struct memfd_import imp = { .fd = x->fd,
				    .offset = x->name.offset,
				    .length = x->name.length,
				    .access = x->name.access };
	struct region_registry *reg = k->regions;
	struct errinfo e = {};
	struct session *holder;
	struct keep_hook *kh;
	struct region *r;
	int res;

	holder = holder_for(k, x->name.uid, x->name.gid);
	if (!holder) {
		forget(k, x->store_name, x->fd, "out of memory");
		return false;
	}
	/* The region keeps its id: restored in order, each publish takes
	 * the next. */
	reg->next_region_id = x->name.id;
	res = region_import_memfd(reg, holder, &imp, &r, &e);
	if (res < 0) {
		forget(k, x->store_name, imp.fd, e.name ? e.message : strerror(-res));
		errinfo_done(&e);
		return false;
	}
	/* The holder is per uid; each region keeps the gid it had. */
	r->owner_pid = 0;
	r->owner_gid = x->name.gid;
	kh = keep_attach(k, r);
	if (!kh) {
		region_drop_owner(r);
		forget(k, x->store_name, -EBADF, "out of memory");
		return false;
	}
	snprintf(kh->name, sizeof(kh->name), "%s", x->store_name);
	keep_enlist(k, kh, x->name.token);
	kh->awaiting = true;
	k->n_awaiting++;
	apply_state(k, r, idmap_get(state, r->id));
	return true;
}

unsigned keep_restore(struct keep_ctx *k, struct keep_passed *passed, size_t n, unsigned grace_sec)
{
	_cleanup_free_ struct restored *regions = calloc(n ?: 1, sizeof(*regions));
	_cleanup_free_ char *text = NULL;
	struct idmap state;
	size_t n_regions = 0;
	uint64_t newest = 0, next_id, stated_next = 0;
	int newest_fd = -EBADF;
	unsigned done = 0;

	if (!regions || !k->store) {
		for (size_t i = 0; i < n; i++)
			passed[i].fd = safe_close(passed[i].fd);
		return 0;
	}
	/* The newest state; older ones are stale. */
	for (size_t i = 0; i < n; i++) {
		const char *s = passed[i].name;
		uint64_t gen;
		char *end;

		if (!has_prefix(s, KEEP_STATE_PREFIX))
			continue;
		gen = strtoull(s + strlen(KEEP_STATE_PREFIX), &end, 10);
		if (*end == '\0' && gen > newest) {
			newest = gen;
			newest_fd = passed[i].fd;
		}
	}
	idmap_init(&state);
	if (newest_fd >= 0) {
		text = state_read(newest_fd);
		if (text)
			stated_next = state_index(text, &state);
		else
			log_warning("Fd store: the regions' state cannot be read; restoring them "
				    "without their shares and devices");
	}
	for (size_t i = 0; i < n; i++) {
		struct restored *x = &regions[n_regions];

		if (has_prefix(passed[i].name, KEEP_STATE_PREFIX)) {
			/* The store keeps its own copy until the next state
			 * replaces it. */
			if (passed[i].fd != newest_fd)
				(void)k->store->remove(k->store_data, passed[i].name);
			passed[i].fd = safe_close(passed[i].fd);
			continue;
		}
		if (keep_name_parse(passed[i].name, &x->name) < 0 || grace_sec == 0) {
			forget(k, passed[i].name, passed[i].fd,
			       grace_sec ? "not a name this daemon writes" :
					   "reclaim-grace-sec is 0: regions are not kept");
			passed[i].fd = -EBADF;
			continue;
		}
		x->store_name = passed[i].name;
		x->fd = TAKE_FD(passed[i].fd);
		n_regions++;
	}
	if (newest)
		k->state_gen = newest;
	qsort(regions, n_regions, sizeof(*regions), by_id);
	next_id = k->regions->next_region_id;
	for (size_t i = 0; i < n_regions; i++) {
		if (i > 0 && regions[i].name.id == regions[i - 1].name.id) {
			forget_second(k, &regions[i]);
			continue;
		}
		if (restore_one(k, &regions[i], &state))
			done++;
		next_id = MAX(next_id, regions[i].name.id + 1);
	}
	idmap_done(&state);
	k->regions->next_region_id = MAX(next_id, stated_next);
	k->n_restored = done;
	if (done > 0) {
		k->grace_end_msec = uv_now(k->regions->core->loop) + (uint64_t)grace_sec * 1000;
		uv_timer_start(&k->grace_timer, on_grace_end, (uint64_t)grace_sec * 1000, 0);
		log_info("Fd store: %u regions restored, waiting %u s for their owners to "
			 "reclaim them",
			 done, grace_sec);
	}
	/* The devices may have changed: write the state as it is now. */
	if (newest || done)
		keep_changed(k);
	return done;
}
