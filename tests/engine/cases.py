"""The engine tier's cases: the prompts and their oracle, the heads, one
engine configuration (``Run``), the spec ``engine_probe.py`` runs and how it
is run. The tier's options and fixtures stay in ``conftest.py``; the tests
import what they need from here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vpq.checkpoints import fixture, scripted

from tests.support.engine_result import ok

PROBE = Path(__file__).with_name("engine_probe.py")
NUM_SPECULATIVE_TOKENS = 3  # as vLLM's own EAGLE correctness tests
MAX_TOKENS = 12
#: Small, so the longest prompt is prefilled in chunks (chunked prefill).
MAX_BATCHED_TOKENS = 64
CASE_TIMEOUT_S = {"cpu": 300, "gpu": 900}
#: Prompts as token ids, of different lengths; the last one is longer than
#: ``MAX_BATCHED_TOKENS``. Some start on the script, some off it; the second
#: ends with ``<think>``, so ``</think>`` is the first token of a decode step.
PROMPTS: list[list[int]] = [
    [scripted.SCRIPT[5]],
    [scripted.SCRIPT[0]],
    [40, 41, 42, 43, 44, 45, 46],
    [scripted.SCRIPT[i] for i in (3, 9, 12, 20)],
    [100 + (7 * i) % 150 for i in range(23)],
    [3 + (11 * i) % 250 for i in range(150)],
]
#: Kimi-K2.5's image prompt (vLLM 0.17.1's examples/offline_inference/
#: vision_language.py, run_kimi_k25); it ends with ``<|im_middle|>``.
IMAGE_PROMPT = (
    "<|im_user|>user<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
    "Describe this image in one sentence.<|im_end|><|im_assistant|>assistant<|im_middle|>"
)
IM_MIDDLE = 994
#: 224 x 168 pixels: 16 x 12 patches of 14, merged 2 x 2 into 48 placeholder tokens.
IMAGE_SIZE = [224, 168]
IMAGE_TOKENS = 48
#: The Llama-shaped head shapes the tier serves (``vpq.checkpoints.fixture.HEAD_SHAPES``).
HEADS = ("llama-top", "llama-nested", "llama-absent", "eagle3.1-llama")
#: The ``llama-top`` head with a short position limit (``max_position_embeddings``),
#: below the target's 2048 and the tier's ``max_model_len``.
SHORT_HEAD = "llama-short"
SHORT_HEAD_POSITIONS = 64
#: The MLA head shapes (``Eagle3DeepseekV2ForCausalLM``), served with MLA on
#: (``Run(mla=True)``): ids at the top level, and EAGLE 3.1 with nested ids.
MLA_HEADS = ("mla-deepseek_v2", "mla-kimi_k2", "eagle3.1-mla")
#: A head in the ``speculators`` format, the library's default recipe
#: (``norm_before_fc``, ``norm_output``; ids (1, 2, 3) at the top level), its
#: norm before ``fc`` scripted to matter (``scripted.write_speculators_head_weights``).
SPECULATORS_HEAD = "speculators-default-recipe"
#: Aux layer ids the scripted heads were not built for: the head sees no code.
WRONG_IDS = (0, 1, 2)
#: The aux layer ids the scripted heads were built for.
HEAD_IDS = list(fixture.AUX_LAYER_IDS)
#: A target depth whose default aux layers are valid ids: (2, 4, 5).
DEFAULT_IDS_LAYERS = 8


def expected_tokens(prompt: list[int], n: int = MAX_TOKENS) -> list[int]:
    """The scripted target's greedy continuation of ``prompt``: the oracle."""
    out = [scripted.next_token(prompt[-1])]
    while len(out) < n:
        out.append(scripted.next_token(out[-1]))
    return out


@dataclass(frozen=True)
class Run:
    """One engine configuration: which head (None: no speculation), the
    parallel sizes, which engine (``patched``, ``control`` or ``reference``), more ``LLM``
    arguments, and the batches' extra sampling arguments."""

    head: str | None
    layers: int = fixture.NUM_LAYERS  # the target's decoder layers (a key of Checkpoints.targets)
    tp: int = 1
    pp: int = 1
    engine: str = "patched"
    args: tuple[tuple[str, Any], ...] = ()
    sampling: tuple[tuple[str, Any], ...] = field(default=())
    images: int = 0  # image requests (Kimi-K2.5's vision_chunk) after the text prompts
    prompts: tuple[tuple[int, ...], ...] = ()  # the token prompts, in place of PROMPTS
    env: tuple[tuple[str, str], ...] = ()  # more environment for the engine
    #: MLA attention on (the engine runs without ``VLLM_MLA_DISABLE``; on the CPU
    #: backend through the test-only stand-in, ``cpu_shims.MLA_SHIMS``).
    mla: bool = False
    #: The target's weights: ``scripted``, or ``random-attention`` (the script's
    #: weights with seeded random attention projections: numerics only).
    weights: str = "scripted"

    @property
    def name(self) -> str:
        """A short label: head, layers, sizes, engine and the extra keys."""
        extra = "".join(
            f"-{k}" + (f"={v}" if len(repr(v)) < 12 else "") for k, v in self.args + self.sampling
        )
        extra += f"-images={self.images}" if self.images else ""
        extra += f"-prompts={len(self.prompts)}" if self.prompts else ""
        extra += "".join(f"-{k}" for k, _ in self.env)
        extra += "-mla" if self.mla else ""
        extra += "" if self.weights == "scripted" else f"-{self.weights}"
        return f"{self.head or 'ref'}-L{self.layers}-tp{self.tp}-pp{self.pp}-{self.engine}{extra}"


