"""Run inside a venv that has a vLLM wheel installed; prints one JSON object.

Usage: python fixture_probe.py TARGET_DIR DRAFTER_DIR

Checks, on CPU and offline, that vLLM accepts the tiny fixture written by
``vpq.checkpoints.fixture`` the way the engine would load it, tokenizer included
(``skip_tokenizer_init`` is left off):

- ``ModelConfig(model=TARGET_DIR)`` and ``SpeculativeConfig(method="eagle3",
  model=DRAFTER_DIR)``;
- the tokenizer through vLLM's own ``cached_tokenizer_from_config``
  (``trust_remote_code`` off): round trips, special-token ids, chat template;
- the image processor through ``cached_get_image_processor(model,
  trust_remote_code=True)``, the call ``KimiK25ProcessingInfo`` makes when
  the operator trusts remote code;
- vLLM's Kimi-K2.5 multimodal processor (``MULTIMODAL_REGISTRY``) on a
  prompt with one image, and on the dummy inputs the engine profiles with,
  under ``trust_remote_code=True``: the image processor is remote code, and
  since the GHSA-7972-pg2x-xr59 backport vLLM runs it only then.

Each probe records its result or the error it raised.
"""

from __future__ import annotations

import json
import logging
import os
import sys

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
logging.disable(logging.WARNING)

TEXTS = ["Hello, world!", "the quick brown fox  jumps\nover 12 lazy dogs", "ünïcödé ✓ 漢字"]
#: Kimi-K2.5's image prompt, as in vLLM 0.17.1's
#: examples/offline_inference/vision_language.py (run_kimi_k25).
IMAGE_PROMPT = (
    "<|im_user|>user<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
    "What is in this image?<|im_end|><|im_assistant|>assistant<|im_middle|>"
)
IMAGE_SIZE = (224, 168)  # width, height in pixels: 16 x 12 patches of 14, 48 tokens


def probe(fn):  # type: ignore[no-untyped-def]
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # noqa: BLE001 - we report whatever it raised
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def image():  # type: ignore[no-untyped-def]
    import numpy as np
    from PIL import Image

    w, h = IMAGE_SIZE
    x = np.linspace(0, 255, w * h * 3).reshape(h, w, 3).astype("uint8")
    return Image.fromarray(x, "RGB")


def main() -> None:
    target, drafter = sys.argv[1], sys.argv[2]
    out: dict[str, object] = {}
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    holder: dict[str, object] = {}

    def model_config() -> dict[str, object]:
        mc = ModelConfig(model=target)
        holder["mc"] = mc
        text = mc.hf_text_config
        return {
            "architectures": list(mc.architectures),
            "model_type": mc.hf_config.model_type,
            "text_model_type": text.model_type,
            "is_multimodal": bool(mc.is_multimodal_model),
            "skip_tokenizer_init": bool(mc.skip_tokenizer_init),
            "media_placeholder_token_id": mc.hf_config.media_placeholder_token_id,
            "num_hidden_layers": text.num_hidden_layers,
            "hidden_size": text.hidden_size,
            "vocab_size": mc.get_vocab_size(),
            "use_mla": bool(mc.use_mla),
            "mla_head_size": text.kv_lora_rank + text.qk_rope_head_dim,
        }

    out["model_config"] = probe(model_config)

    def spec_config() -> dict[str, object]:
        sc = SpeculativeConfig(
            target_model_config=holder["mc"],
            target_parallel_config=ParallelConfig(),
            method="eagle3",
            model=drafter,
            num_speculative_tokens=2,
        )
        dc = sc.draft_model_config
        return {
            "method": sc.method,
            "draft_architectures": list(dc.architectures),
            "eagle_aux_hidden_state_layer_ids": list(dc.hf_config.eagle_aux_hidden_state_layer_ids),
            "target_hidden_size": dc.hf_config.target_hidden_size,
            "draft_vocab_size": dc.hf_config.draft_vocab_size,
        }

    out["speculative_config"] = probe(spec_config)

    def tokenizer() -> dict[str, object]:
        from vllm.tokenizers import cached_tokenizer_from_config

        mc = holder["mc"]
        tok = cached_tokenizer_from_config(mc)
        holder["tok"] = tok
        chat = tok.apply_chat_template(
            [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
        )
        return {
            "class": type(tok).__name__,
            "is_fast": bool(tok.is_fast),
            "trust_remote_code": bool(mc.trust_remote_code),
            "len": len(tok),
            "round_trips": [
                tok.decode(tok.encode(t, add_special_tokens=False)) == t for t in TEXTS
            ],
            "media_pad": tok.encode("<|media_pad|>", add_special_tokens=False),
            "bos_eos_pad": [tok.bos_token_id, tok.eos_token_id, tok.pad_token_id],
            "chat": chat,
        }

    out["tokenizer"] = probe(tokenizer)

    def image_processor() -> dict[str, object]:
        from vllm.transformers_utils.processor import cached_get_image_processor

        proc = cached_get_image_processor(target, trust_remote_code=True)
        chunk = {"type": "image", "image": image()}
        feats = proc.preprocess([chunk])
        return {
            "class": type(proc).__name__,
            "num_frames_per_chunk": proc.num_frames_per_chunk,
            "tokens": proc.media_tokens_calculator(chunk),
            "pixel_values": list(feats["pixel_values"].shape),
            "grid_thws": feats["grid_thws"].tolist(),
        }

    out["image_processor"] = probe(image_processor)

    def mm_processor() -> dict[str, object]:
        from vllm.config import ModelConfig
        from vllm.multimodal import MULTIMODAL_REGISTRY
        from vllm.multimodal.processing import ProcessorInputs, TimingContext

        mc = ModelConfig(model=target, trust_remote_code=True)  # the image processor's code
        proc = MULTIMODAL_REGISTRY.create_processor(mc)
        items = proc.info.parse_mm_data({"vision_chunk": [{"type": "image", "image": image()}]})
        res = proc.apply(
            ProcessorInputs(prompt=IMAGE_PROMPT, mm_data_items=items),
            timing_ctx=TimingContext(enabled=False),
        )
        ids = res["prompt_token_ids"]
        media = mc.hf_config.media_placeholder_token_id
        kwargs = res["mm_kwargs"].get_data()
        dummy = MULTIMODAL_REGISTRY.get_dummy_mm_inputs(mc, {"vision_chunk": 1}, processor=proc)
        dummy_kwargs = dummy["mm_kwargs"].get_data()
        return {
            "prompt_len": len(ids),
            "media_tokens": ids.count(media),
            "placeholders": [[p.offset, p.length] for p in res["mm_placeholders"]["vision_chunk"]],
            "pixel_values": list(kwargs["pixel_values"].shape),
            "grid_thws": kwargs["grid_thws"].tolist(),
            "dummy_media_tokens": dummy["prompt_token_ids"].count(media),
            "dummy_grid_thws": dummy_kwargs["grid_thws"].tolist(),
        }

    out["mm_processor"] = probe(mm_processor)
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
