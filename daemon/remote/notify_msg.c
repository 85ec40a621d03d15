/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "daemon/remote/notify_msg.h"
#include "util/le.h"

size_t notify_msg_encode(uint8_t *out, uint64_t export_id, uid_t sender_uid, const void *data,
			 size_t len)
{
	memcpy(out, NOTIFY_MAGIC, 4);
	out[4] = NOTIFY_VERSION;
	out[5] = out[6] = out[7] = 0;
	le_put(out + 8, len, 4);
	le_put(out + 12, (uint32_t)sender_uid, 4);
	le_put(out + 16, export_id, 8);
	if (len)
		memcpy(out + NOTIFY_HEADER_BYTES, data, len);
	return NOTIFY_HEADER_BYTES + len;
}

int notify_msg_decode(const uint8_t *msg, size_t len, struct notify_header *ret,
		      const char **ret_why)
{
	if (len < NOTIFY_HEADER_BYTES) {
		*ret_why = "shorter than a notification's header";
		return -EBADMSG;
	}
	if (memcmp(msg, NOTIFY_MAGIC, 4) != 0) {
		*ret_why = "not a notification (bad magic)";
		return -EBADMSG;
	}
	if (msg[4] != NOTIFY_VERSION) {
		*ret_why = "a notification of an unknown version";
		return -EBADMSG;
	}
	ret->length = (uint32_t)le_get(msg + 8, 4);
	ret->sender_uid = (uint32_t)le_get(msg + 12, 4);
	ret->export_id = le_get(msg + 16, 8);
	if (ret->length > NOTIFY_MAX) {
		*ret_why = "a notification longer than NOTIFY_MAX";
		return -EBADMSG;
	}
	if (ret->length != len - NOTIFY_HEADER_BYTES) {
		*ret_why = "a notification whose length is not what arrived";
		return -EBADMSG;
	}
	return 0;
}
