"""The Python interpreters on this machine that tests run README's commands
and the serving-host script under, found without installing anything.

Where to look, in order: ``pythonX.Y`` on PATH (outside virtual
environments), Debian's ``/usr/bin/pythonX.Y``, and pyenv's versions
(``$PYENV_ROOT`` or ``~/.pyenv``, whose shims on PATH answer only for the
selected version). Each candidate is run once and asked what it is, so a
pyenv shim or a symlink is reported as the binary it starts.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Asked of each candidate; prints one JSON object.
_PROBE = (
    "import json, sys, sysconfig; print(json.dumps({"
    "'executable': sys.executable, 'version': list(sys.version_info[:3]), "
    "'stdlib': sysconfig.get_path('stdlib'), 'base_prefix': sys.base_prefix}))"
)


@dataclass(frozen=True)
class Python:
    """One interpreter as it describes itself."""

    executable: Path
    version: tuple[int, int, int]
    stdlib: Path
    base_prefix: Path

    @property
    def externally_managed(self) -> bool:
        """PEP 668: its stdlib folder holds an ``EXTERNALLY-MANAGED`` file."""
        return (self.stdlib / "EXTERNALLY-MANAGED").is_file()

    @property
    def label(self) -> str:
        return f"{self.executable} ({'.'.join(map(str, self.version))})"


@functools.cache
def describe(command: str) -> Python | None:
    """What ``command`` (a path or a name on PATH) runs, or None where it
    does not start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    try:
        proc = subprocess.run(
            [command, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, env=env
        )
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    return Python(
        executable=Path(os.path.realpath(data["executable"])),
        version=tuple(data["version"]),  # type: ignore[arg-type]
        stdlib=Path(data["stdlib"]),
        base_prefix=Path(data["base_prefix"]),
    )


def path_outside_venvs() -> str:
    """PATH less the ``bin`` folders of virtual environments (nox's, CI's
    ``.venv``): what a person's shell finds before any venv is active."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return os.pathsep.join(d for d in keep if not (Path(d).parent / "pyvenv.cfg").is_file())


def on_path(name: str) -> Python | None:
    """``name`` as PATH outside virtual environments finds it."""
    import shutil

    found = shutil.which(name, path=path_outside_venvs())
    return describe(found) if found else None


def pyenv_versions(minor: int) -> list[Path]:
    """pyenv's installed ``3.<minor>.*`` interpreters, newest last."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = (root / "versions").glob(f"3.{minor}.*/bin/python3.{minor}")
    return sorted(found, key=lambda p: tuple(int(x) for x in p.parent.parent.name.split(".")))


def find_minor(minor: int) -> Python | None:
    """A Python 3.<minor> on this machine, or None where there is none."""
    candidates = [
        f"python3.{minor}",
        f"/usr/bin/python3.{minor}",
        *map(str, reversed(pyenv_versions(minor))),
    ]
    for cand in candidates:
        py = on_path(cand) if "/" not in cand else (describe(cand) if Path(cand).exists() else None)
        if py and py.version[:2] == (3, minor):
            return py
    return None
