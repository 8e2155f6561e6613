"""The pages themselves: one HTML shell filled per page, the static scripts and style it
loads (package data, served as they are: no build step, nothing fetched from elsewhere), and
the same shell with everything inline for a shared file.

The shell carries what the page is (``#rewind-page``) as JSON; the scripts draw it, putting
recorded text in as text, never as markup. JSON inside a ``<script>`` element has every ``<``
escaped, so recorded text cannot close the element.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from functools import cache
from importlib import resources
from typing import Any

# Served at /ui/<name>; scripts load in this order (dom.js first: the others use it).
SCRIPTS = ("dom.js", "runs.js", "waterfall.js", "steps.js", "trace.js", "compare.js", "suites.js",
           "app.js")
STYLES = ("app.css",)
STATIC_FILES = (*STYLES, *SCRIPTS)
STATIC_PREFIX = "/ui/"
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# Pages load only what the worker serves; a shared file loads nothing at all.
PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
               "img-src 'self' data:; form-action 'self'; base-uri 'none'; "
               "frame-ancestors 'none'")
# Every HTML page the worker answers with carries these, the sign-in form and errors included.
PAGE_HEADERS = {"content-security-policy": PAGE_POLICY, "x-content-type-options": "nosniff",
                "referrer-policy": "no-referrer", "cache-control": "no-store"}
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
SHARED_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "img-src data:; base-uri 'none'; form-action 'none'")


@cache
def static_text(name: str) -> str:
    if name not in STATIC_FILES and name not in ("shell.html", "login.html"):
        raise KeyError(name)
    return (resources.files("rewind.replay.ui") / "static" / name).read_text("utf-8")


def media_type(name: str) -> str:
    return MEDIA_TYPES[name[name.rindex("."):]]


def json_default(value: Any) -> Any:
    """Store rows carry datetimes and raw bytes: both are written as text (the API and the
    pages alike)."""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def embed_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element."""
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=json_default)
            .replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def fill(template: str, values: dict[str, str]) -> str:
    """``{{name}}`` placeholders replaced in one pass (a value is never read again)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _shell(title: str, page: dict[str, Any], head: str, body_end: str,
           account: str = "") -> str:
    return fill(static_text("shell.html"), {"title": html.escape(title), "head": head,
                                            "page": embed_json(page), "scripts": body_end,
                                            "account": account})


def sign_out_form(csrf: str) -> str:
    """The sign-out button of a signed-in page: a form, so no other site can send it."""
    return ('<form class="sign-out" method="post" action="/logout">'
            f'<input type="hidden" name="csrf" value="{html.escape(csrf, quote=True)}">'
            '<button type="submit" id="sign-out">Sign out</button></form>')


def _data(data: dict[str, Any] | None) -> str:
    if data is None:
        return ""
    return f'<script type="application/json" id="rewind-data">{embed_json(data)}</script>\n'


def page_html(title: str, page: dict[str, Any], data: dict[str, Any] | None = None,
              sign_out: str | None = None) -> str:
    """A page served by the worker: the shell linking the static files, with ``data`` the
    page would otherwise fetch first (its first screen comes without another request);
    ``sign_out``: the CSRF token of a signed-in browser, which gets the sign-out button."""
    head = "\n".join(f'<link rel="stylesheet" href="{STATIC_PREFIX}{n}">' for n in STYLES)
    scripts = "\n".join(f'<script src="{STATIC_PREFIX}{n}"></script>' for n in SCRIPTS)
    return _shell(title, page, head, _data(data) + scripts,
                  sign_out_form(sign_out) if sign_out else "")


def shared_html(title: str, page: dict[str, Any], data: dict[str, Any]) -> str:
    """One self-contained file: style, scripts and data inline, a policy that forbids any
    request, so it opens from disk and reaches nothing."""
    head = (f'<meta http-equiv="Content-Security-Policy" content="{SHARED_POLICY}">\n'
            + "\n".join(f"<style>\n{static_text(n)}</style>" for n in STYLES))
    scripts = _data(data) + "\n".join(f"<script>\n{static_text(n)}</script>" for n in SCRIPTS)
    return _shell(title, {**page, "shared": True}, head, scripts)


def login_html(next_path: str, message: str = "", csrf: str = "", notice: str = "",
               option: str = "") -> str:
    """The form a browser gets instead of a page when it has no valid token; ``csrf``: the
    token of the browser's CSRF cookie, sent back with the form. ``message``: why an attempt
    failed (in red); ``notice``: what a first visit is told; ``option``: how the worker was
    given its tokens (``--auth-tokens``...)."""
    named = (f"<code>{html.escape(option)}</code>" if option
             else "the options it was started with")
    return fill(static_text("login.html"), {
        "next": html.escape(next_path, quote=True), "message": html.escape(message),
        "notice": html.escape(notice + " " if notice else ""), "option": named,
        "csrf": html.escape(csrf, quote=True), "style": STATIC_PREFIX + STYLES[0]})


def error_html(status: int, message: str, sign_out: str | None = None) -> str:
    return page_html(str(status), {"page": "error", "status": status, "message": message},
                     sign_out=sign_out)
