"""Refused requests leave no memory behind: the real ``rewind collector`` process (with its raised
GC thresholds) answers a fixed sequence of refused ~1 MB requests on both receivers, and its
resident memory grows by less than a stated bound. Measured by RSS growth, not by time."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from tests.support.collector_client import grpc_export

MIB = 1 << 20
# Before the fix each gzip bomb below kept its ~64 MiB inflated buffer (80 such requests took
# a collector from 392 MB to 5.7 GB); now the whole sequence may cost at most this much.
GROWTH_BOUND_MB = 100
READY = re.compile(r"otlp-grpc=(\S+) otlp-http=(\S+) ")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@pytest.fixture
def collector(tmp_path) -> Iterator[tuple[subprocess.Popen, str, str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "collector",
         "--clickhouse", f"chdb://{tmp_path / 'store'}", "--spool-dir", str(tmp_path / "spool"),
         "--grpc-port", "0", "--http-port", "0", "--convert-workers", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    ready = READY.search(process.stdout.readline())
    if ready is None:
        process.kill()
        raise AssertionError("the collector did not start")
    yield process, ready.group(1), ready.group(2)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


# About 1 MB each; the default 64 MiB message limit applies.
BOMB = gzip.compress(b"\x00" * (1 << 30), 9)  # inflates past the limit: 413
BAD_JSON = b'{"resourceSpans": [' + b'{"scopeSpans": 1},' * 58_000 + b"}"  # 400
BAD_PROTOBUF = b"\x0a\xff\xff\xff\xff\x0f" + os.urandom(MIB)  # 400 / INVALID_ARGUMENT
PROTO = {"content-type": "application/x-protobuf"}


def refused_sequence(http_url: str, grpc_endpoint: str, rounds: int) -> None:
    with httpx.Client(timeout=60) as client:
        for _ in range(rounds):
            reply = client.post(http_url + "/v1/traces", content=BOMB,
                                headers={**PROTO, "content-encoding": "gzip"})
            assert reply.status_code == 413
            reply = client.post(http_url + "/v1/traces", content=BAD_JSON,
                                headers={"content-type": "application/json"})
            assert reply.status_code == 400
            reply = client.post(http_url + "/v1/traces", content=BAD_PROTOBUF, headers=PROTO)
            assert reply.status_code == 400
            with pytest.raises(grpc.RpcError) as raised:
                grpc_export(grpc_endpoint, BAD_PROTOBUF)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_refused_requests_leave_no_memory_behind(collector):
    process, grpc_endpoint, http_url = collector
    assert len(BOMB) > 900_000 and len(BAD_JSON) > 900_000
    refused_sequence(http_url, grpc_endpoint, rounds=3)  # the allocator's working set
    before = rss_mb(process.pid)
    refused_sequence(http_url, grpc_endpoint, rounds=20)  # 80 refused ~1 MB requests
    growth = rss_mb(process.pid) - before
    print(f"RSS {before:.0f} MB, +{growth:.0f} MB after 80 refused requests")
    assert growth < GROWTH_BOUND_MB
    assert httpx.get(http_url + "/ready").status_code == 200  # and it still serves
