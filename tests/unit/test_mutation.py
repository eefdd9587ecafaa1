"""The mutation check's verdict (``vpq.mutation.judge``): a patch is caught
only when a test of its probe fails on an assertion or on the error it fixes."""

from __future__ import annotations

import sys
from pathlib import Path

from vpq import mutation, probe
from vpq.contract import run as contract_run

from tests.unit.tiny_upstream import Upstream

P = probe.Probe("x.patch", tests=("t.py::test_a", "t.py::test_b"), exclude=("t.py::test_b[2]",))
WHOLE = probe.Report(
    {"t.py::test_a": "passed", "t.py::test_b[1]": "passed", "t.py::test_b[2]": "failed"}, {}
)


def _failed(kind: str) -> dict[str, str]:
    return {"kind": kind, "exception": "E: x"}


def test_a_test_failing_on_an_assertion_or_the_fixed_error_catches_the_patch() -> None:
    for kind in ("assertion", "declared-error"):
        mutant = probe.Report(
            {"t.py::test_a": "failed", "t.py::test_b[1]": "passed"}, {"t.py::test_a": _failed(kind)}
        )
        v = mutation.judge(P, WHOLE, mutant)
        assert (v.status, v.detail) == (mutation.CAUGHT, f"1 of 2 failed (1 {kind})")


def test_failing_only_on_a_dependency_or_an_import_misses_it() -> None:
    mutant = probe.Report(
        {"t.py::test_a": "failed", "t.py": "error"},
        {"t.py::test_a": _failed("declared-dependency"), "t.py": _failed("undeclared")},
    )
    v = mutation.judge(P, WHOLE, mutant)
    assert v.status == mutation.MISSED
    assert v.detail == "2 of 2 failed (1 declared-dependency, 1 undeclared)"


def test_passing_without_the_patch_misses_it_and_a_red_baseline_proves_nothing() -> None:
    passing = probe.Report({"t.py::test_a": "passed", "t.py::test_b[1]": "passed"}, {})
    assert mutation.judge(P, WHOLE, passing).status == mutation.MISSED
    red = probe.Report({**WHOLE.outcomes, "t.py::test_a": "failed"}, {})
    assert mutation.judge(P, red, passing).status == mutation.BASELINE
    assert mutation.judge(probe.Probe("y", tests=("u.py",)), WHOLE, passing).status == (
        mutation.NO_TESTS
    )


def test_the_table_names_every_patch_no_test_catches() -> None:
    verdicts = [
        mutation.Verdict("a.patch", mutation.CAUGHT, "1 of 1 failed (1 assertion)", {}),
        mutation.Verdict("b.patch", mutation.NO_TESTS, "contract items only", {}),
    ]
    text = mutation.render(verdicts)
    assert "| `b.patch` | no tests | contract items only |" in text
    assert text.endswith(
        "1 of 2 patches make a test fail on an assertion (or on the error they fix): not b.patch"
    )


def test_the_tiny_queue_without_its_patch_fails_the_probe_on_an_assertion(
    one_patch: Upstream, monkeypatch
) -> None:
    """End to end on the tiny upstream: the patched tree passes the probe,
    the tree with the patch reverse-applied fails it on its assertion; a
    probe that asserts nothing the patch changes misses it."""
    monkeypatch.setattr(contract_run, "deps_python", lambda *a: Path(sys.executable))
    test = one_patch.root / "tests" / "probes" / "test_f10.py"
    test.parent.mkdir(parents=True)
    test.write_text(
        "from vllm import mod\n\n\ndef test_f10_returns_100():\n    assert mod.f10() == 100\n"
        "\n\ndef test_f10_is_callable():\n    assert callable(mod.f10)\n"
    )
    node = "tests/probes/test_f10.py::test_f10_returns_100"
    (one_patch.root / probe.PROBES_FILE).write_text(
        f'["mod/change-f10.patch"]\ntests = ["{node}"]\n'
    )
    (v,) = mutation.check(one_patch.root)
    assert (v.status, v.detail) == (mutation.CAUGHT, "1 of 1 failed (1 assertion)")
    assert v.failures[node]["exception"].startswith("AssertionError")
    (one_patch.root / probe.PROBES_FILE).write_text(
        '["mod/change-f10.patch"]\ntests = ["tests/probes/test_f10.py::test_f10_is_callable"]\n'
    )
    (v,) = mutation.check(one_patch.root)
    assert (v.status, v.detail) == (mutation.MISSED, "0 of 1 failed")
