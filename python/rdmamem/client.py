# SPDX-License-Identifier: BSD-3-Clause
"""The connection to rdmamemd: :class:`Client`."""

from __future__ import annotations

import json
import os
import threading
from ctypes import byref, c_int, c_uint64, c_void_p
from typing import Any, Callable, Optional, Sequence, Union

from . import _lib
from .cuda import (KIND_CUDA_MALLOC, cached_ipc_handle, ipc_handle_of, is_miss,
                   parse_share_handle)
from .errors import ConnectError, RdmamemError, from_failure
from .pool import Pool
from . import remote as remote_mod
from .region import HostRegion, Region, Span
from .remote import Notification, Op, Plan, Registration, Remote, TransferStatus

# Allocations one cuda-vmm region maps (RDMAMEM_CUDA_VMM_CHUNKS_MAX).
VMM_CHUNKS_MAX = 64

SHARE_MEMORY_HINT = (
    "a CPU tensor from share_memory_() (or any tensor PyTorch allocated) lives in a file "
    "that cannot carry the seals the daemon requires (F_SEAL_SHRINK, F_SEAL_GROW); allocate "
    "it in registered memory instead: pool = client.pool(nbytes); t = pool.tensor(shape, dtype)"
)


def connect(socket: Optional[str]) -> int:
    """rdmamem_client_connect(): the new connection's handle, or ConnectError."""
    h = c_void_p()
    r = _lib.lib().rdmamem_client_connect(os.fsencode(socket) if socket else None, byref(h))
    if r < 0:
        where = socket or "the default socket"
        raise ConnectError(-r, f"cannot connect to {where}: {os.strerror(-r)}")
    assert h.value is not None
    return h.value


