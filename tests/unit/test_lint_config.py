"""nox -s lint and the pre-commit hooks run the same linters at the same
versions: pyproject.toml's ``lint`` dependency group is where they are
pinned, and .pre-commit-config.yaml repeats the pins."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from tests.support.paths import REPO_ROOT


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _hook_requirements() -> set[str]:
    """Every quoted requirement in .pre-commit-config.yaml's hooks."""
    text = (REPO_ROOT / ".pre-commit-config.yaml").read_text()
    return set(
        re.findall(r'"([A-Za-z0-9_.\-]+(?:\[[A-Za-z0-9_,\-]+\])?(?:[=<>!~]=?[^"]*)?)"', text)
    )


def test_the_linters_are_pinned_exactly_in_the_lint_group() -> None:
    group = _pyproject()["dependency-groups"]["lint"]
    pins = {r.split("==")[0]: r for r in group if "==" in r}
    assert {"ruff", "mypy"} <= set(pins), group


def test_pre_commit_hooks_pin_what_the_lint_group_pins() -> None:
    group = set(_pyproject()["dependency-groups"]["lint"])
    hooks = _hook_requirements()
    assert group <= hooks, group - hooks
    hook_pins = {r for r in hooks if "==" in r}
    assert hook_pins <= group, hook_pins - group


def test_the_mypy_hook_sees_the_tools_dependencies() -> None:
    project = _pyproject()["project"]
    deps = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    unmarked = {d for d in deps if ";" not in d}
    assert unmarked <= _hook_requirements(), unmarked - _hook_requirements()
