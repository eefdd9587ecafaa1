"""Upstream releases on the package index: which there are, and the lock
for one of them.

``vpq.source.fetch`` downloads and hash-checks files without knowing what they
mean; this module reads the index as releases of vLLM: the final releases
newer than the pin, the newest one, and the ``upstream.lock`` a move to a
release would write (its sdist, its commit, and one wheel per platform the
pin has). It is used by ``vpq.move.rebase`` and the CLI.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from vpq.core.errors import VpqError
from vpq.source import fetch, lock, tree
from vpq.wheels import wheel


class ReleaseError(VpqError):
    """The index has no such release, or the release lacks a file the pin needs."""


def _is_wheel_for(filename: str, name: str, version: str, py_abi: str, plat: str) -> bool:
    """Whether ``filename`` is a wheel of ``name`` ``version`` (no build tag)
    with a ``py_abi`` tag (``cp38-abi3``) whose platform is for ``plat``."""
    try:
        w_name, w_version, build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return (
        w_name == canonicalize_name(name)
        and w_version == Version(version)
        and not build
        and any(
            f"{t.interpreter}-{t.abi}" == py_abi and t.platform.endswith(f"_{plat}") for t in tags
        )
    )


def _wheels(
    old: lock.Lock, version: str, files: dict[str, fetch.IndexFile]
) -> dict[str, lock.Artifact]:
    """``version``'s wheel per platform the old lock pins, with the old
    wheel's python and ABI tags (``cp38-abi3``).

    Raises:
        ReleaseError: the release publishes no such wheel for a platform.
    """
    wheels = {}
    for plat, art in old.wheels.items():
        py_abi = wheel.tag_part(art.filename).rsplit("-", 1)[0]  # cp38-abi3
        cands = sorted(n for n in files if _is_wheel_for(n, old.name, version, py_abi, plat))
        if not cands:
            raise ReleaseError(f"{old.name} {version} publishes no {py_abi} wheel for {plat}")
        wheels[plat] = lock.Artifact(cands[0], files[cands[0]].sha256)
    return wheels


def target_lock(old: lock.Lock, version: str) -> tuple[lock.Lock, Path]:
    """The lock for ``version``, from the index, and its verified sdist.

    Wheels are picked per platform the old lock pins, with the old wheel's
    python and ABI tags (``cp38-abi3``).

    Raises:
        ReleaseError: the index has no such release, or no wheel for a platform.
    """
    try:
        Version(version)
    except InvalidVersion:
        raise ReleaseError(f"{version!r} is not a version") from None
    files = {f.filename: f for f in fetch.list_files(old.name) if not f.yanked}
    sdist_name = f"{old.name}-{version}.tar.gz"
    if sdist_name not in files:
        raise ReleaseError(
            f"the package index has no {sdist_name}: is {old.name} {version} released?"
        )
    wheels = _wheels(old, version, files)
    sdist = fetch.fetch(old.name, sdist_name, files[sdist_name].sha256)
    commit = tree.sdist_commit(sdist)
    if not commit:
        raise ReleaseError(f"{sdist_name}: vllm/_version.py records no commit id")
    new = lock.Lock(
        name=old.name,
        version=version,
        tag=old.tag.replace(old.version, version),
        repository=old.repository,
        commit=commit,
        commit_source="sdist vllm/_version.py",
        sdist=lock.Artifact(sdist_name, files[sdist_name].sha256),
        wheels=wheels,
    )
    return new, sdist


def latest_version(project: str) -> str:
    """The newest final release on the index.

    Raises:
        ReleaseError: the index lists no final release.
    """
    vs = [Version(v) for v in fetch.versions(project) if not Version(v).is_prerelease]
    if not vs:
        raise ReleaseError(f"the package index lists no release of {project}")
    return str(max(vs))


def newer_versions(project: str, than: str) -> list[str]:
    """Final releases newer than ``than``, oldest first."""
    pivot = Version(than)
    return [
        str(v)
        for v in sorted(Version(x) for x in fetch.versions(project))
        if v > pivot and not v.is_prerelease
    ]
