# SPDX-License-Identifier: BSD-3-Clause
"""Regions, leases and spans.

A :class:`Region` is a region id on one :class:`~rdmamem.Client`'s connection.
A :class:`HostRegion` adds the sealed memfd it was made over and this process's
mapping of it, through which NumPy arrays and PyTorch tensors see the same
bytes as the daemon, with no copy. A :class:`Span` is bytes ``[offset, offset +
nbytes)`` of a region: what :meth:`Client.register_tensor` returns.

Ownership: a region belongs to the client that registered it and lives until
:meth:`Region.close` (or the client's close: the daemon drops everything a
connection held). The mapping of a host region outlives the daemon's region
while a view of it is alive (an array, a tensor, a memoryview).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _lib

if TYPE_CHECKING:
    from .client import Client
    from .remote import Export, Registration

LOCK_MODES = {"shared": 0, "disjoint": 1, "exclusive": 2}

Buffer = Union[bytes, bytearray, memoryview, Any]


def lock_mode(mode: str) -> int:
    """The C enum value of a lock mode name ("shared", "disjoint", "exclusive")."""
    try:
        return LOCK_MODES[mode]
    except KeyError:
        raise ValueError(f"lock mode {mode!r}: one of {', '.join(LOCK_MODES)}") from None


def lease_id(lease: Union["Lease", int, None]) -> int:
    """0 for no lease, else the lease's id."""
    if lease is None:
        return 0
    return lease.id if isinstance(lease, Lease) else int(lease)


class Lease:
    """A lease on a region's lock; a context manager that releases it on exit.

    Reads and writes given ``lease=`` run under it, and the daemon takes no lock
    of its own for them."""

    def __init__(self, region: "Region", lease: int, mode: str) -> None:
        self.region = region
        self.id = lease
        self.mode = mode
        self._held = True

    def release(self) -> None:
        """Unlocks (once; later calls do nothing)."""
        if self._held:
            self._held = False
            self.region.client._check(_lib.lib().rdmamem_unlock(self.region.client._h, self.id))

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<Lease {self.id} {self.mode} on region {self.region.id}>"


class Region:
    """A region registered with the daemon on ``client``'s connection: ``id``
    is the daemon's region id, ``nbytes`` its length. Made by the client's
    register calls; a context manager that unregisters it on exit."""

    def __init__(self, client: "Client", region: int, nbytes: int) -> None:
        self.client = client
        self.id = region
        self.nbytes = nbytes
        self._open = True

    # -- byte operations, through the daemon -------------------------------

    def _span(self, offset: int, length: Optional[int]) -> int:
        if length is None:
            length = self.nbytes - offset
        if offset < 0 or length < 0 or offset + length > self.nbytes:
            raise ValueError(f"[{offset}, +{length}) is outside the region's {self.nbytes} bytes")
        return length

    def read(self, offset: int = 0, length: Optional[int] = None, *, lease: Any = None) -> bytes:
        """Reads length bytes (default: to the end) at offset, through the daemon."""
        n = self._span(offset, length)
        buf = ctypes.create_string_buffer(n)
        self.client._check(
            _lib.lib().rdmamem_read(self.client._h, self.id, offset, buf, n, lease_id(lease))
        )
        return buf.raw

    def readinto(self, buf: Buffer, offset: int = 0, *, lease: Any = None) -> int:
        """Reads len(buf) bytes at offset into a writable buffer; returns the count."""
        mv = memoryview(buf).cast("B")
        n = self._span(offset, mv.nbytes)
        c = (ctypes.c_char * n).from_buffer(mv)
        self.client._check(
            _lib.lib().rdmamem_read(self.client._h, self.id, offset, c, n, lease_id(lease))
        )
        return n

    def write(
        self, data: Buffer, offset: int = 0, *, mode: str = "exclusive", lease: Any = None
    ) -> None:
        """Writes data (any buffer) at offset, through the daemon. Without a lease
        the daemon locks the region in mode ("exclusive" or "disjoint")."""
        mv = memoryview(data).cast("B")
        n = self._span(offset, mv.nbytes)
        if mv.readonly:
            ptr: Any = ctypes.c_char_p(mv.tobytes())
        else:
            ptr = (ctypes.c_char * n).from_buffer(mv)
        self.client._check(
            _lib.lib().rdmamem_write(
                self.client._h, self.id, offset, ptr, n, lock_mode(mode), lease_id(lease)
            )
        )

    def copy_to(
        self,
        dst: "Region",
        *,
        offset: int = 0,
        dst_offset: int = 0,
        length: Optional[int] = None,
        lease: Any = None,
        dst_lease: Any = None,
        mode: str = "exclusive",
    ) -> None:
        """Copies inside the daemon (no bytes on the socket) from this region to
        dst: host to host, host to GPU, GPU to host, GPU to GPU."""
        n = self._span(offset, length)
        dst._span(dst_offset, n)
        c = _lib.Copy(
            self.id, offset, lease_id(lease), dst.id, dst_offset, lease_id(dst_lease), n,
            lock_mode(mode),
        )
        self.client._check(_lib.lib().rdmamem_copy(self.client._h, ctypes.byref(c)))

    def lock(self, mode: str = "shared", timeout: Optional[float] = None) -> Lease:
        """Takes a lease on the region's lock: ``with region.lock("exclusive") as
        lease:``. timeout: seconds to wait (None: without limit, 0: only if free
        now); past it, :class:`~rdmamem.errors.LockTimeoutError`."""
        ms = -1 if timeout is None else int(timeout * 1000)
        out = ctypes.c_uint64()
        self.client._check(
            _lib.lib().rdmamem_lock(self.client._h, self.id, lock_mode(mode), ms,
                                    ctypes.byref(out))
        )
        return Lease(self, out.value, mode)

    # -- RDMA -------------------------------------------------------------

    def register_on(self, devices: Any = None) -> dict[str, "Registration"]:
        """Registers the region on RDMA devices (None: every device the
        daemon has open; a name; a list of names) and returns the
        registrations by device: lkey, rkey, addr (the MR's iova), length.
        A device that failed raises :class:`~rdmamem.RegistrationError`.
        Registrations last as long as the region: the protocol has no
        per-device unregistration (:meth:`unregister` drops them all)."""
        from .remote import register_on

        return register_on(self, devices)

    def export(self, devices: Any = None) -> "Export":
        """A descriptor of the region for peers on other hosts, on devices it
        is registered on (None: all of them): an :class:`~rdmamem.Export`,
        revoked by ``.revoke()`` or on leaving its ``with`` block."""
        from .remote import export

        return export(self, devices)

    # -- life -------------------------------------------------------------

    def unregister(self) -> None:
        """Drops the region in the daemon (once; later calls do nothing)."""
        if self._open:
            self._open = False
            if self.client._h:
                self.client._check(_lib.lib().rdmamem_unregister(self.client._h, self.id))

    def close(self) -> None:
        """Unregisters and releases what this object holds."""
        self.unregister()

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.nbytes} bytes>"


