"""The pinned wheels and their venvs, as session fixtures: a pytest plugin
(``pytest_plugins`` in ``tests/conftest.py``), so tests/integration and
tests/engine share one build and one venv per session without importing each
other's conftest.

The first run downloads about 850 MB into the cache and makes the CPU deps
venv (a few minutes); later runs reuse both. ``vpq`` is imported inside the
fixtures: tests/semantics and tests/parsers load this plugin too, inside a
wheel's venv, where ``scripts/`` need not be on ``sys.path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.paths import REPO_ROOT

if TYPE_CHECKING:
    from vpq.source import lock
    from vpq.wheels import build


@pytest.fixture(scope="session")
def pin() -> lock.Lock:
    """The upstream pin, ``upstream.lock``."""
    from vpq.source import lock

    return lock.load(REPO_ROOT)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, build.Result]:
    """Both platforms' wheels, built and audited from the real pin."""
    from vpq.wheels import build

    out = tmp_path_factory.mktemp("dist")
    return {r.platform: r for r in build.build_wheels(REPO_ROOT, platform="all", out_dir=out)}


@pytest.fixture(scope="session")
def deps_venv(pin: lock.Lock, built: dict[str, build.Result]) -> Path:
    """The CPU deps venv of the pinned release's ``requirements/common.txt``."""
    from vpq.envs import venv as envs
    from vpq.source import git as g
    from vpq.wheels import build

    common = g.git(
        ["show", f"upstream/{pin.version}:requirements/common.txt"], REPO_ROOT / build.WORK_DIR
    ).stdout
    return envs.deps_env(common)


@pytest.fixture(scope="session")
def patched_python(tmp_path_factory, deps_venv, built) -> Path:
    """A fresh venv with the patched x86_64 wheel installed."""
    from vpq.envs import venv as envs

    return envs.wheel_env(
        tmp_path_factory.mktemp("venv") / "patched", deps_venv, built["x86_64"].wheel.path
    )
