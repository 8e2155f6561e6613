"""Every ``rewind replay`` passes through the proxy's run path (``proxy_runs.run_command``
decides whether the run needs a proxy): a replay that does not loads neither the upstreams
table nor the redaction it brings (about 1.3 ms of every start), and one that does still
finds them."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cli import user_env

PROXY_ONLY = ("rewind.replay.play.proxy.upstreams", "rewind.exporter.core.redaction",
              "rewind.replay.play.proxy.listener", "rewind.replay.play.proxy.forwarding")


def _imported(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, timeout=60, env=user_env())
    assert done.returncode == 0, done.stderr
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_replay_path_loads_nothing_only_a_proxy_needs():
    modules = _imported("from rewind.replay.play.proxy.proxy_runs import run_command")
    assert "rewind.replay.play.proxy.proxy_runs" in modules
    assert {m for m in PROXY_ONLY if m in modules} == set()


def test_a_proxy_recording_still_finds_them():
    modules = _imported("from rewind.replay.play.proxy.proxy_runs import ProxyRecording\n"
                        "ProxyRecording('http://127.0.0.1:9', 'x', root=False).close()")
    assert {m for m in PROXY_ONLY if m in modules} == set(PROXY_ONLY)