class HostRegion(Region):
    """A region over a sealed memfd, mapped here too: zero-copy views.

    Made by :meth:`Client.alloc`. ``fd`` is the memfd (closed by
    :meth:`close`), ``mmap`` this process's shared mapping of it and
    ``address`` the mapping's first byte."""

    def __init__(self, client: "Client", region: int, fd: int, nbytes: int) -> None:
        super().__init__(client, region, nbytes)
        self.fd = fd
        self.mmap = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.mmap))

    def memoryview(self) -> memoryview:
        """The mapping as a writable memoryview (no copy)."""
        return memoryview(self.mmap)

    def numpy(self, dtype: Any = "uint8", shape: Any = None, offset: int = 0) -> Any:
        """A NumPy array over the mapping at offset (no copy)."""
        import numpy as np

        dt = np.dtype(dtype)
        if shape is None:
            shape = ((self.nbytes - offset) // dt.itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        count = 1
        for s in shape:
            count *= s
        return np.frombuffer(self.mmap, dtype=dt, count=count, offset=offset).reshape(shape)

    def torch(self, dtype: Any = None, shape: Any = None, offset: int = 0) -> Any:
        """A CPU tensor over the mapping at offset (torch.frombuffer: no copy)."""
        import torch

        dt = dtype if dtype is not None else torch.uint8
        size = torch.empty((), dtype=dt).element_size()
        if shape is None:
            shape = ((self.nbytes - offset) // size,)
        elif isinstance(shape, int):
            shape = (shape,)
        count = 1
        for s in shape:
            count *= s
        t = torch.frombuffer(self.mmap, dtype=dt, count=count, offset=offset)
        return t.view(tuple(shape))

    def close(self) -> None:
        """Unregisters, then unmaps and closes the memfd; views still alive keep
        the mapping (it goes with the last of them)."""
        try:
            super().close()
        finally:
            try:
                self.mmap.close()
            except BufferError:
                pass  # a view is alive: the mapping goes with it
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


class Span:
    """Bytes [offset, offset + nbytes) of a region: a registered tensor.

    ``owns`` says whether closing the span unregisters the region (a CUDA
    tensor's own region) or not (a tensor of a pool, whose region is the
    pool's). ``keep`` holds what must stay alive while the daemon uses the
    memory: the tensor itself, so PyTorch cannot free or reuse it meanwhile."""

    def __init__(
        self, region: Region, offset: int, nbytes: int, *, owns: bool, keep: Any = None,
        on_close: Any = None,
    ) -> None:
        self.region = region
        self.offset = offset
        self.nbytes = nbytes
        self.owns = owns
        self.keep = keep
        self._on_close = on_close

    def read(self, *, lease: Any = None) -> bytes:
        """The span's bytes, through the daemon."""
        return self.region.read(self.offset, self.nbytes, lease=lease)

    def write(self, data: Buffer, *, mode: str = "exclusive", lease: Any = None) -> None:
        """Writes data (at most nbytes) at the span's start."""
        if memoryview(data).nbytes > self.nbytes:
            raise ValueError(f"{memoryview(data).nbytes} bytes do not fit in {self.nbytes}")
        self.region.write(data, self.offset, mode=mode, lease=lease)

    def copy_to(self, dst: "Span", *, mode: str = "exclusive", lease: Any = None,
                dst_lease: Any = None) -> None:
        """Copies this span into dst (same size) inside the daemon."""
        if dst.nbytes != self.nbytes:
            raise ValueError(f"spans differ in size: {self.nbytes} and {dst.nbytes} bytes")
        self.region.copy_to(dst.region, offset=self.offset, dst_offset=dst.offset,
                            length=self.nbytes, lease=lease, dst_lease=dst_lease, mode=mode)

    def lock(self, mode: str = "shared", timeout: Optional[float] = None) -> Lease:
        """A lease on the span's region (the whole region: locks are per region)."""
        return self.region.lock(mode, timeout)

    def close(self) -> None:
        """Unregisters the region if the span owns it; lets go of the tensor."""
        try:
            if self.owns:
                self.region.close()
        finally:
            if self._on_close is not None:
                cb, self._on_close = self._on_close, None
                cb()
            self.keep = None

    def __enter__(self) -> "Span":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Span region {self.region.id} [{self.offset}, +{self.nbytes})>"
