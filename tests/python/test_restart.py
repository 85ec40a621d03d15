# SPDX-License-Identifier: BSD-3-Clause
"""Restarts that keep regions, with a stand-in for systemd's fd store.

The daemon is the real one; what plays systemd here is ServiceManager
(servicemanager.py). The real systemd runs the
same steps in `make vmsystemd` (tests/vm/systemd/test.sh, "restart keeps
regions"). The clients are librdmamem's, through the Python package: they
reconnect and reclaim by themselves.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import rdmamem
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from conftest import program
from servicemanager import GRACE_SEC, ServiceManager


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ServiceManager]:
    m = ServiceManager(tmp_path)
    yield m
    m.close()


def sealed_memfd(size: int, fill: bytes) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create("restart-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    m = mmap.mmap(fd, size)
    m[:] = (fill * (size // len(fill) + 1))[:size]
    return fd, m


def count_fds(pid: int, kind: str) -> int:
    """The daemon's open fds whose link names kind ("memfd:")."""
    d = Path(f"/proc/{pid}/fd")
    return sum(1 for e in d.iterdir() if os.readlink(e).startswith(kind))


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stop", "crash"])
def test_restart_keeps_regions(manager: ServiceManager, how: int) -> None:
    manager.start()
    size = 1 << 20
    fd1, map1 = sealed_memfd(size, b"kept across a restart ")
    fd2, _ = sealed_memfd(4096, b"unregistered ")
    fd3, _ = sealed_memfd(8192, b"nobody reclaims ")

    owner = rdmamem.Client(manager.sock)
    other = rdmamem.Client(manager.sock)
    reclaimed: list[tuple[int, int, list]] = []
    owner.on_reclaim(lambda region, error, regs: reclaimed.append((region, error, regs)))
    r1 = owner.register_memfd(fd1)
    r2 = owner.register_memfd(fd2)
    r3 = other.register_memfd(fd3)
    owner.call("io.rdmamemd.Share", {"region": str(r1.id), "uid": 4242, "readonly": True})
    # Register answers with the token; a region asked not to be kept has none.
    raw = owner.call("io.rdmamemd.Register", {"fd": 0, "keep": False}, fds=[fd2])
    assert "reclaim_token" not in raw
    manager.pump(0.3)
    assert len(manager.names("rdmamem-r1.")) == 3, manager.store
    r2.unregister()
    manager.pump(0.3)
    names = manager.names("rdmamem-r1.")
    assert len(names) == 2 and not any(n.startswith(f"rdmamem-r1.{r2.id}.") for n in names)
    assert manager.names("rdmamem-state1."), "the shares went into no state"

    # A Read through the connection's staging region before the restart: the
    # first call after it reads again, and must reconnect before it uses any
    # id of the old connection.
    assert r1.read(0, size) == bytes(map1[:size])
    # A connection that is up is not reconnected (it would drop all it holds).
    with pytest.raises(OSError) as e:
        owner.reconnect()
    assert e.value.errno == errno.EISCONN

    # The restart: the clients' connections break; the store keeps r1 and r3.
    manager.kill(how)
    assert len(manager.names("rdmamem-r1.")) == 2
    # A file this daemon did not store (another version's): the new daemon
    # takes it out of the store instead of failing to start.
    manager.store.append(("someone-else", os.memfd_create("junk")))
    manager.start()
    assert manager.names("someone-else") == []
    # The first call reconnects and reclaims, then reads through a new
    # staging region.
    assert r1.read(0, size) == bytes(map1[:size]), "the restored region's bytes differ"

    # Each kept region the owner held, told once (no RDMA device here: no
    # registrations); r2b was registered with keep false and is not.
    assert reclaimed == [(r1.id, 0, [])]
    got = owner.call("io.rdmamemd.GetRegion", {"region": str(r1.id)})
    assert got["owner"]["pid"] == os.getpid()
    assert "reclaim_in_msec" not in got
    assert {"uid": 4242, "readonly": True} in got["shares"]
    map1[:5] = b"after"
    assert r1.read(0, 5) == b"after", "the daemon maps other pages than the client"

    # r3's owner never calls again: it waits, listed, then goes with the grace.
    lst = owner.call("io.rdmamemd.ListRegions")
    waiting = [r for r in lst["regions"] if r["region"] == str(r3.id)]
    assert waiting and "reclaim_in_msec" in waiting[0], lst
    ctl = subprocess.run([program("rdmamemctl"), "regions"], capture_output=True, text=True,
                         env=dict(os.environ, RDMAMEM_SOCKET=manager.sock, NO_COLOR="1"),
                         timeout=30)
    assert re.search(rf"^{r3.id} .*\(reclaim in \d+ s\)", ctl.stdout, re.M), ctl.stdout
    # A region the caller does not own, or with a wrong token, stays waiting.
    with pytest.raises(rdmamem.RdmamemError) as e:
        owner.call("io.rdmamemd.Reclaim", {"region": str(r3.id), "token": "0" * 32})
    assert e.value.name in ("io.rdmamemd.PermissionDenied", "io.rdmamemd.NoSuchRegion")
    with pytest.raises(rdmamem.RdmamemError) as e:
        owner.call("io.rdmamemd.Reclaim", {"region": str(r1.id), "token": "0" * 32})
    assert e.value.name == "io.rdmamemd.NoSuchRegion"

    # New regions get new ids, above the kept ones, and are kept too.
    fd4, _ = sealed_memfd(4096, b"new ")
    r4 = owner.register_memfd(fd4)
    assert r4.id > max(r1.id, r3.id)
    manager.pump(0.3)
    assert any(n.startswith(f"rdmamem-r1.{r4.id}.") for n in manager.names("rdmamem-r1."))

    deadline = time.monotonic() + GRACE_SEC + 5
    while time.monotonic() < deadline:
        manager.pump(0.2)
        if not any(n.startswith(f"rdmamem-r1.{r3.id}.") for n in manager.names("rdmamem-r1.")):
            break
    assert not any(n.startswith(f"rdmamem-r1.{r3.id}.") for n in manager.names("rdmamem-r1."))
    ids = [r["region"] for r in owner.call("io.rdmamemd.ListRegions")["regions"]]
    assert str(r3.id) not in ids and str(r1.id) in ids
    # The metrics count it: 2 restored, 1 reclaimed, 1 released unclaimed,
    # 2 in the store (r1 and r4), none waiting.
    fams = {f.name: f for f in parse_om(owner.call("io.rdmamemd.GetMetrics")["text"])}

    def value(family: str, sample: str) -> float:
        return next(x.value for x in fams[family].samples if x.name == sample)

    assert value("rdmamemd_regions_restored", "rdmamemd_regions_restored_total") == 2
    assert value("rdmamemd_regions_reclaimed", "rdmamemd_regions_reclaimed_total") == 1
    assert value("rdmamemd_regions_unclaimed", "rdmamemd_regions_unclaimed_total") == 1
    assert value("rdmamemd_regions_awaiting_reclaim", "rdmamemd_regions_awaiting_reclaim") == 0
    assert value("rdmamemd_regions_kept", "rdmamemd_regions_kept") == 2

    # Nothing leaks: with every region gone, the daemon holds none of their
    # memfds and the store only the state.
    r1.unregister()
    r4.unregister()
    manager.pump(0.3)
    assert manager.names("rdmamem-r1.") == []
    assert manager.proc is not None
    # (A large region's memory is released on the daemon's thread pool.)
    deadline = time.monotonic() + 5
    while count_fds(manager.proc.pid, "/memfd:restart-test") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count_fds(manager.proc.pid, "/memfd:restart-test") == 0, \
        sorted(os.readlink(e) for e in Path(f"/proc/{manager.proc.pid}/fd").iterdir())
    owner.close()
    other.close()
    for fd in (fd1, fd2, fd3, fd4):
        os.close(fd)


def test_no_store_no_token(manager: ServiceManager) -> None:
    """Without $FDSTORE (a unit without a store) nothing is kept: Register
    answers no token and the notify socket gets no fd."""
    manager.start(fdstore=0)
    fd, _ = sealed_memfd(4096, b"x")
    c = rdmamem.Client(manager.sock)
    raw = c.call("io.rdmamemd.Register", {"fd": 0}, fds=[fd])
    assert "reclaim_token" not in raw
    manager.pump(0.3)
    assert manager.store == []
    c.close()
    os.close(fd)


try:
    import torch

    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False


@pytest.mark.cuda
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device: runs on the GPU machine "
                    "(tests/gpu/README.md, Python)")
@pytest.mark.parametrize("alloc_conf", ["", "expandable_segments:True"])
def test_restart_keeps_cuda_regions(alloc_conf: str) -> None:
    """A registered CUDA tensor (an IPC handle with cudaMalloc, VMM
    allocations with expandable segments) outlives a stop and a crash of the
    daemon: cuda_restart.py, in a process of its own."""
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=alloc_conf)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "cuda_restart.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
