"""The fake LLM itself, whatever protocol a request came in: what it reads from a request
(:class:`Turn`), how it answers (:func:`decide`: a drift rule, else ``call <tool> {json}``
markers naming an offered tool, with ``say "…"`` text and ``think "…"`` reasoning beside them
in the order written, else the echo) and the :class:`FakeScript` that changes its
behaviour at runtime. The servers (``fakellm`` for OpenAI and Anthropic, ``fake_gemini``) only read
their protocol's requests into a :class:`Turn` and render the :class:`wire.Reply` back.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rewind.replay.cassette.formats import wire

JSON = dict[str, Any]
DEFAULT_MODEL_SUFFIX = "-2024-08-06"
FIXED_CREATED = 1_735_689_600  # 2025-01-01T00:00:00Z: every response claims this time
_MARKER = re.compile(r"\bcall\s+([A-Za-z_][\w.\-]*)\s*(?=\{)")
# ``say "text"`` and ``think "text"`` beside call markers: text and reasoning in the same answer.
_SPOKEN = re.compile(r"\b(say|think)\s*(?=\")")


@dataclass
class FakeScript:
    """How the fake model behaves; swap it on a running server to make the model "drift".

    ``model_version`` (if set) is the ``model`` every response claims; otherwise the requested
    model plus ``model_suffix`` (``gpt-4o`` -> ``gpt-4o-2024-08-06``). ``drift`` maps a substring
    of the user text to the reply given instead of the echo; a drift reply may itself hold
    ``call <tool> {json}`` markers. ``created`` is the fixed timestamp in every response.
    """

    model_suffix: str = DEFAULT_MODEL_SUFFIX
    model_version: str | None = None
    drift: dict[str, str] = field(default_factory=dict)
    created: int = FIXED_CREATED

    def served_model(self, requested: str) -> str:
        """The model name echoed back, as the APIs answer an alias with a dated version."""
        if self.model_version:
            return self.model_version
        if requested.endswith(self.model_suffix):
            return requested
        return requested + self.model_suffix

    def drifted(self, text: str) -> str | None:
        """The scripted reply for ``text``, if any drift rule matches it."""
        for needle, reply in self.drift.items():
            if needle in text:
                return reply
        return None


@dataclass
class Turn:
    """What the fake model needs from a request, whichever protocol it came in."""

    text: str  # the last user message's text, or the trailing tool results' text
    from_tool: bool
    input_words: int
    tools: frozenset[str]


class FakeState:
    """Shared by the app and its server: the script and the counters tests assert on."""

    def __init__(self, script: FakeScript) -> None:
        self.script = script
        self.requests: list[tuple[str, str, Any]] = []
        self.connections = 0
        self._lock = threading.Lock()

    def record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append((method, path, body))

    def connected(self) -> None:
        with self._lock:
            self.connections += 1


# --- reading requests ----------------------------------------------------------------------


def text_of(content: Any) -> str:
    """The text in a message's content: a string, or a list of text / tool-result parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        for key in ("content", "output"):  # Anthropic tool_result, Responses call output
            if key in content:
                return text_of(content[key])
        return ""
    if isinstance(content, list):
        return " ".join(t for t in (text_of(part) for part in content) if t)
    return ""


def _tool_names(tools: Any) -> frozenset[str]:
    """Names of the offered tools in any of the three tool formats."""
    names = set()
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name")
            if isinstance(name, str):
                names.add(name)
    return frozenset(names)


def _offered(body: JSON) -> frozenset[str]:
    return frozenset() if body.get("tool_choice") == "none" else _tool_names(body.get("tools"))


def _words(texts: Iterable[str]) -> int:
    return sum(wire.count_words(t) for t in texts)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role", "user") == "user":
            return text_of(message.get("content"))
    return ""


