/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librdmamem: the client library of rdmamemd, the memory-registration daemon
 * for RDMA and GPU hosts.
 *
 * Conventions:
 * - Functions that can fail return an int: 0 (or a count) on success, a
 *   negative errno on failure. Out-parameters are written only on success.
 * - When the daemon answers with a Varlink error, the call returns the errno
 *   that error stands for (for example -EINVAL for
 *   org.varlink.service.InvalidParameter) and rdmamem_client_error_name()
 *   and rdmamem_client_error_message() say exactly what went wrong.
 * - A connection must not be used by two threads at once: one thread at a
 *   time calls its functions, and its callbacks run in that thread, inside
 *   rdmamem_client_process() (or a blocking call). Separate connections
 *   are independent; open one per thread, or hand one over with a lock.
 * - File descriptors created by the library are close-on-exec.
 *
 * The wire protocol is Varlink; see PROTOCOL.md and io.rdmamemd.varlink.
 */
#ifndef RDMAMEM_H
#define RDMAMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDMAMEM_VERSION_MAJOR 0
#define RDMAMEM_VERSION_MINOR 1

/* Default timeout of a call, in milliseconds. */
#define RDMAMEM_DEFAULT_TIMEOUT_MS 30000

struct rdmamem_client;

/*
 * Connects to the daemon at path, or when path is NULL at the default
 * socket: $RDMAMEM_SOCKET, else $XDG_RUNTIME_DIR/rdmamemd/rdmamemd.sock if it
 * exists, else /run/rdmamemd/rdmamemd.sock.
 *
 * Returns 0 and a new connection in *ret, or a negative errno: -ENOENT or
 * -ECONNREFUSED when no daemon listens there, -EACCES when the socket is
 * not accessible to this user.
 */
int rdmamem_client_connect(const char *path, struct rdmamem_client **ret);

/*
 * Closes the connection. The daemon releases everything that the connection
 * held (regions, leases). Accepts NULL; returns NULL.
 */
struct rdmamem_client *rdmamem_client_close(struct rdmamem_client *client);

/* Timeout of each call in milliseconds; negative waits forever. */
int rdmamem_client_set_timeout(struct rdmamem_client *client, int timeout_ms);

/* The socket path this connection was made to. */
const char *rdmamem_client_socket_path(const struct rdmamem_client *client);

/*
 * The Varlink error name of the last failed call ("io.rdmamemd.NoSuchRegion",
 * ...), or NULL when the last call succeeded or failed locally.
 */
const char *rdmamem_client_error_name(const struct rdmamem_client *client);

/*
 * A one-line explanation of the last failure, from the daemon or from the
 * library (for example "the daemon closed the connection"). NULL after a
 * successful call. io.rdmamemd errors bring their own message; for the
 * org.varlink.service errors, which carry only the parameter they declare,
 * the library composes one from it ("parameter 'offset' is invalid: ...").
 */
const char *rdmamem_client_error_message(const struct rdmamem_client *client);

/*
 * Calls method (for example "io.rdmamemd.GetStatus") with params_json, the
 * text of a JSON object or NULL for none.
 *
 * fds/n_fds: file descriptors to pass with the call (at most 16); the
 * parameters refer to them by index. They stay owned by the caller.
 *
 * ret_reply_json: if not NULL, receives the reply's parameters as a
 * malloc()ed JSON text, also when the daemon answers with an error (then
 * they are the error's parameters). Free it with free().
 *
 * ret_fds/ret_n_fds: if not NULL, *ret_n_fds holds the capacity of ret_fds
 * on entry and the number of file descriptors received on return; the
 * caller owns them. Descriptors beyond the capacity are closed.
 *
 * Returns 0 on success, the errno of the Varlink error if the daemon
 * answered with one, -ETIMEDOUT, -ECONNRESET when the daemon went away,
 * -EPROTO when its answer was not valid Varlink. After a timeout or a
 * broken connection every later call returns -ENOTCONN: reconnect.
 */
