"""The pytest plugin, as a user meets it: an incident recorded in production (here: through
``rewind serve``), exported to a file, becomes a test that runs offline; when the code changes
its requests, the test fails with the divergence report."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

pytest_plugins = ["pytester"]


def test_marked_tests_replay_offline_and_a_changed_prompt_fails_with_the_report(
    pytester, parcel_recording, parcel_file
):
    rec, path = parcel_recording, parcel_file
    suite = pytester.mkdir("suite")
    rec.write_agent(suite)
    (suite / "incidents").mkdir()
    shutil.copy(path, suite / "incidents" / "parcel.rw")
    offline = rec.dead_url() + "/v1"  # nothing listens there: only the replay answers
    (suite / "test_support.py").write_text(textwrap.dedent(
        f"""
        import pytest
        import support_agent
        from rewind.exporter.capture import transport

        OFFLINE = {offline!r}


        @pytest.mark.rewind(cassette="incidents/parcel.rw")
        def test_answers_as_recorded():
            assert support_agent.run(OFFLINE, "unused", {rec.question!r}) == {rec.output.strip()!r}


        @pytest.mark.rewind(trace_id={rec.trace_id!r})
        def test_from_the_store_every_step_used(rewind_replay):
            support_agent.run(OFFLINE, "unused", {rec.question!r})
            assert rewind_replay.matcher.replayed == rewind_replay.matcher.total == 2


        @pytest.mark.rewind(trace_id={rec.trace_id[:8]!r})  # a unique prefix, as in the CLI
        def test_from_a_prefix_of_the_id(rewind_replay):
            support_agent.run(OFFLINE, "unused", {rec.question!r})
            assert rewind_replay.cassette.trace_id == {rec.trace_id!r}


        @pytest.mark.rewind(cassette="incidents/parcel.rw")
        def test_after_the_prompt_changed():
            try:
                support_agent.run(OFFLINE, "unused", "where is my refund")
            except BaseException:
                pass  # code that swallows errors still fails on a divergence


        @pytest.mark.rewind(cassette="incidents/parcel.rw")
        def test_uncaught_divergence():
            support_agent.run(OFFLINE, "unused", "where is my refund")


        @pytest.mark.rewind(cassette="incidents/missing.rw")
        def test_with_a_missing_file():
            pass


        def test_unmarked_tests_run_without_replay():
            assert transport.hooks.responder is None
        """
    ))
    result = pytester.runpytest_subprocess("suite", "-p", "no:cacheprovider",
                                           f"--rewind-api={rec.served.api_url}")
    result.assert_outcomes(passed=4, failed=2, errors=1)
    result.stdout.fnmatch_lines([
        "*FAILED suite/test_support.py::test_after_the_prompt_changed*",
    ])
    output = result.stdout.str()
    failure = output.split("test_after_the_prompt_changed ___")[1].split("\n___")[0]
    assert "replay diverged at step 0: request differs from the recording" in failure
    assert "field body.messages[1].content:" in failure
    assert "recorded: 'where is my parcel'" in failure
    assert "now:      'where is my refund'" in failure
    assert f"replayed 0/2 recorded steps of trace {rec.trace_id} (strict)" in failure
    assert failure.count("replay diverged at step 0") == 1
    uncaught = output.split("test_uncaught_divergence ___")[1].split("\n===")[0]
    assert "During handling of the above exception" not in uncaught
    assert uncaught.count("replay diverged at step 0") == 1
    assert "rewind: cannot read trace file" in result.stdout.str()
    assert "incidents/missing.rw" in result.stdout.str()
    assert rec.llm.connections == rec.live_connections


def test_importing_the_plugin_loads_nothing_heavy():
    """pytest imports it in every run of an environment where Rewind is installed."""
    probe = ("import sys, rewind.replay.play.pytest_plugin; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('rewind', 'chdb', 'clickhouse_connect', 'zstandard', 'httpx', 'openai')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(
        ["rewind", "rewind.replay", "rewind.replay.play", "rewind.replay.play.pytest_plugin"])
