/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef RDMAMEMD_NETADDR_H
#define RDMAMEMD_NETADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Parses "ADDR[:PORT]" (IPv4, or [IPv6]:PORT); the default port is 7471. */
int netaddr_parse_address(const char *s, struct sockaddr_storage *ret);
/* Parses "ADDR/PREFIX" (or one address: a full-length prefix). */
int netaddr_parse_network(const char *s, struct sockaddr_storage *ret_addr, unsigned *ret_prefix);
/* The same, for a configuration check: 0 or -EINVAL. */
int netaddr_check_address(const char *s);
int netaddr_check_network(const char *s);
/* "1.2.3.4:5" or "[::1]:5"; an IPv4-mapped IPv6 address (a dual-stack
 * listener's IPv4 peer) as the IPv4 address it is, "1.2.3.4:5", so that
 * one host reads the same whichever socket saw it. */
void netaddr_format(const struct sockaddr_storage *ss, char *buf, size_t size);

#endif
