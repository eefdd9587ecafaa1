"""Tiny EAGLE-3 heads for the preflight tests: ``config.json`` plus a small
safetensors file written with the ``safetensors`` library.

One builder per public head shape (``HEADS``, named after
``vpq.checkpoints.fixture.HEAD_SHAPES``, whose configs they use); each returns the
config dict and the tensors (name -> numpy array) so a test can break
exactly one thing before ``write_head`` puts them on disk. Targets come
from ``vpq.checkpoints.fixture`` (the tiny Kimi-K2.5, hidden 256, vocabulary 1024, N
layers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from vpq.checkpoints import fixture

HIDDEN = fixture.HIDDEN  # the head's hidden size = the target's
VOCAB = fixture.VOCAB
DRAFT_VOCAB = 512
#: A target depth whose default ids (2, N//2, N-3) = (2, 4, 5) are valid.
NUM_LAYERS = 8
IDS = [1, 4, 6]

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


#: The test heads by name, each a shape of ``vpq.checkpoints.fixture.HEAD_SHAPES`` (the one
#: catalogue of public head shapes; the engine tier and the head matrix use it too).
SHAPES = {
    "llama-top-level-ids": "llama-top",
    "llama-no-ids": "llama-absent",
    "llama-eagle-config-ids": "llama-nested",
    "mla-deepseek_v2": "mla-deepseek_v2",
    "mla-kimi_k2": "mla-kimi_k2",
    "eagle3.1-fc_norm": "eagle3.1-llama",
    "eagle3.1-mla": "eagle3.1-mla",
}


def _fc_norms(k: int = 3) -> dict[str, np.ndarray]:
    """EAGLE 3.1's per-state norms as real checkpoints store them: upstream's
    ``nn.ModuleList`` of one RMSNorm per aux state, ``fc_norm.0.weight`` ...
    ``fc_norm.{k-1}.weight``, each ``[target_hidden]`` (vLLM 0.22.0's
    ``llama_eagle3.py`` and ``deepseek_eagle3.py``)."""
    return {f"fc_norm.{i}.weight": np.ones(HIDDEN, np.float16) for i in range(k)}


def head(name: str) -> Head:
    """The head ``name`` (a key of ``SHAPES``): ``vpq.checkpoints.fixture``'s config for its
    shape with ids ``IDS`` and a draft vocabulary of ``DRAFT_VOCAB`` (so
    ``d2t`` and ``t2d`` are needed), and the tensors its shape has."""
    cfg: dict[str, Any] = fixture.eagle3_head_config(SHAPES[name], tuple(IDS))
    cfg["draft_vocab_size"] = DRAFT_VOCAB
    tensors = _tensors()
    if cfg.get("fc_norm"):
        tensors |= _fc_norms()
    return cfg, tensors


def llama_top_level() -> Head:
    """``LlamaForCausalLMEagle3`` with top-level ``eagle_aux_hidden_state_layer_ids``."""
    return head("llama-top-level-ids")


def llama_no_ids() -> Head:
    """A Llama head that declares no ids: the target's default is used."""
    return head("llama-no-ids")


def llama_nested_ids() -> Head:
    """A Llama head with the ids under ``eagle_config`` only."""
    return head("llama-eagle-config-ids")


def mla_deepseek_v2() -> Head:
    """An MLA head ``Eagle3DeepseekV2ForCausalLM`` typed ``deepseek_v2``."""
    return head("mla-deepseek_v2")


def mla_kimi_k2() -> Head:
    """The same MLA head typed ``kimi_k2``."""
    return head("mla-kimi_k2")


def eagle31() -> Head:
    """An EAGLE 3.1 Llama head: ``fc_norm`` + ``norm_output``, ids under ``eagle_config``,
    ``fc_norm.0.weight`` ... as real checkpoints store them."""
    return head("eagle3.1-fc_norm")


def eagle31_mla() -> Head:
    """An EAGLE 3.1 MLA head (Kimi-K2.6 ``eagle3.1-mla`` style):
    ``Eagle3DeepseekV2ForCausalLM`` typed ``kimi_k2``, ``fc_norm`` +
    ``norm_output``, ids under ``eagle_config``."""
    return head("eagle3.1-mla")


HEADS: dict[str, Callable[[], Head]] = {name: partial(head, name) for name in SHAPES}


def speculators_head(**kwargs: Any) -> Head:
    """A one-layer EAGLE-3 head in the ``speculators`` format:
    ``vpq.checkpoints.fixture.speculators_eagle3_config(**kwargs)`` (ids ``IDS`` unless
    given; the library's default recipe: ``norm_before_fc`` and
    ``norm_output``) and the tensors ``Eagle3DraftModel.save_pretrained``
    writes for it, by the library's names (``layers.0.*``, ``input_norm``,
    ``fc_norm.{i}``, its own ``embed_tokens``; ``d2t`` and ``t2d`` only for a
    smaller draft vocabulary). tests/data/speculators-0.9.0/ holds the
    library's own output these are checked against."""
    kwargs.setdefault("aux_layer_ids", tuple(IDS))
    cfg = fixture.speculators_eagle3_config(**kwargs)
    ids, dv = cfg["eagle_aux_hidden_state_layer_ids"], cfg["draft_vocab_size"]
    k, h, inner = (len(ids) if ids else 3), HIDDEN, 512
    shapes: dict[str, tuple[int, ...]] = {
        "embed_tokens.weight": (VOCAB, h),
        "fc.weight": (h, k * h),
        "layers.0.hidden_norm.weight": (h,),
        "layers.0.input_layernorm.weight": (h,),
        "layers.0.mlp.down_proj.weight": (h, inner),
        "layers.0.mlp.gate_proj.weight": (inner, h),
        "layers.0.mlp.up_proj.weight": (inner, h),
        "layers.0.post_attention_layernorm.weight": (h,),
        "layers.0.self_attn.k_proj.weight": (h, 2 * h),
        "layers.0.self_attn.o_proj.weight": (h, h),
        "layers.0.self_attn.q_proj.weight": (h, 2 * h),
        "layers.0.self_attn.v_proj.weight": (h, 2 * h),
        "lm_head.weight": (dv, h),
        "norm.weight": (h,),
    }
    if cfg["norm_before_fc"]:
        shapes["input_norm.weight"] = (k * h,)
    if cfg["fc_norm"]:
        shapes |= {f"fc_norm.{i}.weight": (h,) for i in range(k)}
    if cfg["transformer_layer_config"]["model_type"] == "qwen3":  # type: ignore[index]
        shapes |= {f"layers.0.self_attn.{n}_norm.weight": (64,) for n in "qk"}
    tensors = {n: np.zeros(s, np.float16) for n, s in shapes.items()}
    if dv != VOCAB:
        tensors["d2t"] = np.arange(dv, dtype=np.int64)
        t2d = np.zeros(VOCAB, dtype=bool)
        t2d[:dv] = True
        tensors["t2d"] = t2d
    return cfg, tensors


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
    """The tiny Kimi-K2.5 target (``vpq.checkpoints.fixture``) with ``num_layers`` text layers."""
    return fixture.write_tiny_kimi_k25(dest, num_layers=num_layers)
