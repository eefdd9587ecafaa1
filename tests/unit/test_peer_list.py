"""peer-tests.toml and peer-expected.toml: the reviewed choice of upstream's
tests per changed file, held to the series by lint (a new patch's file shows
up as "no peer tests chosen"), and the candidates derived from upstream's
tests. Each rule has a test that breaks exactly that rule."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import tomli_w
from vpq import cli
from vpq.checks import peer_env, peer_list

from tests.support.paths import REPO_ROOT
from tests.unit.tiny_upstream import Upstream

PATCH = "mod/change-f10.patch"
CHOSEN = {"vllm/mod.py": {"tests": ["tests/test_mod.py"]}}


def _write(
    root: Path, peers: dict[str, object], expected: list[dict[str, str]] | None = None
) -> None:
    (root / peer_list.PEER_FILE).write_bytes(tomli_w.dumps(peers).encode())
    if expected is not None:
        data = tomli_w.dumps({"expected": expected}).encode()
        (root / peer_list.EXPECTED_FILE).write_bytes(data)


def test_a_chosen_list_matching_the_series_lints_clean(one_patch: Upstream) -> None:
    _write(one_patch.root, {**CHOSEN, "ci": {"tests": ["tests/test_mod.py::test_f10"]}})
    assert peer_list.lint(one_patch.root) == []
    assert cli.main(["--root", str(one_patch.root), "lint"]) == 0


def test_a_changed_file_without_a_table_shows_no_peer_tests_chosen(one_patch: Upstream) -> None:
    _write(one_patch.root, {})
    (problem,) = peer_list.lint(one_patch.root)
    assert "vllm/mod.py: no peer tests chosen" in problem


def test_a_table_for_a_file_the_series_does_not_change_is_stale(one_patch: Upstream) -> None:
    _write(one_patch.root, {**CHOSEN, "vllm/other.py": {"tests": ["tests/test_other.py"]}})
    (problem,) = peer_list.lint(one_patch.root)
    assert '["vllm/other.py"]: the series does not change this file' in problem


def test_choosing_no_tests_needs_a_why(one_patch: Upstream) -> None:
    _write(one_patch.root, {"vllm/mod.py": {"tests": []}})
    assert peer_list.lint(one_patch.root) == [
        f'{one_patch.root / peer_list.PEER_FILE}: ["vllm/mod.py"]: tests = [] needs a why'
    ]
    _write(one_patch.root, {"vllm/mod.py": {"tests": [], "why": "upstream has none"}})
    assert peer_list.lint(one_patch.root) == []


def test_a_ci_selector_outside_the_chosen_files_is_refused(one_patch: Upstream) -> None:
    _write(one_patch.root, {**CHOSEN, "ci": {"tests": ["tests/test_other.py"]}})
    (problem,) = peer_list.lint(one_patch.root)
    assert "[ci]: 'tests/test_other.py' is in no chosen test file" in problem


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"test": "tests/test_mod.py::t", "patch": "x.patch", "why": "w"}, "not in series"),
        ({"test": "tests/test_x.py::t", "patch": PATCH, "why": "w"}, "not in a chosen"),
        ({"test": "tests/test_mod.py::t", "patch": PATCH, "why": " "}, "needs a why"),
        ({"test": "tests/test_mod.py::t", "patch": PATCH}, "needs test, patch and why"),
    ],
)
def test_an_expected_regression_is_held_to_the_series(
    one_patch: Upstream, entry: dict[str, str], message: str
) -> None:
    _write(one_patch.root, CHOSEN, [entry])
    (problem,) = peer_list.lint(one_patch.root)
    assert message in problem


def test_candidates_are_the_tests_that_import_the_module_or_are_named_after_it(
    tmp_path: Path,
) -> None:
    tests = tmp_path / "tests"
    (tests / "v1").mkdir(parents=True)
    (tests / "v1" / "test_a.py").write_text("from vllm.v1.sample.rejection_sampler import X\n")
    (tests / "v1" / "test_b.py").write_text("from vllm.v1.sample import rejection_sampler\n")
    (tests / "v1" / "test_rejection_sampler_more.py").write_text("pass\n")
    (tests / "v1" / "test_c.py").write_text("from vllm.v1.sample.sampler import Sampler\n")
    found = peer_list.candidates(tests, "vllm/v1/sample/rejection_sampler.py")
    assert found == [
        "tests/v1/test_a.py",
        "tests/v1/test_b.py",
        "tests/v1/test_rejection_sampler_more.py",
    ]


def test_the_repository_s_lists_hold_to_its_series() -> None:
    assert peer_list.lint(REPO_ROOT) == []


def _sdist(tmp: Path, files: dict[str, str]) -> Path:
    path = tmp / "vllm-9.9.9.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_test_tools_are_pinned_by_the_release_s_own_test_requirements(tmp_path: Path) -> None:
    pins = "\n".join(f"{t}==1.{i}" for i, t in enumerate(peer_env.TOOL_NAMES))
    cont = pins.replace("pytest==1.0", "pytest==1.0 \\")  # a continued line
    compiled = f"# via pip-compile\n{cont}\n    # via x\n"
    later = _sdist(tmp_path, {"requirements/test/cpu.txt": compiled, "requirements/x.txt": ""})
    assert peer_env.tools_of(later)[0] == "pytest==1.0"
    assert peer_env.tools_of(later)[-1] == "tblib==1.5"
    (tmp_path / "old").mkdir()
    old = _sdist(tmp_path / "old", {"requirements/test.txt": "pytest==8.3.5\n"})
    with pytest.raises(peer_env.PeerEnvError, match="requirements/test.txt pins no pluggy"):
        peer_env.tools_of(old)
    (tmp_path / "none").mkdir()
    with pytest.raises(peer_env.PeerEnvError, match="has no test requirements"):
        peer_env.tools_of(_sdist(tmp_path / "none", {"setup.py": ""}))


def test_the_hub_stand_ins_are_cached_as_the_hub_lays_out_a_snapshot(tmp_path: Path) -> None:
    home = peer_env.hub_home(tmp_path / "hf-home")
    assert home.is_absolute()
    for repo in peer_env.STANDINS:
        cache = home / "hub" / f"models--{repo.replace('/', '--')}"
        assert (cache / "refs" / "main").read_text() == peer_env.STANDIN_REVISION
        snapshot = cache / "snapshots" / peer_env.STANDIN_REVISION
        assert (snapshot / "tokenizer.json").is_file(), repo
    opt = home / "hub" / "models--facebook--opt-125m" / "snapshots" / peer_env.STANDIN_REVISION
    assert json.loads((opt / "config.json").read_text()) == peer_env.OPT_125M_CONFIG
    assert set(peer_env.HUB_STANDINS) == set(peer_env.STANDINS)
