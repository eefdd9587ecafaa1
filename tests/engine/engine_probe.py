"""Start a vLLM engine, run batches of requests, write one JSON result.

Usage: python engine_probe.py SPEC.json RESULT.json

Runs inside the environment under test (the patched wheel, or unpatched
upstream for the negative test) in its own process, so every engine gets a
clean CUDA context and its GPU memory back on exit. SPEC keys:

- ``model``, ``drafter`` (null: no speculation), ``tp`` (tensor-parallel
  size), ``num_speculative_tokens``, ``load_format`` (``"dummy"`` for the
  tiny fixture), ``trust_remote_code``, ``max_model_len``, and optional
  ``max_num_seqs`` / ``gpu_memory_utilization`` / ``engine_args`` (more
  ``LLM(...)`` keyword arguments) and ``env`` (more environment, set
  before vLLM is imported; the engine's processes inherit it);
- ``batches``: a list of ``{"name", "kind", "prompts", "max_tokens",
  "ignore_eos", "sampling"}``, run in order with greedy sampling
  (temperature 0; ``sampling``: more ``SamplingParams`` keyword arguments).
  ``kind`` is ``"tokens"`` (prompts are token id lists), ``"text"``
  (prompts are strings), ``"chat"`` (prompts are message lists, through the
  model's chat template) or ``"image"`` (prompts are ``{"prompt": str,
  "image_size": [width, height]}``; the image is a generated RGB gradient,
  passed as Kimi-K2.5's ``vision_chunk`` the way vLLM 0.17.1's
  examples/offline_inference/vision_language.py does).

RESULT.json (written at the end, also on failure) holds ``ok``, ``phase``
(``import``, ``start`` or ``generate``: where it stopped), ``error`` on failure,
``vllm_version``, ``engine`` (architectures, speculative config, and per
tensor-parallel worker what ``llm.apply_model`` read on the live model:
its class and the language model's ``aux_hidden_state_layers``) and, per
batch, the outputs (token ids, text, prompt length, media placeholder
tokens in the prompt), the change in the ``vllm:spec_decode_*`` counters
over the batch, and the wall-clock seconds it took (for reporting only).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

# apply_model sends a function to the workers; vLLM refuses to pickle one
# unless this is set.
os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# ``llm.apply_model`` pickles its function by reference: the workers must
# import it, so it lives in a module beside this script, on PYTHONPATH.
HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
from engine_inspect import inspect_model  # noqa: E402

COUNTERS = {
    "num_drafts": "vllm:spec_decode_num_drafts",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
PREEMPTIONS = "vllm:num_preemptions"


def preemptions(llm) -> int:  # type: ignore[no-untyped-def]
    """Requests preempted so far, summed over engines."""
    return sum(int(m.value) for m in llm.get_metrics() if m.name == PREEMPTIONS)


def image(size):  # type: ignore[no-untyped-def]
    import numpy as np
    from PIL import Image

    w, h = size
    x = np.linspace(0, 255, w * h * 3).reshape(h, w, 3).astype("uint8")
    return Image.fromarray(x, "RGB")


def counters(llm) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The spec-decode counters, summed over engines (0 when absent)."""
    out: dict[str, object] = {k: 0 for k in COUNTERS}
    per_pos: list[int] = []
    for m in llm.get_metrics():
        for key, name in COUNTERS.items():
            if m.name == name:
                out[key] = int(out[key]) + int(m.value)
        if m.name == PER_POS:
            vals = [int(v) for v in m.values]
            per_pos = [a + b for a, b in zip(per_pos or [0] * len(vals), vals, strict=True)]
    out["accepted_per_pos"] = per_pos
    return out


