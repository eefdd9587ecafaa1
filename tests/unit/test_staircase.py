"""The staircase: one table of every patch at every checked release, held
against the patches' Upstream-Status headers."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from vpq.move import rebase, staircase
from vpq.source import probe, series

from tests.unit.tiny_upstream import Upstream


def test_a_backport_header_expects_absorption_from_its_release_on() -> None:
    assert staircase.expected_absorbed("Backport [v0.18.0]", "0.17.1") is False
    assert staircase.expected_absorbed("Backport [v0.18.0]", "0.18.0") is True
    assert staircase.expected_absorbed("Backport [v0.18.0]", "0.33.0") is True
    assert staircase.expected_absorbed("Pending", "0.33.0") is False
    assert staircase.expected_absorbed("Submitted [https://x/1]", "0.33.0") is False
    assert staircase.expected_absorbed("Backport [1a2b3c4]", "0.33.0") is None


def test_the_staircase_marks_cells_that_disagree_with_the_header(
    one_patch: Upstream, tmp_path: Path
) -> None:
    (patch,) = series.load(one_patch.root)  # Upstream-Status: Pending
    reports = [
        staircase.Report("1.0", "1.1", [staircase.Outcome(patch.name, "clean", "applies as is")]),
        staircase.Report("1.0", "1.2", [staircase.Outcome(patch.name, "absorbed", "empty")]),
        staircase.Report("1.0", "1.3", [], error="vllm 1.3 has no vllm/mod.py"),
    ]
    table = staircase.build("1.0", [patch], reports)
    cells = table.patches[0].cells
    assert [cells[v].status for v in ("1.1", "1.2", "1.3")] == ["clean", "absorbed", "error"]
    assert [cells[v].agrees for v in ("1.1", "1.2", "1.3")] == [True, False, None]
    md = table.render()
    assert f"| `{patch.name}` | clean | absorbed ! | error |" in md
    assert md.endswith("1 of 2 cells agree with the patch headers.")
    assert "1.3: cannot rebase: vllm 1.3 has no vllm/mod.py" in md
    assert table.flags == [
        f"patches/{patch.name} says 'Pending', but at 1.2 it is absorbed (empty): the header "
        "should name the first release that has the patch's behaviour, as Backport [vX]"
    ]
    assert f"Headers the releases contradict:\n- {table.flags[0]}" in md
    path = table.write(one_patch.root)
    assert path.read_text() == md + "\n"
    assert json.loads(path.with_suffix(".json").read_text()) == table.to_json()


def test_a_backport_not_absorbed_at_its_release_is_flagged_with_what_its_probe_saw(
    one_patch: Upstream,
) -> None:
    (patch,) = series.load(one_patch.root)
    patch = dataclasses.replace(patch, body=patch.body.replace("Pending", "Backport [v1.1]"))
    seen = "probe: 1 of 3 not passed (first: tests/x.py::test_a)"
    conflict = staircase.Outcome(patch.name, "conflict", "needs a person", [], seen)
    reports = [
        staircase.Report("1.0", "1.1", [conflict]),
        staircase.Report("1.0", "1.2", [staircase.Outcome(patch.name, "absorbed", "probe")]),
    ]
    table = staircase.build("1.0", [patch], reports)
    assert table.flags == [
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
        staircase.Report("1.0", "1.1", [staircase.Outcome(patch.name, "absorbed", "probe")]),
        staircase.Report(
            "1.0",
            "1.2",
            [staircase.Outcome(patch.name, "absorbed", "empty, reverse-applies", [], stale)],
        ),
    ]
    table = staircase.build("1.0", [patch], reports)
    assert table.flags == []  # the header holds
    assert table.probe_flags == [
        f"patches/{patch.name} is absorbed at 1.2 by its text (empty, reverse-applies), "
        f"but its probe did not pass there ({stale}): fix the probe"
    ]
    assert f"Probes that do not probe:\n- {table.probe_flags[0]}" in table.render()
    passing = staircase.Outcome(patch.name, "absorbed", "empty, probe", [], "probe: 2 of 2 passed")
    assert (
        staircase.build("1.0", [patch], [staircase.Report("1.0", "1.2", [passing])]).probe_flags
        == []
    )


# --- one release's report -----------------------------------------------------


def _report(checked: bool = True) -> staircase.Report:
    return staircase.Report(
        "1.0",
        "1.1",
        [
            staircase.Outcome(
                "a.patch",
                "absorbed",
                "probe",
                ["x.py"],
                "probe: 4 of 4 passed",
                "3-way merge conflicted",
            ),
            staircase.Outcome(
                "b.patch", "conflict", "needs a person", ["y.py"], "", "3-way merge conflicted"
            ),
            staircase.Outcome(
                "c.patch", "clean", "applies as is", [], "probe: 0 of 2 passed", "applies as is"
            ),
        ],
        checked=checked,
    )


def test_every_column_of_the_report_has_a_header() -> None:
    lines = _report().render().splitlines()
    header = lines[1].split()
    assert " ".join(header) == "patch status merge onto the target absorbed by note probe"
    starts = [lines[1].index(h) for h in staircase.Report.COLUMNS]
    row = lines[2]
    assert [row[s:].split("  ")[0] for s in starts] == [
        "a.patch", "absorbed", "3-way merge conflicted (x.py)", "probe",
        "Applied-Upstream: 1.1", "probe: 4 of 4 passed",
    ]  # fmt: skip


def test_the_merge_and_the_absorption_signal_are_separate_columns() -> None:
    rows = [re.split(r"\s{2,}", r.strip()) for r in _report().render().splitlines()[2:5]]
    assert rows == [
        ["a.patch", "absorbed", "3-way merge conflicted (x.py)", "probe",
         "Applied-Upstream: 1.1", "probe: 4 of 4 passed"],
        ["b.patch", "conflict", "3-way merge conflicted (y.py)", "-", "needs a person", "-"],
        ["c.patch", "clean", "applies as is", "-", "-", "probe: 0 of 2 passed"],
    ]  # fmt: skip


def test_a_check_report_ends_with_the_move_that_resolves_its_conflicts() -> None:
    text = _report().render()
    assert text.splitlines()[0] == "vllm 1.0 -> 1.1 (check only)"
    assert "3 patches: absorbed 1, clean 1, conflict 1" in text
    assert text.endswith(
        "Next: 1 patch conflicts at 1.1: run `nox -s rebase_upstream -- 1.1` and resolve "
        f"each as it stops (`{staircase.CONTINUE}` after each)."
    )
    clean = dataclasses.replace(_report(), outcomes=_report().outcomes[::2])
    assert clean.render().endswith(
        "Next: nothing conflicts at 1.1: `nox -s rebase_upstream -- 1.1` moves the pin "
        "without stopping."
    )


def test_a_stopped_or_finished_move_says_what_to_do_next() -> None:
    stopped = _report(checked=False)
    stopped.outcomes.append(staircase.Outcome("d.patch", "pending", ""))
    assert stopped.render().endswith(f"then `{staircase.CONTINUE}`")
    assert "d.patch  pending" in stopped.render() and "not reached" in stopped.render()
    done = dataclasses.replace(_report(checked=False), outcomes=_report().outcomes[::2])
    assert done.render().endswith(
        "Next: review and commit patches/, series, probes.toml, upstream.lock, the ledgers and "
        "CHANGELOG.md (now vllm 1.1)."
    )


def test_one_release_gets_no_second_copy_of_its_table(
    one_patch: Upstream, monkeypatch, capsys
) -> None:
    from vpq import cli

    (patch,) = series.load(one_patch.root)
    rep = staircase.Report("1.0", "1.1", [staircase.Outcome(patch.name, "clean", "applies as is")],
                        checked=True)  # fmt: skip

    def fake_check(root, versions, source, on_report, use_cache):  # type: ignore[no-untyped-def]
        on_report(rep)
        return [rep]

    monkeypatch.setattr(rebase, "check", fake_check)
    assert cli.main(["--root", str(one_patch.root), "rebase", "--check", "1.1"]) == 0
    out = capsys.readouterr().out
    assert out.count(patch.name) == 1, out
    assert "The patch headers agree with this release." in out
    assert "staircase.json" in out


def test_the_rebase_page_shows_the_report_as_rendered() -> None:
    from tests.support.paths import REPO_ROOT

    assert _report().render() in (REPO_ROOT / "docs" / "rebase.md").read_text()


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
    kept = staircase.Outcome(patch.name, "clean", "applies as is", [], seen[1])
    table = staircase.build("1.0", [patch], [staircase.Report("1.0", "1.2", [kept])])
    assert table.probe_flags == [
        f"patches/{patch.name}: its probe is not probing at 1.2 ({seen[1]}): make it run there"
    ]


def test_no_cache_reaches_the_check(one_patch: Upstream, monkeypatch) -> None:
    from vpq import cli

    (patch,) = series.load(one_patch.root)
    rep = staircase.Report("1.0", "1.1", [staircase.Outcome(patch.name, "clean", "applies as is")],
                           checked=True)  # fmt: skip
    seen: list[bool] = []

    def fake_check(root, versions, source, on_report, use_cache):  # type: ignore[no-untyped-def]
        seen.append(use_cache)
        return [rep]

    monkeypatch.setattr(rebase, "check", fake_check)
    root = str(one_patch.root)
    assert cli.main(["--root", root, "rebase", "--check", "1.1"]) == 0
    assert cli.main(["--root", root, "rebase", "--check", "1.1", "--no-cache"]) == 0
    assert seen == [True, False]
