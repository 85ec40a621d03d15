/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interface, defined once in C tables: the IDL printer on a small table
 * (exact text), the IDL the daemon serves against the .varlink files
 * checked in under proto/ (`make idl` writes them), and PROTOCOL.md's
 * tables of methods and errors against the method and error tables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rpc/rpc.h"
#include "proto/errors.h"
#include "proto/idl.h"
#include "tests/testlib.h"

struct sample_params {
	uint64_t id;
	const char *name;
};

/* clang-format off */
static const struct varlink_symbol sample_Pair = VARLINK_DEFINE_TYPE(
	Pair, "Two of a kind.",
	VARLINK_FIELD(left, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("the other one"),
	VARLINK_FIELD(right, VARLINK_U32, VARLINK_NULLABLE));

static const struct varlink_symbol sample_Holder = VARLINK_DEFINE_TYPE(
	Holder, NULL,
	VARLINK_FIELD_BY_TYPE(pairs, sample_Pair, VARLINK_ARRAY),
	VARLINK_FIELD(tags, VARLINK_STRING, VARLINK_MAP));

static const struct varlink_symbol sample_Get = VARLINK_DEFINE_METHOD(
	Get, "Looks one up.\n\nTwo paragraphs.",
	VARLINK_INPUT(struct sample_params, id, VARLINK_U64, 0),
	VARLINK_INPUT(struct sample_params, name, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_OUTPUT_BY_TYPE(holder, sample_Holder, 0),
	VARLINK_OUTPUT_BY_TYPE(first, sample_Pair, VARLINK_NULLABLE),
	VARLINK_OUTPUT_INLINE(meta, 0, VARLINK_FIELD(ok, VARLINK_BOOL, 0),
			      VARLINK_FIELD(any, VARLINK_OBJECT, VARLINK_NULLABLE)));

static const struct varlink_symbol sample_Ping = VARLINK_DEFINE_METHOD(Ping, NULL);

static const struct varlink_symbol sample_Long = VARLINK_DEFINE_METHOD(
	Long, NULL,
	VARLINK_INPUT(struct sample_params, id, VARLINK_U64, 0),
	VARLINK_OUTPUT(a_rather_long_field_name_number_one, VARLINK_STRING, 0),
	VARLINK_OUTPUT(a_rather_long_field_name_number_two, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("commented"),
	VARLINK_OUTPUT(three, VARLINK_BOOL, 0));

static const struct varlink_error sample_errors[] = {
	VARLINK_DEFINE_ERROR("com.example.sample.Gone", ENOENT, "Not there.",
			     VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR("com.example.other.Elsewhere", EIO, NULL),
	VARLINK_DEFINE_ERROR("com.example.sample.Bare", EIO, NULL),
	{},
};
/* clang-format on */

START_TEST(test_idl_format)
{
	static const char want[] = "# A sample.\n"
				   "interface com.example.sample\n"
				   "\n"
				   "# Two of a kind.\n"
				   "type Pair (\n"
				   "  left: int,\n"
				   "  # the other one\n"
				   "  right: ?int\n"
				   ")\n"
				   "\n"
				   "type Holder (pairs: []Pair, tags: [string]string)\n"
				   "\n"
				   "# Looks one up.\n"
				   "#\n"
				   "# Two paragraphs.\n"
				   "method Get(id: string, name: ?string) -> (\n"
				   "  holder: Holder,\n"
				   "  first: ?Pair,\n"
				   "  meta: (ok: bool, any: ?object)\n"
				   ")\n"
				   "\n"
				   "method Ping() -> ()\n"
				   "\n"
				   "method Long(id: string) -> (\n"
				   "  a_rather_long_field_name_number_one: string,\n"
				   "  a_rather_long_field_name_number_two: string,\n"
				   "  # commented\n"
				   "  three: bool\n"
				   ")\n"
				   "\n"
				   "# Not there.\n"
				   "error Gone (message: string)\n"
				   "\n"
				   "error Bare ()\n";
	const struct varlink_symbol *const methods[] = { &sample_Get, &sample_Ping, &sample_Long };
	char *text = NULL;

	ck_assert_int_eq(varlink_idl_format("com.example.sample", "A sample.", methods,
					    ELEMENTSOF(methods), sample_errors, &text),
			 0);
	ck_assert_str_eq(text, want);
	free(text);
}
END_TEST

/* What GetInterfaceDescription serves is the checked-in file, byte for byte. */
START_TEST(test_idl_served_is_checked_in)
{
	for (const struct rpc_interface *i = rpc_interfaces; i->name; i++) {
		char path[512], *file, *served = NULL;

		snprintf(path, sizeof(path), "%s/proto/%s.varlink", SRC_DIR, i->name);
		file = test_read_file(path);
		ck_assert_int_eq(rpc_idl_text(i->name, &served), 0);
		ck_assert_msg(strcmp(file, served) == 0,
			      "%s differs from what the daemon serves: `make idl` writes it", path);
		free(served);
		free(file);
	}
	ck_assert_int_eq(rpc_idl_text("com.example.nope", &(char *){ NULL }), -ENOENT);
}
END_TEST

/* Each table entry is named after its symbol, within a served interface. */
START_TEST(test_method_names)
{
	const struct rpc_method *m;
	size_t i = 0, n = 0;

	while ((m = rpc_method_next(&i))) {
		const char *dot = strrchr(m->name, '.');
		bool served = false;

		ck_assert_ptr_nonnull(dot);
		ck_assert_str_eq(dot + 1, m->symbol->name);
		for (const struct rpc_interface *f = rpc_interfaces; f->name; f++)
			served = served || (strlen(f->name) == (size_t)(dot - m->name) &&
					    strncmp(f->name, m->name, dot - m->name) == 0);
		ck_assert_msg(served, "%s is in no interface served", m->name);
		ck_assert_uint_le(m->params_size, RPC_PARAMS_MAX);
		n++;
	}
	ck_assert_uint_gt(n, 20);
}
END_TEST

/* The text of PROTOCOL.md's section that starts with heading, up to the next "## ". */
static char *protocol_section(char *doc, const char *heading)
{
	char *s = strstr(doc, heading), *end;

	ck_assert_ptr_nonnull(s);
	end = strstr(s + strlen(heading), "\n## ");
	if (end)
		*end = '\0';
	return s;
}

/*
 * PROTOCOL.md's table of methods names each method of the tables (a row's
 * later names without an interface are of the interface of its first),
 * and no other.
 */
START_TEST(test_protocol_methods)
{
	char path[512], *doc, *sec, *line, *save = NULL;
	bool listed[256] = {};
	const struct rpc_method *m;
	size_t i = 0;

	snprintf(path, sizeof(path), "%s/proto/PROTOCOL.md", SRC_DIR);
	doc = test_read_file(path);
	sec = protocol_section(doc, "\n## Methods\n");
	for (line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char iface[64] = "", *cell_end, *p;

		if (strncmp(line, "| `", 3) != 0)
			continue;
		cell_end = strstr(line + 1, " | ");
		ck_assert_ptr_nonnull(cell_end);
		for (p = line; (p = strchr(p, '`')) && p < cell_end;) {
			char name[128], full[192], *close = strchr(p + 1, '`');
			const char *dot;
			bool found = false;
			size_t k = 0;

			ck_assert_ptr_nonnull(close);
			snprintf(name, sizeof(name), "%.*s", (int)(close - p - 1), p + 1);
			dot = strrchr(name, '.');
			if (dot)
				snprintf(iface, sizeof(iface), "%.*s", (int)(dot - name), name);
			snprintf(full, sizeof(full), "%s.%s", iface, dot ? dot + 1 : name);
			while (!found && (m = rpc_method_next(&k)))
				found = strcmp(m->name, full) == 0;
			ck_assert_msg(found, "PROTOCOL.md lists %s, which no table has", full);
			ck_assert_uint_lt(k, ELEMENTSOF(listed));
			listed[k - 1] = true;
			p = close + 1;
		}
	}
	while ((m = rpc_method_next(&i)))
		ck_assert_msg(listed[i - 1], "PROTOCOL.md's table of methods lacks %s", m->name);
	free(doc);
}
END_TEST

/*
 * PROTOCOL.md's table of errors: each row an error of the table, with its
 * errno and its declared parameters (message aside); every io.rdmamemd
 * error has a row.
 */
START_TEST(test_protocol_errors)
{
	char path[512], *doc, *sec, *line, *save = NULL;
	bool listed[64] = {};

	snprintf(path, sizeof(path), "%s/proto/PROTOCOL.md", SRC_DIR);
	doc = test_read_file(path);
	sec = protocol_section(doc, "\n## Errors\n");
	for (line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const struct varlink_error *e;
		char name[128], params[256] = "", want[256] = "", err[32];
		const char *q;

		if (strncmp(line, "| `", 3) != 0)
			continue;
		ck_assert_int_eq(sscanf(line, "| `%127[^`]`", name), 1);
		e = rdmamem_error_find(name);
		ck_assert_msg(e, "PROTOCOL.md lists error %s, which errors.c lacks", name);
		/* " (`a`, `b`)" after the name: the declared parameters. */
		q = line + 3 + strlen(name) + 1;
		if (strncmp(q, " (", 2) == 0)
			sscanf(q + 2, "%255[^)]", params);
		for (const struct varlink_field *f = e->fields; f->name; f++)
			if (strcmp(f->name, "message") != 0)
				snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s`%s`",
					 want[0] ? ", " : "", f->name);
		ck_assert_msg(strcmp(params, want) == 0, "%s: PROTOCOL.md says (%s), errors.c (%s)",
			      name, params, want);
		q = strstr(q, " | `");
		ck_assert_ptr_nonnull(q);
		ck_assert_int_eq(sscanf(q, " | `%31[^`]`", err), 1);
		ck_assert_msg(strcmp(err, strerrorname_np(e->err)) == 0,
			      "%s: PROTOCOL.md says %s, errors.c %s", name, err,
			      strerrorname_np(e->err));
		ck_assert_uint_lt(e - rdmamem_errors, ELEMENTSOF(listed));
		listed[e - rdmamem_errors] = true;
	}
	for (const struct varlink_error *e = rdmamem_errors; e->name; e++)
		if (strncmp(e->name, RDMAMEMD_INTERFACE ".", strlen(RDMAMEMD_INTERFACE) + 1) == 0)
			ck_assert_msg(listed[e - rdmamem_errors],
				      "PROTOCOL.md's table of errors lacks %s", e->name);
	free(doc);
}
END_TEST

Suite *idl_suite(void)
{
	Suite *s = suite_create("idl");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_idl_format);
	tcase_add_test(tc, test_idl_served_is_checked_in);
	tcase_add_test(tc, test_method_names);
	tcase_add_test(tc, test_protocol_methods);
	tcase_add_test(tc, test_protocol_errors);
	suite_add_tcase(s, tc);
	return s;
}
