"""Judging a run that went live (``suite run --live-from-divergence``): evaluators named by a
short spec, each giving a score from 0 to 1 with a label and why. The final answer is defined
once (``final_answer``: a request's response, else the run's last model answer), the same way
for the recording and for today's run (read from its own trace), never what a script printed;
the budgets compare the replayed run's own trace, live calls included, with the recording.

    exact            the final answer is the recorded one (volatile values aside)
    exact:TEXT       ... is TEXT
    contains:TEXT    ... contains TEXT (any case)
    regex:PATTERN    ... matches PATTERN (re.search)
    schema:JSON      ... is JSON valid against the schema (inline, or @FILE)
    tool:NAME        the run called tool NAME;  no-tool:NAME  it did not
    calls:RATIO      it made at most RATIO times the recorded run's calls (model, tool ...)
    latency:RATIO    it took at most RATIO times the recorded run's duration (last call's end)
    cost:RATIO       it cost at most RATIO times the recorded run (tokens at the built-in
                     prices, as ``rewind inspect`` counts them)
    tokens:RATIO     it used at most RATIO times the recorded run's tokens (input + output)
    judge:CRITERION  a model the user configures scores the answer against CRITERION
"""

from __future__ import annotations

import json
import re
import re._constants as sre
import re._parser as sre_parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.cassette.model import Cassette
from rewind.replay.cassette.volatile import Tolerance
from rewind.replay.suites.judge import JudgeModel
from rewind.replay.timetravel.diff import StepView

KINDS = ("exact", "contains", "regex", "schema", "tool", "no-tool", "calls", "latency", "cost",
         "tokens", "judge")
BUDGETS = ("calls", "latency", "cost", "tokens")
ANSWERED = ("exact", "contains", "regex", "schema", "judge")  # kinds that read the final answer
PASS, FAIL = "pass", "fail"
_VOLATILE = Tolerance()


@dataclass(frozen=True)
class Score:
    name: str  # the evaluator's spec
    value: float
    label: str
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "label": self.label,
                "explanation": self.explanation}


@dataclass
class Judged:
    """What the evaluators see of a run and of its recording."""

    answer: str | None  # today's final answer (``final_answer``; None: not known)
    recorded_answer: str
    tools: list[str] = field(default_factory=list)
    calls: int = 0
    recorded_calls: int = 0
    seconds: float = 0.0
    recorded_seconds: float = 0.0
    cost: float | None = None  # None: not known (live calls, or a model without a price)
    recorded_cost: float | None = None
    tokens: int | None = None
    recorded_tokens: int | None = None


def _text(messages: Any, role: str | None = None) -> str:
    """The text parts of the last message (of ``role``, when given) of neutral messages."""
    picked = [m for m in messages or [] if isinstance(m, dict)
              and (role is None or m.get("role") == role)]
    return "".join(str(p.get("content", "")) for p in (picked[-1:] or [{}])[0].get("parts", [])
                   if isinstance(p, dict) and p.get("type") == "text")


def final_answer(cassette: Cassette) -> str | None:
    """A run's final answer, one definition for the recording and for today's run: a
    request's response body, else the text of the last model answer (None: no model call)."""
    if cassette.inbound is not None:
        return cassette.inbound.response_bytes().decode("utf-8", "replace")
    for interaction in reversed(cassette.interactions):
        if interaction.kind == A.KIND_LLM:
            output = StepView(interaction).answer.get("output") or []
            return "".join(str(p.get("content", "")) for m in output for p in m.get("parts", [])
                           if p.get("type") == "text")
    return None


def recorded_answer(cassette: Cassette) -> str:
    """The recording's final answer ('' when it made no model call)."""
    return final_answer(cassette) or ""


def first_input(cassette: Cassette) -> str:
    """What the run was first asked: the last user message of its first model call."""
    for interaction in cassette.interactions:
        if interaction.kind == A.KIND_LLM:
            return " ".join(_text(StepView(interaction).request.get("messages"), "user").split())
    return ""


def recorded_seconds(cassette: Cassette) -> float:
    return max((i.end_offset_ns for i in cassette.interactions), default=0) / 1e9


