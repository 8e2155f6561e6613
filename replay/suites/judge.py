"""The LLM judge: a model the user configures (any OpenAI-compatible chat completions
endpoint) scores a new answer against a criterion, the recorded answer beside it. Called from
the parent process, never under replay."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewind.exporter.core.errors import RewindError

PROMPT = ("You grade an AI assistant's answer. Reply with a score from 0 to 1 (1: fully meets "
          "the criterion) first, then one sentence saying why.")
_NUMBER = re.compile(r"(?<![\w.])(0(?:\.\d+)?|1(?:\.0+)?)(?![\w.])")
TIMEOUT_S = 60.0


class JudgeError(RewindError):
    """The judge model did not answer, or answered with no score."""


@dataclass(frozen=True)
class JudgeModel:
    url: str  # the API's base, e.g. https://api.openai.com/v1
    model: str
    api_key: str = ""

    def score(self, criterion: str, answer: str, recorded: str) -> tuple[float, str]:
        """(score, the judge's words)."""
        ask = (f"Criterion: {criterion}\nRecorded answer (before the change): {recorded}\n"
               f"New answer: {answer}")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        import httpx  # here: a worker or a suite that never judges does not load it

        try:
            response = httpx.post(f"{self.url.rstrip('/')}/chat/completions", headers=headers,
                                  timeout=TIMEOUT_S, json={
                                      "model": self.model, "temperature": 0,
                                      "messages": [{"role": "system", "content": PROMPT},
                                                   {"role": "user", "content": ask}]})
            response.raise_for_status()
            text = str(response.json()["choices"][0]["message"]["content"] or "")
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as error:
            raise JudgeError(f"the judge model {self.model} at {self.url} failed: {error}",
                             hint="check --judge-url, --judge-model and the key") from None
        found = _NUMBER.search(text)
        if found is None:
            raise JudgeError(f"the judge model gave no score from 0 to 1: {text[:200]!r}")
        return float(found.group(1)), text.strip()
