# SPDX-License-Identifier: BSD-3-Clause
"""Starting and stopping a real rdmamemd for the Python tests (conftest.py)
and benchmark (bench/bench_python.py).

As the C end-to-end suites do: the daemon runs as this user (no root), its
socket in a directory of the caller's, and says READY=1 on a notify socket
of ours before anyone connects; its output goes to daemon.log beside the
socket.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
import time
from typing import Sequence


class Daemon:
    """A running rdmamemd: its socket, process and log."""

    def __init__(self, socket_path: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.socket = socket_path
        self.proc = proc
        self.log = log


def start(path: str, directory: str, level: str = "warning", args: Sequence[str] = ()) -> Daemon:
    """rdmamemd at path on directory/rdmamemd.sock, once it said READY=1;
    RuntimeError with its log if it did not within 20 s."""
    sock = os.path.join(directory, "rdmamemd.sock")
    notify_path = os.path.join(directory, "notify")
    log = Path(directory) / "daemon.log"
    # The case's own file or none: never the installed one.
    no_config = [] if any(a.startswith("--config") or a == "--no-config" for a in args) \
        else ["--no-config"]
    env = dict(os.environ, NOTIFY_SOCKET=notify_path)
    env.pop("RDMAMEM_SOCKET", None)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as notify:
        notify.bind(notify_path)
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                [path, "--socket", sock, "--log-level", level, "--bandwidth-probe-size=4M",
                 *args, *no_config],
                stdout=logf, stderr=subprocess.STDOUT, env=env,
            )
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
        stop(proc)
        raise RuntimeError(f"rdmamemd did not become ready: {log.read_text()}")
    return Daemon(sock, proc, log)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s; reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
