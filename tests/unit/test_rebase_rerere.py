"""Recorded resolutions (git rerere, kept in ``rerere/``): a conflict a
person resolves once is replayed by every later move that meets it.

The tiny upstream ("vllm 1.0") carries two patches, on f10 and on f20;
release 1.1 changes both lines, so both patches conflict there. Release 1.2
changes only f20, the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vpq import cli
from vpq.move import rebase, staircase
from vpq.source import lock, rerere, series
from vpq.wheels import build

from tests.unit.rerere_moves import (
    A,
    B,
    inputs,
    record_both_resolutions,
    resolve,
    restore,
    status,
    stopped_at,
)
from tests.unit.tiny_upstream import Upstream


def test_a_resolution_recorded_before_an_abort_is_replayed_by_the_next_move(two: Upstream) -> None:
    root, start = two.root, inputs(two.root)
    assert status(stopped_at(root, rebase.start, "1.1"))[A] == "conflict"
    resolve(root, "return 10  # 1.1\n", "return 100  # 1.1\n")
    # --continue records A's resolution in rerere/ at once, then stops at B
    assert status(stopped_at(root, rebase.resume)) == {A: "rebased", B: "conflict"}
    (rec,) = rerere.load(root).values()
    assert (rec.patch, rec.file, rec.recorded) == (A, "vllm/mod.py", "1.0 -> 1.1")
    assert {p.name for p in (root / "rerere" / rec.id).iterdir()} == {"preimage", "postimage"}
    rebase.abort(root)
    assert inputs(root) == start and set(rerere.load(root)) == {rec.id}

    second = stopped_at(root, rebase.start, "1.1")
    assert status(second) == {A: "rebased (recorded)", B: "conflict"}
    row = next(ln for ln in second.render().splitlines() if ln.strip().startswith(A))
    assert "rebased (recorded)" in row and "3-way merge, recorded resolution rerere/" in row
    resolve(root, "return 20  # 1.1\n", "return 200  # 1.1\n")
    done = rebase.resume(root)
    assert status(done) == {A: "rebased (recorded)", B: "rebased"}
    assert lock.load(root).version == "1.1"
    assert len(rerere.load(root)) == 2 and set(done.used) == set(rerere.load(root))
    assert done.stale == []
    assert b"return 100  # 1.1" in (root / "patches" / A).read_bytes()


def test_check_marks_recorded_cells_and_a_move_reports_and_prunes_what_it_did_not_meet(
    two: Upstream,
) -> None:
    root = record_both_resolutions(two)  # a fresh clone at 1.0, with both in rerere/
    start = inputs(root)
    ids = {r.patch: r.id for r in rerere.load(root).values()}

    reports = rebase.check(root, ["1.1", "1.2"])
    assert [status(r) for r in reports] == [
        {A: "rebased (recorded)", B: "rebased (recorded)"},
        {A: "clean", B: "rebased (recorded)"},
    ]
    assert rebase.stale_resolutions(root, reports) == []
    table = staircase.build("1.0", series.load(root), reports)
    assert f"| `{A}` | rebased (recorded) | clean |" in table.render()
    assert inputs(root) == start

    kept = rebase.start(root, "1.2")  # 1.2 has no f10 conflict: A's resolution is stale
    assert status(kept) == {A: "clean", B: "rebased (recorded)"}
    assert kept.stale == [rerere.Resolution(ids[A], A, "vllm/mod.py", "1.0 -> 1.1").describe()]
    assert "not met (stale; --prune-resolutions removes them)" in kept.render()
    assert set(rerere.load(root)) == set(ids.values())  # reported, not removed
    restore(root, start)
    pruned = rebase.start(root, "1.2", prune=True)
    assert pruned.pruned and set(rerere.load(root)) == {ids[B]}
    assert not (root / "rerere" / ids[A]).exists()
    assert ids[A] not in (root / "rerere" / rerere.INDEX_FILE).read_text()


def test_lint_names_a_resolution_without_its_images_or_its_index_entry(tmp_path: Path) -> None:
    folder = tmp_path / rerere.RERERE_DIR
    good, half = "a" * 40, "b" * 40
    for rid in (good, half):
        (folder / rid).mkdir(parents=True)
        (folder / rid / "preimage").write_text("<<<<<<<\nx\n=======\ny\n>>>>>>>\n")
    (folder / good / "postimage").write_text("xy\n")
    (folder / "notes").mkdir()
    broken = [
        f"{folder / half}: holds no preimage and postimage pair",
        f"{folder / 'notes'}: not a rerere conflict id folder (40 hex digits)",
    ]
    unindexed = f"{folder / good}: the recorded resolution is not in the index"
    assert sorted(rerere.lint(tmp_path)) == sorted(
        [*broken, f"{unindexed} ({folder / rerere.INDEX_FILE})"]
    )
    rerere.write_index(tmp_path, {good: rerere.Resolution(good, "p.patch", "f.py", "1 -> 2")})
    assert sorted(rerere.lint(tmp_path)) == sorted(broken)


def test_prune_with_abort_is_a_usage_error(
    one_patch: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(["--root", str(one_patch.root), "rebase", "--abort", "--prune-resolutions"]) == 2
    )
    err = capsys.readouterr().err
    assert err == "error: --prune-resolutions goes with a move, --continue or --check\n"


def test_a_state_file_with_locks_saved_as_toml_text_is_refused_in_one_paragraph(
    one_patch: Upstream,
) -> None:
    """A saved rebase keeps its locks as tables; one that holds TOML text
    (an older vpq) is named, with what to do, instead of a traceback."""
    state = one_patch.root / "build" / "rebase" / "state.json"
    state.parent.mkdir(parents=True)
    text = (one_patch.root / "upstream.lock").read_text()
    fields = {"old_lock": text, "new_lock": text, "old_ref": "a", "new_ref": "b"}
    state.write_text(json.dumps({**fields, "pending": [], "outcomes": [], "table": {}}))
    with pytest.raises(rebase.RebaseError) as info:
        rebase.resume(one_patch.root)
    assert str(info.value).startswith(f"{state}: not a saved rebase (its locks are not tables")
    assert "nox -s rebase_upstream -- --abort" in str(info.value)
    build.prepare(one_patch.root)  # the work tree the abort resets
    rebase.abort(one_patch.root)
    assert not state.exists()
