# SPDX-License-Identifier: BSD-3-Clause
"""pytest fixtures: a real rdmamemd on a temporary socket, and clients of it.

As the C end-to-end suites do: the daemon runs as this user (no root), its
socket in a fresh /tmp directory, and says READY=1 on a notify socket of the
fixture's before the first test connects (daemonproc.py, which the benchmark
shares). Paths, from the environment or the build tree of this checkout:

- RDMAMEMD: the daemon (default build/release/rdmamemd, else rdmamemd on PATH);
- RDMAMEM_LIBRARY: librdmamem (default build/release/librdmamem.so.0);
- the package: python/ of this checkout unless rdmamem is importable already.

Marks: ``cuda`` tests need torch with a GPU; they skip elsewhere, with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import daemonproc
import pytest
from daemonproc import Daemon

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


def program(name: str) -> str:
    """A program of the build (BUILD/name), else name on PATH (the GPU
    bundle puts its programs there)."""
    if (BUILD / name).exists():
        return str(BUILD / name)
    found = shutil.which(name)
    if not found:
        pytest.exit(f"no {name}: build it (make) or put it on PATH", returncode=2)
    return found


def _daemon_path() -> str:
    return os.environ.get("RDMAMEMD") or program("rdmamemd")


@contextlib.contextmanager
def start_daemon(*args: str) -> Iterator[Daemon]:
    """A daemon of its own, with args added to its command line, until the
    block ends (SIGTERM, then SIGKILL after 10 s)."""
    d = tempfile.mkdtemp(prefix="rdmamemd-py.")
    try:
        running = daemonproc.start(_daemon_path(), d, os.environ.get("RDMAMEM_TEST_LOG", "warning"),
                                   args)
    except RuntimeError as e:
        shutil.rmtree(d, ignore_errors=True)
        pytest.exit(str(e), returncode=2)
    try:
        yield running
    finally:
        daemonproc.stop(running.proc)
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