def chat_turn(body: JSON) -> Turn:
    """OpenAI Chat Completions: trailing ``tool`` messages are the tool results."""
    messages = [m for m in body["messages"] if isinstance(m, dict)]
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, text_of(message.get("content")))
    text = "; ".join(results) if results else _last_user_text(messages)
    words = _words(text_of(m.get("content")) for m in messages)
    return Turn(text, bool(results), words, _offered(body))


def responses_turn(body: JSON) -> Turn:
    """OpenAI Responses: ``input`` is a string or items; trailing call outputs are results."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    results = []
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        results.insert(0, text_of(item.get("output")))
    messages = [i for i in items if "role" in i]
    text = "; ".join(results) if results else _last_user_text(messages)
    texts = [text_of(body.get("instructions")), *(text_of(i) for i in items)]
    return Turn(text, bool(results), _words(texts), _offered(body))


def anthropic_turn(body: JSON) -> Turn:
    """Anthropic Messages: tool results are ``tool_result`` blocks in the last user message."""
    messages = [m for m in body["messages"] if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    content = last.get("content")
    results = [text_of(b) for b in content if isinstance(b, dict)
               and b.get("type") == "tool_result"] if isinstance(content, list) else []
    text = "; ".join(results) if results else _last_user_text(messages)
    texts = [text_of(body.get("system")), *(text_of(m.get("content")) for m in messages)]
    return Turn(text, bool(results), _words(texts), _offered(body))


def parse_parts(text: str, offered: frozenset[str], seed: str,
                call_prefix: str) -> list[wire.Part]:
    """The answer's parts in the order the markers come: ``call <tool> {json}`` naming an
    offered tool, ``say "text"``, ``think "text"``. Text and reasoning count only beside a
    tool call (alone, the model echoes as before)."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, wire.Part]] = []
    for match in _MARKER.finditer(text):
        try:
            arguments, _ = decoder.raw_decode(text, match.end())
        except ValueError:
            continue
        if isinstance(arguments, dict) and match.group(1) in offered:
            found.append((match.start(), wire.ToolCall("", match.group(1), arguments)))
    for match in _SPOKEN.finditer(text):
        try:
            said, _ = decoder.raw_decode(text, match.end())
        except ValueError:
            continue
        if isinstance(said, str):
            kind = wire.Text if match.group(1) == "say" else wire.Reasoning
            found.append((match.start(), kind(said)))
    found.sort(key=lambda item: item[0])
    if not any(isinstance(part, wire.ToolCall) for _, part in found):
        return []
    parts: list[wire.Part] = []
    calls = 0
    for _, part in found:
        if isinstance(part, wire.ToolCall):
            ident = wire.make_id(seed, call_prefix, calls, part.name)
            part = wire.ToolCall(ident, part.name, part.arguments)
            calls += 1
        parts.append(part)
    return parts


def request_seed(kind: str, body: Any) -> str:
    """A digest of the request: the same request always gets the same ids."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{kind}\n{canonical}".encode()).hexdigest()


def decide(turn: Turn, script: FakeScript, body: JSON, kind: str, call_prefix: str) -> wire.Reply:
    """The fake model itself: drift rule, else tool-call markers, else the echo."""
    seed = request_seed(kind, body)
    scripted = script.drifted(turn.text)
    source = scripted if scripted is not None else ("" if turn.from_tool else turn.text)
    parts: tuple[wire.Part, ...] = tuple(parse_parts(source, turn.tools, seed, call_prefix))
    if parts:
        output_words = _words(f"{p.name} {p.arguments_json}" if isinstance(p, wire.ToolCall)
                              else p.text for p in parts)
    else:
        text = scripted if scripted is not None else (
            ("tool said: " if turn.from_tool else "echo: ") + turn.text)
        parts = (wire.Text(text),)
        output_words = wire.count_words(text)
    model = script.served_model(str(body.get("model") or "fakellm"))
    return wire.Reply(seed, model, parts, turn.input_words, output_words, script.created)
