/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A notification on the wire: what one daemon SENDs to another on a link,
 * after the writes of the same transfer (link_post_notify()), and what the
 * receiving daemon's endpoint hands to notify.c. A little-endian header,
 * then the client's bytes:
 *
 *	u8 magic[4] "RDMN", u8 version (1), u8 pad[3],
 *	u32 length (of the bytes after the header, ≤ NOTIFY_MAX),
 *	u32 sender uid (the initiating client's, on the sending host),
 *	u64 export id (the descriptor's, which the sender imported),
 *	then length bytes.
 *
 * A message is one SEND of exactly NOTIFY_HEADER_BYTES + length bytes; the
 * receiver posts buffers of RECV_RING_BYTES (a SEND longer than that
 * fails on the receiving QP: RC gives no way to take half of it).
 */
#ifndef RDMAMEMD_NOTIFY_MSG_H
#define RDMAMEMD_NOTIFY_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/rdma/recv_ring.h"

#define NOTIFY_MAGIC "RDMN"
#define NOTIFY_VERSION 1
#define NOTIFY_HEADER_BYTES 24U
/* The bytes a client may attach to one transfer. */
#define NOTIFY_MAX 4096U
#define NOTIFY_MSG_MAX (NOTIFY_HEADER_BYTES + NOTIFY_MAX)

_Static_assert(NOTIFY_MSG_MAX <= RECV_RING_BYTES,
	       "the endpoint's receive buffers must hold the largest notification");

struct notify_header {
	uint32_t length;
	uint32_t sender_uid;
	uint64_t export_id;
};

/* Writes the header and the len bytes of data to out (NOTIFY_HEADER_BYTES
 * + len of room); len ≤ NOTIFY_MAX. Returns the message's size. */
size_t notify_msg_encode(uint8_t *out, uint64_t export_id, uid_t sender_uid, const void *data,
			 size_t len);

/*
 * Checks a received message of len bytes: magic, version, a length that is
 * at most NOTIFY_MAX and exactly what follows the header. 0 and *ret (the
 * bytes are msg + NOTIFY_HEADER_BYTES); -EBADMSG with *ret_why otherwise.
 */
int notify_msg_decode(const uint8_t *msg, size_t len, struct notify_header *ret,
		      const char **ret_why);

#endif
