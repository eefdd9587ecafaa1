"""A move's entry in ``CHANGELOG.md``.

A finished move (``vpq.move.rebase``) appends to the changelog, newest
first, as a person would: a line under *The pin* (``pinned to vLLM
**NEW**``, moved from the old release) and, under the day's heading, a
``- Dropped (`<commit>`): `<patch>` `` line per patch upstream absorbed,
with the release that absorbed it and the signals that showed it. The
commit is the one the move started from (the move itself is not committed
yet); without a git checkout there is none, and the lines say so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vpq.core.files import write_atomic
from vpq.source import git as g
from vpq.source import lock, series

CHANGELOG_FILE = "CHANGELOG.md"
PIN_HEADING = "## The pin\n"
_DAY_RE = re.compile(r"^## \d{4}-\d{2}-\d{2}\n", re.MULTILINE)


@dataclass(frozen=True)
class Absorbed:
    """A patch the move dropped: its name, its ``Upstream-Status:`` and the
    signals that absorbed it."""

    patch: str
    upstream_status: str | None
    signals: str


def base_commit(root: Path) -> str | None:
    """``root``'s HEAD, abbreviated, or None where it is no git checkout."""
    proc = g.git(["rev-parse", "--short=7", "HEAD"], root, check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def _tag(commit: str | None) -> str:
    return f" (`{commit}`)" if commit else ""


def pin_line(old: str, new: lock.Lock, day: str, commit: str | None) -> str:
    """The bullet under *The pin*."""
    return (
        f"- {day}{_tag(commit)}: moved from vLLM **{old}** by `nox -s rebase_upstream -- "
        f"{new.version}`: pinned to vLLM **{new.version}** (tag `{new.tag}`), the sdist "
        f"`{new.sdist.filename}` (sha256 `{new.sdist.sha256[:16]}...`) and the release "
        "wheels by sha256.\n"
    )


def dropped_lines(old: str, new: str, absorbed: Sequence[Absorbed], commit: str | None) -> str:
    """The ``- Dropped`` bullets, one per absorbed patch."""
    return "".join(
        f"- Dropped{_tag(commit)}: `{a.patch}` (`{a.upstream_status or 'no Upstream-Status'}`): "
        f"absorbed by vLLM **{new}** (the move from {old}; signals: {a.signals}), "
        f"`Applied-Upstream: {new}`.\n"
        for a in absorbed
    )


def _insert_day(text: str, day: str, lines: str) -> str:
    """``lines`` at the top of ``day``'s section (made, newest first, where
    the newest section is another day's)."""
    heading = f"## {day}\n"
    first = _DAY_RE.search(text)
    if first and first.group(0) == heading:
        at = first.end() + (1 if text[first.end() : first.end() + 1] == "\n" else 0)
        return text[:at] + lines + text[at:]
    block = f"{heading}\n{lines}\n"
    if first:
        return text[: first.start()] + block + text[first.start() :]
    return text.rstrip("\n") + "\n\n" + block.rstrip("\n") + "\n"


def _insert_pin(text: str, line: str) -> str:
    """``line`` as the first bullet under *The pin* (none: left out)."""
    at = text.find(PIN_HEADING)
    if at < 0:
        return text
    at += len(PIN_HEADING)
    at += 1 if text[at : at + 1] == "\n" else 0
    return text[:at] + line + text[at:]


def record(
    root: Path, old: str, new: lock.Lock, absorbed: Sequence[Absorbed], day: str | None = None
) -> bool:
    """Append the move from ``old`` to ``new`` to ``root``'s changelog;
    False (nothing written) where it has none."""
    path = root / CHANGELOG_FILE
    if not path.is_file():
        return False
    day = day or time.strftime("%Y-%m-%d", time.gmtime())
    commit = base_commit(root)
    text = path.read_text(encoding="utf-8")
    if absorbed:
        text = _insert_day(text, day, dropped_lines(old, new.version, absorbed, commit))
    text = _insert_pin(text, pin_line(old, new, day, commit))
    write_atomic(path, text.encode())
    return True


def absorbed_of(patches: Sequence[series.Patch], signals: dict[str, str]) -> list[Absorbed]:
    """The ``Absorbed`` rows of the patches named in ``signals`` (patch ->
    the signals that absorbed it), in series order."""
    return [
        Absorbed(p.name, p.upstream_status, signals[p.name]) for p in patches if p.name in signals
    ]
