# SPDX-License-Identifier: BSD-3-Clause
"""CUDA regions kept across restarts of the daemon, run by test_restart.py in
a process of its own per PyTorch allocator mode (PYTORCH_CUDA_ALLOC_CONF must
be set before the first CUDA allocation): cudaMalloc memory comes as an IPC
handle, expandable segments as VMM allocations. The daemon is the real one,
under ServiceManager (servicemanager.py), stopped (SIGTERM) and then killed
(SIGKILL) under a registered tensor; the client library reconnects and
reclaims by itself. Prints one line per check; exits non-zero if any failed."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import torch

import rdmamem
from servicemanager import ServiceManager

FAILED: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def pattern(n: int, seed: int) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) * 131 + seed).remainder(251).to(torch.uint8)


def scenario(m: ServiceManager, mode: str) -> None:
    vmm = "expandable_segments:True" in mode
    dev = torch.device("cuda", 0)
    m.start()
    c = rdmamem.Client(m.sock, timeout=60)
    reclaimed: list[tuple[int, int]] = []
    c.on_reclaim(lambda region, error, regs: reclaimed.append((region, error)))
    # A sub-tensor at an odd offset of a larger allocation; the bytes around
    # it must never change.
    base = torch.zeros(3 << 20, dtype=torch.uint8, device=dev)
    sub = base[4097 : 4097 + 1000003]
    n = sub.numel()
    sub.copy_(pattern(n, 1).to(dev))
    torch.cuda.synchronize()
    span = c.register_tensor(sub)
    region = span.region.id
    m.pump(0.5)
    parts = m.names(f"rdmamem-k1.{region}.")
    # VMM: the record and the daemon's own export of each allocation; IPC:
    # the record only.
    check(len(parts) >= 2 if vmm else len(parts) == 1,
          f"{mode}: region {region} is in the store as {len(parts)} parts")
    got = c.call("io.rdmamemd.GetRegion", {"region": str(region)})
    kind = got["source"]["type"]
    check(kind == ("cuda-vmm" if vmm else "cuda-ipc"), f"{mode}: the region is {kind}")

    seed = 2
    for how in (signal.SIGTERM, signal.SIGKILL):
        name = signal.Signals(how).name
        m.kill(how)
        check(m.names(f"rdmamem-k1.{region}.") == parts,
              f"{mode}: {name}: the store still holds the region's parts")
        m.start()
        # The first call reconnects, reclaims, then reads through the daemon.
        data = span.read()
        check(data == pattern(n, seed - 1).numpy().tobytes(),
              f"{mode}: {name}: Read after the restart is byte-exact")
        check(reclaimed == [(region, 0)], f"{mode}: {name}: reclaimed {reclaimed}")
        reclaimed.clear()
        got = c.call("io.rdmamemd.GetRegion", {"region": str(region)})
        check(got["owner"]["pid"] == os.getpid() and "reclaim_in_msec" not in got,
              f"{mode}: {name}: the region is this connection's again")
        # The daemon's new mapping is of the same memory: a Write lands in
        # the tensor, and nothing around it moves.
        span.write(pattern(n, seed).numpy().tobytes())
        torch.cuda.synchronize()
        check(torch.equal(sub.cpu(), pattern(n, seed)), f"{mode}: {name}: Write lands in the tensor")
        check(int(base[:4097].count_nonzero()) == 0 and int(base[4097 + n :].count_nonzero()) == 0,
              f"{mode}: {name}: the bytes around the tensor are untouched")
        seed += 1

    # A region registered after the restarts gets an id above the kept one.
    other = torch.ones(4096, dtype=torch.uint8, device=dev)
    span2 = c.register_tensor(other)
    check(span2.region.id > region, f"{mode}: a new region's id {span2.region.id} > {region}")
    span2.close()
    span.close()
    m.pump(0.5)
    check(m.names("rdmamem-k1.") == [], f"{mode}: unregistered: no part is left in the store")
    c.close()


def main() -> None:
    mode = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") or "cudaMalloc"
    with tempfile.TemporaryDirectory(prefix="rdmamem-cuda-restart.") as d:
        m = ServiceManager(Path(d))
        try:
            scenario(m, mode)
        finally:
            m.close()
            if FAILED:
                print((Path(d) / "daemon.log").read_text(errors="replace")[-4000:])
    if FAILED:
        print(f"{len(FAILED)} checks failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
