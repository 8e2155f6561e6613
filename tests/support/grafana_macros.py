"""What Grafana does to a ClickHouse panel query before the server sees it, so the dashboard
test (``test_deploy_dashboards.py``) can run the very SQL a user's Grafana would send.

Three steps, in Grafana's order: the plugin's frontend ``$__conditionalAll(condition, $var)``
(``1=1`` when the variable is All), Grafana's template variables (``${var:singlequote}``,
``${var}``, ``$var``), then the plugin's backend macros with the expansions of
grafana/clickhouse-datasource ``pkg/macros`` (argument parsing as grafana-plugin-sdk-go
``sqlutil``: ``\\$__name\\b``, arguments only when ``(`` follows at once, split at top-level
commas). Anything left that looks like a macro or variable is an error, so a typo in a dashboard
fails the test instead of reaching ClickHouse.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

ALL = "$__all"


@dataclass(frozen=True)
class QueryContext:
    """A panel refresh: time range, interval and the variables' current values."""

    start: datetime
    end: datetime
    interval: timedelta = timedelta(seconds=60)
    values: dict[str, list[str]] = field(default_factory=dict)  # [ALL] means "All"
    options: dict[str, list[str]] = field(default_factory=dict)  # what All stands for


class MacroError(ValueError):
    pass


def _seconds(t: datetime) -> int:
    return int(t.timestamp())


def _millis(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _date(t: datetime) -> str:
    return f"toDate('{t.astimezone(timezone.utc):%Y-%m-%d}')"


def _one(args: list[str], name: str) -> str:
    if len(args) != 1:
        raise MacroError(f"$__{name}: expected 1 argument, received {len(args)}")
    return args[0]


def _macros(ctx: QueryContext) -> dict[str, Callable[[list[str]], str]]:
    frm, to = f"toDateTime({_seconds(ctx.start)})", f"toDateTime({_seconds(ctx.end)})"
    frm_ms = f"fromUnixTimestamp64Milli({_millis(ctx.start)})"
    to_ms = f"fromUnixTimestamp64Milli({_millis(ctx.end)})"
    seconds = max(int(ctx.interval.total_seconds()), 1)
    millis = max(int(ctx.interval.total_seconds() * 1000), 1)

    def date_time_filter(args: list[str]) -> str:
        if len(args) != 2:
            raise MacroError(f"$__dateTimeFilter: expected 2 arguments, received {len(args)}")
        d, t = args
        return (f"({d} >= {_date(ctx.start)} AND {d} <= {_date(ctx.end)}) AND "
                f"({t} >= {frm} AND {t} <= {to})")

    return {
        "fromTime": lambda a: frm,
        "toTime": lambda a: to,
        "fromTime_ms": lambda a: frm_ms,
        "toTime_ms": lambda a: to_ms,
        "timeFilter": lambda a: f"{_one(a, 'timeFilter')} >= {frm} AND {a[0]} <= {to}",
        "timeFilter_ms": lambda a: f"{_one(a, 'timeFilter_ms')} >= {frm_ms} AND {a[0]} <= {to_ms}",
        "dateFilter": lambda a: (f"{_one(a, 'dateFilter')} >= {_date(ctx.start)} AND "
                                 f"{a[0]} <= {_date(ctx.end)}"),
        "dateTimeFilter": date_time_filter,
        "dt": date_time_filter,
        "timeInterval": lambda a: (f"toStartOfInterval(toDateTime({_one(a, 'timeInterval')}), "
                                   f"INTERVAL {seconds} second)"),
        "timeInterval_ms": lambda a: (f"toStartOfInterval(toDateTime64("
                                      f"{_one(a, 'timeInterval_ms')}, 3), "
                                      f"INTERVAL {millis} millisecond)"),
        "interval_s": lambda a: str(seconds),
    }


def _arguments(text: str, start: int) -> tuple[list[str], int]:
    """Arguments of a macro whose '(' is at ``start``; returns them and the end index."""
    depth, parts, begin = 0, [], start + 1
    for i in range(start, len(text)):
        char = text[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                parts.append(text[begin:i])
                return [p.strip() for p in parts], i + 1
        elif char == "," and depth == 1:
            parts.append(text[begin:i])
            begin = i + 1
    raise MacroError(f"missing ')' after {text[max(start - 20, 0):start + 20]!r}")


def _conditional_all(sql: str, ctx: QueryContext) -> str:
    marker = "$__conditionalAll("
    while (at := sql.rfind(marker)) != -1:
        args, end = _arguments(sql, at + len(marker) - 1)
        if len(args) != 2 or not args[1].startswith("$"):
            raise MacroError(f"$__conditionalAll needs (condition, $variable): {args}")
        current = ctx.values.get(args[1].lstrip("$").strip("{}"))
        if current is None:
            raise MacroError(f"$__conditionalAll names an unknown variable {args[1]}")
        keep = current not in ([ALL], [""], [])
        sql = sql[:at] + (args[0] if keep else "1=1") + sql[end:]
    return sql


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _variables(sql: str, ctx: QueryContext) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        fmt = match.group(2)
        if name not in ctx.values:
            raise MacroError(f"unknown variable ${name}")
        values = ctx.values[name]
        if values == [ALL]:
            values = ctx.options[name]
        if fmt == "singlequote":
            return ",".join(_quote(v) for v in values)
        if fmt is not None:
            raise MacroError(f"variable format :{fmt} is not used by these dashboards")
        # The plugin's own default format: a multi-value becomes a quoted list.
        return values[0] if len(values) == 1 else ",".join(_quote(v) for v in values)

    return re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(?!__)(\w+)", replace, sql)


def _backend(sql: str, ctx: QueryContext) -> str:
    for name, expand in _macros(ctx).items():
        pattern = re.compile(rf"\$__{name}\b")
        while match := pattern.search(sql):
            end, args = match.end(), []
            if end < len(sql) and sql[end] == "(":
                args, end = _arguments(sql, end)
                args = [] if args == [""] else args
            sql = sql[:match.start()] + expand(args) + sql[end:]
    return sql


def expand(sql: str, ctx: QueryContext) -> str:
    sql = _backend(_variables(_conditional_all(sql, ctx), ctx), ctx)
    left = re.search(r"\$\w+|\$\{|\[\[", sql)
    if left:
        raise MacroError(f"not expanded: {sql[left.start():left.start() + 30]!r}")
    return sql
