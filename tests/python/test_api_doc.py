# SPDX-License-Identifier: BSD-3-Clause
"""docs/python-api.md is what python/tools/gen_api.py makes of the package's
docstrings now: a docstring or signature changed without `make python-api`
fails here."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"


def gen_api() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "python" / "tools" /
                                                  "gen_api.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_reference_is_up_to_date() -> None:
    gen = gen_api()
    want = gen.render(gen.load())
    have = DOC.read_text()
    if have != want:
        diff = "".join(list(difflib.unified_diff(
            have.splitlines(True), want.splitlines(True), "docs/python-api.md (committed)",
            "gen_api.py (the docstrings now)"))[:60])
        pytest.fail(f"docs/python-api.md is out of date: run make python-api\n{diff}")


def test_a_docstring_change_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    # The comparison above is only worth something if the output follows the
    # docstrings: change one, and the reference must change with it.
    gen = gen_api()
    pkg = gen.load()
    before = gen.render(pkg)
    monkeypatch.setattr(pkg.Client.ping, "__doc__", "A changed docstring.")
    after = gen.render(pkg)
    assert before != after and "A changed docstring." in after


def test_every_public_name_has_a_docstring() -> None:
    gen = gen_api()
    assert gen.missing(gen.load()) == []
