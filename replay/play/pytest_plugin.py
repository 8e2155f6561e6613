"""pytest plugin: a recorded incident becomes a regression test that runs offline.

    @pytest.mark.rewind(cassette="incidents/checkout.rw")      # relative to this test file
    def test_checkout_agent():
        assert run_agent() == "refund issued"

    @pytest.mark.rewind(trace_id="4bf92f3577b34da6a3ce929d0e0e4736", mode="lenient")
    def test_against_the_store(rewind_replay):                 # the ReplaySession, if wanted
        run_agent()
        assert rewind_replay.matcher.replayed == rewind_replay.matcher.total

Inside a marked test every LLM call is answered from the recording; in strict mode (default) the
first request that departs from it fails the test with the divergence report (step, field,
recorded and current values). The marker also takes ``allow_live`` (hosts), ``ignore`` (request
paths) and ``clock`` (``"recorded"``, the default: the test runs on the recorded run's clock,
or ``"live"``), as ``rewind-replay`` does. A test client talking to the app in process
(Starlette's ``TestClient``, httpx's ``ASGITransport``) is the inbound side: never answered.

A recorded request of a service replayed against the app, compared with the recorded answer::

    def test_incident_stays_fixed(rewind_request):
        outcome = rewind_request("4bf92f35").send(app)   # or "incidents/checkout.rw"
        assert outcome.actual["status"] == 200, outcome.describe()

pytest loads this module in every run of an environment where Rewind is installed, so importing
it only defines hooks: the replay machinery is imported for marked tests alone.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rewind.replay.cassette.model import Cassette
    from rewind.replay.play.session import ReplaySession

MARKER = "rewind"
FIXTURE = "rewind_replay"
REQUEST_FIXTURE = "rewind_request"
MARKER_ARGS = frozenset({"cassette", "trace_id", "mode", "allow_live", "ignore", "clock"})
_SOURCE = pytest.StashKey[Any]()
_CASSETTES = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rewind", "replay LLM calls from Rewind recordings")
    group.addoption("--rewind-api", default=None, metavar="URL",
                    help="Worker to read @pytest.mark.rewind(trace_id=...) traces from "
                         "(default: the one `rewind --api` reads, else http://127.0.0.1:8787).")
    group.addoption("--rewind-clickhouse", default=None, metavar="URL",
                    help="Store to read traces from when no worker answers "
                         "(default: the one `rewind --clickhouse` reads).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rewind(cassette=None, trace_id=None, mode='strict', allow_live=(), ignore=(), "
        "clock='recorded'): answer every LLM call of the test from a recording, a .rw file "
        "(relative to the test file) or a stored trace id",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    store = getattr(config.stash.get(_SOURCE, None), "store", None)
    if store is not None:
        store.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A marked test gets the replay whether or not it asks for the fixture."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is not None and FIXTURE not in names and item.get_closest_marker(MARKER):
            names.append(FIXTURE)


def _marker_settings(marker: pytest.Mark) -> dict[str, Any]:
    from rewind.exporter.core.errors import InvalidValue

    settings = dict(marker.kwargs)
    if marker.args:
        settings.setdefault("cassette", marker.args[0])
    unknown = set(settings) - MARKER_ARGS
    if unknown:
        raise InvalidValue(f"@pytest.mark.rewind got unknown arguments {sorted(unknown)}; "
                           f"it takes {sorted(MARKER_ARGS)}")
    if (settings.get("cassette") is None) == (settings.get("trace_id") is None):
        raise InvalidValue("@pytest.mark.rewind needs exactly one of cassette='file.rw' or "
                           "trace_id='...'")
    return settings


def _load(config: pytest.Config, test_dir: Path, settings: dict[str, Any]) -> Cassette:
    from rewind.replay.sources.archive import read_cassette
    from rewind.replay.sources.locate import open_source, resolve_trace_id

    cache = config.stash.setdefault(_CASSETTES, {})
    if settings.get("cassette") is not None:
        path = Path(settings["cassette"])
        key = str(path if path.is_absolute() else (test_dir / path).resolve())
        if key not in cache:
            cache[key] = read_cassette(key)
        return cache[key]
    key = str(settings["trace_id"]).strip().lower()
    if key not in cache:
        if _SOURCE not in config.stash:
            config.stash[_SOURCE] = open_source(config.getoption("rewind_api"),
                                                config.getoption("rewind_clickhouse"))
        source = config.stash[_SOURCE]
        cache[key] = source.cassette(resolve_trace_id(source, key))  # a unique prefix too
    return cache[key]


@pytest.fixture
def rewind_replay(request: pytest.FixtureRequest) -> Iterator[ReplaySession]:
    """The replay session of a ``@pytest.mark.rewind`` test, installed for its duration."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        pytest.fail(f"the {FIXTURE} fixture needs @pytest.mark.rewind(cassette=... or "
                    "trace_id=...) on the test", pytrace=False)
    from rewind.exporter.core.errors import RewindError
    from rewind.replay.play import player
    from rewind.replay.play.session import STRICT, ReplaySession

    try:
        settings = _marker_settings(marker)
        cassette = _load(request.config, Path(request.node.path).parent, settings)
        session = ReplaySession(cassette, mode=settings.get("mode") or STRICT,
                                allow_live=_globs(settings.get("allow_live")),
                                ignore=_globs(settings.get("ignore")),
                                clock=settings.get("clock") or "recorded")
    except (RewindError, OSError) as error:
        problem = f"rewind: {error}"
    else:
        problem = ""
    if problem:  # failed outside the handler, so the report is the message, not a chain
        pytest.fail(problem, pytrace=False)
    clock = settings.get("clock") or "recorded"  # the recorded run's clock, as rewind-replay
    with player.replaying(session, clock_mode=clock, announce=False):  # reported once, on failure
        yield session


