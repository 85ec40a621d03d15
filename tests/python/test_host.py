# SPDX-License-Identifier: BSD-3-Clause
"""Host regions: zero-copy views, reads, writes, copies and leases through a real daemon."""

from __future__ import annotations

import errno

import numpy as np
import pytest
import torch

import rdmamem
from rdmamem import errors


def test_views_share_the_daemons_bytes(client: rdmamem.Client) -> None:
    with client.alloc(1 << 20) as r:
        # Written through NumPy here, read by the daemon: the same memory.
        a = r.numpy("uint32")
        a[:] = np.arange(a.size, dtype=np.uint32)
        assert r.read(4 * 1000, 8) == np.array([1000, 1001], dtype=np.uint32).tobytes()
        # Written by the daemon, seen by torch and memoryview with no copy.
        r.write(b"\xff" * 16, 64)
        t = r.torch(torch.uint8, (1 << 20,))
        assert t[64:80].tolist() == [255] * 16
        assert r.memoryview()[64:66].tobytes() == b"\xff\xff"
        assert t.data_ptr() == a.__array_interface__["data"][0] == r.address
        del a, t


def test_readinto_and_offsets(client: rdmamem.Client) -> None:
    with client.alloc(4096) as r:
        r.write(bytes(range(256)) * 16)
        buf = bytearray(100)
        assert r.readinto(buf, 3) == 100
        assert bytes(buf) == bytes(range(3, 103))
        with pytest.raises(ValueError):
            r.read(4000, 200)


def test_copy_inside_the_daemon(client: rdmamem.Client) -> None:
    with client.alloc(1 << 16) as a, client.alloc(1 << 16) as b:
        a.numpy()[:] = 7
        a.copy_to(b, offset=100, dst_offset=1, length=1000)
        got = b.numpy()
        assert got[0] == 0 and got[1:1001].min() == 7 and got[1001] == 0


def test_lease_context_manager(client: rdmamem.Client, daemon: object) -> None:
    with client.alloc(4096) as r:
        with r.lock("exclusive") as lease:
            r.write(b"abc", 0, lease=lease)
            # Another connection cannot take the lock while the lease is held.
            with rdmamem.Client(client.socket_path) as other:
                with pytest.raises(errors.errors_by_name["io.rdmamemd.LockTimeout"]) as ei:
                    other.call("io.rdmamemd.Lock", {"region": r.id, "mode": "shared",
                                                    "timeout_ms": 0})
                assert ei.value.errno == errno.ETIMEDOUT
        # Released on exit: the lease id is gone.
        with pytest.raises(errors.errors_by_name["io.rdmamemd.NoSuchLease"]):
            client.call("io.rdmamemd.Unlock", {"lease": lease.id})
        with r.lock("shared", timeout=1):
            assert r.read(0, 3) == b"abc"


def test_unregister_then_calls_fail(client: rdmamem.Client) -> None:
    r = client.alloc(4096)
    v = r.numpy()
    r.close()
    with pytest.raises(errors.errors_by_name["io.rdmamemd.NoSuchRegion"]):
        client.call("io.rdmamemd.Unregister", {"region": r.id})
    v[0] = 1  # the mapping outlives the region while a view holds it
    r.close()  # twice is fine


def test_share_memory_tensor_points_to_the_pool(client: rdmamem.Client) -> None:
    t = torch.zeros(1024).share_memory_()
    with pytest.raises(ValueError, match=r"pool\.tensor"):
        client.register_tensor(t)
    with pytest.raises(ValueError, match=r"pool\.tensor"):
        client.register_tensor(torch.zeros(8))


def test_region_ids_differ_and_status_counts(client: rdmamem.Client) -> None:
    before = client.status()["regions"]
    with client.alloc(4096) as a, client.alloc(4096) as b:
        assert a.id != b.id
        assert client.status()["regions"] == before + 2
    assert client.status()["regions"] == before
