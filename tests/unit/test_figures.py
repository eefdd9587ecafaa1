"""README's figures block is generated from docs/figures.toml, and a
recorded figure is README's own line timed in a clone of the commit.

The record case runs a real ``vpq figures record`` on a small git
repository whose README's build line is a quick shell command, so the
clone, the cold caches, the exit status and the block are the real ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from vpq.checks import figures

REPO_ROOT = Path(__file__).resolve().parents[2]

README = """# t

## The two commands

```bash
{build}   # build
python3 -m venv .venv && .venv/bin/nox -s tests   # tests
```

{begin}
{end}
"""


def _repo(tmp_path: Path, build: str) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "series").write_text("")
    text = README.format(build=build, begin=figures.BEGIN, end=figures.END)
    (root / "README.md").write_text(text)
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "t"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, env=_git_env())
    return root


def _git_env() -> dict[str, str]:
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    return {**os.environ, **ident, "GIT_COMMITTER_EMAIL": "t@t"}


def test_readme_block_is_rendered_from_the_figures_file() -> None:
    """The block in README is what `nox -s figures` writes: never typed."""
    assert not figures.sync_readme(REPO_ROOT, check=True), "run `nox -s figures`"


def test_readme_line_is_the_two_commands_line() -> None:
    line = figures.readme_line(REPO_ROOT, "build_wheel")
    assert line.endswith(".venv/bin/nox -s build_wheel") and line.startswith("python3 -m venv")


def test_record_times_readmes_line_in_a_clone_with_cold_caches(tmp_path: Path) -> None:
    """The line runs in a clone of HEAD (not the checkout), under the Python
    asked, with the cache variables pointing at fresh empty folders."""
    code = 'import os,sys; print(os.path.realpath(sys.executable), os.environ["UV_CACHE_DIR"])'
    probe = f"python3 -c '{code}'"
    build = f"test ! -e marker && {probe} > {tmp_path}/seen && echo '=== 3 passed in 1.0s ==='"
    root = _repo(tmp_path, build + " # nox -s build_wheel")
    (root / "marker").write_text("not committed: the clone has no such file")
    f = figures.record(root, "build_wheel", "cold", sys.executable, timeout=120)
    exe, uv_cache = (tmp_path / "seen").read_text().split()
    assert Path(exe).resolve() == Path(sys.executable).resolve()
    assert "vpq-figures-" in uv_cache and not Path(uv_cache).exists()
    assert (f.exit_status, f.summary) == (0, "3 passed")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    assert f.commit == head.stdout.strip()
    stored = tomllib.loads((root / figures.FIGURES_FILE).read_text())
    assert stored["build_wheel"]["cold"]["commit"] == f.commit
    assert "| `nox -s build_wheel` | cold | " in (root / "README.md").read_text()


def test_a_failing_run_is_recorded_and_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path, "exit 3 # nox -s build_wheel")
    with pytest.raises(figures.FiguresError, match="exited 3"):
        figures.record(root, "build_wheel", "warm", sys.executable, timeout=120)
    assert "| exit status 3 |" in (root / "README.md").read_text()


def test_a_run_past_its_timeout_is_killed(tmp_path: Path) -> None:
    root = _repo(tmp_path, "echo started; sleep 30; echo late # nox -s build_wheel")
    with pytest.raises(figures.FiguresError, match="exited -9"):
        figures.record(root, "build_wheel", "warm", sys.executable, timeout=0.5)


def test_a_readme_without_the_block_is_one_clear_error(tmp_path: Path) -> None:
    root = _repo(tmp_path, "true # nox -s build_wheel")
    (root / "README.md").write_text((root / "README.md").read_text().replace(figures.END, ""))
    with pytest.raises(figures.FiguresError, match="no figures block"):
        figures.sync_readme(root)
