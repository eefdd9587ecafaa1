"""Cached venvs share identical files: each release's deps venv holds the
same torch (about 2 GiB of its 2.6 GiB), so the staircase's one venv per
release would not fit on a normal disk otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from vpq.envs import venv


@pytest.mark.skipif(shutil.which("hardlink") is None, reason="util-linux hardlink not installed")
def test_a_new_deps_venv_hard_links_the_bytes_the_newest_other_one_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPQ_CACHE_DIR", str(tmp_path / "cache"))
    envs = venv.envs_dir()
    big, other = bytes(range(256)) * 512, bytes(reversed(range(256))) * 512  # 128 KiB each
    for name, data in (("deps-old", big), ("deps-new", big)):
        (envs / name / "lib").mkdir(parents=True)
        (envs / name / "lib" / "torch.so").write_bytes(data)
        (envs / name / "lib" / "own.so").write_bytes(
            other if name == "deps-new" else b"\x01" * len(other)
        )
        (envs / name / "lib" / "small.py").write_bytes(b"x = 1\n")
    (envs / "deps-old" / ".complete").write_text("ok\n")
    venv.share_identical_files(envs / "deps-new")
    ino = lambda d, f: (envs / d / "lib" / f).stat().st_ino  # noqa: E731
    assert ino("deps-new", "torch.so") == ino("deps-old", "torch.so")
    assert ino("deps-new", "own.so") != ino("deps-old", "own.so")
    assert (envs / "deps-new" / "lib" / "torch.so").read_bytes() == big
