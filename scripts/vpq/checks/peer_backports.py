"""Backports against their source's tests: ``backport-tests.toml``.

For a ``Backport [vX]`` patch, the tests upstream added or changed for that
fix in release X (found by diffing the release sdists' ``tests/``) run from
release X's own test tree against our 0.17.1 backport, and against
unpatched 0.17.1 for contrast, in the peer environments
(``vpq.checks.peer_env``). One table per patch::

    ["v1/sample/rejection_sampler-reject-drafts-padded-with-minus-one.patch"]
    release = "0.25.0"
    tests = ["tests/v1/sample/test_rejection_sampler.py::test_placeholder_..."]
    moved = {}   # optional: "old.module" = "new.module", imports rewritten
    why = "..."  # what the selection leaves out, and why (tests = []: why none run)

The ``[releases]`` table pins each release's sdist by sha256. Only imports
of modules that merely moved may be adapted (``moved``), and the report
says exactly which. ``lint`` holds the file to the series: each table names
a ``Backport`` patch of the series and its release.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vpq.core.errors import VpqError
from vpq.source import fetch, series

BACKPORTS_FILE = "backport-tests.toml"
_RELEASE_RE = re.compile(r"^Backport \[v(\d+(?:\.\d+)+)\]$")


class BackportTestsError(VpqError):
    """``backport-tests.toml`` is malformed."""


@dataclass(frozen=True)
class BackportTests:
    """One backport's source tests."""

    patch: str
    release: str
    tests: tuple[str, ...]
    moved: dict[str, str]
    why: str


def _entry(patch: str, raw: object, where: str) -> BackportTests:
    if not isinstance(raw, dict):
        raise BackportTestsError(f"{where}: must be a table")
    tests, moved = raw.get("tests"), raw.get("moved", {})
    release, why = raw.get("release"), raw.get("why", "")
    if not isinstance(release, str) or not isinstance(why, str):
        raise BackportTestsError(f"{where}: release (and why) must be strings")
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise BackportTestsError(f"{where}: tests must be a list of node ids")
    if not tests and not why.strip():
        raise BackportTestsError(f"{where}: tests = [] needs a why")
    if not isinstance(moved, dict) or not all(isinstance(v, str) for v in moved.values()):
        raise BackportTestsError(f"{where}: moved must map module names to module names")
    return BackportTests(patch, release, tuple(tests), dict(moved), why)


def load(root: Path) -> tuple[list[BackportTests], dict[str, str]]:
    """The entries of ``backport-tests.toml`` and its release pins
    (version -> sdist sha256); no file: none.

    Raises:
        BackportTestsError: naming the malformed table.
    """
    path = root / BACKPORTS_FILE
    if not path.is_file():
        return [], {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BackportTestsError(f"{path}: not valid TOML ({exc})") from None
    pins = data.pop("releases", {})
    if not isinstance(pins, dict) or not all(isinstance(v, str) for v in pins.values()):
        raise BackportTestsError(f"{path}: [releases] must map versions to sha256 strings")
    entries = [_entry(k, v, f"{path}: [{json.dumps(k)}]") for k, v in data.items()]
    return entries, dict(pins)


def lint(root: Path, patches: Sequence[series.Patch] | None = None) -> list[str]:
    """Problems with ``backport-tests.toml`` against the series (``patches``,
    parsed; default: read from ``root``), one line each."""
    path = root / BACKPORTS_FILE
    try:
        entries, pins = load(root)
        by_name = {p.name: p for p in (series.load(root) if patches is None else patches)}
    except VpqError as exc:
        return [str(exc)]
    problems = []
    for e in entries:
        where = f"{path}: [{json.dumps(e.patch)}]"
        patch = by_name.get(e.patch)
        if patch is None:
            problems.append(f"{where}: not a patch in series")
            continue
        m = _RELEASE_RE.match(patch.upstream_status or "")
        if not m or m.group(1) != e.release:
            problems.append(
                f"{where}: release {e.release} is not the patch's ({patch.upstream_status})"
            )
        if e.release not in pins:
            problems.append(f"{where}: release {e.release} has no sha256 in [releases]")
    return problems


def sdist(version: str, sha256: str) -> Path:
    """Release ``version``'s sdist, hash-checked (from the cache, else the index)."""
    return fetch.fetch("vllm", f"vllm-{version}.tar.gz", sha256)


def adapt(tree: Path, entry: BackportTests) -> list[str]:
    """Rewrite ``entry.moved``'s imports in its test files under ``tree``;
    what was changed, one line each (``file: old -> new``)."""
    done = []
    for test_file in sorted({t.split("::", 1)[0] for t in entry.tests}):
        path = tree / test_file
        text = path.read_text(encoding="utf-8")
        for old, new in entry.moved.items():
            pattern = re.compile(rf"\b(from|import) {re.escape(old)}\b")
            text, n = pattern.subn(rf"\1 {new}", text)
            if n:
                done.append(f"{test_file}: {old} -> {new} ({n} imports)")
        path.write_text(text, encoding="utf-8")
    return done
