# SPDX-License-Identifier: BSD-3-Clause
"""python/README.md's example, as a user runs it: the package installed with
pip into a fresh virtual environment (with the system's site packages, for
NumPy and PyTorch), offline, run from outside the source tree.

Where pytest itself runs in a virtual environment (the GPU machine's PyTorch
lives in one), a new venv's "system" site packages are the base interpreter's,
not that environment's: the new venv then gets a .pth file naming the running
environment's site packages, so it sees the same PyTorch (and setuptools, the
build backend) as a venv made from it with --system-site-packages would wish.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    text = (ROOT / "python" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "python/README.md has no python example"
    return blocks[0]


def make_venv(venv: Path) -> Path:
    """A venv with --system-site-packages (and the running venv's packages, if
    any); its python."""
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        # No ensurepip in this interpreter (some distributions split it out):
        # the venv goes without pip, and the running one's installs into it.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        str(venv)], check=True)
    py = venv / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        purelib = subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True).stdout.strip()
        parent = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                  *site.getsitepackages()}
        Path(purelib, "_rdmamem_test_parent.pth").write_text(
            "".join(p + "\n" for p in sorted(parent) if os.path.isdir(p)))
    return py


def pip_for(py: Path) -> list[str]:
    """The command that runs pip for the venv of py."""
    if subprocess.run([str(py), "-m", "pip", "--version"], capture_output=True).returncode == 0:
        return [str(py), "-m", "pip"]
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode == 0:
        return [sys.executable, "-m", "pip", "--python", str(py)]
    pytest.skip("no pip: neither the new venv (no ensurepip) nor this interpreter has one")


def test_readme_example_in_a_fresh_venv(daemon: object, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    py = make_venv(venv)
    # From a copy: setuptools builds in the tree it is given. No network: the
    # build backend comes from the system.
    src = tmp_path / "src"
    shutil.copytree(ROOT / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                        "__pycache__"))
    r = subprocess.run(pip_for(py) + ["install", "-q", "--no-build-isolation", "--no-index",
                                      str(src)], capture_output=True, text=True)
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
