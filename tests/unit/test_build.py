"""``vpq.wheels.build`` on the tiny upstream: the label names the series, the
platform choice is checked against the lock, inputs that do not lint are
refused, and ``dist/`` keeps one build (stale staging and other builds go)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq import cli
from vpq.core.errors import VpqError
from vpq.source import lock, series
from vpq.wheels import build

from tests.unit.tiny_upstream import Upstream


def test_the_label_follows_the_series_bytes(one_patch: Upstream) -> None:
    patches = series.load(one_patch.root)
    label = build.label_for(patches)
    assert label.startswith("eagle3.") and len(label) == len("eagle3.") + 8
    path = one_patch.root / "patches" / "mod" / "change-f10.patch"
    path.write_bytes(path.read_bytes().replace(b"return 100", b"return 101"))
    assert build.label_for(series.load(one_patch.root)) != label


def test_platforms_are_all_or_one_the_lock_pins(upstream: Upstream) -> None:
    pin = lock.load(upstream.root)
    assert build.platforms_for(pin, "all") == ["x86_64"]
    assert build.platforms_for(pin, "x86_64") == ["x86_64"]
    with pytest.raises(VpqError, match="aarch64"):
        build.platforms_for(pin, "aarch64")


def test_inputs_that_do_not_lint_are_refused(one_patch: Upstream) -> None:
    (one_patch.root / "patches" / "stray.patch").write_text("not in series\n")
    with pytest.raises(series.SeriesError, match="stray.patch"):
        build.load_inputs(one_patch.root)


def test_dist_keeps_one_build_and_no_stale_staging(tmp_path: Path) -> None:
    tags = "cp38-abi3-manylinux_2_31"
    old = tmp_path / f"vllm-1.0+eagle3.aaaaaaaa-1-{tags}_x86_64.whl"
    new_x86 = tmp_path / f"vllm-1.0+eagle3.bbbbbbbb-1-{tags}_x86_64.whl"
    new_arm = tmp_path / f"vllm-1.0+eagle3.bbbbbbbb-1-{tags}_aarch64.whl"
    other = tmp_path / f"torch-2.10.0-{tags}_x86_64.whl"
    for p in (old, new_x86, new_arm, other):
        p.write_bytes(b"")
    (tmp_path / ".staging-123" / "x").mkdir(parents=True)
    build.drop_other_builds(tmp_path, new_x86.name)
    build.remove_stale_staging(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [new_x86.name, new_arm.name, other.name]
    )


def test_a_build_parses_each_patch_once(
    one_patch: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vpq build` reads its inputs once for the reuse check, the lint and
    the build, whether it builds or reuses dist/."""
    parsed: list[str] = []
    real = series.parse_patch

    def counted(root: Path, name: str, data: bytes | None = None) -> series.Patch:
        parsed.append(name)
        return real(root, name, data)

    monkeypatch.setattr(series, "parse_patch", counted)
    names = series.read_series(one_patch.root)
    for _ in ("build", "reuse"):
        parsed.clear()
        assert cli.main(["--root", str(one_patch.root), "build", "--no-contract"]) == 0
        assert parsed == names
