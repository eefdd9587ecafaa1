"""`nox -s rebase_upstream` on real upstream sdists (issue cases).

Each test works on a copy of the repository's inputs (series, patches/,
upstream.lock) in a temporary directory, through the CLI, as a user would.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from vpq import git as g
from vpq import lock, series

from tests.conftest import REPO_ROOT

SPECULATIVE = "vllm/config/speculative.py"
OUR_NAMES = ["deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25"]


# The cases below move the EAGLE-3 feature backport: the five patches that
# v0.18.0 absorbed. Later entries in the series (fixes from newer releases
# and our own pipeline-parallel fix) survive a move to 0.18.1 by design, so
# the fixture takes only these five, as the series read when the cases
# were written.
FEATURE_BACKPORT = [
    "model_executor/models/deepseek_v2-import-SupportsEagle3.patch",
    "model_executor/models/deepseek_v2-collect-eagle3-aux-hidden-states.patch",
    "model_executor/models/kimi_k25-delegate-eagle3-interface-to-language-model.patch",
    "config/speculative-allow-eagle3-for-deepseek-and-kimi.patch",
    "v1/spec_decode/eagle-map-kimi_k25-media-placeholder-token.patch",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    shutil.copy(REPO_ROOT / "upstream.lock", r / "upstream.lock")
    assert series.read_series(REPO_ROOT)[: len(FEATURE_BACKPORT)] == FEATURE_BACKPORT
    (r / "series").write_text("".join(f"{name}\n" for name in FEATURE_BACKPORT))
    for name in FEATURE_BACKPORT:
        (r / "patches" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / "patches" / name, r / "patches" / name)
    return r


def inputs(root: Path) -> dict[str, bytes]:
    files = [root / "series", root / "upstream.lock", *sorted((root / "patches").rglob("*"))]
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file()}


def vpq(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vpq", "--root", str(root), "rebase", *args],
        capture_output=True, text=True, timeout=1800,
    )


def resolve_allowlist_conflict(root: Path) -> None:
    """What a person would do: keep the target's allowlist and add our four
    model types to it."""
    work = root / "build" / "work"
    g.git(["checkout", "--ours", SPECULATIVE], work)
    path = work / SPECULATIVE
    text = path.read_text()
    m = re.search(r"\n        (\w+_supported) = \[\n.*?\n(        \]\n)", text, re.S)
    assert m, "no allowlist found"
    add = "".join(f'            "{n}",\n' for n in OUR_NAMES)
    path.write_text(text[: m.start(2)] + add + text[m.start(2):])
    g.git(["add", SPECULATIVE], work)


def test_0_17_1_to_0_18_1_absorbs_every_patch_and_empties_the_series(root: Path) -> None:
    proc = vpq(root, "0.18.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    rows = [ln for ln in proc.stdout.splitlines() if ".patch" in ln]
    assert len(rows) == 5 and all(" absorbed " in r and "Applied-Upstream: 0.18.1" in r for r in rows)
    signals = " ".join(rows)
    for signal in ("empty", "reverse-applies", "contract", "3-way merge conflicted"):
        assert signal in signals
    assert series.read_series(root) == [] and not list((root / "patches").rglob("*.patch"))
    pin = lock.load(root)
    assert (pin.version, pin.tag, pin.commit) == ("0.18.1", "v0.18.1", "a26e8dc7f")
    assert pin.sdist.sha256 == "8d18eff1c4ed21eb8cf7a45a1d1b34752d5ec287e79186e451d5c2f797cacdb7"
    assert set(pin.wheels) == {"x86_64", "aarch64"}
    report = (root / "build/rebase/report-0.17.1-to-0.18.1.md").read_text()
    assert report.count("Applied-Upstream: 0.18.1") == 5
    # and build_wheel ran against the new pin
    assert "built " in proc.stdout and "vllm-0.18.1+eagle3." in proc.stdout


def test_round_trip_0_17_0_and_back_is_clean_and_byte_identical(root: Path) -> None:
    start = inputs(root)
    there = vpq(root, "0.17.0", "--no-build")
    assert there.returncode == 0, there.stdout + there.stderr
    assert lock.load(root).version == "0.17.0"
    back = vpq(root, "0.17.1", "--no-build")
    assert back.returncode == 0, back.stdout + back.stderr
    for out in (there.stdout, back.stdout):
        rows = [ln for ln in out.splitlines() if ".patch" in ln]
        assert len(rows) == 5 and all(" clean " in r for r in rows), out
    assert inputs(root) == start


def test_0_16_0_conflict_stops_abort_restores_continue_finishes_and_back_is_identical(root: Path) -> None:
    start = inputs(root)
    stopped = vpq(root, "0.16.0", "--no-build")
    assert stopped.returncode == 1
    assert f"conflicts in {SPECULATIVE}" in stopped.stderr
    assert "nox -s rebase_upstream -- --continue" in stopped.stderr
    assert "nox -s rebase_upstream -- --abort" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert inputs(root) == start
    work = root / "build" / "work"
    assert (work / ".git" / "CHERRY_PICK_HEAD").exists()  # normal git state
    # the others rebase by 3-way merge
    assert stopped.stdout.count(" rebased ") == 3

    aborted = vpq(root, "--abort")
    assert aborted.returncode == 0 and inputs(root) == start

    assert vpq(root, "0.16.0", "--no-build").returncode == 1
    early = vpq(root, "--continue", "--no-build")
    assert early.returncode == 1 and f"still unresolved in {work}: {SPECULATIVE}" in early.stderr
    resolve_allowlist_conflict(root)
    done = vpq(root, "--continue", "--no-build")
    assert done.returncode == 0, done.stdout + done.stderr
    assert lock.load(root).version == "0.16.0"
    assert "resolved by hand" in done.stdout
    assert len(series.read_series(root)) == 5

    again = vpq(root, "0.17.1", "--no-build")
    assert again.returncode == 1 and f"conflicts in {SPECULATIVE}" in again.stderr
    resolve_allowlist_conflict(root)
    home = vpq(root, "--continue", "--no-build")
    assert home.returncode == 0, home.stdout + home.stderr
    assert inputs(root) == start


def test_0_14_1_has_no_kimi_k25_so_the_rebase_fails_and_changes_nothing(root: Path) -> None:
    start = inputs(root)
    proc = vpq(root, "0.14.1", "--no-build")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "vllm 0.14.1 has no vllm/model_executor/models/kimi_k25.py" in proc.stderr
    assert inputs(root) == start
    assert not (root / "build/rebase/state.json").exists()


def test_check_reports_several_releases_and_changes_nothing(root: Path) -> None:
    start = inputs(root)
    proc = vpq(root, "--check", "0.17.0", "0.18.1", "0.14.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "vllm 0.17.1 -> 0.17.0" in out and "vllm 0.17.1 -> 0.18.1" in out
    assert "cannot rebase: vllm 0.14.1 has no vllm/model_executor/models/kimi_k25.py" in out
    assert inputs(root) == start
