"""The provisioned Grafana dashboards as tests read them: their panels, and a panel's SQL run
the way Grafana would send it (``grafana_macros.expand``) with every variable at All, on a
store holding a recording."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rewind.collector.store.store import Store
from tests.support.grafana_macros import ALL, QueryContext, expand

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"


def load_dashboards() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        found[dashboard["uid"]] = dashboard
    return found


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out += panel.get("panels", [])
    return out


def queried(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["title"]: p for p in panels(dashboard) if p.get("targets")}


def all_selected(store: Store, hours: float = 1) -> QueryContext:
    """The last ``hours`` with every variable at All (or its first option when All is not
    offered), options filled from the variables' own queries on ``store``."""
    now = datetime.now(timezone.utc)
    ctx = QueryContext(now - timedelta(hours=hours), now + timedelta(minutes=10))
    for choice in (v for d in load_dashboards().values() for v in d["templating"]["list"]
                   if v["type"] == "custom"):  # a fixed choice: its default
        ctx = replace(ctx, values={**ctx.values, choice["name"]: [choice["current"]["value"]]})
    variables = [v for d in load_dashboards().values() for v in d["templating"]["list"]
                 if v["type"] == "query"]  # a textbox (the Rewind UI's address) holds no SQL
    for variable in variables:
        rows = store.query(expand(variable["query"]["rawSql"], ctx))
        options = [str(next(iter(row.values()))) for row in rows]
        chosen = [ALL] if variable.get("includeAll") else options[:1]
        ctx = replace(ctx, values={**ctx.values, variable["name"]: chosen},
                      options={**ctx.options, variable["name"]: options})
    return ctx


def panel_rows(store: Store, uid: str, title: str, ctx: QueryContext) -> list[dict[str, Any]]:
    """The rows of a panel with one query."""
    [target] = queried(load_dashboards()[uid])[title]["targets"]
    return store.query(expand(target["rawSql"], ctx))
