"""The ledgers follow a move of the pin.

A move (``vpq.move.rebase``) drops the patches upstream absorbed. The
ledgers ``vpq lint`` holds to the series then name patches and files the
series no longer has; ``follow`` brings them to the new series, editing
their text by tables (``vpq.core.tomltext``: comments and layout stay):

- ``backport-tests.toml``, ``mutation.toml``: the tables of dropped
  patches go (``[releases]`` stays);
- ``peer-expected.toml``: the ``[[expected]]`` entries of dropped patches go;
- ``peer-tests.toml``: the tables of files the series no longer changes
  go (``[ci]`` stays); a chosen upstream test file the new release does
  not have follows it where the release has exactly one file of that name
  (upstream moved it: in the tables, ``[ci]`` and ``peer-expected.toml``),
  else it goes, and a table left without tests says so in its ``why``
  (``peer_paths``);
- ``advisories.toml``: an advisory whose carrying patch was dropped, and
  any other advisory fixed at or before the new release (or whose published
  range ends before it), becomes
  ``fixed-upstream`` (its ``fixed-in`` set to the new release where it had
  none), and docs/known-issues.md's table is generated again.

``probes.toml`` is ``vpq.source.probe.keep_only``'s. Each edit is one line
of what ``follow`` returns, for the report and the changelog.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Collection, Sequence
from functools import partial
from pathlib import Path, PurePosixPath
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


def test_moves(chosen: Collection[str], tests: Collection[str]) -> dict[str, str | None]:
    """Each ``chosen`` test file that ``tests`` (the new release's) lacks ->
    the one file of the same name there, or None (none, or several)."""
    by_name: dict[str, list[str]] = {}
    for t in tests:
        by_name.setdefault(PurePosixPath(t).name, []).append(t)
    out: dict[str, str | None] = {}
    for c in sorted(set(chosen) - set(tests)):
        same = by_name.get(PurePosixPath(c).name, [])
        out[c] = same[0] if len(same) == 1 else None
    return out


def _moved(selector: str, moves: dict[str, str | None]) -> str | None:
    """``selector`` (a file or a node id in it) after ``moves``; None: gone."""
    file, sep, rest = selector.partition("::")
    if file not in moves:
        return selector
    new = moves[file]
    return None if new is None else new + sep + rest


def _follow_list(values: list[str], moves: dict[str, str | None]) -> list[str]:
    """``values`` moved, the gone left out, each once."""
    return list(dict.fromkeys(n for v in values if (n := _moved(v, moves)) is not None))


def _peer_tables(text: str, moves: dict[str, str | None], version: str, where: str) -> str:
    """``peer-tests.toml``'s text with its tables and ``[ci]`` following ``moves``."""
    for key, table in tomllib.loads(text).items():
        old = table.get("tests", [])
        new = _follow_list(old, moves)
        if new == old:
            continue
        text = tomltext.set_value(text, (key,), "tests", new, where)
        if not new and key != "ci" and not table.get("why"):
            gone = ", ".join(t for t in old if moves.get(t) is None)
            why = (
                f"upstream {version} has no {gone} (the move found no one file of that name "
                "to follow): choose again, `python -m vpq peer-tests --candidates`"
            )
            text = tomltext.set_value(text, (key,), "why", why, where)
    return text


def peer_paths(root: Path, tests: Collection[str], version: str) -> list[str]:
    """``peer-tests.toml`` and ``peer-expected.toml`` following upstream's
    test files to ``version``, whose ``tests/`` holds ``tests``; a line per
    file followed or gone."""
    path, expected = root / PEER_FILE, root / EXPECTED_FILE
    if not path.is_file() or not tests:
        return []
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []  # _cut has said so
    moves = test_moves({t for k, v in data.items() if k != "ci" for t in v.get("tests", [])}, tests)
    if not moves:
        return []
    new = _peer_tables(text, moves, version, str(path))
    if expected.is_file():
        etext, _ = tomltext.drop_tables(
            expected.read_text(encoding="utf-8"),
            lambda p, d: p == ("expected",) and _moved(str(d.get("test", "")), moves) is None,
            str(expected),
        )
        etext, _ = tomltext.map_value(
            etext, ("expected",), "test", lambda t: _moved(t, moves), str(expected)
        )
        write_atomic(expected, etext.encode())
    write_atomic(path, new.encode())
    return [f"{PEER_FILE}: {old} -> {to or f'gone (upstream {version} has no file of that name)'}"
            for old, to in moves.items()]  # fmt: skip


def _fixed(a: advisories.Advisory, dropped: set[str], version: str) -> bool:
    """Whether the move makes ``a`` fixed upstream: its carrying patch was
    dropped, or (not carried) the new release has the fix or lies past the
    published range."""
    if a.status == "carried":
        return a.patch in dropped
    past = advisories.fixed_at(a, version) or not advisories.includes(a, version)
    return a.status != "fixed-upstream" and past


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


def follow(
    root: Path, dropped: Sequence[str], version: str, tests: Collection[str] = ()
) -> list[str]:
    """Bring the ledgers of ``root`` (whose ``series`` is already the
    moved one) to the move to ``version`` that dropped ``dropped`` and
    whose ``tests/`` holds ``tests`` (none given: the test paths stay); one line
    per edit. A ledger that is malformed, or whose edit would not give the
    intended data, is left as it was, with a line saying why (the move has
    already written the series: it does not stop here; ``vpq lint`` names
    what is left)."""
    gone = set(dropped)
    drops = _drops(gone, series.load(root))
    steps: list[Callable[[], list[str]]] = [
        *(partial(_cut, root, name, drop) for name, drop in drops.items()),
        partial(_ci, root),
        partial(peer_paths, root, tests, version),
        partial(_advisories, root, gone, version),
    ]
    lines: list[str] = []
    for step in steps:
        try:
            lines += step()
        except VpqError as exc:
            lines.append(f"not edited, fix by hand: {exc}")
    return lines
