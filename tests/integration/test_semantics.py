"""Drive tests/semantics inside the wheel venvs: all must pass on the patched
wheel, and every one must fail on unpatched upstream vLLM 0.17.1, and fail
there on its own check: an ``AssertionError`` (or pytest's ``Failed``), or
the exception a ``fails_unpatched_with`` marker on the test declares with a
one-line reason. Those declared import or attribute errors (the test reaches
for an interface the series adds, so the failure shows only the dependency)
are counted apart and listed in the run's output.

Outcomes and failure kinds come from ``vpq.envs.probe_report`` (the plugin the
absorption probes use) run inside the venv."""

from __future__ import annotations

import tarfile
import tomllib
from pathlib import Path

import pytest
from vpq.envs import probe_run
from vpq.source import fetch

from tests.support.paths import REPO_ROOT

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


def run_semantics(python: Path, ref: Path, ref_eagle3: Path) -> probe_run.Report:
    """Run tests/semantics with ``python``; return its outcomes and failures."""
    env = {
        "VPQ_UPSTREAM_DEEPSEEK_V2": str(ref),
        "VPQ_UPSTREAM_DEEPSEEK_EAGLE3": str(ref_eagle3),
    }
    return probe_run.run_report(python, REPO_ROOT, ["tests/semantics"], None, env)


@pytest.fixture(scope="module")
def patched_report(
    patched_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3
) -> probe_run.Report:
    return run_semantics(patched_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3)


def test_semantic_tests_pass_on_the_patched_wheel(patched_report) -> None:
    outcomes = patched_report.outcomes
    assert sum("::" in n for n in outcomes) >= 100, "tests/semantics collected too little"
    assert {k: v for k, v in outcomes.items() if v != "passed"} == {}


def summary(failures: dict[str, dict[str, str]]) -> str:
    """The upstream failures by kind, the declared ones with their reasons."""
    kinds = [f["kind"] for f in failures.values()]
    lines = [", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))]
    for node, f in sorted(failures.items()):
        if f["kind"] != "assertion":
            lines.append(f"  {f['kind']:15} {node}: {f['exception'][:90]} ({f.get('reason')})")
    return "\n".join(lines)


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_every_semantic_test_fails_on_unpatched_upstream_on_its_own_check(
    patched_report, upstream_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3
) -> None:
    """Every item the patched wheel runs fails on 0.17.1 (the floor is the
    whole suite), each on an assertion or on the error its marker declares."""
    report = run_semantics(
        upstream_python, upstream_0_18_1_deepseek, upstream_0_23_0_deepseek_eagle3
    )
    print(summary(report.failures))
    assert set(report.outcomes) == set(patched_report.outcomes), "the same items, every one"
    assert {k: v for k, v in report.outcomes.items() if v not in ("failed", "error")} == {}
    undeclared = {
        n: f["exception"] for n, f in report.failures.items() if f["kind"] == "undeclared"
    }
    assert undeclared == {}, "fails on neither its assertion nor a declared error"
    assert set(report.failures) == set(report.outcomes)
