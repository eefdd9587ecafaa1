"""Recorded conflict resolutions: git rerere's cache, kept in the repository.

A person resolves a rebase conflict once; git's ``rerere`` ("reuse recorded
resolution") records the conflict (``preimage``) and its resolution
(``postimage``) under an id that hashes the conflict's hunks, whatever the
labels and line numbers around them. The repository keeps those records in
``rerere/<id>/``, in the layout of ``.git/rr-cache`` (the way the Linux
kernel's trees share rerere caches), and ``rerere/index.toml`` says for each
id which patch and file it resolves and in which move it was recorded.

- ``install`` copies them into the work tree's ``.git/rr-cache`` at the
  start of a rebase, with ``rerere.enabled`` and ``rerere.autoupdate``: a
  cherry-pick that meets a recorded conflict gets the resolution replayed
  and staged by git itself.
- ``record`` + ``harvest`` run when ``--continue`` commits a person's
  resolution: git records it, and the new ids are copied back into
  ``rerere/`` at once, so an ``--abort`` later in the same move keeps them.
- ``used``: git touches a postimage when it replays it (its mark for
  ``git rerere gc``). ``install`` sets every postimage's mtime to 0, so the
  ids with a newer postimage are those the move met. A recorded resolution
  a move does not meet is *stale* for that move; ``prune`` removes it.

This module knows nothing about patches beyond their names.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.source import git as g

#: The repository's copy of the rerere cache.
RERERE_DIR = "rerere"
INDEX_FILE = "index.toml"
#: The files git keeps per conflict id (``preimage.1`` etc. are variants).
_IMAGES = ("preimage", "postimage")


class RerereError(VpqError):
    """``rerere/`` is malformed."""


@dataclass(frozen=True)
class Resolution:
    """One recorded resolution: its rerere id and what it resolves."""

    id: str
    patch: str = ""  # the patch whose conflict it resolves
    file: str = ""  # the conflicted file
    recorded: str = ""  # the move it was recorded in, e.g. "0.17.1 -> 0.33.0"

    def describe(self) -> str:
        """One line for reports: the folder, then what it resolves."""
        what = ", ".join(x for x in (f"patches/{self.patch}" if self.patch else "", self.file) if x)
        when = f", recorded moving {self.recorded}" if self.recorded else ""
        return f"{RERERE_DIR}/{self.id}" + (f" ({what}{when})" if what or when else "")


def _is_id(name: str) -> bool:
    """Whether ``name`` is a rerere conflict id (40 lowercase hex digits)."""
    return len(name) == 40 and all(c in "0123456789abcdef" for c in name)


def _cache(repo: Path) -> Path:
    """The work tree's rerere cache."""
    return repo / ".git" / "rr-cache"


def _ids(folder: Path) -> list[str]:
    """The conflict ids under ``folder`` that hold a resolution (a postimage)."""
    if not folder.is_dir():
        return []
    return sorted(
        d.name for d in folder.iterdir() if _is_id(d.name) and (d / "postimage").is_file()
    )


def load(root: Path) -> dict[str, Resolution]:
    """The repository's recorded resolutions by id (those with a postimage).

    Raises:
        RerereError: ``rerere/index.toml`` is not TOML.
    """
    folder = root / RERERE_DIR
    index_path = folder / INDEX_FILE
    try:
        index = tomllib.loads(index_path.read_text()) if index_path.is_file() else {}
    except tomllib.TOMLDecodeError as exc:
        raise RerereError(f"{index_path}: not valid TOML: {exc}") from None
    out = {}
    for rid in _ids(folder):
        entry = index.get(rid, {})
        out[rid] = Resolution(rid, *(str(entry.get(k, "")) for k in ("patch", "file", "recorded")))
    return out


def write_index(root: Path, resolutions: dict[str, Resolution]) -> None:
    """Rewrite ``rerere/index.toml`` for ``resolutions`` (sorted by id)."""
    data = {
        r.id: {k: v for k, v in (("patch", r.patch), ("file", r.file), ("recorded", r.recorded))}
        for r in sorted(resolutions.values(), key=lambda r: r.id)
    }
    head = "# Recorded conflict resolutions (git rerere); see docs/rebase.md.\n\n"
    write_atomic(root / RERERE_DIR / INDEX_FILE, (head + tomli_w.dumps(data)).encode())


