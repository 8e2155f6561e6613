"""Several API processes (``--workers N``): refused on the embedded store with the limit and
the way to scale out; the processes themselves serve the API with their own connection and
the parent's tokens."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store, store_id
from rewind.replay.sources import archive
from tests.support.cli import rewind
from tests.support.ports import free_port, wait_for_port
from tests.support.trace_files import TRACE, chat_spans


@pytest.mark.parametrize("command", [("serve", "--grpc-port", "0", "--http-port", "0",
                                      "--api-port", "0"), ("worker", "--port", "0")])
def test_workers_on_the_embedded_store_says_the_limit_and_how_to_scale_out(command, tmp_path):
    done = rewind(*command, "--workers", "4", store=tmp_path / "store")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"error: --workers 4: the embedded store chdb://{tmp_path}/store "
                               "can be opened by one process only"), done.stderr
    for fix in ("ClickHouse server", "--clickhouse http://", "--workers N"):
        assert fix in done.stderr
    assert not (tmp_path / "store").exists()  # refused before anything was opened


PROCESSES = textwrap.dedent("""
    import sys
    from dataclasses import dataclass
    from rewind.replay.worker.server import bind, run_processes

    @dataclass
    class Store:
        url: str

    if __name__ == "__main__":
        store_url, port, tokens = sys.argv[1:]
        run_processes(bind("127.0.0.1", int(port)), Store(store_url), 1, (tokens, None, 2.0),
                      "--tokens-file")
        print("stopped", flush=True)
""")


def test_an_api_process_serves_with_its_own_store_connection_and_the_tokens(tmp_path):
    """The processes' machinery, with one process (the embedded store allows no more; a
    ClickHouse server takes N the same way)."""
    store_url = f"chdb://{tmp_path / 'store'}"
    store = Store(store_url)
    migrate(store)
    archive.import_into(store, archive.pack(TRACE, chat_spans()))
    store.close()
    (tmp_path / "tokens").write_text("reader-token\n")
    (tmp_path / "processes.py").write_text(PROCESSES)
    port = free_port()
    process = subprocess.Popen([sys.executable, str(tmp_path / "processes.py"), store_url,
                                str(port), str(tmp_path / "tokens")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, timeout=60)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/health", timeout=10).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # behind tokens the public /health names the store by its digest alone
        assert httpx.get(f"{url}/health").json()["store_id"] == store_id(store_url)
        assert httpx.get(f"{url}/v1/traces", timeout=30).status_code == 401
        listed = httpx.get(f"{url}/v1/traces", timeout=30,
                           headers={"authorization": "Bearer reader-token"})
        assert listed.status_code == 200, listed.text
        assert [t["TraceId"] for t in listed.json()["traces"]] == [TRACE]
        # the sign-in form names the option of the command that started the processes
        page = httpx.get(f"{url}/traces", timeout=30, headers={"accept": "text/html"})
        assert page.status_code == 401 and "Sign in" in page.text
        assert "--tokens-file" in page.text and "--auth-tokens-file" not in page.text
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and "stopped" in output, output
