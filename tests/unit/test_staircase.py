"""The staircase: one table of every patch at every checked release, held
against the patches' Upstream-Status headers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vpq import probe, rebase, series

from tests.unit.tiny_upstream import Upstream


def test_a_backport_header_expects_absorption_from_its_release_on() -> None:
    assert rebase.expected_absorbed("Backport [v0.18.0]", "0.17.1") is False
    assert rebase.expected_absorbed("Backport [v0.18.0]", "0.18.0") is True
    assert rebase.expected_absorbed("Backport [v0.18.0]", "0.33.0") is True
    assert rebase.expected_absorbed("Pending", "0.33.0") is False
    assert rebase.expected_absorbed("Submitted [https://x/1]", "0.33.0") is False
    assert rebase.expected_absorbed("Backport [1a2b3c4]", "0.33.0") is None


def test_the_staircase_marks_cells_that_disagree_with_the_header(
    one_patch: Upstream, tmp_path: Path
) -> None:
    (patch,) = series.load(one_patch.root)  # Upstream-Status: Pending
    reports = [
        rebase.Report("1.0", "1.1", [rebase.Outcome(patch.name, "clean", "applies as is")]),
        rebase.Report("1.0", "1.2", [rebase.Outcome(patch.name, "absorbed", "empty")]),
        rebase.Report("1.0", "1.3", [], error="vllm 1.3 has no vllm/mod.py"),
    ]
    table = rebase.staircase("1.0", [patch], reports)
    cells = table["patches"][0]["cells"]  # type: ignore[index]
    assert [cells[v]["status"] for v in ("1.1", "1.2", "1.3")] == ["clean", "absorbed", "error"]
    assert [cells[v]["agrees"] for v in ("1.1", "1.2", "1.3")] == [True, False, None]
    md = rebase.render_staircase(table)
    assert f"| `{patch.name}` | clean | absorbed ! | error |" in md
    assert md.endswith("1 of 2 cells agree with the patch headers.")
    assert "1.3: cannot rebase: vllm 1.3 has no vllm/mod.py" in md
    assert table["flags"] == [
        f"patches/{patch.name} says 'Pending', but at 1.2 it is absorbed (empty): the header "
        "should name the first release that has the patch's behaviour, as Backport [vX]"
    ]
    assert f"Headers the releases contradict:\n- {table['flags'][0]}" in md
    path = rebase.write_staircase(one_patch.root, table)
    assert path.read_text() == md + "\n"
    assert json.loads(path.with_suffix(".json").read_text()) == table


def test_a_backport_not_absorbed_at_its_release_is_flagged_with_what_its_probe_saw(
    one_patch: Upstream,
) -> None:
    (patch,) = series.load(one_patch.root)
    patch = dataclasses.replace(patch, body=patch.body.replace("Pending", "Backport [v1.1]"))
    seen = "probe: 1 of 3 not passed (first: tests/x.py::test_a)"
    conflict = rebase.Outcome(patch.name, "conflict", "needs a person", [], seen)
    reports = [
        rebase.Report("1.0", "1.1", [conflict]),
        rebase.Report("1.0", "1.2", [rebase.Outcome(patch.name, "absorbed", "probe")]),
    ]
    table = rebase.staircase("1.0", [patch], reports)
    assert table["flags"] == [
        f"patches/{patch.name} says 'Backport [v1.1]', but at 1.1 it is conflict "
        f"(needs a person; {seen})"
    ]


def test_a_probe_that_fails_where_the_text_says_absorbed_is_flagged(one_patch: Upstream) -> None:
    """The text (``empty, reverse-applies``) absorbs the patch, but its probe
    did not pass: the probe no longer exercises the behaviour there."""
    (patch,) = series.load(one_patch.root)
    patch = dataclasses.replace(patch, body=patch.body.replace("Pending", "Backport [v1.1]"))
    stale = "probe: 2 of 2 not passed (first: tests/x.py::test_a)"
    reports = [
        rebase.Report("1.0", "1.1", [rebase.Outcome(patch.name, "absorbed", "probe")]),
        rebase.Report(
            "1.0",
            "1.2",
            [rebase.Outcome(patch.name, "absorbed", "empty, reverse-applies", [], stale)],
        ),
    ]
    table = rebase.staircase("1.0", [patch], reports)
    assert table["flags"] == []  # the header holds
    assert table["probe_flags"] == [
        f"patches/{patch.name} is absorbed at 1.2 by its text (empty, reverse-applies), "
        f"but its probe did not pass there ({stale}): fix the probe"
    ]
    assert f"Probes that do not probe:\n- {table['probe_flags'][0]}" in (
        rebase.render_staircase(table)
    )
    passing = rebase.Outcome(patch.name, "absorbed", "empty, probe", [], "probe: 2 of 2 passed")
    assert (
        rebase.staircase("1.0", [patch], [rebase.Report("1.0", "1.2", [passing])])["probe_flags"]
        == []
    )


def test_a_probe_that_skips_at_a_release_is_flagged_as_not_probing(one_patch: Upstream) -> None:
    """A selected test that skips decides nothing: the probe is reported as
    not probing at that release, whatever the patch's status there."""
    (patch,) = series.load(one_patch.root)
    seen = probe.verdict(
        probe.Probe(patch.name, tests=("tests/x.py::test_a",)),
        {"tests/x.py::test_a[1]": "passed", "tests/x.py::test_a[2]": "skipped"},
    )
    assert seen == (
        False,
        "probe: 1 of 2 not passed (first: tests/x.py::test_a[2]); "
        "not probing: 1 skipped (first: tests/x.py::test_a[2])",
    )
    kept = rebase.Outcome(patch.name, "clean", "applies as is", [], seen[1])
    table = rebase.staircase("1.0", [patch], [rebase.Report("1.0", "1.2", [kept])])
    assert table["probe_flags"] == [
        f"patches/{patch.name}: its probe is not probing at 1.2 ({seen[1]}): make it run there"
    ]
