"""Virtual environments for installing built wheels on CPU.

A *deps* venv holds CPU torch 2.13.0 and the pinned upstream's
``requirements/common.txt``; it is slow to make (a few minutes cold), so it
is cached under ``build/test-envs/deps-<hash>`` keyed by its inputs. Each
wheel is then installed with ``pip install --no-deps`` into a *fresh* venv
that sees the deps venv through a ``.pth`` file, as a serving host would
install it, minus the CUDA stack.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

TORCH_CPU = "torch==2.13.0"
PYTEST = "pytest>=8"  # for tests/semantics, which run inside the wheel venvs


def _run(cmd: list[str], **kw: object) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def _site_packages(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def deps_env(root: Path, common_txt: bytes) -> Path:
    """The cached deps venv for ``common_txt``; made on first use."""
    key = hashlib.sha256(common_txt + TORCH_CPU.encode() + PYTEST.encode() + sys.version.encode()).hexdigest()[:12]
    base = root / "build" / "test-envs"
    base.mkdir(parents=True, exist_ok=True)
    venv = base / f"deps-{key}"
    with FileLock(str(venv) + ".lock"):
        if (venv / ".complete").exists():
            return venv
        if venv.exists():
            shutil.rmtree(venv)
        _run([sys.executable, "-m", "venv", str(venv)])
        req = base / f"common-{key}.txt"
        req.write_bytes(common_txt)
        py = str(venv / "bin" / "python")
        _run([py, "-m", "pip", "install", "-q", TORCH_CPU, PYTEST, "-r", str(req)])
        (venv / ".complete").write_text("ok\n")
    return venv


def wheel_env(dest: Path, deps: Path, wheel: Path) -> Path:
    """A fresh venv at ``dest`` with ``wheel`` pip-installed (``--no-deps``),
    seeing the deps venv's packages through a ``.pth`` file. Returns its python."""
    _run([sys.executable, "-m", "venv", str(dest)])
    (_site_packages(dest) / "_vpq_deps.pth").write_text(
        f"import site; site.addsitedir({str(_site_packages(deps))!r})\n"
    )
    py = dest / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
    return py
