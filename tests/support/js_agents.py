"""JavaScript agents the tests record with other teams' instrumentations (``tests/js``): the
packages they need, how they are run, and where their spans go (the OTLP/HTTP receiver of
``rewind serve``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.harness import Served, start_serve

JS = Path(__file__).parent.parent / "js"


def need_packages(*packages: str) -> None:
    """Skips the module without node or the packages (``npm install --prefix tests/js``), with
    a clear message; under ``CI=true`` their absence is an error instead."""
    missing = [p for p in packages if not (JS / "node_modules" / p).is_dir()]
    if shutil.which("node") is not None and not missing:
        return
    why = ("node and tests/js/node_modules are needed (npm install --prefix tests/js): "
           + ("node not found" if shutil.which("node") is None else f"missing {missing}"))
    if os.environ.get("CI") == "true":
        raise RuntimeError(why)
    pytest.skip(why, allow_module_level=True)


def node(agent: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(agent)], cwd=JS, env=env, capture_output=True,
                          text=True, timeout=120)


def otlp_traces_url(served: Served) -> str:
    """Where an agent's OTLP/HTTP exporter sends its spans."""
    [http] = {m[1] for line in served.log if (m := re.search(r"otlp-http=(\S+)", line))}
    return f"{http}/v1/traces"


def listed_trace(served: Served, service: str, spans: int, timeout: float = 30) -> dict:
    """The service's one trace as the runs list shows it, once ``spans`` of its spans are in."""
    deadline = time.monotonic() + timeout
    while True:
        traces = served.get(f"/v1/traces?service={service}&include_replays=true").json()["traces"]
        if (traces and traces[0]["Spans"] >= spans) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    # one run was recorded: a second trace would be a run split in two, not an older run
    assert len(traces) == 1, f"{service}: {len(traces)} traces listed for one run: {traces}"
    return traces[0]


@dataclass
class JsRun:
    """An agent run once against the fake LLM through ``rewind serve``."""

    served: Served
    listed: dict  # its trace as the runs list shows it
    output: str
    env: dict[str, str]  # the environment it ran in (the fake LLM is gone)
    asked: int  # requests the fake LLM answered


def recorded_run(store_dir: Path, agent: Path, service: str, spans: int,
                 llm_path: str = "") -> Iterator[JsRun]:
    """For a module fixture: ``agent`` run once (``LLM_URL``: the fake LLM's base URL and
    ``llm_path``), yielded once ``spans`` of its spans are stored; the server stops after."""
    served = start_serve(store_dir)
    try:
        with FakeLLMServer() as llm:
            env = served.env(LLM_URL=llm.base_url + llm_path, OTEL_SERVICE_NAME=service,
                             OTLP_TRACES_URL=otlp_traces_url(served))
            done = node(agent, env)
            assert done.returncode == 0, done.stderr
            asked = len(llm.requests)
        yield JsRun(served, listed_trace(served, service, spans), done.stdout, env, asked)
    finally:
        served.stop()


def inspected_totals(run: JsRun) -> dict:
    """``rewind inspect --json``'s totals of the run, which skipped nothing."""
    inspected = rewind("inspect", run.listed["TraceId"], "--json", env=run.env)
    assert inspected.returncode == 0, inspected.stderr
    shown = json.loads(inspected.stdout)
    assert shown["skipped"] == []
    return shown["totals"]
