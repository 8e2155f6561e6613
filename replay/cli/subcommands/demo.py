"""``rewind demo``: the whole product in under a minute, offline, without an API key.

A small order-desk agent with two tools talks to the built-in fake LLM (``fakellm``) on
127.0.0.1, recorded into an embedded store in a temporary directory (or ``--dir``). It records
a good run; then the fake model drifts (a new model version that cancels orders when asked
where they are) and the same agent records a bad run. The demo then inspects the bad run,
replays it with zero live calls, bisects good against bad, and forks the bad run at the step
that went wrong with a clearer user message, which fixes it.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from rewind.collector import store_provider
from rewind.collector.store.migrate import migrate
from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, tool, uninstrument
from rewind.replay.cli.render import bisection_view, diff_table, lineage_line, timeline_table
from rewind.replay.play import player
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.timeline import Timeline

SERVICE = "order-desk"
SYSTEM = ("You are the order desk of a small lamp shop. Use the tools to answer questions "
          "about orders. Never cancel an order unless the customer asks for it.")
TURNS = ("Hi, I'm Ada.", "Where is order 42?")
FIXED_TURN = "Where is order 42? Please just look it up."
GOOD = FakeScript(drift={"Where is order 42": 'call lookup_order {"order_id": "42"}'})
DRIFTED = FakeScript(model_version="gpt-4o-2024-11-20", drift={
    "look it up": 'call lookup_order {"order_id": "42"}',
    "order 42": 'call cancel_order {"order_id": "42"}',
})
TOOL_SPECS = [
    {"type": "function", "function": {"name": name, "description": text, "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"]}}}
    for name, text in (("lookup_order", "Where an order is and when it arrives."),
                       ("cancel_order", "Cancel an order."))]


@dataclass
class Desk:
    """The agent's world: its tools count how often they really ran."""

    runs: dict[str, int] = field(default_factory=lambda: {"lookup_order": 0,
                                                          "cancel_order": 0})

    def tools(self) -> dict[str, Any]:
        @tool
        def lookup_order(order_id: str) -> dict:
            """Where an order is."""
            self.runs["lookup_order"] += 1
            return {"order_id": order_id, "status": "shipped", "arrives_in_days": 2}

        @tool
        def cancel_order(order_id: str) -> dict:
            """Cancel an order."""
            self.runs["cancel_order"] += 1
            return {"order_id": order_id, "status": "cancelled"}

        return {"lookup_order": lookup_order, "cancel_order": cancel_order}


def run_agent(base_url: str, desk: Desk) -> str:
    """Two turns with the customer; tool calls are run and fed back until the model answers."""
    tools = desk.tools()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    answer = ""
    with httpx.Client(base_url=base_url, headers={"authorization": "Bearer sk-demo-offline"},
                      timeout=30) as client:
        for turn in TURNS:
            messages.append({"role": "user", "content": turn})
            for _ in range(4):
                reply = client.post("/v1/chat/completions", json={
                    "model": "gpt-4o", "messages": messages, "tools": TOOL_SPECS,
                    "temperature": 0}).json()
                message = reply["choices"][0]["message"]
                messages.append({k: v for k, v in message.items() if v is not None})
                if not message.get("tool_calls"):
                    answer = message.get("content") or ""
                    break
                for call in message["tool_calls"]:
                    function = call["function"]
                    result = tools[function["name"]](**json.loads(function["arguments"]))
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": json.dumps(result)})
    return answer


def record(base_url: str, desk: Desk) -> tuple[str, str]:
    with agent(SERVICE) as span:
        answer = run_agent(base_url, desk)
        return format(span.get_span_context().trace_id, "032x"), answer


