# SPDX-License-Identifier: BSD-3-Clause
"""Restarts that keep regions, with a stand-in for systemd's fd store.

The daemon is the real one; what plays systemd here is ServiceManager: the
notify socket (READY=1, FDSTORE=1 with FDNAME=, FDSTOREREMOVE=1, as
sd_notify(3) sends them), a store of the fds it was given, and a start that
passes them back as systemd does (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID,
fds from 3 on; FDSTORE=N as systemd 254 sets it). The real systemd runs the
same steps in `make vmsystemd` (tests/vm/systemd/test.sh, "restart keeps
regions"). The clients are librdmamem's, through the Python package: they
reconnect and reclaim by themselves.
"""

from __future__ import annotations

import array
import errno
import fcntl
import mmap
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
import rdmamem
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from conftest import BUILD, _daemon_path

STORE_MAX = 64
GRACE_SEC = 6


class ServiceManager:
    """systemd's part: the notify socket, the fd store, the start."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.sock = str(directory / "rdmamemd.sock")
        self.notify_path = str(directory / "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.notify.bind(self.notify_path)
        self.store: list[tuple[str, int]] = []  # (FDNAME, fd), in the order given
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = directory / "daemon.log"

    # -- the notify socket -------------------------------------------------

    def pump(self, timeout: float = 0.0) -> list[str]:
        """Reads the messages that come within timeout s (those waiting, with
        0), applies the store's, returns their texts."""
        texts = []
        deadline = time.monotonic() + timeout
        while True:
            self.notify.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                msg, anc, _, _ = self.notify.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
            except (socket.timeout, BlockingIOError):
                break
            fds = array.array("i")
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            for fd in fds:  # (recvmsg() does not make them close-on-exec)
                os.set_inheritable(fd, False)
            text = msg.decode()
            texts.append(text)
            fields = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
            if fields.get("FDSTORE") == "1":
                for fd in fds:
                    self.store.append((fields.get("FDNAME", "stored"), fd))
                fds = array.array("i")
            elif fields.get("FDSTOREREMOVE") == "1":
                for name, fd in [e for e in self.store if e[0] == fields.get("FDNAME")]:
                    os.close(fd)
                    self.store.remove((name, fd))
            for fd in fds:
                os.close(fd)
        return texts

    def wait_for(self, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(what in t for t in self.pump(0.1)):
                self.pump(0.2)
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
        raise AssertionError(f"no {what} from rdmamemd: {self.log.read_text()}")

    def names(self, prefix: str) -> list[str]:
        return sorted(n for n, _ in self.store if n.startswith(prefix))

    # -- start and stop ------------------------------------------------------

    def start(self, *args: str, fdstore: int = STORE_MAX) -> None:
        passed = list(self.store)

        def child() -> None:
            # Each stored fd to 3, 4, ... as systemd passes them; the
            # originals are close-on-exec.
            high = [os.dup(fd) for _, fd in passed]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
                os.close(fd)
            os.environ["LISTEN_PID"] = str(os.getpid())

        env = dict(os.environ, NOTIFY_SOCKET=self.notify_path, FDSTORE=str(fdstore))
        env.pop("RDMAMEM_SOCKET", None)
        for k in ("LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
            env.pop(k, None)
        if passed:
            env["LISTEN_FDS"] = str(len(passed))
            env["LISTEN_FDNAMES"] = ":".join(n for n, _ in passed)
        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            with open(self.log, "ab") as logf:
                self.proc = subprocess.Popen(
                    [_daemon_path(), "--socket", self.sock, "--no-config", "--log-level=info",
                     "--bandwidth-probe-size=0", f"--reclaim-grace-sec={GRACE_SEC}", *args],
                    stdout=logf, stderr=subprocess.STDOUT, close_fds=False,
                    preexec_fn=child if passed else None,
                )
        finally:
            os.environ.clear()
            os.environ.update(old)
        self.wait_for("READY=1")

    def kill(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(20)
        self.pump()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for _, fd in self.store:
            os.close(fd)
        self.store = []
        self.notify.close()


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
    ctl = subprocess.run([str(BUILD / "rdmamemctl"), "regions"], capture_output=True, text=True,
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
