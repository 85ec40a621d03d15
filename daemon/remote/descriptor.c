/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rdma/device.h"
#include "daemon/remote/descriptor.h"
#include "proto/base64.h"
#include "util/le.h"
#include "util/macro.h"

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static const char *check_endpoint(const struct descriptor_endpoint *e)
{
	if (e->family != 4 && e->family != 6)
		return "has an endpoint whose family is neither 4 nor 6";
	if (e->port == 0)
		return "has an endpoint without a port";
	if (e->family == 4 && !all_zero(e->addr + 4, 12))
		return "has an IPv4 endpoint whose unused address bytes are not zero";
	/* 0.0.0.0 or :: is where a daemon listens, never where a peer connects. */
	if (all_zero(e->addr, e->family == 4 ? 4 : 16))
		return "has an endpoint with an unspecified address";
	return NULL;
}

static const char *check_device(const struct descriptor *d, size_t i)
{
	const struct descriptor_device *dev = &d->devices[i];

	if (!device_name_is_valid(dev->name))
		return "has a device whose name is not 1 to 63 of [A-Za-z0-9_.-]";
	if (dev->port == 0)
		return "has a device without a port";
	if (dev->addr + d->length < dev->addr)
		return "has a device whose address range wraps around";
	for (size_t k = 0; k < i; k++)
		if (strcmp(d->devices[k].name, dev->name) == 0)
			return "names a device twice";
	return NULL;
}

int descriptor_check(const struct descriptor *d, const char **ret_reason)
{
	const char *why = NULL;

	if (d->access == 0 || (d->access & ~(DESCRIPTOR_ACCESS_READ | DESCRIPTOR_ACCESS_WRITE)))
		why = "grants no access, or access other than read (1) and write (2)";
	else if (d->n_endpoints == 0 || d->n_endpoints > DESCRIPTOR_ENDPOINTS_MAX)
		why = "must have 1 to 8 endpoints";
	else if (d->n_devices == 0 || d->n_devices > DESCRIPTOR_DEVICES_MAX)
		why = "must have 1 to 16 devices";
	else if (d->length == 0)
		why = "describes a region of length 0";
	for (size_t i = 0; !why && i < d->n_endpoints; i++)
		why = check_endpoint(&d->endpoints[i]);
	for (size_t i = 0; !why && i < d->n_devices; i++)
		why = check_device(d, i);
	if (why) {
		*ret_reason = why;
		return -EINVAL;
	}
	return 0;
}

/* The record's bytes, written or read in order. */
struct cursor {
	uint8_t *p;
	size_t len, at;
};

static void put(struct cursor *c, const void *v, size_t n)
{
	memcpy(c->p + c->at, v, n);
	c->at += n;
}

static void put_le(struct cursor *c, uint64_t v, size_t n)
{
	le_put(c->p + c->at, v, n);
	c->at += n;
}

/* false when fewer than n bytes are left. */
static bool get(struct cursor *c, void *v, size_t n)
{
	if (c->len - c->at < n)
		return false;
	memcpy(v, c->p + c->at, n);
	c->at += n;
	return true;
}

static uint64_t get_le(struct cursor *c, size_t n)
{
	uint64_t v = le_get(c->p + c->at, n);

	c->at += n;
	return v;
}

int descriptor_format(const struct descriptor *d, char **ret, const char **ret_reason)
{
	uint8_t record[DESCRIPTOR_RECORD_MAX];
	struct cursor c = { .p = record, .len = sizeof(record) };
	size_t prefix = strlen(DESCRIPTOR_PREFIX);
	char *text;
	int r;

	r = descriptor_check(d, ret_reason);
	if (r < 0)
		return r;
	put_le(&c, DESCRIPTOR_VERSION, 1);
	put_le(&c, d->access, 1);
	put_le(&c, d->n_endpoints, 1);
	put_le(&c, d->n_devices, 1);
	put_le(&c, d->id, 8);
	put_le(&c, d->length, 8);
	put(&c, d->token, TOKEN_BYTES);
	for (size_t i = 0; i < d->n_endpoints; i++) {
		const struct descriptor_endpoint *e = &d->endpoints[i];

		put_le(&c, e->family, 1);
		put_le(&c, 0, 1);
		put_le(&c, e->port, 2);
		put(&c, e->addr, sizeof(e->addr));
	}
	for (size_t i = 0; i < d->n_devices; i++) {
		const struct descriptor_device *dev = &d->devices[i];
		size_t n = strlen(dev->name);

		put(&c, dev->gid, sizeof(dev->gid));
		put_le(&c, dev->addr, 8);
		put_le(&c, dev->rkey, 4);
		put_le(&c, dev->port, 1);
		put_le(&c, n, 1);
		put(&c, dev->name, n);
	}
	text = malloc(prefix + base64url_encoded_len(c.at) + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, DESCRIPTOR_PREFIX, prefix);
	base64url_encode(record, c.at, text + prefix);
	*ret = text;
	return 0;
}

