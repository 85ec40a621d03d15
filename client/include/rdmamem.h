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
 * - A connection must not be used by two threads at once. Separate
 *   connections are independent; open one per thread.
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
 * successful call.
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

/* Round trip to the daemon. Returns 0 or a negative errno. */
int rdmamem_ping(struct rdmamem_client *client);

#ifdef __cplusplus
}
#endif

#endif
