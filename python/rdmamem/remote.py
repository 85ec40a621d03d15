# SPDX-License-Identifier: BSD-3-Clause
"""RDMA: registrations on devices, descriptors, remote handles, transfers,
plans and notifications.

The daemon moves the bytes: a transfer asks this host's rdmamemd to post
one-sided RDMA READs (remote to local) and WRITEs (local to remote) between
a local region and a region another daemon exported, on the daemon's own
queue pairs. The owner of the remote region takes no part and its lock is
not taken; it learns that data arrived from the notification a writer
attaches (which arrives only after that transfer's data is in place).

    with rdmamem.Client() as owner, rdmamem.Client() as peer:
        a = owner.alloc(1 << 20); a.register_on()
        with a.export() as exp:                  # hand exp.descriptor to the peer
            b = peer.alloc(1 << 20); b.register_on()
            with peer.import_remote(exp.descriptor) as remote:
                peer.transfer(WRITE, b, remote, (0, 0, 4096), notify=b"done")
            print(owner.wait_notifications(timeout=5))

Everything here belongs to the connection that made it (an export's token,
a remote handle, a plan) and ends with it. The C library builds what goes on
the wire: ranges are packed by ``rdmamem_ranges_pack()`` (text below 1,024,
a sealed memfd from 1,024 on, as ``rdmamem_transfer_ranges()`` sends them),
plan indices by ``rdmamem_indices_pack()``.
"""

from __future__ import annotations

import base64
import errno
import ctypes
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Optional, Sequence, Union

from . import _lib
from .errors import RdmamemError
from .region import Region, lease_id

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

READ = "read"  #: remote to local
WRITE = "write"  #: local to remote
NOTIFY_MAX = _lib.NOTIFY_MAX  #: bytes a transfer's notification may carry

RangeLike = Union[tuple[int, int, int], Sequence[tuple[int, int, int]], Any]


class Op(NamedTuple):
    """One op of :meth:`Client.transfer_ops`: length bytes between
    ``local`` at ``local_offset`` and ``remote`` at ``remote_offset``."""

    op: str
    local: Union[Region, int]
    local_offset: int
    remote: Union["Remote", int]
    remote_offset: int
    length: int
    lease: Any = None


@dataclass(frozen=True)
class Registration:
    """A region's registration on one RDMA device: what a verbs program
    (or a peer given addr and rkey) needs."""

    device: str
    lkey: int
    rkey: int
    addr: int  #: where peers address the region: the MR's iova
    length: int
    access: tuple[str, ...] = ()
    via: Optional[str] = None  #: "host-memory", "dma-buf" or "peer-memory"


class RegistrationError(RdmamemError):
    """Registration failed on some of the devices asked for. ``failed``
    maps each such device to the daemon's reason, ``registrations`` holds
    those in force. A failure is recorded by the daemon and answered again
    until root's RetryRegistration."""

    def __init__(self, failed: dict[str, tuple[int, str]],
                 registrations: dict[str, Registration]) -> None:
        if failed:
            err = next(iter(failed.values()))[0]
            what = "; ".join(f"{d}: {why}" for d, (_, why) in failed.items())
            msg = f"registration failed on {what}"
        else:
            err, msg = errno.ENODEV, "the daemon has no RDMA device open"
        super().__init__(err, msg)
        self.failed = failed
        self.registrations = registrations


@dataclass(frozen=True)
class TransferStatus:
    """A transfer's counts: ops and bytes in the call, ops and bytes done
    so far. ``done`` is False for a progress report, True for the end."""

    ops: int
    bytes: int
    ops_done: int
    bytes_done: int
    done: bool = True

    @classmethod
    def from_reply(cls, p: dict[str, Any], done: bool = True) -> "TransferStatus":
        """The counts of a Transfer reply's parameters (done: the last one)."""
        return cls(int(p.get("ops", 0)), int(p.get("bytes", 0)), int(p.get("ops_done", 0)),
                   int(p.get("bytes_done", 0)), done)


@dataclass(frozen=True)
class Notification:
    """Bytes a peer attached to a transfer into one of this connection's
    exports; it arrived after that transfer's data was in place."""

    export: int  #: the export's id (:attr:`Export.id`)
    sender_uid: int  #: the sender's uid on its host, as its daemon states it
    data: bytes
    received_usec: int  #: CLOCK_REALTIME when this daemon received it

    @classmethod
    def from_reply(cls, n: dict[str, Any]) -> "Notification":
        """One entry of WaitNotifications' "notifications"."""
        return cls(int(n["export"]), int(n["sender_uid"]), base64.b64decode(n.get("data", "")),
                   int(n["received_usec"]))


# -- registrations and exports ------------------------------------------------


