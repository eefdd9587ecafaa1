"""The peer-test report: per file both sides' counts; a test that passes
unpatched and not patched is a regression, explained only by
peer-expected.toml; tests that ran on neither side are counted by what they
need (the Hub, a GPU) with their reasons; the files are written atomically.
And the runner on a real pytest: outcomes and skip reasons per node id."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vpq.checks import peer_run
from vpq.checks.peer_list import Expected, PeerList
from vpq.checks.peer_report import BackportResult, FileResult, Report, Side, need_of, render, write

FILE = "tests/v1/test_x.py"
HUB = "OSError: We couldn't connect to 'https://huggingface.co' to load the files"


def _report(expected: list[Expected] | None = None) -> Report:
    unpatched = Side(
        {f"{FILE}::a": "passed", f"{FILE}::b": "passed", f"{FILE}::c": "failed",
         f"{FILE}::d": "error", f"{FILE}::e": "skipped"},
        {f"{FILE}::c": "AssertionError: x", f"{FILE}::d": HUB, f"{FILE}::e": "requires CUDA"},
        1.0,
    )  # fmt: skip
    patched = Side(
        {f"{FILE}::a": "passed", f"{FILE}::b": "failed", f"{FILE}::c": "passed",
         f"{FILE}::d": "error", f"{FILE}::e": "skipped"},
        {f"{FILE}::b": "AssertionError: y", f"{FILE}::d": HUB, f"{FILE}::e": "requires CUDA"},
        2.0,
    )  # fmt: skip
    return Report("0.17.1", [FileResult(FILE, ["vllm/x.py"], unpatched, patched)], expected or [])


def test_a_test_passing_unpatched_and_failing_patched_is_an_unexplained_regression() -> None:
    report = _report()
    (reg,) = report.unexplained()
    assert (reg.test, reg.patched, reg.reason) == (f"{FILE}::b", "failed", "AssertionError: y")
    assert report.fixed() == [f"{FILE}::c"]
    assert "UNEXPLAINED" in render(report)


def test_an_expected_entry_explains_the_regression() -> None:
    report = _report([Expected(f"{FILE}::b", "v1/x.patch", "on purpose")])
    assert report.unexplained() == []
    (reg,) = report.regressions()
    assert reg.expected is not None and "on purpose" in render(report)


def test_a_collection_error_patched_regresses_every_test_that_passed() -> None:
    unpatched = Side({f"{FILE}::a": "passed"}, {}, 1.0)
    patched = Side({FILE: "error"}, {FILE: "ImportError: cannot import name 'X'"}, 1.0)
    report = Report("0.17.1", [FileResult(FILE, [], unpatched, patched)])
    (reg,) = report.unexplained()
    assert reg.patched == "error"


def test_tests_run_on_neither_side_are_counted_by_what_they_need() -> None:
    needs = _report().needs()
    assert needs == {"hub": {HUB: 1}, "gpu": {"requires CUDA": 1}}
    assert need_of("something else") == "other"


def test_counts_per_file_and_side() -> None:
    f = _report().files[0]
    assert f.unpatched.counts() == {"passed": 2, "failed": 1, "skipped": 1, "error": 1}
    assert f.patched.counts() == {"passed": 2, "failed": 1, "skipped": 1, "error": 1}


def test_the_report_is_written_as_text_and_json(tmp_path: Path) -> None:
    text, js = write(_report(), tmp_path)
    assert text.read_text().startswith("peer tests: upstream vllm 0.17.1")
    data = json.loads(js.read_text())
    assert data["unexplained"] == [f"{FILE}::b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peer-tests.json", "peer-tests.txt"]


def test_the_runner_records_outcomes_and_skip_reasons_per_node(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_t.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2\n"
        "@pytest.mark.skip(reason='needs a GPU')\n"
        "def test_gpu(): pass\n"
    )
    side = peer_run.run_file(Path(sys.executable), tree, ["tests/test_t.py"], tmp_path / "log")
    assert side.outcomes == {
        "tests/test_t.py::test_ok": "passed",
        "tests/test_t.py::test_bad": "failed",
        "tests/test_t.py::test_gpu": "skipped",
    }
    assert side.reasons["tests/test_t.py::test_gpu"] == "needs a GPU"
    assert side.reasons["tests/test_t.py::test_bad"].startswith("AssertionError")


def test_only_selectors_pick_their_file() -> None:
    only = [f"{FILE}::test_a", "tests/other.py"]
    assert peer_run.targets_for(FILE, only) == [f"{FILE}::test_a"]
    assert peer_run.targets_for("tests/none.py", only) is None
    assert peer_run.targets_for(FILE, None) == [FILE]


def test_a_grouped_run_splits_one_process_s_outcomes_by_file(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    for name in ("a", "b"):
        (tree / "tests" / f"test_{name}.py").write_text(
            "def test_one(): pass\ndef test_two(): pass\n"
        )
    envs = peer_run.Envs(Path(sys.executable), Path(sys.executable), tree, "1.0", tmp_path / "hf")
    chosen = PeerList({"vllm/x.py": ("tests/test_a.py", "tests/test_b.py")}, {}, ())
    only = ["tests/test_a.py::test_one", "tests/test_b.py"]
    a, b = peer_run.run_grouped(envs, chosen, tmp_path / "logs", only)
    assert a.unpatched.outcomes == {"tests/test_a.py::test_one": "passed"}
    assert set(b.patched.outcomes) == {"tests/test_b.py::test_one", "tests/test_b.py::test_two"}
    assert a.sources == ["vllm/x.py"]


def test_a_failure_whose_message_names_the_hub_beyond_its_first_line_needs_the_hub() -> None:
    node = f"{FILE}::f"
    message = "ValidationError: 1 validation error 1. Provide a valid Hugging Face repository ID."
    side = Side(
        {node: "failed"},
        {node: "ValidationError: 1 validation error"},
        1.0,
        messages={node: message},
    )
    report = Report("0.17.1", [FileResult(FILE, [], side, side)])
    assert report.needs() == {"hub": {"ValidationError: 1 validation error": 1}}


def test_the_runner_records_each_failure_s_whole_message(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_m.py").write_text(
        "def test_bad():\n    raise ValueError('first line\\nsecond line names huggingface.co')\n"
    )
    side = peer_run.run_file(Path(sys.executable), tree, ["tests/test_m.py"], tmp_path / "log")
    node = "tests/test_m.py::test_bad"
    assert side.reasons[node] == "ValueError: first line"
    assert side.messages[node] == "ValueError: first line second line names huggingface.co"


def test_a_backport_s_source_test_failing_on_the_backport_fails_the_tier() -> None:
    node = "tests/t.py::test_fix"
    good = BackportResult("x.patch", "0.25.0", [], Side({node: "failed"}, {}, 1.0),
                          Side({node: "passed"}, {}, 1.0))  # fmt: skip
    bad = BackportResult("y.patch", "0.25.0", ["tests/t.py: a.b -> a.c (1 imports)"],
                         Side({node: "failed"}, {}, 1.0),
                         Side({node: "failed"}, {node: "AssertionError: x"}, 1.0))  # fmt: skip
    assert not Report("0.17.1", [], backports=[good]).failed()
    report = Report("0.17.1", [], backports=[good, bad])
    assert report.failed() and bad.failing() == [node]
    text = render(report)
    assert "FAILS ON THE BACKPORT: tests/t.py::test_fix" in text
    assert "adapted: tests/t.py: a.b -> a.c (1 imports)" in text


def test_reasons_differing_only_in_temporary_paths_count_together() -> None:
    a, b = f"{FILE}::a", f"{FILE}::b"
    reasons = {
        a: "AssertionError: ['vllm', '-i', '/tmp/tmpab12']",
        b: "AssertionError: ['vllm', '-i', '/tmp/tmpcd34']",
    }
    side = Side({a: "failed", b: "failed"}, reasons, 1.0)
    assert _report().needs()["hub"] and Report(
        "0.17.1", [FileResult(FILE, [], side, side)]
    ).needs() == {"other": {"AssertionError: ['vllm', '-i', '/tmp/...']": 2}}
    assert need_of("ConnectionError: ... NameResolutionError ...") == "hub"
