"""``vpq.envs.gpu``: CUDA detection, the no-GPU path of ``nox -s gpu_tests``, wheel
selection and the pytest command line. The GPU run itself is tests/gpu."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from vpq.envs import gpu
from vpq.wheels import build

from tests.unit.tiny_upstream import Upstream


def _fake_smi(tmp_path: Path, out: str, code: int) -> str:
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\nprintf '%s\\n' '{out}'\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_no_device_node_and_no_nvidia_smi_is_one_line(tmp_path: Path) -> None:
    reason = gpu.no_cuda_reason(dev=tmp_path, smi="no-such-nvidia-smi-here")
    assert reason == f"no CUDA device: no {tmp_path}/nvidia* device node and no nvidia-smi on PATH"


def test_a_device_node_is_enough(tmp_path: Path) -> None:
    (tmp_path / "nvidia0").touch()
    assert gpu.no_cuda_reason(dev=tmp_path, smi=None) is None


def test_control_nodes_alone_are_not_a_device(tmp_path: Path) -> None:
    (tmp_path / "nvidiactl").touch()
    (tmp_path / "nvidia-uvm").touch()
    assert gpu.no_cuda_reason(dev=tmp_path, smi=None) is not None


def test_nvidia_smi_listing_a_gpu_is_enough(tmp_path: Path) -> None:
    smi = _fake_smi(tmp_path, "GPU 0: NVIDIA H200 (UUID: GPU-0)", 0)
    assert gpu.no_cuda_reason(dev=tmp_path / "dev", smi=smi) is None


def test_a_failing_nvidia_smi_is_reported(tmp_path: Path) -> None:
    smi = _fake_smi(
        tmp_path, "NVIDIA-SMI has failed because it could not communicate with the driver", 9
    )
    reason = gpu.no_cuda_reason(dev=tmp_path / "dev", smi=smi)
    assert reason is not None and "nvidia-smi lists none" in reason
    assert "could not communicate with the driver" in reason and "\n" not in reason


def test_main_without_cuda_prints_one_line_and_installs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gpu, "no_cuda_reason", lambda: "no CUDA device: test")
    assert gpu.main(["--root", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("gpu_tests skipped: no CUDA device: test\n", "")
    assert list(tmp_path.iterdir()) == []


def test_model_needs_drafter(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        gpu.main(["--model", "/m"])
    assert exc.value.code == 2
    assert "--model and --drafter go together" in capsys.readouterr().err


def test_pytest_command_passes_the_options_through(tmp_path: Path) -> None:
    ns, extra = gpu.parser().parse_known_args(
        ["--model", "m", "--drafter", "d", "--tensor-parallel-size", "8", "-x", "-k", "image"]
    )
    cmd = gpu.pytest_command(Path("/py"), ns, Path("/up"), extra)
    assert cmd == [
        "/py",
        "-m",
        "pytest",
        "tests/gpu",
        "tests/engine",
        "-p",
        "no:cacheprovider",
        "--engine-backend",
        "gpu",
        "--engine-mla-extra",
        "--model",
        os.path.abspath("m"),
        "--drafter",
        os.path.abspath("d"),
        "--tensor-parallel-size",
        "8",
        "--upstream-python",
        "/up",
        "--engine-upstream-python",
        "/up",
        "-x",
        "-k",
        "image",
    ]


@pytest.mark.skipif(
    build.host_platform() != "x86_64", reason="the tiny upstream has an x86_64 wheel only"
)
def test_host_wheel_builds_once_and_ignores_stale_wheels(one_patch: Upstream) -> None:
    dist = one_patch.root / "dist"
    dist.mkdir()
    stale = dist / "vllm-1.0+eagle3.00000000-cp38-abi3-manylinux_2_31_x86_64.whl"
    stale.write_bytes(b"not this one")
    first = gpu.host_wheel(one_patch.root)
    assert first.parent == dist and first != stale
    label = build.label_for(build.series.load(one_patch.root))
    assert first.name == f"vllm-1.0+{label}-1-cp38-abi3-manylinux_2_31_x86_64.whl"
    mtime = first.stat().st_mtime_ns
    assert gpu.host_wheel(one_patch.root) == first
    assert first.stat().st_mtime_ns == mtime, "an existing wheel is not rebuilt"
