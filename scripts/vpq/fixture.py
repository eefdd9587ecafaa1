"""Tiny, locally generated model configs for tests: no download.

``write_tiny_kimi_k25`` writes a Kimi-K2.5-shaped target: a
``KimiK25Config`` (``model_type = "kimi_k25"``) whose ``text_config`` is a
tiny DeepSeek-V3 (MLA dimensions, a few routed experts,
``first_k_dense_replace = 1``) and whose ``vision_config`` is a tiny
MoonViT. ``write_tiny_eagle3_drafter`` writes a matching
``LlamaForCausalLMEagle3`` head with ``eagle_aux_hidden_state_layer_ids``,
``target_hidden_size`` and ``draft_vocab_size``.

Field names follow vLLM 0.17.1's ``vllm/transformers_utils/configs/kimi_k25.py``
(``KimiK25Config``, ``KimiK25VisionConfig``) and transformers'
``DeepseekV3Config``.
"""

from __future__ import annotations

import json
from pathlib import Path

HIDDEN = 64
VOCAB = 1024
NUM_LAYERS = 4
MEDIA_PLACEHOLDER = 1000


def tiny_text_config(num_layers: int = NUM_LAYERS) -> dict[str, object]:
    """A DeepSeek-V3 text config small enough for a unit-sized GPU run."""
    return {
        "model_type": "deepseek_v3",
        "architectures": ["DeepseekV3ForCausalLM"],
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_shared_experts": 1,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 32,
        "q_lora_rank": 48,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "topk_method": "noaux_tc",
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def tiny_vision_config() -> dict[str, object]:
    """A one-layer MoonViT (``KimiK25VisionConfig``)."""
    return {
        "patch_size": 14,
        "init_pos_emb_height": 8,
        "init_pos_emb_width": 8,
        "init_pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "merge_kernel_size": [2, 2],
        "video_attn_type": "spatial_temporal",
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": 32,
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
        "text_hidden_size": HIDDEN,
    }


def write_tiny_kimi_k25(dest: Path, num_layers: int = NUM_LAYERS) -> Path:
    """Write ``dest/config.json`` for a tiny ``KimiK25ForConditionalGeneration``."""
    dest.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model_type": "kimi_k25",
        "architectures": ["KimiK25ForConditionalGeneration"],
        "text_config": tiny_text_config(num_layers),
        "vision_config": tiny_vision_config(),
        "media_placeholder_token_id": MEDIA_PLACEHOLDER,
        "pad_token_id": 0,
        "torch_dtype": "bfloat16",
    }
    (dest / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return dest


def write_tiny_eagle3_drafter(
    dest: Path, aux_layer_ids: tuple[int, ...] = (1, 2, 3)
) -> Path:
    """Write ``dest/config.json`` for a one-layer ``LlamaForCausalLMEagle3`` head.

    ``aux_layer_ids`` become ``eagle_aux_hidden_state_layer_ids``: global
    decoder-layer ids of the target whose residual stream the head reads.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "target_hidden_size": HIDDEN,
        "eagle_aux_hidden_state_layer_ids": list(aux_layer_ids),
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    (dest / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return dest
