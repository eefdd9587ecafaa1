"""Every patch's absorption probe (probes.toml) can fail: it holds on the
patched wheel and on unpatched upstream vLLM 0.17.1 it holds for no patch.

The rebase runs the same probes on each target release's unpatched tree
(``vpq.move.rebase``); a probe that also held on 0.17.1 would absorb its patch
everywhere, and one that failed on the patched wheel would absorb nothing.
"""

from __future__ import annotations

import pytest
from vpq.contract import table as contract_table
from vpq.envs import probe_run
from vpq.source import series

from tests.support.paths import REPO_ROOT


def _verdicts(python, table: contract_table.Table) -> dict[str, tuple[bool, str]]:  # type: ignore[no-untyped-def]
    return probe_run.run_all(python, REPO_ROOT, series.read_series(REPO_ROOT), None, table)


@pytest.mark.outside_ci  # CI: semantics, parsers and contract on the patched wheel
def test_every_patch_has_a_probe_and_each_holds_on_the_patched_wheel(
    patched_python, patched_table
) -> None:
    verdicts = _verdicts(patched_python, patched_table)
    assert set(verdicts) == set(series.read_series(REPO_ROOT))  # none left to covered-by
    assert {n: seen for n, (ok, seen) in verdicts.items() if not ok} == {}


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_no_probe_holds_on_unpatched_upstream(upstream_python, upstream_table) -> None:
    verdicts = _verdicts(upstream_python, upstream_table)
    assert {n: seen for n, (ok, seen) in verdicts.items() if ok} == {}
