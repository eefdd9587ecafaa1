"""The mutation check's verdict (``vpq.checks.mutation.judge``): a patch is caught
only when a test of its probe fails on an assertion or on the error it fixes."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import tomli_w
from vpq.checks import mutation
from vpq.core.files import sha256_file
from vpq.envs import contract_run, probe_run
from vpq.source import probe, series

from tests.support.paths import REPO_ROOT
from tests.unit.cli import run_cli
from tests.unit.tiny_upstream import Upstream

P = probe.Probe("x.patch", tests=("t.py::test_a", "t.py::test_b"), exclude=("t.py::test_b[2]",))
WHOLE = probe_run.Report(
    {"t.py::test_a": "passed", "t.py::test_b[1]": "passed", "t.py::test_b[2]": "failed"}, {}
)


def _failed(kind: str) -> dict[str, str]:
    return {"kind": kind, "exception": "E: x"}


def test_a_test_failing_on_an_assertion_or_the_fixed_error_catches_the_patch() -> None:
    for kind in ("assertion", "declared-error"):
        mutant = probe_run.Report(
            {"t.py::test_a": "failed", "t.py::test_b[1]": "passed"}, {"t.py::test_a": _failed(kind)}
        )
        v = mutation.judge(P, WHOLE, mutant)
        assert (v.status, v.detail) == (mutation.CAUGHT, f"1 of 2 failed (1 {kind})")


def test_failing_only_on_a_dependency_or_an_import_misses_it() -> None:
    mutant = probe_run.Report(
        {"t.py::test_a": "failed", "t.py": "error"},
        {"t.py::test_a": _failed("declared-dependency"), "t.py": _failed("undeclared")},
    )
    v = mutation.judge(P, WHOLE, mutant)
    assert v.status == mutation.MISSED
    assert v.detail == "2 of 2 failed (1 declared-dependency, 1 undeclared)"


def test_passing_without_the_patch_misses_it_and_a_red_baseline_proves_nothing() -> None:
    passing = probe_run.Report({"t.py::test_a": "passed", "t.py::test_b[1]": "passed"}, {})
    assert mutation.judge(P, WHOLE, passing).status == mutation.MISSED
    red = probe_run.Report({**WHOLE.outcomes, "t.py::test_a": "failed"}, {})
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


F10 = "mod/change-f10.patch"
TEST_F10 = "tests/probes/test_f10.py"


def _probe_of_f10(root: Path, monkeypatch) -> str:  # type: ignore[no-untyped-def]
    """A probe test for the tiny queue's patch, named in probes.toml; probes
    run with this interpreter. Returns the probe's node id."""
    monkeypatch.setattr(contract_run, "deps_python", lambda *a: Path(sys.executable))
    test = root / TEST_F10
    test.parent.mkdir(parents=True)
    test.write_text(
        "from vllm import mod\n\n\ndef test_f10_returns_100():\n    assert mod.f10() == 100\n"
        "\n\ndef test_f10_is_callable():\n    assert callable(mod.f10)\n"
    )
    node = f"{TEST_F10}::test_f10_returns_100"
    (root / probe.PROBES_FILE).write_text(f'["{F10}"]\ntests = ["{node}"]\n')
    return node


def test_the_tiny_queue_without_its_patch_fails_the_probe_on_an_assertion(
    one_patch: Upstream, monkeypatch
) -> None:
    """End to end on the tiny upstream: the patched tree passes the probe,
    the tree with the patch reverse-applied fails it on its assertion; a
    probe that asserts nothing the patch changes misses it."""
    node = _probe_of_f10(one_patch.root, monkeypatch)
    (v,) = mutation.check(one_patch.root)
    assert (v.status, v.detail) == (mutation.CAUGHT, "1 of 1 failed (1 assertion)")
    assert v.failures[node]["exception"].startswith("AssertionError")
    (one_patch.root / probe.PROBES_FILE).write_text(
        '["mod/change-f10.patch"]\ntests = ["tests/probes/test_f10.py::test_f10_is_callable"]\n'
    )
    (v,) = mutation.check(one_patch.root)
    assert (v.status, v.detail) == (mutation.MISSED, "0 of 1 failed")


