"""A move of the pin on the tiny upstream: ``--continue`` after a stop at
its very end (the contract on the rebased tree) finishes the move it
stopped.

Patches A (f10) and B (f20) of test_rebase_rerere.py; release 1.1 here
has A's change itself (A is absorbed) and changes f29 (B applies as is).
"""

from __future__ import annotations

import pytest
from vpq.contract import table as contract_table
from vpq.move import rebase
from vpq.source import series

from tests.unit.test_rebase_rerere import A, B
from tests.unit.tiny_upstream import MOD, Upstream, publish, replace_line

MOD_ABSORBS_A = replace_line(
    replace_line(MOD, "return 10\n", "return 100\n"), "return 29\n", "return 29  # 1.1\n"
)
MOD_KEEPS_BOTH = replace_line(MOD, "return 29\n", "return 29  # 1.1\n")


@pytest.fixture
def ab(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> Upstream:
    """Patches A and B, release 1.1 (absorbs A) and 1.2 (keeps both)."""
    upstream.commit_patch(A, {"vllm/mod.py": replace_line(MOD, "return 10\n", "return 100\n")},
                          "mod: make f10 return 100")  # fmt: skip
    both = replace_line(
        replace_line(MOD, "return 10\n", "return 100\n"), "return 20\n", "return 200\n"
    )
    upstream.commit_patch(B, {"vllm/mod.py": both}, "mod: make f20 return 200")
    publish(upstream, {"1.1": MOD_ABSORBS_A, "1.2": MOD_KEEPS_BOTH}, monkeypatch)
    return upstream


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
