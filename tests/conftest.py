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


# tests/semantics runs inside a venv holding a vLLM wheel, driven by
# tests/integration/test_semantics.py, which sets VPQ_SEMANTICS=1.
collect_ignore = [] if os.environ.get("VPQ_SEMANTICS") == "1" else ["semantics"]
