"""The CLI prints one paragraph, no traceback, and changes no input on error."""

from __future__ import annotations

from pathlib import Path

from vpq.core.files import sha256_file

from tests.unit.cli import assert_clean_error, run_cli, snapshot
from tests.unit.tiny_upstream import Upstream


def test_build_prints_paths_and_sha256(one_patch: Upstream) -> None:
    proc = run_cli(one_patch.root, "build", "--no-contract")
    assert proc.returncode == 0, proc.stderr
    (whl,) = (one_patch.root / "dist").glob("*.whl")
    lines = proc.stdout.splitlines()
    assert lines[0] == f"built: {whl}"
    assert lines[1] == f"  sha256 {sha256_file(whl)}"
    assert (
        lines[2]
        == "  audit ok: 9 members; differ from upstream: vllm/_version.py, vllm/mod.py + dist-info"
    )
    assert lines[-1] == "contract check skipped"


def test_bad_inputs_give_one_paragraph_and_change_nothing(one_patch: Upstream) -> None:
    root = one_patch.root
    assert run_cli(root, "build", "--no-contract").returncode == 0
    lockf, seriesf = root / "upstream.lock", root / "series"
    good_lock, good_series = lockf.read_text(), seriesf.read_text()
    patchf = root / "patches/mod/change-f10.patch"
    good_patch = patchf.read_bytes()
    cases = [
        (lambda: lockf.unlink(), ["upstream.lock: not found"]),
        (lambda: lockf.write_text("[upstream\n"), ["upstream.lock: not valid TOML"]),
        (
            lambda: lockf.write_text(
                good_lock.replace(good_lock.split('sha256 = "')[1][:64], "0" * 64)
            ),
            # a pin the cache does not hold, and no network: cold cache offline
            ["vllm-1.0.tar.gz is not in the download cache", "cannot be downloaded"],
        ),
        (lambda: seriesf.write_text(good_series + "mod/change-f10.patch\n"), ["listed twice"]),
        (lambda: seriesf.write_text(good_series + "gone.patch\n"), ["gone.patch does not exist"]),
        (
            lambda: patchf.write_text("Subject: x\n\nnot a diff\n"),
            ["change-f10.patch: not a patch"],
        ),
        (
            lambda: patchf.write_bytes(
                good_patch.replace(b"-    return 10\n", b"-    return 11\n")
            ),
            ["change-f10.patch: vllm/mod.py, hunk #1", "rebase_upstream"],
        ),
    ]
    for breaker, needles in cases:
        lockf.write_text(good_lock)
        seriesf.write_text(good_series)
        patchf.write_bytes(good_patch)
        breaker()
        before = snapshot(root)
        proc = run_cli(root, "build", "--no-contract")
        assert_clean_error(proc, *needles)
        assert snapshot(root) == before


def test_usage_error_exits_2(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "build")
    assert proc.returncode == 2 and "not a patch-queue repository" in proc.stderr


def test_an_unchanged_build_reuses_dist_and_any_change_rebuilds(one_patch: Upstream) -> None:
    root = one_patch.root
    first = run_cli(root, "build", "--no-contract")
    assert first.returncode == 0 and "built: " in first.stdout, first.stderr
    (whl,) = (root / "dist").glob("*.whl")
    mtime = whl.stat().st_mtime_ns
    again = run_cli(root, "build", "--no-contract")
    assert "up to date" in again.stdout and whl.stat().st_mtime_ns == mtime
    assert again.stdout.split("sha256 ")[1][:64] == first.stdout.split("sha256 ")[1][:64]
    forced = run_cli(root, "build", "--no-contract", "--force")
    assert "built: " in forced.stdout and whl.stat().st_mtime_ns != mtime
    whl.touch()  # someone changed dist/: build again
    assert "built: " in run_cli(root, "build", "--no-contract").stdout
    patch = root / "patches/mod/change-f10.patch"
    patch.write_bytes(patch.read_bytes().replace(b"No longer needed", b"No longer needed at all"))
    changed = run_cli(root, "build", "--no-contract")  # a new series: a new label
    assert "built: " in changed.stdout and not whl.exists(), changed.stderr