int rdmamem_call(struct rdmamem_client *client, const char *method, const char *params_json,
		 const int *fds, size_t n_fds, char **ret_reply_json, int *ret_fds,
		 size_t *ret_n_fds);

/*
 * Calls a listing method ("io.rdmamemd.ListRegions", "io.rdmamemd.ListClients",
 * "io.rdmamemd.ListConnections"), which answer a page at a time, page after
 * page until the last, and returns what one answer with everything would
 * have been: {"regions": [...]} (or "clients", "connections") as malloc()ed
 * JSON text in *ret_reply_json. What comes or goes meanwhile may or may not
 * be in it; nothing appears twice. Returns 0 or a negative errno.
 */
int rdmamem_list(struct rdmamem_client *client, const char *method, char **ret_reply_json);

/* Round trip to the daemon. Returns 0 or a negative errno. */
int rdmamem_ping(struct rdmamem_client *client);

/*
 * The asynchronous API, for event loops (libuv, epoll, asyncio): calls are
 * queued with rdmamem_call_async() and pipelined on the connection; the
 * loop watches rdmamem_client_get_fd() for rdmamem_client_get_events(),
 * wakes at rdmamem_client_get_timeout(), and calls
 * rdmamem_client_process(), which writes what it can, reads what is
 * there and runs the callbacks of the replies that came and of the calls
 * whose time ran out.
 *
 * Order: the daemon answers the calls of one connection one at a time, in
 * the order they were sent, so a call queued behind one that waits in the
 * daemon (a Lock, WaitNotifications) is answered after it. Calls that must
 * not wait for each other go on connections of their own, all driven by
 * the same loop.
 *
 * Threads and callbacks: a callback runs in the thread that called
 * rdmamem_client_process(), inside it. It may call rdmamem_call_async(),
 * rdmamem_call_set_timeout() and rdmamem_call_cancel() (of any call, its
 * own included) and read the client's state; it must not close the client
 * (close it once rdmamem_client_process() returned), and a blocking call
 * made from it fails with -EBUSY. The blocking calls are this API
 * underneath: callbacks of calls queued earlier may run inside them.
 */

struct rdmamem_call;

/* rdmamem_call_async() flags. */
#define RDMAMEM_CALL_MORE (1U << 0)   /* "more": the daemon may answer with several replies */
#define RDMAMEM_CALL_ONEWAY (1U << 1) /* "oneway": no reply at all, no callback */

/* rdmamem_reply.flags: further replies to this call follow. */
#define RDMAMEM_REPLY_CONTINUES (1U << 0)

/* One reply, valid during the callback only. */
struct rdmamem_reply {
	int error; /* 0, or a negative errno */
	/* The Varlink error ("io.rdmamemd.LockTimeout"), or NULL: success, or
	 * a failure of the library's own (a timeout, a lost connection). */
	const char *error_name;
	const char *error_message; /* one line; NULL on success */
	/* The reply's (or the Varlink error's) parameters as JSON text, "{}"
	 * when it has none; NULL for a failure of the library's own. */
	const char *parameters;
	/* Fds that came with this reply. The callback takes one by copying it
	 * and writing -1 in its place; the library closes the rest after. */
	int *fds;
	size_t n_fds;
	unsigned flags; /* RDMAMEM_REPLY_CONTINUES */
};

/*
 * Called once per reply: for a call without RDMAMEM_CALL_MORE once; with
 * it, once per reply with RDMAMEM_REPLY_CONTINUES and once more for the
 * last (which may be an error). A failure of the library's own (timeout,
 * lost connection) is the last. After the last, call is freed.
 */
typedef void (*rdmamem_reply_fn)(struct rdmamem_client *client, struct rdmamem_call *call,
				 const struct rdmamem_reply *reply, void *userdata);

/* The connection's socket (non-blocking, close-on-exec), for the loop to watch. */
int rdmamem_client_get_fd(const struct rdmamem_client *client);

/*
 * POLLIN, plus POLLOUT while calls wait to be written: what to wait for on
 * the fd. 0 once the connection is dead (stop watching; close the client).
 */
