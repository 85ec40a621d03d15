/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics: GetMetrics over Varlink, rdmamemctl metrics, and the HTTP
 * endpoint on metrics-listen (loopback), against a live daemon with
 * regions; the text checked by promtool (Prometheus format) and its
 * values against what the test registered.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdmamem.h"
#include "tests/testlib.h"

static struct test_daemon td;
static char listen_addr[32];
static int http_port;

/* A loopback port nobody listens on now (the daemon takes it next). */
static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void setup(void)
{
	const char *args[] = { "--socket-mode", "0666", "--metrics-listen", listen_addr, NULL };

	http_port = free_port();
	snprintf(listen_addr, sizeof(listen_addr), "127.0.0.1:%d", http_port);
	test_daemon_start(&td, args);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

static int http_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)http_port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %m");
	return fd;
}

/* One HTTP/1.0 request; the whole answer (headers and body), NUL-terminated. */
static char *http_get(const char *method, const char *path, const char *accept)
{
	char req[256], *buf = NULL;
	size_t len = 0, cap = 0;
	int fd = http_connect(), n;

	n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: localhost\r\n%s%s%s\r\n", method,
		     path, accept ? "Accept: " : "", accept ?: "", accept ? "\r\n" : "");
	test_send_raw(fd, req, (size_t)n);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 16384;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ck_assert_msg(poll(&p, 1, 5000) == 1, "no HTTP answer within 5 s");
		r = read(fd, buf + len, cap - len - 1);
		ck_assert_int_ge(r, 0);
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	close(fd);
	return buf;
}

static const char *http_body(const char *answer)
{
	const char *b = strstr(answer, "\r\n\r\n");

	ck_assert_ptr_nonnull(b);
	return b + 4;
}

/* GetMetrics' text in format (NULL: the default) through fd. */
static char *varlink_metrics(int fd, const char *format)
{
	char call[128];
	cJSON *reply;
	char *text;

	if (format)
		snprintf(
			call, sizeof(call),
			"{\"method\":\"io.rdmamemd.GetMetrics\",\"parameters\":{\"format\":\"%s\"}}",
			format);
	else
		snprintf(call, sizeof(call), "{\"method\":\"io.rdmamemd.GetMetrics\"}");
	reply = test_call(fd, call);
	ck_assert_msg(!test_reply_error(reply), "GetMetrics: %s", test_reply_error(reply));
	text = strdup(test_str(cJSON_GetObjectItem(reply, "parameters"), "text"));
	cJSON_Delete(reply);
	return text;
}

/* The value of the sample written exactly so ("name" or "name{labels}"). */
static bool sample(const char *text, const char *series, double *ret)
{
	size_t n = strlen(series);

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
		if (strncmp(line, series, n) == 0 && line[n] == ' ') {
			*ret = strtod(line + n + 1, NULL);
			return true;
		}
	}
	return false;
}

static double value(const char *text, const char *series)
{
	double v = 0;

	ck_assert_msg(sample(text, series, &v), "no sample %s in:\n%.2000s", series, text);
	return v;
}

static uint64_t register_bytes(struct rdmamem_client *c, size_t size)
{
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("metrics", size, &fd, NULL), 0);
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	close(fd);
	return id;
}

/* Three regions: pinned bytes, regions and calls move in both texts, the
 * HTTP one and the Varlink one, and back when one goes. */
