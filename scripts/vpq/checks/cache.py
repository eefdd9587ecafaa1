"""The cache (``$VPQ_CACHE_DIR``, else ``~/.cache/vpq``): what it holds, and
pruning what this checkout does not use.

Parts: *downloads* (``sha256/<hash>/<file>``, one entry per file), *venvs*
(``envs/<name>``: the CPU deps venvs, one per vLLM release's requirements,
the wheel venvs, the engine tier's venvs), *contract verdicts*
(``contract/<key>.json``) and *staircase verdicts* (``staircase/*.json``,
``vpq.move.verdicts``: each checked release's judgement and report). Each entry
has a size (each hard-linked file counted once within it) and a last use:
``vpq.source.fetch`` touches a download it hands out, ``vpq.envs.venv.cached`` a venv's
``.used`` marker, the contract check and ``--check`` a verdict they read.

Pruning is explicit: ``vpq cache --prune`` lists the entries that were not
used for ``--older-than`` days (default 14) and that this checkout does not
need (the downloads ``upstream.lock`` and ``tests/engine/*.toml`` pin, the
deps venv of the pinned release, the venvs of the wheels in ``dist/``);
``--yes`` removes them. An entry whose lock another process holds is left
alone. Other checkouts share the cache: what they need is rebuilt on their
next use.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from vpq.core import progress
from vpq.core.files import sha256_file
from vpq.core.workspace import Workspace
from vpq.source import fetch, lock

DAY_S = 86400.0
#: ``--prune`` leaves entries used within this many days unless told otherwise.
DEFAULT_OLDER_THAN_DAYS = 14.0
PARTS = ("downloads", "venvs", "contract verdicts", "staircase verdicts")


@dataclass(frozen=True)
class Entry:
    """One removable thing in the cache."""

    part: str  # one of PARTS
    path: Path
    size: int  # bytes; a file hard-linked several times inside it counted once
    last_used: float  # epoch seconds
    needed: str = ""  # why this checkout needs it; "" when it does not


def tree_size(path: Path, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes under ``path`` (a file or a folder), each inode counted once
    (``seen`` carries the inodes already counted across calls)."""
    seen = set() if seen is None else seen
    total = 0
    paths = [path] if not path.is_dir() else [Path(d) / f for d, _, fs in os.walk(path) for f in fs]
    for p in paths:
        try:
            st = p.lstat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def _venv_last_use(venv: Path) -> float:
    for marker in (".used", ".complete"):
        if (venv / marker).exists():
            return (venv / marker).stat().st_mtime
    return venv.stat().st_mtime


def scan(cache: Path, needed: dict[Path, str] | None = None) -> list[Entry]:
    """Every entry of the cache at ``cache``, downloads first; ``needed``
    maps the paths this checkout needs to why."""
    needed = needed or {}
    found: list[tuple[str, Path, float]] = []
    for d in sorted((cache / "sha256").glob("*/*")):
        if d.is_file() and not d.name.endswith((".lock", ".part")):
            found.append(("downloads", d, d.stat().st_mtime))
    for d in sorted((cache / "envs").iterdir() if (cache / "envs").is_dir() else []):
        if d.is_dir():
            found.append(("venvs", d, _venv_last_use(d)))
    for f in sorted((cache / "contract").glob("*.json")):
        found.append(("contract verdicts", f, f.stat().st_mtime))
    for f in sorted((cache / "staircase").glob("*.json")):
        found.append(("staircase verdicts", f, f.stat().st_mtime))
    return [Entry(part, p, tree_size(p), used, needed.get(p, "")) for part, p, used in found]