def delta(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    out = {k: int(after[k]) - int(before[k]) for k in COUNTERS}
    b, a = before["accepted_per_pos"], after["accepted_per_pos"]
    out["accepted_per_pos"] = [y - x for x, y in zip(b or [0] * len(a), a, strict=True)]
    return out


def run_batch(llm, batch: dict, media_id: int | None) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from vllm import SamplingParams

    sampling = dict(batch.get("sampling") or {})
    if "structured_outputs" in sampling:  # JSON carries its fields, not the object
        from vllm.sampling_params import StructuredOutputsParams

        sampling["structured_outputs"] = StructuredOutputsParams(
            **dict(sampling["structured_outputs"])
        )
    sp = SamplingParams(
        temperature=0.0,
        max_tokens=batch["max_tokens"],
        ignore_eos=bool(batch.get("ignore_eos")),
        **sampling,
    )
    before, preempted = counters(llm), preemptions(llm)
    t0 = time.perf_counter()
    if batch["kind"] == "tokens":
        outs = llm.generate([{"prompt_token_ids": p} for p in batch["prompts"]], sp, use_tqdm=False)
    elif batch["kind"] == "text":
        outs = llm.generate(batch["prompts"], sp, use_tqdm=False)
    elif batch["kind"] == "chat":
        outs = llm.chat(batch["prompts"], sp, use_tqdm=False)
    elif batch["kind"] == "image":
        reqs = [
            {
                "prompt": p["prompt"],
                "multi_modal_data": {
                    "vision_chunk": {"type": "image", "image": image(p["image_size"])}
                },
            }
            for p in batch["prompts"]
        ]
        outs = llm.generate(reqs, sp, use_tqdm=False)
    else:
        raise ValueError(f"unknown batch kind {batch['kind']!r}")
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "metrics": delta(before, counters(llm)),
        "preemptions": preemptions(llm) - preempted,
        "outputs": [
            {
                "token_ids": [int(t) for t in o.outputs[0].token_ids],
                "text": o.outputs[0].text,
                "finish_reason": o.outputs[0].finish_reason,
                # the sampled tokens' logprobs, when the batch asked for them
                "logprobs": [
                    float(lp[t].logprob)
                    for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs, strict=True)
                ]
                if o.outputs[0].logprobs
                else None,
                "prompt_len": len(o.prompt_token_ids or []),
                "media_tokens": (o.prompt_token_ids or []).count(media_id)
                if media_id is not None
                else 0,
            }
            for o in outs
        ],
    }


def engine_kwargs(spec: dict) -> dict[str, object]:
    kw: dict[str, object] = {
        "model": spec["model"],
        "tensor_parallel_size": spec["tp"],
        "max_model_len": spec["max_model_len"],
        "load_format": spec["load_format"],
        "trust_remote_code": spec["trust_remote_code"],
        "disable_log_stats": False,  # get_metrics() needs the stat loggers
        "seed": 0,
    }
    for key in ("max_num_seqs", "gpu_memory_utilization"):
        if spec.get(key) is not None:
            kw[key] = spec[key]
    # Further LLM(...) arguments, e.g. pipeline_parallel_size,
    # max_num_batched_tokens, data_parallel_size.
    kw.update(spec.get("engine_args") or {})
    if spec.get("drafter"):
        kw["speculative_config"] = {
            "method": "eagle3",
            "model": spec["drafter"],
            "num_speculative_tokens": spec["num_speculative_tokens"],
        }
    return kw


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    os.environ.update(spec.get("env") or {})  # before vLLM reads it (the workers inherit it)
    out: dict[str, object] = {"ok": False, "phase": "import"}
    llm = None
    try:
        import vllm
        from vllm import LLM

        out["vllm_version"] = vllm.__version__
        out["phase"] = "start"
        llm = LLM(**engine_kwargs(spec))
        cfg = llm.llm_engine.vllm_config
        sc = cfg.speculative_config
        out["engine"] = {
            "architectures": list(cfg.model_config.architectures),
            "speculative": None
            if sc is None
            else {
                "method": sc.method,
                "num_speculative_tokens": sc.num_speculative_tokens,
                "draft_architectures": list(sc.draft_model_config.architectures),
            },
            "workers": llm.apply_model(inspect_model),
        }
        out["phase"] = "generate"
        media_id = getattr(cfg.model_config.hf_config, "media_placeholder_token_id", None)
        out["batches"] = {b["name"]: run_batch(llm, b, media_id) for b in spec["batches"]}
        out["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the test decides what is expected
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-6000:]
    Path(sys.argv[2]).write_text(json.dumps(out))
    del llm


if __name__ == "__main__":
    main()
