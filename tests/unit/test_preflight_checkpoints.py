"""The preflight on checkpoints as an operator meets them, broken in real ways.

Each case is real files on disk: a head cut short as by an interrupted
download, a sharded checkpoint with a shard missing, the two directories
given the wrong way round, a Hugging Face Hub id resolved from a cache laid
out as ``huggingface_hub`` lays it out (symlinked blobs, ``refs/main``), and
the manual's in-repository command (docs/preflight.md) run as written. No
vLLM: the file rules only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import verify_install as vi

from tests.support import heads
from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--no-vllm"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": "", **(env or {})},
        timeout=120,
    )


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln.strip() for ln in proc.stdout.splitlines() if ln.strip().startswith("error")]


def cut(path: Path, keep: int) -> None:
    """Keep the first ``keep`` bytes of ``path``, as an interrupted download does."""
    path.write_bytes(path.read_bytes()[:keep])


def header_end(path: Path) -> int:
    """Where a safetensors file's data begins: 8 + the header length."""
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


# --- a half-downloaded checkpoint never passes --------------------------------


def test_a_head_cut_in_half_is_one_error_naming_the_file_and_tensor(
    target: Path, tmp_path: Path
) -> None:
    head = heads.write_head(tmp_path / "head", heads.llama_top_level())
    st = head / "model.safetensors"
    size = st.stat().st_size
    cut(st, size // 2)
    assert st.stat().st_size > header_end(st)  # the header itself is intact
    proc = script("--model", str(target), "--drafter", str(head))
    assert proc.returncode == 1, proc.stdout
    (err,) = errors(proc)
    assert f"{st}: truncated: tensor '" in err
    assert f"but the file has {size // 2}" in err and "download this file again" in err
    assert proc.stdout.splitlines()[-1].endswith(": FAILED")


def test_the_first_missing_tensor_is_named(tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.llama_top_level())
    st = head / "model.safetensors"
    cut(st, st.stat().st_size - 1)  # only the last byte of the last tensor is gone
    header = json.loads(st.read_bytes()[8 : header_end(st)])
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"])
    with pytest.raises(vi.InputError, match=rf"truncated: tensor '{re.escape(last)}' needs"):
        vi.read_checkpoint_tensors(head)


def test_a_shard_cut_short_is_found_through_the_index(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.eagle31(), shards=3)
    shard = head / "model-00002-of-00003.safetensors"
    cut(shard, header_end(shard) + 2)
    (err,) = errors(script("--model", str(target), "--drafter", str(head)))
    assert f"{shard}: truncated: tensor '" in err


def test_a_missing_shard_is_named_as_an_incomplete_download(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.eagle31(), shards=3)
    (head / "model-00003-of-00003.safetensors").unlink()
    (err,) = errors(script("--model", str(target), "--drafter", str(head)))
    assert err.endswith(
        "model-00003-of-00003.safetensors: no such file, but model.safetensors.index.json "
        "names it: the download is incomplete"
    )


def test_an_index_placing_a_tensor_in_the_wrong_shard_is_an_error(tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.eagle31(), shards=2)
    index = head / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["fc.weight"] = "model-00002-of-00002.safetensors"
    if vi.read_safetensors_header(head / "model-00002-of-00002.safetensors").get("fc.weight"):
        data["weight_map"]["fc.weight"] = "model-00001-of-00002.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(vi.InputError, match="has no tensor 'fc.weight', which model.safetensors"):
        vi.read_checkpoint_tensors(head)


def test_a_truncated_target_shard_is_an_error_too(target: Path, tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    broken = tmp_path / "target"
    shutil.copytree(target, broken)
    st = broken / "model.safetensors"
    save_file({"language_model.lm_head.weight": np.zeros((1024, 256), np.float16)}, str(st))
    cut(st, st.stat().st_size - 100)
    head = heads.write_head(tmp_path / "head", heads.llama_top_level())
    (err,) = errors(script("--model", str(broken), "--drafter", str(head)))
    assert f"{st}: truncated: tensor 'language_model.lm_head.weight'" in err


# --- swapped arguments ---------------------------------------------------------


def test_swapped_arguments_are_one_clear_error(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.llama_top_level())
    proc = script("--model", str(head), "--drafter", str(target))
    assert proc.returncode == 1
    assert errors(proc) == [
        f"error   swapped-arguments    the arguments are swapped: --model {head} is an EAGLE-3 "
        f"head (LlamaForCausalLMEagle3) and --drafter {target} is the target "
        f"(KimiK25ForConditionalGeneration); run again with --model {target} --drafter {head}"
    ]
    assert "hidden_size = None" not in proc.stdout and "default" not in proc.stdout


def test_a_head_given_as_the_target_is_named(tmp_path: Path) -> None:
    a = heads.write_head(tmp_path / "a", heads.mla_kimi_k2())
    b = heads.write_head(tmp_path / "b", heads.llama_top_level())
    (err,) = errors(script("--model", str(a), "--drafter", str(b)))
    assert f"--model {a} is an EAGLE-3 head (Eagle3DeepseekV2ForCausalLM), not a Kimi-K2.5" in err


# --- Hugging Face Hub ids --------------------------------------------------------


def hub_cache(cache: Path, repo_id: str, src: Path, rev: str = "a" * 40) -> Path:
    """Lay ``src`` out as huggingface_hub's cache does: blobs, a snapshot of
    symlinks to them, and ``refs/main`` naming the revision."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for f in src.iterdir():
        blob = repo / "blobs" / f"blob-{f.name}"
        shutil.copyfile(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    return snap


@pytest.mark.parametrize("var", ["HF_HUB_CACHE", "HF_HOME"])
def test_a_hub_id_resolves_from_the_local_cache(var: str, target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "src", heads.llama_top_level())
    cache = tmp_path / "hf" / ("hub" if var == "HF_HOME" else "")
    snap = hub_cache(cache, "some-org/kimi-eagle3", head)
    env = {var: str(tmp_path / "hf" if var == "HF_HOME" else cache)}
    proc = script("--model", str(target), "--drafter", "some-org/kimi-eagle3", env=env)
    assert proc.returncode == 0, proc.stdout
    assert (
        f"drafter some-org/kimi-eagle3: the Hugging Face cache's snapshot {'a' * 40} "
        f"(refs/main), {snap}" in proc.stdout
    )


def test_a_hub_id_missing_from_the_cache_says_where_snapshots_live(
    target: Path, tmp_path: Path
) -> None:
    proc = script(
        "--model",
        "moonshotai/Kimi-K2.5",
        "--drafter",
        str(target),
        env={"HF_HUB_CACHE": str(tmp_path / "empty")},
    )
    assert proc.returncode == 1
    (err,) = errors(proc)
    assert "moonshotai/Kimi-K2.5: no such target directory" in err
    assert f"{tmp_path / 'empty'}/models--moonshotai--Kimi-K2.5/snapshots/<revision>" in err
    assert "huggingface-cli download moonshotai/Kimi-K2.5" in err


# --- the in-repository command and the tiny checkpoints ----------------------------


def preflight_page() -> str:
    """The preflight's page of the manual (docs/preflight.md)."""
    return (REPO_ROOT / "docs" / "preflight.md").read_text()


def test_the_docs_in_repo_command_runs_as_written_without_the_tools_dependencies(
    target: Path, tmp_path: Path
) -> None:
    """docs/preflight.md's ``PYTHONPATH=scripts python3 -m vpq preflight`` line, run by
    bash from the repository root with ``-S`` (no site-packages: no
    tomli_w, no vLLM), as a serving venv's Python would run it."""
    (line,) = [
        ln.split("#")[0].strip()
        for ln in preflight_page().splitlines()
        if ln.startswith("PYTHONPATH=scripts python3 -m vpq preflight")
    ]
    head = heads.write_head(tmp_path / "head", heads.llama_top_level())
    command = line.replace("python3", f"{sys.executable} -S").replace(
        "--model TARGET_DIR --drafter HEAD_DIR", f"--model {target} --drafter {head} --no-vllm"
    )
    proc = subprocess.run(
        ["bash", "-c", command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].endswith(": OK (file rules only: vLLM not asked)")


def test_the_tiny_checkpoints_command_writes_pairs_the_preflight_passes(tmp_path: Path) -> None:
    from vpq import cli
    from vpq.checkpoints import fixture

    assert cli.main(["fixture", str(tmp_path)]) == 0
    target = tmp_path / fixture.TARGET_DIR
    for head in fixture.TINY_HEADS:
        findings = vi.preflight(target, tmp_path / head, use_vllm=False)
        bad = [f for f in findings if f.severity in (vi.ERROR, vi.WARNING, vi.NOTE)]
        assert bad == [], (head, bad)
    (w,) = [
        f
        for f in vi.preflight(target, tmp_path / "eagle3-tiny", False)
        if f.rule == "target-weights"
    ]
    assert w.message.endswith("safetensors file(s), each tensor's data inside its file")