def needed_by(root: Path, cache: Path) -> dict[Path, str]:
    """The cache entries the checkout at ``root`` uses, and why: pinned
    downloads, the pinned release's deps venv (known only while its sdist
    is cached), the venvs of ``dist/``'s wheels. Downloads nothing."""
    from vpq.envs import engine_env, venv
    from vpq.wheels import build

    out: dict[Path, str] = {}
    pin = lock.load(root)
    for art in [pin.sdist, *pin.wheels.values()]:
        out[cache / "sha256" / art.sha256 / art.filename] = "pinned by upstream.lock"
    for pins in (engine_env.PINS, engine_env.REFERENCE_PINS):
        if (root / pins).is_file():
            for p in engine_env.load_pins(root, pins).values():
                out[cache / "sha256" / p.sha256 / p.filename] = f"pinned by {pins}"
    if (cache / "sha256" / pin.sdist.sha256 / pin.sdist.filename).is_file():
        try:
            key = venv.deps_key(build.common_txt(pin))
            out[cache / "envs" / f"deps-{key}"] = f"the CPU venv of vllm {pin.version}"
        except build.BuildError:
            pass  # a release without requirements/common.txt has no deps venv
    for whl in sorted(Workspace(root).dist.glob("*.whl")):
        out[cache / "envs" / f"wheel-{sha256_file(whl)[:12]}"] = f"the venv of dist/{whl.name}"
    return out


def prunable(entries: list[Entry], older_than_days: float, now: float) -> list[Entry]:
    """The entries ``--prune`` would remove: not needed by this checkout and
    not used for ``older_than_days``."""
    cutoff = now - older_than_days * DAY_S
    return [e for e in entries if not e.needed and e.last_used < cutoff]


def remove(entry: Entry) -> bool:
    """Remove ``entry`` under its lock; False (nothing removed) when another
    process holds the lock, i.e. is using or making it right now."""
    lock_path = Path(str(entry.path) + ".lock")
    if not lock_path.exists():  # nothing locks it (a contract or staircase verdict)
        entry.path.unlink(missing_ok=True)
        return True
    guard = FileLock(str(lock_path))
    try:
        guard.acquire(timeout=0)
    except Timeout:
        return False
    try:
        if entry.path.is_dir():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink(missing_ok=True)
    finally:
        guard.release()
    return True


def shown(path: Path, cache: Path) -> str:
    """``path`` relative to the cache, a sha256 folder cut to 12 digits."""
    parts = path.relative_to(cache).parts
    return "/".join(p[:12] + "..." if len(p) == 64 else p for p in parts)


def render(entries: list[Entry], cache: Path, now: float) -> str:
    """Sizes per part and per entry, with each entry's last use and why this
    checkout needs it."""
    everything: set[tuple[int, int]] = set()
    total = sum(tree_size(e.path, everything) for e in entries)
    lines = [f"cache: {cache}, {progress.human_bytes(total)} (hard links counted once)"]
    for part in PARTS:
        mine = [e for e in entries if e.part == part]
        seen: set[tuple[int, int]] = set()
        size = sum(tree_size(e.path, seen) for e in mine)
        lines.append(f"{part}: {len(mine)}, {progress.human_bytes(size)}")
        for e in mine:
            age = max(now - e.last_used, 0.0) / DAY_S
            why = f"  ({e.needed})" if e.needed else ""
            lines.append(
                f"  {progress.human_bytes(e.size):>9}  used {age:5.1f} days ago  "
                f"{shown(e.path, cache)}{why}"
            )
    return "\n".join(lines)


def _prune(entries: list[Entry], cache: Path, yes: bool, older_than_days: float) -> list[str]:
    """The prune's report lines; removes the entries when ``yes``."""
    what = f"not needed by this checkout and unused for {older_than_days:g} days"
    if not yes:
        size = progress.human_bytes(sum(e.size for e in entries))
        head = f"would remove (dry run; --yes removes): {len(entries)} entries {what}, {size}"
        return [head] + [f"  {shown(e.path, cache)}" for e in entries]
    done = [e for e in entries if remove(e)]
    busy = [e for e in entries if e not in done]
    size = progress.human_bytes(sum(e.size for e in done))
    lines = [f"removed: {len(done)} entries {what}, up to {size}"]
    lines += [f"  {shown(e.path, cache)}" for e in done]
    lines += [f"  {shown(e.path, cache)}  (in use now: left alone)" for e in busy]
    return lines


def run(root: Path, *, prune: bool, older_than_days: float, yes: bool) -> str:
    """``vpq cache``: the report, and with ``prune`` the entries to remove
    (removed with ``yes``, else listed as a dry run)."""
    cache = fetch.cache_dir()
    now = time.time()
    with progress.step(f"measuring {cache}"):
        entries = scan(cache, needed_by(root, cache))
    out = [render(entries, cache, now)]
    if prune:
        out += _prune(prunable(entries, older_than_days, now), cache, yes, older_than_days)
    return "\n".join(out)
