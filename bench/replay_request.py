"""Replaying one request of a service vs running it live, figures measured in one run.

A Starlette app whose ``POST /ask`` makes N sequential ``AsyncOpenAI`` calls (2 KB prompts)
to a loopback fake LLM. One request is recorded in memory by ``instrument()`` (no Rewind code
in the app: its inbound exchange on the root span, its calls under it) and made into a
cassette file. Then, each pair interleaved round by round (taking turns to go first; round 0
warms up and is not counted):

1. in process: the request sent to the app through httpx's ASGI transport with the fake LLM
   live, against ``replay_request`` (the cassette read from its file every round, every call
   answered from it, the answer compared), as ``replay-request --app`` runs it;
2. as a user runs it, each a fresh process: a script sending the request live, against
   ``rewind replay-request FILE --app bench_app:app``.

The fake LLM stays up for the live side; the replayed side is checked to send it nothing.
Printed: the median and range of the per-round replay / live ratios (target: under 1.2x at 10
calls) and the load average.

    python bench/replay_request.py [--sizes 10,100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from bytecode import compile_bytecode
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rounds import interleaved, load, ratios, spread

from replay import span_dicts
from rewind.exporter import instrument, uninstrument
from rewind.exporter.core import attributes as A
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.services.recorded_request import replay_request, send
from rewind.replay.sources import archive
from rewind.replay.testing.fakellm import FakeLLMServer

APP = textwrap.dedent('''
    import os
    from openai import AsyncOpenAI
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def ask(request):
        body = await request.json()
        answers = []
        async with AsyncOpenAI(base_url=os.environ["BENCH_LLM_URL"], api_key="sk-bench",
                               max_retries=0) as llm:
            for i in range(int(os.environ["BENCH_CALLS"])):
                answer = await llm.chat.completions.create(model="gpt-4o", messages=[
                    {"role": "system", "content": "You are a careful assistant. " * 20},
                    {"role": "user", "content": f"{body['question']} {i}: " + "context " * 200}])
                answers.append(answer.choices[0].message.content)
        return JSONResponse({"answers": answers})

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"])])
''')
LIVE = textwrap.dedent('''
    from bench_app import app
    from rewind.replay.play.services.recorded_request import send
    status, body = send(app, "POST", "/ask", "", {"content-type": "application/json"},
                        b'{"question": "question"}')
    assert status == 200, body
''')
BODY = b'{"question": "question"}'
HEADERS = {"content-type": "application/json"}


def record(app: object, trace_file: Path, exported: Path) -> None:
    """One request of ``app`` recorded in memory by ``instrument()`` (the exporter's server
    seam: the request its own trace, its exchange on the root span), and written as a cassette
    file and as a ``.rw`` file (what ``rewind export`` writes)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=provider)
    try:
        status, body = send(app, "POST", "/ask", "", HEADERS, BODY)
    finally:
        uninstrument()
    assert status == 200, body
    [root] = [s for s in spans.get_finished_spans()
              if (s.attributes or {}).get(A.INBOUND_KIND) == A.INBOUND_KIND_REQUEST]
    trace_id = format(root.context.trace_id, "032x")
    rows = [row for row in span_dicts(spans) if row["TraceId"] == trace_id]
    trace_file.write_text(json.dumps(build_cassette(trace_id, rows).to_dict()))
    archive.write_file(exported, archive.pack(trace_id, [{
        **row, "Timestamp": int(row["Timestamp"]), "EventTimesNs": [
            int(t) for t in row["Events.Timestamp"]], "EventNames": row["Events.Name"],
        "EventAttributes": row["Events.Attributes"], "LinkTraceIds": row["Links.TraceId"],
        "LinkSpanIds": row["Links.SpanId"], "LinkTraceStates": row["Links.TraceState"],
        "LinkAttributes": row["Links.Attributes"]} for row in rows]))


def timed(work: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        started = time.perf_counter()
        work()
        return time.perf_counter() - started
    return run


def measure(calls: int, rounds: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="rewind-bench-request-"))
    (tmp / "bench_app.py").write_text(APP)
    (tmp / "live.py").write_text(LIVE)
    sys.path.insert(0, str(tmp))
    os.environ["BENCH_CALLS"] = str(calls)
    sys.modules.pop("bench_app", None)
    from bench_app import app

    trace_file = tmp / "request.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get(
        "PYTHONPATH", "")])}
    rewind = str(Path(sys.executable).parent / "rewind")
    command = [rewind, "replay-request", str(tmp / "request.rw"), "--app", "bench_app:app"]
    with FakeLLMServer() as llm:
        os.environ["BENCH_LLM_URL"] = env["BENCH_LLM_URL"] = llm.base_url + "/v1"
        record(app, trace_file, tmp / "request.rw")

        def replayed() -> None:
            cassette = Cassette.from_dict(json.loads(trace_file.read_text("utf-8")))
            outcome = replay_request(cassette, app)
            assert outcome.same and outcome.report.replayed == calls, outcome.describe()

        def offline(work: Callable[[], object]) -> Callable[[], object]:
            """``work``, checked to leave the fake LLM alone: only the recording answers."""
            def run() -> None:
                before = len(llm.requests)
                work()
                assert len(llm.requests) == before, "the replay reached the live LLM"
            return run

        in_process = interleaved({
            "live": timed(lambda: send(app, "POST", "/ask", "", HEADERS, BODY)),
            "replay": timed(offline(replayed))}, rounds)
        as_user = interleaved({
            "live": timed(lambda: subprocess.run([sys.executable, "live.py"], cwd=tmp, env=env,
                                                 check=True)),
            "replay": timed(offline(lambda: subprocess.run(command, cwd=tmp, env=env, check=True,
                                                           capture_output=True)))}, rounds)
    print(f"one request making {calls} LLM calls (median of {rounds} interleaved rounds):")
    for label, name, times in (("in process", "replay", in_process),
                               ("as a user ", "replay-request", as_user)):
        print(f"  {label}  live {statistics.median(times['live']) * 1e3:8.1f} ms   {name} "
              f"{statistics.median(times['replay']) * 1e3:8.1f} ms   replay / live per round = "
              f"{spread(ratios(times['replay'], times['live']))}")
    print(f"  {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100", help="LLM calls per request.")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    compile_bytecode()
    for calls in (int(n) for n in args.sizes.split(",")):
        measure(calls, args.rounds)


if __name__ == "__main__":
    main()
