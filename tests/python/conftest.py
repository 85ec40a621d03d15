# SPDX-License-Identifier: BSD-3-Clause
"""pytest fixtures: a real rdmamemd on a temporary socket, and clients of it.

As the C end-to-end suites do: the daemon runs as this user (no root), its
socket in a fresh /tmp directory, and says READY=1 on a notify socket of the
fixture's before the first test connects. Paths, from the environment or the
build tree of this checkout:

- RDMAMEMD: the daemon (default build/release/rdmamemd, else rdmamemd on PATH);
- RDMAMEM_LIBRARY: librdmamem (default build/release/librdmamem.so.0);
- the package: python/ of this checkout unless rdmamem is importable already.

Marks: ``cuda`` tests need torch with a GPU; they skip elsewhere, with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("RDMAMEM_BUILD", ROOT / "build" / "release"))

if "RDMAMEM_LIBRARY" not in os.environ and (BUILD / "librdmamem.so.0").exists():
    os.environ["RDMAMEM_LIBRARY"] = str(BUILD / "librdmamem.so.0")
try:
    import rdmamem  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs PyTorch with a CUDA device (the GPU machine)")


def _daemon_path() -> str:
    env = os.environ.get("RDMAMEMD")
    if env:
        return env
    if (BUILD / "rdmamemd").exists():
        return str(BUILD / "rdmamemd")
    found = shutil.which("rdmamemd")
    if not found:
        pytest.exit("no rdmamemd: build it (make) or set RDMAMEMD", returncode=2)
    return found


class Daemon:
    """A running rdmamemd: its socket, process and log."""

    def __init__(self, socket_path: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.socket = socket_path
        self.proc = proc
        self.log = log


@contextlib.contextmanager
def start_daemon(*args: str) -> Iterator[Daemon]:
    """A daemon of its own, with args added to its command line, until the
    block ends (SIGTERM, then SIGKILL after 10 s)."""
    d = tempfile.mkdtemp(prefix="rdmamemd-py.")
    sock = os.path.join(d, "rdmamemd.sock")
    notify_path = os.path.join(d, "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    notify.bind(notify_path)
    log = Path(d) / "daemon.log"
    env = dict(os.environ, NOTIFY_SOCKET=notify_path)
    env.pop("RDMAMEM_SOCKET", None)
    level = os.environ.get("RDMAMEM_TEST_LOG", "warning")
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [_daemon_path(), "--socket", sock, "--log-level", level, "--bandwidth-probe-size=4M",
             *args],
            stdout=logf, stderr=subprocess.STDOUT, env=env,
        )
    try:
        deadline = time.monotonic() + 20
        ready = False
        while not ready and time.monotonic() < deadline:
            notify.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                ready = b"READY=1" in notify.recv(4096)
            except socket.timeout:
                break
            if proc.poll() is not None:
                break
        if not ready:
            proc.kill()
            pytest.exit(f"rdmamemd did not become ready: {log.read_text()}", returncode=2)
        yield Daemon(sock, proc, log)
    finally:
        notify.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon for the session."""
    with start_daemon() as d:
        yield d


@pytest.fixture
def client(daemon: Daemon) -> Iterator["rdmamem.Client"]:
    """A connection of its own for each test."""
    import rdmamem

    with rdmamem.Client(daemon.socket, timeout=20) as c:
        yield c