def _devices_param(devices: Optional[Iterable[str]]) -> Any:
    if devices is None:
        return "all"
    if isinstance(devices, str):
        return [devices]
    names = list(devices)
    if not names or not all(isinstance(d, str) and d for d in names):
        raise ValueError("devices: None (all), a device name, or a list of names")
    return names


def register_on(region: Region, devices: Optional[Iterable[str]] = None
                ) -> dict[str, Registration]:
    """Registers region on RDMA devices (None: every device the daemon has
    open) and returns each device's registration, by device name. A device
    on which it failed, or no device at all, raises
    :class:`RegistrationError`."""
    reply = region.client.call("io.rdmamemd.RegisterOn",
                               {"region": str(region.id), "devices": _devices_param(devices)})
    regs: dict[str, Registration] = {}
    failed: dict[str, tuple[int, str]] = {}
    for r in reply.get("registrations", []):
        if r.get("state") == "registered":
            regs[r["device"]] = Registration(
                r["device"], int(r["lkey"]), int(r["rkey"]), int(r["addr"]), int(r["length"]),
                tuple(r.get("access", ())), r.get("via"))
        else:
            failed[r["device"]] = (int(r.get("errno", 0)) or 5, r.get("error", r.get("state", "")))
    if failed or not regs:
        raise RegistrationError(failed, regs)
    return regs


class Export:
    """A descriptor of a region for peers on other hosts; a context manager
    that revokes it.

    ``descriptor`` (a string of at most 2,255 characters) is a capability:
    whoever holds it may read (and write, if the registration allows) the
    region until :meth:`revoke`, the region's unregistration or the close of
    the connection that exported it. ``token`` is its access token, ``id``
    the export's id (which notifications name)."""

    def __init__(self, region: Region, descriptor: str, token: str, export_id: int) -> None:
        self.region = region
        self.descriptor = descriptor
        self.token = token
        self.id = export_id
        self._live = True

    def revoke(self) -> None:
        """Revokes the token: the queue pairs it admitted are torn down, and
        transfers through the descriptor fail (once; later calls do nothing)."""
        if self._live:
            self._live = False
            if self.region.client._h:
                self.region.client.call("io.rdmamemd.RevokeAccessToken", {"token": self.token})

    def __enter__(self) -> "Export":
        return self

    def __exit__(self, *exc: object) -> None:
        self.revoke()

    def __repr__(self) -> str:
        return f"<Export {self.id} of region {self.region.id}>"


def export(region: Region, devices: Optional[Iterable[str]] = None) -> Export:
    """ExportRegion: a descriptor of region on devices (None: every device
    it is registered on); see :class:`Export`."""
    params: dict[str, Any] = {"region": str(region.id)}
    if devices is not None:
        params["devices"] = _devices_param(devices)
    reply = region.client.call("io.rdmamemd.ExportRegion", params)
    return Export(region, reply["descriptor"], reply["token"], int(reply["id"]))


# -- remote handles -----------------------------------------------------------


class Remote:
    """Another host's region, imported on this connection from its
    descriptor (no connection to its daemon is made until a transfer needs
    it); a context manager that releases the handle. ``length`` bounds the
    offsets, ``access`` is a set of "read" and "write", ``devices`` the
    exporting host's device names, ``endpoints`` its daemon's addresses."""

    def __init__(self, client: Any, reply: dict[str, Any]) -> None:
        self.client = client
        self.id = int(reply["remote"])
        self.export = int(reply["export"])
        self.length = int(reply["length"])
        self.access = frozenset(reply.get("access", ()))
        self.endpoints: tuple[str, ...] = tuple(reply.get("endpoints", ()))
        self.devices: tuple[str, ...] = tuple(d["name"] for d in reply.get("devices", ()))
        self._live = True

    def _release_params(self) -> Optional[dict[str, Any]]:
        if not self._live:
            return None
        self._live = False
        return {"remote": str(self.id)}

    def release(self) -> None:
        """ReleaseRemote (once; later calls do nothing). Plans made with it
        keep it alive in the daemon."""
        p = self._release_params()
        if p is not None and self.client._h:
            self.client.call("io.rdmamemd.ReleaseRemote", p)

    async def arelease(self) -> None:
        """:meth:`release` for a handle of an :class:`~rdmamem.AsyncClient`."""
        p = self._release_params()
        if p is not None and self.client._h:
            await self.client.call("io.rdmamemd.ReleaseRemote", p)

    def __enter__(self) -> "Remote":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> "Remote":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.arelease()

    def __repr__(self) -> str:
        return f"<Remote {self.id}: export {self.export}, {self.length} bytes>"


# -- what a transfer sends ----------------------------------------------------


def _op_name(op: str) -> str:
    if op not in (READ, WRITE):
        raise ValueError(f"op {op!r}: {READ!r} (remote to local) or {WRITE!r} (local to remote)")
    return op


