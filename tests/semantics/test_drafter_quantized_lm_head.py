"""A drafter checkpoint with a quantized ``lm_head`` loads (backport of vllm
PR #37280, first released in v0.19.0; patch
``llama_eagle3-pass-drafter-quant-config-to-lm_head.patch``).

In 0.17.1 ``Eagle3LlamaForCausalLM`` builds its ``ParallelLMHead`` without
the drafter's quantization config, so the head has a plain ``weight`` and
a checkpoint that stores ``lm_head.qweight`` / ``qzeros`` / ``scales``
fails to load. The drafter's decoder layer needs CUDA attention, so
``LlamaModel`` is a stub here, and the quantization config is vLLM's CPU
AWQ one (``cpu_awq``) standing in for the GPU's Marlin kernels, which
refuse to construct without a GPU. Everything else (the head, the real
safetensors iterator, ``load_weights`` and its name mapping) is shipped
code. Fails on unpatched 0.17.1 and on the series before this patch.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.semantics import stubs, unpatched


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


@unpatched.fails_unpatched_with(
    raises="ValueError",
    match="no module or parameter named 'lm_head.qweight'",
    reason="the error the patch fixes: 0.17.1 builds a plain lm_head that has no qweight",
)
def test_quantized_lm_head_checkpoint_maps_onto_the_drafters_head(
    make_model, tmp_path, monkeypatch
) -> None:
    from safetensors.torch import save_file
    from vllm.model_executor.model_loader.weight_utils import safetensors_weights_iterator
    from vllm.model_executor.models import llama_eagle3

    make_model(4)  # sets up the single-process distributed state the head needs
    quant = stubs.cpu_awq_config(32)
    monkeypatch.setattr(llama_eagle3, "LlamaModel", StubLlamaModel)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: quant)
    vllm_config = _head_vllm_config()
    drafter = _build(llama_eagle3, vllm_config)

    # AWQ packs eight 4-bit values per int32 along the output dim.
    ckpt = {
        "lm_head.qweight": torch.arange(64 * 16, dtype=torch.int32).reshape(64, 16),
        "lm_head.qzeros": torch.full((2, 16), 7, dtype=torch.int32),
        "lm_head.scales": torch.linspace(0.1, 1.0, 2 * 128).reshape(2, 128).to(torch.float16),
        "d2t": torch.arange(128, dtype=torch.long),
    }
    save_file(ckpt, str(tmp_path / "model.safetensors"))
    drafter.load_weights(safetensors_weights_iterator([str(tmp_path / "model.safetensors")], False))

    stubs.assert_quantized_head_loaded(drafter, ckpt)


def test_unquantized_drafter_head_keeps_a_plain_weight(make_model, monkeypatch) -> None:
    """With no quantization config the head is unchanged (a plain weight);
    together with the test above this pins the config's pass-through."""
    from vllm.model_executor.models import llama_eagle3

    make_model(4)
    seen = []
    monkeypatch.setattr(llama_eagle3, "LlamaModel", StubLlamaModel)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: seen.append(1))
    vllm_config = _head_vllm_config()
    drafter = _build(llama_eagle3, vllm_config)
    assert seen == [1]  # the head asked for the drafter's config
    assert tuple(dict(drafter.named_parameters())["lm_head.weight"].shape) == (128, 64)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
