# SPDX-License-Identifier: BSD-3-Clause
"""Exceptions: one class per Varlink error the daemon can send.

The classes are made at import from ``_errtable`` (generated from the C
library's error table), so a new error in the C table is a new class here with
no Python edit. Every class derives from :class:`RdmamemError`, an
:class:`OSError` whose ``errno`` is what the C library returns for that error.

Names: ``io.rdmamemd.NoSuchRegion`` is ``NoSuchRegionError`` (a name already
ending in ``Error`` keeps it); the generic ``org.varlink.service`` errors get a
``Varlink`` prefix (``VarlinkInvalidParameterError``), because both interfaces
have a ``PermissionDenied``.
"""

from __future__ import annotations

import errno as _errno
import os
import re
from typing import Any, Optional

from ._errtable import ERRORS


class RdmamemError(OSError):
    """A failed call: the Varlink error's name (None for a failure of the
    library's own: timeout, lost connection, bad argument), a one-line message,
    the errno, and the error's parameters as the daemon sent them."""

    #: The Varlink error name this class stands for (None on the base class).
    varlink_name: Optional[str] = None

    def __init__(
        self,
        err: int,
        message: str,
        name: Optional[str] = None,
        parameters: Optional[dict[str, Any]] = None,
    ) -> None:
        super().__init__(err, message)
        self.name = name if name is not None else self.varlink_name
        self.message = message
        self.parameters: dict[str, Any] = parameters or {}

    def __str__(self) -> str:
        what = self.name or _errno.errorcode.get(self.errno, str(self.errno))
        return f"{what}: {self.message}"

    # -- what a Transfer or PrepareTransfer error says about its ops ----------

    @property
    def index(self) -> Optional[int]:
        """The first failed op's index (a listed op's, a batch's range's, a plan
        post's entry's) when the error names one, else None. The transfer
        errors carry it as a parameter; the checks before anything moves
        (``OutOfRange``, ``NoSuchRegion``, ``PermissionDenied``…) start their
        message with ``op N:`` or ``index N:``."""
        v = self.parameters.get("index")
        if v is not None:
            return int(v)
        m = _INDEX_RE.match(self.message or "")
        return int(m.group(1)) if m else None

    def _count(self, key: str) -> Optional[int]:
        v = self.parameters.get(key)
        return None if v is None else int(v)

    @property
    def ops_done(self) -> Optional[int]:
        """Ops of the transfer that completed (their bytes are in place)."""
        return self._count("ops_done")

    @property
    def ops_failed(self) -> Optional[int]:
        """Ops of the transfer that failed (``index`` is the first of them)."""
        return self._count("ops_failed")

    @property
    def bytes_done(self) -> Optional[int]:
        """Bytes moved by the ops that completed."""
        return self._count("bytes_done")

    @property
    def status(self) -> Optional[str]:
        """The failed work completion's status ("remote access error"...)."""
        v = self.parameters.get("status")
        return None if v is None else str(v)


_INDEX_RE = re.compile(r"(?:op|index|range) (\d+):")


class TransferError(RdmamemError):
    """Base of the errors a Transfer ends with once it has started
    (``RemoteAccessError``, ``PeerUnreachableError``,
    ``TransferCancelledError``, ``TransferFailedError``): ``index``,
    ``ops_done``, ``ops_failed``, ``bytes_done`` and ``status`` say which
    op failed first, how many failed and what completed."""


_TRANSFER_ERRORS = {
    "io.rdmamemd.RemoteAccessError",
    "io.rdmamemd.PeerUnreachable",
    "io.rdmamemd.TransferCancelled",
    "io.rdmamemd.TransferFailed",
}


class ConnectionLostError(RdmamemError, ConnectionError):
    """The connection is gone (the daemon went away, or an earlier call timed
    out and left it unusable): open a new :class:`~rdmamem.Client`."""


class ConnectError(RdmamemError, ConnectionError):
    """No connection could be made: no daemon listens there (ENOENT,
    ECONNREFUSED), or the socket is not this user's to use (EACCES)."""


class CallTimeoutError(RdmamemError, TimeoutError):
    """The call got no answer within the client's timeout. The connection is
    closed by the C library after this: open a new client."""


def _class_name(name: str) -> str:
    iface, _, short = name.rpartition(".")
    if iface == "org.varlink.service":
        short = "Varlink" + short
    return short if short.endswith("Error") else short + "Error"


def _bases(name: str, err: int) -> tuple[type, ...]:
    # The builtin OSError subclass of the same meaning, where there is one a
    # caller would catch (LockTimeout is a TimeoutError, PermissionDenied a
    # PermissionError); ENOENT's FileNotFoundError would mislead.
    base = TransferError if name in _TRANSFER_ERRORS else RdmamemError
    extra = {_errno.ETIMEDOUT: TimeoutError, _errno.EACCES: PermissionError}.get(err)
    return (base, extra) if extra else (base,)


#: Varlink error name -> its exception class.
errors_by_name: dict[str, type[RdmamemError]] = {}

for _name, _sym, _doc in ERRORS:
    _err = getattr(_errno, _sym, _errno.EREMOTEIO)
    _cls = type(
        _class_name(_name),
        _bases(_name, _err),
        {"__doc__": f"``{_name}`` ({_sym}): {_doc}", "varlink_name": _name, "__module__": __name__},
    )
    errors_by_name[_name] = _cls
    globals()[_cls.__name__] = _cls


def from_failure(
    err: int, name: Optional[str], message: Optional[str], parameters: Optional[dict[str, Any]] = None
) -> RdmamemError:
    """The exception for a failed call: err a positive errno, name the Varlink
    error name or None, message the library's one-line explanation."""
    msg = message or os.strerror(err)
    if name is not None:
        cls = errors_by_name.get(name, RdmamemError)
        return cls(err, msg, name, parameters)
    if err == _errno.ETIMEDOUT:
        return CallTimeoutError(err, msg)
    if err in (_errno.ECONNRESET, _errno.ENOTCONN, _errno.EPIPE):
        return ConnectionLostError(err, msg)
    return RdmamemError(err, msg)


__all__ = ["RdmamemError", "TransferError", "ConnectError", "ConnectionLostError", "CallTimeoutError", "errors_by_name", "from_failure"]
__all__ += [c.__name__ for c in errors_by_name.values()]
