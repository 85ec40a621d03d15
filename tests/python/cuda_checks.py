# SPDX-License-Identifier: BSD-3-Clause
"""CUDA tensor checks, run by test_cuda.py in a process of their own per
allocator mode (PYTORCH_CUDA_ALLOC_CONF must be set before the first CUDA
allocation). Connects to $RDMAMEM_SOCKET; prints one line per check and exits
non-zero on the first failure."""

from __future__ import annotations

import os
import sys

import torch

import rdmamem


FAILED: list[str] = []


def check(cond: bool, what: str) -> None:
    """Prints the check's line; a failure is counted and the run goes on,
    so that one run shows every check that fails."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def pattern(n: int, seed: int) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) * 131 + seed).remainder(251).to(torch.uint8)


def one_tensor(c: rdmamem.Client, pool: rdmamem.Pool, mode: str, name: str,
               t: torch.Tensor) -> None:
    """Write, Read and Copy in both directions through a registered CUDA
    tensor, byte-exact."""
    n = t.numel()
    dev = t.device
    with c.register_tensor(t) as span:
        check(span.nbytes == n, f"{mode}: {name}: span of {n} bytes")
        # host -> GPU by Write
        p1 = pattern(n, 1)
        span.write(p1.numpy().tobytes())
        torch.cuda.synchronize()
        check(torch.equal(t.cpu(), p1), f"{mode}: {name}: Write lands in the tensor")
        # GPU -> host by Read
        t.copy_(pattern(n, 2).to(dev))
        torch.cuda.synchronize()
        check(span.read() == pattern(n, 2).numpy().tobytes(), f"{mode}: {name}: Read")
        # host -> GPU and GPU -> host by Copy, through a pool tensor
        h = pool.tensor(n, torch.uint8)
        h.copy_(pattern(n, 3))
        hs = c.register_tensor(h)
        hs.copy_to(span)
        check(torch.equal(t.cpu(), pattern(n, 3)), f"{mode}: {name}: Copy host->GPU")
        t.copy_(pattern(n, 4).to(dev))
        torch.cuda.synchronize()
        span.copy_to(hs)
        check(torch.equal(h, pattern(n, 4)), f"{mode}: {name}: Copy GPU->host")
        hs.close()


def main() -> None:
    mode = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") or "cudaMalloc"
    dev = torch.device("cuda", 0)
    with rdmamem.Client(os.environ["RDMAMEM_SOCKET"], timeout=60) as c:
        pool = c.pool(8 << 20)
        # A tensor at an odd offset inside a larger allocation, and one whose
        # storage starts at an offset in a block the allocator split.
        base = torch.zeros(1 << 20, dtype=torch.uint8, device=dev)
        sub = base[4097 : 4097 + 300001]
        small_a = torch.zeros(1000, dtype=torch.uint8, device=dev)
        small_b = torch.zeros(777, dtype=torch.uint8, device=dev)  # shares a 2 MiB segment
        # register_tensor asks the driver for a cudaMalloc allocation's
        # handle: the very one PyTorch shares, at the same offset; memory of
        # expandable segments has none, and goes through PyTorch's record.
        from rdmamem.client import _direct_ipc_handle

        direct = _direct_ipc_handle(small_b)
        share = small_b.untyped_storage()._share_cuda_()
        rec = rdmamem.cuda.parse_share_handle(share[1])
        if "expandable" in mode:
            check(direct is None, f"{mode}: no legacy IPC handle for expandable segments")
        else:
            check(direct == (rec.ipc_handle, share[3]),
                  f"{mode}: the driver's handle and offset are PyTorch's")
            check(_direct_ipc_handle(small_a) == (rec.ipc_handle, share[3] - 1024),
                  f"{mode}: ... and remembered for the allocation's other blocks")
        for name, t in (("sub-tensor at 4097", sub), ("second block of a segment", small_b),
                        ("first block", small_a)):
            try:
                one_tensor(c, pool, mode, name, t)
            except Exception as e:  # noqa: BLE001 (reported, counted, and the run goes on)
                check(False, f"{mode}: {name}: {type(e).__name__}: {e}")
        # Two blocks of one segment registered at once: one import of the
        # allocation serves both.
        with c.register_tensor(small_a) as sa, c.register_tensor(small_b) as sb:
            sa.write(pattern(1000, 6).numpy().tobytes())
            sb.write(pattern(777, 7).numpy().tobytes())
            torch.cuda.synchronize()
            check(torch.equal(small_a.cpu(), pattern(1000, 6)) and
                  torch.equal(small_b.cpu(), pattern(777, 7)),
                  f"{mode}: two blocks of one segment at once")
        # GPU -> GPU, and bytes around the sub-tensor untouched.
        other = torch.zeros(300001, dtype=torch.uint8, device=dev)
        sub.copy_(pattern(300001, 5).to(dev))
        torch.cuda.synchronize()
        with c.register_tensor(sub) as s1, c.register_tensor(other) as s2:
            s1.copy_to(s2)
        check(torch.equal(other.cpu(), pattern(300001, 5)), f"{mode}: Copy GPU->GPU")
        check(int(base[:4097].count_nonzero()) == 0 and
              int(base[4097 + 300001 :].count_nonzero()) == 0,
              f"{mode}: bytes around the sub-tensor untouched")
        # A tensor PyTorch would free while registered: the span holds it.
        t = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        held = torch.cuda.memory_allocated()
        span = c.register_tensor(t)
        del t
        check(torch.cuda.memory_allocated() == held,
              f"{mode}: a registered tensor dropped by its user stays allocated")
        span.close()
        check(torch.cuda.memory_allocated() == held - (64 << 20),
              f"{mode}: freed once its span is closed")
        # Expandable segments: a tensor across segments is several
        # allocations, mapped in order by the daemon; past 64, refused.
        if "expandable" in mode:
            big = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
            n = 3 << 20
            with c.register_tensor(big[(100 << 20) - 12345 :]) as span:
                span.region.write(pattern(n, 8).numpy().tobytes(), (20 << 20) - 777)
                torch.cuda.synchronize()
                at = (100 << 20) - 12345 + (20 << 20) - 777
                check(torch.equal(big[at : at + n].cpu(), pattern(n, 8)),
                      f"{mode}: a tensor over several segments, written across a seam")
                check(span.region.read((20 << 20) - 777, n) == pattern(n, 8).numpy().tobytes(),
                      f"{mode}: ... and read back")
            huge = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
            try:
                c.register_tensor(huge).close()
                check(False, f"{mode}: a 2 GiB tensor (over 64 segments) refused")
            except ValueError as e:
                check("at most 64" in str(e), f"{mode}: a 2 GiB tensor refused: {e}")
    if FAILED:
        print(f"{len(FAILED)} checks failed")
        sys.exit(1)

if __name__ == "__main__":
    main()
