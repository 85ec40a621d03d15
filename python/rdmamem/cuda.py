# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch CUDA tensors: what ``untyped_storage()._share_cuda_()`` hands out.

``_share_cuda_()`` returns (device, handle, storage bytes, offset of the
storage in the allocation, ref counter name, ref counter offset, event handle,
event sync flag). The handle is a record of PyTorch's caching allocator:

- byte 0: the record's version (1 and 2 are known; both have this layout);
- byte 1: the kind, ``c`` for memory from cudaMalloc, ``e`` for an expandable
  segment (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``);
- ``c``: the 64-byte cudaIpcMemHandle of the allocation's base (66 bytes in
  all): the daemon opens it, the storage's offset in the allocation says where
  the tensor is;
- ``e``: a header {pid_t pid; size_t segment_size; size_t num_handles} (24
  bytes with its padding on x86-64 and aarch64) and then num_handles ints:
  POSIX fds of the producing process, each a cuMemCreate allocation of
  segment_size bytes mapped one after the other (30 bytes for one). The
  producer is this process, so the fds are ours and go to the daemon over the
  socket with SCM_RIGHTS: no pidfd_getfd, no ptrace right.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any, Optional

KIND_CUDA_MALLOC = ord("c")
KIND_EXPANDABLE = ord("e")
IPC_HANDLE_SIZE = 64
_HEADER = struct.Struct("=i4xQQ")  # pid_t, padding, size_t segment_size, size_t num_handles


@dataclass
class ShareRecord:
    """A parsed ``_share_cuda_()`` handle."""

    version: int
    kind: int
    ipc_handle: bytes = b""  # kind 'c'
    pid: int = 0  # kind 'e': the producer
    segment_size: int = 0
    fds: list[int] = field(default_factory=list)


def parse_share_handle(raw: bytes) -> ShareRecord:
    """Parses a handle; ValueError says what does not fit."""
    if len(raw) < 2:
        raise ValueError(f"CUDA share handle of {len(raw)} bytes: too short")
    version, kind = raw[0], raw[1]
    if version not in (1, 2):
        raise ValueError(f"CUDA share handle version {version}: this package knows 1 and 2")
    body = raw[2:]
    if kind == KIND_CUDA_MALLOC:
        if len(body) != IPC_HANDLE_SIZE:
            raise ValueError(f"cudaMalloc handle of {len(raw)} bytes, expected {2 + IPC_HANDLE_SIZE}")
        return ShareRecord(version, kind, ipc_handle=bytes(body))
    if kind == KIND_EXPANDABLE:
        if len(body) < _HEADER.size:
            raise ValueError(f"expandable-segment handle of {len(raw)} bytes: no header")
        pid, segment_size, n = _HEADER.unpack_from(body)
        rest = body[_HEADER.size :]
        if n == 0 or len(rest) != 4 * n:
            # A fabric handle (64 bytes each) or a layout of a later PyTorch.
            raise ValueError(
                f"expandable-segment handle: {n} handles in {len(rest)} bytes; only POSIX fd "
                "handles (4 bytes each) are supported"
            )
        fds = list(struct.unpack(f"={n}i", rest))
        return ShareRecord(version, kind, pid=pid, segment_size=segment_size, fds=fds)
    raise ValueError(f"CUDA share handle kind {kind!r}: this package knows 'c' and 'e'")


class _Driver:
    """The CUDA driver calls that give a cudaMalloc allocation's IPC handle
    without ``_share_cuda_()``: that one also records an event and counts a
    consumer in a shared-memory counter, about 40 us a call on an H200.
    Loaded once, on first use."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.attr = lib.cuPointerGetAttribute
        self.attr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        self.attr.restype = ctypes.c_int
        self.range = lib.cuMemGetAddressRange_v2
        self.range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                               ctypes.c_uint64]
        self.range.restype = ctypes.c_int
        self.get_handle = lib.cuIpcGetMemHandle
        self.get_handle.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
        self.get_handle.restype = ctypes.c_int


_CU_POINTER_ATTRIBUTE_BUFFER_ID = 7
_HANDLES_MAX = 4096
_driver: Optional[_Driver] = None
_driver_failed = False
# Per allocation, by the driver's buffer id (unique for the process's
# lifetime, never reused, unlike addresses): its IPC handle and base, or
# None for memory that has none (expandable segments).
_handles: dict[int, Optional[tuple[bytes, int]]] = {}
_MISS = object()


def _load() -> Optional[_Driver]:
    global _driver, _driver_failed
    if _driver is None and not _driver_failed:
        try:
            _driver = _Driver()
        except (OSError, AttributeError):
            _driver_failed = True
    return _driver


def _buffer_id(d: _Driver, ptr: int) -> Optional[int]:
    bid = ctypes.c_ulonglong()
    if d.attr(ctypes.byref(bid), _CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr) != 0:
        return None
    return bid.value


def cached_ipc_handle(ptr: int) -> Any:
    """ipc_handle_of(ptr) if the allocation holding ptr was seen before (one
    driver call, needing no current context), else a sentinel that is not
    None: then call ipc_handle_of() with the device current."""
    d = _load()
    if d is None:
        return None
    bid = _buffer_id(d, ptr)
    if bid is None:
        return None
    hit = _handles.get(bid, _MISS)
    if hit is _MISS:
        return _MISS
    return None if hit is None else (hit[0], ptr - hit[1])


def is_miss(v: Any) -> bool:
    """Whether cached_ipc_handle() found nothing."""
    return v is _MISS


def ipc_handle_of(ptr: int) -> Optional[tuple[bytes, int]]:
    """The 64-byte IPC handle of the cudaMalloc allocation holding device
    pointer ptr and ptr's offset in it, asked of the driver directly and
    remembered per allocation; None when the driver cannot say (no libcuda,
    memory of expandable segments, which has no legacy IPC handle): the
    caller then asks PyTorch. The allocation's device must be current in
    this thread."""
    d = _load()
    if d is None:
        return None
    bid = _buffer_id(d, ptr)
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    handle = ctypes.create_string_buffer(IPC_HANDLE_SIZE)
    found: Optional[tuple[bytes, int]] = None
    if (d.range(ctypes.byref(base), ctypes.byref(size), ptr) == 0 and
            d.get_handle(handle, base.value) == 0):
        found = (handle.raw, base.value)
    if bid is not None:
        if len(_handles) >= _HANDLES_MAX:
            _handles.clear()
        _handles[bid] = found
    return None if found is None else (found[0], ptr - found[1])
