"""A tiny, locally generated Kimi-K2.5 checkpoint and EAGLE-3 head: no download.

``write_tiny_kimi_k25(dest)`` writes a Kimi-K2.5-shaped target directory:

- ``config.json``: a ``KimiK25Config`` (``model_type = "kimi_k25"``,
  ``KimiK25ForConditionalGeneration``) whose ``text_config`` is a tiny
  DeepSeek-V3 and whose ``vision_config`` is a one-layer MoonViT. The
  attention keeps Kimi-K2's MLA shapes (``kv_lora_rank`` 512,
  ``qk_rope_head_dim`` 64, ``qk_nope_head_dim`` = ``v_head_dim`` = 128: vLLM's
  MLA kernels support only the 576-wide latent cache) and its MoE routing
  (sigmoid scores, ``noaux_tc``, one group); everything else is small
  (hidden 256, 4 layers, 8 routed experts, vocabulary 1024).
- a tokenizer built with the ``tokenizers`` library, loadable by
  transformers' ``AutoTokenizer`` without ``trust_remote_code``
  (``tokenizer.json``, ``tokenizer_config.json`` naming
  ``PreTrainedTokenizerFast``, ``special_tokens_map.json``). See
  ``build_tokenizer``.
- ``preprocessor_config.json`` + ``kimi_k25_tiny_image_processor.py``: the
  real checkpoint ships its image processor as remote code, and vLLM
  0.17.1's ``KimiK25ProcessingInfo`` loads it with
  ``cached_get_image_processor(model, trust_remote_code=True)``; the
  fixture ships a minimal stand-in the same way (see that module). Nothing
  else of the real checkpoint's remote code is needed: vLLM has its own
  ``KimiK25Config`` and its own processor wrapper
  (``MoonshotKimiVAutoProcessor``).
- no weights: load it with vLLM's ``load_format="dummy"`` (random weights,
  the same for every run), or write ``vpq.checkpoints.scripted``'s with
  ``write_tiny_checkpoints`` (``python -m vpq fixture DEST``).

``write_tiny_eagle3_drafter(dest)`` writes a matching one-layer
``LlamaForCausalLMEagle3`` head (``config.json`` only; also dummy-loaded)
with ``eagle_aux_hidden_state_layer_ids``, ``target_hidden_size`` and
``draft_vocab_size``. ``write_fixture(dest)`` writes both.

Field names follow vLLM 0.17.1's ``vllm/transformers_utils/configs/kimi_k25.py``
(``KimiK25Config``, ``KimiK25VisionConfig``) and transformers'
``DeepseekV3Config``.
"""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

HIDDEN = 256
VOCAB = 1024
NUM_LAYERS = 4
#: Default EAGLE-3 aux layers for the tiny target (global decoder-layer ids).
#: The model's own default for 4 layers, ``(2, N // 2, N - 3) = (2, 2, 1)``,
#: repeats an id, so a run that ignored the drafter config would fail.
AUX_LAYER_IDS = (1, 2, 3)

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
MEDIA_PLACEHOLDER = 1000
#: Kimi-K2.5 chat and media special tokens, by id. ``<|media_pad|>`` is the
#: media placeholder vLLM expands to one token per image embedding.
KIMI_SPECIAL_TOKENS = {
    # Reasoning and tool-call markers, as Kimi-K2's tokenizer has them (one
    # token each); the kimi_k2 reasoning and tool parsers read them.
    980: "<think>",
    981: "</think>",
    982: "<|tool_calls_section_begin|>",
    983: "<|tool_calls_section_end|>",
    984: "<|tool_call_begin|>",
    985: "<|tool_call_argument_begin|>",
    986: "<|tool_call_end|>",
    990: "<|im_end|>",
    991: "<|im_user|>",
    992: "<|im_assistant|>",
    993: "<|im_system|>",
    994: "<|im_middle|>",
    995: "<|media_begin|>",
    996: "<|media_content|>",
    997: "<|media_end|>",
    MEDIA_PLACEHOLDER: "<|media_pad|>",
}
#: Kimi-style chat template: ``<|im_{role}|>{role}<|im_middle|>{content}<|im_end|>``.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|im_{{ m['role'] }}|>{{ m['role'] }}<|im_middle|>{{ m['content'] }}<|im_end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
)
IMAGE_PROCESSOR_MODULE = "kimi_k25_tiny_image_processor"
IMAGE_PROCESSOR_CLASS = "KimiK25TinyImageProcessor"
#: What the image processor reads (see its module). ``patch_size`` must
#: equal ``vision_config.patch_size``; 16 x 16 patches at most, i.e. at
#: most 64 placeholder tokens per image.
MEDIA_PROC_CFG = {
    "patch_size": 14,
    "merge_kernel_size": 2,
    "in_patch_limit": 256,
    "patch_limit_on_one_side": 16,
    "temporal_merge_kernel_size": 4,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    # Read by vLLM 0.32.0's fused processor even for images (its dummy
    # video for profiling): no per-frame limit, the image limit for a video,
    # no fixed token count.
    "in_patch_limit_each_frame": None,
    "in_patch_limit_video": 256,
    "fixed_output_tokens": None,
}