int rdmamem_client_get_events(const struct rdmamem_client *client);

/*
 * The nearest deadline of a pending call, in CLOCK_MONOTONIC
 * microseconds, or UINT64_MAX when none has one: call
 * rdmamem_client_process() then even if the fd stays quiet.
 */
int rdmamem_client_get_timeout(const struct rdmamem_client *client, uint64_t *ret_usec);

/*
 * Makes progress without blocking: writes what the socket takes, reads
 * what is there, runs the callbacks of the replies read and of the calls
 * past their deadline. Returns > 0 when it did something, 0 when there
 * was nothing to do, or a negative errno once the connection is dead
 * (-ECONNRESET: the daemon went away; every pending call's callback got
 * that error once; the same errno every time after).
 */
int rdmamem_client_process(struct rdmamem_client *client);

/*
 * Queues a call of method with params_json (a JSON object's text, or NULL)
 * and returns at once; callback (userdata its last argument) runs for its
 * replies from rdmamem_client_process(). fds (at most 16) are duplicated:
 * the caller keeps its own and may close them at once. Calls on one
 * connection are sent and answered in the order they were made.
 *
 * The call's timeout is the client's (rdmamem_client_set_timeout()),
 * counted from now and again from each RDMAMEM_REPLY_CONTINUES reply;
 * rdmamem_call_set_timeout() changes it. When it runs out, the callback
 * gets -ETIMEDOUT (error_name NULL) and the connection goes on: the
 * call's reply, when it comes, is dropped.
 *
 * *ret_call (may be NULL) is the call's handle, valid until its last
 * callback returns or it is cancelled. With RDMAMEM_CALL_ONEWAY callback
 * must be NULL and *ret_call is set to NULL. Returns 0, -EINVAL (params
 * not an object, method NULL), -E2BIG (fds), -ENOTCONN (the connection is
 * dead), -ENOMEM; the client's error message says why.
 */
int rdmamem_call_async(struct rdmamem_client *client, const char *method, const char *params_json,
		       const int *fds, size_t n_fds, unsigned flags, rdmamem_reply_fn callback,
		       void *userdata, struct rdmamem_call **ret_call);

/* Sets call's timeout to timeout_ms from when it was made (or its last
 * RDMAMEM_REPLY_CONTINUES reply); negative: none. */
int rdmamem_call_set_timeout(struct rdmamem_call *call, int timeout_ms);

/*
 * Cancels call: its callback is not called again, and the call is freed.
 * A call not yet written is never sent; one sent already runs to its end
 * in the daemon, and its replies are dropped as they come (a stream that
 * never ends, WaitNotifications with "more", keeps the connection waiting:
 * close it instead). Accepts NULL; returns NULL.
 */
struct rdmamem_call *rdmamem_call_cancel(struct rdmamem_call *call);

/* The method a call calls (for logs). */
const char *rdmamem_call_get_method(const struct rdmamem_call *call);

/*
 * Host memory regions.
 *
 * Memory reaches the daemon as a sealed memfd: the daemon maps it once and
 * keeps that mapping (and so the memory) alive until the region is
 * unregistered, the connection closes, and every operation and lease on it
 * is finished. Region and lease ids are never reused while the daemon runs.
 */

/* Modes of a region's access lock. */
enum rdmamem_lock_mode {
	RDMAMEM_LOCK_SHARED = 0,    /* readers, together */
	RDMAMEM_LOCK_DISJOINT = 1,  /* writers of non-overlapping ranges, together */
	RDMAMEM_LOCK_EXCLUSIVE = 2, /* one writer, alone */
};

/*
 * Creates a memfd of size bytes sealed the way the daemon requires
 * (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) and maps it read-write.
 * Returns 0 with the fd (close-on-exec) and, if ret_addr is not NULL, the
 * mapping (munmap(addr, size) to release); or a negative errno.
 */
int rdmamem_memfd_create(const char *name, size_t size, int *ret_fd, void **ret_addr);

