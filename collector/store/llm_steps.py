"""One LLM call is one row, in SQL: the rule of ``rewind.replay.cassette.calls`` as closely as
SQL over ``rewind_llm_calls`` (or ``otel_traces``) allows.

Several spans may describe one call: an SDK's own span (anthropic's), another
instrumentation's, Rewind's. A row is a *shadow* when another LLM row of the same trace,
written by another instrumentation (scope), with the same operation (or one unnamed, or both
generating content) and an agreeing model (the same, one unnamed, or one a prefix of the other,
provider prefixes left out), overlaps it in time and
is preferred: Rewind's exchange first, then the one that started first, then the longer one.
Two rows with Rewind's exchange are never one call (each is one HTTP request). Ancestry, which
the pure rule also requires, is not in these rows: two concurrent calls to one model written
by different instrumentations and neither by Rewind can be taken for one call.

``rewind_llm_steps`` (migration 4) is ``rewind_llm_calls`` without the shadows; ``stats``,
``rewind_llm_costs`` and the dashboards read it. :data:`LLM_CALLS_IN_TRACE` counts the calls of
one trace in a query over ``otel_traces`` grouped by trace.
"""

from __future__ import annotations

from rewind.collector.store.schema import (
    IS_LLM_CALL,
    LLM_CALLS,
    SINGLE_NODE,
    Layout,
    span_attribute,
)
from rewind.exporter.core import attributes as A

LLM_STEPS = "rewind_llm_steps"

def shadowed_by(peer: str, span_id: str, start: str, end: str, operation: str, model: str,
                exact: str, scope: str) -> str:
    """True when the row described by the other arguments is a shadow of ``peer``, a tuple
    (SpanId, StartNs, EndNs, Operation, Model, Exact, Scope)."""
    p = [f"{peer}.{i}" for i in range(1, 8)]
    ops = ", ".join(f"'{op}'" for op in A.GENERATION_OPERATIONS)
    mine, theirs = _bare(model), _bare(p[4])
    return f"""({p[0]} != {span_id}
        AND ({p[6]} != {scope} OR {p[6]} = '' OR {scope} = '')
        AND ({p[3]} = {operation} OR {p[3]} = '' OR {operation} = ''
             OR ({p[3]} IN ({ops}) AND {operation} IN ({ops})))
        AND ({p[4]} = '' OR {model} = '' OR startsWith({theirs}, {mine})
             OR startsWith({mine}, {theirs}))
        AND {p[1]} <= {end} AND {start} <= {p[2]}
        AND NOT ({p[5]} AND {exact})
        AND (1 - {p[5]}, {p[1]}, {p[1]} - {p[2]}, {p[0]})
            < (1 - {exact}, {start}, {start} - {end}, {span_id}))"""


def _bare(model: str) -> str:
    """A model's name without a provider prefix (``openai/gpt-4o-mini``: ``gpt-4o-mini``)."""
    return f"replaceRegexpOne({model}, '^.*/', '')"


def _row(span_id: str, start: str, end: str, operation: str, model: str, exact: str,
         scope: str) -> tuple[str, ...]:
    return span_id, start, end, operation, model, exact, scope


# A rewind_llm_calls row, and the same fields of an otel_traces span.
_CALL_ROW = _row("SpanId", "toInt64(toUnixTimestamp64Nano(Timestamp))",
                 "toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)", "Operation",
                 "RequestModel", "toUInt8(Step >= 0)", "ScopeName")
SPAN_CALL_ROW = _row("SpanId", "toInt64(toUnixTimestamp64Nano(Timestamp))",
                 "toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)",
                 span_attribute(A.OPERATION), span_attribute(A.REQUEST_MODEL),
                 f"toUInt8(mapContains(SpanAttributes, '{A.STEP}'))", "ScopeName")
_LAMBDA_ROW = _row(*(f"c.{i}" for i in range(1, 8)))



def calls_counted(rows: str) -> str:
    """How many calls an array of one trace's LLM rows (:data:`SPAN_CALL_ROW` tuples) holds,
    each counted once."""
    return (f"arrayCount(c -> NOT arrayExists(p -> {shadowed_by('p', *_LAMBDA_ROW)}, {rows}), "
            f"{rows})")


