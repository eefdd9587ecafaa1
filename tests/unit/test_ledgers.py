"""A move of the pin edits the ledgers and the changelog itself
(``vpq.move.ledgers``, ``vpq.move.changelog``, ``vpq.core.tomltext``).

On copies of this repository's own ledgers: the series is cut as a move
that absorbed every ``Backport`` patch would cut it, ``ledgers.follow``
runs, and the lints that hold each ledger to the series pass; comments
and the untouched tables keep their bytes.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from datetime import date, timedelta
from pathlib import Path

import pytest
from vpq.checks import peer_backports, peer_list
from vpq.core import tomltext
from vpq.move import changelog, ledgers
from vpq.source import lock, series
from vpq.wheels import advisories

from tests.support.paths import REPO_ROOT

LEDGERS = [
    "advisories.toml",
    "backport-tests.toml",
    "peer-tests.toml",
    "peer-expected.toml",
    "mutation.toml",
]


def _copy(tmp: Path) -> Path:
    root = tmp / "repo"
    root.mkdir()
    for name in [*LEDGERS, "series", "upstream.lock", "probes.toml", "CHANGELOG.md"]:
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    reasons = "tests/integration/test_advisory_reasons.py"  # not-affected entries' checks
    (root / reasons).parent.mkdir(parents=True)
    shutil.copy(REPO_ROOT / reasons, root / reasons)
    (root / "docs").mkdir()
    shutil.copy(REPO_ROOT / advisories.TABLE_PAGE, root / advisories.TABLE_PAGE)
    return root


def _cut(root: Path, version: str) -> list[str]:
    """Drop every ``Backport`` patch from ``root``'s series and pin
    ``version``, as a move that absorbed them would; the dropped names."""
    patches = series.load(root)
    dropped = [p.name for p in patches if (p.upstream_status or "").startswith("Backport")]
    lines = (root / "series").read_text().splitlines(keepends=True)
    (root / "series").write_text("".join(ln for ln in lines if ln.strip() not in dropped))
    for name in dropped:
        (root / "patches" / name).unlink()
    text = (root / "upstream.lock").read_text()
    pinned = lock.load(root).version
    (root / "upstream.lock").write_text(text.replace(f'"{pinned}"', f'"{version}"', 1))
    return dropped


def test_the_ledgers_follow_a_move_that_drops_the_backports(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    dropped = _cut(root, "0.33.0")
    assert dropped and peer_list.lint(root) and peer_backports.lint(root)  # broken by the cut
    before = {a.id: a for a in advisories.load(root)}
    edits = ledgers.follow(root, dropped, "0.33.0")
    assert peer_list.lint(root) == [] and peer_backports.lint(root) == []
    assert advisories.lint(root) == []
    kept = {  # still in range at 0.33.0, or carried by a patch the cut keeps
        i for i, a in before.items()
        if advisories.includes(a, "0.33.0") or (a.status == "carried" and a.patch not in dropped)
    }  # fmt: skip
    after = {a.id: a.status for a in advisories.load(root)}
    assert kept and {i for i, s in after.items() if s != "fixed-upstream"} == kept
    assert len(edits) == 5 + len(before) - len(kept)  # 4 files cut, [ci], each advisory fixed
    peer = (root / "peer-tests.toml").read_text()
    assert "# The fast subset CI runs" in peer and peer.startswith("# Upstream's own tests")
    mutation = tomllib.loads((root / "mutation.toml").read_text())
    assert set(mutation) == set(series.read_series(root))
    assert (root / "mutation.toml").read_text().startswith("# Mutation check record")


def test_a_carried_advisory_whose_patch_is_dropped_becomes_fixed_upstream(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = {a.id: a for a in advisories.load(root)}
    dropped = _cut(root, "0.20.0")
    ledgers.follow(root, dropped, "0.20.0")
    after = {a.id: a for a in advisories.load(root)}
    carried = [i for i, a in before.items() if a.status == "carried" and a.patch in dropped]
    assert carried and all(after[i].status == "fixed-upstream" for i in carried)
    assert all(after[i].patch == before[i].patch for i in carried)  # kept as history
    later = [  # open, and still in range at 0.20.0
        i for i, a in before.items()
        if a.status == "open" and advisories.includes(a, "0.20.0")
        and not advisories.fixed_at(a, "0.20.0")
    ]  # fmt: skip
    assert later and all(after[i].status == "open" for i in later)
    past = [
        i for i, a in before.items() if a.status == "open" and not advisories.includes(a, "0.20.0")
    ]
    assert past and all(after[i].status == "fixed-upstream" for i in past)  # range ends before
    text = (root / "advisories.toml").read_text()
    assert text.count("# severity: the published rating") == 4  # comments stay
    page = (root / advisories.TABLE_PAGE).read_text()
    was = f"fixed upstream: the pin has 0.18.0's fix (was carried by `{before[carried[0]].patch}`)"
    assert was in page


def test_a_move_that_drops_nothing_leaves_every_ledger_byte_identical(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    start = {n: (root / n).read_bytes() for n in LEDGERS}
    assert ledgers.follow(root, [], "0.17.1") == []
    assert {n: (root / n).read_bytes() for n in LEDGERS} == start


def test_fixed_upstream_needs_fixed_in_and_a_pin_that_has_the_fix(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    gid = "GHSA-rwxx-mrjm-wc2m"  # open, fixed in 0.24.0
    path = root / "advisories.toml"
    path.write_text(tomltext.set_value(path.read_text(), (gid,), "status", "fixed-upstream", "x"))
    problems = [p for p in advisories.lint(root) if gid in p]
    assert problems == [
        f"{path}: {gid}: status 'fixed-upstream', but the pin, vllm 0.17.1, is before "
        "fixed-in 0.24.0"
    ]
    text = re.sub(r'fixed-in = "0.24.0"\n', "", path.read_text(), count=1)
    path.write_text(text)
    assert f"{path}: {gid}: status 'fixed-upstream' needs key 'fixed-in'" in advisories.lint(root)


def test_a_table_takes_the_comments_just_above_it_and_strings_are_not_headers() -> None:
    text = (
        "# file comment\n\n"
        '["a"]\nx = 1\n\n'
        '# about b\n["b"]\nwhy = """\n[not a header]\n"""\n\n'
        '["b".sub]\ny = 2\n'
    )
    blocks = tomltext.split(text)
    assert [b.path for b in blocks] == [None, ("a",), ("b",), ("b", "sub")]
    assert blocks[2].lines[0] == "# about b\n"
    assert tomltext.join(blocks) == text
    kept, count = tomltext.drop_tables(text, lambda p, _d: p[0] == "b", "t")
    assert count == 2 and kept == '# file comment\n\n["a"]\nx = 1\n\n'
    with pytest.raises(tomltext.TomlTextError, match="intended data"):
        tomltext.drop_tables(text, lambda p, _d: p == ("b",), "t")  # its sub-table would stay
    added = tomltext.set_value(text, ("a",), "z", "w", "t")
    assert '["a"]\nx = 1\nz = "w"\n' in added


def test_the_changelog_records_the_move_and_each_dropped_patch(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    patches = series.load(root)
    pin = lock.load(root)
    new = lock.Lock(
        name=pin.name, version="0.33.0", tag="v0.33.0", repository=pin.repository,
        commit=pin.commit, commit_source=pin.commit_source,
        sdist=lock.Artifact("vllm-0.33.0.tar.gz", "ab" * 32), wheels=pin.wheels,
    )  # fmt: skip
    gone = changelog.absorbed_of(patches, {patches[0].name: "probe", patches[1].name: "empty"})
    newest = re.search(r"^## (\d{4}-\d{2}-\d{2})$", (root / "CHANGELOG.md").read_text(), re.M)
    assert newest, "the changelog has a day heading"
    day = (date.fromisoformat(newest.group(1)) + timedelta(days=1)).isoformat()  # the move's day
    assert changelog.record(root, "0.17.1", new, gone, day=day)
    log = (root / "CHANGELOG.md").read_text()
    assert "pinned to vLLM **0.33.0** (tag `v0.33.0`)" in log
    assert f"- {day}: moved from vLLM **0.17.1**" in log  # no git checkout: no commit
    today = log.split(f"## {day}\n\n", 1)[1].split("\n## ", 1)[0]
    assert today.startswith(f"- Dropped: `{patches[0].name}` (`{patches[0].upstream_status}`)")
    assert "absorbed by vLLM **0.33.0** (the move from 0.17.1; signals: probe)" in today
    assert log.index(f"## {day}") < log.index(f"## {newest.group(1)}")
    changelog.record(root, "0.33.0", new, gone[:1], day=day)  # the same day again
    assert (root / "CHANGELOG.md").read_text().count(f"## {day}") == 1


def test_a_malformed_ledger_is_left_as_it_was_and_the_others_still_follow(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    dropped = _cut(root, "0.33.0")
    (root / "backport-tests.toml").write_text('["unclosed\n')
    edits = ledgers.follow(root, dropped, "0.33.0")
    bad = root / "backport-tests.toml"
    assert edits[0].startswith(f"not edited, fix by hand: {bad}: not valid TOML")
    assert (root / "backport-tests.toml").read_text() == '["unclosed\n'
    assert peer_list.lint(root) == [] and advisories.lint(root) == []


def _tests_of(root: Path) -> set[str]:
    """The test files ``root``'s peer-tests.toml chooses, as the release has them."""
    return set(peer_list.load(root).test_files())


