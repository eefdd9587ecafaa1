"""Integration fixtures: the real pinned upstream (sdist + release wheels).

The wheels, the deps venv and the patched wheel's venv (``pin``, ``built``,
``deps_venv``, ``patched_python``) come from ``tests/support/wheel_fixtures.py``,
shared with tests/engine; the helpers the tests call are in ``venv_runs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checkpoints import fixture
from vpq.contract import table as contract_table
from vpq.envs import contract_run
from vpq.envs import venv as envs
from vpq.source import fetch, lock
from vpq.wheels import build

from tests.integration.venv_runs import discover_at, run_probe
from tests.support.paths import REPO_ROOT


@pytest.fixture(scope="session")
def upstream_wheel(pin: lock.Lock) -> Path:
    w = pin.wheel("x86_64")
    return fetch.fetch(pin.name, w.filename, w.sha256)


@pytest.fixture(scope="session")
def tiny_configs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("configs")
    return (
        fixture.write_tiny_kimi_k25(base / "kimi-k25-tiny"),
        fixture.write_tiny_eagle3_drafter(base / "eagle3-tiny"),
    )


@pytest.fixture(scope="session")
def upstream_python(tmp_path_factory, deps_venv, upstream_wheel) -> Path:
    """A fresh venv with the unpatched upstream wheel installed."""
    return envs.wheel_env(tmp_path_factory.mktemp("venv") / "upstream", deps_venv, upstream_wheel)


@pytest.fixture(scope="session")
def patched_probe(patched_python, tiny_configs) -> dict[str, object]:
    return run_probe(patched_python, tiny_configs)


@pytest.fixture(scope="session")
def upstream_probe(upstream_python, tiny_configs) -> dict[str, object]:
    return run_probe(upstream_python, tiny_configs)


@pytest.fixture(scope="session")
def patched_table(patched_python) -> contract_table.Table:
    """The contract table of the patched wheel."""
    build.prepare(REPO_ROOT)
    return contract_run.check(patched_python, discover_at("patched"))


@pytest.fixture(scope="session")
def upstream_table(upstream_python, pin) -> contract_table.Table:
    """The contract table of unpatched upstream 0.17.1."""
    build.prepare(REPO_ROOT)
    return contract_run.check(upstream_python, discover_at(f"upstream/{pin.version}"))
