#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Section 3 man pages of librdmamem, written from client/include/rdmamem.h.

The header's comments are the API's documentation: each page is one comment
and the declarations right after it (rdmamem_read() and rdmamem_write()
share one), the first function naming the page and the others getting a
".so" page that points to it, as rdma-core does. The synopsis shows the
prototypes and the types and constants they use; the NAME line comes from
SUMMARY below, which must name every group's first function, so that a new
function without a summary fails here instead of going without a page.

    docs/genman3.py [-o DIR] [--check] [HEADER]

writes DIR/rdmamem_*.3 (default docs/man3); --check writes nothing and fails
when a page differs from what it would write (make man3-check).
"""
import argparse
import os
import re
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TH = '"rdmamemd 0.1.0" "Library Functions"'
DATE = "2026-12"

# NAME lines, by a group's first function.
SUMMARY = {
    "rdmamem_client_connect": "connect to rdmamemd",
    "rdmamem_client_close": "close a connection to rdmamemd",
    "rdmamem_client_set_timeout": "set the timeout of a connection's calls",
    "rdmamem_client_socket_path": "the socket a connection was made to",
    "rdmamem_client_on_reclaim": "hear which regions came back after a restart of the daemon",
    "rdmamem_client_reconnect": "reconnect and reclaim the regions kept across a restart",
    "rdmamem_client_error_name": "the Varlink error of the last failed call",
    "rdmamem_client_error_message": "why the last call failed, in one line",
    "rdmamem_call": "call a method of rdmamemd and wait for its reply",
    "rdmamem_list": "call a listing method and gather all its pages",
    "rdmamem_ping": "round trip to rdmamemd",
    "rdmamem_client_get_fd": "the socket an event loop watches",
    "rdmamem_client_get_events": "the poll events an event loop waits for",
    "rdmamem_client_get_timeout": "when an event loop must wake up",
    "rdmamem_client_process": "make progress on a connection without blocking",
    "rdmamem_call_async": "queue a call without waiting for its reply",
    "rdmamem_call_set_timeout": "change an asynchronous call's timeout",
    "rdmamem_call_cancel": "cancel an asynchronous call",
    "rdmamem_call_get_method": "the method an asynchronous call calls",
    "rdmamem_memfd_create": "create a sealed memfd that rdmamemd accepts",
    "rdmamem_register": "register a memfd range as a region",
    "rdmamem_unregister": "drop a region",
    "rdmamem_read": "read or write a region's bytes",
    "rdmamem_copy": "copy between two regions inside rdmamemd",
    "rdmamem_lock": "take or release a lease on a region's lock",
    "rdmamem_register_on": "register a region on an RDMA device",
    "rdmamem_access_token_create": "create an access token for remote peers",
    "rdmamem_access_token_revoke": "revoke an access token",
    "rdmamem_region_export": "export a region to peers on other hosts",
    "rdmamem_remote_import": "import another host's region descriptor",
    "rdmamem_remote_import_info": "import a descriptor and say what it grants",
    "rdmamem_remote_release": "release an imported remote",
    "rdmamem_transfer_prepare": "check a set of ranges once, to post by index later",
    "rdmamem_plan_release": "release a transfer plan",
    "rdmamem_notifications_wait": "take the notifications peers sent to this connection's exports",
    "rdmamem_transfer": "one-sided RDMA reads and writes between regions and remotes",
    "rdmamem_transfer_post": "post ranges of a prepared plan",
    "rdmamem_transfer_with": "transfer calls with options (a notification, progress)",
    "rdmamem_transfer_ranges": "transfer a batch of ranges between a region and a remote",
    "rdmamem_ranges_pack": "the packed parameters of the transfer calls",
    "rdmamem_register_cuda_vmm": "register GPU memory (CUDA VMM or IPC) as a region",
    "rdmamem_share": "let another user or group use a region",
    "rdmamem_unshare": "take back a region's share",
}

# Parameter names that are also plain words: set in italics only as
# "name[" (an array) or "name:" (a definition); the others every time.
WORDS = {
    "call", "callback", "client", "copy", "descriptor", "device", "devices", "flags", "handle",
    "id", "indices", "lease", "length", "method", "mode", "name", "offset", "op", "ops", "path",
    "plan", "progress", "ranges", "region", "remote", "ret", "size", "token",
}


def comment_text(lines):
    """The lines of a /* */ comment without the markers; a line's leading
    tab (after " * ") stays, to mark code."""
    out = []
    for i, ln in enumerate(lines):
        ln = ln.rstrip()
        if i == 0:
            ln = re.sub(r"^\s*/\*+", "", ln)
        if ln.endswith("*/"):
            ln = ln[:-2].rstrip()
        ln = re.sub(r"^\s*\*(?!/)", "", ln) if i > 0 else ln
        if ln.startswith(" "):
            ln = ln[1:]
        out.append(ln)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def parse(path):
    """Items of the header in order: ("comment", lines), ("func", name, text),
    ("type", name, text), ("define", name, line), ("blank",), ("other",)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    items = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.lstrip().startswith("/*"):
            j = i
            while "*/" not in lines[j]:
                j += 1
            items.append(("comment", comment_text(lines[i:j + 1])))
            i = j + 1
            continue
        m = re.match(r"^(struct|enum) (rdmamem_\w+) \{", ln)
        if m:
            j = i
            while not lines[j].startswith("};"):
                j += 1
            items.append(("type", f"{m.group(1)} {m.group(2)}", "\n".join(lines[i:j + 1])))
            i = j + 1
            continue
        m = re.match(r"^typedef .*\(\*(rdmamem_\w+)\)", ln)
        m = m or re.match(r"^[a-z][^(]*[ *](rdmamem_\w+)\(", ln)
        if m:
            j = i
            while not lines[j].rstrip().endswith(";"):
                j += 1
            kind = "type" if ln.startswith("typedef") else "func"
            items.append((kind, m.group(1), "\n".join(lines[i:j + 1])))
            i = j + 1
            continue
        m = re.match(r"^#define (RDMAMEM_\w+)", ln)
        if m:
            items.append(("define", m.group(1), ln))
        elif not ln.strip():
            items.append(("blank",))
        else:
            items.append(("other",))
        i += 1
    return items


