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

import pytest
import torch

from tests.semantics import llama_head, stubs, unpatched


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
    monkeypatch.setattr(llama_eagle3, "LlamaModel", llama_head.StubLlamaModel)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: quant)
    vllm_config = llama_head.head_vllm_config()
    drafter = llama_head.build(llama_eagle3, vllm_config)

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
    monkeypatch.setattr(llama_eagle3, "LlamaModel", llama_head.StubLlamaModel)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: seen.append(1))
    vllm_config = llama_head.head_vllm_config()
    drafter = llama_head.build(llama_eagle3, vllm_config)
    assert seen == [1]  # the head asked for the drafter's config
    assert tuple(dict(drafter.named_parameters())["lm_head.weight"].shape) == (128, 64)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