# In a query over otel_traces grouped by TraceId: the trace's LLM calls, each counted once.
LLM_CALLS_IN_TRACE = calls_counted(f"groupArrayIf(({', '.join(SPAN_CALL_ROW)}), {IS_LLM_CALL})")


def steps_by_trace(where: str, facts: str, table: str = LLM_CALLS, counted: str = "1",
                   by: str = "TraceId") -> str:
    """A query for the ``rewind_llm_calls`` rows matching ``where`` and ``counted``, shadows
    dropped, one row per call with column ``f``: the tuple ``facts`` of the call's columns
    (``table``: the calls table's name in the layout, or a query with its columns). Rows
    matching ``where`` only are peers, never counted (the usage rollup counts some hours and
    compares them with the hours around); peers are grouped ``by`` the trace.

    Same rule as the view, several times faster than its window: a row with Rewind's exchange
    is never a shadow (it is preferred to any row without one, and two with one are never one
    call), so those are taken as they are; only the other rows are compared with the calls of
    their trace, put side by side in arrays. Shadows are found among the rows matching
    ``where`` (a period cuts a trace's peers too)."""
    row = ", ".join(_CALL_ROW)
    keep = f"(f, c) -> NOT arrayExists(p -> {shadowed_by('p', *_LAMBDA_ROW)}, peers)"
    mine, taken = ("Step < 0", "") if counted == "1" else (f"Step < 0 AND ({counted})",
                                                          f" AND ({counted})")
    return f"""SELECT {facts} AS f FROM {table} WHERE ({where}){taken} AND Step >= 0
UNION ALL
SELECT arrayJoin(arrayFilter({keep}, facts, mine)) AS f FROM (
    SELECT groupArray(({row})) AS peers, groupArrayIf(({row}), {mine}) AS mine,
           groupArrayIf({facts}, {mine}) AS facts
    FROM {table} WHERE {where}
    GROUP BY {by})"""


def llm_steps_view(layout: Layout = SINGLE_NODE) -> str:
    """One row per LLM call: ``rewind_llm_calls`` without the shadows."""
    peers = f"groupArray(({', '.join(_CALL_ROW)})) OVER (PARTITION BY TraceId)"
    return f"""
CREATE VIEW IF NOT EXISTS {layout.name(LLM_STEPS)}{layout.on_cluster} AS
SELECT * EXCEPT (Peers)
FROM (SELECT *, {peers} AS Peers FROM {layout.name(LLM_CALLS)})
WHERE NOT arrayExists(p -> {shadowed_by('p', *_CALL_ROW)}, Peers)
"""


# rewind_llm_calls' columns, in order (a table migrated from before migration 4 has ScopeName
# last too: ALTER TABLE ... ADD COLUMN puts it there).
CALL_COLUMNS = ("Timestamp", "TraceId", "SpanId", "ServiceName", "Step", "Operation", "Provider",
                "RequestModel", "ResponseModel", "InputTokens", "OutputTokens", "Duration",
                "StatusCode", "MatchKey", "FinishReasons", "ScopeName")
# Input tokens read from and written to the provider's cache (migration 10 adds them).
CACHE_COLUMNS = ("CacheReadTokens", "CacheCreationTokens")


def llm_steps_view_by_trace(layout: Layout = SINGLE_NODE,
                            names: tuple[str, ...] = CALL_COLUMNS) -> str:
    """``rewind_llm_steps`` again (migration 6), the same rows through ``steps_by_trace``
    instead of a window: several times faster for the dashboards and ``rewind_llm_costs``;
    ``names``: the columns it has (the cache columns since migration 10)."""
    columns = ", ".join(f"f.{n} AS {name}" for n, name in enumerate(names, 1))
    rows = steps_by_trace("1", f"({', '.join(names)})", layout.name(LLM_CALLS))
    return f"""
CREATE OR REPLACE VIEW {layout.name(LLM_STEPS)}{layout.on_cluster} AS
SELECT {columns}
FROM ({rows})
"""
