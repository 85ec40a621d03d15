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
#include "util/fdhold.h"
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
	/* In the store under name (a memfd), or under name.0 to
	 * name.(n_parts - 1) (KEEP_KIND_PREFIX); "" while not. */
	char name[KEEP_NAME_MAX];
	unsigned n_parts;
};

/* A restore of a kind that comes back from text, under way on the pool. */
struct keep_pending {
	struct list_head link; /* in keep_ctx.pending */
	struct keep_ctx *k;
	uint64_t id;
	gid_t gid;
	unsigned n_parts;
	char token[KEEP_TOKEN_HEX + 1];
	char *state_line; /* its line of the state, or NULL */
	void *job;
	/* Inside keep_kind_ops.restore: an answer that comes at once waits
	 * for it to return (early, early_region, why). */
	bool starting, early;
	struct region *early_region;
	char why[sizeof(((struct errinfo *)0)->message)];
};

static struct keep_hook *keep_hook_of(struct region_hook *h)
{
	return container_of(h, struct keep_hook, h);
}

/* The name of region id's parts, without the part (KEEP_KIND_PREFIX). */
static void kind_name(char buf[static KEEP_NAME_MAX], uint64_t id)
{
	snprintf(buf, KEEP_NAME_MAX, KEEP_KIND_PREFIX "%" PRIu64, id);
}

/* Name's part i (KEEP_KIND_PREFIX). */
static void part_name(char *buf, size_t size, const char *name, unsigned i)
{
	snprintf(buf, size, "%s.%u", name, i);
}

/* The store files a region takes: its parts, or the one under its own
 * name (a memfd's, n_parts 0). */
static unsigned store_files(unsigned n_parts)
{
	return n_parts ?: 1;
}

/* Takes a region's files out of the store: name itself when n_parts is 0,
 * its parts otherwise. The first error. */
static int store_remove_parts(struct keep_ctx *k, const char *name, unsigned n_parts)
{
	char part[KEEP_NAME_MAX + 16];
	int r = 0, q;

	if (n_parts == 0)
		return k->store->remove(k->store_data, name);
	for (unsigned i = 0; i < n_parts; i++) {
		part_name(part, sizeof(part), name, i);
		q = k->store->remove(k->store_data, part);
		if (q < 0 && r == 0)
			r = q;
	}
	return r;
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
	k->n_files -= store_files(kh->n_parts);
	if (k->frozen)
		return;
	r = store_remove_parts(k, kh->name, kh->n_parts);
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
	return has_prefix(name, KEEP_REGION_PREFIX) || has_prefix(name, KEEP_KIND_PREFIX) ||
	       has_prefix(name, KEEP_STATE_PREFIX);
}

/* One decimal field of a name, up to the next '.'. */
static int name_field(const char **p, uint64_t max, uint64_t *ret)
{
	return text_u64(p, '.', max, ret);
}

/*
 * What both forms share, after the id: "UID.GID.OFFSET.LENGTH.ACCESS.TOKEN"
 * in a name (sep '.'), "UID GID OFFSET LENGTH ACCESS TOKEN" in a record
 * (sep ' '). The token ends at end_sep ('\0' in a name); *p moves past it.
 */
static int facts_parse(const char **p, char sep, char end_sep, struct keep_name *ret)
{
	uint64_t uid, gid, access;
	uint8_t raw[KEEP_TOKEN_BYTES];
	const char *end;

	if (text_u64(p, sep, UINT32_MAX - 1, &uid) < 0 ||
	    text_u64(p, sep, UINT32_MAX - 1, &gid) < 0 ||
	    text_u64(p, sep, UINT64_MAX, &ret->offset) < 0 ||
	    text_u64(p, sep, UINT64_MAX, &ret->length) < 0 || ret->length == 0 ||
	    ret->offset + ret->length < ret->offset || text_u64(p, sep, 0xf, &access) < 0)
		return -EINVAL;
	end = strchr(*p, end_sep);
	if (!end || end - *p != KEEP_TOKEN_HEX)
		return -EINVAL;
	memcpy(ret->token, *p, KEEP_TOKEN_HEX);
	ret->token[KEEP_TOKEN_HEX] = '\0';
	if (hex_decode(ret->token, raw, sizeof(raw)) < 0)
		return -EINVAL;
	ret->uid = (uid_t)uid;
	ret->gid = (gid_t)gid;
	ret->access = (unsigned)access;
	*p = end;
	return 0;
}

