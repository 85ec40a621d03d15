/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Interfaces described once, in C tables (sd-varlink's SD_VARLINK_DEFINE_*
 * idea): a method's parameters and reply, a named type's fields, an
 * error's parameters, each with the doc comments the IDL shows. From the
 * same tables the IDL text is printed (varlink_idl_format()) and a
 * method's parameters are decoded into its C struct (json_dispatch(),
 * dispatch.h), so what the IDL declares and what the daemon accepts cannot
 * drift apart.
 *
 * A field's type says both what the IDL writes and what C type the decoder
 * stores at its offset:
 *
 *	VARLINK_BOOL	bool	bool
 *	VARLINK_INT	int	int64_t, |v| < 2^53
 *	VARLINK_U32	int	uint32_t
 *	VARLINK_U64	string	uint64_t, a decimal string (or a number below 2^53)
 *	VARLINK_STRING	string	const char *, into the message
 *	VARLINK_OBJECT	object	const cJSON *, any JSON value
 *	VARLINK_STRUCT	T, (…)	the symbol's fields, decoded into the struct there
 *
 * VARLINK_ARRAY ([]T) and VARLINK_MAP ([string]T) store the array or
 * object as a const cJSON *, its elements unchecked: the method checks
 * them, with its own words. A method's parameter without VARLINK_NULLABLE
 * is mandatory.
 */
#ifndef RDMAMEM_IDL_H
#define RDMAMEM_IDL_H

#include <stddef.h>

enum varlink_type {
	VARLINK_BOOL,
	VARLINK_INT,
	VARLINK_U32,
	VARLINK_U64,
	VARLINK_STRING,
	VARLINK_OBJECT,
	VARLINK_STRUCT,
	VARLINK_COMMENT, /* not a field: doc for the field after it */
};

#define VARLINK_NULLABLE (1U << 0) /* ?T: may be absent (or null) */
#define VARLINK_ARRAY (1U << 1)    /* []T */
#define VARLINK_MAP (1U << 2)      /* [string]T */
#define VARLINK_PRESENCE (1U << 3) /* the decoder sets the bool at has_offset when sent */

enum varlink_direction {
	VARLINK_IN,  /* a method's parameter, or a field of a type or an error */
	VARLINK_OUT, /* a field of a method's reply */
};

struct varlink_symbol;

struct varlink_field {
	const char *name; /* NULL ends a list */
	enum varlink_type type;
	enum varlink_direction direction;
	unsigned flags;
	const struct varlink_symbol *symbol; /* VARLINK_STRUCT: named, or inline (no name) */
	const char *doc;                     /* VARLINK_COMMENT: lines split at '\n' */
	/* Decoding (dispatch.h): where the value goes, and its presence. */
	size_t offset;
	size_t has_offset;
	/*
	 * What the server makes of the value once decoded (0: nothing). The
	 * decoder and the IDL ignore it; the daemon's dispatcher reads it
	 * (rpc.h, RPC_RESOLVE_*).
	 */
	unsigned resolve;
};

enum varlink_symbol_kind {
	VARLINK_SYMBOL_TYPE,
	VARLINK_SYMBOL_METHOD,
};

struct varlink_symbol {
	const char *name; /* NULL: an inline struct */
	enum varlink_symbol_kind kind;
	const char *doc; /* lines split at '\n'; NULL: none */
	const struct varlink_field *fields;
};

/*
 * An error of an interface: its full name, the errno the client library
 * turns it into, its doc and its declared parameters. The table of them is
 * errors.c's, one for daemon and client.
 */
struct varlink_error {
	const char *name; /* interface.Name; NULL ends the table */
	int err;          /* positive errno */
	const char *doc;
	const struct varlink_field *fields;
};

/* clang-format off */
/* The fields of a list, each followed by a comma; a list may be empty. */
#define VARLINK_FIELDS(...) ((const struct varlink_field[]){ __VA_ARGS__ __VA_OPT__(,) {} })

/* A doc comment for the field that follows it. */
#define VARLINK_FIELD_COMMENT(text) { .name = "", .type = VARLINK_COMMENT, .doc = (text) }

