/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The IDL text of an interface, printed from its tables (idl.h). The layout
 * is fixed so that the checked-in .varlink files are this printer's output:
 * a declaration on one line when it has no comments inside and fits in
 * VARLINK_IDL_WIDTH columns, else each list of fields by itself: on the
 * line when it fits (a method's parameters in 20 columns less, room for
 * what follows), else one field a line, indented by two spaces; a blank
 * line between declarations.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/idl.h"
#include "util/macro.h"

/* Named types one interface may declare: far more than ours has. */
#define IDL_TYPES_MAX 128

struct idl_printer {
	FILE *f;
	const struct varlink_symbol *printed[IDL_TYPES_MAX];
	size_t n_printed;
	int err;
};

/* Each line of text as a comment, indented. */
static void print_comment(FILE *f, const char *indent, const char *text)
{
	for (const char *line = text, *end; line; line = end ? end + 1 : NULL) {
		end = strchr(line, '\n');
		if (!end && !*line)
			break;
		fprintf(f, "%s#%s%.*s\n", indent, (end ? end > line : *line) ? " " : "",
			end ? (int)(end - line) : (int)strlen(line), line);
	}
}

static bool field_in_list(const struct varlink_field *f, int direction)
{
	return direction < 0 || (int)f->direction == direction;
}

static void print_inline_fields(FILE *f, const struct varlink_field *fields, int direction);

static void print_type(FILE *f, const struct varlink_field *fl)
{
	static const char *const names[] = {
		[VARLINK_BOOL] = "bool",  [VARLINK_INT] = "int",       [VARLINK_U32] = "int",
		[VARLINK_U64] = "string", [VARLINK_STRING] = "string", [VARLINK_OBJECT] = "object",
	};

	if (fl->flags & VARLINK_NULLABLE)
		fputc('?', f);
	if (fl->flags & VARLINK_ARRAY)
		fputs("[]", f);
	else if (fl->flags & VARLINK_MAP)
		fputs("[string]", f);
	if (fl->type != VARLINK_STRUCT)
		fputs(names[fl->type], f);
	else if (fl->symbol->name)
		fputs(fl->symbol->name, f);
	else
		print_inline_fields(f, fl->symbol->fields, -1);
}

/* (a: T, b: U): the fields of direction (-1: all) on one line. */
static void print_inline_fields(FILE *f, const struct varlink_field *fields, int direction)
{
	bool first = true;

	fputc('(', f);
	for (const struct varlink_field *fl = fields; fl->name; fl++) {
		if (fl->type == VARLINK_COMMENT || !field_in_list(fl, direction))
			continue;
		fprintf(f, "%s%s: ", first ? "" : ", ", fl->name);
		print_type(f, fl);
		first = false;
	}
	fputc(')', f);
}

/* Whether the list has a comment (of its own, or of an inline struct in it). */
static bool has_comment(const struct varlink_field *fields, int direction)
{
	for (const struct varlink_field *fl = fields; fl->name; fl++) {
		if (fl->type == VARLINK_COMMENT) {
			/* A comment belongs to the field after it. */
			const struct varlink_field *next = fl + 1;

			while (next->name && next->type == VARLINK_COMMENT)
				next++;
			if (next->name && field_in_list(next, direction))
				return true;
		} else if (field_in_list(fl, direction) && fl->type == VARLINK_STRUCT &&
			   !fl->symbol->name && has_comment(fl->symbol->fields, -1)) {
			return true;
		}
	}
	return false;
}

