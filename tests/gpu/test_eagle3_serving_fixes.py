"""GPU checks for the serving fixes after the EAGLE-3 feature backport.

Each runs the engine in its own process (``engine_probe.py``) on the tiny
Kimi-K2.5 fixture (or ``--model/--drafter``), and skips cleanly without
CUDA (``conftest.py``) or with too few GPUs. The image-heavy batch and
pipeline parallel are engine-tier cases (``tests/engine``), which
``nox -s gpu_tests`` runs too:

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

from tests.support.engine_result import ok
from tests.support.gpu_cases import (
    FIXTURE_IMAGE_TOKENS,
    PROBE,
    PROMPTS,
    Checkpoints,
    cuda_device_count,
    engine_spec,
)

#: A small encoder-cache budget: room for one fixture image plus a little,
#: so entries are freed and reused while the drafter still reads ahead.
SMALL_BATCHED_TOKENS = FIXTURE_IMAGE_TOKENS + 16
NUM_IMAGE_REQUESTS = 12
#: Bounded wait for the data-parallel run: a hang is killed and fails.
DP_TIMEOUT_S = 600
#: Rank 0's request: its prompt leaves this many tokens below
#: ``max_model_len``, and it may generate up to ``DP_MAX_TOKENS``, more than
#: that room: it finishes by reaching ``max_model_len``, not ``max_tokens``.
DP_ROOM = 16
DP_MAX_TOKENS = 64
#: The text rank 0's prompt repeats, tokenized by the checkpoint's tokenizer.
DP_PROMPT_TEXT = "hello world, "


def token_ids(model_dir: Path, text: str) -> list[int]:
    """``text`` tokenized by ``model_dir``'s tokenizer, without special
    tokens: its ``tokenizer.json`` (the fixture's, a ``tokenizers`` BPE) or,
    for real checkpoints without one, ``transformers``' (remote code)."""
    path = model_dir / "tokenizer.json"
    if path.is_file():
        from tokenizers import Tokenizer

        return list(Tokenizer.from_file(str(path)).encode(text, add_special_tokens=False).ids)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=True)
    return list(tok.encode(text, add_special_tokens=False))


def prompt_below_max_model_len(model_dir: Path, max_model_len: int, room: int) -> list[int]:
    """A prompt of exactly ``max_model_len - room`` token ids: the tokens of
    ``DP_PROMPT_TEXT``, repeated and cut to length (sized in tokens, so it
    reaches ``max_model_len`` by construction whatever the tokenizer)."""
    unit = token_ids(model_dir, DP_PROMPT_TEXT)
    n = max_model_len - room
    return (unit * (n // len(unit) + 1))[:n]


def assert_finished_at_max_model_len(out: dict, max_model_len: int, max_tokens: int) -> None:
    """Rank 0's output (``engine_probe.py``'s shape) stopped because the
    sequence reached ``max_model_len``: ``finish_reason`` ``length`` with
    fewer tokens than ``max_tokens`` (so ``max_tokens`` did not stop it), and
    prompt plus output exactly ``max_model_len``."""
    n = len(out["token_ids"])
    assert out["finish_reason"] == "length", out["finish_reason"]
    assert n < max_tokens, f"{n} tokens: max_tokens={max_tokens} stopped it, not max_model_len"
    assert out["prompt_len"] + n == max_model_len, (out["prompt_len"], n, max_model_len)


def need_gpus(n: int) -> None:
    have = cuda_device_count()
    if have < n:
        pytest.skip(f"needs {n} GPUs, {have} visible")


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
    long_prompt = prompt_below_max_model_len(checkpoints.target, max_model_len, DP_ROOM)
    port = _free_port()
    procs = []
    for rank in (0, 1):
        spec = dict(base)
        spec["batches"] = [
            {
                "name": "dp",
                "kind": "tokens" if rank == 0 else "text",
                "prompts": [long_prompt] if rank == 0 else PROMPTS,
                "max_tokens": DP_MAX_TOKENS if rank == 0 else 200,
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
            assert out["prompt_len"] == len(long_prompt)
            assert_finished_at_max_model_len(out, max_model_len, DP_MAX_TOKENS)
