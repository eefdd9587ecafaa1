"""Applying (git am, zero fuzz and offset), exporting, and plain patch -p1."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from vpq.core.compat import tarfile
from vpq.source import git as g
from vpq.source import queue, series
from vpq.wheels import build

from tests.unit.tiny_upstream import MOD, Upstream, replace_line


def test_series_applies_as_one_commit_per_patch(one_patch: Upstream) -> None:
    prep = build.prepare(one_patch.root)
    assert (
        queue.commits_since(prep.repo, prep.upstream_ref)
        and len(queue.commits_since(prep.repo, prep.upstream_ref)) == 1
    )
    assert prep.changed == {"vllm/mod.py": "M"}
    assert "return 100" in (prep.repo / "vllm/mod.py").read_text()


def test_export_of_an_unchanged_series_is_byte_identical(one_patch: Upstream) -> None:
    prep = build.prepare(one_patch.root)
    before = (one_patch.root / "patches/mod/change-f10.patch").read_bytes()
    entries = queue.export(prep.repo, prep.upstream_ref, prep.patches)
    assert entries == [("mod/change-f10.patch", before)]
    # And again, from a second apply: still the same bytes.
    prep2 = build.prepare(one_patch.root)
    assert queue.export(prep2.repo, prep2.upstream_ref, prep2.patches) == entries


def test_a_patch_whose_context_moved_is_refused_with_its_offset(one_patch: Upstream) -> None:
    # A second patch written against upstream, applied after one that adds
    # two lines above it: git am would apply it at an offset; we refuse.
    one_patch.commit_patch(
        "mod/change-f20.patch",
        {
            "vllm/mod.py": replace_line(
                (one_patch.work / "vllm/mod.py").read_text(), "return 20\n", "return 200\n"
            )
        },
        "mod: make f20 return 200",
    )
    first = one_patch.root / "patches/mod/add-header.patch"
    g.git(["checkout", "-q", "-f", "-B", "hdr", "upstream/1.0"], one_patch.work)
    (one_patch.work / "vllm/mod.py").write_text("# header\n# more\n" + MOD)
    g.git(
        [
            "commit",
            "-qam",
            "mod: add header\n\nA header for the test.\nIt moves f10 down two lines.\n\n"
            "Upstream-Status: Pending\nForwarded: no",
        ],
        one_patch.work,
    )
    first.write_bytes(queue.format_patch(one_patch.work, "HEAD"))
    (one_patch.root / "series").write_text(
        "mod/add-header.patch\nmod/change-f10.patch\nmod/change-f20.patch\n"
    )
    with pytest.raises(queue.ApplyError) as exc:
        build.prepare(one_patch.root)
    msg = str(exc.value)
    assert "patches/mod/change-f10.patch: vllm/mod.py, hunk #1 (@@ -" in msg
    assert "offset +2" in msg and "rebase_upstream" in msg


def test_a_patch_that_does_not_apply_names_patch_file_and_hunk(one_patch: Upstream) -> None:
    p = one_patch.root / "patches/mod/change-f10.patch"
    p.write_bytes(p.read_bytes().replace(b"-    return 10\n", b"-    return 99\n"))
    with pytest.raises(queue.ApplyError) as exc:
        build.prepare(one_patch.root)
    msg = str(exc.value)
    assert str(p) in msg and "vllm/mod.py, hunk #1" in msg
    assert "its context is not in the file" in msg and "nox -s rebase_upstream" in msg


def test_series_applies_with_plain_patch_p1(one_patch: Upstream, tmp_path: Path) -> None:
    if not shutil.which("patch"):
        pytest.skip("GNU patch is not installed")
    plain = tmp_path / "plain"
    with tarfile.open(one_patch.sdist) as tar:
        tar.extractall(plain, filter="data")
    src = plain / "vllm-1.0"
    for name in series.read_series(one_patch.root):
        proc = subprocess.run(
            [
                "patch",
                "-p1",
                "--fuzz=0",
                "--forward",
                "--batch",
                "-i",
                str(one_patch.root / "patches" / name),
            ],
            cwd=src,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "offset" not in proc.stdout and "fuzz" not in proc.stdout
    assert "return 100" in (src / "vllm/mod.py").read_text()


def test_upstream_from_git_source_uses_the_pinned_commit(
    one_patch: Upstream, tmp_path: Path
) -> None:
    """--upstream-source git, against a local repository fixture."""
    remote = tmp_path / "upstream.git"
    g.git(["init", "-q", "--bare", str(remote)], tmp_path)
    g.git(["push", "-q", str(remote), "upstream/1.0:refs/heads/main"], one_patch.work)
    commit = g.out(["rev-parse", "upstream/1.0^{commit}"], one_patch.work)
    g.git(["tag", "v1.0", commit], one_patch.work)
    g.git(["push", "-q", str(remote), "v1.0"], one_patch.work)
    lockf = one_patch.root / "upstream.lock"
    lockf.write_text(lockf.read_text().replace('commit = "abc1234"', f'commit = "{commit[:12]}"'))
    prep = build.prepare(one_patch.root, source="git")
    assert g.out(["rev-parse", "upstream/1.0^{commit}"], prep.repo) == commit
    assert prep.changed == {"vllm/mod.py": "M"}


def test_git_source_refuses_a_tag_at_another_commit(one_patch: Upstream, tmp_path: Path) -> None:
    remote = tmp_path / "upstream.git"
    g.git(["init", "-q", "--bare", str(remote)], tmp_path)
    g.git(["tag", "v1.0", "upstream/1.0"], one_patch.work)
    g.git(["push", "-q", str(remote), "v1.0"], one_patch.work)
    with pytest.raises(build.tree.TreeError, match="upstream.lock pins abc1234"):
        build.prepare(one_patch.root, source="git")


def test_applying_again_refuses_to_discard_unexported_commits(one_patch: Upstream) -> None:
    prep = build.prepare(one_patch.root)
    (prep.repo / "vllm/mod.py").write_text("edited\n")
    with pytest.raises(
        build.BuildError, match=r"uncommitted changes to vllm/mod.py.*nox -s export"
    ):
        build.prepare(one_patch.root)
    g.git(
        [
            "commit",
            "-qam",
            "mod: more work\n\nThe test adds work in build/work.\nIt must not be lost.\n\n"
            "Upstream-Status: Pending\nForwarded: no",
        ],
        prep.repo,
    )
    with pytest.raises(
        build.BuildError, match=r"commits on branch patched that are not in patches/"
    ):
        build.prepare(one_patch.root)
    # Exporting keeps the work; then applying again is fine.
    series.write(one_patch.root, queue.export(prep.repo, prep.upstream_ref, prep.patches))
    queue.record_tool_head(prep.repo)  # what `vpq export` does after writing
    assert len(build.prepare(one_patch.root).patches) == 2


def test_a_failed_apply_does_not_block_the_next_one(one_patch: Upstream) -> None:
    p = one_patch.root / "patches/mod/change-f10.patch"
    good = p.read_bytes()
    p.write_bytes(good.replace(b"-    return 10\n", b"-    return 99\n"))
    with pytest.raises(queue.ApplyError):
        build.prepare(one_patch.root)
    p.write_bytes(good)
    assert build.prepare(one_patch.root).changed == {"vllm/mod.py": "M"}
