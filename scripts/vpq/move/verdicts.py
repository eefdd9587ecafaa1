"""The staircase's verdict cache: each checked release's verdicts, kept by
what they depend on, so a ``rebase_upstream -- --check`` with nothing
changed answers in seconds.

Two entries per release, under ``<cache>/staircase/``:

- the **judgement** of the unpatched target (its EAGLE-3 contract table and
  every patch's probe verdict: the contract import and the pytest run that
  cost most of a release), keyed by the target (its sdist's sha256, or its
  commit with ``--upstream-source git``), the probe tests' code
  (``probes.toml``, ``tests/*.py``, every file under ``tests/support`` and
  under the ``tests/`` folders the probes select from), the patch names and the tool's code
  (every module of ``vpq``). It does not depend on the patches' bytes: the
  probes and the contract run on the *unpatched* target;
- the **report** (every patch's outcome), keyed by the judgement's key,
  ``upstream.lock``, ``series`` and every patch's bytes, and the recorded
  resolutions (``rerere/``). A patch's 3-way merge runs on the branch the
  patches before it built, so one patch's outcome depends on every patch
  up to it: the replay is keyed by the whole series, not per patch. A
  changed patch replays the series with git (seconds) and takes the
  judgement from the cache.

A report that ended in an error is not kept (a failed download is not a
verdict). ``--no-cache`` reads neither entry and writes both afresh.
``vpq cache`` lists the entries and prunes them like the others.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from vpq.contract import table as contract
from vpq.core.files import write_atomic
from vpq.move.staircase import Report, ReportError
from vpq.source import fetch, lock, probe, rerere, series

CACHE_DIR = "staircase"
_TOOL_DIR = Path(__file__).resolve().parents[1]  # vpq/, every sub-package in it


@dataclass(frozen=True)
class Keys:
    """One release's two cache keys (hex digests)."""

    judge: str
    report: str


@dataclass(frozen=True)
class Use:
    """How ``--check`` uses the cache for one release: its ``keys``, and
    whether to ``read`` them (False with ``--no-cache``; written either way)."""

    keys: Keys
    read: bool = True


def _digest(*parts: bytes) -> str:
    """The sha256 of ``parts``, each length-prefixed so no two splits collide."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def _files_digest(base: Path, files: list[Path]) -> bytes:
    """``files`` (under ``base``) by path and bytes, in path order."""
    found = sorted({f for f in files if f.is_file() and "__pycache__" not in f.parts})
    return _digest(
        *(p for f in found for p in (str(f.relative_to(base)).encode(), f.read_bytes()))
    ).encode()


def tool_code() -> bytes:
    """The digest of the tool's own code: every module of ``vpq``."""
    return _files_digest(_TOOL_DIR, list(_TOOL_DIR.rglob("*.py")))


def probe_code(root: Path) -> bytes:
    """The digest of the probe tests' code: ``probes.toml``, the shared
    ``tests/*.py`` and ``tests/*.toml``, every file under ``tests/support``
    (the test code every tier may import) and under each ``tests/<folder>``
    a probe selects tests from."""
    probes = probe.load(root)
    folders = {
        Path(t.split("::", 1)[0]).parts[:2] for p in probes.values() for t in p.tests + p.exclude
    }
    tests = root / "tests"
    files = [root / probe.PROBES_FILE, *tests.glob("*.py"), *tests.glob("*.toml")]
    for parts in sorted(folders | {("tests", "support")}):
        if len(parts) == 2 and (root / Path(*parts)).is_dir():
            files += (root / Path(*parts)).rglob("*")
    return _files_digest(root, files)


def _series_code(root: Path) -> bytes:
    """The digest of ``series`` and every patch it names, in order."""
    names = series.read_series(root)
    parts = [(root / series.SERIES_FILE).read_bytes()]
    parts += [p for n in names for p in (n.encode(), (root / series.PATCHES_DIR / n).read_bytes())]
    return _digest(*parts).encode()


def keys(root: Path, old: lock.Lock, new: lock.Lock, source: str) -> Keys:
    """The cache keys of checking the series at ``root`` (pinned to ``old``)
    against the release ``new`` (imported from its ``source``).

    Raises:
        SeriesError, ProbeError: ``series`` or ``probes.toml`` cannot be read.
    """
    target = new.sdist.sha256 if source == "sdist" else new.commit
    names = json.dumps(series.read_series(root)).encode()
    judge = _digest(
        b"judge", tool_code(), source.encode(), target.encode(), probe_code(root), names
    )
    resolutions = root / rerere.RERERE_DIR
    recorded = _files_digest(root, list(resolutions.rglob("*")) if resolutions.is_dir() else [])
    report = _digest(
        b"report", judge.encode(), lock.dumps(old).encode(), _series_code(root), recorded
    )
    return Keys(judge, report)


def _path(kind: str, key: str) -> Path:
    """Where the ``kind`` entry (``judge``, ``report``) with ``key`` lives."""
    return fetch.cache_dir() / CACHE_DIR / f"{kind}-{key[:32]}.json"


def _read(kind: str, key: str) -> dict[str, object] | None:
    """The JSON object of an entry, touched for ``vpq cache --prune``; None
    when absent or unreadable (a miss: it is computed and written again)."""
    path = _path(kind, key)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    os.utime(path)
    return data


def _write(kind: str, key: str, data: dict[str, object]) -> None:
    """Write an entry atomically (a concurrent reader sees all or nothing)."""
    write_atomic(_path(kind, key), json.dumps({"key": key, **data}).encode())


def load_report(key: str) -> Report | None:
    """The cached report with ``key``, or None."""
    data = _read("report", key)
    if data is None:
        return None
    try:
        return Report.from_json(data, str(_path("report", key)))
    except ReportError:
        return None


def save_report(key: str, report: Report) -> None:
    """Keep ``report`` under ``key``, unless it ended in an error."""
    if not report.error:
        _write("report", key, asdict(report))


def load_judge(key: str) -> tuple[contract.Table, dict[str, tuple[bool, str]]] | None:
    """The cached judgement with ``key`` (contract table, patch -> probe
    verdict), or None."""
    data = _read("judge", key)
    if data is None:
        return None
    table, probes = data.get("table"), data.get("probes")
    if not isinstance(table, dict) or not isinstance(probes, dict):
        return None
    try:
        verdicts = {str(k): (bool(v[0]), str(v[1])) for k, v in probes.items()}
        return contract.Table.from_json(table), verdicts
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def save_judge(key: str, table: contract.Table, probes: dict[str, tuple[bool, str]]) -> None:
    """Keep a target's judgement under ``key``."""
    _write("judge", key, {"table": table.to_json(), "probes": probes})
