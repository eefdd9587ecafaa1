"""``vpq cache``: sizes of the cache's parts, and a pruning that is a dry run
unless told, keeps what this checkout uses and what was used lately, and
leaves an entry another process holds. On a fake cache ($VPQ_CACHE_DIR)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from filelock import FileLock
from vpq.checks import cache
from vpq.core.files import sha256_file
from vpq.envs import venv
from vpq.source import fetch, lock
from vpq.wheels import build

from tests.unit.cli import run_cli
from tests.unit.tiny_upstream import FILES, Upstream, write_sdist

OLD = time.time() - 30 * cache.DAY_S


def _venv(name: str, used: float, size: int = 1000) -> Path:
    d = venv.envs_dir() / name
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "big.so").write_bytes(b"x" * size)
    (d / ".complete").write_text("ok\n")
    os.utime(d / ".complete", (used, used))
    (Path(str(d) + ".lock")).touch()
    return d


def _pin_an_sdist_with_requirements(root: Path) -> bytes:
    """Pin a tiny sdist that has ``requirements/common.txt`` (the deps venv's
    key); return that file's bytes."""
    common = "numpy\n"
    sdist = root.parent / "files" / "with-requirements" / "vllm-1.0.tar.gz"
    sdist.parent.mkdir(parents=True)
    write_sdist(sdist, {**FILES, "requirements/common.txt": common})
    sha = sha256_file(sdist)
    dest = fetch.cached_path(sdist.name, sha)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(sdist.read_bytes())
    pin = lock.load(root)
    text = (root / "upstream.lock").read_text().replace(pin.sdist.sha256, sha)
    (root / "upstream.lock").write_text(text)
    assert build.common_txt(lock.load(root)) == common.encode()
    return common.encode()


def _fake_cache(root: Path) -> dict[str, Path]:
    """Next to the tiny pin's real downloads: the pinned release's deps venv
    (used long ago, but needed), an old deps venv of another release, a
    recent wheel venv, an old download of another release and an old
    contract verdict."""
    key = venv.deps_key(_pin_an_sdist_with_requirements(root))
    other = fetch.cache_dir() / "sha256" / ("0" * 64) / "vllm-9.9.tar.gz"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"y" * 2000)
    os.utime(other, (OLD, OLD))
    verdict = fetch.cache_dir() / "contract" / "abc.json"
    verdict.parent.mkdir()
    verdict.write_text("{}")
    os.utime(verdict, (OLD, OLD))
    return {
        "current": _venv(f"deps-{key}", OLD),
        "stale": _venv("deps-0123456789ab", OLD, 5000),
        "recent": _venv("wheel-0123456789ab", time.time()),
        "download": other,
        "verdict": verdict,
    }


def test_the_report_sizes_each_part_and_says_what_this_checkout_needs(
    one_patch: Upstream,
) -> None:
    made = _fake_cache(one_patch.root)
    proc = run_cli(one_patch.root, "cache")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"cache: {fetch.cache_dir()}" in out
    assert "downloads: 4," in out and "venvs: 3, 7.0 kB" in out and "contract verdicts: 1," in out
    assert f"envs/{made['current'].name}  (the CPU venv of vllm 1.0)" in out
    assert out.count("(pinned by upstream.lock)") == 2  # the sdist and the wheel
    assert "   5.0 kB  used  30.0 days ago  envs/deps-0123456789ab" in out


def test_prune_is_a_dry_run_unless_told_and_keeps_what_is_needed_or_recent(
    one_patch: Upstream,
) -> None:
    made = _fake_cache(one_patch.root)
    proc = run_cli(one_patch.root, "cache", "--prune")
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout.split("would remove (dry run; --yes removes): ")[1].splitlines()
    assert tail[0] == "3 entries not needed by this checkout and unused for 14 days, 7.0 kB"
    gone = [cache.shown(made[k], fetch.cache_dir()) for k in ("stale", "download", "verdict")]
    assert sorted(tail[1:]) == sorted(f"  {g}" for g in gone)
    assert all(p.exists() for p in made.values())
    proc = run_cli(one_patch.root, "cache", "--prune", "--yes")
    assert proc.returncode == 0 and "removed: 3 entries" in proc.stdout, proc.stdout
    assert [k for k, p in made.items() if p.exists()] == ["current", "recent"]
    pin = lock.load(one_patch.root)
    assert fetch.cached_path(pin.sdist.filename, pin.sdist.sha256).is_file()


def test_older_than_zero_takes_every_unneeded_entry_but_one_in_use_stays(
    one_patch: Upstream,
) -> None:
    made = _fake_cache(one_patch.root)
    with FileLock(str(made["stale"]) + ".lock"):
        proc = run_cli(one_patch.root, "cache", "--prune", "--older-than", "0", "--yes")
    assert proc.returncode == 0, proc.stderr
    # the stale venv is locked; the pinned release's old sdist goes too now
    assert "removed: 4 entries not needed by this checkout and unused for 0 days" in proc.stdout
    assert "  envs/deps-0123456789ab  (in use now: left alone)" in proc.stdout
    assert [k for k, p in made.items() if p.exists()] == ["current", "stale"]


def test_hard_linked_files_count_once(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"z" * 4096)
    os.link(tmp_path / "a", tmp_path / "b")
    assert cache.tree_size(tmp_path) == 4096


def test_yes_without_prune_is_a_usage_error(one_patch: Upstream) -> None:
    proc = run_cli(one_patch.root, "cache", "--yes")
    assert proc.returncode == 2 and "--yes goes with --prune" in proc.stderr


def test_the_docs_cache_commands_are_ones_the_tool_takes() -> None:
    import re
    import shlex

    from vpq import cli

    from tests.support.paths import REPO_ROOT

    section = (REPO_ROOT / "docs" / "cache.md").read_text()
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block
    lines = [ln.split("  #")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 3
    for line in lines:
        words = shlex.split(line)
        assert words[:3] == [".venv/bin/nox", "-s", "cache"]
        args = words[4:] if "--" in words else []
        ns = cli.parser().parse_args(["cache", *args])
        assert ns.func is cli.cmd_cache
    assert ns.prune and ns.yes and ns.older_than == 0
