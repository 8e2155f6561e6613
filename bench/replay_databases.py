"""End-to-end replay of a run that reads a database: an agent script making 5 PostgreSQL
queries (psycopg) and 5 ``openai`` calls (8 KB prompts), each variant a fresh process. Live
against a loopback PostgreSQL (Debian's, started here as the tests start it) and a fake LLM;
``rewind replay --cassette`` on the recorded ``.rw`` file. Printed as ratios to live, wall and
CPU, as ``replay.py`` prints its end-to-end runs. Run by ``bench/replay.py``, or alone:

    python bench/replay_databases.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from replay import BIN, TRACE, Serve, _children_cpu, print_runs, run
from rewind.replay.testing.fakellm import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent  # the tests' database servers are reused
AGENT = textwrap.dedent("""
    import hashlib, os
    import httpx, openai, psycopg

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-bench",
                           http_client=httpx.Client(), max_retries=0)
    answers = []
    with psycopg.connect(os.environ["PG_DSN"]) as conn:
        for i in range(5):
            name, plan = conn.execute("SELECT name, plan FROM customers WHERE id = %s",
                                      (7 + i % 2,)).fetchone()
            reply = client.chat.completions.create(model="gpt-4o", messages=[
                {"role": "system", "content": f"The customer is {name} on the {plan} plan."},
                {"role": "user", "content": f"question {i}: " + "context " * 900}])
            answers.append(reply.choices[0].message.content)
    print(hashlib.sha256("|".join(answers).encode()).hexdigest())
""")


def databases_end_to_end(rounds: int) -> None:
    sys.path.insert(0, str(ROOT))
    import psycopg

    from tests.support.databases import postgres_server

    with tempfile.TemporaryDirectory(prefix="rewind-bench-db-") as tmp, \
            FakeLLMServer() as llm, postgres_server() as pg:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, plan text)")
            conn.execute("INSERT INTO customers VALUES (7, 'Ada', 'gold'), (8, 'Bob', 'free')")
        agent, archive = Path(tmp, "agent.py"), f"{tmp}/run.rw"
        agent.write_text(AGENT)
        serve = Serve(tmp)
        env = {**os.environ, "LLM_URL": llm.base_url, "PG_DSN": pg.dsn, "REWIND_URL": serve.api}
        try:
            recorded = run([str(BIN / "rewind"), "record", "--endpoint", serve.grpc, "--",
                            sys.executable, str(agent)], env)
            trace_id = TRACE.findall(recorded.stderr)[0]
            run([str(BIN / "rewind"), "export", trace_id, "-o", archive], env)
        finally:
            serve.stop()
        variants = {
            "live": [sys.executable, str(agent)],
            "rewind replay --cassette file.rw": [
                str(BIN / "rewind"), "replay", "--cassette", archive, "--", sys.executable,
                str(agent)],
        }
        expected = run(variants["live"], env).stdout
        wall: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(rounds + 1):  # round 0 warms caches and is not counted
            for name in list(variants)[:: 1 if round_ % 2 else -1]:  # turns to go first
                command = variants[name]
                cpu_before, started = _children_cpu(), time.perf_counter()
                done = run(command, env)
                elapsed, used = time.perf_counter() - started, _children_cpu() - cpu_before
                if done.stdout != expected:
                    raise RuntimeError(f"{name} answered differently:\n{done.stderr}")
                if round_:
                    wall[name].append(elapsed)
                    cpu[name].append(used)
    print_runs(f"end to end, 5 PostgreSQL queries and 5 openai calls with 8 KB prompts, "
               f"median of {rounds} interleaved rounds (min-max):", wall, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    databases_end_to_end(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
