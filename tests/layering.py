#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layering check: the #include graph of daemon/, util/, proto/ and client/.

The layers, bottom to top, as BELOW writes them: each names the layers right
below it, and a file may include files of its own layer and of any layer
below it:

    util < proto < core < mem < {gpu, rdma < remote} < rpc < ipc < top
    util < proto < client

gpu and rdma are siblings: neither includes the other. client (librdmamem,
rdmamemctl) stands on proto beside the daemon; no daemon file includes it.

Two kinds of violation, each printed with the files and their layers:
- up: a file includes one of a layer it may not include (a higher one, or
  a sibling);
- cycle: an include between two modules (a module: a .c and its .h) of one
  strongly connected component of the module graph, other than the
  transport loop (conn, rpc, server: the connection calls the dispatcher,
  which answers through the connection). Includes inside that loop are
  also exempt from the up rule.

A file's layer comes from LAYER_OF (by path, without .c/.h) or, failing
that, from its folder: daemon/<layer>/..., util/, proto/, client/. A file
that neither gives is an error. LAYER_OF maps daemon/'s own files, the
top.

The baseline (tests/layering-known.txt) lists the violations known when the
check came in, one a line as printed. The check fails on a violation not in
it and on a line of it that no longer occurs, so the list only shrinks;
--update removes the lines that no longer occur (and the file once empty),
and refuses to add any.

    tests/layering.py [-v] [--baseline FILE] [--update] [--root DIR]
"""

import argparse
import os
import re
import sys

BELOW = {
    # Generic containers and socket I/O, shared with the client.
    "util": [],
    # The wire encoding: frame, json, dispatch, varlink, base64, hex, errors.
    "proto": ["util"],
    # log, config, errinfo, stats, accounts and budgets, session, offload.
    "core": ["proto"],
    # Regions and their registry, locks, leases, transfers.
    "mem": ["core"],
    # The CUDA driver and GPU imports.
    "gpu": ["mem"],
    # Verbs, devices, registrations, endpoints, tokens.
    "rdma": ["mem"],
    # Other hosts' regions: descriptors, remote handles, plans, links,
    # WR plans and completion windows; the transfers to them.
    "remote": ["rdma"],
    # The interface tables, dispatch, deferred replies, the method handlers.
    "rpc": ["gpu", "remote"],
    # The server, its connections and their output.
    "ipc": ["rpc"],
    # daemon.c, which composes the contexts, and main.c.
    "top": ["ipc"],
    # librdmamem and rdmamemctl.
    "client": ["proto"],
}

# Modules (by file name) of the one cycle allowed.
TRANSPORT_LOOP = {"conn", "rpc", "server"}

# Files whose folder does not say their layer: daemon/'s own (daemon.c,
# which composes the contexts, and main.c).
LAYER_OF = {
    "daemon/daemon": "top",
    "daemon/main": "top",
    "daemon/fdstore": "top",
}

TREES = ["daemon", "util", "proto", "client"]
# Where a quoted #include is looked for after the including file's folder:
# the Makefile's -I list.
INCLUDE_DIRS = [".", "client/include", "client"]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def allowed_layers():
    """Each layer's set of the layers it may include (itself and all below)."""
    allowed = {}

    def below(layer):
        if layer not in allowed:
            allowed[layer] = {layer}
            for lower in BELOW[layer]:
                allowed[layer] |= below(lower)
        return allowed[layer]

    for layer in BELOW:
        below(layer)
    return allowed


def module(path):
    return os.path.splitext(path)[0]


def layer_of(path, errors):
    stem = module(path)
    if stem in LAYER_OF:
        return LAYER_OF[stem]
    parts = path.split("/")
    if parts[0] == "daemon" and len(parts) > 2 and parts[1] in BELOW:
        return parts[1]
    if parts[0] in ("util", "proto", "client"):
        return parts[0]
    errors.append(f"{path}: no layer (add it to LAYER_OF in tests/layering.py, "
                  "or put it under daemon/<layer>/)")
    return None


