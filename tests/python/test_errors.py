# SPDX-License-Identifier: BSD-3-Clause
"""The exception classes: one per Varlink error of the C table, mapped by name."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

import rdmamem
from rdmamem import errors

ROOT = Path(__file__).resolve().parents[2]


def test_table_is_generated_from_the_c_table() -> None:
    # One source of truth: the checked-in table is what the generator writes
    # from proto/errors.c now (make python-errors rewrites it).
    sys.path.insert(0, str(ROOT / "python" / "tools"))
    import gen_errors

    want = gen_errors.render(gen_errors.parse(ROOT))
    have = (ROOT / "python" / "rdmamem" / "_errtable.py").read_text()
    assert have == want, "python/rdmamem/_errtable.py is stale: run make python-errors"


def test_every_error_of_the_idl_has_a_class() -> None:
    # The IDL files are the daemon's own description (the idl suite checks them).
    names = set()
    for f in ("io.rdmamemd.varlink", "org.varlink.service.varlink"):
        iface = f[: -len(".varlink")]
        for line in (ROOT / "proto" / f).read_text().splitlines():
            if line.startswith("error "):
                names.add(f"{iface}.{line.split()[1]}")
    assert names, "no errors found in the IDL files"
    missing = names - set(errors.errors_by_name)
    assert not missing, f"no exception class for {sorted(missing)}"


def test_classes_carry_name_message_errno() -> None:
    e = errors.from_failure(errno.ENOENT, "io.rdmamemd.NoSuchRegion", "no region 7", {"message": "x"})
    assert type(e) is errors.errors_by_name["io.rdmamemd.NoSuchRegion"]
    assert type(e).__name__ == "NoSuchRegionError"
    assert isinstance(e, rdmamem.RdmamemError) and isinstance(e, OSError)
    assert (e.name, e.message, e.errno, e.parameters) == (
        "io.rdmamemd.NoSuchRegion", "no region 7", errno.ENOENT, {"message": "x"})
    assert issubclass(errors.errors_by_name["io.rdmamemd.LockTimeout"], TimeoutError)
    assert errors.errors_by_name["org.varlink.service.PermissionDenied"] is not \
        errors.errors_by_name["io.rdmamemd.PermissionDenied"]


def test_local_failures() -> None:
    assert isinstance(errors.from_failure(errno.ETIMEDOUT, None, None), errors.CallTimeoutError)
    assert isinstance(errors.from_failure(errno.ECONNRESET, None, None), ConnectionError)
    e = errors.from_failure(errno.EINVAL, "org.example.Unknown", "what")
    assert type(e) is rdmamem.RdmamemError and e.name == "org.example.Unknown"


def test_daemon_error_maps_to_its_class(client: rdmamem.Client) -> None:
    with pytest.raises(errors.errors_by_name["io.rdmamemd.NoSuchRegion"]) as ei:
        client.call("io.rdmamemd.Unregister", {"region": 987654})
    assert ei.value.errno == errno.ENOENT
    assert "987654" in ei.value.message
    with pytest.raises(errors.errors_by_name["org.varlink.service.MethodNotFound"]):
        client.call("io.rdmamemd.NoSuchMethodHere")


def test_connect_failure() -> None:
    with pytest.raises(ConnectionError) as ei:
        rdmamem.Client("/nonexistent/rdmamemd.sock")
    assert ei.value.errno == errno.ENOENT
