"""The MLA EAGLE-3 drafter gets the two serving fixes the Llama head has.

- Layer numbering (patch
  ``deepseek_eagle3-number-drafter-layers-after-all-target-layers.patch``,
  backport of vllm PR #50514, first released in v0.30.0): under pipeline
  parallelism the drafter is built on the last stage, and its decoder layer
  must be numbered after *all* target layers. 0.17.1's Llama head and the
  MLA head as backported from v0.18.0 used the per-stage count, so on the
  last of two stages of a 4-layer target the head's layer was
  ``model.layers.2``, the name of that stage's first target layer.
- Quantized ``lm_head`` (patch
  ``deepseek_eagle3-pass-drafter-quant-config-to-lm_head.patch``, our own
  fix, ``Pending``: upstream's MLA head still builds ``ParallelLMHead``
  without a quantization config through v0.33.0): a checkpoint storing
  ``lm_head.qweight`` / ``qzeros`` / ``scales`` loads.

The drafter is built by its own ``__init__`` from a real ``VllmConfig``
(``mla_head.py``'s tiny DeepSeek-V3 target and config-only MLA head).
Stand-ins, because the real parts need CUDA: the MLA attention, MLP and
RMSNorm (``mla_head.py``'s stubs; the attention here also records the
layer name it is given); for the ``lm_head`` test the whole drafter body
(``DeepseekV2Eagle3Model``), and vLLM's CPU AWQ config standing in for the
GPU's Marlin kernels, as ``test_drafter_quantized_lm_head.py`` does for the
Llama head. Each test fails on unpatched 0.17.1 (no MLA drafter) and on the
series before its patch.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn
from vllm.config import set_current_vllm_config

from tests.semantics import mla_head as mla
from tests.semantics import stubs, unpatched

TARGET_LAYERS = 4
#: The draft vocabulary of the ``lm_head`` tests: a multiple of 64, so
#: ``ParallelLMHead`` adds no padding rows and the packed AWQ tensors are
#: the checkpoint's own shapes; below the target's 128, as for heads that
#: ship ``d2t`` (from 0.30.0 a head with the target's vocabulary has none).
DRAFT_VOCAB = 64


class RecordingMLAAttention(mla.StubMLAAttention):
    """``mla_head.StubMLAAttention`` that also records its layer name."""

    prefixes: list[str] = []

    def __init__(self, *, prefix: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)
        RecordingMLAAttention.prefixes.append(prefix)


def _vllm_config(tmp_path, draft_vocab: int = mla.DRAFT_VOCAB):  # type: ignore[no-untyped-def]
    target = stubs.write_text_config(tmp_path / "target", TARGET_LAYERS)
    head = mla.write_head(tmp_path / "head", fc_norm=False, norm_output=False)
    cfg = json.loads((head / "config.json").read_text())
    (head / "config.json").write_text(json.dumps({**cfg, "draft_vocab_size": draft_vocab}))
    return mla.eagle3_vllm_config(target, head)


def test_mla_drafter_layer_is_numbered_after_all_target_layers_on_the_last_stage(
    ours, tmp_path, distributed, monkeypatch
) -> None:
    monkeypatch.setattr(ours, "DeepseekV2MLAAttention", RecordingMLAAttention)
    RecordingMLAAttention.prefixes.clear()
    vc = _vllm_config(tmp_path)
    with set_current_vllm_config(vc):
        distributed()
    # The drafter lives on the last of two pipeline stages: rank 1 of PP 2
    # holds target layers 2 and 3 (vLLM's even split of 4).
    vc.parallel_config.pipeline_parallel_size = 2
    vc.parallel_config.rank = 1
    assert vc.model_config.get_layers_start_end_indices(vc.parallel_config) == (2, TARGET_LAYERS)
    with set_current_vllm_config(vc):
        drafter = ours.Eagle3DeepseekV2ForCausalLM(vllm_config=vc, prefix="")
    (prefix,) = RecordingMLAAttention.prefixes
    index = int(re.fullmatch(r"model\.layers\.(\d+)\.self_attn", prefix).group(1))  # type: ignore[union-attr]
    assert index not in range(2, TARGET_LAYERS)  # no clash with a target layer on this stage
    assert index == TARGET_LAYERS
    assert drafter.config.target_layer_count == TARGET_LAYERS


@pytest.fixture
def ours(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import deepseek_eagle3

    mla.stub(deepseek_eagle3, monkeypatch)
    return deepseek_eagle3


class StubEagle3Model(nn.Module):
    """Stands in for ``DeepseekV2Eagle3Model`` (its MLA layer needs CUDA):
    what the head reads of its body, no parameters."""

    def __init__(self, *, vllm_config: object, prefix: str, start_layer_id: int) -> None:
        super().__init__()
        self.fc_norm = None


@unpatched.fails_unpatched_with(
    raises="ValueError",
    match="no module or parameter named 'lm_head.qweight'",
    reason="the error the patch fixes: the MLA head builds a plain lm_head without qweight",
)
def test_quantized_lm_head_checkpoint_maps_onto_the_mla_drafters_head(
    ours, tmp_path, distributed, monkeypatch
) -> None:
    from safetensors.torch import save_file
    from vllm.model_executor.model_loader.weight_utils import safetensors_weights_iterator

    monkeypatch.setattr(ours, "DeepseekV2Eagle3Model", StubEagle3Model)
    quant = stubs.cpu_awq_config(mla.H)
    monkeypatch.setattr(ours, "get_draft_quant_config", lambda vllm_config: quant)
    vc = _vllm_config(tmp_path, DRAFT_VOCAB)
    with set_current_vllm_config(vc):
        distributed()
        drafter = ours.Eagle3DeepseekV2ForCausalLM(vllm_config=vc, prefix="")

    # AWQ packs eight 4-bit values per int32 along the output dim (the draft
    # vocabulary); one group spans the whole hidden size.
    packed = DRAFT_VOCAB // 8
    ckpt = {
        "lm_head.qweight": torch.arange(mla.H * packed, dtype=torch.int32).reshape(mla.H, packed),
        "lm_head.qzeros": torch.full((1, packed), 7, dtype=torch.int32),
        "lm_head.scales": torch.linspace(0.1, 1.0, DRAFT_VOCAB)
        .reshape(1, DRAFT_VOCAB)
        .to(torch.float16),
        "d2t": torch.arange(DRAFT_VOCAB, dtype=torch.long) % 5,
    }
    save_file(ckpt, str(tmp_path / "model.safetensors"))
    with set_current_vllm_config(vc):
        drafter.load_weights(
            safetensors_weights_iterator([str(tmp_path / "model.safetensors")], False)
        )

    stubs.assert_quantized_head_loaded(drafter, ckpt)


def test_unquantized_mla_drafter_head_keeps_a_plain_weight(
    ours, tmp_path, distributed, monkeypatch
) -> None:
    """With no quantization config the head is unchanged (a plain weight);
    together with the test above this pins the config's pass-through."""
    asked = []
    monkeypatch.setattr(ours, "DeepseekV2Eagle3Model", StubEagle3Model)
    monkeypatch.setattr(ours, "get_draft_quant_config", lambda vllm_config: asked.append(1))
    vc = _vllm_config(tmp_path, DRAFT_VOCAB)
    with set_current_vllm_config(vc):
        distributed()
        drafter = ours.Eagle3DeepseekV2ForCausalLM(vllm_config=vc, prefix="")
    assert asked == [1]  # the head asked for the drafter's config
    shape = tuple(dict(drafter.named_parameters())["lm_head.weight"].shape)
    assert shape == (DRAFT_VOCAB, mla.H)


pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    unpatched.MLA_DRAFTER_MODULE,
]
