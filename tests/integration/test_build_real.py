"""Build and audit on the real pinned upstream (vLLM 0.17.1 sdist + wheels)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import cpython_tags
from packaging.utils import parse_wheel_filename
from vpq.source import fetch, lock, queue, series
from vpq.source import git as g
from vpq.wheels import build, wheel

from tests.support.paths import REPO_ROOT

EXPECTED_CHANGED = (
    "vllm/_version.py",
    "vllm/config/multimodal.py",
    "vllm/config/speculative.py",
    "vllm/config/vllm.py",
    "vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py",
    "vllm/entrypoints/cli/serve.py",
    "vllm/entrypoints/openai/chat_completion/serving.py",
    "vllm/entrypoints/openai/run_batch.py",
    "vllm/entrypoints/openai/server_utils.py",
    "vllm/envs.py",
    "vllm/model_executor/models/__init__.py",
    "vllm/model_executor/models/deepseek_eagle3.py",  # added by the series (git status A)
    "vllm/model_executor/models/deepseek_v2.py",
    "vllm/model_executor/models/interfaces.py",
    "vllm/model_executor/models/kimi_k25.py",
    "vllm/model_executor/models/llama4_eagle.py",
    "vllm/model_executor/models/llama_eagle3.py",
    "vllm/model_executor/models/mistral_large_3_eagle.py",
    "vllm/model_executor/models/nemotron_vl.py",
    "vllm/model_executor/models/registry.py",
    "vllm/multimodal/media/video.py",
    "vllm/reasoning/kimi_k2_reasoning_parser.py",
    "vllm/sampling_params.py",
    "vllm/tool_parsers/kimi_k2_tool_parser.py",
    "vllm/tool_parsers/utils.py",
    "vllm/transformers_utils/config.py",
    "vllm/transformers_utils/configs/extract_hidden_states.py",
    "vllm/transformers_utils/configs/speculators/algos.py",
    "vllm/transformers_utils/model_arch_config_convertor.py",
    "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/engine/core.py",
    "vllm/v1/engine/detokenizer.py",
    "vllm/v1/engine/input_processor.py",
    "vllm/v1/engine/output_processor.py",
    "vllm/v1/executor/abstract.py",
    "vllm/v1/executor/multiproc_executor.py",
    "vllm/v1/sample/rejection_sampler.py",
    "vllm/v1/spec_decode/eagle.py",
    "vllm/v1/spec_decode/extract_hidden_states.py",
    "vllm/v1/structured_output/__init__.py",
    "vllm/v1/structured_output/request.py",
    "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
    "vllm/v1/worker/gpu_input_batch.py",
    "vllm/v1/worker/gpu_model_runner.py",
)


def test_one_audited_wheel_per_pinned_platform(
    built: dict[str, build.Result], pin: lock.Lock
) -> None:
    assert set(built) == {"x86_64", "aarch64"}
    label = build.label_for(series.load(REPO_ROOT))
    for plat, res in built.items():
        assert res.wheel.path.name == f"vllm-0.17.1+{label}-1-cp38-abi3-manylinux_2_31_{plat}.whl"
        assert res.report.differing == EXPECTED_CHANGED


@pytest.mark.parametrize("minor", [10, 11, 12, 13])
def test_wheel_tag_installs_on_cpython_3_10_to_3_13(
    built: dict[str, build.Result], minor: int
) -> None:
    for plat, res in built.items():
        _, _, _, tags = parse_wheel_filename(res.wheel.path.name)
        supported = set(cpython_tags((3, minor), platforms=[f"manylinux_2_31_{plat}"]))
        assert tags & supported, f"{res.wheel.path.name} not installable on 3.{minor}"


def test_rebuilding_gives_byte_identical_wheels(
    built: dict[str, build.Result], tmp_path: Path
) -> None:
    again = build.build_wheels(REPO_ROOT, platform="x86_64", out_dir=tmp_path)
    assert again[0].wheel.sha256 == built["x86_64"].wheel.sha256


def test_manifest_records_pin_and_every_patch(
    built: dict[str, build.Result], pin: lock.Lock
) -> None:
    res = built["x86_64"]
    with zipfile.ZipFile(res.wheel.path) as z:
        (name,) = [n for n in z.namelist() if n.endswith("/" + wheel.MANIFEST_NAME)]
        man = json.loads(z.read(name))
    assert man["version"] == res.wheel.version
    assert man["upstream"]["wheel"]["sha256"] == pin.wheel("x86_64").sha256
    assert man["upstream"]["sdist"]["sha256"] == pin.sdist.sha256
    patches = series.load(REPO_ROOT)
    assert [(p["name"], p["sha256"]) for p in man["patches"]] == [
        (p.name, p.sha256) for p in patches
    ]


def test_wheel_members_are_upstream_plus_patched_files(
    built: dict[str, build.Result], upstream_wheel: Path
) -> None:
    """Every member outside the changed set carries upstream's exact compressed bytes."""
    with zipfile.ZipFile(built["x86_64"].wheel.path) as b, zipfile.ZipFile(upstream_wheel) as u:
        bi = {i.filename: i for i in b.infolist() if ".dist-info/" not in i.filename}
        ui = {i.filename: i for i in u.infolist() if ".dist-info/" not in i.filename}
        added = {n for n in EXPECTED_CHANGED if n not in ui}
        assert added == {"vllm/model_executor/models/deepseek_eagle3.py"}
        assert set(bi) == set(ui) | added
        same = [n for n in bi if n not in EXPECTED_CHANGED]
        assert all(
            (bi[n].CRC, bi[n].compress_size) == (ui[n].CRC, ui[n].compress_size) for n in same
        )


