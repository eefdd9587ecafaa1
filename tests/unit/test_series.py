from pathlib import Path

import pytest
from vpq.source import series

from tests.unit.tiny_upstream import Upstream


def test_series_lists_patches_in_order_ignoring_comments(one_patch: Upstream) -> None:
    assert series.read_series(one_patch.root) == ["mod/change-f10.patch"]
    (p,) = series.load(one_patch.root)
    assert p.subject == "mod: make f10 return 100"
    assert p.files == ("vllm/mod.py",)
    assert p.upstream_status == "Pending"
    assert [h.index for h in p.hunks] == [1]


def test_a_patch_named_twice_is_an_error_naming_the_line(one_patch: Upstream) -> None:
    with (one_patch.root / "series").open("a") as fh:
        fh.write("mod/change-f10.patch\n")
    with pytest.raises(
        series.SeriesError,
        match=r"series:3: mod/change-f10.patch is listed twice \(first on line 2\)",
    ):
        series.read_series(one_patch.root)


def test_a_missing_patch_file_is_an_error_naming_it(one_patch: Upstream) -> None:
    with (one_patch.root / "series").open("a") as fh:
        fh.write("nope.patch\n")
    with pytest.raises(
        series.SeriesError, match=r"series:3: nope.patch does not exist under patches/"
    ):
        series.read_series(one_patch.root)


def test_a_file_that_is_not_a_diff_is_rejected(one_patch: Upstream) -> None:
    (one_patch.root / "patches/mod/change-f10.patch").write_text("Subject: hello\n\njust words\n")
    with pytest.raises(series.SeriesError, match=r"change-f10.patch: not a patch"):
        series.load(one_patch.root)


def test_lint_finds_unlisted_files_missing_newline_and_trailers(one_patch: Upstream) -> None:
    root = one_patch.root
    (root / "patches/stray.patch").write_text("x\n")
    p = root / "patches/mod/change-f10.patch"
    text = p.read_text().replace("Upstream-Status: Pending\n", "Upstream-Status: Maybe\n")
    text = text.replace("Forwarded: no\n", "")
    p.write_text(text.rstrip("\n"))
    problems = "\n".join(series.lint(root))
    assert "stray.patch: not listed in series" in problems
    assert "change-f10.patch: does not end with a newline" in problems
    assert "no valid 'Upstream-Status:' trailer" in problems
    assert "no valid 'Forwarded:' trailer" in problems


def test_upstream_status_uses_yoctos_values() -> None:
    ok = [
        "Pending",
        "Backport [v0.18.0]",
        "Submitted [https://x/1]",
        "Denied",
        "Inappropriate [local]",
        "Inactive-Upstream",
    ]
    for v in ok:
        assert series.UPSTREAM_STATUS_RE.search(f"Upstream-Status: {v}")
    for v in ["pending", "Accepted", "Backport[v1]"]:
        assert not series.UPSTREAM_STATUS_RE.search(f"Upstream-Status: {v}")


def test_series_id_changes_with_any_patch_byte(one_patch: Upstream) -> None:
    before = series.series_id(series.load(one_patch.root))
    p = one_patch.root / "patches/mod/change-f10.patch"
    p.write_bytes(p.read_bytes().replace(b"return 100", b"return 101"))
    assert series.series_id(series.load(one_patch.root)) != before


def test_write_keeps_unchanged_patch_files_untouched(one_patch: Upstream, tmp_path: Path) -> None:
    root = one_patch.root
    p = root / "patches/mod/change-f10.patch"
    mtime = p.stat().st_mtime_ns
    assert series.write(root, [("mod/change-f10.patch", p.read_bytes())]) == []
    assert p.stat().st_mtime_ns == mtime
    assert (root / "series").read_text() == "# test series\nmod/change-f10.patch\n"
