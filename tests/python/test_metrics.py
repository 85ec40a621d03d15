# SPDX-License-Identifier: BSD-3-Clause
"""The metrics, read as a scraper reads them: prometheus_client's strict
OpenMetrics parser on GetMetrics' text and on the HTTP endpoint's, and its
Prometheus text parser on the other format, against what the test did."""

from __future__ import annotations

import os
import socket
import urllib.request
from typing import Iterator

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_prom

import rdmamem
from conftest import Daemon, start_daemon


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def metrics_daemon() -> Iterator[tuple[Daemon, int]]:
    port = _free_port()
    with start_daemon("--metrics-listen", f"127.0.0.1:{port}") as d:
        yield d, port


def _families(text: str, parser=parse_om) -> dict:
    return {f.name: f for f in parser(text)}


def _value(families: dict, family: str, sample: str, **labels: str) -> float:
    for s in families[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no {sample}{labels} in {family}")


def _scrape(port: int, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.headers["Content-Type"], r.read().decode()


def test_openmetrics_parses_and_counts(metrics_daemon: tuple[Daemon, int]) -> None:
    d, port = metrics_daemon
    with rdmamem.Client(d.socket, timeout=20) as c:
        before = _families(c.call("io.rdmamemd.GetMetrics")["text"])
        regions = [c.alloc(n) for n in (4096, 1 << 20)]
        after = _families(c.call("io.rdmamemd.GetMetrics")["text"])
        uid = str(os.getuid())
        assert _value(after, "rdmamemd_pinned_bytes", "rdmamemd_pinned_bytes") == 4096 + (1 << 20)
        assert _value(after, "rdmamemd_uid_pinned_bytes", "rdmamemd_uid_pinned_bytes",
                      uid=uid) == 4096 + (1 << 20)
        assert _value(after, "rdmamemd_regions", "rdmamemd_regions") == 2
        assert after["rdmamemd_calls"].type == "counter"
        assert _value(after, "rdmamemd_regions_registered", "rdmamemd_regions_registered_total") \
            == _value(before, "rdmamemd_regions_registered", "rdmamemd_regions_registered_total") + 2
        h = after["rdmamemd_import_latency_seconds"]
        assert h.type == "histogram"
        assert _value(after, h.name, h.name + "_count") \
            == _value(before, h.name, h.name + "_count") + 2
        assert _value(after, h.name, h.name + "_bucket", le="+Inf") \
            == _value(after, h.name, h.name + "_count")
        assert "rdmamemd_registration_latency_seconds" in after
        for r in regions:
            r.close()
        gone = _families(c.call("io.rdmamemd.GetMetrics")["text"])
        assert _value(gone, "rdmamemd_pinned_bytes", "rdmamemd_pinned_bytes") == 0


def test_http_both_formats(metrics_daemon: tuple[Daemon, int]) -> None:
    d, port = metrics_daemon
    ctype, text = _scrape(port, "application/openmetrics-text;version=1.0.0,*/*;q=0.1")
    assert ctype.startswith("application/openmetrics-text")
    om = _families(text)
    assert om["rdmamemd_clients"].type == "gauge"
    assert om["rdmamemd_connections_refused"].type == "counter"

    ctype, text = _scrape(port)
    assert ctype.startswith("text/plain; version=0.0.4")
    prom = _families(text, parse_prom)
    # The Prometheus parser names a counter's family without _total too.
    assert prom["rdmamemd_calls"].type == "counter"
    assert set(prom) == set(om)


def test_bad_format(metrics_daemon: tuple[Daemon, int]) -> None:
    d, _ = metrics_daemon
    with rdmamem.Client(d.socket, timeout=20) as c:
        with pytest.raises(rdmamem.errors.VarlinkInvalidParameterError):
            c.call("io.rdmamemd.GetMetrics", {"format": "json"})