int keep_name_parse(const char *name, struct keep_name *ret)
{
	const char *p = name;

	if (!has_prefix(p, KEEP_REGION_PREFIX))
		return -EINVAL;
	p += strlen(KEEP_REGION_PREFIX);
	if (name_field(&p, KEEP_ID_MAX, &ret->id) < 0 || ret->id == 0)
		return -EINVAL;
	return facts_parse(&p, '.', '\0', ret);
}

/*
 * A kind's record (part 0 of KEEP_KIND_PREFIX), text in a sealed memfd:
 *
 *   rdmamem-kept 1
 *   UID GID OFFSET LENGTH ACCESS TOKEN FILES
 *   KIND-TEXT
 */
#define RECORD_MAGIC "rdmamem-kept 1\n"

static void record_format(const struct keep_name *n, unsigned n_files, const char *text,
			  struct textbuf *b)
{
	textbuf_printf(b, RECORD_MAGIC "%u %u %" PRIu64 " %" PRIu64 " %u %s %u\n%s\n",
		       (unsigned)n->uid, (unsigned)n->gid, n->offset, n->length, n->access,
		       n->token, n_files, text);
}

/* Parses a record in place (its kind's line is cut at its end); -EINVAL. */
static int record_parse(char *text, struct keep_name *ret, unsigned *ret_files,
			const char **ret_kind)
{
	const char *p = text;
	uint64_t files;
	char *nl;

	if (!has_prefix(p, RECORD_MAGIC))
		return -EINVAL;
	p += strlen(RECORD_MAGIC);
	if (facts_parse(&p, ' ', ' ', ret) < 0)
		return -EINVAL;
	p++;
	if (text_u64(&p, '\n', REGION_KEEP_FDS_MAX, &files) < 0)
		return -EINVAL;
	nl = strchr(p, '\n');
	if (!nl || nl == p || nl[1] != '\0')
		return -EINVAL;
	*nl = '\0';
	*ret_files = (unsigned)files;
	*ret_kind = p;
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
	struct keep_pending *p;
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
	/* A GPU region still being restored keeps the line it came with. */
	list_for_each_entry(p, &k->pending, link)
		if (p->state_line)
			textbuf_printf(&b, "%" PRIu64 "%s\n", p->id, p->state_line);
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
	list_init(&k->pending);
	uv_timer_init(regions->core->loop, &k->state_timer);
	k->state_timer.data = k;
	uv_timer_init(regions->core->loop, &k->grace_timer);
	k->grace_timer.data = k;
	uv_timer_init(regions->core->loop, &k->restore_timer);
	k->restore_timer.data = k;
	regions->keep = k;
	regions->on_publish = on_publish;
	regions->on_publish_data = k;
}

void keep_set_devices(struct keep_ctx *k, const struct keep_device_ops *ops, void *userdata)
{
	k->devices = ops;
	k->devices_data = userdata;
}

/* r's hook, in the store under kh->name now (n_parts as in struct
 * keep_hook): its token, and counted. */
static void keep_enlist(struct keep_ctx *k, struct keep_hook *kh, const char *token,
			unsigned n_parts)
{
	memcpy(kh->token, token, sizeof(kh->token));
	kh->n_parts = n_parts;
	list_add_tail(&kh->link, &k->kept);
	k->n_kept++;
	k->n_files += store_files(n_parts);
}

/* The hook for r, with name (already in the store) or none yet. */
static struct keep_hook *keep_attach(struct keep_ctx *k, struct region *r)
{
	struct region_hook *h = region_hook_get(r, &keep_hook_ops, keep_hook_make, k);

	return h ? keep_hook_of(h) : NULL;
}

void keep_set_kinds(struct keep_ctx *k, const struct keep_kind_ops *ops, void *userdata)
{
	k->kinds = ops;
	k->kinds_data = userdata;
}

bool keep_accepting(const struct keep_ctx *k)
{
	/* Room for the least a region needs: one file, and two states. */
	return k && k->store && !k->frozen && k->max > 0 && k->n_files + 3 <= k->max;
}

