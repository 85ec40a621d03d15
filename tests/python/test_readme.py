# SPDX-License-Identifier: BSD-3-Clause
"""python/README.md's example, as a user runs it: the package installed with
pip into a fresh virtual environment (with the system's site packages, for
NumPy and PyTorch), run from outside the source tree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    text = (ROOT / "python" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "python/README.md has no python example"
    return blocks[0]


def test_readme_example_in_a_fresh_venv(daemon: object, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = venv / "bin" / "python"
    # From a copy: setuptools builds in the tree it is given. No network: the
    # build backend comes from the system.
    src = tmp_path / "src"
    shutil.copytree(ROOT / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                        "__pycache__"))
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-index", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["RDMAMEM_SOCKET"] = daemon.socket  # type: ignore[attr-defined]
    r = subprocess.run([str(py), str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "copied 4194304 bytes" in r.stdout
    assert "share_memory_(): a CPU tensor from share_memory_()" in r.stdout
    # The installed package, not the source tree's.
    r = subprocess.run([str(py), "-c", "import rdmamem; print(rdmamem.__file__)"], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert str(venv) in r.stdout
    assert (Path(r.stdout.strip()).parent / "py.typed").exists()
