# SPDX-License-Identifier: BSD-3-Clause
"""A stand-in for systemd's part in restarts that keep regions: the notify
socket (READY=1, FDSTORE=1 with FDNAME=, FDSTOREREMOVE=1, as sd_notify(3)
sends them), a store of the fds it was given, and a start that passes them
back as systemd does (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID, fds from 3
on; FDSTORE=N as systemd 254 sets it). Used by test_restart.py and by
cuda_restart.py (a process of its own per PyTorch allocator mode)."""

from __future__ import annotations

import array
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

from conftest import _daemon_path

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