def _id(x: Any, what: str) -> str:
    v = x.id if isinstance(x, (Region, Remote)) else x
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise TypeError(f"{what}: a {'Region' if what == 'local' else 'Remote'} or its id, not {x!r}")
    return str(v)


def _u64(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what}: an int, not {type(v).__name__}")
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"{what}: {v} is outside 0..2^64-1")
    return v


def range_array(ranges: RangeLike) -> "ctypes.Array[_lib.Range]":
    """ranges as an array of struct rdmamem_range: one (local_offset,
    remote_offset, length) triple, a sequence of them, or a buffer of
    unsigned 64-bit triples (a NumPy uint64 array of shape (n, 3): no
    Python work per range)."""
    if isinstance(ranges, tuple) and len(ranges) == 3 and all(isinstance(v, int) for v in ranges):
        ranges = [ranges]
    if not isinstance(ranges, (list, tuple)):
        try:
            mv = memoryview(ranges)
        except TypeError:
            ranges = list(ranges)
        else:
            if mv.itemsize != 8 or mv.format not in ("Q", "L", "<Q", "=Q", "<L", "=L") \
                    or mv.nbytes % 24 or not mv.nbytes:
                raise ValueError("a buffer of ranges holds unsigned 64-bit (local_offset, "
                                 "remote_offset, length) triples")
            return (_lib.Range * (mv.nbytes // 24)).from_buffer_copy(mv.cast("B"))
    if not ranges:
        raise ValueError("no ranges")
    arr = (_lib.Range * len(ranges))()
    for i, r in enumerate(ranges):
        if len(r) != 3:
            raise ValueError(f"ranges[{i}]: (local_offset, remote_offset, length), not {r!r}")
        arr[i] = _lib.Range(*(_u64(v, f"ranges[{i}]") for v in r))
    return arr


def _notify(notify: Any) -> Optional[str]:
    if notify is None:
        return None
    data = bytes(memoryview(notify).cast("B"))
    if len(data) > NOTIFY_MAX:
        raise ValueError(f"notify: {len(data)} bytes; at most {NOTIFY_MAX}")
    return base64.b64encode(data).decode()


def packed(ranges: RangeLike) -> tuple[dict[str, Any], list[int], int]:
    """The packed form of ranges as rdmamem_ranges_pack() makes it: the
    parameters ({"packed": text} or {"packed_fd": 0}), the fds to send (the
    caller closes them once the call is queued) and the count."""
    arr = range_array(ranges)
    text = ctypes.c_void_p()
    fd = ctypes.c_int(-1)
    r = _lib.lib().rdmamem_ranges_pack(arr, len(arr), ctypes.byref(text), ctypes.byref(fd))
    if r < 0:
        raise OSError(-r, f"packing {len(arr)} ranges: {os.strerror(-r)}")
    if r == 1:
        return {"packed_fd": 0}, [fd.value], len(arr)
    return {"packed": _lib.take_string(text)}, [], len(arr)


@dataclass
class Call:
    """A Transfer or PrepareTransfer call, built: method, parameters, fds
    (the call's to close once sent)."""

    method: str
    params: dict[str, Any]
    fds: list[int] = field(default_factory=list)
    n: int = 0  #: ranges in it

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def batch_call(op: str, local: Any, remote: Any, ranges: RangeLike, *, notify: Any = None,
               lease: Any = None) -> Call:
    """Transfer{batch}: ranges between one local region and one remote."""
    batch: dict[str, Any] = {"op": _op_name(op), "local": {"region": _id(local, "local")},
                             "remote": {"id": _id(remote, "remote")}}
    if lease is not None:
        batch["local"]["lease"] = str(lease_id(lease))
    form, fds, count = packed(ranges)
    batch.update(form)
    params: dict[str, Any] = {"batch": batch}
    n = _notify(notify)
    if n is not None:
        params["notify"] = n
    return Call("io.rdmamemd.Transfer", params, fds, count)


def ops_call(ops: Sequence[Op], *, notify: Any = None) -> Call:
    """Transfer{ops}: listed ops (several regions, remotes, directions)."""
    if not ops:
        raise ValueError("no ops")
    listed = []
    for i, o in enumerate(ops):
        if not isinstance(o, Op):
            o = Op(*o)
        local: dict[str, Any] = {"region": _id(o.local, "local"),
                                 "offset": str(_u64(o.local_offset, f"ops[{i}].local_offset"))}
        if o.lease is not None:
            local["lease"] = str(lease_id(o.lease))
        listed.append({"op": _op_name(o.op), "local": local,
                       "remote": {"id": _id(o.remote, "remote"),
                                  "offset": str(_u64(o.remote_offset, f"ops[{i}].remote_offset"))},
                       "length": str(_u64(o.length, f"ops[{i}].length"))})
    params: dict[str, Any] = {"ops": listed}
    n = _notify(notify)
    if n is not None:
        params["notify"] = n
    return Call("io.rdmamemd.Transfer", params)


def prepare_call(local: Any, remote: Any, ranges: RangeLike) -> Call:
    """PrepareTransfer: ranges between local and remote, checked once."""
    form, fds, count = packed(ranges)
    return Call("io.rdmamemd.PrepareTransfer",
                {"region": _id(local, "local"), "remote": _id(remote, "remote"), **form}, fds,
                count)


def post_call(plan: int, op: str, indices: Optional[Iterable[int]], *, notify: Any = None) -> Call:
    """Transfer{plan}: the plan's ranges by index (None: all of them)."""
    params: dict[str, Any] = {"plan": str(plan), "op": _op_name(op)}
    if indices is not None:
        idx = [_u64(i, "indices") for i in indices]
        if not idx:
            raise ValueError("indices: none (None posts every range)")
        arr = (ctypes.c_uint64 * len(idx))(*idx)
        text = ctypes.c_void_p()
        r = _lib.lib().rdmamem_indices_pack(arr, len(idx), ctypes.byref(text))
        if r == 0:
            params["packed_indices"] = _lib.take_string(text)
        elif r == -errno.ERANGE:  # past any plan; listed, for the daemon to say which
            params["indices"] = [str(i) for i in idx]
        else:
            raise OSError(-r, os.strerror(-r))
    n = _notify(notify)
    if n is not None:
        params["notify"] = n
    return Call("io.rdmamemd.Transfer", params)


class Plan:
    """Ranges between a local region and a remote, checked once by the
    daemon, posted later by index (the vLLM/NIXL pattern: prepare a KV
    cache's block list once, post per request by block index); a context
    manager that releases it. Made by :meth:`Client.prepare_transfer`."""

    def __init__(self, client: "Client", plan: int, n_ranges: int) -> None:
        self.client = client
        self.id = plan
        self.n_ranges = n_ranges
        self._live = True

    def post(self, op: str, indices: Optional[Iterable[int]] = None, *, notify: Any = None,
             timeout: Optional[float] = None) -> TransferStatus:
        """Transfers the plan's ranges at indices (None: all), op READ or
        WRITE for all; as :meth:`Client.transfer` otherwise."""
        return self.client._transfer(post_call(self.id, op, indices, notify=notify), timeout)

    def release(self) -> None:
        """ReleasePlan (once; later calls do nothing)."""
        if self._live:
            self._live = False
            if self.client._h:
                self.client.call("io.rdmamemd.ReleasePlan", {"plan": str(self.id)})

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<Plan {self.id}: {self.n_ranges} ranges>"


class AsyncPlan:
    """A :class:`Plan` of an :class:`~rdmamem.AsyncClient`: ``await
    plan.post(op, indices)``; ``async with`` releases it."""

    def __init__(self, client: "AsyncClient", plan: int, n_ranges: int) -> None:
        self.client = client
        self.id = plan
        self.n_ranges = n_ranges
        self._live = True

    async def post(self, op: str, indices: Optional[Iterable[int]] = None, *,
                   notify: Any = None) -> TransferStatus:
        """As :meth:`Plan.post`."""
        return await self.client._transfer(post_call(self.id, op, indices, notify=notify))

    async def release(self) -> None:
        """ReleasePlan (once)."""
        if self._live:
            self._live = False
            if self.client._h:
                await self.client.call("io.rdmamemd.ReleasePlan", {"plan": str(self.id)})

    async def __aenter__(self) -> "AsyncPlan":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


def notifications_wait(client: "Client", timeout: Optional[float], max: int
                       ) -> list[Notification]:
    """rdmamem_notifications_wait(): up to max queued notifications, oldest
    first, waiting up to timeout seconds for the first (0: poll)."""
    if not 1 <= max <= 256:
        raise ValueError("max: 1 to 256")
    ms = 0 if not timeout else int(timeout * 1000)
    if not 0 <= ms <= 3_600_000:
        raise ValueError("timeout: 0 to 3600 seconds")
    buf = (_lib.Notification * max)()
    with client._mutex:
        n = client._check(_lib.lib().rdmamem_notifications_wait(client.handle, ms, buf, max))
    return [Notification(b.export_id, b.sender_uid, bytes(b.data[: b.len]), b.received_usec)
            for b in buf[:n]]


__all__ = [
    "READ", "WRITE", "NOTIFY_MAX", "Op", "Registration", "RegistrationError", "Export", "Remote",
    "Plan", "AsyncPlan", "TransferStatus", "Notification",
]
