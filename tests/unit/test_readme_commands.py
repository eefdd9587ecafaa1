"""README's two commands work as written, on a Python marked externally
managed (PEP 668), they are the commands CI runs, and every page of the
manual bootstraps nox the same way.

They run under each Python a user of this machine's kind has as
``python3``: the distribution's own ``/usr/bin/python3`` (Debian 12's
3.11.2, marked externally managed by Debian) and the ``python3`` first on
PATH outside any venv (here pyenv's 3.11.7, the one CI's ``.ci/run`` takes).
A case is skipped only where its interpreter is not on the machine, and the
two are one case where they are the same binary.

A Python that is marked is used as it is (the old form's refusal is asked
with ``--dry-run``, so nothing is installed even where a configuration lets
pip through). One that is not is copied into a marked one: its interpreter
binary in a folder whose ``lib/pythonX.Y`` links every entry of its real
standard library, plus an ``EXTERNALLY-MANAGED`` file. Python finds its
prefix from the binary's folder, so ``sysconfig.get_path("stdlib")`` is that
folder and pip refuses to install there, as on Debian's and Ubuntu's system
Python. (A venv cannot stand in: pip never treats a venv as externally
managed, and a venv's stdlib is its base Python's. The copy cannot stand in
for Debian's Python either: Debian keeps pip outside the stdlib, in
``/usr/lib/python3/dist-packages``, which the copy's prefix does not reach;
that was the "No module named pip" this test once failed with there.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.pythons import Python, describe, on_path
from tests.unit.readme import readme_commands

#: The distribution's own Python (Debian's, Ubuntu's).
STOCK = "/usr/bin/python3"


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


def test_every_page_bootstraps_nox_as_the_two_commands_do() -> None:
    """Wherever README or a docs page makes the venv for nox (the quick start,
    the GPU host), it is the two commands' bootstrap, as written."""
    boot = split_nox(readme_commands((REPO_ROOT / "README.md").read_text())[0])[0]
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    found = 0
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL):
            for line in block.splitlines():
                if line.startswith("python3 -m venv"):
                    found += 1
                    assert line.split("  #", 1)[0].strip().startswith(boot), (page.name, line)
    assert found >= 4  # the two commands, the maintainers' quick start, gpu-tests.md


def test_dot_venv_is_git_ignored() -> None:
    assert "/.venv/" in (REPO_ROOT / ".gitignore").read_text().splitlines()


def readme_pythons() -> list[object]:
    """One case per distinct ``python3``: Debian's ``/usr/bin/python3``, and
    the one on PATH outside venvs where it is another binary."""
    stock = describe(STOCK) if Path(STOCK).exists() else None
    path = on_path("python3")
    cases: list[object] = [
        pytest.param(stock, id="stock-usr-bin-python3")
        if stock
        else pytest.param(None, id="stock-usr-bin-python3", marks=pytest.mark.skip(
            reason=f"no {STOCK} on this machine (not a Debian/Ubuntu-style system)"))
    ]  # fmt: skip
    if path is None:
        cases.append(pytest.param(None, id="python3-on-path", marks=pytest.mark.skip(
            reason="no python3 on PATH outside venvs")))  # fmt: skip
    elif stock is None or path.executable != stock.executable:
        cases.append(pytest.param(path, id="python3-on-path"))
    return cases


def externally_managed_python(python: Python, dest: Path) -> Path:
    """``python`` itself where it is marked externally managed, else a copy
    at ``dest/bin/python3`` whose stdlib folder is; see the module docstring."""
    if python.externally_managed:
        return python.executable
    ver = f"python{python.version[0]}.{python.version[1]}"
    if not (python.stdlib / "os.py").is_file():
        raise AssertionError(f"{python.label}: no standard library at {python.stdlib} to copy")
    lib = dest / "lib" / ver
    lib.mkdir(parents=True)
    (dest / "bin").mkdir()
    shutil.copy2(python.executable, dest / "bin" / "python3")
    for entry in python.stdlib.iterdir():
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


@pytest.mark.parametrize("python", readme_pythons())
def test_readme_commands_work_on_an_externally_managed_python(
    python: Python, tmp_path: Path
) -> None:
    """The old form (``python3 -m pip install nox``) is refused there; README's
    form makes ``.venv``, installs nox in it and runs the noxfile (``--list``
    in place of the session, to keep it cheap), twice, as a person would."""
    binary = externally_managed_python(python, tmp_path / "py")
    head = binary.parent
    which = _sh("python3 -c 'import sys, sysconfig; print(sys.version_info[:3]); "
                "print(sysconfig.get_path(\"stdlib\"))'", tmp_path, head)  # fmt: skip
    copied = head.parent / "lib" / python.stdlib.name
    stdlib = python.stdlib if binary == python.executable else copied
    assert which.stdout.split("\n")[:2] == [str(python.version), str(stdlib)], which.stderr
    old = _sh("python3 -m pip install -q --dry-run nox", tmp_path, head)
    assert old.returncode != 0 and "externally-managed-environment" in old.stderr, old.stderr
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("noxfile.py", "pyproject.toml"):
        shutil.copy2(REPO_ROOT / name, checkout / name)
    (checkout / "scripts").symlink_to(REPO_ROOT / "scripts")
    for line in readme_commands((REPO_ROOT / "README.md").read_text()):
        boot, _ = split_nox(line)
        proc = _sh(f"{boot} && .venv/bin/nox --list", checkout, head)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "* build_wheel" in proc.stdout and "- tests" in proc.stdout
    cfg = (checkout / ".venv" / "pyvenv.cfg").read_text()
    assert f"home = {head}" in cfg.splitlines()
