"""README's two commands work as written, on a Python marked externally
managed (PEP 668), and they are the commands CI runs.

The externally managed Python is made in the test: a copy of this Python's
interpreter binary in a folder whose ``lib/pythonX.Y`` links every entry of
the real standard library, plus an ``EXTERNALLY-MANAGED`` file. Python finds
its prefix from the binary's folder, so ``sysconfig.get_path("stdlib")`` is
that folder and pip refuses to install there, as on Debian's and Ubuntu's
system Python. (A venv cannot stand in: pip never treats a venv as
externally managed, and a venv's stdlib is its base Python's.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SECTION = "## The two commands"


def readme_commands(readme: str) -> list[str]:
    """The command lines of README's first ``bash`` block under "The two
    commands", without their trailing comments."""
    section = readme.split(SECTION, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "README's two-commands section has no bash block"
    return [ln.split("  #", 1)[0].strip() for ln in block.group(1).splitlines() if ln.strip()]


def split_nox(line: str) -> tuple[str, list[str]]:
    """(the bootstrap before the nox call, the nox call's arguments)."""
    boot, _, call = line.rpartition(" && ")
    assert call.startswith(".venv/bin/nox "), call
    return boot, call.split()[1:]


def test_readme_has_the_build_and_the_test_command() -> None:
    lines = readme_commands((REPO_ROOT / "README.md").read_text())
    assert [split_nox(ln)[1] for ln in lines] == [["-s", "build_wheel"], ["-s", "tests"]]
    boots = {split_nox(ln)[0] for ln in lines}
    assert boots == {"python3 -m venv .venv && .venv/bin/pip install -q nox"}


def test_ci_runs_readmes_test_command_as_written() -> None:
    tests_line = readme_commands((REPO_ROOT / "README.md").read_text())[1]
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert tests_line in ci
    assert not any(ln.startswith("python3 -m pip install") for ln in ci)


def test_dot_venv_is_git_ignored() -> None:
    assert "/.venv/" in (REPO_ROOT / ".gitignore").read_text().splitlines()


def externally_managed_python(dest: Path) -> Path:
    """A Python at ``dest/bin/python3`` whose stdlib folder is marked
    externally managed; see the module docstring."""
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    binary = Path(sys.base_prefix) / "bin" / ver
    real_lib = Path(sysconfig.get_paths(vars={"installed_base": sys.base_prefix})["stdlib"])
    if not binary.is_file() or not (real_lib / "os.py").is_file():
        pytest.skip(f"no {binary} with its stdlib at {real_lib} to copy")
    lib = dest / "lib" / ver
    lib.mkdir(parents=True)
    (dest / "bin").mkdir()
    shutil.copy2(binary, dest / "bin" / "python3")
    for entry in real_lib.iterdir():
        if entry.name != "EXTERNALLY-MANAGED":
            (lib / entry.name).symlink_to(entry)
    (lib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=marked by the test\n")
    return dest / "bin" / "python3"


def _sh(line: str, cwd: Path, path_head: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{path_head}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PIP_BREAK_SYSTEM_PACKAGES", None)
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_readme_commands_work_on_an_externally_managed_python(tmp_path: Path) -> None:
    """The old form (``python3 -m pip install nox``) is refused there; README's
    form makes ``.venv``, installs nox in it and runs the noxfile (``--list``
    in place of the session, to keep it cheap), twice, as a person would."""
    python = externally_managed_python(tmp_path / "py")
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = _sh("python3 -c 'import sysconfig; print(sysconfig.get_path(\"stdlib\"))'",
                 tmp_path, python.parent)  # fmt: skip
    assert stdlib.stdout.strip() == str(tmp_path / "py" / "lib" / ver), stdlib.stderr
    old = _sh("python3 -m pip install -q nox", tmp_path, python.parent)
    assert old.returncode != 0 and "externally-managed-environment" in old.stderr, old.stderr
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("noxfile.py", "pyproject.toml"):
        shutil.copy2(REPO_ROOT / name, checkout / name)
    (checkout / "scripts").symlink_to(REPO_ROOT / "scripts")
    for line in readme_commands((REPO_ROOT / "README.md").read_text()):
        boot, _ = split_nox(line)
        proc = _sh(f"{boot} && .venv/bin/nox --list", checkout, python.parent)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "* build_wheel" in proc.stdout and "- tests" in proc.stdout
    cfg = (checkout / ".venv" / "pyvenv.cfg").read_text()
    assert f"home = {python.parent}" in cfg.splitlines()
