/* SPDX-License-Identifier: BSD-3-Clause */
/* Where the daemon listens when nobody says otherwise. */
#ifndef RDMAMEM_SOCKPATH_H
#define RDMAMEM_SOCKPATH_H

#include <stddef.h>

#define SOCKPATH_SYSTEM "/run/rdmamemd/rdmamemd.sock"
#define SOCKPATH_NAME "rdmamemd.sock"
#define SOCKPATH_ENV "RDMAMEM_SOCKET"

/*
 * Daemon side: $RDMAMEM_SOCKET, else $RUNTIME_DIRECTORY/rdmamemd.sock (set by
 * systemd), else /run/rdmamemd/rdmamemd.sock for root, else
 * $XDG_RUNTIME_DIR/rdmamemd/rdmamemd.sock. -ENXIO when none applies.
 */
int sockpath_server_default(char *buf, size_t size);

/*
 * Client side: $RDMAMEM_SOCKET, else the per-user socket when it exists,
 * else the system socket.
 */
int sockpath_client_default(char *buf, size_t size);

/* Fills a sockaddr_un; -ENAMETOOLONG when path does not fit. */
struct sockaddr_un;
int sockpath_to_addr(const char *path, struct sockaddr_un *ret, unsigned *ret_len);

#endif