def recorded_usage(cassette: Cassette, calls: int | None = None) -> tuple[int, float | None]:
    """Tokens and cost of the recording's first ``calls`` interactions (all by default): the
    usage its LLM responses report, priced like ``rewind inspect``; cost None when a model
    has no price."""
    from rewind.replay.timetravel.stats import load_prices

    prices, tokens, cost = load_prices(), 0, 0.0
    for interaction in cassette.interactions[:calls]:
        if interaction.kind != A.KIND_LLM:
            continue
        found = interaction.response_attributes() or {}
        used = (int(found.get(A.INPUT_TOKENS) or 0), int(found.get(A.OUTPUT_TOKENS) or 0))
        tokens += sum(used)
        priced = prices.cost(str(found.get(A.RESPONSE_MODEL) or ""), *used)
        cost = None if cost is None or priced is None else cost + priced
    return tokens, cost


def check(spec: str) -> str:
    """``spec`` if it names a known evaluator with what it needs, else InvalidValue. Checked
    again before each use: a definition read back from the store may predate these rules."""
    kind, _, arg = spec.partition(":")
    if kind == "python":
        raise InvalidValue(f"{spec[:80]}: a suite's evaluators are the built-in kinds, never code "
                           "to run (a definition may come from anyone who can store one)",
                           hint="judge the answer with regex:, schema: or judge:")
    if kind not in KINDS:
        raise InvalidValue(f"unknown evaluator {spec!r}: use one of {', '.join(KINDS)}")
    if not arg and kind != "exact":
        raise InvalidValue(f"evaluator {kind} needs a value: {kind}:…")
    if kind in BUDGETS:
        try:
            float(arg)
        except ValueError:
            raise InvalidValue(f"{spec}: {kind} takes a ratio (e.g. {kind}:1.5)") from None
    if kind == "regex":
        pattern_check(arg, spec)
    if kind == "schema" and not arg.startswith("@"):
        schema_patterns(_inline_schema(spec, arg), spec)
    return spec


MAX_PATTERN_CHARS = 1000
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT)


