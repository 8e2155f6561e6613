"""The edits a fork applies to a run, and how they change a request body. Pure.

A fork at step N may replace the last user message of step N's request, the model's answer at
step N, the result of the tool called at step N, the answer of the HTTP call made at step N (a
tool's API: its body and, optionally, its status), the system prompt, the model, or sampling
params. System prompt, model and params apply to every model call from N on. The edited user
message is found again in later requests (same position in the message list, same original
text) and replaced there too, so the conversation the model sees stays the edited one even
though the agent keeps its own, unedited history.

Request shapes understood: ``messages`` (OpenAI Chat Completions, Anthropic Messages), ``input``
(OpenAI Responses: a string or items) and ``contents`` (Gemini).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

CONTAINERS = ("messages", "input", "contents")


@dataclass(frozen=True)
class Edits:
    user_message: str | None = None
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    has_tool_result: bool = False
    tool_result: Any = None
    http_response: dict[str, Any] | None = None  # {"body": text, "status": code or None}
    system_message: str | None = None
    answer: str | None = None  # the model's answer at the fork step, in place of the recorded

    @property
    def has_http_response(self) -> bool:
        return self.http_response is not None

    @property
    def touches_requests(self) -> bool:
        return (self.user_message is not None or self.model is not None or bool(self.params)
                or self.system_message is not None)

    def to_dict(self) -> dict[str, Any]:
        """Only what was edited (this is what ``rewind.fork.edits`` records)."""
        out: dict[str, Any] = {}
        if self.user_message is not None:
            out["user_message"] = self.user_message
        if self.system_message is not None:
            out["system_message"] = self.system_message
        if self.answer is not None:
            out["answer"] = self.answer
        if self.has_tool_result:
            out["tool_result"] = self.tool_result
        if self.http_response is not None:
            out["http_response"] = dict(self.http_response)
        if self.model is not None:
            out["model"] = self.model
        if self.params:
            out["params"] = dict(self.params)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edits:
        return cls(data.get("user_message"), data.get("model"), dict(data.get("params") or {}),
                   "tool_result" in data, data.get("tool_result"), data.get("http_response"),
                   data.get("system_message"), data.get("answer"))


@dataclass(frozen=True)
class UserSlot:
    """Where the edited user message sits: the container, its index (None: ``input`` is a
    plain string) and the text it had when recorded."""

    container: str
    index: int | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"container": self.container, "index": self.index, "text": self.text}


def _blocks(message: dict[str, Any]) -> tuple[str, Any]:
    key = "content" if "content" in message else "parts"
    return key, message.get(key)


def message_text(message: Any) -> str | None:
    """The text of a user message; None when it has no text (e.g. only tool results)."""
    if not isinstance(message, dict) or message.get("role", "user") != "user":
        return None
    if message.get("type") not in (None, "message"):
        return None  # a Responses item such as function_call_output
    _, content = _blocks(message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"),
                                                                                  str)]
        return "".join(texts) if texts else None
    return None


def find_user_slot(body: Any) -> UserSlot | None:
    """The last user message with text in a request body."""
    if not isinstance(body, dict):
        return None
    for container in CONTAINERS:
        value = body.get(container)
        if isinstance(value, str) and container == "input":
            return UserSlot(container, None, value)
        if isinstance(value, list):
            for index in range(len(value) - 1, -1, -1):
                text = message_text(value[index])
                if text is not None:
                    return UserSlot(container, index, text)
    return None


def _with_text(message: dict[str, Any], text: str) -> dict[str, Any]:
    key, content = _blocks(message)
    if isinstance(content, str):
        return {**message, key: text}
    blocks: list[Any] = []
    placed = False
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            if not placed:
                blocks.append({**block, "text": text})
                placed = True
            continue
        blocks.append(block)
    return {**message, key: blocks}


_SYSTEM_ROLES = ("system", "developer")
_SYSTEM_KEYS = ("system", "instructions", "systemInstruction", "system_instruction")


def with_system(body: dict[str, Any], text: str) -> tuple[dict[str, Any], bool]:
    """``body`` (a copy when changed) with its system prompt's text replaced wherever the
    request shape keeps it: Anthropic's and Responses' top-level ``system``/``instructions``,
    Gemini's ``systemInstruction``, or the first system (or developer) message of
    ``messages``/``input``; False when it has none."""
    for key in _SYSTEM_KEYS:
        value = body.get(key)
        if isinstance(value, str):
            return {**body, key: text}, True
        if isinstance(value, list) and any(isinstance(b, dict) and "text" in b for b in value):
            return {**body, key: _with_text({"content": value}, text)["content"]}, True
        if isinstance(value, dict) and isinstance(_blocks(value)[1], (str, list)):
            return {**body, key: _with_text(value, text)}, True
    for container in ("messages", "input"):
        items = body.get(container)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if isinstance(item, dict) and item.get("role") in _SYSTEM_ROLES:
                changed = list(items)
                changed[index] = _with_text(item, text)
                return {**body, container: changed}, True
    return body, False


def apply_edits(body: Any, edits: Edits, slot: UserSlot | None) -> tuple[Any, bool]:
    """The edited body (a copy) and whether the user message was found and replaced."""
    if not isinstance(body, dict):
        return body, False
    edited = copy.copy(body)
    if edits.model is not None:
        edited["model"] = edits.model
    edited.update(edits.params)
    if edits.system_message is not None:
        edited, _ = with_system(edited, edits.system_message)
    replaced = False
    if edits.user_message is not None and slot is not None:
        value = edited.get(slot.container)
        if slot.index is None:
            if value == slot.text:
                edited[slot.container] = edits.user_message
                replaced = True
        elif isinstance(value, list) and slot.index < len(value) \
                and message_text(value[slot.index]) == slot.text:
            items = list(value)
            items[slot.index] = _with_text(items[slot.index], edits.user_message)
            edited[slot.container] = items
            replaced = True
    return edited, replaced