START_TEST(test_values)
{
	struct rdmamem_client *c = test_client(td.socket);
	int fd = test_connect(td.socket);
	char series[96], *om, *answer, *prom;
	const char *body;
	uint64_t id;
	double before;

	om = varlink_metrics(fd, NULL);
	ck_assert_double_eq(value(om, "rdmamemd_pinned_bytes"), 0);
	before = value(om, "rdmamemd_import_latency_seconds_count");
	free(om);

	register_bytes(c, 4096);
	register_bytes(c, 1U << 20);
	id = register_bytes(c, 3U << 20);

	om = varlink_metrics(fd, NULL);
	ck_assert_double_eq(value(om, "rdmamemd_pinned_bytes"), 4096 + (4U << 20));
	ck_assert_double_eq(value(om, "rdmamemd_regions"), 3);
	snprintf(series, sizeof(series), "rdmamemd_uid_pinned_bytes{uid=\"%u\"}", getuid());
	ck_assert_double_eq(value(om, series), 4096 + (4U << 20));
	ck_assert_double_eq(value(om, "rdmamemd_regions_registered_total"), 3);
	/* Host regions: no GPU import, on the loop or the pool. */
	ck_assert_double_eq(value(om, "rdmamemd_gpu_imports_total{on=\"loop\"}"), 0);
	ck_assert_double_eq(value(om, "rdmamemd_gpu_imports_total{on=\"pool\"}"), 0);
	ck_assert_double_eq(value(om, "rdmamemd_import_latency_seconds_count"), before + 3);
	ck_assert_double_eq(value(om, "rdmamemd_import_latency_seconds_bucket{le=\"+Inf\"}"),
			    before + 3);
	ck_assert_double_ge(value(om, "rdmamemd_calls_total{method=\"io.rdmamemd.Register\"}"), 3);
	ck_assert_double_eq(value(om, "rdmamemd_clients"), 2);
	/* OpenMetrics: a counter's family without _total, # EOF last. */
	ck_assert_ptr_nonnull(strstr(om, "# TYPE rdmamemd_calls counter\n"));
	ck_assert_msg(strlen(om) > 6 && strcmp(om + strlen(om) - 6, "# EOF\n") == 0, "%s", om);
	free(om);

	/* HTTP, Prometheus' text by default. */
	answer = http_get("GET", "/metrics", NULL);
	ck_assert_msg(strncmp(answer, "HTTP/1.", 7) == 0 && strstr(answer, " 200 "), "%.300s",
		      answer);
	ck_assert_ptr_nonnull(strstr(answer, "Content-Type: text/plain; version=0.0.4"));
	body = http_body(answer);
	ck_assert_double_eq(value(body, "rdmamemd_pinned_bytes"), 4096 + (4U << 20));
	ck_assert_ptr_nonnull(strstr(body, "# TYPE rdmamemd_calls_total counter\n"));
	ck_assert_ptr_null(strstr(body, "# EOF"));
	free(answer);

	/* OpenMetrics when asked, as Prometheus asks. */
	answer = http_get(
		"GET", "/metrics",
		"application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5");
	ck_assert_ptr_nonnull(strstr(answer, "Content-Type: application/openmetrics-text"));
	ck_assert_ptr_nonnull(strstr(http_body(answer), "# EOF\n"));
	free(answer);

	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	prom = varlink_metrics(fd, "prometheus");
	ck_assert_double_eq(value(prom, "rdmamemd_pinned_bytes"), 4096 + (1U << 20));
	ck_assert_double_eq(value(prom, "rdmamemd_regions"), 2);
	ck_assert_double_eq(value(prom, "rdmamemd_pinned_peak_bytes"), 4096 + (4U << 20));
	free(prom);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

/* Runs promtool check metrics on text; its exit status, its output in *out. */
static int promtool(const char *text, char **out)
{
	char path[] = "/tmp/rdmamem-metrics.XXXXXX", cmd[128], *err;
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int fd = mkstemp(path), rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	rc = test_run(argv, out, &err);
	free(err);
	unlink(path);
	return rc;
}

/* promtool (Debian's prometheus) lints the Prometheus text with no
 * complaint: names, HELP, TYPE, counters' _total, histograms' buckets. */
START_TEST(test_promtool)
{
	struct rdmamem_client *c = test_client(td.socket);
	int fd = test_connect(td.socket);
	char *text, *answer, *out;

	register_bytes(c, 65536);
	/* An error counted, so that errors by name has a sample. */
	ck_assert_int_lt(rdmamem_unregister(c, 987654), 0);
	text = varlink_metrics(fd, "prometheus");
	ck_assert_msg(promtool(text, &out) == 0, "promtool check metrics:\n%s\non:\n%s", out, text);
	ck_assert_msg(strstr(text, "rdmamemd_errors_total{error=\"io.rdmamemd.NoSuchRegion\"} 1"),
		      "%s", text);
	free(out);
	free(text);
	answer = http_get("GET", "/metrics", NULL);
	ck_assert_msg(promtool(http_body(answer), &out) == 0, "promtool on HTTP:\n%s", out);
	free(out);
	free(answer);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

/* rdmamemctl metrics prints the OpenMetrics text as it is. */
START_TEST(test_rdmamemctl)
{
	const char *argv[] = { CTL_BIN, "-s", td.socket, "metrics", NULL };
	char *out, *err;

	ck_assert_int_eq(test_run(argv, &out, &err), 0);
	ck_assert_msg(strncmp(out, "# HELP rdmamemd_", 16) == 0, "%s", out);
	ck_assert_msg(strcmp(out + strlen(out) - 6, "# EOF\n") == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "rdmamemd_registration_latency_seconds_bucket{le="));
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
}
END_TEST

/* Other paths and methods are refused; a bad format too. */
START_TEST(test_refusals)
{
	int fd = test_connect(td.socket);
	char *answer;
	cJSON *reply;

	answer = http_get("GET", "/", NULL);
	ck_assert_msg(strstr(answer, " 404 "), "%.200s", answer);
	free(answer);
	answer = http_get("POST", "/metrics", NULL);
	ck_assert_msg(strstr(answer, " 405 "), "%.200s", answer);
	free(answer);
	reply = test_call(fd, "{\"method\":\"io.rdmamemd.GetMetrics\",\"parameters\":"
			      "{\"format\":\"xml\"}}");
	ck_assert_str_eq(test_reply_error(reply), "org.varlink.service.InvalidParameter");
	cJSON_Delete(reply);
	close(fd);
}
END_TEST

/* A scraper that sends half a request and waits holds no one up. */
START_TEST(test_stuck_scraper)
{
	static const char half[] = "GET /metr";
	int stuck = http_connect(), fd = test_connect(td.socket);
	uint64_t t0;
	cJSON *reply;
	char *answer;

	test_send_raw(stuck, half, sizeof(half) - 1);
	t0 = (uint64_t)time(NULL);
	reply = test_call(fd, "{\"method\":\"io.rdmamemd.Ping\"}");
	ck_assert_ptr_null(test_reply_error(reply));
	cJSON_Delete(reply);
	answer = http_get("GET", "/metrics", NULL);
	ck_assert_ptr_nonnull(strstr(answer, " 200 "));
	free(answer);
	ck_assert_uint_le((uint64_t)time(NULL) - t0, 2);
	close(stuck);
	close(fd);
}
END_TEST

static int other_user_metrics(void *arg)
{
	const char *socket = arg;
	char series[64], *text;
	double v;
	int fd = test_connect(socket);

	text = varlink_metrics(fd, NULL);
	snprintf(series, sizeof(series), "rdmamemd_uid_clients{uid=\"%u\"}", TEST_OTHER_UID);
	/* Its own series, and root's not. */
	if (!sample(text, series, &v) || v != 1)
		return 1;
	if (sample(text, "rdmamemd_uid_clients{uid=\"0\"}", &v))
		return 2;
	free(text);
	close(fd);
	return 0;
}

/* A user sees its own uid's series, not other users'. */
START_TEST(test_other_user)
{
	struct rdmamem_client *c;
	pid_t pid;
	int status;

	if (!test_root_or_skip(__func__, "call as another uid"))
		return;
	c = test_client(td.socket);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (test_become_other_uid() < 0)
			_exit(99);
		_exit(other_user_metrics(td.socket));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
	rdmamem_client_close(c);
}
END_TEST

/* metrics-listen wants a port; without the key nothing listens. */
START_TEST(test_config)
{
	const char *bad[] = { DAEMON_BIN, "--metrics-listen", "127.0.0.1", "--check-config", NULL };
	const char *good[] = { DAEMON_BIN, "--metrics-listen", "[::1]:9464", "--check-config",
			       NULL };
	char *out, *err;

	ck_assert_int_ne(test_run(bad, &out, &err), 0);
	ck_assert_msg(strstr(err, "metrics-listen"), "%s", err);
	free(out);
	free(err);
	ck_assert_int_eq(test_run(good, &out, &err), 0);
	free(out);
	free(err);
}
END_TEST

Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_promtool);
	tcase_add_test(tc, test_rdmamemctl);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_stuck_scraper);
	tcase_add_test(tc, test_other_user);
	tcase_add_test(tc, test_config);
	suite_add_tcase(s, tc);
	return s;
}
