"""Replaying every run of a suite, N at a time, and telling per run: the same, diverged (the
step, the field, both values, bisect's cause) or errored; in live mode, judged by the
evaluators. A script's run is a child process (``play/runner.py``, through the one launcher);
a request or job with ``--app``/``--call`` is sent in this process, one at a time once the
scripts are done (the replay's hooks are process-wide), recorded here as a script records
itself (``today.in_process``)."""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.divergence import Divergence, shorten
from rewind.replay.play.recorder import run_name
from rewind.replay.play.replay_settings import LENIENT, STRICT
from rewind.replay.play.report import ReplayReport
from rewind.replay.play.runner import run_command
from rewind.replay.sources.commands import RecordedCommandRefused, consent
from rewind.replay.suites import evaluators
from rewind.replay.suites.cause import cause_of
from rewind.replay.suites.evaluators import Judged, Score
from rewind.replay.suites.judge import JudgeModel
from rewind.replay.suites.spec import SuiteRun

if TYPE_CHECKING:  # its collector's imports are paid only by a suite that records its runs
    from rewind.replay.suites.today import TodaysRuns

SAME, DIVERGED, ERRORED, JUDGED = "same", "diverged", "errored", "judged"
_IN_PROCESS = threading.Lock()


@dataclass
class SuiteOptions:
    command: tuple[str, ...] = ()
    app: str | None = None
    call: str | None = None
    jobs: int = 1
    timeout: float = 600.0
    live: bool = False  # --live-from-divergence
    evaluators: tuple[str, ...] = ()
    judge: JudgeModel | None = None
    fail_below: float = 0.5
    allow_live: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    today: TodaysRuns | None = None  # where replayed scripts record themselves (today.py)
    run_recorded: bool = False  # --run-recorded-command: stored commands run though unsigned
    approved: set[tuple[str, ...]] = field(default_factory=set)  # said yes to at a terminal
    seal: bool = True  # scripts replay in a network namespace of their own (--no-seal: not)


@dataclass
class RunResult:
    trace_id: str
    status: str
    message: str = ""
    step: int | None = None
    path: str = ""  # the first differing field
    recorded: Any = None
    now: Any = None
    cause: str = ""
    seconds: float = 0.0
    answer: str = ""
    scores: list[Score] = field(default_factory=list)
    replayed_traces: list[str] = field(default_factory=list)
    fail_below: float = 0.5
    label: str = ""  # what a reader knows the run by: its route, or what it was first asked
    ended_ns: int = 0  # when today's run made its last call (its scores are put there)
    output: str = ""  # what the replayed command and its replay said on stderr, kept whole

    @property
    def passed(self) -> bool:
        if self.status == JUDGED:
            return all(s.value >= self.fail_below for s in self.scores)
        return self.status == SAME

    def to_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "label": self.label, "status": self.status,
                "passed": self.passed,
                "message": self.message, "step": self.step, "field": self.path,
                "recorded": self.recorded, "now": self.now, "cause": self.cause,
                "seconds": round(self.seconds, 3), "answer": self.answer,
                "scores": [s.to_dict() for s in self.scores],
                "replayed_traces": self.replayed_traces}


def _diverged(result: RunResult, cassette: Cassette, divergence: Divergence) -> None:
    result.status = DIVERGED
    result.step = divergence.step
    lines = [divergence.describe()]
    if divergence.diffs:
        first = divergence.diffs[0]
        result.path, result.recorded, result.now = first.path, first.expected, first.actual
    found = cause_of(cassette, divergence)
    if found is not None and found.cause:
        result.cause = found.cause
        lines.append(f"cause: {found.describe().splitlines()[1].removeprefix('cause: ')}")
    result.message = "\n".join(lines)


def command_of(run: SuiteRun, cassette: Cassette, options: SuiteOptions,
               ask: Callable[[str], bool] | None = None, suite: str = "") -> tuple[str, ...]:
    """What replays ``run``: the engineer's command after ``--`` (it wins), else the one
    stored with the run (``suite add --command``), else the one ``rewind record`` saved with
    the recording; a stored or recorded one only when signed here or asked for."""
    if options.command:
        return options.command
    if run.command:
        where = f"suite {suite} (run {run.trace_id})" if suite else \
            f"run {run.trace_id} of the suite"
        consent(run.command, run.signature, where,
                allowed=options.run_recorded or run.command in options.approved, ask=ask)
        return run.command
    if cassette.command:
        from rewind.replay.play.launch import recorded_command

        words = tuple(cassette.command)
        return tuple(recorded_command(cassette, options.run_recorded or words in
                                      options.approved, ask))
    raise RewindError(f"no command replays run {run.trace_id} (none was recorded with it)",
                      hint="give one to `rewind suite run NAME -- CMD`, or store it with the "
                           "run: `rewind suite add NAME TRACE_ID --command \"CMD\"`")


