"""The probe plugin's record of how each test failed (``vpq.envs.probe_report``):
what the negative controls and the mutation check count."""

from __future__ import annotations

import sys
from pathlib import Path

from vpq.envs import probe_run

SUITE = """
import pytest

unknown = pytest.mark.fails_unpatched_with


def test_passes():
    assert True


def test_fails_on_its_assertion():
    assert 1 == 2


def test_fails_on_pytest_raises():
    with pytest.raises(ValueError):
        pass


def test_undeclared_attribute_error():
    object().missing


@unknown(raises="AttributeError", match="missing", reason="the API is the series'")
def test_declared_attribute_error_is_a_dependency():
    object().missing


@unknown(raises="RuntimeError", match="repeats", reason="the crash the patch fixes")
def test_declared_runtime_error_is_the_fixed_error():
    raise RuntimeError("repeats must have the same size")


@unknown(raises="RuntimeError", match="repeats", reason="r")
def test_a_marker_whose_match_does_not_hold_declares_nothing():
    raise RuntimeError("something else")


@unknown(raises="KeyError", match="", reason="gated", dependency=True)
def test_dependency_true_counts_any_error_apart():
    {}["x"]


@unknown(raises="AttributeError", match="", reason="the crash", dependency=False)
def test_dependency_false_keeps_an_attribute_error_the_fixed_error():
    object().missing


@pytest.fixture
def broken():
    raise ImportError("no module deepseek_eagle3")


@unknown(raises="ImportError", match="deepseek_eagle3", reason="the module is the series'")
def test_a_fixture_error_is_recorded_too(broken):
    pass
"""


def test_each_failure_is_recorded_with_its_kind_exception_and_reason(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    report = probe_run.run_report(Path(sys.executable), tmp_path, ["test_suite.py"], None)
    kinds = {n.split("::")[1]: f["kind"] for n, f in report.failures.items()}
    assert kinds == {
        "test_fails_on_its_assertion": "assertion",
        "test_fails_on_pytest_raises": "assertion",
        "test_undeclared_attribute_error": "undeclared",
        "test_declared_attribute_error_is_a_dependency": "declared-dependency",
        "test_declared_runtime_error_is_the_fixed_error": "declared-error",
        "test_a_marker_whose_match_does_not_hold_declares_nothing": "undeclared",
        "test_dependency_true_counts_any_error_apart": "declared-dependency",
        "test_dependency_false_keeps_an_attribute_error_the_fixed_error": "declared-error",
        "test_a_fixture_error_is_recorded_too": "declared-dependency",
    }
    assert report.outcomes["test_suite.py::test_passes"] == "passed"
    assert report.outcomes["test_suite.py::test_a_fixture_error_is_recorded_too"] == "error"
    fixed = report.failures["test_suite.py::test_declared_runtime_error_is_the_fixed_error"]
    assert fixed["exception"] == "RuntimeError: repeats must have the same size"
    assert fixed["reason"] == "the crash the patch fixes"


def test_a_file_that_does_not_collect_is_an_undeclared_failure(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    report = probe_run.run_report(Path(sys.executable), tmp_path, ["test_broken.py"], None)
    assert report.outcomes == {"test_broken.py": "error"}
    failure = report.failures["test_broken.py"]
    assert failure["kind"] == "undeclared" and "no_such_module_here" in failure["exception"]