def _copy_images(src: Path, dest: Path) -> None:
    """Copy one id's pre- and postimages (with their variants) from ``src``."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name.split(".")[0] in _IMAGES:
            shutil.copyfile(f, dest / f.name)


def install(root: Path, repo: Path) -> list[str]:
    """Make the work tree's rr-cache the repository's recorded resolutions
    (and nothing else), each marked unused; enable rerere with autoupdate.
    Returns the installed ids."""
    cache = _cache(repo)
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    ids = _ids(root / RERERE_DIR)
    for rid in ids:
        _copy_images(root / RERERE_DIR / rid, cache / rid)
        os.utime(cache / rid / "postimage", (0, 0))
    g.git(["config", "rerere.enabled", "true"], repo)
    g.git(["config", "rerere.autoupdate", "true"], repo)
    return ids


def conflicts(repo: Path) -> dict[str, str]:
    """The conflicts rerere is tracking in the stopped cherry-pick (id ->
    path), from ``.git/MERGE_RR``; a path a recorded resolution settled is
    no longer there."""
    path = repo / ".git" / "MERGE_RR"
    if not path.is_file():
        return {}
    out = {}
    for rec in path.read_bytes().split(b"\0"):
        if b"\t" in rec:
            rid, file = rec.decode(errors="replace").split("\t", 1)
            out[rid.split(".")[0]] = file
    return out


def record(repo: Path) -> None:
    """Have git record the resolution of every tracked conflict that is
    resolved in the work tree now (``git rerere``)."""
    g.git(["rerere"], repo)


def used(repo: Path) -> set[str]:
    """The recorded ids this move met: replayed by git (postimage touched
    since ``install``) or recorded during it."""
    cache = _cache(repo)
    return {rid for rid in _ids(cache) if (cache / rid / "postimage").stat().st_mtime > 0}


def harvest(root: Path, repo: Path, patch: str, files: dict[str, str], move: str) -> list[str]:
    """Copy the resolutions recorded in the work tree that the repository
    lacks into ``rerere/``, naming ``patch``, the file (``files``: id ->
    path, from ``conflicts`` before the commit) and ``move``. Returns their ids."""
    have = load(root)
    new = [rid for rid in _ids(_cache(repo)) if rid not in have]
    for rid in new:
        _copy_images(_cache(repo) / rid, root / RERERE_DIR / rid)
        have[rid] = Resolution(rid, patch, files.get(rid, ""), move)
    if new:
        write_index(root, have)
    return new


def stale(root: Path, met: set[str]) -> list[Resolution]:
    """The repository's recorded resolutions whose conflict did not occur."""
    return [r for rid, r in load(root).items() if rid not in met]


def prune(root: Path, ids: list[str]) -> None:
    """Remove the recorded resolutions ``ids`` from ``rerere/``."""
    have = load(root)
    for rid in ids:
        shutil.rmtree(root / RERERE_DIR / rid, ignore_errors=True)
        have.pop(rid, None)
    write_index(root, have)


def lint(root: Path) -> list[str]:
    """Problems with ``rerere/``, one line each: a folder that is not a
    conflict id or lacks its preimage or postimage, and an index entry
    without its folder (or a folder without its entry)."""
    folder = root / RERERE_DIR
    if not folder.is_dir():
        return []
    problems = []
    for d in sorted(folder.iterdir()):
        if d.name == INDEX_FILE:
            continue
        if not d.is_dir() or not _is_id(d.name):
            problems.append(f"{d}: not a rerere conflict id folder (40 hex digits)")
        elif not all((d / f).is_file() for f in _IMAGES):
            problems.append(f"{d}: holds no preimage and postimage pair")
    index_path = folder / INDEX_FILE
    try:
        index = tomllib.loads(index_path.read_text()) if index_path.is_file() else {}
    except tomllib.TOMLDecodeError as exc:
        return [*problems, f"{index_path}: not valid TOML: {exc}"]
    for rid in sorted(set(index) ^ set(_ids(folder))):
        where = "has no folder" if rid in index else "is not in the index"
        problems.append(f"{folder / rid}: the recorded resolution {where} ({index_path})")
    return problems
