# SPDX-License-Identifier: BSD-3-Clause
"""RDMA calls against a daemon with no RDMA device (the build machine):
argument checks, the errors such a daemon gives, and the packed forms.

A remote handle needs no device: the descriptor is made here by hand, in
the format PROTOCOL.md ("Descriptors") documents, and ImportRemote only
parses it. The bytes move in tests/python/test_rdma.py, in the Soft-RoCE VM.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import socket
import struct

import pytest

import rdmamem
from rdmamem import READ, WRITE, Op, errors
from rdmamem.remote import batch_call, post_call

REMOTE_LEN = 1 << 20


def descriptor(length: int = REMOTE_LEN, access: int = 3, name: bytes = b"rxe9") -> str:
    rec = struct.pack("<BBBBQQ", 1, access, 1, 1, 7, length) + bytes(range(16))
    rec += struct.pack("<BBH", 4, 0, 7471) + socket.inet_aton("10.9.0.1") + bytes(12)
    rec += bytes(16) + struct.pack("<QIBB", 0x1000, 0x42, 1, len(name)) + name
    return "rdmamem1." + base64.urlsafe_b64encode(rec).decode().rstrip("=")


def open_fds() -> list[str]:
    out = []
    for f in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{f}"))
        except FileNotFoundError:  # listdir's own
            pass
    return out


def test_import_remote_says_what_the_descriptor_says(client: rdmamem.Client) -> None:
    with client.import_remote(descriptor(access=1)) as r:
        assert (r.length, r.export, r.access) == (REMOTE_LEN, 7, frozenset({"read"}))
        assert r.devices == ("rxe9",) and r.endpoints == ("10.9.0.1:7471",)
    with pytest.raises(errors.VarlinkInvalidParameterError):
        client.import_remote(descriptor()[:-3])
    with pytest.raises(TypeError):
        client.import_remote(None)  # type: ignore[arg-type]
    # Released: the daemon no longer knows the id.
    with pytest.raises(errors.NoSuchRemoteError):
        client.call("io.rdmamemd.ReleaseRemote", {"remote": str(r.id)})


def test_no_device_errors(client: rdmamem.Client) -> None:
    region = client.alloc(4096)
    with pytest.raises(rdmamem.RegistrationError) as ei:
        region.register_on()
    assert ei.value.errno == errno.ENODEV and not ei.value.registrations
    with pytest.raises(rdmamem.RegistrationError) as ei:
        region.register_on("rxe0")
    assert ei.value.errno == errno.ENODEV and set(ei.value.failed) == {"rxe0"}
    with pytest.raises(errors.NotRegisteredError):
        region.export()
    with client.import_remote(descriptor()) as r:
        with pytest.raises(errors.NotRegisteredError) as nr:
            client.transfer(WRITE, region, r, (0, 0, 4096))
        assert nr.value.errno == errno.ENOLINK
    region.close()


def test_out_of_range_names_the_op(client: rdmamem.Client) -> None:
    region = client.alloc(1 << 16)
    with client.import_remote(descriptor()) as r:
        # 1,500 ranges: they go in a sealed memfd (rdmamem_ranges_pack()).
        ranges = [(8 * i, 8 * i, 8) for i in range(1500)]
        ranges[1234] = (0, REMOTE_LEN - 4, 8)
        call = batch_call(READ, region, r, ranges)
        assert call.params["batch"]["packed_fd"] == 0 and len(call.fds) == 1
        call.close()
        with pytest.raises(errors.OutOfRangeError) as ei:
            client.transfer(READ, region, r, ranges)
        assert ei.value.index == 1234 and ei.value.errno == errno.ERANGE
        # A NumPy array of triples is taken as it is.
        np = pytest.importorskip("numpy")
        arr = np.array(ranges, dtype=np.uint64)
        with pytest.raises(errors.OutOfRangeError) as ei:
            client.transfer(READ, region, r, arr)
        assert ei.value.index == 1234
        # Listed ops: the op's index.
        with pytest.raises(errors.OutOfRangeError) as ei:
            client.transfer_ops([Op(READ, region, 0, r, 0, 8), Op(WRITE, region, 1 << 16, r, 0, 1)])
        assert ei.value.index == 1
        # A plan: its range at prepare, its entry at post.
        with pytest.raises(errors.OutOfRangeError) as ei:
            client.prepare_transfer(region, r, [(0, 0, 8), (0, REMOTE_LEN, 1)])
        assert ei.value.index == 1
        with client.prepare_transfer(region, r, [(0, 0, 8), (8, 8, 8)]) as plan:
            assert plan.n_ranges == 2
            with pytest.raises(errors.OutOfRangeError) as ei:
                plan.post(WRITE, [1, 0, 2])
            assert ei.value.index == 2
            with pytest.raises(errors.NotRegisteredError):
                plan.post(WRITE)
    region.close()


def test_argument_checks(client: rdmamem.Client) -> None:
    region = client.alloc(4096)
    with client.import_remote(descriptor()) as r:
        for bad_op in ("copy", 1, None):
            with pytest.raises(ValueError, match="op"):
                client.transfer(bad_op, region, r, (0, 0, 8))  # type: ignore[arg-type]
        for bad in ([], [(0, 0)], [(-1, 0, 8)], [(0, 1 << 64, 8)]):
            with pytest.raises(ValueError):
                client.transfer(READ, region, r, bad)
        with pytest.raises(TypeError):
            client.transfer(READ, region, r, [(0, 0, 8.0)])
        with pytest.raises(TypeError):
            client.transfer(READ, "region", r, (0, 0, 8))
        with pytest.raises(TypeError):
            client.transfer(READ, region, 0, (0, 0, 8))
        with pytest.raises(ValueError, match="notify"):
            client.transfer(WRITE, region, r, (0, 0, 8), notify=bytes(rdmamem.NOTIFY_MAX + 1))
        with pytest.raises(ValueError):
            post_call(1, READ, [])
        with pytest.raises(ValueError, match="max"):
            client.wait_notifications(0, max=0)
        # The connection is still in step after refusals made here.
        assert client.poll_notifications() == []
        # An index past 32 bits goes listed; the daemon names it.
        assert post_call(1, READ, [0, 1 << 40]).params["indices"] == ["0", str(1 << 40)]
    region.close()


def test_async_forms_raise_the_named_error(daemon: object) -> None:
    async def main() -> None:
        async with rdmamem.AsyncClient(daemon.socket) as c:  # type: ignore[attr-defined]
            with rdmamem.Client(daemon.socket) as owner:  # type: ignore[attr-defined]
                region = owner.alloc(1 << 16)
                async with await c.import_remote(descriptor()) as r:
                    ranges = [(8 * i, 8 * i, 8) for i in range(1100)] + [(0, REMOTE_LEN, 8)]
                    with pytest.raises(errors.OutOfRangeError) as ei:
                        await c.transfer(READ, region, r, ranges)
                    assert ei.value.index == 1100
                    with pytest.raises(errors.OutOfRangeError) as ei:
                        async for _ in c.transfer_progress(READ, region, r, ranges):
                            pass
                    assert ei.value.index == 1100
                    async with await c.prepare_transfer(region, r, ranges[:3]) as plan:
                        with pytest.raises(errors.OutOfRangeError) as ei:
                            await plan.post(WRITE, [3])
                        assert ei.value.index == 0
                region.close()
            # The memfds went with their calls: none is left open here.
            assert "/memfd:rdmamem-ranges (deleted)" not in open_fds()

    asyncio.run(asyncio.wait_for(main(), 30))
