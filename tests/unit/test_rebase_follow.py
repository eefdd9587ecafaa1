"""A move of the pin on the tiny upstream: it edits the ledgers and the
changelog itself, and ``--continue`` after a stop at its very end (the
contract on the rebased tree) finishes the move it stopped.

Patches A (f10) and B (f20) of test_rebase_rerere.py; release 1.1 here
has A's change itself (A is absorbed) and changes f29 (B applies as is).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.contract import table as contract_table
from vpq.move import rebase
from vpq.source import series

from tests.unit.rerere_moves import A, B, commit_a_and_b
from tests.unit.tiny_upstream import MOD, Upstream, publish, replace_line

MOD_ABSORBS_A = replace_line(
    replace_line(MOD, "return 10\n", "return 100\n"), "return 29\n", "return 29  # 1.1\n"
)
MOD_KEEPS_BOTH = replace_line(MOD, "return 29\n", "return 29  # 1.1\n")
CHANGELOG = "# Changelog\n\n## The pin\n\n- pinned to vLLM **1.0**.\n\n## 2026-11-01\n\n- x\n"


@pytest.fixture
def ab(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> Upstream:
    """Patches A and B, release 1.1 (absorbs A) and 1.2 (keeps both)."""
    commit_a_and_b(upstream)
    publish(upstream, {"1.1": MOD_ABSORBS_A, "1.2": MOD_KEEPS_BOTH}, monkeypatch)
    return upstream


def _ledgers(root: Path) -> None:
    (root / "CHANGELOG.md").write_text(CHANGELOG)
    (root / "backport-tests.toml").write_text(
        f'[releases]\n"1.1" = "{"0" * 64}"\n\n# A\'s\n["{A}"]\nrelease = "1.1"\ntests = []\n'
        f'\n["{B}"]\nrelease = "1.2"\ntests = []\n'
    )
    (root / "peer-expected.toml").write_text(
        f'# head\n\n[[expected]]\ntest = "tests/a.py::t"\npatch = "{A}"\nwhy = "a"\n\n'
        f'[[expected]]\ntest = "tests/b.py::t"\npatch = "{B}"\nwhy = "b"\n'
    )


def test_a_finished_move_drops_the_absorbed_patch_from_the_ledgers_and_logs_it(
    ab: Upstream,
) -> None:
    root = ab.root
    _ledgers(root)
    report = rebase.start(root, "1.1")
    assert {o.patch: o.status for o in report.outcomes} == {A: "absorbed", B: "clean"}
    assert series.read_series(root) == [B]
    backports = (root / "backport-tests.toml").read_text()
    assert A not in backports and "# A's" not in backports and f'["{B}"]' in backports
    expected = (root / "peer-expected.toml").read_text()
    assert A not in expected and expected.startswith("# head\n\n[[expected]]")
    log = (root / "CHANGELOG.md").read_text()
    assert log.index("pinned to vLLM **1.1**") < log.index("- pinned to vLLM **1.0**.")
    assert f"- Dropped: `{A}` (`Pending`): absorbed by vLLM **1.1**" in log
    assert "edited to follow the move:" in report.render()
    assert any(e.startswith("CHANGELOG.md") for e in report.edited)


def test_continue_after_a_stop_at_the_contract_check_finishes_the_same_move(
    ab: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every patch replayed, then the contract on the rebased tree stops
    the move; after the fix, ``--continue`` must not replay them again
    (each would come out empty, and so "absorbed", and be dropped)."""
    root = ab.root
    gaps = iter(["the EAGLE-3 contract does not hold for the rebased series: x"])
    monkeypatch.setattr(contract_table.Table, "gap_message", lambda _t, _w: next(gaps, None))
    with pytest.raises(rebase.RebaseError, match="contract does not hold"):
        rebase.start(root, "1.2")
    assert series.read_series(root) == [A, B]  # nothing written yet
    report = rebase.resume(root)
    assert {o.patch: o.status for o in report.outcomes} == {A: "clean", B: "clean"}
    assert series.read_series(root) == [A, B]