def scan(root, errors):
    """The files scanned and their includes among themselves, in order."""
    files = []
    for tree in TREES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, tree)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    known = set(files)
    edges = []
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                for base in [os.path.dirname(path)] + INCLUDE_DIRS:
                    target = os.path.normpath(os.path.join(base, m.group(1)))
                    if os.path.isfile(os.path.join(root, target)):
                        if target in known and module(target) != module(path):
                            edges.append((path, target))
                        break
                else:
                    errors.append(f'{path}: "{m.group(1)}" not found (INCLUDE_DIRS in '
                                  "tests/layering.py should match the Makefile's -I)")
    return files, edges


def components(nodes, succ):
    """Tarjan's strongly connected components of the module graph."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def in_transport_loop(mod):
    return os.path.basename(mod) in TRANSPORT_LOOP


def check(root):
    errors = []
    files, edges = scan(root, errors)
    layers = {path: layer_of(path, errors) for path in files}
    allowed = allowed_layers()

    up = []
    for src, dst in edges:
        ls, ld = layers[src], layers[dst]
        if ls is None or ld is None or ld in allowed[ls]:
            continue
        if in_transport_loop(module(src)) and in_transport_loop(module(dst)):
            continue
        up.append(f"up {src} -> {dst} ({ls} -> {ld})")

    succ = {}
    for src, dst in edges:
        succ.setdefault(module(src), set()).add(module(dst))
    comp_of = {}
    cycles = []
    for comp in components({module(p) for p in files}, succ):
        if len(comp) < 2 or all(in_transport_loop(m) for m in comp):
            continue
        cycles.append(sorted(comp))
        for m in comp:
            comp_of[m] = len(cycles) - 1
    cycle_lines = [[] for _ in cycles]
    for src, dst in edges:
        c = comp_of.get(module(src))
        if c is not None and comp_of.get(module(dst)) == c:
            cycle_lines[c].append(f"cycle {src} -> {dst} ({layers[src]} -> {layers[dst]})")
    return errors, files, edges, up, cycles, cycle_lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--baseline", default=None,
                    help="known violations (default: tests/layering-known.txt)")
    ap.add_argument("--update", action="store_true",
                    help="drop the baseline's lines that no longer occur")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print every violation, known ones too")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    baseline = args.baseline or os.path.join(root, "tests", "layering-known.txt")

    errors, files, edges, up, cycles, cycle_lines = check(root)
    for e in errors:
        print(f"layering: {e}")
    if errors:
        return 2

    current = up + [line for lines in cycle_lines for line in lines]
    known = []
    if os.path.exists(baseline):
        with open(baseline, encoding="utf-8") as f:
            known = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    new = [v for v in current if v not in set(known)]
    gone = [k for k in known if k not in set(current)]

    print(f"layering: {len(files)} files, {len(edges)} includes between them; "
          f"{len(up)} include(s) against the layers, {len(cycles)} cycle(s) outside "
          f"the transport loop ({sum(len(c) for c in cycles)} modules, "
          f"{sum(len(c) for c in cycle_lines)} includes); {len(known)} known")
    for comp, lines in zip(cycles, cycle_lines):
        print(f"  cycle of {len(comp)} modules: {' '.join(os.path.basename(m) for m in comp)}")
    if args.verbose:
        for v in current:
            if v in set(known):
                print(f"  known {v}")
    for v in new:
        print(f"  NEW   {v}")
    for k in gone:
        print(f"  GONE  {k}")

    if args.update:
        if new:
            print("layering: --update only removes lines; fix the new violations")
            return 1
        keep = [k for k in known if k in set(current)]
        if keep:
            with open(baseline, "w", encoding="utf-8") as f:
                f.write(HEADER)
                f.writelines(k + "\n" for k in keep)
        elif os.path.exists(baseline):
            os.remove(baseline)
        print(f"layering: {os.path.relpath(baseline, root)}: {len(keep)} line(s) kept"
              + ("" if keep else ", file removed"))
        return 0

    if new:
        print("layering: the includes marked NEW go against the layers above")
    if gone:
        print("layering: the lines marked GONE no longer occur: remove them from "
              f"{os.path.relpath(baseline, root)} (tests/layering.py --update)")
    return 1 if new or gone else 0


HEADER = """\
# The layering violations known when tests/layering.py came in (issue 12),
# as it prints them. The list only shrinks: the check fails on a violation
# not listed here and on a line here that no longer occurs
# (tests/layering.py --update removes those, and this file once empty).
"""

if __name__ == "__main__":
    sys.exit(main())
