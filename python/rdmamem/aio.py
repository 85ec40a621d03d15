# SPDX-License-Identifier: BSD-3-Clause
"""asyncio: :class:`AsyncClient`, on the C library's asynchronous API.

No thread per call: calls are queued on the connection (``rdmamem_call_async``)
and pipelined; the event loop watches the connection's fd (``add_reader``, and
``add_writer`` while calls wait to be written) and the nearest deadline, and
runs ``rdmamem_client_process()``, whose callbacks resolve the futures. A Lock
that waits in the daemon therefore waits in a coroutine, not in the loop.

The daemon answers one connection's calls one at a time, in order: a call
queued behind a waiting Lock (or a notification stream) is answered after it.
Open one AsyncClient per thing that must not wait for another. An AsyncClient
belongs to the loop it was made in.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import itertools
import json
import select
from ctypes import byref, c_int, c_void_p
from typing import Any, AsyncIterator, Optional, Sequence

from . import _lib
from . import remote as remote_mod
from .client import connect
from .errors import RdmamemError, from_failure
from .remote import AsyncPlan, Notification, Op, Remote, TransferStatus

# Calls in flight, by the key their callback gets as userdata: ctypes passes
# no Python object through C, and the callback must find its future.
_pending: dict[int, "_Call"] = {}
_keys = itertools.count(1)


class _Call:
    def __init__(self, owner: "AsyncClient", more: bool) -> None:
        self.owner = owner
        self.more = more
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.handle: Optional[int] = None
        self.done = False


def _reply_error(r: _lib.Reply) -> RdmamemError:
    params = json.loads(r.parameters.decode()) if r.parameters else None
    return from_failure(
        -r.error,
        r.error_name.decode() if r.error_name else None,
        r.error_message.decode() if r.error_message else None,
        params,
    )


@_lib.REPLY_FN
def _on_reply(_client: int, _call: int, reply: Any, userdata: Optional[int]) -> None:
    # Runs inside rdmamem_client_process(), on the loop's thread; an exception
    # here would be printed and lost, so every outcome goes to the queue.
    call = _pending.get(userdata or 0)
    if call is None:
        return
    try:
        r = reply.contents
        last = not (r.flags & _lib.REPLY_CONTINUES)
        if r.error < 0:
            item: Any = _reply_error(r)
        else:
            item = json.loads(r.parameters.decode()) if r.parameters else {}
    except Exception as e:  # a malformed reply: fail the call
        item, last = e, True
    if last:
        call.done = True
        del _pending[userdata or 0]
    call.queue.put_nowait((item, last))


class AsyncClient:
    """One connection, driven by the running asyncio loop: ``async with
    AsyncClient(socket) as c: await c.call("io.rdmamemd.GetStatus")``.

    socket and timeout as for :class:`~rdmamem.Client` (the connect itself is
    a blocking local connect(), which a Unix socket answers at once)."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self._lib = _lib.lib()
        self._loop = asyncio.get_running_loop()
        self._h: Optional[int] = connect(socket)
        self._fd = self._lib.rdmamem_client_get_fd(self._h)
        self._writing = False
        self._reading = False
        self._timer: Optional[asyncio.TimerHandle] = None
        if timeout is not None:
            self._lib.rdmamem_client_set_timeout(self._h, int(timeout * 1000))

    # -- the loop's side ----------------------------------------------------

    def _drive(self) -> None:
        """Makes progress, then watches what the library now waits for."""
        if not self._h:
            return
        self._lib.rdmamem_client_process(self._h)
        events = self._lib.rdmamem_client_get_events(self._h)
        want_read = bool(events & select.POLLIN)
        want_write = bool(events & select.POLLOUT)
        if want_read != self._reading:
            if want_read:
                self._loop.add_reader(self._fd, self._drive)
            else:
                self._loop.remove_reader(self._fd)
            self._reading = want_read
        if want_write != self._writing:
            if want_write:
                self._loop.add_writer(self._fd, self._drive)
            else:
                self._loop.remove_writer(self._fd)
            self._writing = want_write
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        usec = ctypes.c_uint64()
        if events and self._lib.rdmamem_client_get_timeout(self._h, byref(usec)) >= 0 \
                and usec.value != 2**64 - 1:
            self._timer = self._loop.call_at(usec.value / 1e6, self._drive)

    def _start(self, method: str, params: Optional[dict[str, Any]], fds: Sequence[int],
               more: bool) -> tuple[int, _Call]:
        if not self._h:
            raise ValueError("the client is closed")
        call = _Call(self, more)
        key = next(_keys)
        _pending[key] = call
        fd_arr = (c_int * len(fds))(*fds) if fds else None
        text = json.dumps(params).encode() if params is not None else None
        out = c_void_p()
        r = self._lib.rdmamem_call_async(
            self._h, method.encode(), text, fd_arr, len(fds), _lib.CALL_MORE if more else 0,
            _on_reply, c_void_p(key), byref(out))
        if r < 0:
            del _pending[key]
            msg = self._lib.rdmamem_client_error_message(self._h)
            raise from_failure(-r, None, msg.decode() if msg else None)
        call.handle = out.value
        self._drive()
        return key, call

    def _cancel(self, key: int, call: _Call) -> None:
        if not call.done and _pending.pop(key, None) is not None and call.handle:
            self._lib.rdmamem_call_cancel(call.handle)
            call.done = True

    # -- calls --------------------------------------------------------------

    async def call(self, method: str, parameters: Optional[dict[str, Any]] = None,
                   fds: Sequence[int] = ()) -> dict[str, Any]:
        """Calls a Varlink method; returns the reply's parameters or raises the
        error's class. Cancelling the awaiting task cancels the call (one sent
        already runs to its end in the daemon; its reply is dropped)."""
        key, call = self._start(method, parameters, fds, False)
        try:
            item, _ = await call.queue.get()
        except asyncio.CancelledError:
            self._cancel(key, call)
            raise
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    async def stream(self, method: str, parameters: Optional[dict[str, Any]] = None
                     ) -> AsyncIterator[dict[str, Any]]:
        """Calls a method with "more" and yields each reply's parameters."""
        key, call = self._start(method, parameters, (), True)
        try:
            while True:
                item, last = await call.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if last:
                    return
        finally:
            self._cancel(key, call)

    async def notifications(self, batch: int = 256) -> AsyncIterator[Notification]:
        """Each :class:`~rdmamem.Notification` peers attach to their
        transfers into this connection's exports, as it arrives
        (WaitNotifications as a stream: what is queued, then each arrival).
        The connection serves no other call meanwhile: export from it, and
        make other calls on another. Leaving the ``async for`` (or
        cancelling the task) ends the stream."""
        async for reply in self.stream("io.rdmamemd.WaitNotifications", {"max": batch}):
            for n in reply.get("notifications", []):
                yield Notification.from_reply(n)

    # -- RDMA -----------------------------------------------------------------

    async def import_remote(self, descriptor: str) -> Remote:
        """As :meth:`Client.import_remote`; release with ``await
        remote.arelease()`` or ``async with``."""
        if not isinstance(descriptor, str) or not descriptor:
            raise TypeError("descriptor: the string ExportRegion gave")
        return Remote(self, await self.call("io.rdmamemd.ImportRemote",
                                            {"descriptor": descriptor}))

    async def _transfer(self, call: remote_mod.Call) -> TransferStatus:
        try:
            reply = await self.call(call.method, call.params, call.fds)
        finally:
            call.close()  # the library holds its own copies of the fds
        return TransferStatus.from_reply(reply)

    async def transfer(self, op: str, local: Any, remote: Any, ranges: remote_mod.RangeLike, *,
                       notify: Any = None, lease: Any = None) -> TransferStatus:
        """As :meth:`Client.transfer` (the client's timeout applies to each
        reply); local is a region of any connection of this uid, remote a
        handle this AsyncClient imported. Cancelling the awaiting task stops
        waiting: the daemon finishes or flushes what it posted."""
        return await self._transfer(
            remote_mod.batch_call(op, local, remote, ranges, notify=notify, lease=lease))

    async def transfer_ops(self, ops: Sequence[Op], *, notify: Any = None) -> TransferStatus:
        """As :meth:`Client.transfer_ops`."""
        return await self._transfer(remote_mod.ops_call(ops, notify=notify))

    async def transfer_progress(self, op: str, local: Any, remote: Any,
                                ranges: remote_mod.RangeLike, *, notify: Any = None,
                                lease: Any = None) -> AsyncIterator[TransferStatus]:
        """:meth:`transfer` with ``more``: yields a
        :class:`~rdmamem.TransferStatus` for each progress report (``done``
        False; at most every 100 ms or 4,096 ops), then the final one
        (``done`` True). A failure raises its named error from the
        iteration."""
        call = remote_mod.batch_call(op, local, remote, ranges, notify=notify, lease=lease)
        try:
            key, pending = self._start(call.method, call.params, call.fds, True)
        finally:
            call.close()
        try:
            while True:
                item, last = await pending.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield TransferStatus.from_reply(item, done=last)
                if last:
                    return
        finally:
            self._cancel(key, pending)

    async def prepare_transfer(self, local: Any, remote: Any,
                               ranges: remote_mod.RangeLike) -> AsyncPlan:
        """As :meth:`Client.prepare_transfer`: an :class:`~rdmamem.AsyncPlan`."""
        call = remote_mod.prepare_call(local, remote, ranges)
        try:
            reply = await self.call(call.method, call.params, call.fds)
        finally:
            call.close()
        return AsyncPlan(self, int(reply["plan"]), call.n)

    # -- life -----------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection; calls still pending fail with ConnectionLostError."""
        if not self._h:
            return
        if self._reading:
            self._loop.remove_reader(self._fd)
        if self._writing:
            self._loop.remove_writer(self._fd)
        if self._timer is not None:
            self._timer.cancel()
        h, self._h = self._h, None
        self._lib.rdmamem_client_close(h)
        # rdmamem_client_close() runs no callback: this connection's calls
        # fail here.
        for key in [k for k, c in _pending.items() if c.owner is self]:
            call = _pending.pop(key)
            call.done = True
            call.queue.put_nowait(
                (from_failure(errno.ENOTCONN, None, "the client was closed"), True))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
