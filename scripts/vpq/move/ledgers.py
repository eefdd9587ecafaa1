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
from functools import partial
from pathlib import Path
from typing import Any

from vpq.core import tomltext
from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.source import series
from vpq.wheels import advisories

BACKPORTS_FILE = "backport-tests.toml"
MUTATION_FILE = "mutation.toml"
PEER_FILE = "peer-tests.toml"
EXPECTED_FILE = "peer-expected.toml"
#: The package whose files peer-tests.toml keys its tables by.
PACKAGE = "vllm/"
#: Which blocks of a ledger go: (table path, the block's own data) -> drop?
Drop = Callable[[tomltext.Path, dict[str, Any]], bool]


def changed_sources(patches: Sequence[series.Patch]) -> set[str]:
    """The package files the series changes or adds (not those it deletes),
    as ``peer-tests.toml`` keys them."""
    deleted = {f for p in patches for f in p.deleted_files}
    files = {f for p in patches for f in (*p.files, *p.new_files)}
    return {f for f in files - deleted if f.startswith(PACKAGE)}


def _edit(root: Path, name: str, drop: Drop) -> int:
    """Drop ``name``'s blocks for which ``drop`` holds; how many went."""
    path = root / name
    if not path.is_file():
        return 0
    new, count = tomltext.drop_tables(path.read_text(encoding="utf-8"), drop, str(path))
    if count:
        write_atomic(path, new.encode())
    return count


def _drops(dropped: set[str], kept: Sequence[series.Patch]) -> dict[str, Drop]:
    """Each patch- or file-keyed ledger -> which of its blocks go."""
    sources = changed_sources(kept)
    return {
        BACKPORTS_FILE: lambda p, _d: p[0] in dropped,
        MUTATION_FILE: lambda p, _d: p[0] in dropped,
        EXPECTED_FILE: lambda p, d: p == ("expected",) and d.get("patch") in dropped,
        PEER_FILE: lambda p, _d: p[0].startswith(PACKAGE) and p[0] not in sources,
    }


def _cut(root: Path, name: str, drop: Drop) -> list[str]:
    """``_edit``, as a line when it removed something."""
    count = _edit(root, name, drop)
    return [f"{name}: {count} table(s) of dropped patches or unchanged files removed"] * bool(count)


def _ci(root: Path) -> list[str]:
    """``peer-tests.toml``'s ``[ci]`` list without the cases whose file no
    table chooses any more; a line when it changed."""
    path = root / PEER_FILE
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []  # _cut has said so
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
    per edit. A ledger that is malformed, or whose edit would not give the
    intended data, is left as it was, with a line saying why (the move has
    already written the series: it does not stop here; ``vpq lint`` names
    what is left)."""
    gone = set(dropped)
    drops = _drops(gone, series.load(root))
    steps: list[Callable[[], list[str]]] = [
        *(partial(_cut, root, name, drop) for name, drop in drops.items()),
        partial(_ci, root),
        partial(_advisories, root, gone, version),
    ]
    lines: list[str] = []
    for step in steps:
        try:
            lines += step()
        except VpqError as exc:
            lines.append(f"not edited, fix by hand: {exc}")
    return lines
