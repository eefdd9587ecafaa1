"""The built wheel is a standard wheel: ``WHEEL`` is one header block whose
tags and build tag equal the file name's, the ``wheel`` tool round-trips it,
and a change in the builder's output comes with a new build tag."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from vpq.core.files import sha256_file
from vpq.wheels import audit, build, wheel

from tests.unit.tiny_upstream import Upstream

#: sha256 of ``_reference_build``'s wheel for each builder build tag. When the
#: builder's bytes change, bump ``wheel.BUILD_TAG`` and add its hash here, so
#: no two different wheels ever share a file name.
BUILDER_OUTPUT = {"1": "e64f85dde4069f0640cd82cbd4aeb37886d4ed56111bbcd4b75a36a31d4c0ce8"}


def _wheel_file(path: Path) -> bytes:
    with zipfile.ZipFile(path) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
        return z.read(name)


def _reference_build(upstream: Upstream, out: Path) -> wheel.BuiltWheel:
    """The builder on fixed inputs: the tiny upstream wheel, one changed and
    one added module, a fixed label and manifest."""
    overlay: dict[str, bytes | None] = {
        "vllm/mod.py": b"def f():\n    return 100\n",
        "vllm/new.py": b"X = 1\n",
    }
    return wheel.build(upstream.wheel, overlay, "eagle3.0123abcd", {"k": "v"}, out)


def test_wheel_file_is_one_header_block_with_the_file_names_tags(one_patch: Upstream) -> None:
    (res,) = build.build_wheels(one_patch.root)
    msg = BytesParser(policy=compat32).parsebytes(_wheel_file(res.wheel.path))
    _, _, build_tag, tags = parse_wheel_filename(res.wheel.path.name)
    assert msg.get_all("Tag") == [str(t) for t in tags] == ["cp38-abi3-manylinux_2_31_x86_64"]
    assert msg["Build"] == wheel.BUILD_TAG and build_tag == (int(wheel.BUILD_TAG), "")
    assert msg["Wheel-Version"] == "1.0" and msg["Root-Is-Purelib"] == "false"
    assert msg.get_payload() == ""  # nothing after the header block


def test_wheel_unpack_then_pack_reproduces_the_file_name(
    one_patch: Upstream, tmp_path: Path
) -> None:
    (res,) = build.build_wheels(one_patch.root)
    tool = [sys.executable, "-m", "wheel"]
    subprocess.run(
        [*tool, "unpack", "--dest", str(tmp_path / "u"), str(res.wheel.path)], check=True
    )
    (unpacked,) = (tmp_path / "u").iterdir()
    (tmp_path / "p").mkdir()  # wheel pack does not make it
    proc = subprocess.run(
        [*tool, "pack", "--dest-dir", str(tmp_path / "p"), str(unpacked)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (tmp_path / "p").iterdir()] == [res.wheel.path.name]


def test_audit_refuses_a_wheel_file_that_disagrees_with_the_file_name(
    upstream: Upstream, tmp_path: Path
) -> None:
    built = _reference_build(upstream, tmp_path / "a")
    bad = tmp_path / built.path.name
    with zipfile.ZipFile(built.path) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("/WHEEL"):
                data = wheel.rewrite_wheel_file(data, ["cp38-abi3-linux_x86_64"], None)
            zout.writestr(info, data)
    expected = {"vllm/mod.py": b"def f():\n    return 100\n", "vllm/new.py": b"X = 1\n"}
    audit.audit(built.path, upstream.wheel, expected)  # the real one passes
    with pytest.raises(audit.AuditError) as err:
        audit.audit(bad, upstream.wheel, expected)
    assert "WHEEL's Tag: headers ['cp38-abi3-linux_x86_64'] are not the file name's tags" in str(
        err.value
    )
    assert "WHEEL's Build: header is None, the file name's build tag '1'" in str(err.value)


def test_a_change_in_the_builders_bytes_comes_with_a_new_build_tag(
    upstream: Upstream, tmp_path: Path
) -> None:
    built = _reference_build(upstream, tmp_path)
    assert (
        built.path.name
        == f"vllm-1.0+eagle3.0123abcd-{wheel.BUILD_TAG}-cp38-abi3-manylinux_2_31_x86_64.whl"
    )
    assert BUILDER_OUTPUT.get(wheel.BUILD_TAG) == built.sha256, (
        "the overlay builder's output changed: bump wheel.BUILD_TAG and record the new "
        f"hash {built.sha256} for it in BUILDER_OUTPUT"
    )
    assert sha256_file(built.path) == built.sha256


def test_a_build_drops_wheels_of_another_build_tag_and_interrupted_staging(
    one_patch: Upstream,
) -> None:
    dist = one_patch.root / "dist"
    dist.mkdir()
    label = build.label_for(build.series.load(one_patch.root))
    untagged = (
        dist / f"vllm-1.0+{label}-cp38-abi3-manylinux_2_31_x86_64.whl"
    )  # the builder before tags
    untagged.write_bytes(b"same series, earlier builder")
    left = dist / ".staging-killed"  # what a SIGKILLed build leaves
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "partial.whl.tmp").write_bytes(b"half a wheel")
    (res,) = build.build_wheels(one_patch.root)
    assert sorted(p.name for p in dist.iterdir()) == [build.STAMP, res.wheel.path.name]
