"""MCP benchmark: ``get_run`` of a 1,000-step run through the worker's ``/mcp`` (the real
``mcp`` client over streamable HTTP, every page of the outline) as a ratio to the same run's
outline JSON from the worker API (``GET /v1/ui/traces/{id}``, what the run page draws), both
warm, best of several rounds, measured in one run against one ``rewind worker``. Target: within
1.5x.

The run is the bisect benchmark's (the web UI benchmark writes it: ``ui_page.write_run``).

    python bench/mcp_get_run.py [--steps 1000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

HERE = Path(__file__).resolve().parent
TARGET = 1.5


def _ui_page() -> Any:
    spec = importlib.util.spec_from_file_location("ui_page", HERE / "ui_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def through_mcp(api: str, trace: str, rounds: int) -> tuple[float, int, int]:
    """Best time for the whole outline (every page), its size and the pages it took."""
    samples, size, pages = [], 0, 0
    async with Client(f"{api}/mcp") as client:
        for _ in range(rounds + 1):  # the first warms the worker's cache and the session
            started = time.perf_counter()
            offset, size, pages = 0, 0, 0
            while offset is not None:
                reply = await client.call_tool("get_run", {"trace_id": trace, "limit": 500,
                                                           "offset": offset})
                text = reply.content[0].text
                offset = json.loads(text)["next_offset"]
                size, pages = size + len(text), pages + 1
            samples.append(time.perf_counter() - started)
    return min(samples[1:]), size, pages


def through_api(api: str, trace: str, rounds: int) -> tuple[float, int]:
    samples, size = [], 0
    with httpx.Client(timeout=60) as client:
        client.get(f"{api}/v1/ui/traces/{trace}")
        for _ in range(rounds):
            started = time.perf_counter()
            reply = client.get(f"{api}/v1/ui/traces/{trace}")
            samples.append(time.perf_counter() - started)
            size = len(reply.content)
    return min(samples), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ui_page = _ui_page()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-mcp-") as tmp:
        worker, api = ui_page.start_worker(ui_page.write_run(Path(tmp), args.steps))
        try:
            api_s, api_size = through_api(api, ui_page.TRACE, args.rounds)
            mcp_s, mcp_size, pages = asyncio.run(through_mcp(api, ui_page.TRACE, args.rounds))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    ratio = mcp_s / api_s
    print(f"a {args.steps:,}-step run, best of {args.rounds} (warm):")
    print(f"  GET /v1/ui/traces/{{id}}          {api_s * 1e3:8.1f} ms  {api_size / 1e6:6.2f} MB")
    print(f"  MCP get_run, {pages} page(s)         {mcp_s * 1e3:8.1f} ms  {mcp_size / 1e6:6.2f} MB")
    print(f"  MCP / API = {ratio:.2f}x; target {TARGET}x: "
          f"{'met' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
