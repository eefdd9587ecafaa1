"""Scripted weights for the tiny fixture: outputs and acceptance known in advance.

Random weights only prove that nothing crashes. These weights make the tiny
Kimi-K2.5 target a fixed next-token function, and make an EAGLE-3 head's
draft right *only if* it reads the aux hidden states the head was built for.

The target (``write_target_weights``), in its 256-wide residual stream:

- dimension 0 is a constant 1 (from every token's embedding row);
- dimensions 1 onwards hold the token's *code*: ``code(t)`` is ``i + 1`` for the
  i-th token of ``SCRIPT`` and 0 for every other token;
- attention writes nothing (``o_proj`` is zero); routed experts write
  nothing (their ``down_proj`` is zero);
- decoder layer 2's MLP (a shared expert: layers from 1 on are MoE) copies
  the code into slot 0 (dimensions 64..127) and layer 3's into slot 1
  (128..191), each permuted by ``slot_dim``; no other layer writes;
- ``lm_head`` reads the code: after token ``t`` comes ``next_token(t)``, so
  every greedy continuation walks ``SCRIPT`` round and round.

Aux hidden state id i is the residual stream *entering* layer i, so slot 0
is there from id 3 on and slot 1 from id 4 on: only id 3 holds slot 0
without slot 1. The head (``write_head_weights``) reads its *third* aux
state (``fc``): slot 0 mapped back to the code, minus four times slot 1,
and its ``lm_head`` predicts the token after next. Its layer writes
nothing (zero ``o_proj`` / ``down_proj``), so every later draft step
repeats the first. With the head's own ids (1, 2, 3) the first draft token
of every draft is accepted and the others are not. With a third id below 3
(the ids (0, 1, 2)) the head sees no code, and with one above 3 (an 8-layer
target's default, (2, 4, 5)) a negative one: it drafts token 0 and nothing
is accepted.

Values are small powers of two, exact in bfloat16. Checkpoints are written
with ``safetensors`` (float16), names as real checkpoints use them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: What the target emits, round and round: a Kimi-K2 completion that
#: reasons, calls one tool and ends, as the fixture tokenizer's ids
#: (``vpq.checkpoints.fixture.build_tokenizer``; ``tests/unit/test_scripted.py`` checks
#: them): ``<think>ok</think>``, then ``<|tool_calls_section_begin|>
#: <|tool_call_begin|>functions.ping:0<|tool_call_argument_begin|>{}
#: <|tool_call_end|><|tool_calls_section_end|>`` and ``[EOS]``. The target
#: reads only the current token, so no token may appear twice: the call
#: takes no arguments (a JSON object with a key repeats ``"``).
THINK = (980, 659, 981)  # <think> ok </think>
TOOL_CALL = (982, 984, 435, 113, 356, 507, 641, 49, 115, 506, 106, 61, 51, 985, 126, 128, 986, 983)
SCRIPT: tuple[int, ...] = (*THINK, *TOOL_CALL, 2)
#: The text the tokens above decode to (special tokens included).
SCRIPT_TEXT = (
    "<think>ok</think><|tool_calls_section_begin|><|tool_call_begin|>functions.ping:0"
    "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>[EOS]"
)
SLOT_WIDTH = 64
#: The decoder layers that write a slot, and which slot.
SLOT_OF_LAYER = {2: 0, 3: 1}
#: How the head weighs each slot of its last aux state.
HEAD_WEIGHTS = {0: 1.0, 1: -4.0}
GATE = 1.0  # reads the constant dimension: silu(GATE * x0) is positive
SLOT_SCALE = 1.0 / 128  # keeps slot values near 1 after the MLP's product


def code(token: int) -> int:
    """The token's code: 1 + its index in ``SCRIPT``, 0 off the script."""
    return SCRIPT.index(token) + 1 if token in SCRIPT else 0


def next_token(token: int) -> int:
    """The target's greedy next token after ``token``."""
    return SCRIPT[code(token) % len(SCRIPT)]


def code_dim(c: int) -> int:
    """The residual-stream dimension that holds code ``c``."""
    return 1 + c


def slot_dim(slot: int, c: int) -> int:
    """The dimension of ``slot`` that holds code ``c`` (a shifted copy)."""
    return SLOT_WIDTH * (slot + 1) + (c + 17 * (slot + 1)) % SLOT_WIDTH


def codes() -> range:
    """Every code: 0 (off the script) and 1..len(SCRIPT)."""
    return range(len(SCRIPT) + 1)


def _np() -> Any:
    import numpy as np

    return np


