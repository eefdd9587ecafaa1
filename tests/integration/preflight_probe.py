"""Run inside a venv that has a vLLM wheel installed; prints one JSON line.

Usage: python preflight_probe.py SCRIPTS_DIR TARGET_DIR HEADS_DIR

``preflight`` holds, for every head directory under HEADS_DIR, the exit code
and findings of ``verify_install.preflight`` (one vLLM import for all).
``wheel`` holds what this wheel says by itself, asked without the
preflight's code, so the tests can derive their expectations from the
installed wheel: which EAGLE-3 drafter architectures its registry has,
whether it knows a ``kimi_k2`` config, and which aux layer ids its model
runner reads from each head's config.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
logging.disable(logging.WARNING)

DRAFTER_ARCHS = (
    "LlamaForCausalLMEagle3",
    "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM",
)


def wheel_facts(target: Path, heads: list[Path]) -> dict[str, object]:
    from types import SimpleNamespace

    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
    from vllm.model_executor.models.registry import ModelRegistry

    archs = ModelRegistry.get_supported_archs()
    facts: dict[str, object] = {"registered": {a: a in archs for a in DRAFTER_ARCHS}}
    known = False
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY

        known = "kimi_k2" in _CONFIG_REGISTRY
    except Exception:  # noqa: BLE001
        pass
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        known = known or "kimi_k2" in CONFIG_MAPPING
    except Exception:  # noqa: BLE001
        pass
    facts["kimi_k2_config"] = known
    ids: dict[str, object] = {}
    for head in heads:
        try:
            sc = SpeculativeConfig(
                target_model_config=ModelConfig(model=str(target), skip_tokenizer_init=True),
                target_parallel_config=ParallelConfig(),
                method="eagle3",
                model=str(head),
                num_speculative_tokens=1,
            )
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            got = GPUModelRunner._get_eagle3_aux_layers_from_config(
                SimpleNamespace(speculative_config=sc)
            )
            ids[head.name] = list(got) if got else None
        except Exception as exc:  # noqa: BLE001
            ids[head.name] = f"refused: {type(exc).__name__}"
    facts["runner_ids"] = ids
    from transformers import PretrainedConfig

    trap = PretrainedConfig(architectures=["Eagle3DeepseekV2ForCausalLM"])
    trap.model_type = "deepseek_v3"
    facts["override_rewrites_deepseek_v3"] = (
        SpeculativeConfig.hf_config_override(trap).model_type != "deepseek_v3"
    )
    import inspect

    from vllm.model_executor.models import llama_eagle3

    facts["llama_eagle3_reads"] = {
        f: f in inspect.getsource(llama_eagle3) for f in ("fc_norm", "norm_output")
    }
    return facts


def main() -> None:
    scripts, target, heads_dir = (Path(a) for a in sys.argv[1:4])
    sys.path.insert(0, str(scripts))
    import verify_install as vi

    heads = sorted(p for p in heads_dir.iterdir() if p.is_dir())
    out: dict[str, object] = {"preflight": {}}
    for head in heads:
        findings = vi.preflight(target, head)
        out["preflight"][head.name] = {  # type: ignore[index]
            "exit": vi.exit_code(findings),
            "findings": [asdict(f) for f in findings],
        }
    with __import__("contextlib").redirect_stdout(sys.stderr):
        out["wheel"] = wheel_facts(target, heads)
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
