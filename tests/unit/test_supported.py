"""The supported Pythons are stated once (``vpq.core.supported.MINIMUM``), agree
with pyproject.toml, README and docs/build.md, and README's first command
refuses an older Python in one sentence before it does any work."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from vpq.core import supported

from tests.support.paths import REPO_ROOT
from tests.support.pythons import find_minor
from tests.unit.readme import readme_commands

#: What an unsupported Python parses before the check refuses it: the
#: noxfile (whole, it is compiled before it runs) and the modules it imports first.
FIRST_MODULES = ("__init__", "core/__init__", "core/errors", "core/supported")
CHECKED_FIRST = ["noxfile.py", *(f"scripts/vpq/{m}.py" for m in FIRST_MODULES)]


def test_the_minimum_is_pyproject_s_requires_python_and_readme_s() -> None:
    least = ".".join(map(str, supported.MINIMUM))
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={least}"
    section = (REPO_ROOT / "README.md").read_text().split("## The two commands", 1)[1]
    assert f"Python {least} or newer" in section.split("```bash", 1)[0]
    build = (REPO_ROOT / "docs" / "build.md").read_text()
    assert f"Supported: CPython {least} or newer" in build


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 8, 0), (2, 7, 18)])
def test_an_older_python_is_refused_in_one_sentence_naming_the_minimum(
    version: tuple[int, int, int],
) -> None:
    message = supported.refusal(version, "/x/.venv/bin/python3")
    assert message is not None and "\n" not in message
    assert message.startswith("This tool needs Python 3.11 or newer and /x/.venv/bin/python3 is ")
    assert f"Python {'.'.join(map(str, version))}:" in message
    assert message.count(". ") == 0 and message.endswith(".")


@pytest.mark.parametrize("version", [(3, 11, 0), (3, 11, 2), (3, 11, 7), (3, 12, 1), (3, 13, 0)])
def test_3_11_and_newer_are_supported_at_any_patch_level(version: tuple[int, int, int]) -> None:
    assert supported.refusal(version) is None


@pytest.mark.parametrize("path", CHECKED_FIRST)
def test_what_runs_before_the_check_parses_as_python_3_8(path: str) -> None:
    """nox itself needs 3.8: an older Python never gets as far as the noxfile."""
    ast.parse((REPO_ROOT / path).read_text(), feature_version=(3, 8))


def _older_python() -> Path | None:
    for minor in range(supported.MINIMUM[1] - 1, 7, -1):
        found = find_minor(minor)
        if found:
            return found.executable
    return None


def test_readmes_first_command_refuses_an_older_python_before_any_work(tmp_path: Path) -> None:
    """README's build command, as written, with a Python 3.10 (or older) as
    ``python3``: the bootstrap makes .venv and installs nox, then the noxfile
    refuses in one sentence; no session venv (.nox), no download."""
    older = _older_python()
    if older is None:
        pytest.skip("no Python 3.8 to 3.10 on this machine (PATH, /usr/bin, pyenv)")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(older)
    checkout, cache = tmp_path / "checkout", tmp_path / "cache"
    checkout.mkdir()
    cache.mkdir()
    for name in ("noxfile.py", "pyproject.toml"):
        shutil.copy2(REPO_ROOT / name, checkout / name)
    (checkout / "scripts").symlink_to(REPO_ROOT / "scripts")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}", VPQ_CACHE_DIR=str(cache))
    build_line = readme_commands((REPO_ROOT / "README.md").read_text())[0]
    proc = subprocess.run(
        ["bash", "-c", build_line], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"This tool needs Python 3\.11 or newer and {re.escape(str(checkout))}/\.venv/bin/"
        r"python3? is Python 3\.\d+\.\d+: remove \.venv and run the command again with "
        r"Python 3\.11 or newer as python3\.",
        last,
    ), proc.stderr
    assert not (checkout / ".nox").exists() and not any(cache.iterdir())
    assert "Traceback" not in proc.stderr
