"""backport-tests.toml: a Backport patch's source tests, held to the series
(the patch is a Backport of that release, the release's sdist is pinned),
and the one adaptation allowed, imports of modules that merely moved."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w
from vpq.checks import peer_backports

from tests.support.paths import REPO_ROOT
from tests.unit.tiny_upstream import Upstream

PATCH = "mod/change-f10.patch"
PINS = {"1.1": "0" * 64, "1.2": "1" * 64}


def _write(root: Path, tables: dict[str, object]) -> None:
    data = tomli_w.dumps({"releases": PINS, **tables}).encode()
    (root / peer_backports.BACKPORTS_FILE).write_bytes(data)


def _backport(root: Path, release: str) -> None:
    path = root / "patches" / PATCH
    text = path.read_text()
    status = next(ln for ln in text.splitlines() if ln.startswith("Upstream-Status:"))
    path.write_text(text.replace(status, f"Upstream-Status: Backport [v{release}]"))


def test_a_backport_s_tests_of_its_release_lint_clean(one_patch: Upstream) -> None:
    _backport(one_patch.root, "1.1")
    _write(one_patch.root, {PATCH: {"release": "1.1", "tests": ["tests/test_mod.py::t"]}})
    assert peer_backports.lint(one_patch.root) == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"release": "1.2", "tests": ["tests/t.py"]}, "is not the patch's"),
        ({"release": "1.1", "tests": []}, "tests = [] needs a why"),
    ],
)
def test_a_table_that_does_not_match_its_patch_is_refused(
    one_patch: Upstream, table: dict[str, object], message: str
) -> None:
    _backport(one_patch.root, "1.1")
    _write(one_patch.root, {PATCH: table})
    (problem,) = peer_backports.lint(one_patch.root)
    assert message in problem


def test_a_patch_outside_the_series_is_refused(one_patch: Upstream) -> None:
    _write(one_patch.root, {"x.patch": {"release": "1.1", "tests": ["tests/t.py"]}})
    (problem,) = peer_backports.lint(one_patch.root)
    assert "not a patch in series" in problem


def test_only_the_moved_modules_imports_are_rewritten_and_each_is_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_x.py"
    test.write_text(
        "from vllm.new.place import A\nimport vllm.new.place\nfrom vllm.other import B\n"
    )
    entry = peer_backports.BackportTests(
        PATCH, "1.1", ("tests/test_x.py::t",), {"vllm.new.place": "vllm.old.place"}, ""
    )
    assert peer_backports.adapt(tmp_path, entry) == [
        "tests/test_x.py: vllm.new.place -> vllm.old.place (2 imports)"
    ]
    assert test.read_text() == (
        "from vllm.old.place import A\nimport vllm.old.place\nfrom vllm.other import B\n"
    )


def test_the_repository_s_backport_tests_hold_to_its_series() -> None:
    assert peer_backports.lint(REPO_ROOT) == []