def _zeros(*shape: int) -> Any:
    return _np().zeros(shape, dtype="float16")


def _ones(n: int) -> Any:
    return _np().ones(n, dtype="float16")


def _slot_writer(layer: int, hidden: int, inter: int, prefix: str) -> dict[str, Any]:
    """An MLP (``gate_proj``/``up_proj``/``down_proj``) that copies the code
    into the slot of decoder layer ``layer`` (``SLOT_OF_LAYER``); for any
    other layer (or -1), one that writes nothing."""
    gate, up, down = _zeros(inter, hidden), _zeros(inter, hidden), _zeros(hidden, inter)
    if layer in SLOT_OF_LAYER:
        for c in codes():
            gate[c, 0] = GATE
            up[c, code_dim(c)] = 1.0
            down[slot_dim(SLOT_OF_LAYER[layer], c), c] = SLOT_SCALE
    return {
        f"{prefix}.gate_proj.weight": gate,
        f"{prefix}.up_proj.weight": up,
        f"{prefix}.down_proj.weight": down,
    }


def _mla_attention(text: dict[str, Any], prefix: str, in_dim: int = 0) -> dict[str, Any]:
    """Kimi-K2's MLA attention weights, all zero except the norms (writes nothing).

    ``in_dim``: the width the projections read (default ``hidden_size``; an
    EAGLE-3 head's first layer reads ``2 * hidden_size``)."""
    h, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
    d_in = in_dim or h
    q_lora, kv_lora = int(text["q_lora_rank"]), int(text["kv_lora_rank"])
    nope, rope, v = (int(text[k]) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    return {
        f"{prefix}.q_a_proj.weight": _zeros(q_lora, d_in),
        f"{prefix}.q_a_layernorm.weight": _ones(q_lora),
        f"{prefix}.q_b_proj.weight": _zeros(heads * (nope + rope), q_lora),
        f"{prefix}.kv_a_proj_with_mqa.weight": _zeros(kv_lora + rope, d_in),
        f"{prefix}.kv_a_layernorm.weight": _ones(kv_lora),
        f"{prefix}.kv_b_proj.weight": _zeros(heads * (nope + v), kv_lora),
        f"{prefix}.o_proj.weight": _zeros(h, heads * v),
    }


def _moe(text: dict[str, Any], layer: int, prefix: str) -> dict[str, Any]:
    """A MoE block: zero router and routed experts, a shared expert writing slot ``layer``."""
    h, inter = int(text["hidden_size"]), int(text["moe_intermediate_size"])
    experts = int(text["n_routed_experts"])
    out = {
        f"{prefix}.gate.weight": _zeros(experts, h),
        f"{prefix}.gate.e_score_correction_bias": _np().zeros(experts, dtype="float32"),
    }
    for e in range(experts):
        out |= _slot_writer(-1, h, inter, f"{prefix}.experts.{e}")
    shared = inter * int(text["n_shared_experts"])
    return out | _slot_writer(layer, h, shared, f"{prefix}.shared_experts")


def _text_weights(text: dict[str, Any]) -> dict[str, Any]:
    """The DeepSeek-V3 language model's weights (``language_model.`` names)."""
    h, vocab = int(text["hidden_size"]), int(text["vocab_size"])
    embed, head = _zeros(vocab, h), _zeros(vocab, h)
    for t in range(vocab):
        embed[t, 0], embed[t, code_dim(code(t))] = 1.0, 1.0
    for c in codes():
        head[SCRIPT[c % len(SCRIPT)], code_dim(c)] = 1.0
    p = "language_model.model"
    out = {
        f"{p}.embed_tokens.weight": embed,
        f"{p}.norm.weight": _ones(h),
        "language_model.lm_head.weight": head,
    }
    for i in range(int(text["num_hidden_layers"])):
        lp = f"{p}.layers.{i}"
        out |= {
            f"{lp}.input_layernorm.weight": _ones(h),
            f"{lp}.post_attention_layernorm.weight": _ones(h),
        }
        out |= _mla_attention(text, f"{lp}.self_attn")
        if i < int(text["first_k_dense_replace"]):
            out |= _slot_writer(i, h, int(text["intermediate_size"]), f"{lp}.mlp")
        else:
            out |= _moe(text, i, f"{lp}.mlp")
    return out


def _vision_weights(vision: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """The MoonViT tower and projector: small constant weights (images are not scripted)."""
    np, h = _np(), int(vision["hidden_size"])
    inter, patch = int(vision["intermediate_size"]), int(vision["patch_size"])
    merged = h * 4  # merge_kernel_size 2 x 2
    fill = {
        "weight": lambda *s: np.full(s, 1.0 / 64, dtype="float16"),
        "bias": lambda *s: _zeros(*s),
    }
    out: dict[str, Any] = {
        "vision_tower.patch_embed.proj.weight": fill["weight"](h, 3, patch, patch),
        "vision_tower.patch_embed.proj.bias": _zeros(h),
        "vision_tower.patch_embed.pos_emb.weight": _zeros(
            int(vision["init_pos_emb_height"]), int(vision["init_pos_emb_width"]), h
        ),
        "vision_tower.encoder.final_layernorm.weight": _ones(h),
        "vision_tower.encoder.final_layernorm.bias": _zeros(h),
        "mm_projector.pre_norm.weight": _ones(h),
        "mm_projector.pre_norm.bias": _zeros(h),
        "mm_projector.linear_1.weight": fill["weight"](merged, merged),
        "mm_projector.linear_1.bias": _zeros(merged),
        "mm_projector.linear_2.weight": fill["weight"](text_hidden, merged),
        "mm_projector.linear_2.bias": _zeros(text_hidden),
    }
    shapes = {"wqkv": (3 * h, h), "wo": (h, h), "mlp.fc0": (inter, h), "mlp.fc1": (h, inter)}
    for i in range(int(vision["num_hidden_layers"])):
        b = f"vision_tower.encoder.blocks.{i}"
        for norm in ("norm0", "norm1"):
            out |= {f"{b}.{norm}.weight": _ones(h), f"{b}.{norm}.bias": _zeros(h)}
        for name, shape in shapes.items():
            out |= {
                f"{b}.{name}.weight": fill["weight"](*shape),
                f"{b}.{name}.bias": _zeros(shape[0]),
            }
    return out


#: The MLA projections ``randomize_attention`` fills, and the spread of
#: their values (``o_proj`` small: attention moves the logits, and the
#: tokens mostly keep to the script; at 0.005 or more the attention output
#: outweighs the script in the residual stream and the logits flatten to
#: near-ties, sampled logprobs about -5, where bfloat16 rounding flips tokens).
ATTENTION_STD = {
    "q_a_proj": 0.05,
    "q_b_proj": 0.1,
    "kv_a_proj_with_mqa": 0.05,
    "kv_b_proj": 0.1,
    "o_proj": 0.0005,
}


def randomize_attention(tensors: dict[str, Any], seed: int) -> dict[str, Any]:
    """``tensors`` with every MLA projection (``ATTENTION_STD``) filled with
    seeded normal values: attention that writes something, for checking an
    attention backend's numerics against another's (the script no longer
    holds exactly)."""
    rng = _np().random.default_rng(seed)
    out = dict(tensors)
    for name in sorted(tensors):
        proj = name.rsplit(".", 2)[-2]
        if ".self_attn." in name and proj in ATTENTION_STD:
            shape = tensors[name].shape
            out[name] = rng.normal(0.0, ATTENTION_STD[proj], shape).astype("float16")
    return out


def write_target_weights(target: Path, attention_seed: int | None = None) -> Path:
    """Write ``model.safetensors`` for the fixture target at ``target`` (its
    ``config.json`` decides the shapes); with ``attention_seed``, attention
    is random (``randomize_attention``). Returns the file."""
    from safetensors.numpy import save_file

    cfg = json.loads((target / "config.json").read_text())
    text = cfg["text_config"]
    tensors = _text_weights(text) | _vision_weights(cfg["vision_config"], int(text["hidden_size"]))
    if attention_seed is not None:
        tensors = randomize_attention(tensors, attention_seed)
    out = target / "model.safetensors"
    save_file(tensors, str(out), metadata={"format": "pt"})
    return out


def _head_layer(cfg: dict[str, Any]) -> dict[str, Any]:
    """The head's one decoder layer (``midlayer.``): writes nothing.

    Llama heads get Llama attention; MLA heads (``kv_lora_rank`` in the
    config) Kimi-K2's MLA attention reading ``2 * hidden_size``, as
    ``deepseek_eagle3``'s first layer does. Both get a dense MLP."""
    h, inter = int(cfg["hidden_size"]), int(cfg["intermediate_size"])
    if "kv_lora_rank" in cfg:
        out = _mla_attention(cfg, "midlayer.self_attn", in_dim=2 * h)
        for norm in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
            out[f"midlayer.{norm}.weight"] = _ones(h)
        return out | _slot_writer(-1, h, inter, "midlayer.mlp")
    heads, kv = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"])
    dim = h // heads
    p = "midlayer"
    out = {
        f"{p}.self_attn.q_proj.weight": _zeros(heads * dim, 2 * h),
        f"{p}.self_attn.k_proj.weight": _zeros(kv * dim, 2 * h),
        f"{p}.self_attn.v_proj.weight": _zeros(kv * dim, 2 * h),
        f"{p}.self_attn.o_proj.weight": _zeros(h, heads * dim),
    }
    for norm in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        out[f"{p}.{norm}.weight"] = _ones(h)
    return out | _slot_writer(-1, h, inter, f"{p}.mlp")


def write_head_weights(head: Path) -> Path:
    """Write ``model.safetensors`` for the EAGLE-3 head at ``head`` (its
    ``config.json`` decides the shapes).

    ``fc`` and ``lm_head`` are scripted (see above); the layer writes
    nothing, Llama or MLA (``_head_layer``). An EAGLE 3.1 head (``fc_norm``
    in its config) gets one norm per aux state, ``fc_norm.0.weight`` ...
    (upstream's ``nn.ModuleList`` layout). Returns the file.
    """
    from safetensors.numpy import save_file

    cfg = json.loads((head / "config.json").read_text())
    h, vocab = int(cfg["hidden_size"]), int(cfg["draft_vocab_size"])
    n_aux = 3
    fc, lm_head = _zeros(h, n_aux * h), _zeros(vocab, h)
    for c in codes():
        for slot, weight in HEAD_WEIGHTS.items():
            fc[code_dim(c), (n_aux - 1) * h + slot_dim(slot, c)] = weight
        lm_head[SCRIPT[(c + 1) % len(SCRIPT)], code_dim(c)] = 1.0
    tensors = {"fc.weight": fc, "norm.weight": _ones(h), "lm_head.weight": lm_head}
    if cfg.get("fc_norm"):
        tensors |= {f"fc_norm.{i}.weight": _ones(h) for i in range(n_aux)}
    tensors |= _head_layer(cfg)
    out = head / "model.safetensors"
    save_file(tensors, str(out), metadata={"format": "pt"})
    return out


def write_speculators_head_weights(head: Path) -> Path:
    """Write ``model.safetensors`` for the ``speculators``-format head at
    ``head`` (``vpq.checkpoints.fixture.speculators_eagle3_config``), by the library's
    tensor names (``layers.0.*``, ``input_norm``, ``fc_norm.{i}``, its own
    ``embed_tokens``, zero: the layer writes nothing, so no draft reads it).

    The head is ``write_head_weights``' with one twist that makes its norm
    before ``fc`` matter: with ``norm_before_fc``, ``input_norm.weight`` is
    -1 over the last aux state's two slots (1 elsewhere) and ``fc`` reads
    those slots with the opposite sign. A drafter that applies the norm
    (one RMSNorm over the concatenated states: a positive scale, then the
    sign) drafts as the plain head does, its first token accepted; one that
    skips it reads minus the code, drafts token 0, and nothing is accepted.
    Returns the file.
    """
    from safetensors.numpy import save_file

    cfg = json.loads((head / "config.json").read_text())
    layer = cfg["transformer_layer_config"]
    h, vocab = int(layer["hidden_size"]), int(cfg["draft_vocab_size"])
    n_aux = 3
    sign = _ones(n_aux * h)
    if cfg.get("norm_before_fc"):
        last = (n_aux - 1) * h
        sign[last + SLOT_WIDTH : last + SLOT_WIDTH * (1 + len(HEAD_WEIGHTS))] = -1.0
    fc, lm_head = _zeros(h, n_aux * h), _zeros(vocab, h)
    for c in codes():
        for slot, weight in HEAD_WEIGHTS.items():
            col = (n_aux - 1) * h + slot_dim(slot, c)
            fc[code_dim(c), col] = weight * sign[col]
        lm_head[SCRIPT[(c + 1) % len(SCRIPT)], code_dim(c)] = 1.0
    tensors = {
        "fc.weight": fc,
        "norm.weight": _ones(h),
        "lm_head.weight": lm_head,
        "embed_tokens.weight": _zeros(int(layer["vocab_size"]), h),
    }
    if cfg.get("norm_before_fc"):
        tensors["input_norm.weight"] = sign
    if cfg.get("fc_norm"):
        tensors |= {f"fc_norm.{i}.weight": _ones(h) for i in range(n_aux)}
    for name, t in _head_layer(layer).items():
        tensors["layers.0." + name.removeprefix("midlayer.")] = t
    out = head / "model.safetensors"
    save_file(tensors, str(out), metadata={"format": "pt"})
    return out