/*
 * Registers [offset, offset + length) of the memfd fd (length 0: to its
 * end). The caller keeps fd. Returns 0 and the region id, or a negative
 * errno: -EBADFD (not a memfd), -EPERM (no F_SEAL_SHRINK), -ERANGE (range
 * outside the file), -EDQUOT (quota).
 */
int rdmamem_register(struct rdmamem_client *client, int fd, uint64_t offset, uint64_t length,
		     uint64_t *ret_region);

/*
 * Drops the region. Its RDMA registrations are gone when this returns (a
 * remote peer's next access with its rkeys fails, whoever still holds a
 * lease); its memory goes once in-flight work and leases are done, and new
 * calls on it, under a lease too, get -ENOENT.
 */
int rdmamem_unregister(struct rdmamem_client *client, uint64_t region);

/*
 * Reads length bytes at offset of region into buf, or writes them from buf.
 * lease: 0, or a lease of this connection on the region to work under.
 * Without a lease the daemon takes the lock itself (shared for reads, mode
 * for writes: RDMAMEM_LOCK_EXCLUSIVE or RDMAMEM_LOCK_DISJOINT). From 4 KiB
 * on the bytes go through the connection's staging region, which the first
 * such call registers (rdmamem(3)); a daemon that refuses it gets them as
 * base64. Transfers larger than one call carries are split; without a lease
 * the library then takes one for the whole transfer, so it stays atomic.
 */
int rdmamem_read(struct rdmamem_client *client, uint64_t region, uint64_t offset, void *buf,
		 size_t length, uint64_t lease);
int rdmamem_write(struct rdmamem_client *client, uint64_t region, uint64_t offset, const void *buf,
		  size_t length, enum rdmamem_lock_mode mode, uint64_t lease);

struct rdmamem_copy {
	uint64_t from_region, from_offset, from_lease;
	uint64_t to_region, to_offset, to_lease;
	uint64_t length;
	enum rdmamem_lock_mode mode; /* for the destination without a lease */
};

/* Copies between two regions inside the daemon: no payload on the socket. */
int rdmamem_copy(struct rdmamem_client *client, const struct rdmamem_copy *copy);

/*
 * Takes a lease on region's lock. timeout_ms: -1 waits without limit, 0
 * takes it only if free now, else milliseconds. Returns 0 and the lease id,
 * -ETIMEDOUT (io.rdmamemd.LockTimeout), or another negative errno. The lease
 * lasts until rdmamem_unlock() or until the connection closes.
 */
int rdmamem_lock(struct rdmamem_client *client, uint64_t region, enum rdmamem_lock_mode mode,
		 int timeout_ms, uint64_t *ret_lease);
int rdmamem_unlock(struct rdmamem_client *client, uint64_t lease);

/*
 * RDMA.
 *
 * A region registered on a device can be reached by remote peers through
 * queue pairs the daemon owns, in the protection domain of the region
 * owner's uid. The owner hands its peers, out of band: the daemon's rdmacm
 * address (or its socket, for ConnectQueuePair), an access token, and each
 * region's {addr, rkey}.
 */

#define RDMAMEM_TOKEN_LEN 32

struct rdmamem_registration {
	char device[64];
	uint64_t addr; /* where peers address the region (the MR's iova) */
	uint64_t length;
	uint32_t lkey, rkey;
};

/*
 * Registers region on device, or returns the registration in force. A
 * failure is recorded by the daemon and not retried: the same error comes
 * back until root's RetryRegistration clears it; the reason (errno text,
 * range, memlock limit) is in rdmamem_client_error_message(). -EROFS: the
 * region is read-only and the daemon's kernel (before Linux 6.2) cannot
 * register read-only memory; nothing was tried or recorded.
 */
int rdmamem_register_on(struct rdmamem_client *client, uint64_t region, const char *device,
			struct rdmamem_registration *ret);