def tiny_text_config(num_layers: int = NUM_LAYERS) -> dict[str, object]:
    """A DeepSeek-V3 text config small enough for a unit-sized GPU run."""
    return {
        "model_type": "deepseek_v3",
        "architectures": ["DeepseekV3ForCausalLM"],
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "n_shared_experts": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512,
        "q_lora_rank": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
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
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": PAD_ID,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def tiny_vision_config() -> dict[str, object]:
    """A one-layer MoonViT (``KimiK25VisionConfig``): 2 heads of 64."""
    return {
        "patch_size": MEDIA_PROC_CFG["patch_size"],
        "init_pos_emb_height": 8,
        "init_pos_emb_width": 8,
        "init_pos_emb_time": MEDIA_PROC_CFG["temporal_merge_kernel_size"],
        "pos_emb_type": "divided_fixed",
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "hidden_size": 128,
        "intermediate_size": 256,
        "merge_kernel_size": [2, 2],
        "video_attn_type": "spatial_temporal",
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": HIDDEN,
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
    }


def tokenizer_tokens() -> tuple[dict[str, int], list[tuple[str, str]], dict[int, str]]:
    """The tokenizer's BPE vocabulary, merges and special tokens.

    Ids: 0-2 ``[PAD]`` ``[BOS]`` ``[EOS]``; 3-258 the 256 byte-level
    symbols, in byte order; 259-960 merges (space + lowercase letter, then
    every lowercase letter pair); 961-1023 special tokens: the Kimi tokens of
    ``KIMI_SPECIAL_TOKENS`` at their ids and ``<|reserved_N|>`` elsewhere, so
    every id the model can emit (``vocab_size`` 1024) decodes.
    """
    # GPT-2's byte -> printable-symbol table, which tokenizers' ByteLevel uses.
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    symbol = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbol:
            symbol[b] = chr(256 + extra)
            extra += 1
    vocab = {"[PAD]": PAD_ID, "[BOS]": BOS_ID, "[EOS]": EOS_ID}
    for b in range(256):
        vocab[symbol[b]] = len(vocab)
    space = symbol[ord(" ")]
    letters = string.ascii_lowercase
    merges = [(space, c) for c in letters] + [(a, c) for a in letters for c in letters]
    for a, c in merges:
        vocab[a + c] = len(vocab)
    specials = {
        i: KIMI_SPECIAL_TOKENS.get(i, f"<|reserved_{i}|>") for i in range(len(vocab), VOCAB)
    }
    return vocab, merges, specials


def build_tokenizer() -> Tokenizer:
    """A byte-level BPE ``tokenizers.Tokenizer`` over ``tokenizer_tokens()``.

    Lossless on any text (byte-level), adds no special tokens when
    encoding, and maps each special token's text to its single id.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab, merges, specials = tokenizer_tokens()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    every_special = {PAD_ID: "[PAD]", BOS_ID: "[BOS]", EOS_ID: "[EOS]", **specials}
    for i in sorted(every_special):
        added = tok.add_special_tokens(
            [AddedToken(every_special[i], special=True, normalized=False)]
        )
        if i >= len(vocab) and (added != 1 or tok.token_to_id(every_special[i]) != i):
            raise AssertionError(f"special token {every_special[i]!r} did not get id {i}")
    return tok


def write_tokenizer(dest: Path) -> None:
    """``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``."""
    build_tokenizer().save(str(dest / "tokenizer.json"))
    special_map = {"bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]"}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_map,
        "unk_token": None,
        "model_max_length": 2048,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    write_json(dest / "tokenizer_config.json", config)
    write_json(dest / "special_tokens_map.json", special_map)


def write_image_processor(dest: Path) -> None:
    """``preprocessor_config.json`` and the processor module it names."""
    src = Path(__file__).with_name(f"{IMAGE_PROCESSOR_MODULE}.py")
    shutil.copyfile(src, dest / src.name)
    write_json(
        dest / "preprocessor_config.json",
        {
            "auto_map": {"AutoImageProcessor": f"{IMAGE_PROCESSOR_MODULE}.{IMAGE_PROCESSOR_CLASS}"},
            "image_processor_type": IMAGE_PROCESSOR_CLASS,
            "media_proc_cfg": MEDIA_PROC_CFG,
        },
    )


#: The top-level scalar keys of Kimi-K2.5's ``config.json`` (as the real
#: checkpoint ``moonshotai/Kimi-K2.5`` carries them). Config classes keep
#: keys they do not declare as attributes: from 0.32.0, vLLM uses
#: transformers' ``Kimi_K25Config`` (it declares ``image_token_id``) and the
#: drafter still reads ``media_placeholder_token_id`` from this key.
KIMI_K25_TOP_LEVEL: dict[str, object] = {
    "media_placeholder_token_id": MEDIA_PLACEHOLDER,
    "pad_token_id": PAD_ID,
    "bos_token_id": BOS_ID,
    "eos_token_id": EOS_ID,
}


def write_tiny_kimi_k25(dest: Path, num_layers: int = NUM_LAYERS) -> Path:
    """Write the tiny ``KimiK25ForConditionalGeneration`` directory (no weights)."""
    dest.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model_type": "kimi_k25",
        "architectures": ["KimiK25ForConditionalGeneration"],
        "text_config": tiny_text_config(num_layers),
        "vision_config": tiny_vision_config(),
        **KIMI_K25_TOP_LEVEL,
        "torch_dtype": "bfloat16",
    }
    write_json(dest / "config.json", cfg)
    write_tokenizer(dest)
    write_image_processor(dest)
    return dest


def write_tiny_eagle3_drafter(dest: Path, aux_layer_ids: tuple[int, ...] = AUX_LAYER_IDS) -> Path:
    """Write ``dest/config.json`` for a one-layer ``LlamaForCausalLMEagle3`` head.

    ``aux_layer_ids`` become ``eagle_aux_hidden_state_layer_ids``: global
    decoder-layer ids of the target whose residual stream the head reads.
    The head's hidden size equals the target's (``target_hidden_size``), so
    its input projection is ``3 * 256 -> 256``; 4 heads of 64.
    """
    return write_eagle3_head(dest, "llama-top", aux_layer_ids)


#: The public EAGLE-3 head shapes for Kimi-K2.5, by what their config says
#: (docs/install.md, "EAGLE-3 heads"): architecture, ``model_type``, where the layer
#: ids sit (``"top"``: ``eagle_aux_hidden_state_layer_ids`` at the top level;
#: ``"nested"``: under ``eagle_config``; ``"absent"``: nowhere; ``"empty"``:
#: an explicit ``[]`` at the top level) and whether it is EAGLE 3.1
#: (``fc_norm`` and ``norm_output``). No checkpoint is named in code.
HEAD_SHAPES: dict[str, tuple[str, str, str, bool]] = {
    "llama-top": ("LlamaForCausalLMEagle3", "llama", "top", False),
    "llama-absent": ("LlamaForCausalLMEagle3", "llama", "absent", False),
    "llama-nested": ("LlamaForCausalLMEagle3", "llama", "nested", False),
    "llama-empty": ("LlamaForCausalLMEagle3", "llama", "empty", False),
    "mla-deepseek_v2": ("Eagle3DeepseekV2ForCausalLM", "deepseek_v2", "top", False),
    "mla-kimi_k2": ("Eagle3DeepseekV2ForCausalLM", "kimi_k2", "top", False),
    "eagle3.1-llama": ("LlamaForCausalLMEagle3", "llama", "nested", True),
    "eagle3.1-mla": ("Eagle3DeepseekV2ForCausalLM", "kimi_k2", "nested", True),
}
#: A head's ``max_position_embeddings``: the tiny target's.
HEAD_MAX_POSITIONS = 2048
#: Kimi-K2.5's rope_theta; an MLA head must keep it (not fall back to 10000).
KIMI_ROPE_THETA = 50000.0


def _mla_head_fields() -> dict[str, object]:
    """An MLA head's attention fields: Kimi-K2's shapes (as the target's text
    config), ``rope_theta`` 50000 without ``rope_scaling``, and no MoE key at
    all, as the public Kimi-K2.5 MLA heads' configs (TorchSpec's
    ``configs/draft_models/kimi_k25_eagle3_mla.json``, the recipe of
    ``lightseekorg/kimi-k2.5-eagle3-mla``): the drafter's one layer is a dense
    MLP whatever the config class's MoE defaults say."""
    text = tiny_text_config()
    keys = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    return {key: text[key] for key in keys} | {
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "rope_theta": KIMI_ROPE_THETA,
    }


