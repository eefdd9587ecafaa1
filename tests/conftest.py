"""The hooks and fixtures of every tier: the tier markers and their order,
``--outside-ci``, and the wheel fixtures (``tests/support/wheel_fixtures.py``)
the integration and engine tiers share. Unit tests build small git fixtures
inside the test; integration tests (tests/integration) use the real pinned
upstream. Shared helpers are modules of ``tests/support``, never this file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

#: The pinned wheels and their venvs, for tests/integration and tests/engine.
pytest_plugins = ["tests.support.wheel_fixtures"]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--outside-ci",
        action="store_true",
        help="run the outside_ci cases whole (nox -s outside_ci); CI skips or narrows them",
    )


#: The test tiers, one folder of tests/ each, fastest first: the order they
#: run in, and each one's marker (``pytest -m unit``).
TIERS = ("unit", "semantics", "parsers", "integration", "gpu", "engine")


def tier(item: pytest.Item) -> str | None:
    """The tier ``item`` belongs to: the folder of tests/ it is in."""
    try:
        parts = item.path.relative_to(REPO_ROOT / "tests").parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier and run the tiers fastest first (pytest
    collects tests/ alphabetically: engine first, unit last); within a tier
    the order stays. Skip the ``outside_ci`` cases unless ``--outside-ci``;
    one marked ``outside_ci(narrowed=True)`` runs either way and narrows
    itself."""
    rank = {}
    for item in items:
        name = tier(item)
        if name is not None:
            item.add_marker(name)
        rank[item.nodeid] = TIERS.index(name) if name is not None else len(TIERS)
    items.sort(key=lambda item: rank[item.nodeid])
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
