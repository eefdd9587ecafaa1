"""Shared fixtures. Unit tests build small git fixtures inside the test;
integration tests (tests/integration) use the real pinned upstream."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def sh(args: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a command, failing the test with its output if it fails."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--outside-ci",
        action="store_true",
        help="run the outside_ci cases whole (nox -s outside_ci); CI skips or narrows them",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``outside_ci`` cases unless ``--outside-ci``; one marked
    ``outside_ci(narrowed=True)`` runs either way and narrows itself."""
    if config.getoption("--outside-ci"):
        return
    for item in items:
        mark = item.get_closest_marker("outside_ci")
        if mark and not mark.kwargs.get("narrowed"):
            item.add_marker(pytest.mark.skip(reason="outside CI: --outside-ci (nox -s outside_ci)"))


# tests/semantics and tests/parsers run inside a venv holding a vLLM wheel,
# driven by tests/integration/test_semantics.py and test_parsers.py, which set
# VPQ_SEMANTICS=1 or VPQ_PARSERS=1.
collect_ignore = [
    d
    for d, var in (("semantics", "VPQ_SEMANTICS"), ("parsers", "VPQ_PARSERS"))
    if os.environ.get(var) != "1"
]
