"""Run inside a venv that has a vLLM wheel installed; prints one JSON object.

Usage: python eagle3_probe.py TARGET_DIR DRAFTER_DIR

Each probe records its result or the error it raised, so the same script
can show what the patched wheel does and what unpatched upstream does.
"""

from __future__ import annotations

import json
import logging
import os
import sys

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
logging.disable(logging.WARNING)


def probe(fn):  # type: ignore[no-untyped-def]
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # noqa: BLE001 - we report whatever it raised
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    target, drafter = sys.argv[1], sys.argv[2]
    out: dict[str, object] = {}
    import importlib.metadata as md

    import vllm

    out["version"] = vllm.__version__
    dist = md.distribution("vllm")
    out["dist_version"] = dist.version
    out["manifest"] = probe(lambda: json.loads(dist.read_text("vpq_manifest.json") or "null"))

    def arch_support() -> dict[str, bool]:
        from vllm.model_executor.models.deepseek_v2 import (
            DeepseekV2ForCausalLM,
            DeepseekV3ForCausalLM,
        )
        from vllm.model_executor.models.interfaces import supports_eagle3
        from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

        return {
            c.__name__: bool(supports_eagle3(c))
            for c in (KimiK25ForConditionalGeneration, DeepseekV3ForCausalLM, DeepseekV2ForCausalLM)
        }

    out["supports_eagle3"] = probe(arch_support)

    def spec_config() -> str:
        from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

        mc = ModelConfig(model=target, skip_tokenizer_init=True)
        sc = SpeculativeConfig(
            target_model_config=mc,
            target_parallel_config=ParallelConfig(),
            method="eagle3",
            model=drafter,
            num_speculative_tokens=2,
        )
        return f"{sc.method}:{sc.draft_model_config.architectures[0]}"

    out["speculative_config"] = probe(spec_config)
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
