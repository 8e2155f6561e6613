"""A recorded command is data: the one rule that decides whether it may run, and the one way
it is shown.

A command reaches Rewind as data from many doors (a span's ``process.command_args``, a ``.rw``
or OTLP file, a suite definition, a worker's answer), and whoever may send spans can write it.
``rewind record`` signs the argv it saves with a key kept on this machine
(:func:`sign`, :data:`~rewind.exporter.core.attributes.COMMAND_SIGNATURE` beside the argv); only a
command whose signature this machine's key verifies (:func:`signed_here`) runs without being
asked for. Any other is shown by :func:`shown` (shell-quoted, control and escape characters
made visible as ``$'\\x1b'`` words) and runs only when the engineer says so (a flag, or a yes
at a terminal; :func:`consent`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shlex
import sys
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources.cli_settings import command_key_file

RUN_RECORDED_FLAG = "--run-recorded-command"
_DOMAIN = b"rewind-command-v1\x00"
_KEY_BYTES = 32
# Characters a terminal acts on or draws misleadingly: C0/C1 controls, DEL, line and paragraph
# separators; format characters (bidi overrides, zero-width ones) are added by category below.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class RecordedCommandRefused(InvalidValue):
    """A command that came with a recording was not signed on this machine and the engineer
    did not ask for it."""


def _visible_char(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if _CONTROL.match(char) or unicodedata.category(char) in ("Cf", "Co", "Cs", "Cn"):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else (
            f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return char


def _needs_escapes(word: str) -> bool:
    return any(_CONTROL.match(c) or unicodedata.category(c) in ("Cf", "Co", "Cs", "Cn")
               for c in word)


def shown_word(word: str) -> str:
    """One word as a POSIX shell reads it back: plain ``shlex`` quoting, or bash's ``$'...'``
    with every control or invisible character written as an escape."""
    if _needs_escapes(word):
        return "$'" + "".join(_visible_char(c) for c in word) + "'"
    return shlex.quote(word)


def shown(words: Sequence[str]) -> str:
    """A recorded command on one line, exactly as it would run, nothing hidden: the one way
    the CLI, the pages, MCP and the share file show a command."""
    return " ".join(shown_word(str(word)) for word in words)


def _digest(key: bytes, words: Sequence[str]) -> str:
    payload = _DOMAIN + json.dumps([str(w) for w in words], separators=(",", ":"),
                                   ensure_ascii=False).encode("utf-8")
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def machine_key(path: Path | None = None, create: bool = False) -> bytes | None:
    """This machine's signing key (created, readable by its owner only, when ``create``);
    None when there is none and none is made."""
    path = path or command_key_file()
    try:
        text = path.read_text("ascii").strip()
        return bytes.fromhex(text) if len(text) >= 2 * _KEY_BYTES else None
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return None
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return machine_key(path)
    except OSError:
        return None
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_hex(_KEY_BYTES) + "\n")
    return machine_key(path)


def sign(words: Sequence[str], key: bytes | None = None) -> str:
    """The signature ``rewind record`` saves beside ``words`` ('' when no key can be kept)."""
    key = key if key is not None else machine_key(create=True)
    return _digest(key, words) if key else ""


def signed_here(words: Sequence[str], signature: str, key: bytes | None = None) -> bool:
    """Whether ``signature`` was made for exactly ``words`` by this machine's key."""
    if not words or not signature:
        return False
    key = key if key is not None else machine_key()
    return bool(key) and hmac.compare_digest(_digest(key, words), str(signature))


def consent(words: Sequence[str], signature: str, where: str, *, allowed: bool,
            ask: Callable[[str], bool] | None = None) -> None:
    """Let a recorded command run, or raise :class:`RecordedCommandRefused`.

    It runs when this machine signed it, when the engineer passed :data:`RUN_RECORDED_FLAG`
    (``allowed``), or when ``ask`` (a yes/no question at a terminal; None on a pipe) says yes.
    ``where`` names the recording (``trace 4bf9...``, ``suite S run 2``)."""
    if allowed or signed_here(words, signature):
        return
    question = (f"the command saved with {where} was not recorded on this machine:\n"
                f"  {shown(words)}\n")
    if ask is not None and ask(question + "Run it? [y/N] "):
        return
    raise RecordedCommandRefused(
        question.rstrip("\n") + "\nit came with the recording, so it is not run unasked",
        hint=f"give the command to run after --, or pass {RUN_RECORDED_FLAG} to run this one")


def terminal_question(stdin: TextIO | None = None, stderr: TextIO | None = None,
                      ) -> Callable[[str], bool] | None:
    """A yes/no question asked on the terminal, or None when stdin or stderr is not one (a
    pipe, CI): then nothing is asked and nothing recorded runs without the flag."""
    stdin, stderr = stdin or sys.stdin, stderr or sys.stderr
    try:
        if not (stdin.isatty() and stderr.isatty()):
            return None
    except (AttributeError, ValueError):
        return None

    def ask(question: str) -> bool:
        stderr.write(question)
        stderr.flush()
        answer = stdin.readline()
        return answer.strip().lower() in ("y", "yes")

    return ask
