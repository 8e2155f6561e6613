"""One `rewind serve` on the embedded store, many callers at once: replay sessions of three runs
opened and played from several threads together (the real ``openai`` SDK) each answer their
own run's replies in order, never another run's, while other threads read the runs' pages,
their spans and the listing; and what the worker keeps while nothing is written to the store
follows the writes: a run still being recorded, replayed while it grows, is answered from
what it holds at each session's start, and a run's page lists a replay of it once recorded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import Served, start_serve

RUN = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path
    import openai
    from opentelemetry import trace
    from rewind.exporter import agent, instrument

    instrument(service_name="desk")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                           max_retries=0)
    go = os.environ.get("GO_FILE")
    with agent("desk") as span:
        Path(os.environ["TRACE_FILE"]).write_text(format(span.get_span_context().trace_id, "032x"))
        for i, question in enumerate(os.environ["QUESTIONS"].split("|")):
            if go and i:  # the first call is stored before the rest are made
                trace.get_tracer_provider().force_flush()
                while not Path(go).exists():
                    time.sleep(0.05)
            client.chat.completions.create(model="gpt-4o-mini",
                                           messages=[{"role": "user", "content": question}])
    """
)

RUNS = {"alpha": ("alpha: a flight to Lisbon", "alpha: a hotel by the river", "alpha: a car"),
        "beta": ("beta: a train to Porto", "beta: a table for two", "beta: a taxi"),
        # bodies over 64 KiB: matched in a thread, beside the others matched on the event loop
        "gamma": ("gamma: the contract " + "clause " * 10_000, "gamma: sign it")}


def start_run(served: Served, tmp: Path, llm: FakeLLMServer, name: str,
              questions: tuple[str, ...], **env: str) -> tuple[subprocess.Popen, Path]:
    script = tmp / "agent.py"
    script.write_text(RUN)
    trace_file = tmp / f"{name}.trace"
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=served.env(LLM_URL=llm.base_url, TRACE_FILE=str(trace_file),
                       QUESTIONS="|".join(questions), **env))
    return process, trace_file


def trace_id_of(trace_file: Path) -> str:
    """The run's trace id, once its agent span has started."""
    deadline = time.monotonic() + 60
    while not (trace_file.exists() and trace_file.read_text()):
        assert time.monotonic() < deadline, "the run never wrote its trace id"
        time.sleep(0.05)
    return trace_file.read_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[tuple[Served, dict[str, str]]]:
    """``rewind serve`` holding the two runs of :data:`RUNS`, by name: their trace ids."""
    tmp = tmp_path_factory.mktemp("concurrent")
    served = start_serve(tmp / "store")
    try:
        ids = {}
        with FakeLLMServer() as llm:
            for name, questions in RUNS.items():
                process, trace_file = start_run(served, tmp, llm, name, questions)
                assert process.wait(timeout=180) == 0, process.stderr and process.stderr.read()
                ids[name] = trace_id_of(trace_file)
                served.wait_for_spans(ids[name], 1 + len(questions))
        yield served, ids
    finally:
        served.stop()


def replay(api: str, session: dict, questions: tuple[str, ...]) -> list[str]:
    """The run's calls, as the agent makes them, against one replay session."""
    client = openai.OpenAI(base_url=f"{api}{session['base_path']}/v1", api_key="unused",
                           max_retries=0)
    return [client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q}]).choices[0].message.content
        for q in questions]


def together(jobs: list[Callable[[], None]]) -> None:
    """Every job in its own thread, started at once; the first failure is raised."""
    start = threading.Barrier(len(jobs))
    failures: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        start.wait()
        try:
            job()
        except BaseException as error:  # reported below, in the test's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a caller never finished"
    if failures:
        raise failures[0]


def test_sessions_and_reads_at_once_each_get_their_own_run(runs):
    served, ids = runs
    api = served.api_url
    played: list[tuple[str, list[str], dict]] = []

    def player(name: str) -> Callable[[], None]:
        def play() -> None:
            with httpx.Client(timeout=60) as http:
                for _ in range(3):
                    made = http.post(f"{api}/v1/replay/sessions", json={"trace_id": ids[name]})
                    assert made.status_code == 201, made.text
                    session = made.json()
                    replies = replay(api, session, RUNS[name])
                    status = http.get(f"{api}/v1/replay/sessions/{session['session_id']}")
                    played.append((name, replies, status.json()))
        return play

    def reader() -> None:
        with httpx.Client(timeout=60) as http:
            for _ in range(5):
                for name, trace_id in ids.items():
                    spans = http.get(f"{api}/v1/traces/{trace_id}").json()["spans"]
                    assert {s["TraceId"] for s in spans} == {trace_id}
                    asked = " ".join(str(s["SpanAttributes"]) for s in spans)
                    assert all(q in asked for q in RUNS[name])
                    page = http.get(f"{api}/traces/{trace_id}")
                    assert page.status_code == 200 and trace_id in page.text
                listed = http.get(f"{api}/v1/traces").json()
                assert set(ids.values()) <= {t["TraceId"] for t in listed["traces"]}

    together([player(name) for name in RUNS for _ in range(4)] + [reader, reader])
    assert len(played) == len(RUNS) * 4 * 3
    for name, replies, status in played:
        assert replies == [f"echo: {q}" for q in RUNS[name]]
        assert status["replayed"] == len(RUNS[name]) and status["divergence"] is None
        assert status["trace_id"] == ids[name]


def test_a_run_replayed_while_it_grows_is_answered_from_what_it_holds(runs, tmp_path):
    served, _ = runs
    api = served.api_url
    questions = ("delta: a ferry to Faro", "delta: a room with a view")
    go = tmp_path / "go"
    with FakeLLMServer() as llm:
        process, trace_file = start_run(served, tmp_path, llm, "delta", questions,
                                        GO_FILE=str(go))
        try:
            trace_id = trace_id_of(trace_file)
            served.wait_for_spans(trace_id, 1)  # the first call, stored; the second not made
            early = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id}).json()
            assert replay(api, early, questions[:1]) == [f"echo: {questions[0]}"]
            with pytest.raises(openai.ConflictError, match="more calls than"):
                replay(api, early, questions[1:])
            go.touch()
            assert process.wait(timeout=180) == 0, process.stderr and process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()
    served.wait_for_spans(trace_id, 1 + len(questions))
    later = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id}).json()
    assert replay(api, later, questions) == [f"echo: {q}" for q in questions]


def test_a_runs_page_lists_a_replay_of_it_once_recorded(runs, tmp_path):
    served, ids = runs
    api = served.api_url
    page = f"{api}/v1/ui/traces/{ids['beta']}"
    before = httpx.get(page, timeout=30).json()["derived"]  # kept until the store is written
    script = tmp_path / "agent.py"
    script.write_text(RUN)
    replayed = subprocess.run(
        [sys.executable, "-m", "rewind.replay.cli.main", "replay", "--trace-id", ids["beta"],
         "--", sys.executable, str(script)], capture_output=True, text=True, timeout=180,
        env=served.env(LLM_URL="http://127.0.0.1:9", TRACE_FILE=str(tmp_path / "replay.trace"),
                       QUESTIONS="|".join(RUNS["beta"])))
    assert replayed.returncode == 0, replayed.stderr
    replay_id = (tmp_path / "replay.trace").read_text()
    deadline = time.monotonic() + 60
    while replay_id not in [run["TraceId"] for run in httpx.get(page, timeout=30).json()[
            "derived"]]:
        assert time.monotonic() < deadline, "the run's page never listed its replay"
        time.sleep(0.2)
    assert replay_id not in [run["TraceId"] for run in before]
