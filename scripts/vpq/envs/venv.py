"""Virtual environments that import a built vLLM wheel on CPU.

A *deps* venv holds CPU torch 2.13.0, pytest and the pinned upstream's
``requirements/common.txt``; it is slow to make (a few minutes cold), so it
is cached under ``<cache>/envs/deps-<hash>`` keyed by its inputs (the
download cache's directory, see ``vpq.source.fetch.cache_dir``), shared by every
checkout. For the pinned release on CPython 3.11 x86_64 it is installed from
``cpu-deps.lock`` (``vpq.envs.deps_lock``: the wheels by URL and hash, no
resolution; the lock's hash is in the key), otherwise pip resolves. A wheel is
then installed with ``pip install --no-deps`` into its own venv that sees
the deps venv through a ``.pth`` file, as a serving host would install it,
minus the CUDA stack. Used by the contract check and the tests.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from filelock import FileLock

from vpq.core import proc, progress
from vpq.core.errors import VpqError
from vpq.core.files import sha256_file
from vpq.core.proc import PYTEST
from vpq.envs import deps_lock, installer
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


def _deps_site(deps: Path) -> Path:
    """The deps venv's site-packages; where it is still being made
    (``wheel_over_deps``), where this Python's ``venv`` puts it."""
    found = sorted(deps.glob("lib/python3*/site-packages"))
    if len(found) == 1:
        return found[0]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return deps / "lib" / version / "site-packages"


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


#: What a deps venv holds besides ``requirements/common.txt``.
DEPS_REQUIREMENTS = (TORCH_CPU, PYTEST)
#: The deps venv's lock (``vpq.envs.deps_lock``).
DEPS_LOCK = deps_lock.Spec(deps_lock.LOCK_FILE, DEPS_REQUIREMENTS)


def deps_key(common_txt: bytes) -> str:
    """The deps venv's cache key: what it holds and the Python it runs, and
    the lock's hash where ``cpu-deps.lock`` makes it (``deps_lock.choose``)."""
    lock, _ = deps_lock.choose(DEPS_LOCK, common_txt)
    locked = lock.sha256().encode() if lock else b""
    return hashlib.sha256(
        common_txt + TORCH_CPU.encode() + PYTEST.encode() + sys.version.encode() + locked
    ).hexdigest()[:12]


#: A ``.pth`` line: this venv's Python writes bytecode on import even where
#: ``PYTHONDONTWRITEBYTECODE`` is set (it is on our machines). The venvs are
#: installed without bytecode, so without it every start would compile torch
#: and vLLM again: 34 s instead of 14 s for the contract's imports here.
BYTECODE_PTH = "import sys; sys.dont_write_bytecode = False\n"


def new_venv(dest: Path, *, pip: bool) -> Path:
    """A new venv at ``dest`` by this Python's ``venv`` module that writes
    bytecode on first import (``BYTECODE_PTH``); its python. With ``pip``
    only where pip is to install into it: ensurepip takes seconds, and uv
    needs no pip in the venv."""
    _run([sys.executable, "-m", "venv", *([] if pip else ["--without-pip"]), str(dest)])
    (_site_packages(dest) / "_vpq_bytecode.pth").write_text(BYTECODE_PTH)
    return dest / "bin" / "python"


def _make_deps(venv: Path, common_txt: bytes, req: Path) -> None:
    """Make the deps venv at ``venv``: the lock's wheels by hash (uv where
    installed, else pip: ``vpq.envs.installer.chosen``), or, where the lock
    does not apply, pip resolving ``req`` (one line says why). Neither
    writes bytecode: the venv's Python writes it for what is imported, on
    first import (``new_venv``, docs/cache.md)."""
    how = deps_lock.plan(DEPS_LOCK, common_txt)
    py = new_venv(venv, pip=how.uv is None)
    deps_lock.install(py, how, common_txt, req, VenvError)


def deps_env(common_txt: bytes) -> Path:
    """The cached deps venv for ``common_txt``; made on first use."""
    key = deps_key(common_txt)
    req = envs_dir() / f"common-{key}.txt"

    def make(venv: Path) -> None:
        """Create the deps venv at ``venv``: CPU torch, pytest, ``common.txt``."""
        what = f"making the CPU venv {venv} (torch, pytest, vLLM's requirements; once)"
        with progress.step(what):
            _make_deps(venv, common_txt, req)

    def make_shared(venv: Path) -> None:
        """``make``, then share its files with the other deps venvs."""
        make(venv)
        share_identical_files(venv)

    return cached(envs_dir() / f"deps-{key}", make_shared)


def wheel_over_deps(common_txt: bytes, wheel: Path) -> Path:
    """The python of ``cached_wheel_env`` for ``wheel`` over ``deps_env``
    for ``common_txt``, the two made side by side where neither is cached:
    the wheel's venv needs only the deps venv's path, and the deps venv's
    install waits on the network more than on the CPU."""
    deps = envs_dir() / f"deps-{deps_key(common_txt)}"
    with ThreadPoolExecutor(max_workers=1) as pool:
        made = pool.submit(deps_env, common_txt)
        python = cached_wheel_env(deps, wheel)
        made.result()
    return python


def share_identical_files(venv: Path) -> None:
    """Hard-link ``venv``'s files of 64 KiB and more to identical ones in the
    newest other complete deps venv (util-linux ``hardlink``, content only;
    nothing happens where it is not installed).

    Every release's deps venv holds the same torch and triton and mostly the
    same packages: about 2 GiB of its 2.6 GiB are bytes another venv already
    has, so the staircase's one venv per release fits on a normal disk. The
    venvs are never written in place after they are made (pip replaces
    files, it does not rewrite them; the bytecode Python writes on import
    goes to a new file, renamed into place), so sharing is safe.
    """
    tool = shutil.which("hardlink")
    others = sorted(
        (p for p in envs_dir().glob("deps-*") if p != venv and (p / ".complete").exists()),
        key=lambda p: (p / ".complete").stat().st_mtime,
    )
    if tool and others:
        cmd = [tool, "--quiet", "--content", "--maximize", "--minimum-size", "64K"]
        _run(cmd + [str(venv), str(others[-1])])


def wheel_env(dest: Path, deps: Path, wheel: Path, *, pip: bool = False) -> Path:
    """A fresh venv at ``dest`` with ``wheel`` installed (``--no-deps``; by
    uv where it is installed, else pip: ``vpq.envs.installer``), seeing the deps
    venv's packages through a ``.pth`` file. Returns its python. It has pip
    where pip installed the wheel, or where ``pip`` asks for it.

    Raises:
        VenvError: venv creation or the install failed.
    """
    if dest.exists():
        shutil.rmtree(dest)
    with progress.step(f"installing {wheel.name} into the venv {dest}"):
        py = new_venv(dest, pip=pip or installer.chosen() is None)
        (_site_packages(dest) / "_vpq_deps.pth").write_text(
            f"import site; site.addsitedir({str(_deps_site(deps))!r})\n"
        )
        installer.install_files(py, [wheel], VenvError)  # uv where installed, else pip
    return py


def cached_wheel_env(deps: Path, wheel: Path) -> Path:
    """``wheel_env`` under ``<cache>/envs/wheel-<sha256[:12]>``, reused while
    the same wheel bytes are installed there."""
    dest = cached(
        envs_dir() / f"wheel-{sha256_file(wheel)[:12]}", lambda d: wheel_env(d, deps, wheel)
    )
    return dest / "bin" / "python"
