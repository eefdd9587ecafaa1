"""Hash-checked downloads into a content-addressed cache.

Files are looked up on the package index pip is configured with (the simple
repository API, PEP 691 JSON), so no host name lives in this repository.
Every file is verified against the sha256 the caller pins before it is used,
and kept under ``<cache>/sha256/<hash>/<filename>`` so a second build needs no
network.

Cache location: ``$VPQ_CACHE_DIR`` if set, else the user cache directory
(``~/.cache/vpq`` on Linux). Index: ``$VPQ_INDEX_URL`` if set, else pip's
``index-url`` setting, else pip's default index.

This module knows nothing about what the files mean.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
from filelock import FileLock

from vpq.core import progress
from vpq.core.errors import VpqError
from vpq.core.files import CHUNK, sha256_file

_TIMEOUT_S = 60
_PEP691 = "application/vnd.pypi.simple.v1+json"


class FetchError(VpqError):
    """A download failed, or a file did not match its pinned sha256."""


@dataclass(frozen=True)
class IndexFile:
    """One file of a project on the index (PEP 691 ``files`` entry)."""

    filename: str
    url: str
    sha256: str
    yanked: bool


def cache_dir() -> Path:
    """The download cache directory (created on demand)."""
    env = os.environ.get("VPQ_CACHE_DIR")
    path = Path(env) if env else Path(platformdirs.user_cache_dir("vpq"))
    path.mkdir(parents=True, exist_ok=True)
    return path


#: pip's and uv's default index (PyPI's simple API), used where none is set.
DEFAULT_INDEX_URL = "https://pypi.org/simple/"


def index_url() -> str:
    """The simple-API base URL, ending in ``/``: ``$VPQ_INDEX_URL``, else
    pip's (``$PIP_INDEX_URL``, then ``pip config get global.index-url``),
    else PyPI's, as pip and uv default to.

    Raises:
        FetchError: nothing is set and this Python has no pip whose
            configuration could name an index.
    """
    url = os.environ.get("VPQ_INDEX_URL") or os.environ.get("PIP_INDEX_URL")
    if not url:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
            capture_output=True,
            text=True,
        )
        if "No module named pip" in proc.stderr:
            raise FetchError(
                f"no package index is configured and {sys.executable} has no pip to "
                "read one from; set VPQ_INDEX_URL to a simple index (PEP 503/691) "
                "or run the tool with a Python that has pip"
            )
        url = proc.stdout.strip() if proc.returncode == 0 else ""
    return (url or DEFAULT_INDEX_URL).rstrip("/") + "/"


def _simple_page(project: str) -> dict[str, Any]:
    """The index's PEP 691 JSON page for ``project``, with ``_url`` added."""
    url = f"{index_url()}{project}/"
    req = urllib.request.Request(url, headers={"Accept": _PEP691})
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as resp:
            data: dict[str, Any] = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(
            f"cannot list {project!r} on the package index {url}: {exc}. "
            "Check the network, or set VPQ_INDEX_URL to a reachable simple index."
        ) from None
    data["_url"] = url
    return data


def list_files(project: str) -> list[IndexFile]:
    """All files of ``project`` on the index, in index order.

    Raises:
        FetchError: the index cannot be reached or answers nonsense.
    """
    data = _simple_page(project)
    base = str(data["_url"])
    files = []
    for f in data.get("files", []):
        sha = f.get("hashes", {}).get("sha256")
        if sha:
            files.append(
                IndexFile(
                    filename=f["filename"],
                    url=urllib.parse.urljoin(base, f["url"]),
                    sha256=sha,
                    yanked=bool(f.get("yanked")),
                )
            )
    return files


def versions(project: str) -> list[str]:
    """Release versions of ``project`` listed by the index (PEP 700).

    Raises:
        FetchError: the index cannot be reached.
    """
    return [str(v) for v in _simple_page(project).get("versions", [])]


def _length(resp: object) -> int | None:
    """The response's ``Content-Length``, or None when it does not say."""
    value = getattr(resp, "headers", {}).get("Content-Length")
    return int(value) if value and str(value).isdigit() else None


def cached_path(filename: str, sha256: str) -> Path:
    """Where a verified file lives in the cache."""
    return cache_dir() / "sha256" / sha256 / filename


def _download(entry: IndexFile, dest: Path, sha256: str) -> None:
    """Download ``entry`` to ``dest`` through a ``.part`` file, showing
    progress, if its bytes hash to ``sha256``.

    Raises:
        FetchError: the download failed, or its sha256 differs from the pin.
    """
    filename = entry.filename
    for stale in dest.parent.glob("*.part"):  # a download cut off (we hold its lock)
        stale.unlink(missing_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with (
            os.fdopen(fd, "wb") as fh,
            urllib.request.urlopen(entry.url, timeout=_TIMEOUT_S) as resp,
            progress.download(filename, _length(resp)) as shown,
        ):
            while chunk := resp.read(CHUNK):
                h.update(chunk)
                fh.write(chunk)
                shown.update(len(chunk))
    except (urllib.error.URLError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise FetchError(f"{filename}: download failed: {exc}") from None
    actual = h.hexdigest()
    if actual != sha256:
        tmp.unlink(missing_ok=True)
        raise FetchError(
            f"{filename}: sha256 mismatch. upstream.lock pins {sha256}, "
            f"the download has {actual}. The file was not used."
        )
    os.replace(tmp, dest)


def fetch(project: str, filename: str, sha256: str) -> Path:
    """Return a local, verified copy of ``filename``, downloading on a miss.

    A cache hit is re-hashed before use, so a corrupted cache is caught.

    Raises:
        FetchError: not in the cache and the index is unreachable, the index
            has no such file, or the download's sha256 differs from the pin
            (the message names the file, expected and actual hash).
    """
    dest = cached_path(filename, sha256)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if dest.is_file():
            actual = sha256_file(dest)
            if actual == sha256:
                os.utime(dest)  # its last use, for `vpq cache --prune`
                return dest
            dest.unlink()
            raise FetchError(
                f"{dest}: cached copy of {filename} is corrupt (sha256 {actual}, "
                f"pinned {sha256}); it was removed, run the command again to "
                "download it afresh"
            )
        try:
            entries = {f.filename: f for f in list_files(project)}
        except FetchError as exc:
            raise FetchError(
                f"{filename} is not in the download cache ({dest.parent}) and "
                f"cannot be downloaded: {exc}"
            ) from None
        entry = entries.get(filename)
        if entry is None:
            raise FetchError(
                f"{filename}: the package index lists no such file for "
                f"{project!r}; check upstream.lock"
            )
        _download(entry, dest, sha256)
    return dest
