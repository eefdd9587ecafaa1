"""The Llama EAGLE-3 head (``Eagle3LlamaForCausalLM``) built on CPU by its own
``__init__``: the stand-in for its ``LlamaModel`` (attention needs CUDA) and
the little of a ``VllmConfig`` the head reads. ``test_drafter_quantized_lm_head.py``
says what they are for; other semantic tests build the same head."""

from __future__ import annotations

from types import SimpleNamespace

from torch import nn


def _build(llama_eagle3, vllm_config):  # type: ignore[no-untyped-def]
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        return llama_eagle3.Eagle3LlamaForCausalLM(vllm_config=vllm_config)


class StubLlamaModel(nn.Module):
    """Stands in for the drafter's ``LlamaModel`` (its attention needs CUDA)."""

    def __init__(self, *, vllm_config: object, prefix: str, start_layer_id: int) -> None:
        super().__init__()
        self.use_aux_hidden_state = True
        # What the head reads of its model besides the layers (EAGLE 3.1
        # options, off for a plain EAGLE-3 head).
        self.norm_before_fc = False
        self.fc_norm = None


def _head_vllm_config() -> SimpleNamespace:
    """What the head's ``__init__`` reads of a ``VllmConfig``: a tiny Llama
    draft config (hidden 64, vocabulary 128) on a 4-layer target. A stand-in,
    since the real ``VllmConfig`` would build the drafter's CUDA layers."""
    from transformers import LlamaConfig

    hf = LlamaConfig(hidden_size=64, vocab_size=128, num_hidden_layers=1, num_attention_heads=2)
    return SimpleNamespace(
        speculative_config=SimpleNamespace(
            draft_model_config=SimpleNamespace(hf_config=hf), parallel_drafting=False
        ),
        model_config=SimpleNamespace(
            get_total_num_hidden_layers=lambda: 4,
            get_num_layers=lambda _: 4,
            # The target's vocabulary, larger than the head's draft vocabulary
            # as for heads that ship d2t (read from 0.30.0, which drops d2t otherwise).
            get_vocab_size=lambda: 256,
        ),
        parallel_config=None,
    )
