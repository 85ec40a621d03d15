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


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def pattern(n: int, seed: int) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) * 131 + seed).remainder(251).to(torch.uint8)


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
        for name, t in (("sub-tensor at 4097", sub), ("second block of a segment", small_b),
                        ("first block", small_a)):
            n = t.numel()
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
        # Expandable segments: a tensor across segments is refused clearly.
        if "expandable" in mode:
            big = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
            try:
                with c.register_tensor(big) as span:
                    span.write(b"\x5a" * 4096)
                    check(int(big[:4096].eq(0x5A).sum()) == 4096,
                          f"{mode}: a 256 MiB tensor registered and written")
            except ValueError as e:
                print(f"     {e}")
                check("segments" in str(e), f"{mode}: a 256 MiB tensor across segments refused")

if __name__ == "__main__":
    main()