def define_blocks(items):
    """[(comment above or "", [(name, line), ...])]: #defines in a row."""
    out = []
    for i, it in enumerate(items):
        if it[0] != "define":
            continue
        if i > 0 and items[i - 1][0] == "define":
            out[-1][1].append((it[1], it[2]))
            continue
        prev = items[i - 1] if i > 0 else None
        head = ""
        if prev and prev[0] == "comment" and len(prev[1]) == 1:
            head = f"/* {prev[1][0]} */"
        out.append((head, [(it[1], it[2])]))
    return out


def groups(items):
    """[(comment lines, [(name, prototype), ...])]: declarations in a row
    and the comment before them, past blank lines and #defines."""
    out = []
    i = 0
    while i < len(items):
        if items[i][0] != "func":
            i += 1
            continue
        j = i
        funcs = []
        while j < len(items) and items[j][0] == "func":
            funcs.append((items[j][1], items[j][2]))
            j += 1
        k = i - 1
        while k >= 0 and items[k][0] in ("blank", "define"):
            k -= 1
        doc = items[k][1] if k >= 0 and items[k][0] == "comment" else []
        out.append((doc, funcs))
        i = j
    return out


def esc(s):
    """Text as roff reads it literally."""
    s = s.replace("\\", "\\e")
    s = re.sub(r"(?<![\w-])-(?=[A-Z0-9])", r"\\-", s)
    return s


def line_start(s):
    return "\\&" + s if s[:1] in (".", "'") else s


def params(proto):
    names = re.findall(r"(\w+)(?:\[[^\]]*\])?\s*(?=[,)])", proto.split("(", 1)[1])
    return [n for n in names if n != "void"]


def prose(text, pnames):
    s = esc(text)
    s = re.sub(r"(?<!\$)\b(rdmamem_\w+|RDMAMEM_\w+)\b", r"\\fB\1\\fP", s)
    s = re.sub(r"\b(rdmamem)\(3\)", r"\\fB\1\\fP(3)", s)
    for p in pnames:
        if p in WORDS:
            s = re.sub(rf"(?<![\w.\\]){p}(?=\[|:)", rf"\\fI{p}\\fP", s)
        else:
            s = re.sub(rf"(?<![\w.\\]){p}\b", rf"\\fI{p}\\fP", s)
    return line_start(s)


def description(doc, pnames):
    """Paragraphs of prose; lines the comment indents with a tab: code."""
    out = []
    code = False
    fresh = True
    for ln in doc:
        if ln.startswith("\t"):
            if not code:
                out += [".PP", ".RS 4", ".nf"]
                code = True
            out.append(line_start(esc(ln[1:])))
            continue
        if code:
            out += [".fi", ".RE"]
            code = False
            fresh = True
        if not ln.strip():
            fresh = True
            continue
        if fresh:
            out.append(".PP")
            fresh = False
        out.append(prose(ln.strip(), pnames))
    if code:
        out += [".fi", ".RE"]
    return out[1:] if out[:1] == [".PP"] else out


def synopsis_proto(proto):
    """A prototype on the lines the header gives it, its parameters in
    italics, continuation lines aligned after the parenthesis."""
    lines = [ln.strip() for ln in proto.split("\n")]
    indent = " " * (lines[0].index("(") + 1)
    out = []
    for n, ln in enumerate(lines):
        t = esc(ln)
        t = re.sub(r"(\w+)((?:\[[^\]]*\])?)(?=\s*[,)])", r"\\fI\1\\fB\2", t)
        out.append(("" if n == 0 else indent) + "\\fB" + t + "\\fP")
    return out


