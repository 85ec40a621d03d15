/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for the Check suites: real daemons on temporary sockets, raw
 * Varlink connections, fd accounting. */
#ifndef RDMAMEM_TESTLIB_H
#define RDMAMEM_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <check.h>
#include <cjson/cJSON.h>

#include "util/macro.h"

#define DAEMON_BIN BUILD_DIR "/rdmamemd"
#define CTL_BIN BUILD_DIR "/rdmamemctl"

struct test_daemon {
	pid_t pid;
	char dir[64];
	char socket[128];
	char notify[128];
	int notify_fd;
};

/* Says on stderr that the warnings or errors that follow are the case's
 * own doing ("expected: ..."), so that a reader of the log does not take
 * them for a problem. */
void test_expect(const char *what);

/* This run's directory under /tmp, which holds each test daemon's; the
 * runner makes it first and removes it, whatever is left in it, last. */
const char *test_run_dir(void);
void test_run_dir_remove(void);

/*
 * Starts build/…/rdmamemd on a socket in a fresh temporary directory with
 * NOTIFY_SOCKET pointing at a listener, and waits for READY=1. extra_args is
 * NULL-terminated (or NULL).
 */
void test_daemon_start(struct test_daemon *td, const char *const *extra_args);

/*
 * Like test_daemon_start with the command line given in full (argv[0] is
 * the program); "@SOCKET@" and "@NOTIFY@" inside arguments are replaced by
 * the socket and notify paths. spawn does not wait for READY=1.
 */
void test_daemon_spawn(struct test_daemon *td, const char *const *argv);
void test_daemon_wait_ready(struct test_daemon *td);
void test_daemon_start_argv(struct test_daemon *td, const char *const *argv);

/* SIGTERM, wait, check a clean exit and that the socket is gone. */
void test_daemon_stop(struct test_daemon *td);
/* Waits for an exit already asked for; checks it was clean and, unless
 * keep_socket, that the socket is gone. */
void test_daemon_wait_exit(struct test_daemon *td, bool keep_socket);

/* Waits for a notify datagram containing needle; false on timeout. */
bool test_notify_wait(struct test_daemon *td, const char *needle, int timeout_ms);

/* Open fds of a process (from /proc/PID/fd). */
int test_count_fds(pid_t pid);
/* The same once it stopped changing: connections closed a moment ago are
 * closed by the daemon on its next loop iteration, not at once. */
int test_settled_fds(pid_t pid);

/* Lines of /proc/PID/maps that map a memfd: what regions keep alive. */
int test_memfd_maps(pid_t pid);

/*
 * What a daemon comes back to once the clients a case adds are gone: its
 * open fds (settled) and memfd mappings, and the case's own view of its
 * state (counters, tables) as settled(), which is polled because the
 * daemon lets go of a closed connection's work asynchronously (regions
 * once their pool work is done). Take it with the case's own long-lived
 * connections open, as they will be when it is checked.
 */
struct test_baseline {
	int fds;
	int memfd_maps;
	/* The daemon's state is back (NULL: nothing to wait for); waited for
	 * up to timeout_ms, what saying what for. */
	bool (*settled)(void);
	int timeout_ms;
	const char *what;
};
/* Fills in fds and memfd_maps; the caller sets the rest. */
void test_baseline_take(const struct test_daemon *td, struct test_baseline *base);
/* Waits for base->settled, then asserts the fds and memfd mappings are back. */
void test_baseline_assert(const struct test_daemon *td, const struct test_baseline *base);
/*
 * Kills a client in the middle of its calls, then checks the daemon came
 * back to base. client(socket, arg) runs in a child process: it starts its
 * calls without waiting for their answers and returns 0 (anything else
 * fails the case). The child then waits; after settle_us, so that the calls
 * are under way, this process kills it with SIGKILL and reaps it, waits for
 * base->settled, asserts that a fresh connection is served, and
 * test_baseline_assert()s.
 */
void test_kill_client_mid_call(const struct test_daemon *td, const struct test_baseline *base,
			       int (*client)(const char *socket, void *arg), void *arg,
			       unsigned settle_us);
/* The whole file, NUL-terminated; free() it. */
char *test_read_file(const char *path);
/* VmRSS of a process, in KiB. */
long test_rss_kib(pid_t pid);

/* A blocking raw connection to path. */
int test_connect(const char *path);
/* Connects to path and sends a Lock call without waiting for its answer;
 * returns the connection. */
