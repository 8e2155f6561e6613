"""How a command fails: one error line on stderr with the fix when it is known, exit status 2."""

from __future__ import annotations

from click.testing import CliRunner

from rewind.replay.cli.main import main
from tests.support.ports import taken_port


def test_a_taken_port_fails_with_one_line_naming_the_address_and_the_fix(tmp_path):
    with taken_port() as port:
        done = CliRunner().invoke(main, ["worker", "--clickhouse", f"chdb://{tmp_path}/store",
                                         "--port", str(port)])
    assert done.exit_code == 2
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, done.output
    assert lines[0].startswith("error: ") and f"127.0.0.1:{port}" in lines[0]
    assert "pick another port" in lines[0]


def test_a_usage_error_names_the_flags_that_fix_it():
    done = CliRunner().invoke(main, ["bisect", "only-one-run"])
    assert done.exit_code == 2
    assert done.output.strip() == (
        "error: give two runs, GOOD then BAD (trace ids or .rw files), or --between A B")