def test_lint_wants_a_caught_record_that_matches_the_patch_its_probe_and_the_catching_test(
    one_patch: Upstream, monkeypatch
) -> None:
    """``mutation.toml`` keeps the verdicts; lint names a patch without a
    record, one whose patch file, probe, catching test or upstream pin
    changed since, and one its tests no longer catch."""
    root = one_patch.root
    node = _probe_of_f10(root, monkeypatch)
    record = root / mutation.RECORD_FILE
    fix = f"run `nox -s mutation -- --record {F10}`"
    assert mutation.lint(root, [F10]) == [f"{record}: patches/{F10} has no mutation record; {fix}"]
    mutation.record(root, mutation.check(root))
    assert mutation.lint(root, [F10]) == []
    entry = tomllib.loads(record.read_text())[F10]
    assert (entry["status"], entry["caught-by"]) == (mutation.CAUGHT, [node])
    assert entry["test-sha256"] == {TEST_F10: sha256_file(root / TEST_F10)}

    def changed(path: Path, data: bytes, what: str) -> None:
        before = path.read_bytes()
        path.write_bytes(data)
        assert mutation.lint(root, [F10]) == [f"{record}: patches/{F10}: {what} its record; {fix}"]
        path.write_bytes(before)

    changed(root / "patches" / F10, (root / "patches" / F10).read_bytes() + b"\n",
            "the patch file changed since")  # fmt: skip
    changed(root / TEST_F10, b"def test_f10_returns_100():\n    pass\n",
            f"{TEST_F10}, which caught it, changed since")  # fmt: skip
    moved = {F10: {**entry, "upstream-sha256": "0" * 64}}
    changed(record, tomli_w.dumps(moved).encode(), "the upstream pin (upstream.lock) moved since")
    other = f'["{F10}"]\ntests = ["{TEST_F10}::test_f10_is_callable"]\n'.encode()
    changed(root / probe.PROBES_FILE, other, "its probes.toml table changed since")
    assert mutation.lint(root, [F10]) == []
    (root / probe.PROBES_FILE).write_bytes(other)
    mutation.record(root, mutation.check(root))
    assert mutation.lint(root, [F10]) == [
        f"{record}: patches/{F10} is not caught by its tests (missed: 0 of 1 failed)"
    ]
    proc = run_cli(root, "lint")
    assert proc.returncode == 1 and f"patches/{F10} is not caught" in proc.stderr


def test_recording_one_patch_keeps_the_others_and_drops_patches_gone_from_series(
    one_patch: Upstream, monkeypatch
) -> None:
    """A record holds the hashes the verdict's tests ran with, not those of
    the files when the (long) run ends."""
    root = one_patch.root
    node = _probe_of_f10(root, monkeypatch)
    (root / mutation.RECORD_FILE).write_text(
        '["gone.patch"]\nstatus = "caught"\n\n["mod/change-f10.patch"]\nstatus = "missed"\n'
    )
    ran = {TEST_F10: "1" * 64, "tests/probes/other.py": "2" * 64}
    caught = {node: {"kind": "assertion", "exception": "AssertionError"}}
    v = mutation.Verdict(F10, mutation.CAUGHT, "1 of 1 failed", caught, "3" * 64, ran)
    mutation.record(root, [v])
    data = tomllib.loads((root / mutation.RECORD_FILE).read_text())
    assert list(data) == [F10] and data[F10]["detail"] == "1 of 1 failed"
    assert data[F10]["patch-sha256"] == "3" * 64
    assert data[F10]["test-sha256"] == {TEST_F10: "1" * 64}
    assert (root / mutation.RECORD_FILE).read_text().startswith(mutation.RECORD_HEADER)


def test_every_patch_of_this_series_has_a_caught_record_that_still_matches() -> None:
    """What `nox -s lint` checks, in the suite CI runs: a patch added or
    changed (or a probe, a catching test, the pin) since the last
    `nox -s mutation -- --record` fails here, naming the patch."""
    assert (REPO_ROOT / mutation.RECORD_FILE).is_file()
    assert mutation.lint(REPO_ROOT, series.read_series(REPO_ROOT)) == []
