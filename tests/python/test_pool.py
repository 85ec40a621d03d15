# SPDX-License-Identifier: BSD-3-Clause
"""The pool: tensors and arrays without a call per tensor, and the allocator."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import rdmamem


def _regions(c: rdmamem.Client) -> int:
    return int(c.status()["regions"])


def test_tensors_make_no_call(client: rdmamem.Client) -> None:
    with client.pool(1 << 20) as pool:
        before = _regions(client)
        ts = [pool.tensor((16, 16), torch.float32) for _ in range(50)]
        assert _regions(client) == before  # no region per tensor
        addrs = sorted(t.data_ptr() for t in ts)
        assert all(a % pool.alignment == 0 for a in addrs)
        assert all(b - a >= 16 * 16 * 4 for a, b in zip(addrs, addrs[1:]))
        del ts


def test_tensor_bytes_reach_the_daemon(client: rdmamem.Client) -> None:
    with client.pool(1 << 20) as pool:
        pool.tensor(100, torch.uint8)  # freed at once; its block comes back
        t = pool.tensor((3, 5), torch.float64)
        t.copy_(torch.arange(15, dtype=torch.float64).view(3, 5))
        span = client.register_tensor(t)
        assert span.region is pool.region and not span.owns
        assert span.offset == pool.offset_of(t) and span.nbytes == 15 * 8
        assert np.frombuffer(span.read(), np.float64).tolist() == list(range(15))
        # ... and back: a daemon-side copy between two pool tensors.
        u = pool.tensor((3, 5), torch.float64)
        span.copy_to(client.register_tensor(u))
        assert torch.equal(u, t)
        a = pool.array((4,), "int32")
        pool.span(a).write(np.array([9, 8, 7, 6], np.int32).tobytes())
        assert a.tolist() == [9, 8, 7, 6]


def test_closed_pool_is_no_longer_the_clients(client: rdmamem.Client) -> None:
    """A closed pool's tensor is memory of no region: register_tensor says so
    rather than hand out a span of the unregistered region; a pool made later
    (here or at the same addresses, once the old mapping is gone) gives its
    own region."""
    old = client.pool(1 << 20)
    t = old.tensor(256, torch.float32)
    old.close()
    with pytest.raises(ValueError):
        client.register_tensor(t)
    del t
    gc.collect()
    with client.pool(1 << 20) as new:
        u = new.tensor(256, torch.float32)
        u.fill_(3.0)
        span = client.register_tensor(u)
        assert span.region is new.region
        assert np.frombuffer(span.read(), np.float32).tolist() == [3.0] * 256


def test_free_returns_and_merges(client: rdmamem.Client) -> None:
    with client.pool(64 * 1024, alignment=1024) as pool:
        total = pool.largest_free
        assert total == 64 * 1024
        ts = [pool.tensor(1000, torch.uint8) for _ in range(64)]  # 64 blocks of 1 KiB
        with pytest.raises(rdmamem.PoolExhaustedError):
            pool.tensor(1, torch.uint8)
        # Free every other block: 32 KiB free, but no 2 KiB hole.
        for i in range(0, 64, 2):
            ts[i] = None
        gc.collect()
        assert pool.largest_free == 1024
        with pytest.raises(rdmamem.PoolExhaustedError):
            pool.tensor(2048, torch.uint8)
        # A view keeps its block: dropping the tensor alone frees nothing.
        view = ts[1][10:20]
        ts[1] = None
        gc.collect()
        assert pool.largest_free == 1024
        del view
        ts = None
        gc.collect()
        assert pool.largest_free == total  # merged back into one extent


def test_numpy_arrays(client: rdmamem.Client) -> None:
    with client.pool(1 << 16) as pool:
        a = pool.array((8, 8), "float32")
        a[:] = 1.5
        b = pool.array((8, 8), "float32")
        assert pool.offset_of(b) - pool.offset_of(a) == 256
        assert np.frombuffer(pool.span(a).read(), np.float32).sum() == 96.0
        assert pool.offset_of(np.zeros(4)) is None


def test_alignment_must_be_a_power_of_two(client: rdmamem.Client) -> None:
    with pytest.raises(ValueError):
        client.pool(4096, alignment=96)
