"""Absorption by behaviour: a patch's probe (probes.toml) decides absorption
on the unpatched target release, whatever the textual result.

The tiny upstream ("vllm 1.0", tests/unit/tiny_upstream.py) gets a second
release, 1.1, and the patch's probe is a real pytest file in the queue's
``tests/`` that imports the tiny ``vllm`` from the exported release tree. The
EAGLE-3 contract and the release's deps venv need vLLM's own requirements,
so here the contract table is empty (it holds for nothing) and the probe
runs with this interpreter.
"""

from __future__ import annotations

import textwrap

import pytest
from vpq.contract import table as contract_table
from vpq.envs import contract_run, probe_run
from vpq.move import rebase, staircase
from vpq.source import lock, probe, series

from tests.unit.tiny_upstream import MOD, Upstream, publish, replace_line

PATCH = "mod/change-f10.patch"
PROBE_TEST = "tests/probes/test_f10.py::test_f10_returns_100"


def _release_1_1(upstream: Upstream, mod: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish tiny vllm 1.1 (``vllm/mod.py`` = ``mod``) as the rebase target."""
    publish(upstream, {"1.1": mod}, monkeypatch)


def _with_probe(upstream: Upstream) -> None:
    """Give the patch its probe: f10 returns 100."""
    test = upstream.root / "tests" / "probes" / "test_f10.py"
    test.parent.mkdir(parents=True)
    test.write_text(
        "from vllm import mod\n\n\ndef test_f10_returns_100():\n    assert mod.f10() == 100\n"
    )
    (upstream.root / probe.PROBES_FILE).write_text(f'["{PATCH}"]\ntests = ["{PROBE_TEST}"]\n')


#: 1.1 has the behaviour, written on the very line the patch changes.
CONFLICTING = replace_line(MOD, "return 10\n", "return 100  # upstream's own fix\n")
#: 1.1 has the behaviour elsewhere in the file: the patch still applies.
ELSEWHERE = MOD + "def f10():  # upstream's own fix\n    return 100\n"


def _check(upstream: Upstream) -> staircase.Outcome:
    (report,) = rebase.check(upstream.root, ["1.1"])
    assert report.error == ""
    (outcome,) = report.outcomes
    return outcome


def test_the_probe_absorbs_a_patch_despite_a_textual_conflict(one_patch, monkeypatch) -> None:
    _release_1_1(one_patch, CONFLICTING, monkeypatch)
    assert _check(one_patch).status == "conflict"  # without a probe: a person's job
    _with_probe(one_patch)
    got = _check(one_patch)
    assert (got.status, got.signal) == ("absorbed", "probe")
    assert (got.merge, got.files) == ("3-way merge conflicted", ["vllm/mod.py"])
    assert got.probe == "probe: 1 of 1 passed"


def test_the_probe_absorbs_a_patch_that_still_applies_cleanly(one_patch, monkeypatch) -> None:
    _release_1_1(one_patch, ELSEWHERE, monkeypatch)
    assert _check(one_patch).status == "clean"
    _with_probe(one_patch)
    got = _check(one_patch)
    assert (got.status, got.signal) == ("absorbed", "probe")


def test_a_failing_probe_absorbs_nothing_and_says_what_it_saw(one_patch, monkeypatch) -> None:
    _release_1_1(one_patch, MOD, monkeypatch)  # 1.1 lacks the behaviour
    _with_probe(one_patch)
    got = _check(one_patch)
    assert (got.status, got.probe) == ("clean", f"probe: 1 of 1 not passed (first: {PROBE_TEST})")


def test_a_real_move_drops_the_absorbed_patch_and_its_probe(one_patch, monkeypatch) -> None:
    _release_1_1(one_patch, ELSEWHERE, monkeypatch)
    _with_probe(one_patch)
    report = rebase.start(one_patch.root, "1.1")
    assert [(o.patch, o.status) for o in report.outcomes] == [(PATCH, "absorbed")]
    assert series.read_series(one_patch.root) == []
    assert lock.load(one_patch.root).version == "1.1"
    assert probe.load(one_patch.root) == {}
    assert (one_patch.root / probe.PROBES_FILE).is_file()  # the dropped table only


# --- probes.toml and its lint ------------------------------------------------


def _lint(upstream: Upstream, text: str) -> list[str]:
    (upstream.root / probe.PROBES_FILE).write_text(textwrap.dedent(text))
    return probe.lint(upstream.root, series.read_series(upstream.root))


def test_lint_wants_a_probe_for_every_patch_and_only_for_patches_in_series(one_patch) -> None:
    got = _lint(one_patch, '["gone.patch"]\ncovered-by = "contract"\nwhy = "w"\n')
    assert any(f"patches/{PATCH} has no probe" in p for p in got)
    assert any('["gone.patch"] names a patch that is not in series' in p for p in got)


def test_lint_names_a_probe_test_that_is_not_defined(one_patch) -> None:
    _with_probe(one_patch)
    assert probe.lint(one_patch.root, [PATCH]) == []
    got = _lint(one_patch, f'["{PATCH}"]\ntests = ["tests/probes/test_f10.py::test_nope[x]"]\n')
    assert got == [
        f'{one_patch.root / probe.PROBES_FILE}: ["{PATCH}"] names '
        "'tests/probes/test_f10.py::test_nope[x]', which is not a test defined in this repository"
    ]


@pytest.mark.parametrize(
    "text, says",
    [
        ('["p"]\ntests = ["t"]\ncovered-by = "contract"\nwhy = "w"\n', "not both"),
        ('["p"]\nexclude = ["t"]\n', "not neither"),
        ('["p"]\ncovered-by = "contract"\n', "with a why"),
        ('["p"]\ncovered-by = "vibes"\nwhy = "w"\n', "covered-by must be one of contract"),
        ('["p"]\ntests = "t"\n', "tests must be a list"),
        ('["p"]\ncontract = [""]\n', "contract must be a list of non-empty strings"),
        ('["p"]\ntest = ["t"]\n', "unknown key(s) test"),
        ('["p"\n', "not valid TOML"),
    ],
)
def test_a_malformed_entry_is_one_line_naming_the_file_and_key(one_patch, text, says) -> None:
    (got,) = _lint(one_patch, text)
    assert got.startswith(str(one_patch.root / probe.PROBES_FILE)) and says in got


# --- the verdict -------------------------------------------------------------


def test_a_selector_picks_parametrisations_and_children_and_exclude_drops_some() -> None:
    p = probe.Probe("x", tests=("t.py::test_a", "t.py::TestB"), exclude=("t.py::test_a[2]",))
    outcomes = {
        "t.py::test_a[1]": "passed",
        "t.py::test_a[2]": "failed",
        "t.py::test_ab": "failed",  # a different test whose name starts the same
        "t.py::TestB::test_c": "passed",
    }
    assert probe.verdict(p, outcomes) == (True, "probe: 2 of 2 passed")
    assert probe.verdict(p, {**outcomes, "t.py::TestB::test_d": "skipped"})[0] is False


def test_a_probe_that_ran_nothing_or_did_not_collect_absorbs_nothing() -> None:
    p = probe.Probe("x", tests=("t.py::test_a",))
    assert probe.verdict(p, {}) == (False, "probe ran no test")
    assert probe.verdict(p, {"t.py": "error"}) == (False, "probe: t.py did not collect")


def test_contract_items_hold_only_where_discovered_with_an_ok_and_no_gap() -> None:
    table = contract_table.Table(
        rows={
            "config.media_placeholder_token_id": {"Kimi": "ok", "DeepseekV3": "n/a"},
            "supports_eagle3(model)": {"Kimi": "ok", "DeepseekV3": "missing"},
        },
        where={},
    )
    media = probe.Probe("x", contract=("config.media_placeholder_token_id",))
    assert probe_run.contract_verdict(media, table) == (True, "contract: 1 of 1 hold")
    gate = probe.Probe("x", contract=("supports_eagle3(model)",))
    assert probe_run.contract_verdict(gate, table) == (
        False,
        "contract: supports_eagle3(model) does not hold",
    )
    gone = probe.Probe("x", contract=("config.image_token_index",))
    assert probe_run.contract_verdict(gone, table)[1] == (
        "contract: config.image_token_index not found in the target's source"
    )


def test_a_patch_with_a_probe_is_not_absorbed_by_the_file_level_contract(
    one_patch, monkeypatch
) -> None:
    """vllm/mod.py's part of the contract holds on 1.1, which would absorb
    every patch to that file; the patch's own probe says 1.1 lacks it."""
    _release_1_1(one_patch, MOD, monkeypatch)
    holding = contract_table.Table(
        rows={"mod.f10": {"A": "ok"}}, where={}, files={("mod.f10", "A"): {"vllm/mod.py"}}
    )
    monkeypatch.setattr(contract_run, "check_source", lambda *a, **k: holding)
    assert (_check(one_patch).status, _check(one_patch).signal) == ("absorbed", "contract")
    _with_probe(one_patch)
    assert _check(one_patch).status == "clean"
