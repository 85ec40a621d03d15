/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Daemon logging, systemd-shaped: log_<level>() and log_<level>_errno(r, …),
 * where the _errno forms make %m print strerror(-r) and return r, so that
 * "return log_error_errno(r, "Failed to …: %m");" reads as one step.
 *
 * Safe from any thread, the pool's included (log.c says how); a message from
 * the pool carries its fields like any other.
 */
#ifndef RDMAMEM_LOG_H
#define RDMAMEM_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <syslog.h>

#include "util/macro.h"

void log_setup(void);
void log_set_max_level(int level);
int log_get_max_level(void);
int log_level_from_string(const char *s);
const char *log_level_to_string(int level);

/*
 * What a message is about, sent as journal fields (REGION=, CLIENT_PID=,
 * CLIENT_UID=, DEVICE=) so that `journalctl REGION=17` finds a region's
 * story. Zero or NULL members are left out.
 */
struct log_fields {
	uint64_t region;
	pid_t client_pid;
	uid_t client_uid;
	bool has_client;
	const char *device;
};

#define LOG_REGION(r)                                              \
	(&(const struct log_fields){ .region = (r)->id,            \
				     .client_pid = (r)->owner_pid, \
				     .client_uid = (r)->owner_uid, \
				     .has_client = true })
#define LOG_CLIENT(cred)                                        \
	(&(const struct log_fields){ .client_pid = (cred)->pid, \
				     .client_uid = (cred)->uid, \
				     .has_client = true })
#define LOG_DEVICE(name) (&(const struct log_fields){ .device = (name) })

int log_internal(int level, int error, const char *file, int line, const char *func,
		 const struct log_fields *fields, const char *fmt, ...) _printf_(7, 8);

#define log_full_fields(level, error, fields, ...)                                              \
	({                                                                                      \
		int _level = (level), _e = (error);                                             \
		_e = _e < 0 ? _e : -_e;                                                         \
		log_get_max_level() >= _level ? log_internal(_level, _e, __FILE__, __LINE__,    \
							     __func__, (fields), __VA_ARGS__) : \
						_e;                                             \
	})
#define log_full_errno(level, error, ...) log_full_fields(level, error, NULL, __VA_ARGS__)

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

/*
 * At most one message per interval, so that a client who can cause a message
 * at will (a connection flood) cannot make the daemon write the journal full.
 */
struct ratelimit {
	uint64_t interval_msec;
	uint64_t begin_msec;   /* start of the current interval */
	unsigned n_suppressed; /* held back since the last one let through */
};

/* Whether a message may go out now; when it may, *ret_suppressed says how
 * many were held back before it. */
bool ratelimit_pass(struct ratelimit *rl, uint64_t now_msec, unsigned *ret_suppressed);

#endif
