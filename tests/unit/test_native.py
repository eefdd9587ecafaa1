"""vLLM's own build, the part after ``python -m build``: our manifest,
upstream's _version.py and upstream's tags, done with the ``wheel`` tool.
(The build itself needs a CUDA torch in its build env: see
tests/integration/test_backends.py and ``nox -s bench``.)"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import pytest
from vpq.core.files import record_hash
from vpq.wheels import audit, build, native, wheel

from tests.unit.tiny_upstream import Upstream


def _raw_like_setuptools(upstream: Upstream, dest: Path) -> Path:
    """What ``python -m build`` gives: the same files, its own _version.py,
    tagged for the build interpreter."""
    raw = dest / "vllm-1.0+eagle3.abc-cp311-cp311-linux_x86_64.whl"
    rows = []
    with (
        zipfile.ZipFile(upstream.wheel) as up,
        zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for info in up.infolist():
            name = info.filename.replace("vllm-1.0.dist-info", "vllm-1.0+eagle3.abc.dist-info")
            data = up.read(info)
            if name == "vllm/_version.py":
                data = (
                    b"__version__ = version = '1.0+eagle3.abc'\n__commit_id__ = commit_id = None\n"
                )
            if name.endswith("/RECORD"):
                continue
            out.writestr(name, data)
            rows.append(f"{name},{record_hash(data)},{len(data)}")
        rows.append("vllm-1.0+eagle3.abc.dist-info/RECORD,,")
        out.writestr("vllm-1.0+eagle3.abc.dist-info/RECORD", "\n".join(rows) + "\n")
    return raw


def test_finish_adds_manifest_and_upstream_version_file_and_retags(
    upstream: Upstream, tmp_path: Path
) -> None:
    raw = _raw_like_setuptools(upstream, tmp_path)
    built = native.finish(raw, upstream.wheel, "1.0+eagle3.abc", {"k": "v"}, tmp_path / "out")
    assert built.path.name == "vllm-1.0+eagle3.abc-1-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(built.path) as z:
        di = "vllm-1.0+eagle3.abc.dist-info"
        assert json.loads(z.read(f"{di}/{wheel.MANIFEST_NAME}")) == {"k": "v"}
        assert wheel.read_wheel_file(z.read(f"{di}/WHEEL")) == (
            ["cp38-abi3-manylinux_2_31_x86_64"],
            "1",
        )
        version_py = z.read("vllm/_version.py").decode()
        assert "__version__ = version = '1.0+eagle3.abc'" in version_py
        assert "__commit_id__ = commit_id = 'gabc1234'" in version_py  # upstream's commit
    # The same files as the overlay build of the same (empty) series.
    overlay = wheel.build(upstream.wheel, {}, "eagle3.abc", {"k": "v"}, tmp_path / "ov")
    with zipfile.ZipFile(upstream.wheel) as up:
        outside = [n for n in up.namelist() if ".dist-info/" not in n]
    assert audit.compare_backends(built.path, overlay.path) == len(outside)


def test_a_missing_build_tool_is_named_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default build_wheel session leaves pypa's build and wheel out
    (pyproject.toml's ``native`` extra); asking for this backend without
    them is refused in one sentence that says how to get them."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "build" else real(name, *a)
    )
    said = r"build and wheel, and build is not installed here: run it as `nox -s build_wheel"
    with pytest.raises(native.NativeBuildError, match=said):
        native.require_tools()


def test_build_wheels_refuses_the_backend_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal comes before the series is read, the sdist fetched or a
    tree prepared: here there is no checkout at all, and nothing is made."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wheel" else real(name, *a)
    )
    with pytest.raises(native.NativeBuildError, match="and wheel is not installed here"):
        build.build_wheels(tmp_path, backend="setuptools")
    with pytest.raises(build.BuildError, match="unknown backend 'cmake'"):
        build.build_wheels(tmp_path, backend="cmake")
    assert list(tmp_path.iterdir()) == []
