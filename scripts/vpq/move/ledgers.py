"""The ledgers follow a move of the pin.

A move (``vpq.move.rebase``) drops the patches upstream absorbed. The
ledgers ``vpq lint`` holds to the series then name patches and files the
series no longer has; ``follow`` brings them to the new series, editing
their text by tables (``vpq.core.tomltext``: comments and layout stay):

- ``backport-tests.toml``, ``mutation.toml``: the tables of dropped
  patches go (``[releases]`` stays);
- ``peer-expected.toml``: the ``[[expected]]`` entries of dropped patches go;
- ``peer-tests.toml``: the tables of files the series no longer changes
  go (``[ci]`` stays);
- ``advisories.toml``: an advisory whose carrying patch was dropped, and
  any other advisory fixed at or before the new release, becomes
  ``fixed-upstream`` (its ``fixed-in`` set to the new release where it had
  none), and docs/known-issues.md's table is generated again.

``probes.toml`` is ``vpq.source.probe.keep_only``'s. Each edit is one line
of what ``follow`` returns, for the report and the changelog.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vpq.core import tomltext
from vpq.core.files import write_atomic
from vpq.source import series
from vpq.wheels import advisories

BACKPORTS_FILE = "backport-tests.toml"
MUTATION_FILE = "mutation.toml"
PEER_FILE = "peer-tests.toml"
EXPECTED_FILE = "peer-expected.toml"
#: The package whose files peer-tests.toml keys its tables by.
PACKAGE = "vllm/"


def changed_sources(patches: Sequence[series.Patch]) -> set[str]:
    """The package files the series changes or adds (not those it deletes),
    as ``peer-tests.toml`` keys them."""
    deleted = {f for p in patches for f in p.deleted_files}
    files = {f for p in patches for f in (*p.files, *p.new_files)}
    return {f for f in files - deleted if f.startswith(PACKAGE)}


def _edit(root: Path, name: str, drop: Callable[[tomltext.Path, dict[str, Any]], bool]) -> int:
    """Drop ``name``'s blocks for which ``drop`` holds; how many went."""
    path = root / name
    if not path.is_file():
        return 0
    text = path.read_text(encoding="utf-8")
    gone = [b for b in tomltext.split(text) if b.path is not None and drop(b.path, b.data())]
    if gone:
        write_atomic(path, tomltext.drop_tables(text, drop, str(path)).encode())
    return len(gone)


def _drop_tables(root: Path, dropped: set[str], kept: Sequence[series.Patch]) -> list[str]:
    """The patch- and file-keyed ledgers cut to the kept series; a line per
    ledger edited."""
    sources = changed_sources(kept)
    edits = {
        BACKPORTS_FILE: lambda p, _d: p[0] in dropped,
        MUTATION_FILE: lambda p, _d: p[0] in dropped,
        EXPECTED_FILE: lambda p, d: p == ("expected",) and d.get("patch") in dropped,
        PEER_FILE: lambda p, _d: p[0].startswith(PACKAGE) and p[0] not in sources,
    }
    lines = []
    for name, drop in edits.items():
        count = _edit(root, name, drop)
        if count:
            lines.append(f"{name}: {count} table(s) of dropped patches or unchanged files removed")
    return lines + _ci(root)


def _ci(root: Path) -> list[str]:
    """``peer-tests.toml``'s ``[ci]`` list without the cases whose file no
    table chooses any more; a line when it changed."""
    path = root / PEER_FILE
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    ci = data.get("ci", {}).get("tests")
    if not isinstance(ci, list):
        return []
    chosen = {t for k, v in data.items() if k != "ci" for t in v.get("tests", [])}
    keep = [c for c in ci if str(c).split("::", 1)[0] in chosen]
    if keep == ci:
        return []
    write_atomic(path, tomltext.set_value(text, ("ci",), "tests", keep, str(path)).encode())
    return [f"{PEER_FILE}: [ci]: {len(ci) - len(keep)} case(s) of unchosen files removed"]


def _fixed(a: advisories.Advisory, dropped: set[str], version: str) -> bool:
    """Whether the move makes ``a`` fixed upstream."""
    if a.status == "carried":
        return a.patch in dropped
    return a.status != "fixed-upstream" and advisories.fixed_at(a, version)


def _advisories(root: Path, dropped: set[str], version: str) -> list[str]:
    """``advisories.toml`` at the new release; a line per advisory changed.

    Raises:
        AdvisoryError: the ledger is malformed (nothing is written).
    """
    path = root / advisories.LEDGER_FILE
    ledger = advisories.load(root)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = []
    for a in (a for a in ledger if _fixed(a, dropped, version)):
        text = tomltext.set_value(text, (a.id,), "status", "fixed-upstream", str(path))
        if a.fixed_in is None:
            text = tomltext.set_value(text, (a.id,), "fixed-in", version, str(path))
        was = f" (patches/{a.patch} dropped)" if a.status == "carried" else ""
        lines.append(f"{advisories.LEDGER_FILE}: {a.id} {a.status} -> fixed-upstream{was}")
    if lines:
        write_atomic(path, text.encode())
        if (root / advisories.TABLE_PAGE).is_file():
            advisories.write_readme(root, advisories.load(root))
    return lines


def follow(root: Path, dropped: Sequence[str], version: str) -> list[str]:
    """Bring the ledgers of ``root`` (whose ``series`` is already the
    moved one) to the move to ``version`` that dropped ``dropped``; one line
    per edit.

    Raises:
        AdvisoryError, TomlTextError: a ledger is malformed, or an edit
            would not give the intended data (that ledger is unchanged).
    """
    gone = set(dropped)
    kept = series.load(root)
    return _drop_tables(root, gone, kept) + _advisories(root, gone, version)