def test_export_of_the_applied_series_is_byte_identical() -> None:
    """Electron's dry-run check: apply, export, no diff."""
    prep = build.prepare(REPO_ROOT)
    entries = queue.export(prep.repo, prep.upstream_ref, prep.patches)
    assert [(n, d) for n, d in entries] == [(p.name, p.data) for p in prep.patches]


def _plain_sdist_tree(pin: lock.Lock, dest: Path) -> Path:
    from vpq.core.compat import tarfile

    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    return dest / f"vllm-{pin.version}"


@pytest.mark.skipif(not shutil.which("patch"), reason="GNU patch is not installed")
def test_series_applies_with_patch_p1_on_the_plain_sdist(pin: lock.Lock, tmp_path: Path) -> None:
    src = _plain_sdist_tree(pin, tmp_path)
    for name in series.read_series(REPO_ROOT):
        proc = subprocess.run(
            [
                "patch",
                "-p1",
                "--fuzz=0",
                "--forward",
                "--batch",
                "-i",
                str(REPO_ROOT / "patches" / name),
            ],
            cwd=src,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, name + proc.stdout + proc.stderr
        assert "offset" not in proc.stdout and "fuzz" not in proc.stdout, proc.stdout


@pytest.mark.skipif(
    not shutil.which("quilt"), reason="quilt is not installed (.ci/run installs it)"
)
def test_series_applies_with_quilt_push(pin: lock.Lock, tmp_path: Path) -> None:
    src = _plain_sdist_tree(pin, tmp_path)
    env = {
        "QUILT_PATCHES": str(REPO_ROOT / "patches"),
        "QUILT_SERIES": str(REPO_ROOT / "series"),
        "QUILT_PC": str(tmp_path / ".pc"),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        ["quilt", "push", "-a", "--fuzz=0"], cwd=src, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "offset" not in proc.stdout and "fuzz" not in proc.stdout.lower().replace("--fuzz", "")


def _copy_inputs(dest: Path) -> Path:
    dest.mkdir()
    for name in ["series", "upstream.lock"]:
        shutil.copy(REPO_ROOT / name, dest / name)
    shutil.copytree(REPO_ROOT / "patches", dest / "patches")
    return dest


def test_a_patch_that_no_longer_applies_stops_the_real_build_cleanly(tmp_path: Path) -> None:
    root = _copy_inputs(tmp_path / "repo")
    (root / "dist").mkdir()
    (root / "dist" / "previous.whl").write_bytes(b"earlier build")
    name = "config/speculative-allow-eagle3-for-deepseek-and-kimi.patch"
    p = root / "patches" / name
    p.write_bytes(
        p.read_bytes().replace(b'             "nemotron_h",\n', b'             "nemotron_x",\n')
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vpq", "--root", str(root), "build"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"patches/{name}: vllm/config/speculative.py, hunk #1" in proc.stderr
    assert "nox -s rebase_upstream" in proc.stderr
    assert [q.name for q in (root / "dist").iterdir()] == ["previous.whl"]


def test_upstream_from_a_git_repository_builds_the_same_patched_tree(
    pin: lock.Lock, tmp_path: Path
) -> None:
    """--upstream-source git against a local repository holding the real
    upstream tree at tag v0.17.1 (GitHub is unreachable here)."""
    work = REPO_ROOT / build.WORK_DIR
    build.prepare(REPO_ROOT)
    remote = tmp_path / "vllm.git"
    g.git(["init", "-q", "--bare", str(remote)], tmp_path)
    g.git(
        ["push", "-q", "-f", str(remote), f"upstream/{pin.version}^{{commit}}:refs/tags/{pin.tag}"],
        work,
    )
    commit = g.out(["rev-parse", f"upstream/{pin.version}^{{commit}}"], work)
    root = _copy_inputs(tmp_path / "repo")
    text = (root / "upstream.lock").read_text()
    text = text.replace(pin.repository, remote.as_uri()).replace(
        f'commit = "{pin.commit}"', f'commit = "{commit}"'
    )
    (root / "upstream.lock").write_text(text)
    prep = build.prepare(root, source="git")
    assert g.out(["rev-parse", "upstream/0.17.1^{commit}"], prep.repo) == commit
    sdist_prep = build.prepare(REPO_ROOT)
    assert g.out(["rev-parse", "patched^{tree}"], prep.repo) == g.out(
        ["rev-parse", "patched^{tree}"], sdist_prep.repo
    )


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_dependency_metadata_resolves_as_on_a_serving_host(
    built: dict[str, build.Result], tmp_path: Path
) -> None:
    """pip resolves the wheel's full dependency set (torch 2.10.0 and the
    CUDA stack included) without installing it."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            str(built["x86_64"].wheel.path),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {
        i["metadata"]["name"].lower(): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert names["vllm"] == built["x86_64"].wheel.version
    assert names["torch"] == "2.10.0"


def test_real_wheels_wheel_file_names_the_file_names_tags(built: dict[str, build.Result]) -> None:
    from email.parser import BytesParser
    from email.policy import compat32

    for res in built.values():
        _, _, build_tag, tags = parse_wheel_filename(res.wheel.path.name)
        with zipfile.ZipFile(res.wheel.path) as z:
            (name,) = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
            msg = BytesParser(policy=compat32).parsebytes(z.read(name))
        assert msg.get_all("Tag") == [str(t) for t in tags]
        assert msg["Build"] == wheel.BUILD_TAG and build_tag[0] == int(wheel.BUILD_TAG)


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_real_wheel_round_trips_through_wheel_unpack_and_pack(
    built: dict[str, build.Result], tmp_path: Path
) -> None:
    res = built["x86_64"]
    tool = [sys.executable, "-m", "wheel"]
    subprocess.run(
        [*tool, "unpack", "--dest", str(tmp_path / "u"), str(res.wheel.path)], check=True
    )
    (unpacked,) = (tmp_path / "u").iterdir()
    (tmp_path / "p").mkdir()
    proc = subprocess.run(
        [*tool, "pack", "--dest-dir", str(tmp_path / "p"), str(unpacked)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [p.name for p in (tmp_path / "p").iterdir()] == [res.wheel.path.name]


def test_a_build_killed_mid_way_leaves_dist_as_it_was_and_the_next_build_cleans_up(
    tmp_path: Path,
) -> None:
    import signal
    import time

    root = _copy_inputs(tmp_path / "repo")
    dist = root / "dist"
    dist.mkdir()
    (dist / "previous.whl").write_bytes(b"earlier build")
    cmd = [
        sys.executable,
        "-m",
        "vpq",
        "--root",
        str(root),
        "build",
        "--no-contract",
        "--platform",
        "x86_64",
    ]
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while (
        not list(dist.glob(".staging-*")) and child.poll() is None and time.monotonic() < deadline
    ):
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL, (
        "the build finished before it could be killed mid-way"
    )
    left = sorted(p.name for p in dist.iterdir())
    assert left[0].startswith(".staging-") and left[1:] == ["previous.whl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = sorted(p.name for p in dist.iterdir())
    assert not [n for n in after if n.startswith(".staging-")] and "previous.whl" in after
    assert len([n for n in after if n.endswith(".whl")]) == 2