/*
 * Restarts of the daemon.
 *
 * Under systemd a region outlives a restart of the daemon, a crash
 * included (rdmamemd(8), "Restarts"): the new daemon keeps it for its
 * owner, with its id and memory, registered again on the devices it had —
 * with new keys, since RDMA registrations end with the process. GPU memory
 * comes back too: a VMM allocation always, an IPC handle's while this
 * process (its exporter) lives. The library remembers the reclaim token
 * that rdmamem_register() and the GPU registrations got for each such
 * region and the devices rdmamem_register_on() named. When the daemon
 * has closed the connection (a call returned -ECONNRESET), the next
 * blocking call first reconnects to the same socket (waiting up to the
 * client's timeout for a daemon to listen there) and reclaims every region
 * this client still holds, then goes on. What the old connection held
 * besides (leases, access tokens, remote handles, plans) is gone.
 */

/*
 * Called once per region this client held, after a reconnect: error 0 and
 * its registrations now in force (their keys are new: peers need a new
 * descriptor), or a negative errno when the region did not come back
 * (-ENOENT: the daemon did not keep it; register it again). Runs inside
 * the call that reconnected; it must not call the library.
 */
typedef void (*rdmamem_reclaim_fn)(void *userdata, uint64_t region, int error,
				   const struct rdmamem_registration *regs, size_t n_regs);

/* Sets (fn NULL: clears) what hears of each reclaimed region. */
int rdmamem_client_on_reclaim(struct rdmamem_client *client, rdmamem_reclaim_fn fn, void *userdata);

/*
 * Reconnects and reclaims (see above), once the daemon closed the
 * connection; blocking calls do it themselves, an asynchronous user calls
 * it and then takes the new rdmamem_client_get_fd(). Pending calls fail
 * with -ECONNRESET. Returns how many regions came back; -EISCONN when the
 * connection is still up (it keeps what it holds), or another negative
 * errno when no connection could be made (the client stays broken).
 */
int rdmamem_client_reconnect(struct rdmamem_client *client);

/* A token that admits remote peers into this uid's protection domains. It
 * lives until revoked or until this connection closes. */
int rdmamem_access_token_create(struct rdmamem_client *client, char ret[RDMAMEM_TOKEN_LEN + 1]);
/* Revokes it and tears down the connections it admitted. */
int rdmamem_access_token_revoke(struct rdmamem_client *client, const char *token);

/*
 * Other hosts' regions. rdmamem_region_export() gives the owner of a region
 * registered on RDMA devices a descriptor (a string of at most 2255 bytes,
 * "rdmamem1." and base64url; *ret_descriptor is malloc()ed, the caller frees
 * it) for peers on other hosts: the daemon's rdmacm endpoints and, per
 * device, the region's addr, rkey and GID, with a new access token of its
 * own (ret_token, may be NULL) and the export's id (ret_id, may be NULL).
 * devices: NULL-terminated names, or NULL for every device the region is
 * registered on. The descriptor grants the region's remote access until
 * the token is revoked, this connection closes or the region is
 * unregistered: hand it only to whom you would hand the token.
 * -ENOLINK (NotRegistered): no registration in force on a device asked
 * for; -EADDRNOTAVAIL (NoRdmaEndpoint): the daemon listens for no RDMA
 * connections. A remote one-sided operation does not take the region's
 * lock: coordinate with the peers (a notification, a flag they write last).
 */
int rdmamem_region_export(struct rdmamem_client *client, uint64_t region,
			  const char *const *devices, char **ret_descriptor,
			  char ret_token[RDMAMEM_TOKEN_LEN + 1], uint64_t *ret_id);

/*
 * A remote handle of another daemon's descriptor, for this connection: the
 * descriptor is checked once (-EINVAL, with the reason in
 * rdmamem_client_error_message()); no connection is made yet. It lasts
 * until rdmamem_remote_release() or until the connection closes; -EDQUOT
 * past the daemon's max-remotes-per-uid.
 */
int rdmamem_remote_import(struct rdmamem_client *client, const char *descriptor,
			  uint64_t *ret_remote);

#define RDMAMEM_REMOTE_READ (1U << 0)  /* the descriptor grants remote reads */
#define RDMAMEM_REMOTE_WRITE (1U << 1) /* and writes */

