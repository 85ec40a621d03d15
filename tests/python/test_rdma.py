# SPDX-License-Identifier: BSD-3-Clause
"""Transfers on real verbs, from Python: run inside the Soft-RoCE VM by
``make vmtest`` (tests/vm/README.md), skipped elsewhere.

One daemon listens for rdmacm on rxe0's address. An owner connection holds
region A, registered on rxe0 and exported; a peer connection holds region
B, imports A's descriptor and has the daemon move bytes between B and A
over its own link to its own endpoint (rxe loopback: the code path between
two hosts, on one device), as tests/e2e/check_transfer_vm.c does in C. The
owner sees A through its mapping, so every check is byte-exact.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Iterator

import pytest

import rdmamem
from rdmamem import READ, WRITE, Op, errors
from rdmamem.remote import batch_call

from conftest import Daemon, start_daemon

DEV = os.environ.get("RDMAMEM_RXE_DEV")
ADDR = os.environ.get("RDMAMEM_RXE_ADDR")
SIZE = 1 << 20

pytestmark = pytest.mark.skipif(
    not (DEV and ADDR), reason="needs an RDMA device: runs in the Soft-RoCE VM (make vmtest)")


@pytest.fixture(scope="module")
def rdma_daemon() -> Iterator[Daemon]:
    # Links go when idle for a second, so that the last check sees them gone.
    with start_daemon("--rdmacm-listen", f"{ADDR}:7471", "--link-idle-sec=1") as d:
        yield d


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


class Pair:
    """Region A of the owner (exported), region B of the peer, A imported."""

    def __init__(self, d: Daemon) -> None:
        self.owner = rdmamem.Client(d.socket, timeout=120)
        self.peer = rdmamem.Client(d.socket, timeout=120)
        self.a = self.owner.alloc(SIZE)
        self.b = self.peer.alloc(SIZE)
        regs = self.a.register_on(DEV)
        assert regs[DEV].rkey and regs[DEV].length == SIZE
        self.b.register_on([DEV])
        self.exp = self.a.export()
        self.remote = self.peer.import_remote(self.exp.descriptor)
        assert self.remote.length == SIZE and self.remote.devices == (DEV,)
        self.a.memoryview()[:] = pattern(SIZE, 1)
        self.b.memoryview()[:] = pattern(SIZE, 2)

    def close(self) -> None:
        self.peer.close()
        self.owner.close()


@pytest.fixture
def pair(rdma_daemon: Daemon) -> Iterator[Pair]:
    p = Pair(rdma_daemon)
    yield p
    p.close()


def test_read_and_write_byte_exact(pair: Pair) -> None:
    a, b = pair.a.memoryview(), pair.b.memoryview()
    # Listed ops, odd offsets and lengths, both directions in one call.
    st = pair.peer.transfer_ops([
        Op(WRITE, pair.b, 1, pair.remote, 4097, 3001),
        Op(READ, pair.b, 65537, pair.remote, 77, 1),
        Op(WRITE, pair.b, 200003, pair.remote, 300007, 65539),
    ])
    assert (st.ops, st.ops_done, st.bytes_done) == (3, 3, 3001 + 1 + 65539)
    assert a[4097:4097 + 3001] == b[1:1 + 3001]
    assert b[65537] == a[77]
    assert a[300007:300007 + 65539] == b[200003:200003 + 65539]
    assert a[4096] == pattern(SIZE, 1)[4096]  # nothing past the ranges

    # A packed batch of 1,500 ranges: they go in a sealed memfd.
    ranges = [(600 + 311 * i, 100 + 257 * i, 97) for i in range(1500)]
    call = batch_call(WRITE, pair.b, pair.remote, ranges)
    assert "packed_fd" in call.params["batch"]
    call.close()
    st = pair.peer.transfer(WRITE, pair.b, pair.remote, ranges)
    assert st.ops == 1500 and st.bytes_done == 1500 * 97
    for lo, ro, n in ranges:
        assert a[ro:ro + n] == b[lo:lo + n]
    # And back, READ, into other places of B.
    back = [(700000 + 97 * i, ro, n) for i, (_, ro, n) in enumerate(ranges[:1200])]
    assert pair.peer.transfer(READ, pair.b, pair.remote, back).bytes_done == 1200 * 97
    for lo, ro, n in back:
        assert b[lo:lo + n] == a[ro:ro + n]


def test_plan_post_by_index(pair: Pair) -> None:
    a, b = pair.a.memoryview(), pair.b.memoryview()
    blocks = [(4096 * i, 4096 * (255 - i), 4096) for i in range(64)]
    with pair.peer.prepare_transfer(pair.b, pair.remote, blocks) as plan:
        assert plan.n_ranges == 64
        st = plan.post(READ, [3, 60, 7])
        assert st.bytes_done == 3 * 4096
        for i in range(64):
            lo, ro, n = blocks[i]
            same = b[lo:lo + n] == a[ro:ro + n]
            assert same == (i in (3, 60, 7)), i
        assert plan.post(WRITE).bytes_done == 64 * 4096
        with pytest.raises(errors.OutOfRangeError) as ei:
            plan.post(READ, [0, 64])
        assert ei.value.index == 1


def test_out_of_range_op_is_named(pair: Pair) -> None:
    with pytest.raises(errors.OutOfRangeError) as ei:
        pair.peer.transfer_ops([
            Op(READ, pair.b, 0, pair.remote, 0, 16),
            Op(READ, pair.b, 16, pair.remote, 16, 16),
            Op(WRITE, pair.b, 0, pair.remote, SIZE - 8, 16),
        ])
    assert ei.value.index == 2 and "op 2" in ei.value.message
    # Nothing moved: the checks come before anything is posted.
    assert pair.b.memoryview()[:32] == pattern(SIZE, 2)[:32]


def test_notify_blocking(pair: Pair) -> None:
    assert pair.owner.poll_notifications() == []
    pair.peer.transfer(WRITE, pair.b, pair.remote, [(10, 20, 30)], notify=b"blocking \x00 form")
    got = pair.owner.wait_notifications(timeout=30)
    assert [(n.export, n.data) for n in got] == [(pair.exp.id, b"blocking \x00 form")]
    assert got[0].sender_uid == os.getuid()
    assert pair.a.memoryview()[20:50] == pair.b.memoryview()[10:40]


def test_notify_async_iterator_and_progress(rdma_daemon: Daemon, pair: Pair) -> None:
    async def main() -> None:
        async with rdmamem.AsyncClient(rdma_daemon.socket, timeout=120) as owner, \
                rdmamem.AsyncClient(rdma_daemon.socket, timeout=120) as peer:
            # The export is this connection's, so its notifications come here.
            exp = await owner.call("io.rdmamemd.ExportRegion", {"region": str(pair.a.id)})
            async with await peer.import_remote(exp["descriptor"]) as remote:
                stream = owner.notifications().__aiter__()
                first = asyncio.ensure_future(stream.__anext__())
                await asyncio.sleep(0.1)
                assert not first.done()
                st = await peer.transfer(WRITE, pair.b, remote, (100, 200, 300), notify=b"one")
                assert st.bytes_done == 300
                n = await first
                assert (n.export, n.data) == (int(exp["id"]), b"one")
                assert pair.a.memoryview()[200:500] == pair.b.memoryview()[100:400]
                # The progress form: a final status, after any reports.
                seen = [s async for s in peer.transfer_progress(
                    WRITE, pair.b, remote, [(4096 * i, 4096 * i, 4096) for i in range(200)],
                    notify=b"two")]
                assert seen[-1].done and seen[-1].ops_done == 200
                assert all(not s.done for s in seen[:-1])
                n = await stream.__anext__()
                assert n.data == b"two"
                assert pair.a.memoryview()[:819200] == pair.b.memoryview()[:819200]
                await stream.aclose()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_revoke_fails_the_next_transfer(pair: Pair) -> None:
    pair.peer.transfer(READ, pair.b, pair.remote, (0, 0, 4096))
    pair.exp.revoke()
    with pytest.raises(errors.TransferError) as ei:
        pair.peer.transfer(WRITE, pair.b, pair.remote, (0, 0, 4096))
    # The link is refused before any op is posted: the error names no op.
    assert isinstance(ei.value, errors.PeerUnreachableError), ei.value
    assert ei.value.index in (None, 0)
    assert "access token" in ei.value.message


def test_nothing_left_behind(rdma_daemon: Daemon) -> None:
    p = Pair(rdma_daemon)
    p.peer.transfer(WRITE, p.b, p.remote, (0, 0, SIZE))
    p.close()
    with rdmamem.Client(rdma_daemon.socket) as c:
        deadline = time.monotonic() + 20
        while True:
            status, stats = c.status(), c.call("io.rdmamemd.GetStats")
            left = (status["regions"], int(status["pinned_bytes"]), status["rdma_connections"],
                    int(stats["transfers_running"]))
            if left == (0, 0, 0, 0) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert left == (0, 0, 0, 0), (status, stats)
        assert status["clients"] == 1
