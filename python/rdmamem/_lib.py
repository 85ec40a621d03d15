# SPDX-License-Identifier: BSD-3-Clause
"""librdmamem through ctypes: finding the library and declaring its calls.

The library is found, first match wins, at ``$RDMAMEM_LIBRARY`` (a path),
then by the dynamic linker's search (``librdmamem.so.0``: ``LD_LIBRARY_PATH``,
the ld.so cache, /usr/local/lib), then ``ctypes.util.find_library``. Nothing is
compiled: the package is pure Python, so the library's ABI (version 0.4: the
asynchronous calls, the packed transfer forms) is what this file declares, by hand, from ``rdmamem.h``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_size_t,
    c_uint,
    c_uint64,
    c_void_p,
)
from typing import Any, Optional

SONAME = "librdmamem.so.0"


class LibraryNotFoundError(ImportError):
    """librdmamem could not be loaded (set RDMAMEM_LIBRARY to its path)."""


def _load() -> ctypes.CDLL:
    tried = []
    env = os.environ.get("RDMAMEM_LIBRARY")
    candidates = [env] if env else []
    candidates += [SONAME, "/usr/local/lib/" + SONAME]
    found = ctypes.util.find_library("rdmamem")
    if found:
        candidates.append(found)
    for c in candidates:
        try:
            return ctypes.CDLL(c, use_errno=True)
        except OSError as e:
            tried.append(f"{c}: {e}")
    raise LibraryNotFoundError(
        "librdmamem not found; install it or set RDMAMEM_LIBRARY to its path (tried "
        + "; ".join(tried)
        + ")"
    )


class Copy(Structure):
    """struct rdmamem_copy."""

    _fields_ = [
        ("from_region", c_uint64),
        ("from_offset", c_uint64),
        ("from_lease", c_uint64),
        ("to_region", c_uint64),
        ("to_offset", c_uint64),
        ("to_lease", c_uint64),
        ("length", c_uint64),
        ("mode", c_int),
    ]


class Reply(Structure):
    """struct rdmamem_reply: valid during the callback only."""

    _fields_ = [
        ("error", c_int),
        ("error_name", c_char_p),
        ("error_message", c_char_p),
        ("parameters", c_char_p),
        ("fds", POINTER(c_int)),
        ("n_fds", c_size_t),
        ("flags", c_uint),
    ]


class Range(Structure):
    """struct rdmamem_range: bytes [local_offset, +length) of a region and
    [remote_offset, +length) of a remote."""

    _fields_ = [("local_offset", c_uint64), ("remote_offset", c_uint64), ("length", c_uint64)]


NOTIFY_MAX = 4096


class Notification(Structure):
    """struct rdmamem_notification."""

    _fields_ = [
        ("export_id", c_uint64),
        ("sender_uid", ctypes.c_uint32),
        ("received_usec", c_uint64),
        ("len", c_size_t),
        ("data", ctypes.c_uint8 * NOTIFY_MAX),
    ]


REPLY_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, POINTER(Reply), c_void_p)


class Registration(ctypes.Structure):
    """struct rdmamem_registration."""

    _fields_ = [
        ("device", ctypes.c_char * 64),
        ("addr", c_uint64),
        ("length", c_uint64),
        ("lkey", ctypes.c_uint32),
        ("rkey", ctypes.c_uint32),
    ]


# rdmamem_reclaim_fn(userdata, region, error, regs, n_regs)
RECLAIM_FN = ctypes.CFUNCTYPE(None, c_void_p, c_uint64, c_int, POINTER(Registration), c_size_t)

CALL_MORE = 1 << 0
CALL_ONEWAY = 1 << 1
REPLY_CONTINUES = 1 << 0
CUDA_IPC_HANDLE_SIZE = 64

_P_U64 = POINTER(c_uint64)
_P_INT = POINTER(c_int)

# name: (restype, argtypes); every int return is 0/count or -errno.
_PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "rdmamem_client_connect": (c_int, [c_char_p, POINTER(c_void_p)]),
    "rdmamem_client_close": (c_void_p, [c_void_p]),
    "rdmamem_client_set_timeout": (c_int, [c_void_p, c_int]),
    "rdmamem_client_socket_path": (c_char_p, [c_void_p]),
    "rdmamem_client_error_name": (c_char_p, [c_void_p]),
    "rdmamem_client_error_message": (c_char_p, [c_void_p]),
    "rdmamem_call": (
        c_int,
        [c_void_p, c_char_p, c_char_p, _P_INT, c_size_t, POINTER(c_void_p), _P_INT,
         POINTER(c_size_t)],
    ),
    "rdmamem_ping": (c_int, [c_void_p]),
    "rdmamem_client_get_fd": (c_int, [c_void_p]),
    "rdmamem_client_get_events": (c_int, [c_void_p]),
    "rdmamem_client_get_timeout": (c_int, [c_void_p, _P_U64]),
    "rdmamem_client_process": (c_int, [c_void_p]),
    "rdmamem_call_async": (
        c_int,
        [c_void_p, c_char_p, c_char_p, _P_INT, c_size_t, c_uint, REPLY_FN, c_void_p,
         POINTER(c_void_p)],
    ),
    "rdmamem_call_cancel": (c_void_p, [c_void_p]),
    "rdmamem_memfd_create": (c_int, [c_char_p, c_size_t, _P_INT, POINTER(c_void_p)]),
    "rdmamem_register": (c_int, [c_void_p, c_int, c_uint64, c_uint64, _P_U64]),
    "rdmamem_unregister": (c_int, [c_void_p, c_uint64]),
    "rdmamem_read": (c_int, [c_void_p, c_uint64, c_uint64, c_void_p, c_size_t, c_uint64]),
    "rdmamem_write": (c_int, [c_void_p, c_uint64, c_uint64, c_void_p, c_size_t, c_int, c_uint64]),
    "rdmamem_copy": (c_int, [c_void_p, POINTER(Copy)]),
    "rdmamem_lock": (c_int, [c_void_p, c_uint64, c_int, c_int, _P_U64]),
    "rdmamem_unlock": (c_int, [c_void_p, c_uint64]),
    "rdmamem_register_cuda_vmm": (c_int, [c_void_p, c_int, c_uint64, c_uint64, c_uint64, _P_U64]),
    "rdmamem_register_cuda_vmm_chunks": (
        c_int, [c_void_p, ctypes.POINTER(c_int), ctypes.c_size_t, c_uint64, c_uint64, c_uint64,
                _P_U64]),
    "rdmamem_register_cuda_ipc": (c_int, [c_void_p, c_void_p, c_int, c_uint64, c_uint64, _P_U64]),
    "rdmamem_notifications_wait": (c_int, [c_void_p, c_int, POINTER(Notification), c_size_t]),
    # RDMAMEM_0.4
    "rdmamem_ranges_pack": (c_int, [POINTER(Range), c_size_t, POINTER(c_void_p), _P_INT]),
    "rdmamem_indices_pack": (c_int, [_P_U64, c_size_t, POINTER(c_void_p)]),
    # RDMAMEM_0.5
    "rdmamem_client_on_reclaim": (c_int, [c_void_p, RECLAIM_FN, c_void_p]),
    "rdmamem_client_reconnect": (c_int, [c_void_p]),
}

_lib: Optional[ctypes.CDLL] = None
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None


def lib() -> ctypes.CDLL:
    """The loaded library, its prototypes declared (loaded on first use)."""
    global _lib
    if _lib is None:
        dll = _load()
        for name, (res, args) in _PROTOTYPES.items():
            # A library older than this package lacks the newest calls:
            # the rest still work, and those fail when called, by name.
            fn = getattr(dll, name, None)
            if fn is None:
                continue
            fn.restype = res
            fn.argtypes = args
        _lib = dll
    return _lib


def take_string(p: c_void_p) -> Optional[str]:
    """A malloc()ed C string from the library as str, freed."""
    if not p.value:
        return None
    try:
        return ctypes.string_at(p.value).decode()
    finally:
        _libc.free(p.value)


__all__ = ["lib", "take_string", "Copy", "Range", "Notification", "NOTIFY_MAX", "Reply", "REPLY_FN", "LibraryNotFoundError", "c_char"]