/* A memfd: one file of its own under the region's name. */
static int put_file(struct keep_ctx *k, struct region *r, int fd, const char *name, bool *refused)
{
	char path[64];
	int flags = fcntl(fd, F_GETFL), own, res;

	/* Systemd keeps one fd per open file, so a second region over the
	 * same fd (or a dup of it) would not be stored: reopened. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	own = flags < 0 ? -EBADF : open(path, (flags & O_ACCMODE) | O_CLOEXEC);
	if (own < 0) {
		log_warning_errno(-errno,
				  "Region %" PRIu64 ": cannot reopen its file for the fd store: "
				  "%m; it is not kept",
				  r->id);
		return -errno;
	}
	res = k->store->put(k->store_data, name, own);
	safe_close(own);
	*refused = res < 0;
	return res;
}

/* A kind with text: its record as part 0, then its files, each held in
 * flight by a socket of its own (util/fdhold.h): two regions may have been
 * sent one open file (PyTorch sends one exported fd for every tensor of a
 * segment), which systemd would keep once. What went in comes out again
 * on a failure. */
static int put_parts(struct keep_ctx *k, const struct keep_name *n, const struct region_keep *rk,
		     const char *name, bool *refused)
{
	struct textbuf b = {};
	_cleanup_close_ int record = -EBADF;
	char part[KEEP_NAME_MAX + 16];
	unsigned done = 0;
	int res;

	record_format(n, rk->n_fds, rk->text, &b);
	res = b.oom ? -ENOMEM : sealed_memfd(b.p, b.len, &record);
	free(b.p);
	if (res < 0)
		return res;
	for (; done <= rk->n_fds; done++) {
		_cleanup_close_ int holder = -EBADF;

		part_name(part, sizeof(part), name, done);
		res = done ? fdhold_make(rk->fds[done - 1], &holder) : 0;
		if (res >= 0)
			res = k->store->put(k->store_data, part, done ? holder : record);
		if (res < 0) {
			(void)store_remove_parts(k, name, done);
			*refused = true;
			return res;
		}
	}
	return 0;
}

bool keep_region(struct keep_ctx *k, struct region *r)
{
	struct keep_name n = { .id = r->id,
			       .uid = r->owner_uid,
			       .gid = r->owner_gid,
			       .length = r->size,
			       .access = r->access };
	struct region_keep rk = {};
	uint8_t raw[KEEP_TOKEN_BYTES];
	struct keep_hook *kh;
	unsigned n_parts;
	bool refused = false;
	int res;

	if (!keep_accepting(k) || !r->mem->keep || r->dead)
		return false;
	if (r->mem->keep(r, &rk) < 0)
		return false;
	/* A memfd is its own name; a kind with text is parts: its record
	 * and its files. */
	n_parts = rk.text[0] ? 1 + rk.n_fds : 0;
	if (!rk.text[0] && rk.n_fds != 1)
		return false;
	/* Room for two generations of the state besides. */
	if (k->n_files + store_files(n_parts) + 2 > k->max) {
		if (!k->warned_full)
			log_warning("The fd store holds %u regions and their state, as many "
				    "as FileDescriptorStoreMax= allows: newer regions are not "
				    "kept across a restart",
				    k->n_kept);
		k->warned_full = true;
		return false;
	}
	n.offset = rk.offset;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return false;
	hex_encode(raw, sizeof(raw), n.token);
	kh = keep_attach(k, r);
	if (!kh)
		return false;
	if (n_parts)
		kind_name(kh->name, r->id);
	else if (keep_name_format(&n, kh->name, sizeof(kh->name)) < 0)
		return false;
	res = n_parts ? put_parts(k, &n, &rk, kh->name, &refused) :
			put_file(k, r, rk.fds[0], kh->name, &refused);
	if (res < 0) {
		kh->name[0] = '\0';
		if (!refused)
			return false;
		/* A store that refused once is not trusted with the next. */
		log_warning_errno(res,
				  "Region %" PRIu64 ": cannot put it in the fd store: %m; "
				  "regions registered from now on are not kept",
				  r->id);
		k->max = 0;
		return false;
	}
	keep_enlist(k, kh, n.token, n_parts);
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

/* The restores are done (or waited for long enough): tell the daemon once. */
static void restored_tell(struct keep_ctx *k)
{
	void (*fn)(void *userdata) = TAKE_PTR(k->on_restored);

	uv_timer_stop(&k->restore_timer);
	/* (not into a shutdown) */
	if (fn && !k->frozen)
		fn(k->on_restored_data);
}

static void on_restore_wait(uv_timer_t *t)
{
	struct keep_ctx *k = t->data;

	log_warning("Fd store: GPU regions still being restored after %u ms; taking clients "
		    "meanwhile",
		    KEEP_RESTORE_WAIT_MSEC);
	restored_tell(k);
}

bool keep_restoring(const struct keep_ctx *k)
{
	return !list_empty(&k->pending);
}

static void pending_free(struct keep_pending *p)
{
	struct keep_ctx *k = p->k;

	/* Its parts count as the store's files while it is under way (a
	 * region that came back counts them again, keep_enlist()). */
	k->n_files -= p->n_parts;
	list_del(&p->link);
	free(p->state_line);
	free(p);
	if (list_empty(&k->pending))
		restored_tell(k);
}

/* Restores under way will not be told: the grace ended (forget: they are
 * taken out of the store), or a shutdown began (the store is left). */
static void pending_cancel_all(struct keep_ctx *k, bool forget)
{
	struct keep_pending *p, *n;
	char name[KEEP_NAME_MAX];

	list_for_each_entry_safe(p, n, &k->pending, link) {
		k->kinds->cancel(k->kinds_data, p->job);
		if (forget) {
			kind_name(name, p->id);
			log_warning("Fd store: region %" PRIu64 " was not restored within the "
				    "grace; dropping it",
				    p->id);
			(void)store_remove_parts(k, name, p->n_parts);
		}
		pending_free(p);
	}
}

static void on_grace_end(uv_timer_t *t)
{
	struct keep_ctx *k = t->data;

	pending_cancel_all(k, true);
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
	pending_cancel_all(k, false);
	holders_close(k);
}

void keep_stop(struct keep_ctx *k)
{
	if (!uv_is_closing((uv_handle_t *)&k->state_timer))
		uv_close((uv_handle_t *)&k->state_timer, NULL);
	if (!uv_is_closing((uv_handle_t *)&k->grace_timer))
		uv_close((uv_handle_t *)&k->grace_timer, NULL);
	if (!uv_is_closing((uv_handle_t *)&k->restore_timer))
		uv_close((uv_handle_t *)&k->restore_timer, NULL);
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

/* A text file that starts with magic (the state, a record), at most max
 * bytes, or NULL. Read, not mapped: a file that is not what this daemon
 * sealed could shrink under a mapping. */
static char *read_text(int fd, uint64_t max, const char *magic)
{
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > max)
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
	if (strlen(text) != done || strncmp(text, magic, strlen(magic)) != 0)
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
	struct region_keep rk = {};

	forget(k, x->store_name, x->fd, "a second file of one region");
	if (kh && kh->name[0] && strcmp(kh->name, x->store_name) == 0 &&
	    r->mem->keep(r, &rk) == 0 && rk.n_fds == 1 &&
	    k->store->put(k->store_data, kh->name, rk.fds[0]) < 0)
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
	keep_enlist(k, kh, x->name.token, 0);
	kh->awaiting = true;
	k->n_awaiting++;
	apply_state(k, r, idmap_get(state, r->id));
	return true;
}

/* --- restore of kinds that come back from text (GPU memory) ------------- */

/* One part of such a region in the store: KEEP_KIND_PREFIX "ID.PART". */
struct kept_part {
	uint64_t id;
	unsigned part;
	const char *store_name;
	int fd;
};

static int part_parse(const char *name, struct kept_part *ret)
{
	const char *p = name + strlen(KEEP_KIND_PREFIX);
	char base[KEEP_NAME_MAX], canonical[KEEP_NAME_MAX + 16];
	uint64_t part;

	if (!has_prefix(name, KEEP_KIND_PREFIX) || name_field(&p, KEEP_ID_MAX, &ret->id) < 0 ||
	    ret->id == 0 || text_u64(&p, '\0', REGION_KEEP_FDS_MAX, &part) < 0)
		return -EINVAL;
	/* Only as this daemon writes it ("07" is not 7): parts are taken out
	 * of the store by the names it writes. */
	kind_name(base, ret->id);
	part_name(canonical, sizeof(canonical), base, (unsigned)part);
	if (strcmp(canonical, name) != 0)
		return -EINVAL;
	ret->part = (unsigned)part;
	return 0;
}

static int by_id_part(const void *a, const void *b)
{
	const struct kept_part *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->part < y->part ? -1 : x->part > y->part;
}

/* Takes a region's parts out of the store, closes what is still open. */
static void forget_parts(struct keep_ctx *k, uint64_t id, unsigned n_parts, struct kept_part *g,
			 size_t n, const char *why)
{
	char name[KEEP_NAME_MAX];

	log_warning("Fd store: dropping region %" PRIu64 ": %s", id, why);
	kind_name(name, id);
	(void)store_remove_parts(k, name, n_parts);
	/* Names past n_parts (a part beyond the record's count) as well. */
	for (size_t i = 0; i < n; i++) {
		if (g[i].part >= n_parts)
			(void)k->store->remove(k->store_data, g[i].store_name);
		g[i].fd = safe_close(g[i].fd);
	}
}

/* The restore ended: the region waits for its owner like a memfd's. */
static void kind_restored(struct keep_pending *p, struct region *r, const char *why)
{
	struct keep_ctx *k = p->k;
	struct keep_hook *kh = r ? keep_attach(k, r) : NULL;

	if (!kh) {
		if (r)
			region_drop_owner(r);
		forget_parts(k, p->id, p->n_parts, NULL, 0, r ? "out of memory" : why);
		pending_free(p);
		return;
	}
	r->owner_pid = 0;
	r->owner_gid = p->gid;
	kind_name(kh->name, r->id);
	keep_enlist(k, kh, p->token, p->n_parts);
	kh->awaiting = true;
	k->n_awaiting++;
	k->n_restored++;
	apply_state(k, r, p->state_line);
	log_debug("Fd store: region %" PRIu64 " (%s) restored", r->id, r->mem->type);
	pending_free(p);
	keep_changed(k);
}

static void on_kind_restored(void *ctx, struct region *r, struct errinfo *e)
{
	struct keep_pending *p = ctx;
	const char *why = e && e->name ? e->message : "the import failed";

	if (p->starting) {
		p->early = true;
		p->early_region = r;
		snprintf(p->why, sizeof(p->why), "%s", why);
		return;
	}
	kind_restored(p, r, why);
}

/*
 * Starts the restore of one region of parts g[0..n), sorted: its record as
 * part 0, then parts 1 to FILES once each. Returns whether it started.
 */
static bool restore_kind(struct keep_ctx *k, struct kept_part *g, size_t n, struct idmap *state)
{
	_cleanup_free_ char *text = NULL;
	struct keep_record rec = { .id = g[0].id };
	struct keep_name facts;
	struct keep_pending *p;
	struct errinfo e = {};
	struct session *holder;
	unsigned n_files;
	const char *line;
	int res;

	for (size_t i = 0; i < n; i++)
		if (g[i].part != i) {
			forget_parts(k, g[0].id, (unsigned)n, g, n,
				     i > 0 && g[i].part == g[i - 1].part ? "a part is there twice" :
									   "a part is missing");
			return false;
		}
	text = read_text(g[0].fd, 4096, RECORD_MAGIC);
	if (!text || record_parse(text, &facts, &n_files, &rec.text) < 0 || n_files != n - 1) {
		forget_parts(k, g[0].id, (unsigned)n, g, n, "its record cannot be read");
		return false;
	}
	if (!k->kinds) {
		forget_parts(k, g[0].id, (unsigned)n, g, n, "this daemon restores no such region");
		return false;
	}
	/* Each file part is a holder (put_parts()); the store keeps its own
	 * copy of it. A part that is no socket is the file itself. */
	for (size_t i = 1; i < n; i++) {
		int file;

		res = fdhold_peek(g[i].fd, &file);
		if (res == -ENOTSOCK)
			continue;
		if (res < 0) {
			forget_parts(k, g[0].id, (unsigned)n, g, n, "a part holds no file");
			return false;
		}
		safe_close(g[i].fd);
		g[i].fd = file;
	}
	holder = holder_for(k, facts.uid, facts.gid);
	p = holder ? malloc(sizeof(*p)) : NULL;
	line = idmap_get(state, g[0].id);
	if (p)
		*p = (struct keep_pending){ .k = k,
					    .id = g[0].id,
					    .gid = facts.gid,
					    .n_parts = (unsigned)n,
					    .state_line = line ? strdup(line) : NULL,
					    .starting = true };
	if (!p || (line && !p->state_line)) {
		free(p);
		forget_parts(k, g[0].id, (unsigned)n, g, n, "out of memory");
		return false;
	}
	rec.uid = facts.uid;
	rec.gid = facts.gid;
	rec.offset = facts.offset;
	rec.length = facts.length;
	rec.access = facts.access;
	for (size_t i = 1; i < n; i++)
		rec.fds[rec.n_fds++] = TAKE_FD(g[i].fd);
	/* The store keeps its own copy of the record. */
	g[0].fd = safe_close(g[0].fd);
	memcpy(p->token, facts.token, sizeof(p->token));
	list_add_tail(&p->link, &k->pending);
	k->n_files += p->n_parts;
	res = k->kinds->restore(k->kinds_data, holder, &rec, on_kind_restored, p, &p->job, &e);
	p->starting = false;
	if (res < 0) {
		forget_parts(k, p->id, p->n_parts, NULL, 0, e.name ? e.message : strerror(-res));
		errinfo_done(&e);
		pending_free(p);
		return false;
	}
	if (p->early)
		kind_restored(p, p->early_region, p->why);
	return true;
}

/* Restores every region of parts[0..n), sorted by id and part. Returns
 * how many started; *next_id goes above every id seen. */
static unsigned restore_kinds(struct keep_ctx *k, struct kept_part *parts, size_t n,
			      struct idmap *state, uint64_t *next_id)
{
	unsigned started = 0;

	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && parts[j].id == parts[i].id; j++)
			;
		*next_id = MAX(*next_id, parts[i].id + 1);
		if (idmap_get(&k->regions->regions, parts[i].id)) {
			forget_parts(k, parts[i].id, 0, &parts[i], j - i,
				     "a memfd region has its id");
			continue;
		}
		started += restore_kind(k, &parts[i], j - i, state);
	}
	return started;
}