int test_lock_raw(const char *path, uint64_t region, const char *mode, int timeout_ms);
/* A librdmamem client of the daemon at socket; the test fails if it cannot connect. */
struct rdmamem_client *test_client(const char *socket);
/* Polls cond every 10 ms until it holds; the test fails after timeout_ms. */
void test_wait_until(bool (*cond)(void), int timeout_ms, const char *what);
void test_send_raw(int fd, const void *buf, size_t len);
/* Sends text and its NUL in one sendmsg, with fds. */
void test_send_msg(int fd, const char *text, const int *fds, size_t n_fds);
/*
 * Reads one NUL-terminated message (malloc()ed, terminator stripped).
 * Returns its length, 0 at end of stream, -ETIMEDOUT.
 */
ssize_t test_recv_msg(int fd, char **ret, int timeout_ms);
/* Sends a call and parses the reply; fails the test on EOF or timeout. */
cJSON *test_call(int fd, const char *text);
/* o's string member name; fails the test when it is not one. */
const char *test_str(const cJSON *o, const char *name);
/* The reply's error name, or NULL. */
const char *test_reply_error(const cJSON *reply);
/* The tree of the text o holds, parsed as a client would, and o freed;
 * fails the test when o failed or its text is not one whole JSON value. */
struct json_out;
cJSON *test_out_tree(struct json_out *o);

/* Asserts that a fresh connection to path still answers Ping. */
void test_assert_serving(const char *path);
/* Asserts that an open connection answers Ping. */
void test_assert_serving_fd(int fd);

/* Runs argv, captures stdout and stderr (malloc()ed), returns exit status. */
int test_run(const char *const *argv, char **ret_out, char **ret_err);
/* Starts argv with its stdout on a pipe; returns the pid. */
pid_t test_spawn(const char *const *argv, int *ret_stdout);
/* Waits for a child; its exit status, or -1 on a signal or timeout. */
int test_wait(pid_t pid, int timeout_ms);
/* Reads one line from fd within timeout_ms (malloc()ed, no newline); NULL on EOF/timeout. */
char *test_read_line(int fd, int timeout_ms);

/*
 * A bystander's view of the daemon's loop: runs attacker(socket, arg) in a
 * child process while this process pings the daemon at socket on a
 * connection of its own, one Ping every TEST_BYSTANDER_INTERVAL_US. The
 * schedule is open-loop: each round trip counts from the moment its Ping was
 * due, so a loop stalled for 100 ms shows in the 50 Pings it held up, not in
 * one. Pings go on until the attacker returns, and at least
 * TEST_BYSTANDER_MIN_PINGS of them. Prints the count, p50, p99 and maximum,
 * and returns the p99 in microseconds. The test fails if
 * a Ping is not answered or the attacker does not return 0. The attacker
 * runs niced: its own work is not what is measured. A busy machine delays
 * Pings too: a bound on the p99 is best checked over a few attempts.
 */
#define TEST_BYSTANDER_INTERVAL_US 2000
#define TEST_BYSTANDER_MIN_PINGS 300
long test_bystander_p99_us(const char *socket, int (*attacker)(const char *socket, void *arg),
			   void *arg);

/* CPU time a thread of a process has run, in nanoseconds (schedstat): the
 * daemon's loop is its main thread, tid == pid. */
long long test_thread_cpu_ns(pid_t pid, pid_t tid);

/*
 * Whether latency bounds mean anything in this run: not when the daemon runs
 * under a wrapper (valgrind) or this build has sanitizers; *ret_why then
 * says which.
 */
bool test_timing_is_real(const char **ret_why);

/*
 * Asserts that a bystander's Ping p99 stays under 10 ms while attacker runs
 * (test_bystander_p99_us), what naming the attack. A machine busy with other
 * work may spoil one attempt, so there are up to three. Where timing means
 * nothing (test_timing_is_real), one attempt runs, for everything but the
 * bound, and the p99 is printed with the reason it is not held to it.
 */
void test_assert_bystander_p99(const char *what, const char *socket,
			       int (*attacker)(const char *socket, void *arg), void *arg);

/*
 * Whether this run is root, as a case that acts as another uid (fork and
 * setuid(TEST_OTHER_UID)) or installs for real needs; when it is not, prints
 * "SKIP test: needs root to why" and returns false, so that `make check`
 * passes for a normal user and says what it left out.
 */
#define TEST_OTHER_UID 65534
bool test_root_or_skip(const char *test, const char *why);
/* Counts one root-only skip that a case printed itself. */
void test_count_root_skip(void);

/* A seeded generator for randomised suites (xorshift64*): the same seed
 * gives the same cases, so a failing seed reproduces. Returns 0 .. n-1
 * (0 when n is 0) and advances *state, which must not be 0. */
