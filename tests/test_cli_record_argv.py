"""``rewind record`` saves the command it runs (``process.command_args``) so the run page can
offer it again; credentials in it are masked before they leave: values of options and
variables named for one, URL passwords and credential query parameters, words shaped like a
known kind of key, and what ``REWIND_REDACT`` matches. Ordinary words stay as typed."""

from __future__ import annotations

import json
from urllib.parse import unquote

from rewind.exporter.core import attributes as A
from rewind.exporter.core.redaction import masked_argv
from rewind.replay.play.recorder import record_settings

M = "[REDACTED]"


def test_credentials_in_a_command_are_masked_and_the_rest_kept():
    argv = ["python", "agent.py", "--api-key", "sk-abcdefghijklmnopqrstu", "--token=abc123456",
            "--model", "gpt-4o", "OPENAI_API_KEY=xyz12345678", "--db",
            "postgres://app:hunter2pass@db:5432/orders", "--keyword", "cats", "--password",
            "--verbose", "https://h.example/v1?key=AIzaSyA123&q=1",
            "ghp_abcdefghijklmnopqrstuvwxyz0123", "--max-tokens", "100", "--auth-file",
            "creds.json", "-k", "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.c2lnbmF0dXJlc2ln",
            "--client-secret", "s3cr3t-value", "AWS_REGION=eu-west-1"]
    assert masked_argv(argv) == [
        "python", "agent.py", "--api-key", M, f"--token={M}", "--model", "gpt-4o",
        f"OPENAI_API_KEY={M}", "--db", f"postgres://app:{M}@db:5432/orders", "--keyword",
        "cats", "--password", "--verbose", f"https://h.example/v1?key={M}&q=1", M,
        "--max-tokens", "100", "--auth-file", "creds.json", "-k", M, "--client-secret", M,
        "AWS_REGION=eu-west-1"]


def _recorded_argv(env: dict[str, str], command: list[str]) -> list[str]:
    settings = record_settings(env, "/dev/null", "http://127.0.0.1:4317", "run", None, command)
    resource = settings["OTEL_RESOURCE_ATTRIBUTES"] or ""
    key, _, value = resource.rpartition(",")[2].partition("=")
    assert key == A.PROCESS_COMMAND_ARGS
    return json.loads(unquote(value))


def test_rewind_record_saves_the_command_with_its_credentials_masked():
    command = ["python", "agent.py", "--api-key", "sk-live-abcdefghijklmnop", "--customer",
               "ACME-4411-XY", "--question", "where is my parcel"]
    assert _recorded_argv({}, command) == [
        "python", "agent.py", "--api-key", M, "--customer", "ACME-4411-XY", "--question",
        "where is my parcel"]
    # the team's own patterns (REWIND_REDACT) apply to the command too
    masked = _recorded_argv({"REWIND_REDACT": r"ACME-\d{4}-[A-Z]{2}"}, command)
    assert masked[5] == M and masked[7] == "where is my parcel"
