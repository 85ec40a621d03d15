#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Instructions a server spends per call, counted by callgrind: the daemon's
own CPU work beside redis-server's, a figure that does not move with the
machine or its load (timings on the build machine's two shared cores do).

- Ping: rdmamemd's Ping (bench-calls ping) beside redis-server's PING
  (redis-benchmark -c 1 -P 1 -t ping_mbulk), each server alone under
  callgrind; then both with 16 calls in flight (redis-benchmark -P 16, and
  a client here that writes 16 Pings at once and waits for their replies),
  the shape of bench-pipeline's rows.
- Copy of 4 KiB and of 64 KiB between two host regions, a Lock+Unlock pair,
  and a Register+Unregister pair of a 4 KiB memfd (no RDMA device: the
  region and its answer), beside the daemon's Ping (two for a pair): each
  call's own work above the floor every call pays.

Counting starts after a warm-up, once the server has been all but idle for
half a second (callgrind_control --zero), and covers every thread of the
server (the loop, the pool, the event loop's waits) until the client has made
its calls (callgrind_control --dump). Where vgdb may not reach the server
(kernel.yama.ptrace_scope), it says so and skips. The daemon's count
includes the client's connect and, for Copy and Lock, its two Registers:
a few instructions per call over the rounds.

    bench-instructions.py --daemon build/release/rdmamemd --calls build/release/bench-calls

(make bench runs it). Needs valgrind; redis-server and redis-benchmark for
the anchor (make deps installs all three).
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional


# Calls in flight in the pipelined rows (redis-benchmark -P).
DEPTH = 16

# Fewer instructions than this in half a second: the server waits for calls
# (a few of its own timers run; a single call is thousands).
QUIET_INSTRUCTIONS = 2_000_000


class Unreachable(Exception):
    """callgrind_control could not reach the server: vgdb, which it uses,
    needs to ptrace a server blocked in a system call, which
    kernel.yama.ptrace_scope may forbid."""


class Counted:
    """A server under callgrind, its socket at sock."""

    def __init__(self, cmd: list[str], sock: str, outdir: str) -> None:
        self.outdir = outdir
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={outdir}/cg.%p", *cmd],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"bench-instructions: {cmd[0]} did not start under valgrind")
            time.sleep(0.1)

    def control(self, flag: str) -> None:
        r = subprocess.run(["callgrind_control", flag, str(self.proc.pid)],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise Unreachable(f"callgrind_control {flag} failed ({r.returncode}): "
                              f"{(r.stderr or r.stdout).strip()[:200]}")

    def dump(self) -> int:
        """Instructions since the last zero."""
        before = set(glob.glob(f"{self.outdir}/cg.{self.proc.pid}.*"))
        self.control("--dump")
        new = set(glob.glob(f"{self.outdir}/cg.{self.proc.pid}.*")) - before
        if len(new) != 1:
            sys.exit("bench-instructions: callgrind wrote no dump")
        with open(new.pop()) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
        sys.exit("bench-instructions: no totals in callgrind's dump")

    def wait_quiet(self) -> None:
        """Until half a second passes with the server all but idle: work
        it does on its own (the daemon's start-up probe of the memory's
        bandwidth runs on its pool, for seconds under valgrind) would be
        counted against the calls."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            self.control("--zero")
            time.sleep(0.5)
            if self.dump() < QUIET_INSTRUCTIONS:
                return
        sys.exit("bench-instructions: the server never went quiet")

    def count(self, client: list[str], pass_fds: tuple[int, ...] = ()) -> int:
        """Instructions the server ran while client ran, once quiet."""
        self.wait_quiet()
        self.control("--zero")
        subprocess.run(client, check=True, stdout=subprocess.DEVNULL, timeout=600,
                       pass_fds=pass_fds)
        return self.dump()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def pipelined_pings(sock: str, rounds: int, depth: int) -> None:
    """The daemon's Ping, depth in flight: writes depth calls at once and
    waits for their depth replies, rounds times (the client's own cost is
    not counted: callgrind watches the server only)."""
    import socket
    batch = b'{"method":"io.rdmamemd.Ping"}\0' * depth
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
        for _ in range(rounds):
            s.sendall(batch)
            got = 0
            while got < depth:
                b = s.recv(65536)
                if not b:
                    sys.exit("bench-instructions: the daemon hung up")
                got += b.count(b"\0")


def row(what: str, n: float, anchor: Optional[float], anchor_name: str) -> None:
    a = f"{anchor:12,.0f}" if anchor else f"{'-':>12}"
    ratio = f"{n / anchor:7.2f}" if anchor else f"{'-':>7}"
    print(f"{what:<34} {n:12,.0f} {a} {ratio}   {anchor_name}")
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemon", required=True, help="rdmamemd to count")
    ap.add_argument("--calls", required=True, help="bench-calls, the client")
    ap.add_argument("--rounds", type=int, default=5000, help="calls per row")
    ap.add_argument("--pipelined-client", nargs=3, metavar=("SOCKET", "ROUNDS", "DEPTH"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pipelined_client:
        sock, rounds, depth = args.pipelined_client
        pipelined_pings(sock, int(rounds), int(depth))
        return 0
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            print(f"bench-instructions: SKIPPED: no {tool} here (make deps installs valgrind)")
            return 0
    redis = shutil.which("redis-server") and shutil.which("redis-benchmark")
    # bench-calls runs a tenth of the rounds as warm-up before the timed ones.
    calls = args.rounds + args.rounds // 10

    print(f"\n== Instructions per call in the server (callgrind, every thread), {args.rounds} "
          "calls per row after a warm-up\n")
    print(f"{'call':<34} {'instructions':>12} {'anchor':>12} {'ratio':>7}   anchor")
    d = tempfile.mkdtemp(prefix="rdmamem-instr.")
    try:
        return run_rows(args, d, redis, calls)
    except Unreachable as e:
        print(f"bench-instructions: SKIPPED: {e} (vgdb needs to ptrace the server: "
              "kernel.yama.ptrace_scope 0, or run as root)")
        return 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_rows(args: argparse.Namespace, d: str, redis: Any, calls: int) -> int:
    """The table's rows, in d."""
    redis_ping = redis_pipelined = None
    if redis:
        sock = f"{d}/redis.sock"
        server = Counted(["redis-server", "--port", "0", "--unixsocket", sock,
                          "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                          "--loglevel", "warning", "--dir", d], sock, d)
        try:
            bench = ["redis-benchmark", "-s", sock, "-c", "1", "-P", "1", "-t",
                     "ping_mbulk", "-q"]
            subprocess.run(bench + ["-n", "1000"], check=True, stdout=subprocess.DEVNULL)
            redis_ping = server.count(bench + ["-n", str(args.rounds)]) / args.rounds
            redis_pipelined = server.count(bench + ["-P", str(DEPTH), "-n",
                                                    str(args.rounds * DEPTH)]) / (
                args.rounds * DEPTH)
        finally:
            server.stop()
        row("redis-server PING", redis_ping, None, "")
        row(f"redis-server PING, {DEPTH} in flight", redis_pipelined, None, "")
    else:
        print("(redis-server or redis-benchmark not found: no anchor; make deps installs "
              "them)")

    sock = f"{d}/rdmamemd.sock"
    server = Counted([args.daemon, "--socket", sock, "--no-config", "--log-level",
                      "warning"], sock, d)
    try:
        def per_call(op: list[str], pass_fds: tuple[int, ...] = ()) -> float:
            """Instructions per round of bench-calls op (a pair for lock and
            memfd)."""
            client = [args.calls, "--socket", sock, "--rounds", str(args.rounds), *op]
            return server.count(client, pass_fds) / calls

        subprocess.run([args.calls, "--socket", sock, "--rounds", "1000", "ping"],
                       check=True, stdout=subprocess.DEVNULL)
        ping = per_call(["ping"])
        row("rdmamemd Ping", ping, redis_ping, "redis-server PING")
        pipelined = server.count([sys.executable, os.path.abspath(__file__), "--daemon",
                                  args.daemon, "--calls", args.calls, "--pipelined-client",
                                  sock, str(args.rounds), str(DEPTH)]) / (args.rounds * DEPTH)
        row(f"rdmamemd Ping, {DEPTH} in flight", pipelined, redis_pipelined,
            f"redis-server PING, {DEPTH} in flight")
        for size in (4096, 65536):
            row(f"rdmamemd Copy {size >> 10} KiB", per_call(["copy", str(size)]), ping,
                "rdmamemd Ping")
        row("rdmamemd Lock+Unlock (pair)", per_call(["lock"]), 2 * ping,
            "2 x rdmamemd Ping")
        mfd = os.memfd_create("bench-instructions", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(mfd, 4096)
            # The daemon maps only memfds that cannot shrink under it.
            fcntl.fcntl(mfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            row("rdmamemd Register+Unregister 4 KiB", per_call(
                ["memfd", str(mfd), "0", "4096"], (mfd,)), 2 * ping, "2 x rdmamemd Ping")
        finally:
            os.close(mfd)
    finally:
        server.stop()
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
