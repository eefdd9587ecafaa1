"""Overlay build and audit on the tiny upstream wheel."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from vpq.core.files import sha256_file
from vpq.wheels import audit, build, wheel

from tests.unit.tiny_upstream import MOD, Upstream, replace_line


def test_wheel_has_upstream_tags_label_version_and_manifest(one_patch: Upstream) -> None:
    (res,) = build.build_wheels(one_patch.root)
    label = build.label_for(build.series.load(one_patch.root))
    assert res.wheel.path.name == f"vllm-1.0+{label}-1-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(res.wheel.path) as z:
        di = f"vllm-1.0+{label}.dist-info"
        assert f"Version: 1.0+{label}\n" in z.read(f"{di}/METADATA").decode()
        assert "Tag: cp38-abi3-manylinux_2_31_x86_64\n" in z.read(f"{di}/WHEEL").decode()
        assert f"__version__ = version = '1.0+{label}'" in z.read("vllm/_version.py").decode()
        man = json.loads(z.read(f"{di}/{wheel.MANIFEST_NAME}"))
        assert man["upstream"]["version"] == "1.0"
        assert man["patches"][0]["name"] == "mod/change-f10.patch"
        assert man["patches"][0]["sha256"] == sha256_file(
            one_patch.root / "patches/mod/change-f10.patch"
        )
        assert "return 100" in z.read("vllm/mod.py").decode()
        # Unchanged members keep upstream's compressed bytes.
        with zipfile.ZipFile(one_patch.wheel) as up:
            a, b = z.getinfo("vllm/_C.abi3.so"), up.getinfo("vllm/_C.abi3.so")
            assert (a.compress_type, a.compress_size, a.CRC) == (
                b.compress_type,
                b.compress_size,
                b.CRC,
            )
        assert z.testzip() is None
    assert res.report.differing == ("vllm/_version.py", "vllm/mod.py")


def test_same_inputs_give_a_byte_identical_wheel(one_patch: Upstream, tmp_path: Path) -> None:
    (a,) = build.build_wheels(one_patch.root, out_dir=tmp_path / "a")
    shutil.rmtree(one_patch.root / "build")
    (b,) = build.build_wheels(one_patch.root, out_dir=tmp_path / "b")
    assert a.wheel.sha256 == b.wheel.sha256 == sha256_file(b.wheel.path)


def test_the_wheel_installs_and_pip_sees_its_files(one_patch: Upstream, tmp_path: Path) -> None:
    import subprocess
    import sys

    (res,) = build.build_wheels(one_patch.root)
    target = tmp_path / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(res.wheel.path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "return 100" in (target / "vllm/mod.py").read_text()


def test_a_series_touching_csrc_is_refused(upstream: Upstream) -> None:
    upstream.commit_patch(
        "csrc/kernel.patch", {"csrc/kernel.cu": "// changed\n"}, "csrc: change the kernel"
    )
    dist = upstream.root / "dist"
    with pytest.raises(build.BuildError, match=r"changes csrc/kernel.cu, which the precompiled"):
        build.build_wheels(upstream.root)
    assert not dist.exists() or not any(dist.glob("*.whl"))


def test_test_only_changes_are_not_shipped_and_the_audit_passes(upstream: Upstream) -> None:
    upstream.commit_patch(
        "tests/t.patch", {"tests/test_mod.py": "def test(): assert 1\n"}, "tests: stronger test"
    )
    (res,) = build.build_wheels(upstream.root)
    assert res.report.differing == ("vllm/_version.py",)


def test_new_files_are_added_to_the_wheel(upstream: Upstream) -> None:
    upstream.commit_patch("new.patch", {"vllm/extra.py": "X = 1\n"}, "vllm: add extra module")
    (res,) = build.build_wheels(upstream.root)
    with zipfile.ZipFile(res.wheel.path) as z:
        assert z.read("vllm/extra.py") == b"X = 1\n"
    assert "vllm/extra.py" in res.report.differing


def test_audit_rejects_a_difference_the_series_does_not_explain(
    one_patch: Upstream, tmp_path: Path
) -> None:
    (res,) = build.build_wheels(one_patch.root)
    overlay = {"vllm/mod.py": replace_line(MOD, "return 10\n", "return 100\n").encode()}
    # A wheel with one extra changed member, as a buggy build might make.
    evil = wheel.build(
        one_patch.wheel, {**overlay, "vllm/__init__.py": b"# sneaky\n"}, "eagle3.x", {}, tmp_path
    )
    with pytest.raises(
        audit.AuditError,
        match=r"vllm/__init__.py differs from upstream but the series does not change it",
    ):
        audit.audit(evil.path, one_patch.wheel, overlay)
    # And one that misses the series' change.
    lazy = wheel.build(one_patch.wheel, {}, "eagle3.y", {}, tmp_path)
    with pytest.raises(audit.AuditError, match=r"vllm/mod.py should differ from upstream"):
        audit.audit(lazy.path, one_patch.wheel, overlay)
    audit.audit(res.wheel.path, one_patch.wheel, overlay)


def test_audit_rejects_wrong_content_for_a_changed_file(
    one_patch: Upstream, tmp_path: Path
) -> None:
    overlay = {"vllm/mod.py": replace_line(MOD, "return 10\n", "return 100\n").encode()}
    other = wheel.build(
        one_patch.wheel, {"vllm/mod.py": b"something else\n"}, "eagle3.z", {}, tmp_path
    )
    with pytest.raises(
        audit.AuditError, match=r"vllm/mod.py does not hold the patched tree's bytes"
    ):
        audit.audit(other.path, one_patch.wheel, overlay)


def test_a_failed_build_leaves_dist_as_it_was(one_patch: Upstream) -> None:
    dist = one_patch.root / "dist"
    build.build_wheels(one_patch.root)
    before = {p.name: p.read_bytes() for p in dist.iterdir()}
    p = one_patch.root / "patches/mod/change-f10.patch"
    p.write_bytes(p.read_bytes().replace(b"-    return 10\n", b"-    return 99\n"))
    with pytest.raises(build.queue.ApplyError):
        build.build_wheels(one_patch.root)
    assert {q.name: q.read_bytes() for q in dist.iterdir()} == before


def test_local_version_must_be_pep440() -> None:
    assert wheel.local_version("0.17.1", "eagle3.1a2b3c4d") == "0.17.1+eagle3.1a2b3c4d"
    with pytest.raises(wheel.WheelError, match="already has a local label"):
        wheel.local_version("0.17.1+cu12", "eagle3.1")


def test_a_build_for_one_platform_keeps_the_other_platforms_wheel_of_the_same_series(
    one_patch: Upstream, tmp_path: Path
) -> None:
    dist = one_patch.root / "dist"
    dist.mkdir(exist_ok=True)
    other = (
        dist / f"vllm-1.0+{build.label_for(build.series.load(one_patch.root))}"
        "-1-cp38-abi3-manylinux_2_31_aarch64.whl"
    )
    other.write_bytes(b"same series, other platform")
    stale = dist / "vllm-1.0+eagle3.00000000-cp38-abi3-manylinux_2_31_x86_64.whl"
    stale.write_bytes(b"earlier series")
    build.build_wheels(one_patch.root, platform="x86_64")
    assert other.exists() and not stale.exists()
