"""Virtual environments that import a built vLLM wheel on CPU.

A *deps* venv holds CPU torch 2.13.0, pytest and the pinned upstream's
``requirements/common.txt``; it is slow to make (a few minutes cold), so it
is cached under ``<cache>/envs/deps-<hash>`` keyed by its inputs (the
download cache's directory, see ``vpq.source.fetch.cache_dir``), shared by every
checkout. A wheel is
then installed with ``pip install --no-deps`` into its own venv that sees
the deps venv through a ``.pth`` file, as a serving host would install it,
minus the CUDA stack. Used by the contract check and the tests.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from vpq.core import proc, progress
from vpq.core.errors import VpqError
from vpq.core.files import sha256_file
from vpq.core.proc import PYTEST  # tests/semantics run inside the wheel venvs
from vpq.envs import installer
from vpq.source import fetch

TORCH_CPU = "torch==2.13.0"


class VenvError(VpqError):
    """A CPU venv for checking a wheel could not be made."""


def _run(cmd: list[str]) -> None:
    proc.run(cmd, VenvError)


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise VenvError(f"{venv}: expected one lib/python3*/site-packages, found {len(found)}")
    return found[0]


def envs_dir() -> Path:
    """Where cached venvs live: ``<download cache>/envs``."""
    path = fetch.cache_dir() / "envs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(dest: Path, make: Callable[[Path], object]) -> Path:
    """``dest``, made by ``make(dest)`` unless a complete one is there.

    Guarded by a file lock; a ``.complete`` marker is written only after
    ``make`` succeeds, so an interrupted one is removed and made again.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if not (dest / ".complete").exists():
            if dest.exists():
                shutil.rmtree(dest)
            make(dest)
            (dest / ".complete").write_text("ok\n")
        (dest / ".used").touch()  # its last use, for `vpq cache --prune`
    return dest


def deps_key(common_txt: bytes) -> str:
    """The deps venv's cache key: what it holds and the Python it runs."""
    return hashlib.sha256(
        common_txt + TORCH_CPU.encode() + PYTEST.encode() + sys.version.encode()
    ).hexdigest()[:12]


def deps_env(common_txt: bytes) -> Path:
    """The cached deps venv for ``common_txt``; made on first use."""
    key = deps_key(common_txt)
    req = envs_dir() / f"common-{key}.txt"

    def make(venv: Path) -> None:
        """Create the deps venv at ``venv``: CPU torch, pytest, ``common.txt``."""
        what = f"making the CPU venv {venv} (torch, pytest, vLLM's requirements; once)"
        with progress.step(what):
            _run([sys.executable, "-m", "venv", str(venv)])
            req.write_bytes(common_txt)
            py = str(venv / "bin" / "python")
            _run([py, "-m", "pip", "install", "-q", TORCH_CPU, PYTEST, "-r", str(req)])

    def make_shared(venv: Path) -> None:
        """``make``, then share its files with the other deps venvs."""
        make(venv)
        share_identical_files(venv)

    return cached(envs_dir() / f"deps-{key}", make_shared)


def share_identical_files(venv: Path) -> None:
    """Hard-link ``venv``'s files of 64 KiB and more to identical ones in the
    newest other complete deps venv (util-linux ``hardlink``, content only;
    nothing happens where it is not installed).

    Every release's deps venv holds the same torch and triton and mostly the
    same packages: about 2 GiB of its 2.6 GiB are bytes another venv already
    has, so the staircase's one venv per release fits on a normal disk. The
    venvs are never written in place after they are made (pip replaces
    files, it does not rewrite them), so sharing is safe.
    """
    tool = shutil.which("hardlink")
    others = sorted(
        (p for p in envs_dir().glob("deps-*") if p != venv and (p / ".complete").exists()),
        key=lambda p: (p / ".complete").stat().st_mtime,
    )
    if tool and others:
        cmd = [tool, "--quiet", "--content", "--maximize", "--minimum-size", "64K"]
        _run(cmd + [str(venv), str(others[-1])])


def wheel_env(dest: Path, deps: Path, wheel: Path) -> Path:
    """A fresh venv at ``dest`` with ``wheel`` installed (``--no-deps``; by
    uv where it is installed, else pip: ``vpq.envs.installer``), seeing the deps
    venv's packages through a ``.pth`` file. Returns its python.

    Raises:
        VenvError: venv creation or the install failed.
    """
    if dest.exists():
        shutil.rmtree(dest)
    with progress.step(f"installing {wheel.name} into the venv {dest}"):
        _run([sys.executable, "-m", "venv", str(dest)])
        (_site_packages(dest) / "_vpq_deps.pth").write_text(
            f"import site; site.addsitedir({str(_site_packages(deps))!r})\n"
        )
        py = dest / "bin" / "python"
        installer.install_files(py, [wheel], VenvError)  # uv where installed, else pip
    return py


def cached_wheel_env(deps: Path, wheel: Path) -> Path:
    """``wheel_env`` under ``<cache>/envs/wheel-<sha256[:12]>``, reused while
    the same wheel bytes are installed there."""
    dest = cached(
        envs_dir() / f"wheel-{sha256_file(wheel)[:12]}", lambda d: wheel_env(d, deps, wheel)
    )
    return dest / "bin" / "python"
