"""MCP benchmark: ``get_run`` of a 1,000-step run through the worker's ``/mcp`` (the real
``mcp`` client over streamable HTTP, every page of the outline) as a ratio to the same run's
outline JSON from the worker API (``GET /v1/ui/traces/{id}``, what the run page draws), both
warm, measured in one run against one ``rewind worker``. The two are interleaved round by round,
taking turns to go first (round 0 warms the worker's cache and the session and is not counted);
printed: the median and range of the per-round ratio MCP / API and the load average. Target:
within 1.5x.

The run is the bisect benchmark's (the web UI benchmark writes it: ``ui_page.write_run``).

    python bench/mcp_get_run.py [--steps 1000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from rounds import load, ratios, spread

HERE = Path(__file__).resolve().parent
TARGET = 1.5


def _ui_page() -> Any:
    spec = importlib.util.spec_from_file_location("ui_page", HERE / "ui_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def measure(api: str, trace: str, rounds: int) -> tuple[dict[str, list[float]], int,
                                                                int, int]:
    """Per-round seconds of each side, the outline's sizes (MCP, API) and the MCP pages."""
    sizes = {"mcp": 0, "api": 0}
    pages = 0
    async with Client(f"{api}/mcp") as mcp_client, httpx.AsyncClient(timeout=60) as http:
        async def through_mcp() -> float:
            """The whole outline, every page."""
            nonlocal pages
            started = time.perf_counter()
            offset, size, pages = 0, 0, 0
            while offset is not None:
                reply = await mcp_client.call_tool("get_run", {"trace_id": trace, "limit": 500,
                                                               "offset": offset})
                text = reply.content[0].text
                offset = json.loads(text)["next_offset"]
                size, pages = size + len(text), pages + 1
            sizes["mcp"] = size
            return time.perf_counter() - started

        async def through_api() -> float:
            started = time.perf_counter()
            reply = await http.get(f"{api}/v1/ui/traces/{trace}")
            elapsed = time.perf_counter() - started
            sizes["api"] = len(reply.content)
            return elapsed

        sides = {"mcp": through_mcp, "api": through_api}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(rounds + 1):  # round 0 warms up and is not counted
            for name in list(sides)[:: 1 if round_ % 2 else -1]:
                elapsed = await sides[name]()
                if round_:
                    times[name].append(elapsed)
    return times, sizes["mcp"], sizes["api"], pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ui_page = _ui_page()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-mcp-") as tmp:
        worker, api = ui_page.start_worker(ui_page.write_run(Path(tmp), args.steps))
        try:
            times, mcp_size, api_size, pages = asyncio.run(
                measure(api, ui_page.TRACE, args.rounds))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    per_round = ratios(times["mcp"], times["api"])
    api_s, mcp_s = statistics.median(times["api"]), statistics.median(times["mcp"])
    print(f"a {args.steps:,}-step run, median of {args.rounds} interleaved rounds (warm):")
    print(f"  GET /v1/ui/traces/{{id}}          {api_s * 1e3:8.1f} ms  {api_size / 1e6:6.2f} MB")
    print(f"  MCP get_run, {pages} page(s)         {mcp_s * 1e3:8.1f} ms  {mcp_size / 1e6:6.2f} MB")
    ratio = statistics.median(per_round)
    print(f"  MCP / API per round = {spread(per_round)}; target {TARGET}x: "
          f"{'met' if ratio <= TARGET else 'MISSED'}; {load()}")


if __name__ == "__main__":
    main()
