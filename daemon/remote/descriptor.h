/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Descriptors: what ExportRegion hands the owner of a region so that
 * another host's daemon can reach it, and ImportRemote takes back. A
 * descriptor is a capability (its token admits the bearer into the owner's
 * protection domains) and an opaque string to everyone but the daemons:
 *
 *	"rdmamem1." base64url-without-padding(record)
 *
 * The record, little-endian, packed (PROTOCOL.md "Descriptors" is its
 * reference):
 *
 *	header    u8 version (1), u8 access (1 read, 2 write), u8 n_endpoints,
 *	          u8 n_devices, u64 export id, u64 region length,
 *	          u8 token[16]                                       36 bytes
 *	endpoint  u8 family (4 or 6), u8 pad (0), u16 port,
 *	          u8 addr[16] (IPv4: the first 4, the rest 0)        20 bytes each
 *	device    u8 gid[16], u64 addr, u32 rkey, u8 port,
 *	          u8 name_len, name[name_len] (no NUL)               30 + name_len each
 *
 * Parsing is strict: one spelling per descriptor, every count and length
 * bounded, nothing after the last device; whatever descriptor_format()
 * writes, descriptor_parse() reads back, and nothing else. Pure code:
 * no state, any thread (the fuzz target runs it alone).
 */
#ifndef RDMAMEMD_DESCRIPTOR_H
#define RDMAMEMD_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon/rdma/token.h"

#define DESCRIPTOR_PREFIX "rdmamem1."
#define DESCRIPTOR_VERSION 1

#define DESCRIPTOR_ACCESS_READ 1U
#define DESCRIPTOR_ACCESS_WRITE 2U

#define DESCRIPTOR_ENDPOINTS_MAX 8
#define DESCRIPTOR_DEVICES_MAX 16
#define DESCRIPTOR_NAME_MAX 63 /* a device name's bytes: VB_NAME_MAX - 1 */

#define DESCRIPTOR_HEADER_BYTES 36
#define DESCRIPTOR_ENDPOINT_BYTES 20
#define DESCRIPTOR_DEVICE_BYTES 30 /* without its name */
#define DESCRIPTOR_RECORD_MAX                                                             \
	(DESCRIPTOR_HEADER_BYTES + DESCRIPTOR_ENDPOINTS_MAX * DESCRIPTOR_ENDPOINT_BYTES + \
	 DESCRIPTOR_DEVICES_MAX * (DESCRIPTOR_DEVICE_BYTES + DESCRIPTOR_NAME_MAX))
/* The longest text a descriptor can be (without a NUL): 2,255 characters. */
#define DESCRIPTOR_TEXT_MAX (sizeof(DESCRIPTOR_PREFIX) - 1 + (DESCRIPTOR_RECORD_MAX * 4 + 2) / 3)

/* An rdmacm endpoint of the exporting daemon. */
struct descriptor_endpoint {
	uint8_t family; /* 4 or 6 */
	uint16_t port;
	uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes, the rest 0 */
};

/* The region's registration on one device of the exporting daemon. */
struct descriptor_device {
	char name[DESCRIPTOR_NAME_MAX + 1];
	uint8_t gid[16];
	uint64_t addr; /* what remote work requests name: the MR's iova */
	uint32_t rkey;
	uint8_t port;
};

struct descriptor {
	uint8_t access; /* DESCRIPTOR_ACCESS_* */
	uint64_t id;    /* the export's, daemon-wide on the exporting host */
	uint64_t length;
	uint8_t token[TOKEN_BYTES];
	uint8_t n_endpoints, n_devices;
	struct descriptor_endpoint endpoints[DESCRIPTOR_ENDPOINTS_MAX];
	struct descriptor_device devices[DESCRIPTOR_DEVICES_MAX];
};

/*
 * What a descriptor must be beyond its bytes: access read and/or write and
 * nothing else, 1 to 8 endpoints of family 4 or 6 with a port and a
 * specified address (IPv4's unused bytes zero), 1 to 16 devices with
 * distinct valid names and a port, a non-zero length whose range from
 * each device's addr does not wrap. 0, or -EINVAL with *ret_reason a
 * static English text.
 */
int descriptor_check(const struct descriptor *d, const char **ret_reason);

/* d's text, malloc()ed and NUL-terminated; -EINVAL (and *ret_reason)
 * when d breaks descriptor_check(), -ENOMEM. */
int descriptor_format(const struct descriptor *d, char **ret, const char **ret_reason);

/*
 * Parses text[0..len) (not NUL-terminated: a parameter's bytes) into *ret.
 * 0, or -EINVAL with *ret_reason a static English text saying what is
 * wrong (the prefix, the encoding, the version, a count, a field, the
 * length). Looks at no more than DESCRIPTOR_TEXT_MAX + 1 bytes of text.
 */
int descriptor_parse(const char *text, size_t len, struct descriptor *ret, const char **ret_reason);

/* e as a socket address for rdma_resolve_addr(); returns its length. */
socklen_t descriptor_endpoint_sockaddr(const struct descriptor_endpoint *e,
				       struct sockaddr_storage *ret);

/* "ADDR:PORT" ("[ADDR]:PORT" for IPv6) into buf; at least 64 bytes. */
void descriptor_endpoint_text(const struct descriptor_endpoint *e, char *buf, size_t size);

#endif
