"""Tiny EAGLE-3 heads for the preflight tests: ``config.json`` plus a small
safetensors file written with the ``safetensors`` library.

One builder per public head shape (``HEADS``); each returns the config dict
and the tensors (name -> numpy array) so a test can break exactly one thing
before ``write_head`` puts them on disk. Targets come from ``vpq.fixture``
(the tiny Kimi-K2.5, hidden 256, vocabulary 1024, N layers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from vpq import fixture

HIDDEN = fixture.HIDDEN  # the head's hidden size = the target's
VOCAB = fixture.VOCAB
DRAFT_VOCAB = 512
#: A target depth whose default ids (2, N//2, N-3) = (2, 4, 5) are valid.
NUM_LAYERS = 8
IDS = [1, 4, 6]
LAYER_IDS = "eagle_aux_hidden_state_layer_ids"

Head = tuple[dict[str, Any], dict[str, np.ndarray]]


def _tensors(
    k: int = 3, hidden: int = HIDDEN, target_hidden: int = HIDDEN
) -> dict[str, np.ndarray]:
    z = np.zeros
    d2t = np.arange(DRAFT_VOCAB, dtype=np.int64)  # offsets draft id -> target id
    t2d = np.zeros(VOCAB, dtype=bool)
    t2d[:DRAFT_VOCAB] = True
    return {
        "fc.weight": z((hidden, k * target_hidden), np.float16),
        "midlayer.input_layernorm.weight": z(hidden, np.float16),
        "midlayer.hidden_norm.weight": z(hidden, np.float16),
        "norm.weight": z(hidden, np.float16),
        "lm_head.weight": z((DRAFT_VOCAB, hidden), np.float16),
        "d2t": d2t,
        "t2d": t2d,
    }


def _llama_config(ids: list[int] | None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": HIDDEN,
        "intermediate_size": 512,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": HIDDEN,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    if ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(ids)
    return cfg


def llama_top_level() -> Head:
    """``LlamaForCausalLMEagle3`` with top-level ``eagle_aux_hidden_state_layer_ids``."""
    return _llama_config(IDS), _tensors()


def llama_no_ids() -> Head:
    """A Llama head that declares no ids: the target's default is used."""
    return _llama_config(None), _tensors()


def llama_nested_ids() -> Head:
    """A Llama head with the ids under ``eagle_config`` only."""
    cfg = _llama_config(None)
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(IDS)}
    return cfg, _tensors()


def _mla_config(model_type: str) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "hidden_size": HIDDEN,
        "intermediate_size": 512,
        "num_hidden_layers": 1,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "q_lora_rank": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": None,
        "first_k_dense_replace": 1,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": HIDDEN,
        "eagle_aux_hidden_state_layer_ids": list(IDS),
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }


def mla_deepseek_v2() -> Head:
    """An MLA head ``Eagle3DeepseekV2ForCausalLM`` typed ``deepseek_v2``."""
    return _mla_config("deepseek_v2"), _tensors()


def mla_kimi_k2() -> Head:
    """The same MLA head typed ``kimi_k2``."""
    return _mla_config("kimi_k2"), _tensors()


def _fc_norms(k: int = 3) -> dict[str, np.ndarray]:
    """EAGLE 3.1's per-state norms as real checkpoints store them: upstream's
    ``nn.ModuleList`` of one RMSNorm per aux state, ``fc_norm.0.weight`` ...
    ``fc_norm.{k-1}.weight``, each ``[target_hidden]`` (vLLM 0.22.0's
    ``llama_eagle3.py`` and ``deepseek_eagle3.py``)."""
    return {f"fc_norm.{i}.weight": np.ones(HIDDEN, np.float16) for i in range(k)}


def eagle31() -> Head:
    """An EAGLE 3.1 Llama head: ``fc_norm`` + ``norm_output``, ids under ``eagle_config``."""
    cfg, tensors = llama_nested_ids()
    cfg.update(fc_norm=True, norm_output=True)
    return cfg, tensors | _fc_norms()


def eagle31_mla() -> Head:
    """An EAGLE 3.1 MLA head (Kimi-K2.6 ``eagle3.1-mla`` style):
    ``Eagle3DeepseekV2ForCausalLM`` typed ``kimi_k2``, ``fc_norm`` +
    ``norm_output``, ids under ``eagle_config``."""
    cfg = _mla_config("kimi_k2")
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": cfg.pop(LAYER_IDS)}
    cfg.update(fc_norm=True, norm_output=True)
    return cfg, _tensors() | _fc_norms()


HEADS: dict[str, Callable[[], Head]] = {
    "llama-top-level-ids": llama_top_level,
    "llama-no-ids": llama_no_ids,
    "llama-eagle-config-ids": llama_nested_ids,
    "mla-deepseek_v2": mla_deepseek_v2,
    "mla-kimi_k2": mla_kimi_k2,
    "eagle3.1-fc_norm": eagle31,
    "eagle3.1-mla": eagle31_mla,
}


def write_head(dest: Path, head: Head, *, shards: int = 1) -> Path:
    """Write ``dest/config.json`` and the tensors (one file, or ``shards``
    files with ``model.safetensors.index.json``)."""
    cfg, tensors = head
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if shards == 1:
        save_file(tensors, str(dest / "model.safetensors"))
        return dest
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        save_file(part, str(dest / fname))
        weight_map.update({n: fname for n in part})
    (dest / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}) + "\n"
    )
    return dest


def write_target(dest: Path, num_layers: int = NUM_LAYERS) -> Path:
    """The tiny Kimi-K2.5 target (``vpq.fixture``) with ``num_layers`` text layers."""
    return fixture.write_tiny_kimi_k25(dest, num_layers=num_layers)