class Client:
    """One connection to the daemon; a context manager that closes it.

    socket: the daemon's socket path; None: ``$RDMAMEM_SOCKET``, else
    ``$XDG_RUNTIME_DIR/rdmamemd/rdmamemd.sock`` if it exists, else
    ``/run/rdmamemd/rdmamemd.sock``. timeout: seconds each call may take (None:
    the library's 30 s); a call past it raises
    :class:`~rdmamem.errors.CallTimeoutError` and leaves the connection unusable.

    Threads: calls on one client are serialized by a lock (the C library allows
    one thread at a time on a connection); open one client per thread for
    calls that must not wait for each other. Everything the connection
    registered or locked is released by the daemon when it closes.
    """

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self._lib = _lib.lib()
        self._mutex = threading.RLock()
        self._pools: list[Pool] = []
        self._h: Optional[int] = connect(socket)
        self._on_reclaim: Any = None  # the callback the C library holds
        self._timeout_ms = 30000  # the library's default (RDMAMEM_DEFAULT_TIMEOUT_MS)
        if timeout is not None:
            self.set_timeout(timeout)

    # -- plumbing ---------------------------------------------------------

    def _error(self, r: int, parameters: Optional[dict[str, Any]] = None) -> RdmamemError:
        name = self._lib.rdmamem_client_error_name(self._h) if self._h else None
        msg = self._lib.rdmamem_client_error_message(self._h) if self._h else None
        return from_failure(
            -r, name.decode() if name else None, msg.decode() if msg else None, parameters
        )

    def _check(self, r: int) -> int:
        if r < 0:
            raise self._error(r)
        return r

    @property
    def handle(self) -> int:
        """The C library's ``struct rdmamem_client *``; ValueError once closed."""
        if not self._h:
            raise ValueError("the client is closed")
        return self._h

    def set_timeout(self, seconds: Optional[float]) -> None:
        """Each call's timeout in seconds; None waits forever."""
        ms = -1 if seconds is None else int(seconds * 1000)
        self._check(self._lib.rdmamem_client_set_timeout(self.handle, ms))
        self._timeout_ms = ms

    # -- restarts of the daemon ---------------------------------------------

    def on_reclaim(self, fn: Optional[Callable[[int, int, list[Registration]], None]]) -> None:
        """Under systemd the daemon keeps regions (memfd, CUDA VMM and IPC)
        across its restarts; once it closed this connection, the next call
        reconnects and reclaims each region this client registered
        (rdmamem_client_on_reclaim(3)). fn(region, error, registrations) then
        runs for each: error 0 and its registrations
        now in force (new rkeys: peers need a new descriptor), or a negative
        errno when it did not come back (-ENOENT: register it again). It runs
        inside the call that reconnected and must not call this client. None
        stops it."""

        def trampoline(_userdata: Any, region: int, error: int, regs: Any, n: int) -> None:
            try:
                got = [Registration(device=regs[i].device.decode(errors="replace"),
                                    lkey=regs[i].lkey, rkey=regs[i].rkey, addr=regs[i].addr,
                                    length=regs[i].length) for i in range(n)]
                fn(region, error, got)  # type: ignore[misc]
            except Exception:  # an exception cannot cross the C library
                import traceback
                traceback.print_exc()

        with self._mutex:
            cb = _lib.RECLAIM_FN(trampoline) if fn else _lib.RECLAIM_FN()
            self._check(self._lib.rdmamem_client_on_reclaim(self.handle, cb, None))
            self._on_reclaim = cb  # the C library holds it: keep it alive

    def reconnect(self) -> int:
        """Reconnects now and reclaims the regions kept across a restart of the
        daemon (calls do it themselves once the daemon closed the connection);
        returns how many came back."""
        with self._mutex:
            return self._check(self._lib.rdmamem_client_reconnect(self.handle))

    @property
    def socket_path(self) -> str:
        """The socket this client is connected to."""
        return self._lib.rdmamem_client_socket_path(self.handle).decode()

    # -- generic calls ----------------------------------------------------

    def call(
        self, method: str, parameters: Optional[dict[str, Any]] = None, fds: Sequence[int] = ()
    ) -> dict[str, Any]:
        """Calls a Varlink method ("io.rdmamemd.GetStatus") and returns its reply's
        parameters; a Varlink error raises its class with the error's parameters.
        fds go with the call (the parameters name them by index); fds that come
        back are closed (use the typed calls for those)."""
        fd_arr = (c_int * len(fds))(*fds) if fds else None
        reply = c_void_p()
        params = json.dumps(parameters).encode() if parameters is not None else None
        with self._mutex:
            r = self._lib.rdmamem_call(
                self.handle, method.encode(), params, fd_arr, len(fds), byref(reply), None, None
            )
            text = _lib.take_string(reply)
            out = json.loads(text) if text else {}
            if r < 0:
                raise self._error(r, out)
        return out

    def ping(self) -> None:
        """A round trip to the daemon."""
        with self._mutex:
            self._check(self._lib.rdmamem_ping(self.handle))

    def status(self) -> dict[str, Any]:
        """io.rdmamemd.GetStatus's reply."""
        return self.call("io.rdmamemd.GetStatus")

    # -- host memory ------------------------------------------------------

    def register_memfd(self, fd: int, offset: int = 0, length: int = 0) -> Region:
        """Registers [offset, offset + length) of a sealed memfd (length 0: to its
        end); the caller keeps fd. For memory made here, :meth:`alloc` is simpler."""
        out = c_uint64()
        with self._mutex:
            self._check(self._lib.rdmamem_register(self.handle, fd, offset, length, byref(out)))
        n = length or os.fstat(fd).st_size - offset
        return Region(self, out.value, n)

    def alloc(self, nbytes: int, name: str = "rdmamem") -> HostRegion:
        """A new sealed memfd of nbytes, registered, and mapped here."""
        if nbytes <= 0:
            raise ValueError("nbytes must be positive")
        fd = c_int(-1)
        self._check(self._lib.rdmamem_memfd_create(name.encode(), nbytes, byref(fd), None))
        try:
            out = c_uint64()
            with self._mutex:
                self._check(self._lib.rdmamem_register(self.handle, fd.value, 0, 0, byref(out)))
            return HostRegion(self, out.value, fd.value, nbytes)
        except BaseException:
            os.close(fd.value)
            raise

    def pool(self, nbytes: int, alignment: int = 256) -> Pool:
        """One registered region of nbytes with a sub-allocator: pool.tensor(),
        pool.array() then make no call to the daemon."""
        p = Pool(self.alloc(nbytes, "rdmamem-pool"), alignment)
        self._pools.append(p)
        return p

    # -- GPU memory -------------------------------------------------------

    def register_cuda_ipc(self, handle: bytes, gpu: int = 0, offset: int = 0,
                          length: int = 0) -> Region:
        """Registers a 64-byte CUipcMemHandle (cuIpcGetMemHandle) of an allocation
        on device gpu (the daemon's ordinal), [offset, offset + length) of it
        (length 0: to the allocation's end, which the daemon then says)."""
        if len(handle) != _lib.CUDA_IPC_HANDLE_SIZE:
            raise ValueError(f"a CUDA IPC handle has 64 bytes, not {len(handle)}")
        out = c_uint64()
        with self._mutex:
            self._check(self._lib.rdmamem_register_cuda_ipc(
                self.handle, handle, gpu, offset, length, byref(out)))
        if not length:
            length = int(self.call("io.rdmamemd.GetRegion", {"region": str(out.value)})["size"])
        return Region(self, out.value, length)

    def register_cuda_vmm(self, fd: Union[int, Sequence[int]], alloc_size: int, offset: int = 0,
                          length: int = 0) -> Region:
        """Registers a VMM allocation exported as a POSIX fd
        (cuMemExportToShareableHandle), of alloc_size bytes, [offset, offset +
        length) of it (length 0: to its end); the caller keeps fd.

        fd may be a sequence of up to 64 fds, allocations of alloc_size bytes
        each of one device: the daemon maps them one after the other as one
        range, as a tensor of expandable segments lies, and offset and length
        select the region in that range."""
        fds = [fd] if isinstance(fd, int) else list(fd)
        if not fds or len(fds) > VMM_CHUNKS_MAX:
            raise ValueError(f"register_cuda_vmm: 1 to {VMM_CHUNKS_MAX} fds, not {len(fds)}")
        out = c_uint64()
        with self._mutex:
            if len(fds) == 1:
                r = self._lib.rdmamem_register_cuda_vmm(
                    self.handle, fds[0], alloc_size, offset, length, byref(out))
            else:
                r = self._lib.rdmamem_register_cuda_vmm_chunks(
                    self.handle, (c_int * len(fds))(*fds), len(fds), alloc_size, offset,
                    length, byref(out))
            self._check(r)
        return Region(self, out.value, length or alloc_size * len(fds) - offset)

    def register_tensor(self, t: Any, *, gpu: Optional[int] = None) -> Span:
        """Registers a tensor's bytes and returns their :class:`Span`.

        A CUDA tensor (contiguous) is registered through the handle PyTorch's
        caching allocator gives for its storage, for either allocator mode:
        cudaMalloc (the IPC handle; the storage's offset in its allocation and
        the tensor's in its storage are honoured) or expandable segments (the
        fds of the allocations under the tensor go over the socket, at most
        64: 1.2 GiB of 20 MiB segments). gpu: the device ordinal in the
        daemon's view (default: the tensor's, right when both see the same
        devices). The span holds the tensor: PyTorch cannot free or reuse its
        memory until span.close(), which unregisters. The daemon does not wait
        for kernels queued on PyTorch's streams: synchronize before it reads
        the tensor; its Read, Write and Copy answer once the bytes are in place.

        A CPU tensor of one of this client's pools gives the pool region's
        span, with no call. Any other CPU tensor (share_memory_() included)
        raises ValueError: allocate it with pool.tensor().
        """
        # t.is_cuda and t.get_device() rather than t.device: each t.device
        # makes a torch.device (0.3 us; three of them were a third of what
        # this layer added to a CUDA tensor's registration).
        if not t.is_cuda:
            kind = t.device.type
            if kind == "cpu":
                for p in self._pools:
                    if p.offset_of(t) is not None:
                        return p.span(t)
                raise ValueError(SHARE_MEMORY_HINT)
            raise ValueError(f"register_tensor: a {kind} tensor; CUDA or a pool's CPU tensor")
        if not t.is_contiguous():
            raise ValueError("register_tensor: the tensor is not contiguous (t.contiguous())")
        nbytes = t.numel() * t.element_size()
        if nbytes == 0:
            raise ValueError("register_tensor: the tensor has no bytes")
        dev = t.get_device() if gpu is None else gpu
        # cudaMalloc memory: its IPC handle straight from the driver (a few
        # us, where _share_cuda_() takes about 40); the span holds the
        # tensor, which is what keeps the block from reuse.
        direct = _direct_ipc_handle(t)
        if direct is not None:
            handle, off = direct
            region = self.register_cuda_ipc(handle, dev, off, nbytes)
            return Span(region, 0, nbytes, owns=True, keep=t)
        storage = t.untyped_storage()
        share = storage._share_cuda_()
        raw, storage_off = share[1], share[3]
        rec = parse_share_handle(raw)
        off = storage_off + t.storage_offset() * t.element_size()
        release = _ipc_counter_release(share)
        try:
            if rec.kind == KIND_CUDA_MALLOC:
                region = self.register_cuda_ipc(rec.ipc_handle, dev, off, nbytes)
            else:
                # The allocations the tensor lies on, mapped by the daemon
                # one after the other as this process maps them.
                seg = rec.segment_size
                first, last = off // seg, (off + nbytes - 1) // seg
                if last - first + 1 > VMM_CHUNKS_MAX:
                    raise ValueError(
                        f"register_tensor: the tensor spans {last - first + 1} expandable "
                        f"segments of {seg} bytes; a region maps at most {VMM_CHUNKS_MAX} "
                        "(register slices of it, or use expandable_segments:False)"
                    )
                region = self.register_cuda_vmm(rec.fds[first : last + 1], seg,
                                                off - first * seg, nbytes)
        except BaseException:
            release()
            raise
        return Span(region, 0, nbytes, owns=True, keep=t, on_close=release)

    # -- RDMA: remote regions, transfers, notifications --------------------

    def import_remote(self, descriptor: str) -> Remote:
        """ImportRemote: a handle of another host's region from its
        descriptor (:meth:`Region.export` there), checked once; a
        :class:`~rdmamem.Remote`, to use in :meth:`transfer` and release."""
        if not isinstance(descriptor, str) or not descriptor:
            raise TypeError("descriptor: the string ExportRegion gave")
        return Remote(self, self.call("io.rdmamemd.ImportRemote", {"descriptor": descriptor}))

    def _transfer(self, call: remote_mod.Call, timeout: Optional[float]) -> TransferStatus:
        # The daemon answers when every op is done: the call's deadline is
        # the transfer's (the C library's transfers have none by default).
        try:
            with self._mutex:
                saved = self._timeout_ms
                ms = -1 if timeout is None else int(timeout * 1000)
                self._check(self._lib.rdmamem_client_set_timeout(self.handle, ms))
                try:
                    reply = self.call(call.method, call.params, call.fds)
                finally:
                    if self._h:
                        self._lib.rdmamem_client_set_timeout(self._h, saved)
        finally:
            call.close()
        return TransferStatus.from_reply(reply)

    def transfer(self, op: str, local: Any, remote: Any, ranges: remote_mod.RangeLike, *,
                 notify: Any = None, lease: Any = None,
                 timeout: Optional[float] = None) -> TransferStatus:
        """Has the daemon move bytes between a local region and a remote one
        over RDMA, and returns when every range is done.

        op: :data:`~rdmamem.READ` (remote to local) or
        :data:`~rdmamem.WRITE` (local to remote). local: a
        :class:`~rdmamem.Region` registered on a device (or its id); remote:
        a :class:`~rdmamem.Remote` (or its id). ranges: one
        ``(local_offset, remote_offset, length)`` triple, a sequence of them,
        or a uint64 buffer of triples (NumPy, shape (n, 3)); they go packed
        in one call (a sealed memfd from 1,024 on), up to the daemon's
        max-transfer-ops (100,000). notify: at most 4,096 bytes the remote
        owner receives after the data is in place. lease: one of this
        connection's leases on local (else the daemon locks it: shared for
        WRITE, exclusive for READ). timeout: seconds for the whole call (None:
        no limit); past it :class:`~rdmamem.CallTimeoutError`, and the
        connection is closed.

        A failure raises its named error with the failed range's ``index``:
        before anything moved ``OutOfRangeError``, ``NoSuchRemoteError``,
        ``NotRegisteredError``…; once started a
        :class:`~rdmamem.errors.TransferError` (``RemoteAccessError``,
        ``PeerUnreachableError``, ``TransferCancelledError``,
        ``TransferFailedError``) with ``ops_done``, ``ops_failed``,
        ``bytes_done`` and the completion ``status``."""
        return self._transfer(
            remote_mod.batch_call(op, local, remote, ranges, notify=notify, lease=lease), timeout)

    def transfer_ops(self, ops: Sequence[Op], *, notify: Any = None,
                     timeout: Optional[float] = None) -> TransferStatus:
        """Listed ops in one call (several local regions, remotes and
        directions: :class:`~rdmamem.Op`); some 7,000 fit in one message.
        Errors as :meth:`transfer`, ``index`` being the op's."""
        return self._transfer(remote_mod.ops_call(ops, notify=notify), timeout)

    def prepare_transfer(self, local: Any, remote: Any, ranges: remote_mod.RangeLike) -> Plan:
        """PrepareTransfer: a :class:`~rdmamem.Plan` of ranges (1 to 131,072)
        between local and remote, checked now (``OutOfRangeError`` names the
        first that does not fit by ``index``), posted later by index."""
        call = remote_mod.prepare_call(local, remote, ranges)
        try:
            reply = self.call(call.method, call.params, call.fds)
        finally:
            call.close()
        return Plan(self, int(reply["plan"]), call.n)

    def wait_notifications(self, timeout: Optional[float] = None,
                           max: int = 256) -> list[Notification]:
        """Notifications peers attached to transfers into this connection's
        exports, oldest first: up to max, waiting up to timeout seconds for
        the first when none is queued (None or 0: at once). The connection
        serves no other call while it waits."""
        return remote_mod.notifications_wait(self, timeout, max)

    def poll_notifications(self, max: int = 256) -> list[Notification]:
        """What :meth:`wait_notifications` gives at once, without waiting."""
        return remote_mod.notifications_wait(self, 0, max)

    # -- life -------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection: the daemon drops its regions and leases."""
        with self._mutex:
            if self._h:
                h, self._h = self._h, None
                self._lib.rdmamem_client_close(h)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<Client {self.socket_path if self._h else 'closed'}>"


