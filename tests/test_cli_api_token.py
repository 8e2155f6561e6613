"""A worker (or ``rewind serve``) with tokens is read through the CLI with ``REWIND_API_TOKEN``;
without it the CLI says which variable to set, in one line."""

from __future__ import annotations

import json

from tests.support.cli import rewind
from tests.support.harness import start_serve


def test_the_cli_reads_a_serve_with_tokens_through_rewind_api_token(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-op\n")
    served = start_serve(tmp_path / "store", args=("--auth-tokens-file", str(tokens)))
    try:
        allowed = rewind("traces", "--json", REWIND_URL=served.api_url, REWIND_API_TOKEN="tok-op")
        refused = rewind("traces", REWIND_URL=served.api_url)
        wrong = rewind("traces", REWIND_URL=served.api_url, REWIND_API_TOKEN="tok-nope")
    finally:
        served.stop()
    assert allowed.returncode == 0, allowed.stderr
    assert isinstance(json.loads(allowed.stdout), list | dict)
    for done in (refused, wrong):
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "REWIND_API_TOKEN" in lines[0], done.stderr
        assert "Traceback" not in done.stderr