/* The record's structure: counts as the header says, each part whole, nothing after. */
static const char *parse_record(struct cursor *c, struct descriptor *d)
{
	uint8_t version;

	if (c->len < DESCRIPTOR_HEADER_BYTES)
		return "is shorter than its header";
	version = (uint8_t)get_le(c, 1);
	if (version != DESCRIPTOR_VERSION)
		return "has a record version other than 1";
	d->access = (uint8_t)get_le(c, 1);
	d->n_endpoints = (uint8_t)get_le(c, 1);
	d->n_devices = (uint8_t)get_le(c, 1);
	/* Bounded before the lists are read into their arrays. */
	if (d->n_endpoints == 0 || d->n_endpoints > DESCRIPTOR_ENDPOINTS_MAX)
		return "must have 1 to 8 endpoints";
	if (d->n_devices == 0 || d->n_devices > DESCRIPTOR_DEVICES_MAX)
		return "must have 1 to 16 devices";
	d->id = get_le(c, 8);
	d->length = get_le(c, 8);
	get(c, d->token, TOKEN_BYTES);
	for (size_t i = 0; i < d->n_endpoints; i++) {
		struct descriptor_endpoint *e = &d->endpoints[i];

		if (c->len - c->at < DESCRIPTOR_ENDPOINT_BYTES)
			return "ends inside an endpoint";
		e->family = (uint8_t)get_le(c, 1);
		if (get_le(c, 1) != 0)
			return "has an endpoint whose pad byte is not zero";
		e->port = (uint16_t)get_le(c, 2);
		get(c, e->addr, sizeof(e->addr));
	}
	for (size_t i = 0; i < d->n_devices; i++) {
		struct descriptor_device *dev = &d->devices[i];
		size_t n;

		if (c->len - c->at < DESCRIPTOR_DEVICE_BYTES)
			return "ends inside a device";
		get(c, dev->gid, sizeof(dev->gid));
		dev->addr = get_le(c, 8);
		dev->rkey = (uint32_t)get_le(c, 4);
		dev->port = (uint8_t)get_le(c, 1);
		n = (size_t)get_le(c, 1);
		if (n == 0 || n > DESCRIPTOR_NAME_MAX)
			return "has a device whose name is not 1 to 63 of [A-Za-z0-9_.-]";
		if (!get(c, dev->name, n))
			return "ends inside a device's name";
		/* A NUL inside the name would hide its tail: refused by the
		 * name check, which stops at the first NUL and sees the rest
		 * only through the length. */
		if (memchr(dev->name, '\0', n))
			return "has a device whose name is not 1 to 63 of [A-Za-z0-9_.-]";
		dev->name[n] = '\0';
	}
	if (c->at != c->len)
		return "has bytes after its last device";
	return NULL;
}

int descriptor_parse(const char *text, size_t len, struct descriptor *ret, const char **ret_reason)
{
	size_t prefix = strlen(DESCRIPTOR_PREFIX);
	uint8_t record[DESCRIPTOR_RECORD_MAX];
	struct cursor c = { .p = record };
	struct descriptor d = {};
	const char *why;
	ssize_t n;

	*ret_reason = NULL;
	if (len < prefix || memcmp(text, DESCRIPTOR_PREFIX, prefix) != 0)
		why = strncmp(text, "rdmamem", MIN(len, strlen("rdmamem"))) == 0 && len > 8 ?
			      "is not of a format this daemon knows (\"rdmamem1.\")" :
			      "does not start with \"rdmamem1.\"";
	else if (len > DESCRIPTOR_TEXT_MAX)
		why = "is longer than any descriptor (2255 characters)";
	else if ((n = base64url_decoded_len(text + prefix, len - prefix)) < 0)
		why = "is not base64url without padding after \"rdmamem1.\"";
	else {
		/* The text's bound bounds n: the record fits. */
		base64url_decode(text + prefix, len - prefix, record);
		c.len = (size_t)n;
		why = parse_record(&c, &d);
	}
	if (why || descriptor_check(&d, &why) < 0) {
		*ret_reason = why;
		return -EINVAL;
	}
	*ret = d;
	return 0;
}

socklen_t descriptor_endpoint_sockaddr(const struct descriptor_endpoint *e,
				       struct sockaddr_storage *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (e->family == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ret;

		in->sin_family = AF_INET;
		in->sin_port = htons(e->port);
		memcpy(&in->sin_addr, e->addr, 4);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(e->port);
		memcpy(&in6->sin6_addr, e->addr, 16);
		return sizeof(*in6);
	}
}

void descriptor_endpoint_text(const struct descriptor_endpoint *e, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN];

	inet_ntop(e->family == 4 ? AF_INET : AF_INET6, e->addr, addr, sizeof(addr));
	snprintf(buf, size, e->family == 4 ? "%s:%u" : "[%s]:%u", addr, (unsigned)e->port);
}
