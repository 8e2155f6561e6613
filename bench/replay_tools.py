"""Per-call replay of a tool's interactions, measured in one run: the HTTP calls a tool makes
(``requests``), replayed by Rewind and by vcrpy from the same recording with cassette loading
counted on both sides, and ``@tool`` calls answered by Rewind (vcrpy has no tool replay: its
per-HTTP-call cost is the peer figure). Run by ``bench/replay.py``, or alone:

    python bench/replay_tools.py [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from typing import Any

from replay import best_round, record_both, replayed


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

    vcrpy, vcrpy_cpu = best_round(vcrpy_round, calls)
    ours, ours_cpu = best_round(replayed(ours_file, fetch_all), calls)
    tools_wall, tools_cpu = best_round(replayed(ours_file, tools_all), calls)
    print(f"in-process replay per call of a tool's interactions, {calls} of each, cassette "
          "loading counted (wall, CPU):")
    print(f"  HTTP (requests)  vcrpy   {vcrpy * 1e3:8.3f} ms {vcrpy_cpu * 1e3:8.3f} ms")
    print(f"  HTTP (requests)  rewind  {ours * 1e3:8.3f} ms {ours_cpu * 1e3:8.3f} ms"
          f"   vcrpy / rewind = {vcrpy / ours:.1f}x wall, {vcrpy_cpu / ours_cpu:.1f}x CPU")
    print(f"  @tool call       rewind  {tools_wall * 1e3:8.3f} ms {tools_cpu * 1e3:8.3f} ms"
          f"   vcrpy's HTTP call / rewind's tool call = {vcrpy / tools_wall:.1f}x wall")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="Calls, comma-separated.")
    for calls in [int(n) for n in parser.parse_args().sizes.split(",")]:
        per_call_tools_http(calls)


if __name__ == "__main__":
    main()
