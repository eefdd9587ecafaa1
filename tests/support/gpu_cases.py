"""The GPU tier's cases (tests/gpu): its prompts, checkpoints and engine
specs, and the engine probe it runs. Shared with tests/unit
(``test_gpu_assertions.py`` runs the GPU tests' assertions on CPU); the GPU
tier's options, skips and fixtures stay in ``tests/gpu/conftest.py``."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.paths import REPO_ROOT

PROBE = REPO_ROOT / "tests" / "engine" / "engine_probe.py"
NUM_SPECULATIVE_TOKENS = 3  # as vLLM's own EAGLE correctness tests
#: Greedy, 10 new tokens: the sampling vLLM 0.17.1's
#: tests/v1/e2e/test_spec_decode.py uses for its equivalence checks (which
#: honour EOS; so do we with real checkpoints, see ``batches``).
EQUIVALENCE_MAX_TOKENS = 10
BENCH_MAX_TOKENS = 256
#: One 224 x 168 pixel image: with the fixture's processor, 16 x 12 patches
#: of 14 pixels, merged 2 x 2 into 48 placeholder tokens.
IMAGE_SIZE = [224, 168]
FIXTURE_IMAGE_TOKENS = 48
#: Kimi-K2.5's image prompt, from vLLM 0.17.1's
#: examples/offline_inference/vision_language.py (run_kimi_k25).
IMAGE_PROMPT = (
    "<|im_user|>user<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
    "Describe this image in one sentence.<|im_end|><|im_assistant|>assistant<|im_middle|>"
)
PROMPTS = [
    "Please repeat the word 'hello' ten times.",
    "Please repeat the word 'where' ten times.",
    "Write a haiku about the sea.",
    "What is the capital of France?",
    "List the first ten prime numbers.",
    "Explain speculative decoding in one sentence.",
    "Translate 'good morning' into German.",
    "Count from one to twenty.",
    "Name three colours of the rainbow.",
    "Why is the sky blue?",
    "Give a synonym for quick.",
    "Finish the sentence: the quick brown fox",
    "What does a compiler do?",
    "Spell the word banana backwards.",
    "How many legs does a spider have?",
    "Describe a cat in five words.",
    "Sort these numbers: 9, 2, 7, 4.",
    "What is twelve times twelve?",
    "Suggest a name for a small boat.",
    "Write one line of Python that prints hi.",
]


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count()


@dataclass(frozen=True)
class Checkpoints:
    """The target and drafter directories under test."""

    target: Path
    drafter: Path
    real: bool  # False: the tiny fixture with dummy weights

    @functools.cached_property
    def target_config(self) -> dict[str, Any]:
        return json.loads((self.target / "config.json").read_text())

    @functools.cached_property
    def drafter_config(self) -> dict[str, Any]:
        return json.loads((self.drafter / "config.json").read_text())

    @property
    def is_kimi_k25(self) -> bool:
        return "KimiK25ForConditionalGeneration" in self.target_config.get("architectures", [])


def batches(ck: Checkpoints) -> list[dict[str, Any]]:
    """The requests every engine runs, in order (see engine_probe.py)."""
    if ck.real:
        chats = [[{"role": "user", "content": p}] for p in PROMPTS]
        out = [
            {
                "name": "greedy",
                "kind": "chat",
                "prompts": chats,
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        ]
    else:
        # Raw prompts: a dummy-weight model mostly reacts to the last token,
        # and a chat template would end every prompt the same way.
        out = [
            {
                "name": "greedy",
                "kind": "text",
                "prompts": PROMPTS,
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        ]
    if ck.is_kimi_k25:
        image = {"prompt": IMAGE_PROMPT, "image_size": IMAGE_SIZE}
        out.append(
            {
                "name": "image",
                "kind": "image",
                "prompts": [image],
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        )
    if ck.real:
        out.append(
            {"name": "bench", "kind": "chat", "prompts": chats, "max_tokens": BENCH_MAX_TOKENS}
        )
    for b in out:
        # EOS means nothing to dummy weights; ignoring it there keeps every
        # request decoding (and drafting) for all its tokens.
        b["ignore_eos"] = not ck.real
    return out


def engine_spec(ck: Checkpoints, tp: int, eagle3: bool) -> dict[str, Any]:
    return {
        "model": str(ck.target),
        "drafter": str(ck.drafter) if eagle3 else None,
        "tp": tp,
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "load_format": "auto" if ck.real else "dummy",
        # The real Kimi-K2.5 tokenizer is remote code; the fixture's is not.
        "trust_remote_code": ck.real,
        "max_model_len": 4096 if ck.real else 1024,
        "max_num_seqs": None if ck.real else 32,
        "gpu_memory_utilization": None if ck.real else 0.25,
        "batches": batches(ck),
    }


def run_probe(python: str, spec: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    """Run engine_probe.py under ``python``; its result, plus the tail of its log."""
    spec_file, result_file, log_file = (
        workdir / n for n in ("spec.json", "result.json", "engine.log")
    )
    spec_file.write_text(json.dumps(spec))
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [python, str(PROBE), str(spec_file), str(result_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a hang can be killed with its workers
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    tail = log_file.read_text(errors="replace")[-6000:]
    if not result_file.exists():
        return {
            "ok": False,
            "phase": "crashed",
            "error": f"no result (exit {proc.returncode})",
            "log_tail": tail,
        }
    return {**json.loads(result_file.read_text()), "log_tail": tail}
