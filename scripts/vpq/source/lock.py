"""Reading, validating and writing ``upstream.lock``.

``upstream.lock`` pins the upstream release the series applies to. It is
TOML::

    [upstream]
    name = "vllm"
    version = "0.17.1"
    tag = "v0.17.1"
    repository = "https://github.com/vllm-project/vllm.git"
    commit = "95c0f928c"          # as recorded by the sdist's vllm/_version.py
    commit_source = "sdist vllm/_version.py"

    [sdist]
    filename = "vllm-0.17.1.tar.gz"
    sha256 = "..."

    [wheels.x86_64]
    filename = "vllm-0.17.1-cp38-abi3-manylinux_2_31_x86_64.whl"
    sha256 = "..."

This module knows nothing about git or wheels.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from packaging.version import InvalidVersion, Version

from vpq.core.errors import VpqError
from vpq.core.files import write_atomic

LOCK_FILE = "upstream.lock"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class LockError(VpqError):
    """``upstream.lock`` is missing or malformed."""


@dataclass(frozen=True)
class Artifact:
    """One pinned release file: its name on the index and its sha256."""

    filename: str
    sha256: str


@dataclass(frozen=True)
class Lock:
    """The upstream pin."""

    name: str
    version: str
    tag: str
    repository: str
    commit: str
    commit_source: str
    sdist: Artifact
    wheels: dict[str, Artifact] = field(default_factory=dict)

    def wheel(self, platform: str) -> Artifact:
        """The pinned release wheel for ``platform`` (``x86_64``, ``aarch64``).

        Raises:
            LockError: the lock pins no wheel for that platform.
        """
        try:
            return self.wheels[platform]
        except KeyError:
            raise LockError(
                f"{LOCK_FILE} pins no wheel for platform {platform!r}; "
                f"it pins: {', '.join(sorted(self.wheels)) or 'none'}"
            ) from None


def _req(table: dict[str, object], key: str, where: str, path: Path) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise LockError(f"{path}: [{where}] needs a non-empty string {key!r} (found {value!r})")
    return value


def _table(data: dict[str, object], key: str, path: Path) -> dict[str, object]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise LockError(f"{path}: missing table [{key}]")
    return value


def _artifact(table: dict[str, object], where: str, path: Path) -> Artifact:
    filename = _req(table, "filename", where, path)
    sha = _req(table, "sha256", where, path)
    if not _SHA256.match(sha):
        raise LockError(f"{path}: [{where}] sha256 must be 64 lowercase hex digits, got {sha!r}")
    return Artifact(filename=filename, sha256=sha)


def parse(text: str, path: Path) -> Lock:
    """Parse and validate lock text; ``path`` is only used in messages.

    Raises:
        LockError: naming ``path`` and the bad key.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockError(f"{path}: not valid TOML: {exc}") from None
    return from_table(data, path)


def from_table(data: dict[str, object], path: Path) -> Lock:
    """Validate a lock's tables (``upstream.lock`` as ``tomllib`` reads it,
    or ``to_table``'s form saved elsewhere); ``path`` names the file that
    held them in messages.

    Raises:
        LockError: naming ``path`` and the bad key.
    """
    up = _table(data, "upstream", path)
    name = _req(up, "name", "upstream", path)
    version = _req(up, "version", "upstream", path)
    try:
        Version(version)
    except InvalidVersion:
        raise LockError(
            f"{path}: [upstream] version {version!r} is not a PEP 440 version"
        ) from None
    commit = _req(up, "commit", "upstream", path)
    if not _COMMIT.match(commit):
        raise LockError(
            f"{path}: [upstream] commit must be 7-40 lowercase hex digits, got {commit!r}"
        )
    wheels_t = _table(data, "wheels", path)
    wheels = {}
    for plat, t in wheels_t.items():
        if not isinstance(t, dict):
            raise LockError(f"{path}: [wheels.{plat}] must be a table")
        wheels[plat] = _artifact(t, f"wheels.{plat}", path)
    if not wheels:
        raise LockError(f"{path}: [wheels] pins no platform")
    return Lock(
        name=name,
        version=version,
        tag=_req(up, "tag", "upstream", path),
        repository=_req(up, "repository", "upstream", path),
        commit=commit,
        commit_source=_req(up, "commit_source", "upstream", path),
        sdist=_artifact(_table(data, "sdist", path), "sdist", path),
        wheels=wheels,
    )


def load(root: Path) -> Lock:
    """Read ``<root>/upstream.lock``.

    Raises:
        LockError: the file is missing or malformed.
    """
    path = root / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockError(
            f"{path}: not found. The repository root must hold upstream.lock "
            "(see docs/repository.md, 'upstream.lock')."
        ) from None
    return parse(text, path)


def to_table(lock: Lock) -> dict[str, object]:
    """The lock as ``upstream.lock``'s tables (stable key order)."""
    return {
        "upstream": {
            "name": lock.name,
            "version": lock.version,
            "tag": lock.tag,
            "repository": lock.repository,
            "commit": lock.commit,
            "commit_source": lock.commit_source,
        },
        "sdist": {"filename": lock.sdist.filename, "sha256": lock.sdist.sha256},
        "wheels": {
            plat: {"filename": a.filename, "sha256": a.sha256}
            for plat, a in sorted(lock.wheels.items())
        },
    }


def dumps(lock: Lock) -> str:
    """Serialise a lock to TOML text (stable key order)."""
    header = "# The upstream pin. Written by `nox -s rebase_upstream`; see docs/repository.md.\n"
    return header + tomli_w.dumps(to_table(lock))


def dump(lock: Lock, root: Path) -> None:
    """Write ``<root>/upstream.lock`` atomically."""
    write_atomic(root / LOCK_FILE, dumps(lock).encode())
