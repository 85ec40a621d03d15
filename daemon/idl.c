/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interface definitions, embedded verbatim from proto/ at build time so
 * that GetInterfaceDescription can never drift from the published files.
 * IDL_DIR is set by the Makefile.
 */
#ifndef IDL_DIR
#error "IDL_DIR must name the directory holding the .varlink files"
#endif

#define EMBED(sym, file)                        \
	"	.section .rodata\n"             \
	"	.global " sym "\n"              \
	"	.hidden " sym "\n"              \
	"	.type " sym ", @object\n"       \
	sym ":\n"                               \
	"	.incbin \"" IDL_DIR "/" file "\"\n" \
	"	.byte 0\n"                      \
	"	.size " sym ", . - " sym "\n"   \
	"	.previous\n"

__asm__(EMBED("rpc_idl_io_rdmamemd", "io.rdmamemd.varlink"));
__asm__(EMBED("rpc_idl_org_varlink_service", "org.varlink.service.varlink"));
