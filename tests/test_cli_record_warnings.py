"""``rewind record`` says when a run recorded no LLM call, with the likely causes, and still
records the run's other HTTP calls."""

from __future__ import annotations

import sys
import textwrap

from tests.support.cli import timed
from tests.support.harness import start_serve
from tests.support.http_service import ToolService

NO_LLM = textwrap.dedent(
    """
    import os, requests
    answer = requests.get(os.environ["TOOL_URL"] + "/weather", params={"city": "Quito"})
    print(answer.json()["city"])
    """
)


def test_a_run_without_llm_calls_is_recorded_with_a_warning_naming_the_causes(tmp_path):
    script = tmp_path / "tools_only.py"
    script.write_text(NO_LLM)
    served = start_serve(tmp_path / "store")
    try:
        with ToolService() as service:
            done, _ = timed("record", "--", sys.executable, str(script),
                            env=served.env(TOOL_URL=service.base_url, COLUMNS="200"))
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Quito\n"
        assert "recorded trace" in done.stderr
        warning = " ".join(done.stderr.split())
        assert "warning: no LLM call was recorded in this run (1 other HTTP calls were)" in warning
        assert "httpx, httpx2, requests, aiohttp, http.client with urllib and urllib3" in warning
        assert "another Python" in warning
        trace_id = done.stderr.split("recorded trace ")[1].split()[0]
        spans = served.wait_for_spans(trace_id, 2)
        assert [s["SpanName"] for s in spans if s["SpanAttributes"].get("rewind.kind")] == ["GET"]
    finally:
        served.stop()