def used_types(texts, names, types, defines):
    """The type definitions and blocks of constants the texts name, and
    those their definitions name in turn. A block of #defines goes whole
    (RDMAMEM_CALL_MORE with RDMAMEM_CALL_ONEWAY), and with the one-line
    comment above it when that names one of the page's functions."""
    want_t, want_d = [], []
    todo = list(texts)
    while todo:
        t = todo.pop()
        for name, body in types.items():
            if name not in want_t and re.search(rf"\b{name}\b", t):
                want_t.append(name)
                todo.append(body)
        for n, (head, block) in enumerate(defines):
            if n in want_d:
                continue
            named = any(re.search(rf"\b{d}\b", t) for d, _ in block)
            if named or any(re.search(rf"\b{f}\(\)", head) for f in names):
                want_d.append(n)
                todo += [line for _, line in block]
    order_t = [n for n in types if n in want_t]
    return order_t, [defines[n] for n in sorted(want_d)]


def page(doc, funcs, types, defines, known):
    first = funcs[0][0]
    if first not in SUMMARY:
        sys.exit(f"genman3: {first}: no summary in docs/genman3.py SUMMARY: add one")
    names = [f for f, _ in funcs]
    protos = [p for _, p in funcs]
    pnames = []
    for p in protos:
        pnames += [n for n in params(p) if n not in pnames]
    text = "\n".join(doc)
    tnames, dblocks = used_types(protos + [text], names, types, defines)

    out = [
        ".\\\" Written by docs/genman3.py from client/include/rdmamem.h: edit those.",
        f".TH {first.upper()} 3 {DATE} {TH}",
        ".nh",
        ".ad l",
        ".SH NAME",
        ", ".join(esc(n) for n in names) + " \\- " + SUMMARY[first],
        ".SH SYNOPSIS",
        ".nf",
        ".B #include <rdmamem.h>",
    ]
    for t in tnames:
        out.append(".PP")
        out += [line_start(esc(ln)) for ln in types[t].split("\n")]
    for head, block in dblocks:
        out.append(".PP")
        out += [esc(head)] if head else []
        out += [line_start(esc(re.sub(r"\s+", " ", line))) for _, line in block]
    for p in protos:
        out.append(".PP")
        out += synopsis_proto(p)
    out += [
        ".fi",
        ".PP",
        "Link with",
        '.BR "pkg\\-config \\-\\-cflags \\-\\-libs rdmamem" .',
        ".SH DESCRIPTION",
    ]
    out += description(doc, pnames) if doc else ["See", ".BR rdmamem (3)."]
    if all(p.startswith("int ") for p in protos):
        out += [
            ".SH RETURN VALUE",
            "0 on success (or the count the description names), a negative errno on",
            "failure; out-parameters are written only on success.",
        ]
        if all("(struct rdmamem_client *client" in p for p in protos):
            out += [
                "When the daemon answers with a Varlink error, the call returns the errno",
                "that error stands for, and",
                ".BR rdmamem_client_error_name (3)",
                "and",
                ".BR rdmamem_client_error_message (3)",
                "say what went wrong.",
            ]
    see = ["rdmamem"]
    for ref in re.findall(r"\b(rdmamem_\w+)\(\)", text):
        if ref not in known:
            sys.exit(f"genman3: {first}: the comment names {ref}(), "
                     "which rdmamem.h does not declare")
        if ref not in names and ref not in see:
            see.append(ref)
    out.append(".SH SEE ALSO")
    out += [f".BR {s} (3)," for s in see[:-1]]
    out.append(f".BR {see[-1]} (3)")
    return first, names[1:], "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("header", nargs="?", default=os.path.join(SRC, "client/include/rdmamem.h"))
    ap.add_argument("-o", dest="out", default=os.path.join(SRC, "docs/man3"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    items = parse(a.header)
    types = {it[1]: it[2] for it in items if it[0] == "type"}
    defines = define_blocks(items)
    known = {it[1] for it in items if it[0] == "func"}
    files = {}
    for doc, funcs in groups(items):
        first, others, text = page(doc, funcs, types, defines, known)
        files[f"{first}.3"] = text
        for o in others:
            files[f"{o}.3"] = f".so man3/{first}.3\n"

    os.makedirs(a.out, exist_ok=True)
    present = {f for f in os.listdir(a.out) if re.match(r"rdmamem_\w+\.3$", f)}
    stale = sorted(present - set(files))
    differ = []
    for name, text in sorted(files.items()):
        path = os.path.join(a.out, name)
        old = open(path, encoding="utf-8").read() if name in present else None
        if old == text:
            continue
        differ.append(name)
        if not a.check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if a.check:
        if differ or stale:
            print("genman3: pages out of date with rdmamem.h (make man3 writes them): "
                  + " ".join(differ + [f"{s} (stale)" for s in stale]), file=sys.stderr)
            return 1
        return 0
    for s in stale:
        os.unlink(os.path.join(a.out, s))
    print(f"genman3: {len(files)} pages in {a.out}, {len(differ)} written, {len(stale)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
