"""The embedded store serves the worker's threads at once: a read answers while a long
statement runs (a page is not held up behind a slow listing or an insert), and many threads
reading and writing together each get their own answers, never another's or an empty one."""

from __future__ import annotations

import threading
import time

from rewind.collector.store.store import Store

RUNNING = ("SELECT query FROM system.processes WHERE query LIKE '%sleep(2)%' "
           "AND query NOT LIKE '%system.processes%'")


def test_a_read_answers_while_a_long_statement_runs(store: Store):
    slow = threading.Thread(target=store.query, args=("SELECT sleep(2) AS slept",))
    slow.start()
    try:
        seen: list[dict] = []
        deadline = time.monotonic() + 2
        while not seen and time.monotonic() < deadline and slow.is_alive():
            seen = store.query(RUNNING)  # one statement queued behind it would see it ended
        assert seen, "no read ran while the long statement was running"
    finally:
        slow.join()
    assert store.query(RUNNING) == []


def test_threads_reading_and_writing_at_once_each_get_their_own_answers(store: Store):
    store.command("CREATE TABLE notes (writer UInt32, n UInt32) ENGINE = MergeTree ORDER BY writer")
    failures: list[str] = []
    start = threading.Barrier(12)

    def writer_and_reader(me: int) -> None:
        start.wait()
        for n in range(15):
            store.insert("notes", [[me, n]], ["writer", "n"])
            mine = store.query("SELECT count() AS c, max(n) AS last FROM notes "
                               "WHERE writer = {me:UInt32}", {"me": me})
            echoed = store.query("SELECT {me:UInt32} * 1000 + {n:UInt32} AS v",
                                 {"me": me, "n": n})
            if mine != [{"c": n + 1, "last": n}] or echoed != [{"v": me * 1000 + n}]:
                failures.append(f"writer {me} at {n}: {mine} {echoed}")

    threads = [threading.Thread(target=writer_and_reader, args=(me,)) for me in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    assert store.query("SELECT count() AS c FROM notes") == [{"c": 12 * 15}]
