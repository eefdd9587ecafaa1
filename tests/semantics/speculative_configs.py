"""Tiny targets and EAGLE-3 heads as config directories, and the real
``SpeculativeConfig`` built from them, for the semantic tests that check
what vLLM decides at config time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.semantics import stubs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vpq.checkpoints import fixture  # noqa: E402


def _drafter(dest: Path, eagle_config: dict[str, object] | None = None) -> str:
    cfg: dict[str, object] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": stubs.HIDDEN,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 128,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
    }
    if eagle_config is not None:
        cfg["eagle_config"] = eagle_config
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def _llama_target(dest: Path) -> str:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": stubs.HIDDEN,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "vocab_size": 128,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def _spec(target: str, drafter: str, pp: int, **kw: object):  # type: ignore[no-untyped-def]
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(
        target_model_config=ModelConfig(model=target, skip_tokenizer_init=True),
        target_parallel_config=ParallelConfig(pipeline_parallel_size=pp),
        method="eagle3",
        model=drafter,
        num_speculative_tokens=2,
        **kw,
    )


def _target(kind: str, dest: Path) -> Path:
    if kind == "kimi_k25":
        return fixture.write_tiny_kimi_k25(dest)
    return stubs.write_text_config(dest, 4)
