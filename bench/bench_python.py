#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Python package's benchmarks, each row beside its anchor measured in
the same run, with the ratio (make bench; on a GPU machine through the
bundle, tests/gpu/README.md):

- ``pool.tensor()`` per call (no call to the daemon) beside ``torch.empty`` of
  the same shape and ``torch.frombuffer`` over a memoryview of the same size;
- ``register_tensor`` beside the C call it wraps, timed by bench-calls (a C
  program on the same daemon): a pool tensor (a span of the pool's region:
  no call at all, so its whole cost is the Python layer's), ``register_memfd``
  beside ``rdmamem_register`` of the same range, ``ping`` beside
  ``rdmamem_ping``, and with CUDA a tensor whose allocation the daemon has
  open already (a span over it stays registered) beside
  ``rdmamem_register_cuda_ipc`` of the same IPC handle, offset and length;
- with CUDA, a 4 KiB host->GPU Copy of tensors through the daemon (a pool
  tensor into a CUDA tensor), per copy, beside ``cuda_tensor.copy_(pinned,
  non_blocking=True)`` and ``torch.cuda.synchronize()``;
- with CUDA, a 256 MiB host->GPU Copy of tensors through the daemon (a pool
  tensor into a CUDA tensor) beside ``cuda_tensor.copy_(pinned)``, synchronised.

Goals (issues 14, 15): the Python layer adds <= 5 us to a call; the 4 KiB
Copy takes <= 2x PyTorch's; the 256 MiB Copy reaches >= 0.95 of
copy_(pinned).

    bench_python.py --daemon build/release/rdmamemd --calls build/release/bench-calls

(the GPU bundle's run.sh sets $RDMAMEMD and PATH, which are the defaults). It
starts its own daemon on a temporary socket. The package comes from
python/ of this checkout unless rdmamem is importable; the library from
``$RDMAMEM_LIBRARY`` (make bench sets it to the build's).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
import daemonproc  # noqa: E402  (the tests' way to start the daemon)

try:
    import rdmamem
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))
    import rdmamem
import torch
from rdmamem.client import _direct_ipc_handle, _ipc_counter_release
from rdmamem.cuda import KIND_CUDA_MALLOC, parse_share_handle

COPY_BYTES = 256 << 20
GOAL_ADDED_US = 5.0
GOAL_COPY_RATIO = 0.95
SMALL_COPY_BYTES = 4096
GOAL_SMALL_COPY_RATIO = 2.0


def per_call_us(fn: Callable[[], Any], seconds: float, batch: int = 200) -> float:
    """Median over batches of the mean time of one fn() call, in microseconds
    (for calls too short to time one by one)."""
    for _ in range(batch):  # warm-up
        fn()
    means = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(means) < 5:
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        means.append((time.perf_counter_ns() - t0) / batch / 1e3)
    return statistics.median(means)


def per_round_us(fn: Callable[[], Any], rounds: int) -> float:
    """The median of rounds timed one by one, after a tenth as warm-up: how
    bench-calls times the C side."""
    t = []
    for i in range(-(rounds // 10), rounds):
        t0 = time.perf_counter_ns()
        fn()
        if i >= 0:
            t.append(time.perf_counter_ns() - t0)
    return statistics.median(t) / 1e3


def c_call_us(calls: str, sock: str, rounds: int, args: list[str],
              pass_fds: tuple[int, ...] = ()) -> float:
    """bench-calls' median for args (see bench/bench-calls.c)."""
    r = subprocess.run([calls, "--socket", sock, "--rounds", str(rounds), *args],
                       capture_output=True, text=True, pass_fds=pass_fds, timeout=300)
    if r.returncode != 0:
        sys.exit(f"bench_python: bench-calls {' '.join(args[:1])}: {r.stderr.strip()}")
    words = r.stdout.split()
    return float(words[words.index("p50") + 1])


def side_by_side(py: Callable[[], Any], calls: str, sock: str, rounds: int, args: list[str],
                 pass_fds: tuple[int, ...] = (), repeats: int = 3) -> tuple[float, float]:
    """The Python call's and the C call's per-round medians, measured in turn
    repeats times; the lowest of each (the machine's other load only adds)."""
    p, c = [], []
    for _ in range(repeats):
        p.append(per_round_us(py, rounds))
        c.append(c_call_us(calls, sock, rounds, args, pass_fds))
    return min(p), min(c)


def interleaved_us(py: Callable[[], Any], c: Callable[[], Any],
                   rounds: int) -> tuple[float, float]:
    """The per-round medians of py() and c() run in turn, round by round (in
    alternating order), in this process on this connection: both see the
    same machine, the same daemon state and the same moment, which two
    processes timed one after the other do not (their medians moved by 10
    us and more between runs on the GPU machine)."""
    tp, tc = [], []
    for i in range(-(rounds // 10), rounds):
        first, second = (py, c) if i % 2 == 0 else (c, py)
        t0 = time.perf_counter_ns()
        first()
        t1 = time.perf_counter_ns()
        second()
        t2 = time.perf_counter_ns()
        if i >= 0:
            a, b = t1 - t0, t2 - t1
            tp.append(a if first is py else b)
            tc.append(b if first is py else a)
    return statistics.median(tp) / 1e3, statistics.median(tc) / 1e3


def header(title: str, unit: str) -> None:
    print(f"{title:<50} {unit:>10} {'anchor':>10} {'ratio':>7}   anchor")


def row(what: str, value: float, anchor: Optional[float], anchor_name: str,
        note: str = "") -> None:
    a = f"{anchor:10.2f}" if anchor is not None else f"{'-':>10}"
    ratio = f"{value / anchor:7.2f}" if anchor else f"{'-':>7}"
    print(f"{what:<50} {value:10.2f} {a} {ratio}   {anchor_name}{note}")
    sys.stdout.flush()


def bench_pool_tensor(client: rdmamem.Client, seconds: float) -> None:
    print("== pool.tensor() per call (no call to the daemon; the block is freed with the "
          "tensor, each call),")
    print("   beside torch.empty and torch.frombuffer of the same shape, in this process\n")
    header("shape, dtype", "us/call")
    pool = client.pool(64 << 20)
    for shape in [(256,), (1024, 1024)]:
        count = 1
        for s in shape:
            count *= s
        nbytes = count * 4
        buf = memoryview(bytearray(nbytes))
        empty = per_call_us(lambda: torch.empty(shape, dtype=torch.float32), seconds)
        frombuffer = per_call_us(
            lambda: torch.frombuffer(buf, dtype=torch.float32, count=count).view(shape), seconds)
        pooled = per_call_us(lambda: pool.tensor(shape, torch.float32), seconds)
        what = f"{'x'.join(map(str, shape))} f32 ({nbytes >> 10} KiB)"
        row(f"{what}: torch.empty", empty, None, "")
        row(f"{what}: torch.frombuffer(mv)", frombuffer, None, "")
        row(f"{what}: pool.tensor", pooled, empty, "torch.empty")
        row(f"{what}: pool.tensor", pooled, frombuffer, "torch.frombuffer")
    pool.close()
    print()


def bench_calls(client: rdmamem.Client, calls: str, sock: str, rounds: int,
                seconds: float) -> None:
    print("== The Python layer per call: each beside the C call it wraps, on the same daemon "
          "with the same")
    print(f"   memory, median of {rounds} rounds timed one by one: called through ctypes in "
          "this process,")
    print("   interleaved round by round (the goal's measure: adds <= "
          f"{GOAL_ADDED_US:.0f} us), and by bench-calls, a C")
    print("   program, the lower of 3 runs taken in turn (a cross-check across processes)\n")
    header("call", "us")
    pool = client.pool(16 << 20)
    t = pool.tensor((1024, 1024), torch.float32)

    def pool_span() -> None:
        client.register_tensor(t).close()

    us = per_call_us(pool_span, seconds)
    row("register_tensor(pool tensor) + close", us, None, "C: none, a span is no call",
        f"; adds {us:.2f} us ({'ok' if us <= GOAL_ADDED_US else 'OVER the goal'})")

    # The same C functions called straight through ctypes, interleaved round
    # by round with the Python call (interleaved_us()); ctypes' own cost of
    # a call (measured below) counts on the C side.
    lib, h, out = client._lib, client.handle, ctypes.c_uint64()

    def ok(r: int) -> None:
        # The Python calls raise on an error; the bare ones must not time
        # failures either (the check costs their side about 0.1 us a call,
        # less than the ctypes call measured below).
        if r < 0:
            sys.exit(f"bench_python: a C call failed: {client._error(r)}")

    def adds(what: str, py_fn: Callable[[], Any], c_fn: Callable[[], Any], c_name: str) -> None:
        py, c = interleaved_us(py_fn, c_fn, rounds)
        row(what, py, c, c_name + " (ctypes, interleaved)",
            f"; adds {py - c:.2f} us ({'ok' if py - c <= GOAL_ADDED_US else 'OVER the goal'})")

    row("ctypes call of rdmamem_client_error_name", per_call_us(
        lambda: lib.rdmamem_client_error_name(h), seconds), None, "(no daemon call)")
    adds("client.ping()", client.ping, lambda: ok(lib.rdmamem_ping(h)), "rdmamem_ping")
    py, c = side_by_side(client.ping, calls, sock, rounds, ["ping"])
    row("client.ping()", py, c, "rdmamem_ping (bench-calls)", f"; adds {py - c:.2f} us")

    off, n = pool.offset_of(t), t.numel() * t.element_size()
    fd = pool.region.fd

    def memfd_c() -> None:
        ok(lib.rdmamem_register(h, fd, off, n, ctypes.byref(out)))
        ok(lib.rdmamem_unregister(h, out.value))

    adds("register_memfd(4 MiB of it) + close", lambda: client.register_memfd(fd, off, n).close(),
         memfd_c, "rdmamem_register+unregister")
    py, c = side_by_side(lambda: client.register_memfd(fd, off, n).close(), calls, sock, rounds,
                         ["memfd", str(fd), str(off), str(n)], pass_fds=(fd,))
    row("register_memfd(4 MiB of it) + close", py, c, "rdmamem_register+unreg (bench-calls)",
        f"; adds {py - c:.2f} us")
    pool.close()

    if not torch.cuda.is_available():
        print("register_tensor(CUDA tensor, cached): SKIPPED: no CUDA device here (torch "
              f"{torch.__version__}, cuda {torch.version.cuda})")
        print()
        return
    g = torch.empty((1024, 1024), dtype=torch.float32, device="cuda")
    # What register_tensor reads, for the C side: the IPC handle and where
    # the tensor lies in the allocation.
    share = g.untyped_storage()._share_cuda_()
    _ipc_counter_release(share)()
    rec = parse_share_handle(share[1])
    if rec.kind != KIND_CUDA_MALLOC:
        print("register_tensor(CUDA tensor, cached): SKIPPED: expandable segments (the daemon "
              "maps each VMM import anew: nothing is cached); run without "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        print()
        return
    off = share[3] + g.storage_offset() * g.element_size()
    n = g.numel() * g.element_size()
    # This span keeps the daemon's open of the allocation: every round below
    # shares it, in Python as in C.
    handle = ctypes.create_string_buffer(rec.ipc_handle, len(rec.ipc_handle))

    def ipc_c() -> None:
        ok(lib.rdmamem_register_cuda_ipc(h, handle, share[0], off, n, ctypes.byref(out)))
        ok(lib.rdmamem_unregister(h, out.value))

    with client.register_tensor(g):
        adds("register_tensor(CUDA 4 MiB, open) + close", lambda: client.register_tensor(g).close(),
             ipc_c, "rdmamem_register_cuda_ipc+unreg")
        # Where the Python side's time goes: the wrapper alone, and the
        # handle lookup register_tensor does first.
        adds("  of which register_cuda_ipc() + close",
             lambda: client.register_cuda_ipc(rec.ipc_handle, share[0], off, n).close(), ipc_c,
             "rdmamem_register_cuda_ipc+unreg")
        row("  of which the tensor's IPC handle lookup",
            per_call_us(lambda: _direct_ipc_handle(g), seconds), None, "")
        py, c = side_by_side(lambda: client.register_tensor(g).close(), calls, sock, rounds,
                             ["cuda-ipc", rec.ipc_handle.hex(), str(share[0]), str(off),
                              str(n)])
    row("register_tensor(CUDA 4 MiB, open) + close", py, c,
        "rdmamem_register_cuda_ipc+unreg (bench-calls)", f"; adds {py - c:.2f} us")
    print()


def gbps(fn: Callable[[], Any], nbytes: int, seconds: float) -> float:
    """GB/s (10^9 B/s) of fn() repeated for seconds (at least 3 times)."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        t = time.perf_counter() - t0
        if t >= seconds and n >= 3:
            return nbytes * n / t / 1e9


def copy_tensors(client: rdmamem.Client, nbytes: int, pool_bytes: int) -> tuple[Any, ...]:
    """A pool of pool_bytes and, of nbytes each, a pool tensor holding a
    pattern, a CUDA tensor and a pinned tensor holding the same pattern."""
    count = nbytes // 4
    pool = client.pool(pool_bytes)
    src = pool.tensor((count,), torch.float32)
    src.copy_(torch.arange(count, dtype=torch.float32))
    dst = torch.empty((count,), dtype=torch.float32, device="cuda")
    pinned = torch.empty((count,), dtype=torch.float32, pin_memory=True)
    pinned.copy_(src)
    return pool, src, dst, pinned


def bench_small_copy(client: rdmamem.Client, rounds: int) -> None:
    print(f"== {SMALL_COPY_BYTES >> 10} KiB host->GPU copy of tensors, per copy (median of "
          f"{rounds} timed one by one); goal: <= {GOAL_SMALL_COPY_RATIO:.0f}x copy_(pinned, "
          "non_blocking) + synchronize\n")
    if not torch.cuda.is_available():
        print(f"SKIPPED: no CUDA device here (torch {torch.__version__}, cuda "
              f"{torch.version.cuda})\n")
        return
    header("copy", "us")
    pool, src, dst, pinned = copy_tensors(client, SMALL_COPY_BYTES, 1 << 20)

    def torch_pinned() -> None:
        dst.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()

    anchor = per_round_us(torch_pinned, rounds)
    dst.zero_()
    torch.cuda.synchronize()
    with client.register_tensor(src) as a, client.register_tensor(dst) as b:
        a.copy_to(b)  # page-locks the daemon's mapping of the pool
        daemon = per_round_us(lambda: a.copy_to(b), rounds)
    if not torch.equal(dst.cpu(), src):
        sys.exit("bench_python: the daemon's small Copy did not give the source's bytes")
    row("cuda.copy_(pinned, non_blocking) + synchronize", anchor, None, "")
    row("daemon Copy, pool tensor -> CUDA tensor", daemon, anchor, "copy_(pinned)",
        f" ({'ok' if daemon / anchor <= GOAL_SMALL_COPY_RATIO else 'OVER the goal'})")
    pool.close()
    print()


def bench_copy(client: rdmamem.Client, seconds: float) -> None:
    print(f"== {COPY_BYTES >> 20} MiB host->GPU copy of tensors (GB/s = 10^9 B/s), "
          f"{seconds:.1f} s per row; goal: >= {GOAL_COPY_RATIO} of copy_(pinned)\n")
    if not torch.cuda.is_available():
        print(f"SKIPPED: no CUDA device here (torch {torch.__version__}, cuda "
              f"{torch.version.cuda})\n")
        return
    header("copy", "GB/s")
    pool, src, dst, pinned = copy_tensors(client, COPY_BYTES, COPY_BYTES)

    def torch_pinned() -> None:
        dst.copy_(pinned)
        torch.cuda.synchronize()

    def torch_pageable() -> None:
        dst.copy_(src)
        torch.cuda.synchronize()

    anchor = gbps(torch_pinned, COPY_BYTES, seconds)
    pageable = gbps(torch_pageable, COPY_BYTES, seconds)
    dst.zero_()
    torch.cuda.synchronize()
    with client.register_tensor(src) as a, client.register_tensor(dst) as b:
        # The first Copy page-locks the daemon's mapping of the pool: gbps()
        # leaves it out.
        daemon = gbps(lambda: a.copy_to(b), COPY_BYTES, seconds)
    if not torch.equal(dst.cpu(), src):
        sys.exit("bench_python: the daemon's Copy did not give the source's bytes")
    row("cuda.copy_(pinned) + synchronize", anchor, None, "")
    row("cuda.copy_(pool tensor, pageable) + sync", pageable, anchor, "copy_(pinned)")
    row("daemon Copy, pool tensor -> CUDA tensor", daemon, anchor, "copy_(pinned)",
        f" ({'ok' if daemon / anchor >= GOAL_COPY_RATIO else 'UNDER the goal'})")
    pool.close()
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemon", default=os.environ.get("RDMAMEMD") or shutil.which("rdmamemd"),
                    help="rdmamemd to start (default: $RDMAMEMD, else on PATH)")
    ap.add_argument("--calls", default=shutil.which("bench-calls"),
                    help="bench-calls, the C side (default: on PATH)")
    ap.add_argument("--seconds", type=float, default=1.0, help="per row")
    ap.add_argument("--rounds", type=int, default=2000, help="per call row")
    args = ap.parse_args()
    if not args.daemon or not args.calls:
        ap.error("no rdmamemd or no bench-calls: give --daemon and --calls")

    d = tempfile.mkdtemp(prefix="rdmamemd-pybench.")
    try:
        daemon = daemonproc.start(args.daemon, d)
    except RuntimeError as e:
        shutil.rmtree(d, ignore_errors=True)
        sys.exit(f"bench_python: {e}")
    sock = daemon.socket
    try:
        print(f"== rdmamem (Python {sys.version.split()[0]}, torch {torch.__version__}) over "
              f"{os.environ.get('RDMAMEM_LIBRARY', 'librdmamem.so.0')}; "
              f"{os.cpu_count()} CPUs\n")
        with rdmamem.Client(sock, timeout=60) as client:
            bench_pool_tensor(client, args.seconds)
            bench_calls(client, args.calls, sock, args.rounds, args.seconds)
            bench_small_copy(client, args.rounds)
            bench_copy(client, args.seconds)
    finally:
        daemonproc.stop(daemon.proc)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