def pattern_check(pattern: str, spec: str) -> None:
    """InvalidValue for a pattern that is no regular expression, or one shaped to backtrack
    exponentially (a repeat inside a repeat, ``(a+)+$``; a repeated choice whose branches
    repeat, ``(a|a+)*``): the answer it runs on is a program's output, and ``re`` has no
    time bound."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidValue(f"{spec[:80]}…: a pattern of at most {MAX_PATTERN_CHARS} characters")
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as error:
        raise InvalidValue(f"{spec[:200]}: not a regular expression ({error})") from None
    if _nested_repeat(list(parsed), inside=False):
        raise InvalidValue(f"{spec[:200]}: a repeat holding another repeat, or a choice whose "
                           "branches may start alike, can take exponential time on a failing "
                           "answer", hint="write it without the nested quantifier (e.g. (a+)+ "
                                          "as a+, (a|ab)+ as a(b?)… or [\\s,]+ for (\\s|,)+)")


def _overlapping(branches: list[Any]) -> bool:
    """Whether two branches of a choice may match the same first character (only distinct
    literal first characters are known not to)."""
    firsts = [list(branch)[:1] for branch in branches]
    if not all(first and first[0][0] == sre.LITERAL for first in firsts):
        return True
    return len({first[0][1] for first in firsts}) < len(firsts)


def _nested_repeat(items: list[Any], inside: bool) -> bool:
    """Whether, in the parsed pattern ``items``, a repeat (of more than one) holds another or
    a choice whose branches overlap."""
    for op, value in items:
        if op in _REPEATS:
            high, body = value[1], value[2]
            if high > 1 and inside:
                return True
            if _nested_repeat(list(body), inside or high > 1):
                return True
        elif op == sre.SUBPATTERN:
            if _nested_repeat(list(value[-1]), inside):
                return True
        elif op == sre.BRANCH:
            if inside and _overlapping(value[1]):
                return True
            if any(_nested_repeat(list(branch), inside) for branch in value[1]):
                return True
        elif op in (sre.ASSERT, sre.ASSERT_NOT) and _nested_repeat(list(value[1]), inside):
            return True
    return False


def _inline_schema(spec: str, arg: str) -> Any:
    try:
        return json.loads(arg)
    except (json.JSONDecodeError, RecursionError) as error:
        raise InvalidValue(f"{spec[:200]}: not a JSON schema ({error})") from None


def schema_patterns(schema: Any, spec: str) -> None:
    """The regular expressions a JSON schema holds (``pattern``, ``patternProperties``)
    checked as ``regex:`` is: jsonschema runs them with ``re``."""
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            if isinstance(value.get("pattern"), str):
                pattern_check(value["pattern"], spec)
            if isinstance(value.get("patternProperties"), dict):
                for pattern in value["patternProperties"]:
                    pattern_check(pattern, spec)
            pending += value.values()
        elif isinstance(value, list):
            pending += value


def _score(spec: str, ok: bool, why: str) -> Score:
    return Score(spec, 1.0 if ok else 0.0, PASS if ok else FAIL, why)


def _schema(arg: str) -> Any:
    text = Path(arg[1:]).read_text("utf-8") if arg.startswith("@") else arg
    return json.loads(text)


def evaluate(spec: str, run: Judged, judge: JudgeModel | None = None,
             threshold: float = 0.5) -> Score:
    kind, _, arg = check(spec).partition(":")
    if run.answer is None and kind in ANSWERED:
        return _score(spec, False, "today's final answer is not known (the program recorded no "
                                   "trace of its own and its last model answer went live)")
    answer = (run.answer or "").strip()
    if kind == "exact":
        wanted = arg if arg else run.recorded_answer.strip()
        same = _VOLATILE.masked(answer) == _VOLATILE.masked(wanted)
        return _score(spec, same, "the answer is the expected one" if same else
                      f"expected {wanted[:200]!r}, got {answer[:200]!r}")
    if kind == "contains":
        found = arg.lower() in answer.lower()
        return _score(spec, found, f"{arg!r} {'found' if found else 'not found'} in "
                                   f"{answer[:200]!r}")
    if kind == "regex":
        found = re.search(arg, answer) is not None
        return _score(spec, found, f"/{arg}/ {'matches' if found else 'does not match'} "
                                   f"{answer[:200]!r}")
    if kind == "schema":
        return _schema_score(spec, arg, answer)
    if kind in ("tool", "no-tool"):
        called = arg in run.tools
        ok = called if kind == "tool" else not called
        return _score(spec, ok, f"tool {arg} {'called' if called else 'not called'} "
                                f"(tools called: {', '.join(run.tools) or 'none'})")
    if kind in BUDGETS:
        return _budget(spec, kind, float(arg), run)
    if judge is None:
        raise InvalidValue(f"{spec} needs a judge model: give --judge-model (and --judge-url)")
    value, why = judge.score(arg, answer, run.recorded_answer)
    return Score(spec, value, PASS if value >= threshold else FAIL, why)


def _budget(spec: str, kind: str, ratio: float, run: Judged) -> Score:
    now, then = {"calls": (run.calls, run.recorded_calls),
                 "latency": (run.seconds, run.recorded_seconds),
                 "cost": (run.cost, run.recorded_cost),
                 "tokens": (run.tokens, run.recorded_tokens)}[kind]
    if now is None or then is None:
        return _score(spec, False, f"the {kind} of {'today' if now is None else 'the recording'}"
                                   " is not known (calls that went live, or a model without a"
                                   " price)")
    limit = ratio * then

    def unit(value: float) -> str:
        plural = "" if value == 1 else "s"
        return {"calls": f" call{plural}", "latency": " s", "cost": " USD",
                "tokens": f" token{plural}"}[kind]

    return _score(spec, now <= limit, f"{now:g}{unit(now)} against {then:g} recorded (budget "
                                      f"{limit:g}{unit(limit)})")


def _schema_score(spec: str, arg: str, answer: str) -> Score:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - the dev extra has it
        raise InvalidValue("the schema evaluator needs the jsonschema package",
                           hint="pip install jsonschema") from None
    try:
        schema = _schema(arg)
    except (OSError, json.JSONDecodeError, RecursionError) as error:
        raise InvalidValue(f"{spec}: no JSON schema there ({error})") from None
    schema_patterns(schema, spec)
    try:
        value = json.loads(answer)
    except json.JSONDecodeError:
        return _score(spec, False, f"the answer is not JSON: {answer[:200]!r}")
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as error:
        return _score(spec, False, f"not valid against the schema: {error.message}")
    return _score(spec, True, "valid against the schema")