unsigned keep_restore(struct keep_ctx *k, struct keep_passed *passed, size_t n, unsigned grace_sec)
{
	_cleanup_free_ struct restored *regions = calloc(n ?: 1, sizeof(*regions));
	_cleanup_free_ struct kept_part *parts = calloc(n ?: 1, sizeof(*parts));
	_cleanup_free_ char *text = NULL;
	struct idmap state;
	size_t n_regions = 0, n_parts = 0;
	uint64_t newest = 0, next_id, stated_next = 0;
	int newest_fd = -EBADF;
	unsigned done = 0, started;

	if (!regions || !parts || !k->store) {
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
		text = read_text(newest_fd, KEEP_STATE_MAX, STATE_MAGIC);
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
		if (grace_sec > 0 && part_parse(passed[i].name, &parts[n_parts]) == 0) {
			parts[n_parts].store_name = passed[i].name;
			parts[n_parts++].fd = TAKE_FD(passed[i].fd);
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
	k->n_restored += done;
	/* GPU regions come back on the pool, each under its old id: new
	 * ones are given ids above all of them meanwhile. */
	qsort(parts, n_parts, sizeof(*parts), by_id_part);
	started = restore_kinds(k, parts, n_parts, &state, &next_id);
	idmap_done(&state);
	k->regions->next_region_id = MAX(next_id, stated_next);
	if (keep_restoring(k))
		uv_timer_start(&k->restore_timer, on_restore_wait, KEEP_RESTORE_WAIT_MSEC, 0);
	if (done > 0 || started > 0) {
		k->grace_end_msec = uv_now(k->regions->core->loop) + (uint64_t)grace_sec * 1000;
		uv_timer_start(&k->grace_timer, on_grace_end, (uint64_t)grace_sec * 1000, 0);
		log_info("Fd store: %u regions restored%s, waiting %u s for their owners to "
			 "reclaim them",
			 done + started, started ? " (GPU memory: on the pool)" : "", grace_sec);
	}
	/* The devices may have changed: write the state as it is now. */
	if (newest || done)
		keep_changed(k);
	return done + started;
}
