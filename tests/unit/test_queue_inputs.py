"""The queue's inputs survive what real checkouts and real commit messages do
to them: CRLF conversion, non-ASCII subjects, '---' and 'Key: value' lines in
bodies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from vpq.source import git as g
from vpq.source import queue, series
from vpq.wheels import build

from tests.support.paths import REPO_ROOT
from tests.unit.cli import assert_clean_error, run_cli, snapshot
from tests.unit.tiny_upstream import NEW_F20, WHY, Upstream


def _commit_in_work(root: Path, message: str) -> Path:
    prep = build.prepare(root)
    (prep.repo / "vllm/mod.py").write_text(NEW_F20)
    g.git(["commit", "-qam", message], prep.repo)
    return prep.repo


def _queue_repo(one_patch: Upstream, dest: Path, attributes: bool) -> Path:
    """The tiny queue as a git repository, with our .gitattributes or none."""
    src = one_patch.root
    if attributes:
        shutil.copy(REPO_ROOT / ".gitattributes", src / ".gitattributes")
    g.git(["init", "-q", str(src)], src.parent)
    g.git(["add", "-A"], src)
    g.git(["commit", "-qm", "queue"], src)
    g.git(["-c", "core.autocrlf=true", "clone", "-q", str(src), str(dest)], src.parent)
    return dest


def test_an_autocrlf_clone_keeps_the_queue_byte_exact_and_builds(
    one_patch: Upstream, tmp_path: Path
) -> None:
    clone = _queue_repo(one_patch, tmp_path / "clone", attributes=True)
    patch = clone / "patches/mod/change-f10.patch"
    assert patch.read_bytes() == (one_patch.root / "patches/mod/change-f10.patch").read_bytes()
    assert b"\r" not in (clone / "series").read_bytes() + (clone / "upstream.lock").read_bytes()
    (res,) = build.build_wheels(clone)
    assert res.report.differing == ("vllm/_version.py", "vllm/mod.py")


def test_lint_names_crlf_as_the_cause(one_patch: Upstream, tmp_path: Path) -> None:
    clone = _queue_repo(one_patch, tmp_path / "clone", attributes=False)
    assert b"\r\n" in (clone / "patches/mod/change-f10.patch").read_bytes()  # what autocrlf does
    (problem,) = series.lint(clone)
    assert "change-f10.patch: has CRLF line endings" in problem
    assert "core.autocrlf=true" in problem and "Forwarded" not in problem


def test_a_non_ascii_subject_survives_export_move_export(one_patch: Upstream) -> None:
    root = one_patch.root
    _commit_in_work(root, "mod: f20 returns 200 (café)\n\n" + WHY)
    assert run_cli(root, "export").returncode == 0
    top = root / "patches/mod-f20-returns-200-caf.patch"
    assert b"Subject: =?UTF-8?q?" in top.read_bytes()  # format-patch encodes it
    assert series.parse_patch(root, top.name).subject == "mod: f20 returns 200 (café)"
    top.rename(root / "patches/mod" / top.name)
    (root / "series").write_text((root / "series").read_text().replace(top.name, f"mod/{top.name}"))
    before = snapshot(root)
    proc = run_cli(root, "export")
    assert proc.returncode == 0 and "0 rewritten" in proc.stdout, proc.stdout + proc.stderr
    assert snapshot(root) == before
    assert series.lint(root) == []


@pytest.mark.parametrize(
    "line", ["---", "--- a/vllm/mod.py", "diff --git a/x b/x", "Index: vllm/mod.py"]
)
def test_export_refuses_a_message_git_am_would_cut(one_patch: Upstream, line: str) -> None:
    root = one_patch.root
    repo = _commit_in_work(
        root, f"mod: f20 returns 200\n\nThe first line of the why.\n{line}\n" + WHY
    )
    before = snapshot(root)
    proc = run_cli(root, "export")
    assert_clean_error(
        proc,
        f"line 4 of its message, {line!r}, would end the message for `git am`",
        g.out(["rev-parse", "HEAD"], repo)[:12],
    )
    assert snapshot(root) == before


def test_lines_git_am_keeps_are_not_refused() -> None:
    assert series.am_break("s\n\nbody\n----\n---x\n--- \tx\n - diff -u\nIndexes: 1\n") is None


def test_a_why_written_as_key_value_lines_is_named(one_patch: Upstream) -> None:
    p = one_patch.root / "patches/mod/change-f10.patch"
    text = p.read_text()
    body = text[text.index("\n\n") + 2 : text.index("Upstream-Status:")]
    p.write_text(
        text.replace(body, "Why: f10 must return 100.\nNo-longer-needed-when: upstream has it.\n\n")
    )
    (problem,) = series.lint(one_patch.root)
    assert "lines of the form 'Key: value' read as trailers" in problem
    assert "'Why: f10 must return 100.'" in problem and "Write the why as sentences" in problem


def test_export_of_a_commit_queue_is_unchanged_by_these_rules(one_patch: Upstream) -> None:
    repo = _commit_in_work(one_patch.root, "mod: f20 returns 200\n\n" + WHY)
    names = [n for n, _ in queue.export(repo, "upstream/1.0", series.load(one_patch.root))]
    assert names == ["mod/change-f10.patch", "mod-f20-returns-200.patch"]