def main(directory: str | None = None, console: Console | None = None) -> int:
    out = console or Console()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rewind-demo-") as scratch:
        where = Path(directory).resolve() if directory else Path(scratch, "store")
        store = Store(f"chdb://{where}")
        try:
            migrate(store)
            _tour(store, where, out)
        finally:
            uninstrument()
            store.close()
    out.print(f"\n[bold]done in {time.monotonic() - started:.1f} s[/bold], offline, no API key.")
    if directory:
        out.print(f"The store stays in {where}: try [bold]rewind traces --clickhouse "
                  f"chdb://{where}[/bold]")
    return 0


def _step(out: Console, title: str) -> None:
    out.print(Rule(title, align="left"))


def _tour(store: Store, where: Path, out: Console) -> None:
    out.print(f"[bold]Rewind demo[/bold]: a fake LLM on 127.0.0.1, an embedded store in {where}")
    provider = store_provider(store, SERVICE)
    instrument(tracer_provider=provider)
    with FakeLLMServer(GOOD) as llm:
        _step(out, "1. record a good run")
        good_id, good_answer = record(llm.base_url, Desk())
        out.print(f"trace {good_id}: {escape(repr(good_answer))}")

        _step(out, "2. the model drifts; record the same agent again")
        llm.script = DRIFTED
        bad_desk = Desk()
        bad_id, bad_answer = record(llm.base_url, bad_desk)
        out.print(f"trace {bad_id}: {escape(repr(bad_answer))}  "
                  f"[red](cancel_order ran {bad_desk.runs['cancel_order']}x)[/red]")
        provider.force_flush()
        good, bad = Timeline.from_store(store, good_id), Timeline.from_store(store, bad_id)

        _step(out, f"3. inspect the bad run   (rewind inspect {bad_id})")
        out.print(timeline_table(bad))

        _step(out, f"4. replay it, nothing live   (rewind replay --trace-id {bad_id} -- …)")
        uninstrument()
        before, replay_desk = len(llm.requests), Desk()
        with player.replaying(bad.cassette) as session:
            again = run_agent(llm.base_url, replay_desk)
        instrument(tracer_provider=provider)
        out.print(f"replayed {session.matcher.replayed}/{session.matcher.total} steps, "
                  f"{len(llm.requests) - before} live LLM calls, "
                  f"{sum(replay_desk.runs.values())} tool functions run; same answer: "
                  f"{again == bad_answer}")

        _step(out, f"5. bisect good vs bad   (rewind bisect {good_id} {bad_id})")
        out.print(bisection_view(bisect(good.cassette, bad.cassette)))

        wrong = next(e for e in bad.steps if e.type == "llm" and "cancel_order" in e.preview)
        _step(out, f"6. fork the bad run at step {wrong.step} with a clearer message   "
                   f"(rewind fork {bad_id} --step {wrong.step} --user-message …)")
        checkpoint = bad.fork(wrong.step, edit_user_message=FIXED_TURN)
        sent, fork_desk = len(llm.requests), Desk()
        outcome = checkpoint.continue_from(lambda: run_agent(llm.base_url, fork_desk))
        live_llm = len(llm.requests) - sent
        out.print(f"new trace {outcome.trace_id}: replayed from the recording: "
                  f"{outcome.replayed}, live: {outcome.live} ({live_llm} LLM, "
                  f"{sum(fork_desk.runs.values())} tool)")
        verdict = ("[green]fixed: it looked the order up[/green]"
                   if fork_desk.runs["lookup_order"] and not fork_desk.runs["cancel_order"]
                   else "[red]still wrong[/red]")
        out.print(f"answer: {escape(repr(outcome.result))}  {verdict}")
        provider.force_flush()
        forked = Timeline.from_store(store, outcome.trace_id or "")
        out.print(lineage_line(forked) or "", highlight=False)

        _step(out, f"7. diff the bad run and its fork   (rewind diff {bad_id} "
                   f"{outcome.trace_id})")
        out.print(diff_table(bad.diff(forked)))
    traces = reader.list_traces(store, TraceFilters(limit=10))
    out.print(f"{len(traces)} traces in the store.")