/* The one-line form of a list, or NULL when it has comments. */
static char *inline_list(const struct varlink_field *fields, int direction)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f;

	if (has_comment(fields, direction))
		return NULL;
	f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	print_inline_fields(f, fields, direction);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* (\n  a: T,\n  # doc\n  b: U\n): one field a line. */
static void print_field_lines(FILE *f, const struct varlink_field *fields, int direction)
{
	bool first = true;

	fputs("(\n", f);
	for (const struct varlink_field *fl = fields; fl->name; fl++) {
		const struct varlink_field *next = fl;

		if (fl->type == VARLINK_COMMENT) {
			while (next->name && next->type == VARLINK_COMMENT)
				next++;
			if (!next->name || !field_in_list(next, direction))
				continue;
			if (!first)
				fputs(",\n", f);
			first = true; /* the comma went before the comment */
			print_comment(f, "  ", fl->doc);
			continue;
		}
		if (!field_in_list(fl, direction))
			continue;
		if (!first)
			fputs(",\n", f);
		fprintf(f, "  %s: ", fl->name);
		print_type(f, fl);
		first = false;
	}
	fputs("\n)", f);
}

/*
 * Prints a list after what the line holds already (column col): on this
 * line when it ends by column width, else a field a line. Returns the
 * column after it.
 */
static size_t print_list(FILE *f, size_t col, const struct varlink_field *fields, int direction,
			 size_t width)
{
	_cleanup_free_ char *one = inline_list(fields, direction);

	if (one && col + strlen(one) <= width) {
		fputs(one, f);
		return col + strlen(one);
	}
	print_field_lines(f, fields, direction);
	return 1;
}

static void print_symbol(struct idl_printer *p, const struct varlink_symbol *s);

/* The named types fields use, each printed once, before what uses them. */
static void print_types_of(struct idl_printer *p, const struct varlink_field *fields)
{
	for (const struct varlink_field *fl = fields; fl->name; fl++) {
		const struct varlink_symbol *s = fl->symbol;
		bool done = false;

		if (fl->type != VARLINK_STRUCT)
			continue;
		if (!s->name) {
			print_types_of(p, s->fields);
			continue;
		}
		for (size_t i = 0; i < p->n_printed; i++)
			done = done || p->printed[i] == s;
		if (done)
			continue;
		if (p->n_printed == IDL_TYPES_MAX) {
			p->err = -E2BIG;
			return;
		}
		p->printed[p->n_printed++] = s;
		print_types_of(p, s->fields);
		print_symbol(p, s);
	}
}

static void print_symbol(struct idl_printer *p, const struct varlink_symbol *s)
{
	size_t col;

	fputc('\n', p->f);
	if (s->doc)
		print_comment(p->f, "", s->doc);
	if (s->kind == VARLINK_SYMBOL_TYPE) {
		col = (size_t)fprintf(p->f, "type %s ", s->name);
		print_list(p->f, col, s->fields, -1, VARLINK_IDL_WIDTH);
		fputc('\n', p->f);
		return;
	}
	col = (size_t)fprintf(p->f, "method %s", s->name);
	{
		_cleanup_free_ char *in = inline_list(s->fields, VARLINK_IN);
		_cleanup_free_ char *out = inline_list(s->fields, VARLINK_OUT);

		/* Both on one line when they fit, else each list by itself. */
		if (in && out && col + strlen(in) + 4 + strlen(out) <= VARLINK_IDL_WIDTH) {
			fprintf(p->f, "%s -> %s\n", in, out);
			return;
		}
	}
	/* Parameters that share a line with what follows leave it room. */
	col = print_list(p->f, col, s->fields, VARLINK_IN, VARLINK_IDL_WIDTH - 20);
	fputs(" -> ", p->f);
	print_list(p->f, col + 4, s->fields, VARLINK_OUT, VARLINK_IDL_WIDTH);
	fputc('\n', p->f);
}

int varlink_idl_format(const char *name, const char *doc,
		       const struct varlink_symbol *const *methods, size_t n_methods,
		       const struct varlink_error *errors, char **ret)
{
	struct idl_printer p = {};
	size_t len = strlen(name), size = 0;
	char *buf = NULL;

	p.f = open_memstream(&buf, &size);
	if (!p.f)
		return -ENOMEM;
	if (doc)
		print_comment(p.f, "", doc);
	fprintf(p.f, "interface %s\n", name);
	for (size_t i = 0; i < n_methods; i++) {
		print_types_of(&p, methods[i]->fields);
		print_symbol(&p, methods[i]);
	}
	for (const struct varlink_error *e = errors; e && e->name; e++) {
		size_t col;

		if (strncmp(e->name, name, len) != 0 || e->name[len] != '.' ||
		    strchr(e->name + len + 1, '.'))
			continue;
		fputc('\n', p.f);
		if (e->doc)
			print_comment(p.f, "", e->doc);
		col = (size_t)fprintf(p.f, "error %s ", e->name + len + 1);
		print_list(p.f, col, e->fields, -1, VARLINK_IDL_WIDTH);
		fputc('\n', p.f);
	}
	if (fclose(p.f) != 0 || p.err < 0) {
		free(buf);
		return p.err < 0 ? p.err : -ENOMEM;
	}
	*ret = buf;
	return 0;
}
