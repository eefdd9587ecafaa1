"""Small file helpers shared by every module: atomic writes and hashing."""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from pathlib import Path

#: Read and copy size for large files (wheels, sdists), in bytes.
CHUNK = 1 << 20
#: vLLM's setuptools-scm version file, in the sdist tree and the wheel.
VERSION_FILE = "vllm/_version.py"


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temporary sibling and ``os.replace``.

    A crash leaves either the old file or the new one, never a torn one.
    ``mode`` sets the permissions (the temporary file is 0600 otherwise).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def record_hash(data: bytes) -> str:
    """A wheel RECORD hash field: ``sha256=<urlsafe base64, no padding>`` (PEP 376/427)."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
