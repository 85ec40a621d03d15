# SPDX-License-Identifier: BSD-3-Clause
"""rdmamem: Python client of rdmamemd, the memory-registration daemon for RDMA
and GPU hosts.

    import rdmamem

    with rdmamem.Client() as c:
        pool = c.pool(64 << 20)
        t = pool.tensor((1024, 1024), torch.float32)   # no call to the daemon
        span = c.register_tensor(t)                    # the pool region's bytes
        gpu = c.register_tensor(torch.empty_like(t, device="cuda"))
        span.copy_to(gpu)                              # copied by the daemon

A thin layer over librdmamem (ctypes, no compiler): see :class:`Client`,
:mod:`rdmamem.errors`, :class:`Pool`, and :mod:`rdmamem.remote` for RDMA
(registrations, descriptors, transfers, plans, notifications).
"""

from __future__ import annotations

from . import errors
from ._lib import LibraryNotFoundError
from .aio import AsyncClient
from .client import Client
from .errors import CallTimeoutError, ConnectError, ConnectionLostError, RdmamemError
from .pool import Pool, PoolExhaustedError
from .region import HostRegion, Lease, Region, Span
from .remote import (
    NOTIFY_MAX,
    READ,
    WRITE,
    AsyncPlan,
    Export,
    Notification,
    Op,
    Plan,
    Registration,
    RegistrationError,
    Remote,
    TransferStatus,
)
from .errors import TransferError

__version__ = "0.1.0"

__all__ = [
    "Client",
    "AsyncClient",
    "Region",
    "HostRegion",
    "Lease",
    "Span",
    "Pool",
    "PoolExhaustedError",
    "RdmamemError",
    "CallTimeoutError",
    "ConnectError",
    "ConnectionLostError",
    "LibraryNotFoundError",
    "errors",
    "READ",
    "WRITE",
    "NOTIFY_MAX",
    "Op",
    "Registration",
    "RegistrationError",
    "Export",
    "Remote",
    "Plan",
    "AsyncPlan",
    "TransferStatus",
    "TransferError",
    "Notification",
]
