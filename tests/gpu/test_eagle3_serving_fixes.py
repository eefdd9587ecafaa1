"""GPU checks for the serving fixes after the EAGLE-3 feature backport.

Each runs the engine in its own process (``engine_probe.py``) on the tiny
Kimi-K2.5 fixture (or ``--model/--drafter``), and skips cleanly without
CUDA (``conftest.py``) or with too few GPUs (pipeline parallel is an
engine-tier case, ``tests/engine/test_pipeline_parallel.py``, which
``nox -s gpu_tests`` runs too):

- an image-heavy batch under EAGLE-3 with a small encoder-cache budget
  survives (``scheduler-keep-encoder-cache-for-drafter-lookahead.patch``;
  0.17.1 can die with "Encoder cache miss"), and the EAGLE-3 head is
  loaded text-only, so the runner gathers no image embeddings for it
  (``eagle-text-only-drafter-skips-multimodal-inputs.patch``: one warning
  in the engine log);
- data parallel 2 with expert parallelism, one rank holding a request that
  runs into ``max_model_len`` while the other keeps drafting, finishes
  within a bounded wait (``gpu_model_runner-dp-dummy-drafter-run-near-max-
  model-len.patch``; 0.17.1 hangs).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.conftest import (
    EQUIVALENCE_MAX_TOKENS,
    FIXTURE_IMAGE_TOKENS,
    IMAGE_PROMPT,
    IMAGE_SIZE,
    PROBE,
    PROMPTS,
    Checkpoints,
    cuda_device_count,
    engine_spec,
    ok,
    run_probe,
)

#: A small encoder-cache budget: room for one fixture image plus a little,
#: so entries are freed and reused while the drafter still reads ahead.
SMALL_BATCHED_TOKENS = FIXTURE_IMAGE_TOKENS + 16
NUM_IMAGE_REQUESTS = 12
#: Bounded wait for the data-parallel run: a hang is killed and fails.
DP_TIMEOUT_S = 600


def need_gpus(n: int) -> None:
    have = cuda_device_count()
    if have < n:
        pytest.skip(f"needs {n} GPUs, {have} visible")


def test_image_heavy_batch_with_a_small_encoder_cache_survives_eagle3(
    checkpoints: Checkpoints, tmp_path: Path
) -> None:
    if not checkpoints.is_kimi_k25:
        pytest.skip("the target is not KimiK25ForConditionalGeneration")
    spec = engine_spec(checkpoints, 1, eagle3=True)
    images = [{"prompt": IMAGE_PROMPT, "image_size": IMAGE_SIZE}] * NUM_IMAGE_REQUESTS
    spec["batches"] = [
        {
            "name": "images",
            "kind": "image",
            "prompts": images,
            "max_tokens": EQUIVALENCE_MAX_TOKENS,
            "ignore_eos": not checkpoints.real,
        }
    ]
    if not checkpoints.real:
        # Chunks of 64 tokens end inside and at the edges of the 48-token
        # images, and the encoder cache holds little more than one image.
        spec["engine_args"] = {
            "max_num_batched_tokens": SMALL_BATCHED_TOKENS,
            "enable_chunked_prefill": True,
        }
    result = ok(run_probe(sys.executable, spec, tmp_path, 900))
    batch = result["batches"]["images"]
    assert len(batch["outputs"]) == NUM_IMAGE_REQUESTS
    assert all(len(o["token_ids"]) >= 1 for o in batch["outputs"]), batch["outputs"]
    assert batch["metrics"]["num_drafts"] > 0, batch["metrics"]
    log = (tmp_path / "engine.log").read_text(errors="replace")
    assert "does not support external multimodal embeddings" in log, result["log_tail"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_data_parallel_2_with_a_request_at_max_model_len_does_not_hang(
    checkpoints: Checkpoints, tmp_path: Path
) -> None:
    """Two DP ranks, as vLLM 0.17.1's examples/offline_inference/data_parallel.py
    starts them (one process per rank, ``VLLM_DP_*`` in the environment).
    Rank 0 gets one long prompt that generates into ``max_model_len``; rank
    1 gets short prompts that keep drafting meanwhile."""
    need_gpus(2)
    base = engine_spec(checkpoints, 1, eagle3=True)
    max_model_len = base["max_model_len"]
    long_prompt = " ".join(["hello"] * (max_model_len - 40))
    port = _free_port()
    procs = []
    for rank in (0, 1):
        spec = dict(base)
        prompts = [long_prompt] if rank == 0 else PROMPTS
        spec["batches"] = [
            {
                "name": "dp",
                "kind": "text",
                "prompts": prompts,
                "max_tokens": 64 if rank == 0 else 200,
                "ignore_eos": True,
            }
        ]
        spec["engine_args"] = {"data_parallel_size": 2, "enable_expert_parallel": True}
        workdir = tmp_path / f"rank{rank}"
        workdir.mkdir()
        (workdir / "spec.json").write_text(json.dumps(spec))
        env = {
            **os.environ,
            "VLLM_DP_RANK": str(rank),
            "VLLM_DP_RANK_LOCAL": str(rank),
            "VLLM_DP_SIZE": "2",
            "VLLM_DP_MASTER_IP": "127.0.0.1",
            "VLLM_DP_MASTER_PORT": str(port),
        }
        log = (workdir / "engine.log").open("w")
        procs.append(
            (
                workdir,
                subprocess.Popen(
                    [
                        sys.executable,
                        str(PROBE),
                        str(workdir / "spec.json"),
                        str(workdir / "result.json"),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                ),
            )
        )
    hung = []
    for workdir, proc in procs:
        try:
            proc.wait(timeout=DP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            hung.append(workdir.name)
    for _, proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not hung, f"data-parallel ranks {hung} did not finish within {DP_TIMEOUT_S} s (hang)"
    for workdir, _ in procs:
        result_file = workdir / "result.json"
        assert result_file.exists(), (workdir / "engine.log").read_text(errors="replace")[-4000:]
        result = ok(json.loads(result_file.read_text()))
        (out, *_) = result["batches"]["dp"]["outputs"]
        if workdir.name == "rank0":
            assert out["finish_reason"] == "length", out["finish_reason"]