/* What a descriptor says, as the daemon parsed it (its token aside). */
struct rdmamem_remote_info {
	uint64_t export_id; /* the export's id on the exporting host */
	uint64_t length;    /* bytes of the remote region: offsets + lengths stay inside */
	unsigned access;    /* RDMAMEM_REMOTE_READ | RDMAMEM_REMOTE_WRITE */
	unsigned n_devices; /* devices of the exporting host it is registered on */
};

/* rdmamem_remote_import(), with what the descriptor says in *ret_info (may be NULL). */
int rdmamem_remote_import_info(struct rdmamem_client *client, const char *descriptor,
			       uint64_t *ret_remote, struct rdmamem_remote_info *ret_info);
/* -ENOENT when this connection holds no such remote. */
int rdmamem_remote_release(struct rdmamem_client *client, uint64_t remote);

/* Bytes [local_offset, +length) of a region and [remote_offset, +length) of a remote. */
struct rdmamem_range {
	uint64_t local_offset;
	uint64_t remote_offset;
	uint64_t length;
};

/*
 * A plan: 1 to 131072 ranges between region (which the caller may read)
 * and remote, sent packed (24 bytes a range), checked now against both
 * lengths (-ERANGE names the first that does not fit, by index, in the
 * error message), to be posted later by index without sending them again. It lasts until rdmamem_plan_release()
 * or until the connection closes; -EDQUOT past max-plans-per-uid.
 */
int rdmamem_transfer_prepare(struct rdmamem_client *client, uint64_t region, uint64_t remote,
			     const struct rdmamem_range *ranges, size_t n_ranges,
			     uint64_t *ret_plan);
/* -ENOENT when this connection holds no such plan. */
int rdmamem_plan_release(struct rdmamem_client *client, uint64_t plan);

/* The bytes a peer may attach to one transfer as its notification. */
#define RDMAMEM_NOTIFY_MAX 4096

/*
 * A notification: bytes a peer's client attached to a transfer into one
 * of this connection's exports. It arrives after that transfer's data is
 * in place (the peer's daemon SENDs it after the writes, on the same RC
 * queue pair).
 */
struct rdmamem_notification {
	uint64_t export_id;     /* rdmamem_region_export()'s ret_id */
	uint32_t sender_uid;    /* the sender's uid on its host, as its daemon states it */
	uint64_t received_usec; /* CLOCK_REALTIME, when this daemon received it */
	size_t len;
	uint8_t data[RDMAMEM_NOTIFY_MAX];
};

/*
 * Takes up to n notifications queued for this connection's exports,
 * oldest first, into ret: at once when timeout_ms is 0, else waiting up to
 * timeout_ms (at most an hour) for the first when none is queued. Returns
 * how many (0: none came in time), or -errno. The daemon queues at most
 * 256 per connection and drops (and counts, GetStats) what comes past
 * that: read them. n: 1 to 256. The connection serves no other call while
 * it waits.
 */
int rdmamem_notifications_wait(struct rdmamem_client *client, int timeout_ms,
			       struct rdmamem_notification *ret, size_t n);
/* One op of rdmamem_transfer(). */
enum rdmamem_transfer_opcode {
	RDMAMEM_TRANSFER_READ = 1,  /* remote -> local */
	RDMAMEM_TRANSFER_WRITE = 2, /* local -> remote */
};

struct rdmamem_transfer_op {
	int op; /* enum rdmamem_transfer_opcode */
	uint64_t region, offset;
	uint64_t lease; /* one of this connection's leases on region, or 0: the daemon locks */
	uint64_t remote, remote_offset;
	uint64_t length;
};

/* Progress of a transfer: ops and bytes done so far, of n_ops and bytes. */
typedef void (*rdmamem_transfer_progress_fn)(void *userdata, uint64_t ops_done, uint64_t bytes_done,
					     uint64_t n_ops, uint64_t bytes);