def _direct_ipc_handle(t: Any) -> Optional[tuple[bytes, int]]:
    """The IPC handle of the allocation under tensor t and t's offset in
    it, from the driver (ipc_handle_of(), remembered per allocation), or
    None: ask PyTorch."""
    ptr = t.data_ptr()
    known = cached_ipc_handle(ptr)
    if not is_miss(known):
        return known  # type: ignore[no-any-return]
    import torch

    # The allocation's device must be current for the first look.
    if torch.cuda.current_device() == t.device.index:
        return ipc_handle_of(ptr)
    with torch.cuda.device(t.device):
        return ipc_handle_of(ptr)


def _ipc_counter_release(share: tuple[Any, ...]) -> Any:
    """What undoes _share_cuda_()'s reference count on the storage.

    _share_cuda_() counts one consumer in a shared counter and, while that
    count is above zero, keeps a freed block out of the allocator's reuse (its
    "limbo"): a consumer process drops it when done. The daemon is not a
    PyTorch process, so the span drops it at close (the span holds the tensor
    until then, so the block cannot be freed earlier anyway)."""
    import torch

    ref_handle, ref_offset = share[4], share[5]

    def release() -> None:
        fn = getattr(torch.UntypedStorage, "_release_ipc_counter_cuda", None)
        if fn is not None and ref_handle:
            try:
                fn(ref_handle, ref_offset)
            except (RuntimeError, TypeError):
                pass

    return release


__all__ = ["Client", "SHARE_MEMORY_HINT"]