@dataclass(frozen=True)
class Engines:
    """The pythons that run engines, and the environment they run under."""

    backend: str
    patched: str
    control: str | None
    env: dict[str, str]
    reference: str | None = None  # upstream's own CPU engine (--engine-reference)
    reference_env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Checkpoints:
    targets: dict[int, Path]  # by number of decoder layers
    heads: dict[str, Path]
    random_attention: Path | None = None  # the 4-layer target, attention random


def batches(run: Run) -> list[dict[str, Any]]:
    """The requests an engine runs: the prompts, then ``run.images`` image
    requests; greedy, EOS ignored, with the run's extra sampling arguments."""
    prompts = [list(p) for p in run.prompts] if run.prompts else PROMPTS
    out = [{"name": "greedy", "kind": "tokens", "prompts": prompts}]
    if run.images:
        image = {"prompt": IMAGE_PROMPT, "image_size": IMAGE_SIZE}
        out.append({"name": "images", "kind": "image", "prompts": [image] * run.images})
    common = {"max_tokens": MAX_TOKENS, "ignore_eos": True, "sampling": dict(run.sampling)}
    return [b | common for b in out]


def spec_for(run: Run, ck: Checkpoints, backend: str) -> dict[str, Any]:
    """``engine_probe.py``'s SPEC for ``run``."""
    args: dict[str, Any] = {"max_num_batched_tokens": MAX_BATCHED_TOKENS}
    if run.pp > 1:
        args["pipeline_parallel_size"] = run.pp
    if backend == "cpu":
        args["enforce_eager"] = True  # no torch.compile warm-up: 13 s a start, not 60
    args.update(dict(run.args))
    model = ck.random_attention if run.weights == "random-attention" else ck.targets[run.layers]
    return {
        "model": str(model),
        "drafter": str(ck.heads[run.head]) if run.head else None,
        "tp": run.tp,
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "load_format": "auto",
        # The Kimi-K2.5 fixture's image processor is remote code; the series
        # runs it only when trusted (GHSA-7972-pg2x-xr59), as an operator must.
        "trust_remote_code": True,
        "max_model_len": 512,
        "max_num_seqs": 8,
        "gpu_memory_utilization": 0.25 if backend == "gpu" else None,
        "engine_args": args,
        "env": dict(run.env),
        "batches": batches(run),
    }


def run_engine(
    python: str, spec: dict[str, Any], workdir: Path, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    """Run ``engine_probe.py`` in its own process group, killed whole after
    ``timeout``; its result, with the engine log, the shims applied, the wall
    time and the peak RSS of its largest process."""
    spec_file, result_file, log_file, shim_log = (
        workdir / n for n in ("spec.json", "result.json", "engine.log", "shims.jsonl")
    )
    spec_file.write_text(json.dumps(spec))
    full_env = {**os.environ, **env, "VPQ_ENGINE_SHIM_LOG": str(shim_log)}
    t0 = time.monotonic()
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [python, str(PROBE), str(spec_file), str(result_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
        timed_out, status, usage = _wait_or_kill(proc.pid, timeout)
    seconds = time.monotonic() - t0
    text = log_file.read_text(errors="replace")
    result: dict[str, Any] = {
        "ok": False,
        "phase": "crashed",
        "error": f"no result (wait status {status})",
    }
    if timed_out:
        result = {"ok": False, "phase": "timeout", "error": f"killed after {timeout} s"}
    elif result_file.exists():
        result = json.loads(result_file.read_text())
    shims = (
        [json.loads(ln)["applied"] for ln in shim_log.read_text().splitlines()]
        if shim_log.exists()
        else []
    )
    rss = usage.ru_maxrss / 1024  # KiB on Linux; the largest of the process and its children
    return {
        **result,
        "log": text,
        "log_tail": text[-6000:],
        "shims": shims,
        "seconds": seconds,
        "peak_rss_mib": rss,
    }


def _wait_or_kill(pid: int, timeout: float) -> tuple[bool, int, Any]:
    """Wait for ``pid``; after ``timeout`` kill its whole process group.
    (killed?, wait status, resource usage)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return False, status, usage
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    return True, status, usage


def outputs(result: dict) -> list[list[int]]:
    """The greedy batch's token ids, one list per prompt (the engine ran)."""
    return [o["token_ids"] for o in ok(result)["batches"]["greedy"]["outputs"]]


def metrics(result: dict) -> dict:
    """The greedy batch's ``vllm:spec_decode_*`` counters (the engine ran)."""
    return ok(result)["batches"]["greedy"]["metrics"]


#: Structured output parsed after the ``kimi_k2`` reasoning parser says the
#: reasoning ended: a JSON object (``response_format`` ``json_object``).
JSON_AFTER_REASONING = {
    "args": (("reasoning_parser", "kimi_k2"),),
    "sampling": (("structured_outputs", (("json_object", True),)),),
}

#: The differential's cases (test_differential.py), which the moved series
#: runs too (test_moved_engine.py).
CASES = [
    Run(None),
    Run("llama-top"),
    Run("llama-nested"),
    Run("eagle3.1-llama"),
    Run("llama-absent", layers=DEFAULT_IDS_LAYERS),
    # JSON after kimi_k2 reasoning, </think> inside a step: 0.32.0 has the
    # three structured-output fixes in their 0.27.0 form
    Run("llama-top", **JSON_AFTER_REASONING),
    # MLA on, target and head: ours through the tier's stand-in backend
    # (cpu_shims.MLA_SHIMS), upstream's through its own (AMX_MLA or CPU_MLA)
    Run(None, mla=True),
    *(Run(head, mla=True) for head in MLA_HEADS),
]

DEFAULT_IDS_WARNING = "does not name the target layers its head reads"
