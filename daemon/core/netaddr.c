/* SPDX-License-Identifier: BSD-3-Clause */
/* IP addresses and networks as the configuration writes them. No I/O, so
 * the configuration can check them before anything listens. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/netaddr.h"

#define NETADDR_DEFAULT_PORT 7471

void netaddr_format(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(buf, size, "%s:%u", host, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof(host));
			snprintf(buf, size, "%s:%u", host, port);
			return;
		}
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, port);
	} else {
		snprintf(buf, size, "(unknown)");
	}
}

int netaddr_parse_address(const char *s, struct sockaddr_storage *ret)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon;
	unsigned long port = NETADDR_DEFAULT_PORT;
	size_t hlen;

	memset(ret, 0, sizeof(*ret));
	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || (size_t)(end - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, end - s - 1);
		host[end - s - 1] = '\0';
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -EINVAL;
	} else {
		colon = strrchr(s, ':');
		hlen = colon ? (size_t)(colon - s) : strlen(s);
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hlen);
		host[hlen] = '\0';
	}
	if (colon) {
		char *end;

		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || port == 0 || port > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ret)->sin_addr) == 1) {
		ret->ss_family = AF_INET;
		((struct sockaddr_in *)ret)->sin_port = htons((uint16_t)port);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ret)->sin6_addr) == 1) {
		ret->ss_family = AF_INET6;
		((struct sockaddr_in6 *)ret)->sin6_port = htons((uint16_t)port);
		return 0;
	}
	return -EINVAL;
}

int netaddr_parse_network(const char *s, struct sockaddr_storage *ret_addr, unsigned *ret_prefix)
{
	char host[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t hlen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long prefix;
	char *end;

	if (hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	memset(ret_addr, 0, sizeof(*ret_addr));
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ret_addr)->sin_addr) == 1)
		ret_addr->ss_family = AF_INET;
	else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ret_addr)->sin6_addr) == 1)
		ret_addr->ss_family = AF_INET6;
	else
		return -EINVAL;
	prefix = ret_addr->ss_family == AF_INET ? 32 : 128;
	if (slash) {
		errno = 0;
		prefix = strtoul(slash + 1, &end, 10);
		if (errno || *end || end == slash + 1 ||
		    prefix > (ret_addr->ss_family == AF_INET ? 32UL : 128UL))
			return -EINVAL;
	}
	*ret_prefix = (unsigned)prefix;
	return 0;
}

int netaddr_check_address(const char *s)
{
	struct sockaddr_storage ss;

	return netaddr_parse_address(s, &ss);
}

int netaddr_check_network(const char *s)
{
	struct sockaddr_storage ss;
	unsigned prefix;

	return netaddr_parse_network(s, &ss, &prefix);
}