def write_eagle3_head(
    dest: Path,
    shape: str,
    aux_layer_ids: tuple[int, ...] = AUX_LAYER_IDS,
    *,
    max_position_embeddings: int = HEAD_MAX_POSITIONS,
) -> Path:
    """Write ``dest/config.json`` for a one-layer head of ``shape`` (a key of
    ``HEAD_SHAPES``): ``eagle3_head_config``.

    Raises:
        KeyError: ``shape`` is not in ``HEAD_SHAPES``.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cfg = eagle3_head_config(shape, aux_layer_ids, max_position_embeddings=max_position_embeddings)
    write_json(dest / "config.json", cfg)
    return dest


def eagle3_head_config(
    shape: str,
    aux_layer_ids: tuple[int, ...] = AUX_LAYER_IDS,
    *,
    max_position_embeddings: int = HEAD_MAX_POSITIONS,
) -> dict[str, object]:
    """The ``config.json`` of a one-layer head of ``shape`` (a key of
    ``HEAD_SHAPES``), sized for the tiny target (hidden 256, vocabulary 1024).
    ``max_position_embeddings``: the head's position limit (the target's,
    2048, unless a case wants a shorter head).

    MLA heads keep Kimi-K2's attention shapes (as the target's text config)
    with a dense MLP, and ``rope_theta`` 50000 without ``rope_scaling``.

    Raises:
        KeyError: ``shape`` is not in ``HEAD_SHAPES``.
    """
    arch, model_type, ids_at, eagle31 = HEAD_SHAPES[shape]
    cfg: dict[str, object] = {
        "model_type": model_type,
        "architectures": [arch],
        "hidden_size": HIDDEN,
        "intermediate_size": 512,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "target_hidden_size": HIDDEN,
        "max_position_embeddings": max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    if model_type != "llama":
        cfg.update(_mla_head_fields())
    if ids_at == "top":
        cfg["eagle_aux_hidden_state_layer_ids"] = list(aux_layer_ids)
    elif ids_at == "empty":
        cfg["eagle_aux_hidden_state_layer_ids"] = []
    elif ids_at == "nested":
        cfg["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": list(aux_layer_ids),
            "use_aux_hidden_state": True,
        }
    if eagle31:
        cfg.update(fc_norm=True, norm_output=True)
    return cfg


#: The speculators library release whose checkpoint format
#: ``speculators_eagle3_config`` writes (tests/data/speculators-0.9.0/ holds
#: that release's own output for the same head, the check on this copy).
SPECULATORS_VERSION = "0.9.0"
#: The verifier a speculators head records it was trained for.
SPECULATORS_VERIFIER = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "name_or_path": "moonshotai/Kimi-K2.5",
}


def _speculators_layer_config(layer_type: str) -> dict[str, object]:
    """``transformer_layer_config`` as speculators 0.9.0 writes it (transformers
    5's ``to_diff_dict`` of a one-layer ``LlamaConfig`` or ``Qwen3Config``)."""
    layer: dict[str, object] = {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": 512,
        "max_position_embeddings": HEAD_MAX_POSITIONS,
        "mlp_bias": False,
        "model_type": layer_type,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "num_key_value_heads": 4,
        "pad_token_id": None,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": KIMI_ROPE_THETA, "rope_type": "default"},
        "tie_word_embeddings": False,
        "transformers_version": "5.24.0",
        "use_cache": True,
        "vocab_size": VOCAB,
    }
    if layer_type == "qwen3":
        del layer["mlp_bias"], layer["pretraining_tp"]
        layer |= {
            "layer_types": ["full_attention"],
            "max_window_layers": 28,
            "sliding_window": None,
            "use_sliding_window": False,
        }
    return layer


#: ``speculators_config`` of the heads below: one greedy proposal method of
#: 3 tokens, and the verifier.
SPECULATORS_CONFIG: dict[str, object] = {
    "algorithm": "eagle3",
    "default_proposal_method": "greedy",
    "proposal_methods": [
        {
            "accept_tolerance": 0.0,
            "proposal_type": "greedy",
            "speculative_tokens": 3,
            "verifier_accept_k": 1,
        }
    ],
    "verifier": SPECULATORS_VERIFIER,
}


def speculators_eagle3_config(
    aux_layer_ids: tuple[int, ...] | None = AUX_LAYER_IDS,
    *,
    norm_before_fc: bool = True,
    fc_norm: bool = False,
    norm_output: bool = True,
    norm_before_residual: bool = True,
    layer_type: str = "llama",
    draft_vocab_size: int = VOCAB,
) -> dict[str, object]:
    """The ``config.json`` of a one-layer EAGLE-3 head in the ``speculators``
    format, key for key as speculators 0.9.0's ``Eagle3DraftModel.
    save_pretrained`` writes it (with transformers 5): the algorithm's
    fields at the top level (``speculators_model_type``, ``draft_vocab_size``,
    ``norm_before_residual``, ``norm_before_fc``, ``fc_norm``,
    ``norm_output``, ``target_hidden_size``, ``eagle_aux_hidden_state_layer_ids``,
    ``null`` when not given), ``speculators_config``
    (``SPECULATORS_CONFIG``), and the decoder layer's own config under
    ``transformer_layer_config`` (``_speculators_layer_config``: model_type
    ``layer_type``; hidden 256, vocabulary 1024, 4 heads of 64, as
    ``eagle3_head_config``).

    The defaults are the library's default eagle3 training recipe, which
    turns on ``norm_before_fc`` and ``norm_output`` (its ``TrainConfig``);
    ``fc_norm`` and ``norm_before_fc`` are exclusive there.
    """
    return {
        "architectures": ["Eagle3DraftModel"],
        "auto_map": {"": "config.Eagle3SpeculatorConfig"},
        "draft_vocab_size": draft_vocab_size,
        "dtype": "float32",
        "eagle_aux_hidden_state_layer_ids": (
            list(aux_layer_ids) if aux_layer_ids is not None else None
        ),
        "embed_requires_grad": False,
        "fc_norm": fc_norm,
        "norm_before_fc": norm_before_fc,
        "norm_before_residual": norm_before_residual,
        "norm_output": norm_output,
        "speculators_config": json.loads(json.dumps(SPECULATORS_CONFIG)),
        "speculators_model_type": "eagle3",
        "speculators_version": SPECULATORS_VERSION,
        "target_hidden_size": None,
        "tie_word_embeddings": False,
        "transformer_layer_config": _speculators_layer_config(layer_type),
        "transformers_version": "5.24.0",
    }


def write_speculators_eagle3_head(dest: Path, **kwargs: object) -> Path:
    """Write ``dest/config.json``: ``speculators_eagle3_config(**kwargs)``."""
    dest.mkdir(parents=True, exist_ok=True)
    write_json(dest / "config.json", speculators_eagle3_config(**kwargs))  # type: ignore[arg-type]
    return dest


TARGET_DIR = "kimi-k25-tiny"
DRAFTER_DIR = "eagle3-tiny"


def write_fixture(dest: Path) -> tuple[Path, Path]:
    """Write ``dest/kimi-k25-tiny`` (target) and ``dest/eagle3-tiny`` (drafter)."""
    return write_tiny_kimi_k25(dest / TARGET_DIR), write_tiny_eagle3_drafter(dest / DRAFTER_DIR)


#: Extra heads for the GPU tests, by name: an MLA head (top-level ids) and an
#: EAGLE 3.1 head with its ids under ``eagle_config`` (see ``HEAD_SHAPES``).
GPU_HEADS = {"eagle3-mla-tiny": "mla-deepseek_v2", "eagle3.1-tiny": "eagle3.1-llama"}


def write_fixture_heads(dest: Path) -> list[Path]:
    """Write the ``GPU_HEADS`` under ``dest``, each reading ``AUX_LAYER_IDS``."""
    return [write_eagle3_head(dest / name, shape) for name, shape in GPU_HEADS.items()]


#: What ``python -m vpq fixture DEST`` writes beside the target: a directory
#: name per head and its shape (``HEAD_SHAPES``): the plain Llama head, the
#: GPU tests' heads, and an EAGLE 3.1 MLA head.
TINY_HEADS = {DRAFTER_DIR: "llama-top", **GPU_HEADS, "eagle3.1-mla-tiny": "eagle3.1-mla"}


def write_tiny_checkpoints(dest: Path, weights: bool = True) -> list[Path]:
    """Write the tiny target ``dest/kimi-k25-tiny`` and the ``TINY_HEADS``,
    each with ``model.safetensors`` (``vpq.checkpoints.scripted``'s weights; needs
    ``numpy`` and ``safetensors``) unless ``weights`` is false. Returns the
    directories, target first."""
    target = write_tiny_kimi_k25(dest / TARGET_DIR)
    head_dirs = [write_eagle3_head(dest / name, shape) for name, shape in TINY_HEADS.items()]
    if weights:
        from vpq.checkpoints import scripted

        scripted.write_target_weights(target)
        for head in head_dirs:
            scripted.write_head_weights(head)
    return [target, *head_dirs]


def write_json(path: Path, obj: object) -> None:
    """``obj`` as JSON at ``path``: sorted keys, two-space indent, a final newline."""
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
