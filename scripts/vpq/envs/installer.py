"""Installing local wheel files into the tool's venvs: uv where it is
installed, pip otherwise, with the same result.

Only installs of files already on disk and already checked (the built wheel,
or files ``vpq.source.fetch`` took from the hash-checked download cache) with
``--no-deps`` go through here: nothing is resolved, so both installers put
exactly the same distributions and files into the venv (uv adds its own
bookkeeping file, ``uv_cache.json``, to the dist-info; ``INSTALLER`` names
the installer). Neither writes bytecode (pip is told ``--no-compile``, uv
writes none unasked): Python writes it for what is imported, on first
import. uv runs offline, with no cache of its own (the files are already
cached, by sha256) and no configuration of its own.

Installs that resolve requirements from the package index stay on pip:
what they get depends on pip's configuration (its index, extra indexes,
find-links and constraints, e.g. a CPU torch on disk), and uv reads none
of it. The deps venv's resolution is done once, by pip, into
``cpu-deps.lock``; its files then go in by uv too (``vpq.envs.deps_lock``).

``$VPQ_INSTALLER`` forces one: ``pip``, or ``uv`` (an error where it is
not installed).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from vpq.core import proc
from vpq.core.errors import VpqError


class InstallerError(VpqError):
    """Local wheel files could not be installed into a venv."""


def uv_bin() -> str | None:
    """The uv binary of the ``uv`` package in this Python, else ``uv`` on
    PATH; None where there is none."""
    try:
        import uv  # type: ignore[import-not-found]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def chosen() -> str | None:
    """The uv binary that installs local files now, or None for pip.

    Raises:
        InstallerError: ``$VPQ_INSTALLER`` names something else, or ``uv``
            where uv is not installed.
    """
    forced = os.environ.get("VPQ_INSTALLER", "")
    if forced not in ("", "pip", "uv"):
        raise InstallerError(f"VPQ_INSTALLER={forced!r}: expected 'pip' or 'uv'")
    if forced == "pip":
        return None
    uv = uv_bin()
    if forced == "uv" and uv is None:
        raise InstallerError("VPQ_INSTALLER=uv, but uv is not installed (pip install uv)")
    return uv


def command(python: Path, files: Sequence[Path]) -> list[str]:
    """The command that installs ``files`` (``--no-deps``) into the venv of
    ``python``: uv's by ``chosen()``, else that venv's pip."""
    paths = [str(f) for f in files]
    uv = chosen()
    if uv is None:
        return [str(python), "-m", "pip", "install", "-q", "--no-compile", "--no-deps", *paths]
    flags = ["--offline", "--no-config", "--no-cache"]
    return [uv, "pip", "install", "-q", *flags, "--python", str(python), "--no-deps", *paths]


def install_files(
    python: Path,
    files: Sequence[Path],
    error: type[VpqError] = InstallerError,
    *,
    stream: bool = False,
) -> None:
    """Install the local wheel ``files`` into the venv of ``python``, no
    dependencies, with uv where it is installed, else with that venv's pip.

    Raises:
        error: the install failed (the message has its output).
        InstallerError: ``$VPQ_INSTALLER`` is wrong (``chosen``).
    """
    proc.run(command(python, files), error, stream=stream)