uint64_t test_rng_below(uint64_t *state, uint64_t n);
/* In a child of a root test: becomes TEST_OTHER_UID (gid TEST_OTHER_UID, no
 * supplementary groups). Returns 0 or a negative errno. */
int test_become_other_uid(void);

/*
 * The two-VM bed (make vmtest2, tests/vm/README.md): cases tagged "hosts" run
 * on host A, and these act on host B through its agent (tests/peer/vm-agent.c)
 * at $RDMAMEM_PEER_AGENT. Not reaching the agent fails the case; timeout_s is
 * at most TEST_REMOTE_TIMEOUT_MAX (test_run waits 60 s for the client).
 *
 * test_remote_sh runs `sh -c cmd` on B and returns its exit status (128+N for
 * a signal N, 124 when it ran past timeout_s and was killed) and, when
 * ret_out is not NULL, its stdout and stderr (malloc()ed).
 * test_remote_spawn starts cmd on B in the background and returns its pid
 * there once it printed its first line (malloc()ed into *ret_line, without
 * the newline, when not NULL); the case fails if it exits or stays silent for
 * timeout_s first. test_remote_wait waits for such a pid to exit: its status
 * and all it printed.
 */
#define AGENT_BIN BUILD_DIR "/vm-agent"
#define TEST_REMOTE_TIMEOUT_MAX 40
int test_remote_sh(const char *cmd, int timeout_s, char **ret_out);
pid_t test_remote_spawn(const char *cmd, int timeout_s, char **ret_line);
int test_remote_wait(pid_t pid, int timeout_s, char **ret_out);

/* Run in the daemon's child between fork and exec, when set. */
extern void (*test_daemon_child_setup)(void);
/* When set, the daemons started send their stderr (the log) to this file. */
extern const char *test_daemon_log_path;

#define PEER_BIN BUILD_DIR "/rdma-peer"

Suite *frame_suite(void);
Suite *json_suite(void);
Suite *json_arena_suite(void);
Suite *params_text_suite(void);
Suite *varlink_suite(void);
Suite *outq_suite(void);
Suite *conn_suite(void);
Suite *sockpath_suite(void);
Suite *loop_poll_suite(void);
Suite *wr_plan_suite(void);
Suite *window_suite(void);
Suite *metrics_text_suite(void);
Suite *daemon_suite(void);
Suite *client_suite(void);
Suite *async_suite(void);
Suite *cli_suite(void);
Suite *metrics_suite(void);
Suite *lifecycle_suite(void);
Suite *lock_suite(void);
Suite *session_suite(void);
Suite *rpc_deferred_suite(void);
Suite *xfer_suite(void);
Suite *lease_suite(void);
Suite *mreg_suite(void);
Suite *endpoint_suite(void);
Suite *link_suite(void);
Suite *notify_suite(void);
Suite *notify_conn_suite(void);
Suite *transfer_suite(void);
Suite *paths_suite(void);
Suite *idl_suite(void);
Suite *codec_suite(void);
Suite *descriptor_suite(void);
Suite *regions_suite(void);
Suite *region_unit_suite(void);
Suite *keep_suite(void);
Suite *fdstore_suite(void);
Suite *tables_suite(void);
Suite *rdma_suite(void);
Suite *remote_suite(void);
Suite *transfer_vm_suite(void);
Suite *numa_vm_suite(void);
Suite *cuda_suite(void);
Suite *gpu_unit_suite(void);
Suite *gpu_suite(void);
Suite *ops_suite(void);
Suite *hostile_suite(void);
Suite *faults_suite(void);
Suite *hosts_suite(void);

/*
 * Adds a case that needs hardware (tag "rdma": the Soft-RoCE VM; "cuda": a
 * GPU; "hosts": the two-VM bed; "numa": the NUMA VM), counted so that a run that leaves the tag
 * out can say how many cases it skipped and where they run instead.
 */
#define test_add_tagged(tc, tag, test)    \
	do {                              \
		tcase_add_test(tc, test); \
		test_count_tagged(tag);   \
	} while (0)
void test_count_tagged(const char *tag);
/* A suite's cases this build could not compile (what is missing: "cuda.h"
 * today), remembered for test_report_skipped(). */
void test_note_not_built(const char *what, const char *missing);
/* Prints what the tags left out (CK_EXCLUDE_TAGS, or CK_INCLUDE_TAGS without
 * "hosts" or "numa") skipped, and what the build left out, and why. */
void test_report_skipped(void);

#endif
