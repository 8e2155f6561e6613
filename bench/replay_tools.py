"""Per-call replay of a tool's interactions, measured in one run: the HTTP calls a tool makes
(``requests``), replayed by Rewind and by vcrpy from the same recording with cassette loading
counted on both sides, and ``@tool`` calls answered by Rewind (vcrpy has no tool replay: its
per-HTTP-call cost is the peer figure). Run by ``bench/replay.py``, or alone:

    python bench/replay_tools.py [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from typing import Any

from rounds import load, ratios, spread

from replay import per_call_rounds, record_both, replayed


class _ToolAPI:
    """A local JSON API (``GET /weather?city=``) for the tool interactions."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"path": self.path, "sky": "rain", "at": time.time()}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def per_call_tools_http(calls: int) -> None:
    """The same N HTTP calls a tool makes (``requests``), replayed by Rewind and by vcrpy,
    cassette loading counted; and N ``@tool`` calls answered by Rewind (vcrpy has no tool
    replay: its per-HTTP-call cost is the peer figure)."""
    import requests as http

    from rewind.exporter import tool

    session = http.Session()
    api = _ToolAPI()
    tmp = tempfile.mkdtemp(prefix="rewind-bench-")

    def fetch_all() -> list[str]:
        return [session.get(f"{api.url}/weather", params={"city": f"c{i}"}).json()["path"]
                for i in range(calls)]

    @tool
    def lookup(i: int) -> dict:
        return {"i": i, "at": time.time()}

    def tools_all() -> list[int]:
        return [lookup(i)["i"] for i in range(calls)]

    fetched: list[Any] = []

    def record() -> None:  # the @tool calls are no HTTP: only Rewind's pass records them
        fetched.append(fetch_all())
        tools_all()

    ours_file, vcr_file, matcher = record_both(tmp, "tools", record)
    expected = fetched[0]
    api.close()  # from here on only a replay can answer

    def vcrpy_round() -> None:
        with matcher.use_cassette(vcr_file, record_mode="none"):
            assert fetch_all() == expected

    times = per_call_rounds({"vcrpy": vcrpy_round, "rewind": replayed(ours_file, fetch_all),
                             "tool": replayed(ours_file, tools_all)}, calls)
    (vcrpy, vcrpy_cpu), (ours, ours_cpu), (tools, tools_cpu) = (
        times["vcrpy"], times["rewind"], times["tool"])
    med = statistics.median
    print(f"in-process replay per call of a tool's interactions, {calls} of each, cassette "
          f"loading counted (wall, CPU; median of {len(ours)} interleaved rounds):")
    print(f"  HTTP (requests)  vcrpy   {med(vcrpy) * 1e3:8.3f} ms {med(vcrpy_cpu) * 1e3:8.3f} ms")
    print(f"  HTTP (requests)  rewind  {med(ours) * 1e3:8.3f} ms {med(ours_cpu) * 1e3:8.3f} ms"
          f"   vcrpy / rewind per round = {spread(ratios(vcrpy, ours))} wall, "
          f"{spread(ratios(vcrpy_cpu, ours_cpu))} CPU")
    print(f"  @tool call       rewind  {med(tools) * 1e3:8.3f} ms {med(tools_cpu) * 1e3:8.3f} ms"
          f"   vcrpy's HTTP call / rewind's tool call per round = {spread(ratios(vcrpy, tools))}"
          " wall")
    print(f"  {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="Calls, comma-separated.")
    for calls in [int(n) for n in parser.parse_args().sizes.split(",")]:
        per_call_tools_http(calls)


if __name__ == "__main__":
    main()