def _script(run: SuiteRun, cassette: Cassette, options: SuiteOptions, err: IO[bytes]
            ) -> tuple[Any, str, list[str]]:
    command = command_of(run, cassette, options)
    today = options.today
    report = today.report_path(run.trace_id) if today else ""
    with tempfile.TemporaryFile() as out:
        outcome = run_command(cassette, list(command), mode=LENIENT if options.live else STRICT,
                              allow_live=options.allow_live, ignore=options.ignore,
                              timeout=options.timeout, stdout=out, seal=options.seal,
                              settings=today.settings(report, run_name(list(command)))
                              if today else None, stderr=err)
        out.seek(0)
        recorded = today.traces(report) if today else []
        return outcome, out.read().decode("utf-8", "replace"), recorded


def _request(run: SuiteRun, cassette: Cassette, options: SuiteOptions,
             ) -> tuple[Any, str, list[str]]:
    from rewind.replay.play.services import recorded_request as requests

    settings = {"mode": LENIENT if options.live else STRICT, "allow_live": options.allow_live,
                "ignore": options.ignore}
    target = str(options.app or options.call)
    recording = options.today.in_process(run.trace_id, target) if options.today else \
        contextlib.nullcontext([])
    with _IN_PROCESS, recording as recorded:
        if options.app:
            outcome = requests.replay_request(cassette, requests.load_target(options.app),
                                              **settings)
        else:
            outcome = requests.replay_job(cassette, requests.load_target(str(options.call)),
                                          **settings)
    actual = outcome.actual or {}
    body = actual.get("body", actual.get("result", actual.get("error", "")))
    return outcome, body if isinstance(body, str) else shorten(body, 100_000), recorded


def run_one(run: SuiteRun, cassette: Cassette, options: SuiteOptions) -> RunResult:
    """The run replayed and told; what its command said on stderr is kept in ``output``
    (runs replayed side by side would otherwise write theirs line by line into each
    other's), for whoever tells the run to print once it has ended."""
    with tempfile.TemporaryFile() as err:
        result = _replayed(run, cassette, options, err)
        err.seek(0)
        result.output = err.read().decode("utf-8", "replace")
    return result


def _replayed(run: SuiteRun, cassette: Cassette, options: SuiteOptions, err: IO[bytes]
              ) -> RunResult:
    result = RunResult(run.trace_id, ERRORED, fail_below=options.fail_below,
                       label=label(cassette))
    began = time.monotonic()
    try:
        if cassette.inbound is not None:
            if not (options.app or options.call):
                raise RewindError(f"run {run.trace_id} is a recorded {cassette.inbound.kind}",
                                  hint="give --app MODULE:ATTR (requests) or --call "
                                       "MODULE:FUNC (jobs)")
            outcome, answer, recorded = _request(run, cassette, options)
            exit_code = 0 if outcome.same or options.live else outcome.exit_code
            differs, ended_early = outcome.diffs, False
        else:
            outcome, answer, recorded = _script(run, cassette, options, err)
            exit_code, differs, ended_early = outcome.exit_code, [], outcome.ended_early
    except RewindError as error:
        result.message = str(error) + (f" ({error.hint})" if error.hint else "")
        result.seconds = time.monotonic() - began
        return result
    result.seconds = time.monotonic() - began
    result.ended_ns = time.time_ns()  # today's trace, when read, says when its last call ended
    report: ReplayReport = outcome.report
    result.answer = answer.strip()
    result.replayed_traces = list(dict.fromkeys([*report.trace_ids, *recorded]))
    if options.live:
        _judge(result, cassette, report, options)
    elif report.divergence is not None:
        _diverged(result, cassette, report.divergence)
    elif differs:
        first = differs[0]
        result.status, result.path = DIVERGED, first.path
        result.recorded, result.now = first.expected, first.actual
        result.message = (f"the calls matched, the answer differs in {len(differs)} field(s): "
                          f"{first.path}: {shorten(first.expected)} -> {shorten(first.actual)}")
    elif ended_early:
        result.status = DIVERGED
        result.message = (f"the run ended after {report.replayed} of {report.recorded} "
                          "recorded calls: its final answer is not the recorded one")
    elif exit_code != 0:
        result.message = f"the command exited {exit_code}"
    else:
        result.status = SAME
        result.message = report.headline()
    return result


def label(cassette: Cassette) -> str:
    """A run as a reader knows it: a request's route, a job's function, else what it was
    first asked, else its command."""
    inbound = cassette.inbound
    if inbound is not None:
        return " ".join(filter(None, (inbound.method, inbound.route or inbound.path))) or \
            inbound.app
    asked = evaluators.first_input(cassette) or " ".join(cassette.command)
    return asked if len(asked) <= 60 else asked[:59] + "…"