/* A field of a type or an error (no decoding), or of a reply. */
#define VARLINK_FIELD(_name, _type, _flags) \
	{ .name = #_name, .type = (_type), .flags = (_flags) }
#define VARLINK_FIELD_BY_TYPE(_name, _symbol, _flags) \
	{ .name = #_name, .type = VARLINK_STRUCT, .flags = (_flags), .symbol = &(_symbol) }
#define VARLINK_FIELD_INLINE(_name, _flags, ...)                                             \
	{ .name = #_name, .type = VARLINK_STRUCT, .flags = (_flags),                       \
	  .symbol = &(const struct varlink_symbol){ .fields = VARLINK_FIELDS(__VA_ARGS__) } }
#define VARLINK_OUTPUT(_name, _type, _flags) \
	{ .name = #_name, .type = (_type), .direction = VARLINK_OUT, .flags = (_flags) }
#define VARLINK_OUTPUT_BY_TYPE(_name, _symbol, _flags)                                   \
	{ .name = #_name, .type = VARLINK_STRUCT, .direction = VARLINK_OUT, .flags = (_flags), \
	  .symbol = &(_symbol) }
#define VARLINK_OUTPUT_INLINE(_name, _flags, ...)                                        \
	{ .name = #_name, .type = VARLINK_STRUCT, .direction = VARLINK_OUT, .flags = (_flags), \
	  .symbol = &(const struct varlink_symbol){ .fields = VARLINK_FIELDS(__VA_ARGS__) } }

/* A parameter (or a decoded type's field), decoded into _struct's member _member. */
#define VARLINK_INPUT_AT(_struct, _name, _member, _type, _flags) \
	{ .name = #_name, .type = (_type), .flags = (_flags), .offset = offsetof(_struct, _member) }
#define VARLINK_INPUT(_struct, _name, _type, _flags) \
	VARLINK_INPUT_AT(_struct, _name, _name, _type, _flags)
/* Decoded, and the bool _has set when it was sent (absent or null: not). */
#define VARLINK_INPUT_HAS(_struct, _name, _member, _type, _flags, _has)                   \
	{ .name = #_name, .type = (_type), .flags = (_flags) | VARLINK_PRESENCE,           \
	  .offset = offsetof(_struct, _member), .has_offset = offsetof(_struct, _has) }
/* A parameter of a named type, decoded into the struct at _member; the
 * bool _has set when it was sent. */
#define VARLINK_INPUT_BY_TYPE_HAS(_struct, _name, _member, _symbol, _flags, _has)         \
	{ .name = #_name, .type = VARLINK_STRUCT, .flags = (_flags) | VARLINK_PRESENCE,    \
	  .symbol = &(_symbol), .offset = offsetof(_struct, _member),                      \
	  .has_offset = offsetof(_struct, _has) }
/* A parameter of a named type, decoded into the struct at _member. */
#define VARLINK_INPUT_BY_TYPE(_struct, _name, _member, _symbol, _flags)               \
	{ .name = #_name, .type = VARLINK_STRUCT, .flags = (_flags), .symbol = &(_symbol), \
	  .offset = offsetof(_struct, _member) }

/* A parameter (or a decoded type's field) of an unnamed type, decoded into
 * the struct at _member. */
#define VARLINK_INPUT_INLINE(_struct, _name, _flags, ...)                                    \
	{ .name = #_name, .type = VARLINK_STRUCT, .flags = (_flags),                       \
	  .offset = offsetof(_struct, _name),                                              \
	  .symbol = &(const struct varlink_symbol){ .fields = VARLINK_FIELDS(__VA_ARGS__) } }

#define VARLINK_DEFINE_TYPE(_name, _doc, ...)                                                \
	{ .name = #_name, .kind = VARLINK_SYMBOL_TYPE, .doc = (_doc),                       \
	  .fields = VARLINK_FIELDS(__VA_ARGS__) }
#define VARLINK_DEFINE_METHOD(_name, _doc, ...)                                              \
	{ .name = #_name, .kind = VARLINK_SYMBOL_METHOD, .doc = (_doc),                     \
	  .fields = VARLINK_FIELDS(__VA_ARGS__) }
#define VARLINK_DEFINE_ERROR(_full_name, _errno, _doc, ...)          \
	{ .name = (_full_name), .err = (_errno), .doc = (_doc),     \
	  .fields = VARLINK_FIELDS(__VA_ARGS__) }
/* clang-format on */

/* Lines are at most this long where a declaration fits on one line. */
#define VARLINK_IDL_WIDTH 100

/*
 * The IDL text of interface name: doc as comment lines, "interface name",
 * then each of methods, the named types it uses printed before it (each
 * once, the types they use first), then the errors of errors (NULL name
 * ends it) whose names are in the interface. Returns 0 with *ret a
 * malloc()ed NUL-terminated string, or -ENOMEM.
 */
int varlink_idl_format(const char *name, const char *doc,
		       const struct varlink_symbol *const *methods, size_t n_methods,
		       const struct varlink_error *errors, char **ret);

#endif
