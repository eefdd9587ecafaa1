"""Drive tests/semantics inside the wheel venvs: all must pass on the patched
wheel, and every one must fail on unpatched upstream vLLM 0.17.1."""

from __future__ import annotations

import tarfile
import tomllib
from pathlib import Path

import pytest
from vpq import fetch

from tests.conftest import REPO_ROOT
from tests.integration.conftest import run_in_venv

REF = "vllm/model_executor/models/deepseek_v2.py"
REF_EAGLE3 = "vllm/model_executor/models/deepseek_eagle3.py"


def _extract(key: str, path: str, dest: Path) -> Path:
    """``path`` from the sdist pinned under ``key`` in tests/reference-upstreams.toml."""
    ref = tomllib.loads((REPO_ROOT / "tests/reference-upstreams.toml").read_text())[key]
    sdist = fetch.fetch("vllm", ref["filename"], ref["sha256"])
    with tarfile.open(sdist) as tar:
        member = tar.extractfile(f"vllm-{ref['version']}/{path}")
        assert member is not None
        dest.write_bytes(member.read())
    return dest


@pytest.fixture(scope="module")
def upstream_0_18_1_deepseek(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract("vllm-0_18_1", REF, tmp_path_factory.mktemp("ref") / "deepseek_v2.py")


@pytest.fixture(scope="module")
def upstream_0_23_0_deepseek_eagle3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract(
        "vllm-0_23_0", REF_EAGLE3, tmp_path_factory.mktemp("ref") / "deepseek_eagle3.py"
    )


def run_semantics(python: Path, ref: Path, tmp_path: Path, ref_eagle3: Path) -> dict[str, str]:
    """Run tests/semantics with ``python``; return test id -> outcome."""
    env = {
        "VPQ_SEMANTICS": "1",
        "VPQ_UPSTREAM_DEEPSEEK_V2": str(ref),
        "VPQ_UPSTREAM_DEEPSEEK_EAGLE3": str(ref_eagle3),
    }
    return run_in_venv(python, "semantics", env, tmp_path)


def test_semantic_tests_pass_on_the_patched_wheel(
    patched_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3, tmp_path
) -> None:
    outcomes = run_semantics(
        patched_python, upstream_0_18_1_deepseek, tmp_path, upstream_0_23_0_deepseek_eagle3
    )
    assert len(outcomes) >= 30
    assert {k: v for k, v in outcomes.items() if v != "passed"} == {}


def test_every_semantic_test_fails_on_unpatched_upstream(
    upstream_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3, tmp_path
) -> None:
    outcomes = run_semantics(
        upstream_python, upstream_0_18_1_deepseek, tmp_path, upstream_0_23_0_deepseek_eagle3
    )
    assert len(outcomes) >= 30
    assert {k: v for k, v in outcomes.items() if v != "failed"} == {}