/*
 * Transfer: the daemon posts one-sided READs and WRITEs between local
 * regions and remotes on its own queue pairs and returns when every op is
 * done (0, *ret_bytes the bytes moved). The local regions are locked for
 * the duration (shared for WRITEs, exclusive for READs) unless an op names
 * a lease. progress (may be NULL) is called with progress replies (at most
 * every 100 ms or 4096 ops). Failures, with the first failed op's index in
 * rdmamem_client_error_message(): -EACCES (RemoteAccessError, or
 * PermissionDenied up front), -EHOSTUNREACH (PeerUnreachable), -ECANCELED
 * (TransferCancelled), -EIO (TransferFailed), -ENOENT, -ERANGE, -EINVAL.
 * The call has no deadline of its own beyond the client's timeout per
 * reply.
 */
int rdmamem_transfer(struct rdmamem_client *client, const struct rdmamem_transfer_op *ops,
		     size_t n_ops, rdmamem_transfer_progress_fn progress, void *userdata,
		     uint64_t *ret_bytes);
/* The same for ranges indices[0..n) of plan (n == 0: all), op READ or
 * WRITE for all: the prepared form (rdmamem_transfer_prepare()). The
 * indices travel packed (PROTOCOL.md, "Packed indices"). */
int rdmamem_transfer_post(struct rdmamem_client *client, uint64_t plan, int op,
			  const uint64_t *indices, size_t n, rdmamem_transfer_progress_fn progress,
			  void *userdata, uint64_t *ret_bytes);

/* What a transfer call may add; a NULL options pointer: none of it. */
struct rdmamem_transfer_options {
	/* Bytes (at most RDMAMEM_NOTIFY_MAX; NULL: none) the remote region's
	 * owner receives (rdmamem_notifications_wait()) after the transfer's
	 * data is in place; a failed transfer sends none. */
	const void *notify;
	size_t notify_len;
	rdmamem_transfer_progress_fn progress; /* may be NULL */
	void *userdata;
};

/* rdmamem_transfer() and rdmamem_transfer_post() with options: -EMSGSIZE
 * for notify bytes past RDMAMEM_NOTIFY_MAX. */
int rdmamem_transfer_with(struct rdmamem_client *client, const struct rdmamem_transfer_op *ops,
			  size_t n_ops, const struct rdmamem_transfer_options *opts,
			  uint64_t *ret_bytes);
int rdmamem_transfer_post_with(struct rdmamem_client *client, uint64_t plan, int op,
			       const uint64_t *indices, size_t n,
			       const struct rdmamem_transfer_options *opts, uint64_t *ret_bytes);

/*
 * A batch: ranges[0..n) between one local region (under lease, one of this
 * connection's on it, or 0: the daemon locks it) and one remote, op READ or
 * WRITE for all. Sent packed (24 bytes a range), as base64 text below
 * 1,024 ranges and from 1,024 on in a sealed memfd the daemon maps
 * read-only for the call (no text to parse), checked in one pass: up to its
 * max-transfer-ops (100,000 by default; -EINVAL past it), where the listed
 * form (rdmamem_transfer()) fits about 7,000 in one message. Otherwise as
 * rdmamem_transfer(): the first failed range's index is in the error
 * message, the bytes moved in *ret_bytes.
 */
int rdmamem_transfer_ranges(struct rdmamem_client *client, int op, uint64_t region, uint64_t lease,
			    uint64_t remote, const struct rdmamem_range *ranges, size_t n,
			    const struct rdmamem_transfer_options *opts, uint64_t *ret_bytes);

/*
 * The packed forms of the Transfer and PrepareTransfer parameters, for
 * callers that build their own calls (rdmamem_call_async(), bindings such
 * as the Python package) and want what rdmamem_transfer_ranges(),
 * rdmamem_transfer_prepare() and rdmamem_transfer_post() send.
 *
 * rdmamem_ranges_pack: ranges[0..n) as the "packed" text (returns 0,
 * *ret_text malloc()ed, *ret_fd -EBADF) below 1,024 ranges, and from 1,024
 * on as a new sealed memfd of the records (returns 1, *ret_fd the caller's
 * to close once the call is sent, *ret_text NULL), to be sent as fd k of
 * the call with "packed_fd": k. -EINVAL for no ranges.
 *
 * rdmamem_indices_pack: indices[0..n) as the "packed_indices" text
 * (malloc()ed); -ERANGE when one does not fit in 32 bits (no plan has it:
 * send such indices listed, for the daemon to refuse).
 */
