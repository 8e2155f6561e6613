"""Rewind installs beside the frameworks agents run on, and an extra not installed is one line.

An agent's virtualenv takes the ``agent`` extra (record, replay, read through a worker), which
names no ``mcp``: CrewAI, Semantic Kernel and Strands pin an older one. Resolved by pip against
the package registry beside each framework, the framework's current release line must come out
(no ResolutionImpossible, no fallback to an old release or a placeholder); those tests need the
registry and run only on CI (``CI=true``). Without the ``mcp`` extra, or with an ``mcp`` older
than 2.3 (a stub package lacking ``mcp.server.mcpserver`` stands in for one), ``rewind mcp`` and
the worker's ``/mcp`` say in one line which extra to install, and the worker serves the rest."""

# weight: process

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.cli import rewind, user_env
from tests.support.harness import start_serve

CHECKOUT = Path(__file__).resolve().parents[1]
MCP_FIX = 'pip install "rewind-otel[mcp]"'
# The release line each framework was on when its floor was set (pip index versions): a
# resolution falling back below it (strands-agents 0.0.1 is an empty placeholder; crewai
# 1.6.1 predates the mcp pin) means an extra clashes with the framework.
FLOORS = {"crewai": "1.15", "semantic-kernel": "1.45", "strands-agents": "1.61",
          "langchain": "1.5", "llama-index-core": "0.14", "autogen-agentchat": "0.7",
          "dspy": "3.4", "openai-agents": "0.24"}
RESOLVE_TIMEOUT = 300  # seconds a cold pip cache may take for the biggest of them
on_ci = pytest.mark.skipif(
    os.environ.get("CI", "").lower() != "true",
    reason="resolves against the package registry: runs on CI (set CI=true to run it here)")


@pytest.fixture
def old_mcp(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH holding an ``mcp`` without ``mcp.server.mcpserver``, as in mcp
    releases before 2.3 (CrewAI's, Semantic Kernel's): it shadows the installed one."""
    for package in ("mcp", "mcp/server"):
        (tmp_path / "old" / package).mkdir(parents=True)
        (tmp_path / "old" / package / "__init__.py").write_text("")
    return tmp_path / "old"


def one_line_naming(done: subprocess.CompletedProcess, fix: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fix in lines[0], done.stderr
    return lines[0]


def test_rewind_mcp_with_an_old_mcp_names_the_extra(tmp_path: Path, old_mcp: Path) -> None:
    done = rewind("mcp", store=tmp_path / "store", PYTHONPATH=str(old_mcp))
    line = one_line_naming(done, MCP_FIX)
    assert line.startswith("error: `rewind mcp` needs mcp.server.mcpserver"), line
    assert "too old" in line, line


def test_serve_without_mcp_serves_all_but_mcp(tmp_path: Path, old_mcp: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(old_mcp))
    served = start_serve(tmp_path / "store")
    try:
        assert served.get("/health").status_code == 200
        assert served.get("/v1/traces").status_code == 200
        for method in ("GET", "POST"):
            answer = httpx.request(method, served.api_url + "/mcp", timeout=10)
            assert answer.status_code == 501
            assert answer.text.strip().splitlines() == [
                f"the MCP tools need the mcp extra: {MCP_FIX}"]
    finally:
        served.stop()
    assert not any("Traceback" in line for line in served.log), served.log


def fresh_venv(where: Path) -> Path:
    """A new virtualenv with nothing in it: its python. This suite's own pip works on it
    (``pip --python``): a current pip, which resolves these in a third of the time the
    one bundled with ``venv`` takes, and no pip to install first."""
    venv.create(where)
    return where / "bin" / "python"


def pip(python: Path, *args: str) -> list[str]:
    """The command running this suite's pip on the virtualenv of ``python``."""
    return [sys.executable, "-m", "pip", "--python", str(python), *args]


def resolve(python: Path, rewind_otel: Path, framework: str) -> tuple[dict[str, str], float]:
    """What pip would install for the agent extra beside ``framework`` (name: version), and
    the seconds it took; an AssertionError carrying pip's words when it cannot."""
    started = time.monotonic()
    done = subprocess.run(
        pip(python, "install", "--dry-run", "--quiet", "--report", "-",
            f"{rewind_otel}[agent]", framework),
        capture_output=True, text=True, timeout=RESOLVE_TIMEOUT)
    assert done.returncode == 0, f"{framework}: {done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    picked = {item["metadata"]["name"].lower(): item["metadata"]["version"]
              for item in report["install"]}
    return picked, time.monotonic() - started


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The frameworks resolved a core each (pip's resolver is busy, not waiting: more at once
    only makes each slower), against the checkout built once (a wheel: its metadata)."""
    where = tmp_path_factory.mktemp("resolve")
    python = fresh_venv(where / "venv")
    subprocess.run(pip(python, "wheel", "--quiet", "--no-deps", "-w", str(where),
                       str(CHECKOUT)), check=True, capture_output=True, timeout=300)
    (wheel,) = where.glob("rewind_otel-*.whl")
    with ThreadPoolExecutor(max(2, os.cpu_count() or 1)) as pool:
        futures = {name: pool.submit(resolve, python, wheel, name) for name in FLOORS}
        yield {name: future.exception() or future.result() for name, future in futures.items()}


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


@on_ci
@pytest.mark.parametrize("framework", sorted(FLOORS))
def test_agent_extra_resolves_beside_the_framework(resolutions: dict[str, object],
                                                   framework: str) -> None:
    outcome = resolutions[framework]
    if isinstance(outcome, BaseException):
        raise outcome
    picked, seconds = outcome  # type: ignore[misc]
    print(f"{framework} {picked[framework]} beside rewind-otel[agent]: {seconds:.0f} s")
    assert picked["rewind-otel"] == "0.1.0"
    assert release(picked[framework]) >= release(FLOORS[framework]), (
        f"pip fell back to {framework} {picked[framework]} (floor {FLOORS[framework]})")


@on_ci
def test_agent_extra_alone_records_and_replays_and_names_the_mcp_extra(tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    subprocess.run(pip(python, "install", "--quiet", "-e", f"{CHECKOUT}[agent]"),
                   check=True, capture_output=True, timeout=RESOLVE_TIMEOUT)
    scripts = python.parent
    env = user_env(tmp_path / "store")
    for program, args in (("rewind", ("--help",)), ("rewind-replay", ("--help",)),
                          ("rewind", ("record", "--help")), ("rewind", ("replay", "--help"))):
        done = subprocess.run([str(scripts / program), *args], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    done = subprocess.run([str(scripts / "rewind"), "mcp"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert one_line_naming(done, MCP_FIX) == (
        f"error: `rewind mcp` needs mcp, which is not installed here ({MCP_FIX})")