def _todays(cassette: Cassette, result: RunResult, report: ReplayReport,
            options: SuiteOptions) -> tuple[str | None, Cassette | None]:
    """Today's final answer and today's run as its own trace holds it (None: it recorded
    none). A request's answer is its response; a script's is the last model answer of its
    own trace, else the last one the replay served when every call was answered."""
    today = options.today.cassette(result.replayed_traces) if options.today else None
    if cassette.inbound is not None:
        return result.answer, today
    if today is not None and any(i.kind == A.KIND_LLM for i in today.interactions):
        return evaluators.final_answer(today), today
    if report.live == 0:
        served = replace(cassette, interactions=cassette.interactions[:report.replayed])
        return evaluators.final_answer(served) or "", today
    return None, today


def _judge(result: RunResult, cassette: Cassette, report: ReplayReport,
           options: SuiteOptions) -> None:
    answer, today = _todays(cassette, result, report, options)
    result.answer = answer or ""
    judged = Judged(answer, evaluators.recorded_answer(cassette), list(report.tools),
                    max(report.requests, report.replayed + report.live),
                    len(cassette.interactions), result.seconds,
                    evaluators.recorded_seconds(cassette))
    if today is not None:  # the replayed run's own trace: its calls, live ones included
        judged.calls = len(today.interactions)
        judged.tools = list(dict.fromkeys([*judged.tools, *(
            i.tool_name for i in today.interactions if i.kind == A.KIND_TOOL)]))
        if any(i.end_offset_ns for i in today.interactions):
            judged.seconds = evaluators.recorded_seconds(today)
            if today.started_ns:
                result.ended_ns = today.started_ns + max(i.end_offset_ns
                                                         for i in today.interactions)
    judged.recorded_tokens, judged.recorded_cost = evaluators.recorded_usage(cassette)
    if report.live == 0:  # every call answered from the recording: today's usage is its own
        judged.tokens, judged.cost = evaluators.recorded_usage(cassette, report.replayed)
    elif options.today is not None:  # what the replayed run recorded, its live calls included
        used = options.today.usage(result.replayed_traces)
        if used is not None:
            judged.tokens, judged.cost = used.tokens, used.cost
    where = (f"live from step {report.divergence.step}" if report.divergence
             else "no divergence: every answer recorded")
    try:
        result.scores = [evaluators.evaluate(spec, judged, options.judge, options.fail_below)
                         for spec in options.evaluators]
    except RewindError as error:
        result.message = f"{where}; an evaluator failed: {error}"
        return
    result.status = JUDGED
    failed = [s for s in result.scores if s.value < options.fail_below]
    result.message = f"{where}; " + ("; ".join(f"{s.name}: {s.explanation}" for s in failed)
                                     if failed else f"{len(result.scores)} evaluators passed")


def ask_for_commands(runs: list[tuple[SuiteRun, Cassette]], options: SuiteOptions, suite: str,
                     ask: Callable[[str], bool] | None) -> None:
    """Before anything runs: each stored command the suite would run (none when the engineer
    gave one after --) is let run (signed here, the flag, a yes to ``ask``: remembered), or
    ``RecordedCommandRefused`` names it (``InvalidValue`` a recorded one masked)."""
    if options.command:
        return
    for run, cassette in runs:
        if cassette.inbound is not None or not (run.command or cassette.command):
            continue  # a request or job has no command; a run with none errs when it runs
        try:
            options.approved.add(command_of(run, cassette, options, ask, suite))
        except RecordedCommandRefused:
            raise
        except RewindError:
            continue  # masked, or not found here: that run errs, saying so, when it runs


def run_suite(runs: list[tuple[SuiteRun, Cassette]], options: SuiteOptions,
              progress: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Every run replayed, ``options.jobs`` at a time; results in the suite's order. Requests
    and jobs replayed in this process go after the scripts, one at a time: their replay's
    hooks are process-wide and would take a script's traffic through this process (the relay
    of a sealed replay to the collector) for theirs."""
    def one(item: tuple[SuiteRun, Cassette]) -> RunResult:
        found = run_one(*item, options)
        if progress is not None:
            progress(found)
        return found

    scripts = [i for i, (_, cassette) in enumerate(runs) if cassette.inbound is None]
    results: dict[int, RunResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        results.update(zip(scripts, pool.map(one, [runs[i] for i in scripts]), strict=True))
    for index, item in enumerate(runs):
        if index not in results:
            results[index] = one(item)
    return [results[i] for i in range(len(runs))]
