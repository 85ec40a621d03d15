# SPDX-License-Identifier: BSD-3-Clause
"""AsyncClient: calls pipelined on one connection, driven by the asyncio loop."""

from __future__ import annotations

import asyncio
import errno

import pytest

import rdmamem
from rdmamem import errors


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_pipelined_calls_and_errors(daemon: object) -> None:
    async def main() -> None:
        async with rdmamem.AsyncClient(daemon.socket) as c:  # type: ignore[attr-defined]
            replies = await asyncio.gather(*(c.call("io.rdmamemd.GetStatus") for _ in range(50)))
            assert len({r["pid"] for r in replies}) == 1
            with pytest.raises(errors.errors_by_name["io.rdmamemd.NoSuchRegion"]) as ei:
                await c.call("io.rdmamemd.Unregister", {"region": 424242})
            assert ei.value.errno == errno.ENOENT and "424242" in ei.value.message
            # The connection goes on after an error.
            assert "pid" in await c.call("io.rdmamemd.GetStatus")

    run(main())


def test_a_waiting_lock_does_not_block_the_loop(client: rdmamem.Client) -> None:
    region = client.alloc(4096)
    # The region is the client's; share it with our own uid is implicit: the
    # async connection is the same uid, so it may lock it.
    held = region.lock("exclusive")

    async def main() -> None:
        async with rdmamem.AsyncClient(client.socket_path) as c:
            ticks = 0
            lock = asyncio.ensure_future(
                c.call("io.rdmamemd.Lock", {"region": region.id, "mode": "shared"}))
            for _ in range(20):  # the loop runs while the Lock waits in the daemon
                await asyncio.sleep(0.01)
                ticks += 1
            assert not lock.done() and ticks == 20
            held.release()
            reply = await lock
            assert int(reply["lease"]) > 0

    run(main())
    region.close()


def test_cancel_and_close(daemon: object, client: rdmamem.Client) -> None:
    region = client.alloc(4096)
    held = region.lock("exclusive")

    async def main() -> None:
        c = rdmamem.AsyncClient(daemon.socket)  # type: ignore[attr-defined]
        waiting = asyncio.ensure_future(
            c.call("io.rdmamemd.Lock", {"region": region.id, "mode": "shared"}))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pending = asyncio.ensure_future(c.call("io.rdmamemd.GetStatus"))
        await asyncio.sleep(0.05)
        c.close()  # the GetStatus waits behind the Lock: it fails now
        with pytest.raises(rdmamem.ConnectionLostError):
            await pending

    run(main())
    held.release()
    region.close()


def test_notification_stream_waits_and_cancels(daemon: object) -> None:
    async def main() -> None:
        async with rdmamem.AsyncClient(daemon.socket) as c:  # type: ignore[attr-defined]
            it = c.notifications().__aiter__()
            # No exports, no peers: nothing comes, and the loop is not blocked
            # while the stream waits.
            first = asyncio.ensure_future(it.__anext__())
            await asyncio.sleep(0.2)
            assert not first.done()
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first

    run(main())
