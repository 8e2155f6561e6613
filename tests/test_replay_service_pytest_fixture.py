"""An incident of a service becomes a regression test: the recorded request, exported to a
file, replayed against the app by the ``rewind_request`` fixture, and the app driven through
Starlette's ``TestClient`` inside a ``@pytest.mark.rewind`` test (the in-process client is the
inbound side, never taken for an outbound call)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tests.support.service_recording import ServiceRecording

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
WRONG = {"user": "u1", "question": "where is order 7"}
BROKEN = {"user": "u2", "question": "where is order 404"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = ServiceRecording(tmp_path_factory.mktemp("incident"))
    try:
        recording.record([WRONG, BROKEN])
    finally:
        recording.finish()
    return recording


def test_an_incident_becomes_a_test_driving_the_app(pytester, recorded, monkeypatch):
    for name, value in recorded.env.items():  # the servers the app knows: both down now
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    suite = pytester.mkdir("suite")
    (suite / "incidents").mkdir()
    shutil.copy(recorded.rw(WRONG), suite / "incidents" / "wrong.rw")
    shutil.copy(recorded.rw(BROKEN), suite / "incidents" / "broken.rw")
    (suite / "test_orders.py").write_text(textwrap.dedent(
        f"""
        import pytest
        from fastapi.testclient import TestClient
        from tests.support import orders_service as orders


        @pytest.mark.rewind(cassette="incidents/wrong.rw")
        def test_the_wrong_answer_through_the_test_client():
            with TestClient(orders.app) as client:
                answer = client.post("/chat", json={WRONG!r})
            assert answer.status_code == 200
            assert "delivered" in answer.json()["answer"]


        @pytest.mark.rewind(cassette="incidents/wrong.rw",
                            ignore=["body.messages[1].content"], clock="live")
        def test_marker_options():
            with TestClient(orders.app) as client:
                answer = client.post("/chat", json={{"user": "u1",
                                                    "question": "where is order 7, please"}})
            assert answer.status_code == 200


        @pytest.mark.rewind(cassette="incidents/wrong.rw")
        def test_a_changed_question_fails_with_the_report():
            with TestClient(orders.app) as client:
                client.post("/chat", json={{"user": "u1", "question": "where is order 8"}})


        def test_the_500_is_reproduced(rewind_request):
            outcome = rewind_request("incidents/broken.rw").send(orders.app)
            assert outcome.same, outcome.describe()
            assert outcome.actual["status"] == 500


        def test_after_the_fix(rewind_request, monkeypatch):
            monkeypatch.setenv(orders.FIXED, "1")
            outcome = rewind_request("incidents/broken.rw").send(orders.app)
            assert outcome.report.divergence is None
            assert outcome.actual == {{"status": 200, "body": {{
                "answer": "I do not know this order.", "user": "u2"}}}}
        """))
    result = pytester.runpytest_subprocess("suite", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    output = result.stdout.str()
    failure = output.split("test_a_changed_question_fails_with_the_report ___")[1]
    assert "replay diverged at step 0: request differs from the recording" in failure
    assert "now:      'where is order 8'" in failure