int rdmamem_ranges_pack(const struct rdmamem_range *ranges, size_t n, char **ret_text, int *ret_fd);
int rdmamem_indices_pack(const uint64_t *indices, size_t n, char **ret_text);

/*
 * GPU memory (CUDA). The daemon loads the CUDA driver on the first GPU
 * import; without one these answer -ENXIO (io.rdmamemd.CudaUnavailable).
 *
 * rdmamem_register_cuda_vmm: fd is a VMM allocation exported with
 * cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
 * alloc_size the size it was created with (cuMemCreate). The caller keeps fd.
 *
 *	CUmemAllocationProp prop = {
 *		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
 *		.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
 *		.location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
 *	};
 *	CUmemGenericAllocationHandle h;
 *	int fd;
 *
 *	cuMemCreate(&h, size, &prop, 0);	// size: a multiple of the granularity
 *	cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
 *	rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &region);
 *
 * rdmamem_register_cuda_vmm_chunks: n allocations of alloc_size bytes each,
 * of one device, that the daemon maps one after the other as one range, as
 * the process that made them maps them (a tensor of PyTorch's expandable
 * segments spans several); offset and length select the region in that
 * range. n is 1 to RDMAMEM_CUDA_VMM_CHUNKS_MAX. The caller keeps the fds.
 *
 * rdmamem_register_cuda_ipc: handle is a CUipcMemHandle from
 * cuIpcGetMemHandle(&handle, dptr); gpu the device ordinal (in the daemon's
 * view) whose context opens it. Regions over one allocation share the open.
 *
 *	CUipcMemHandle handle;
 *
 *	cuMemAlloc(&dptr, size);
 *	cuIpcGetMemHandle(&handle, dptr);
 *	rdmamem_register_cuda_ipc(c, &handle, 0, 0, 0, &region);
 *
 * offset and length select the region inside the allocation (length 0: to
 * its end). Read, Write, Copy, Lock and RegisterOn then work as for host
 * regions; host regions copied to or from a GPU are page-locked by the
 * daemon once, so such copies run at DMA speed.
 */
#define RDMAMEM_CUDA_IPC_HANDLE_SIZE 64
#define RDMAMEM_CUDA_VMM_CHUNKS_MAX 64

int rdmamem_register_cuda_vmm(struct rdmamem_client *client, int fd, uint64_t alloc_size,
			      uint64_t offset, uint64_t length, uint64_t *ret_region);
int rdmamem_register_cuda_vmm_chunks(struct rdmamem_client *client, const int *fds, size_t n,
				     uint64_t alloc_size, uint64_t offset, uint64_t length,
				     uint64_t *ret_region);
int rdmamem_register_cuda_ipc(struct rdmamem_client *client, const void *handle, int gpu,
			      uint64_t offset, uint64_t length, uint64_t *ret_region);

#define RDMAMEM_SHARE_GROUP (1U << 0)    /* id is a gid, not a uid */
#define RDMAMEM_SHARE_READONLY (1U << 1) /* reads and shared leases only */

/* Lets another uid (or gid) use region. Only its owner may. */
int rdmamem_share(struct rdmamem_client *client, uint64_t region, uint32_t id, unsigned flags);

/*
 * Takes back the share of uid (or, with RDMAMEM_SHARE_GROUP, gid) id: its
 * new calls on region are refused at once, and its leases end unless it has
 * the right they need another way (owner, another share). Unsharing what is
 * not shared succeeds. Only the owner may.
 */
int rdmamem_unshare(struct rdmamem_client *client, uint64_t region, uint32_t id, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif
