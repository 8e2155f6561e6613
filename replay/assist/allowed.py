"""What ``rewind mcp`` may do on the user's machine: which commands it runs, where it writes.

An assistant reads recorded text (prompts, answers, a span's ``process.command_args``) that
anyone able to send spans wrote, so nothing it asks for runs on its say-so (DESIGN 7b). A
command runs when it starts with a prefix the user named when starting the server
(``--allow-command``, compared word by word, never as a string), or when it is exactly the
command ``rewind record`` saved and signed on this machine for that run. ``export_run`` creates
only new files, only under the folder the server was given.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.redaction import MASK
from rewind.replay.sources.cli_settings import ENV_MCP_ALLOW_COMMANDS
from rewind.replay.sources.commands import RecordedCommandRefused, shown, signed_here

ALLOW_FLAG = "--allow-command"
EXPORT_FLAG = "--export-dir"
_RESTART = (f"ask the user to start `rewind mcp` with {ALLOW_FLAG} PREFIX (or "
            f"{ENV_MCP_ALLOW_COMMANDS}) naming the commands it may run; a command `rewind "
            "record` saved on this machine runs without it (leave out the command)")


@dataclass(frozen=True)
class Allowance:
    """The argv prefixes the user allowed; none by default."""

    prefixes: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def parse(cls, prefixes: Iterable[str]) -> Allowance:
        """Each prefix split into words as a shell would; an empty or unreadable one is an
        error rather than a prefix that allows everything."""
        parsed = []
        for text in prefixes:
            try:
                words = tuple(shlex.split(text))
            except ValueError as error:
                raise InvalidValue(f"{ALLOW_FLAG} {text!r} cannot be read as words: {error}",
                                   hint="quote it as in a shell, e.g. 'python agent.py'",
                                   field=ALLOW_FLAG) from None
            if not words:
                raise InvalidValue(f"{ALLOW_FLAG} must name a command, got {text!r}",
                                   hint="e.g. --allow-command 'python agent.py'",
                                   field=ALLOW_FLAG)
            parsed.append(words)
        return cls(tuple(dict.fromkeys(parsed)))

    def allows(self, words: Sequence[str]) -> bool:
        """Whether ``words`` begins with every word of one allowed prefix."""
        return any(tuple(words[:len(prefix)]) == prefix for prefix in self.prefixes)

    def command_for(self, given: Sequence[str] | None, cassette: Any, tool: str) -> list[str]:
        """The command ``tool`` runs for ``cassette``'s run: ``given``, else the recorded one;
        :class:`RecordedCommandRefused` (one line, naming the flag) when it may not run."""
        recorded = [str(word) for word in cassette.command]
        words = [str(word) for word in given] if given else recorded
        if not words:
            raise InvalidValue(f"trace {cassette.trace_id} has no recorded command (it was "
                               "not recorded by `rewind record`)", hint=_RESTART,
                               field="command")
        signed = words == recorded and signed_here(
            recorded, getattr(cassette, "command_signature", "") or "")
        if not (signed or self.allows(words)):
            came = ("it came with the recording and was not recorded on this machine"
                    if words == recorded else "the user did not allow it")
            raise RecordedCommandRefused(f"{tool} does not run {shown(words)}: {came}",
                                         hint=_RESTART, field="command")
        if any(MASK in word for word in words):
            raise InvalidValue(f"the recorded command of trace {cassette.trace_id} had a "
                               "credential, masked when it was saved", hint=_RESTART,
                               field="command")
        return words


@dataclass(frozen=True)
class ExportFolder:
    """The folder ``export_run`` writes in (``--export-dir``; where the server started)."""

    root: Path

    def place(self, path: str | None, file_name: str) -> Path:
        """Where ``path`` (relative to the folder, or absolute inside it; a folder: the
        file ``file_name`` in it) lands, refused when that is outside the folder."""
        root = self.root.expanduser().resolve()
        asked = Path(path).expanduser() if path else Path(file_name)
        if ".." in asked.parts:
            raise self._outside(path, root)
        target = (root / asked).resolve()  # symlinks followed: one out of the folder is seen
        if target.is_dir():
            target = target / file_name
        if not target.is_relative_to(root):
            raise self._outside(path, root)
        return target

    def write_new(self, path: str | None, file_name: str, data: bytes) -> Path:
        """``data`` into a file that did not exist, all or nothing; an existing one (or a
        symlink in its place) is left alone."""
        target = self.place(path, file_name)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            raise InvalidValue(f"{target} exists: export_run writes only new files",
                               hint="give a file name not taken yet (path)",
                               field="path") from None
        except OSError as error:
            raise InvalidValue(f"cannot write {target}: {error.strerror or error}",
                               hint="give another path", field="path") from None
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except OSError as error:
            target.unlink(missing_ok=True)
            raise InvalidValue(f"cannot write {target}: {error.strerror or error}",
                               hint="give another path", field="path") from None
        return target

    @staticmethod
    def _outside(path: str | None, root: Path) -> InvalidValue:
        return InvalidValue(f"{path!r} is not inside {root}: export_run writes only under "
                            "the folder `rewind mcp` was given",
                            hint=f"give a path inside it, or ask the user to start `rewind mcp "
                                 f"{EXPORT_FLAG} DIR`", field="path")