def _globs(value: Any) -> tuple[str, ...]:
    """A marker's ``allow_live`` / ``ignore``: one string or several."""
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@pytest.fixture
def rewind_request(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``rewind_request(ID or "file.rw", mode=, allow_live=, ignore=, clock=)``: a recorded
    request (or job) with ``.send(app)`` (``.call(function)`` for a job), which replays it
    with its outbound calls answered from its trace and compares the answer."""
    from rewind.exporter.core.errors import RewindError
    from rewind.replay.play.services.recorded_request import RecordedRequest

    def recorded(ref: str, mode: str = "strict", allow_live: Any = (), ignore: Any = (),
                 clock: str = "recorded") -> RecordedRequest:
        where = {"cassette": ref} if str(ref).endswith(".rw") else {"trace_id": ref}
        try:
            cassette = _load(request.config, Path(request.node.path).parent, where)
        except (RewindError, OSError) as error:
            pytest.fail(f"rewind: {error}", pytrace=False)
        return RecordedRequest(cassette, mode, _globs(allow_live), _globs(ignore), clock)

    return recorded


def _report(session: ReplaySession) -> str:
    return f"rewind: {session.report().headline()}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """A strict divergence fails the test with its report, even if the code under test
    caught the error or turned it into another one."""
    session = getattr(item, "funcargs", {}).get(FIXTURE)
    if session is None:
        return (yield)
    try:
        result = yield
    except BaseException:
        if not _stopped(session):
            item.add_report_section("call", "rewind", _report(session))
            raise
    else:
        if not _stopped(session):
            item.add_report_section("call", "rewind", _report(session))
            return result
    # Out of the handler: the report alone, not chained to whatever the code raised.
    divergence = session.divergence
    pytest.fail(f"{divergence.describe() if divergence else ''}\n{_report(session)}",
                pytrace=False)


def _stopped(session: ReplaySession) -> bool:
    """A strict replay that met a divergence, whatever the code did with the error."""
    from rewind.replay.play.session import STRICT

    return session.divergence is not None and session.mode == STRICT
