# SPDX-License-Identifier: BSD-3-Clause
"""CUDA tensors (both PyTorch allocator modes). Skipped without a GPU; on the
GPU machine see tests/gpu/README.md ("Python")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import torch

    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device: runs on the GPU machine "
                       "(tests/gpu/README.md, Python)"),
]

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("alloc_conf", ["", "expandable_segments:True"])
def test_cuda_tensors(daemon: object, alloc_conf: str) -> None:
    env = dict(os.environ, RDMAMEM_SOCKET=daemon.socket,  # type: ignore[attr-defined]
               PYTORCH_CUDA_ALLOC_CONF=alloc_conf)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, str(HERE / "cuda_checks.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
