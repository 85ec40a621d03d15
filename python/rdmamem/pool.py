# SPDX-License-Identifier: BSD-3-Clause
"""A pool: one registered host region and a sub-allocator over it.

``pool.tensor(shape, dtype)`` and ``pool.array(shape, dtype)`` carve blocks out
of the pool's mapping with no call to the daemon: the region is registered
once, and every tensor of the pool is bytes of it (:meth:`Pool.span` says
which, for reads, writes and copies through the daemon).

The allocator: first fit over a list of free extents kept in address order;
every block starts at a multiple of ``alignment`` (256 bytes by default: cache
lines, DMA and the widest dtypes) and its size is rounded up to one. A freed
block merges with free neighbours, so a pool freed in full is one extent
again. Blocks never move (tensors hold their addresses), so a pool can
fragment: after mixed sizes are freed out of order, a request may fail while
the free bytes add up to more; ``largest_free`` tells. Size the pool for the
peak, or keep one pool per block size.

Freeing: a block returns to the pool when the last array or tensor over it
(views included) is gone; a finalizer queues it, and the next allocation takes
it back (a finalizer may run from the garbage collector in any thread, inside
the allocator too, so it takes no lock).
"""

from __future__ import annotations

import bisect
import ctypes
import threading
import weakref
from collections import deque
from typing import Any, Optional

from .region import HostRegion, Span


class PoolExhaustedError(MemoryError):
    """No free extent of the pool fits the request."""


class Pool:
    """Sub-allocates one :class:`HostRegion` (``region``), every block aligned
    to ``alignment`` bytes; made by :meth:`Client.pool`. The allocator, how
    blocks are freed and how a pool fragments: the module's doc. A context
    manager that unregisters the region on exit."""

    def __init__(self, region: HostRegion, alignment: int = 256) -> None:
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError("alignment must be a power of two")
        self.region = region
        self.alignment = alignment
        self._lock = threading.Lock()
        # Free extents: parallel sorted lists of offsets and sizes.
        self._off: list[int] = [0]
        self._len: list[int] = [region.nbytes - region.nbytes % alignment]
        self._pending: deque[tuple[int, int]] = deque()
        self._blocks: dict[int, int] = {}  # offset -> size of live blocks

    # -- the allocator ----------------------------------------------------

    def _drain(self) -> None:
        while self._pending:
            off, size = self._pending.popleft()
            self._free_locked(off, size)

    def _free_locked(self, off: int, size: int) -> None:
        del self._blocks[off]
        i = bisect.bisect_left(self._off, off)
        # Merge with the extent after, then with the one before.
        if i < len(self._off) and off + size == self._off[i]:
            size += self._len[i]
            del self._off[i], self._len[i]
        if i > 0 and self._off[i - 1] + self._len[i - 1] == off:
            self._len[i - 1] += size
        else:
            self._off.insert(i, off)
            self._len.insert(i, size)

    def _alloc(self, nbytes: int) -> tuple[int, int]:
        size = max(self.alignment, -(-nbytes // self.alignment) * self.alignment)
        with self._lock:
            self._drain()
            for i, n in enumerate(self._len):
                if n >= size:
                    off = self._off[i]
                    if n == size:
                        del self._off[i], self._len[i]
                    else:
                        self._off[i] += size
                        self._len[i] -= size
                    self._blocks[off] = size
                    return off, size
            largest = max(self._len, default=0)
        raise PoolExhaustedError(
            f"pool of {self.region.nbytes} bytes: no free extent of {size} bytes "
            f"(largest {largest}, free {self.free_bytes})"
        )

    def _block(self, nbytes: int) -> tuple[Any, int]:
        off, size = self._alloc(nbytes)
        # The block's owner: a ctypes array over the mapping. Whatever takes a
        # buffer of it holds it (a tensor of torch.frombuffer directly, an
        # array of np.frombuffer and a memoryview through their managed
        # buffer), so it dies with the last view. A memoryview slice could not
        # serve: a memoryview made from it refers to the mapping, not to it.
        owner = (ctypes.c_char * nbytes).from_buffer(self.region.mmap, off)
        weakref.finalize(owner, self._pending.append, (off, size))
        return owner, off

    @property
    def free_bytes(self) -> int:
        """Bytes in free extents (blocks freed since the last allocation not counted)."""
        return sum(self._len)

    @property
    def largest_free(self) -> int:
        """The largest request that fits now."""
        with self._lock:
            self._drain()
            return max(self._len, default=0)

    # -- what users call --------------------------------------------------

    def buffer(self, nbytes: int) -> memoryview:
        """A writable memoryview of nbytes of the pool; the block is freed with it."""
        return memoryview(self._block(nbytes)[0]).cast("B")

    def array(self, shape: Any, dtype: Any = "float32") -> Any:
        """A NumPy array in the pool (zeroed only if the block was never used)."""
        import numpy as np

        dt = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        mv, _ = self._block(max(1, count * dt.itemsize))
        return np.frombuffer(mv, dtype=dt, count=count).reshape(shape)

    def tensor(self, shape: Any, dtype: Any = None) -> Any:
        """A CPU tensor in the pool (torch.frombuffer over the block: no copy)."""
        import torch

        dt = dtype if dtype is not None else torch.float32
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = 1
        for s in shape:
            count *= int(s)
        itemsize = _torch_itemsize(dt)
        mv, _ = self._block(max(1, count * itemsize))
        if count == 0:
            return torch.empty(shape, dtype=dt)
        return torch.frombuffer(mv, dtype=dt, count=count).view(shape)

    def offset_of(self, obj: Any) -> Optional[int]:
        """Where an array's or tensor's first byte lies in the pool, or None
        when it is not the pool's memory."""
        addr = _address(obj)
        if addr is None:
            return None
        off = addr - self.region.address
        return off if 0 <= off < self.region.nbytes else None

    def span(self, obj: Any) -> Span:
        """The pool region's bytes under a contiguous array or tensor of the pool."""
        off = self.offset_of(obj)
        if off is None:
            raise ValueError("not memory of this pool")
        return Span(self.region, off, _nbytes(obj), owns=False, keep=obj)

    def close(self) -> None:
        """Unregisters the pool's region; live tensors keep the mapping. Its
        client stops taking the pool's addresses for its memory: a pool made
        later may be mapped where this one was."""
        pools = self.region.client._pools
        if self in pools:
            pools.remove(self)
        self.region.close()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Pool region {self.region.id}: {self.region.nbytes} bytes, {self.free_bytes} free>"


def _address(obj: Any) -> Optional[int]:
    if hasattr(obj, "data_ptr"):  # torch
        return int(obj.data_ptr())
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    return None


def _nbytes(obj: Any) -> int:
    if hasattr(obj, "element_size"):
        if not obj.is_contiguous():
            raise ValueError("a span needs a contiguous tensor")
        return int(obj.numel() * obj.element_size())
    if not obj.flags["C_CONTIGUOUS"]:
        raise ValueError("a span needs a contiguous array")
    return int(obj.nbytes)


_ITEMSIZE: dict[Any, int] = {}


def _torch_itemsize(dt: Any) -> int:
    """A torch dtype's size in bytes, remembered (asking costs a tensor)."""
    n = _ITEMSIZE.get(dt)
    if n is None:
        import torch

        n = _ITEMSIZE[dt] = torch.empty((), dtype=dt).element_size()
    return n