def test_peer_test_files_follow_upstream_s_moves_and_a_gone_one_leaves_a_why(
    tmp_path: Path,
) -> None:
    """0.32.0 moved ``test_serving_chat.py`` under ``chat_completion/`` and
    removed ``test_reasoning_structured_output.py`` (the only peer of
    ``structured_output/request.py``)."""
    root = _copy(tmp_path)
    chat = "tests/entrypoints/openai/test_serving_chat.py"
    moved = "tests/entrypoints/openai/chat_completion/test_serving_chat.py"
    gone = "tests/v1/structured_output/test_reasoning_structured_output.py"
    tests = (_tests_of(root) - {chat, gone}) | {moved, "tests/x/test_request.py"}
    expected_before = peer_list.load_expected(root)
    assert any(e.test.startswith(gone) for e in expected_before)  # its 2 entries go

    edits = ledgers.follow(root, [], "0.32.0", sorted(tests))
    assert [e for e in edits if e.startswith("peer-tests.toml")] == [
        f"peer-tests.toml: {chat} -> {moved}",
        f"peer-tests.toml: {gone} -> gone (upstream 0.32.0 has no file of that name)",
    ]
    pl = peer_list.load(root)
    assert set(pl.test_files()) <= tests and moved in pl.test_files()
    assert pl.chosen["vllm/v1/structured_output/request.py"] == ()
    assert pl.why_none["vllm/v1/structured_output/request.py"].startswith(
        f"upstream 0.32.0 has no {gone}"
    )
    after = peer_list.load_expected(root)
    assert [e for e in expected_before if not e.test.startswith(gone)] == after
    assert peer_list.lint(root) == []
    assert (root / "peer-tests.toml").read_text().startswith("# Upstream's own tests")


def test_a_moved_expectation_follows_its_file(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    parser = "tests/tool_parsers/test_kimi_k2_tool_parser.py"
    moved = "tests/parsers/tool/test_kimi_k2_tool_parser.py"
    tests = (_tests_of(root) - {parser}) | {moved}
    before = peer_list.load_expected(root)
    ledgers.follow(root, [], "0.99.0", sorted(tests))
    after = peer_list.load_expected(root)
    assert len(after) == len(before)
    assert [e.test.replace(moved, parser) for e in after] == [e.test for e in before]
    assert sum(e.test.startswith(moved + "::") for e in after) == 15
    ci = peer_list.load(root).ci
    assert moved in ci and parser not in ci
    assert peer_list.lint(root) == []


def test_two_files_of_the_name_are_not_guessed_between() -> None:
    moves = ledgers.test_moves(["tests/a/test_x.py"], ["tests/b/test_x.py", "tests/c/test_x.py"])
    assert moves == {"tests/a/test_x.py": None}
    assert ledgers.test_moves(["tests/a/test_x.py"], ["tests/a/test_x.py"]) == {}
