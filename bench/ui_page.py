"""Web UI benchmark: how long a 1,000-step run's page takes to show its first screen in a
real browser, as a ratio to fetching the same trace's JSON from the API, measured in one run.

The run is the bisect benchmark's (exact request and response bodies, a sliding context
window, a tool after each model call), written into an embedded store and served by
``rewind worker``. The first screen is the waterfall's first rows and the first step's
detail (what the model saw, its answer, the raw exchange), which come with the page; other
steps load when selected. The waterfall is drawn when every span's row is in the page with its
bar placed and a frame is painted. Printed: the API fetch of every span (``GET
/v1/traces/{id}``), the page cold (first visit: the worker reads and builds the run) and warm,
the ratios, and the issue's limits (a second for the first screen, two for the waterfall). The
browser opens the runs page first, so that its own start is not counted. After the cold visit
the API fetch and the warm page are interleaved round by round, taking turns to go first (round
0 warms up and is not counted); printed: the median and range of the per-round ratios page /
API and waterfall / API, and the load average.

Needs Debian's ``chromium`` (driven by Playwright's Python package; never its own download).

    python bench/ui_page.py [--steps 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright
from rounds import interleaved, load, ratios, spread

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store

HERE = Path(__file__).resolve().parent
TRACE = "5eed" * 8
LIMIT_S = 1.0  # the first screen
DRAWN_LIMIT_S = 2.0  # the whole waterfall
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def _run_rows():
    """The bisect benchmark's run generator (one recording shape for every benchmark)."""
    spec = importlib.util.spec_from_file_location("bisect_traces", HERE / "bisect_traces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_rows


def write_run(directory: Path, steps: int) -> str:
    store = Store(f"chdb://{directory / 'store'}")
    migrate(store)
    rows = list(_run_rows()(TRACE, steps, False, 1))
    writer = TraceWriter(store)
    for at in range(0, len(rows), 5000):
        writer.write(rows[at:at + 5000])
    store.close()
    return store.url


def start_worker(store_url: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "worker", "--clickhouse", store_url,
         "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"api=(\S+)", line)
        if found:
            return process, found.group(1)
    raise SystemExit("rewind worker did not start")


def fetch_json(client: httpx.Client, api: str) -> tuple[float, int, int]:
    """Seconds to fetch every span, the reply's size and its spans."""
    started = time.perf_counter()
    reply = client.get(f"{api}/v1/traces/{TRACE}")
    elapsed = time.perf_counter() - started
    return elapsed, len(reply.content), len(reply.json()["spans"])


# Every row of the waterfall in the page with its bar placed, then one frame painted.
DRAWN = """rows => new Promise(done => {
  const all = document.querySelectorAll('#tree .wf-row');
  const last = all[all.length - 1];
  if (all.length < rows || !last.querySelector('.bar').style.width) return done(false);
  requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
})"""


def first_screen(browser, api: str, rows: int) -> tuple[float, float]:
    """Seconds to the first screen (the outline's first rows and the first step's detail
    shown) and to the whole waterfall drawn and painted."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    started = time.perf_counter()
    page.goto(f"{api}/traces/{TRACE}")
    page.wait_for_selector("#detail #context", state="visible")
    page.wait_for_selector("#tree .wf-row", state="visible")
    shown = time.perf_counter() - started
    page.wait_for_function(DRAWN, arg=rows, polling=10)
    drawn = time.perf_counter() - started
    page.context.close()
    return shown, drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="rewind-bench-ui-") as tmp:
        worker, api = start_worker(write_run(Path(tmp), args.steps))
        try:
            with httpx.Client(timeout=60) as client, sync_playwright() as driver:
                _, size, spans = fetch_json(client, api)  # the same warm store for both
                browser = driver.chromium.launch(executable_path=chromium, args=ARGS)
                warm_up = browser.new_page()  # the browser's own start is not the page's
                warm_up.goto(f"{api}/")
                warm_up.wait_for_selector("#runs")
                warm_up.close()
                cold, cold_drawn = first_screen(browser, api, spans)
                times = interleaved({
                    "api": lambda: (fetch_json(client, api)[0],),
                    "page": lambda: first_screen(browser, api, spans),
                }, args.rounds)
                browser.close()
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    fetches = [t[0] for t in times["api"]]
    shown, drawn = [t[0] for t in times["page"]], [t[1] for t in times["page"]]
    fetched = statistics.median(fetches)
    print(f"a {args.steps:,}-step run ({size / 1e6:.1f} MB of span JSON), median of "
          f"{args.rounds} interleaved rounds (warm):")
    print(f"  GET /v1/traces/{{id}} (every span)     {fetched * 1e3:9.1f} ms")
    print(f"  trace page, first screen, cold        {cold * 1e3:9.1f} ms")
    print(f"  trace page, first screen, warm        {statistics.median(shown) * 1e3:9.1f} ms")
    print(f"  waterfall drawn ({spans:,} rows), cold  {cold_drawn * 1e3:9.1f} ms")
    print(f"  waterfall drawn ({spans:,} rows), warm  {statistics.median(drawn) * 1e3:9.1f} ms")
    print(f"  page / API JSON per round = {spread(ratios(shown, fetches))} warm, "
          f"{cold / fetched:.2f} cold; limit {LIMIT_S:.0f} s: "
          f"{'met' if cold < LIMIT_S else 'MISSED'} ({cold / LIMIT_S:.2f} of it, cold)")
    print(f"  waterfall / API JSON per round = {spread(ratios(drawn, fetches))} warm, "
          f"{cold_drawn / fetched:.2f} cold; limit {DRAWN_LIMIT_S:.0f} s: "
          f"{'met' if cold_drawn < DRAWN_LIMIT_S else 'MISSED'} "
          f"({cold_drawn / DRAWN_LIMIT_S:.2f} of it, cold)")
    print(f"  {load()}")


if __name__ == "__main__":
    main()
