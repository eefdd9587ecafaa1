"""EAGLE-3 heads in the ``speculators`` format (vllm-project/speculators):
the drafter config vLLM builds from them carries every field that changes
the drafter's math, or the head is refused.

vLLM reads the format through ``SpeculatorsConfig``
(vllm/transformers_utils/configs/speculators/): the head's
``transformer_layer_config`` with the ``eagle3`` fields that
``update_eagle3`` copies over it; that config is the drafter's
(``SpeculativeConfig``'s ``draft_model_config.hf_config``). The heads are
``vpq.checkpoints.fixture.speculators_eagle3_config``, key for key what speculators
0.9.0 writes (tests/data/speculators-0.9.0/). Rules: ``norm_before_fc``
is copied (vllm PR #38111, v0.19.0); ``fc_norm`` and ``norm_output`` are
copied (vllm PR #46488, v0.25.0); a layer that is not a Llama layer is not
built as ``Eagle3LlamaForCausalLM`` (upstream v0.24.0 maps ``qwen3`` to its
own drafter; this series, which has none, refuses it). Config only: no
weights, no GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vpq.checkpoints import fixture  # noqa: E402


def drafter_config(head: Path):  # type: ignore[no-untyped-def]
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    return SpeculatorsConfig.from_pretrained(str(head))


@pytest.mark.parametrize("norm_before_fc", [True, False])
def test_norm_before_fc_of_a_speculators_head_reaches_the_drafter_config(
    tmp_path: Path, norm_before_fc: bool
) -> None:
    head = fixture.write_speculators_eagle3_head(
        tmp_path / "head", norm_before_fc=norm_before_fc, norm_output=False
    )
    cfg = drafter_config(head)
    assert cfg.architectures == ["Eagle3LlamaForCausalLM"]
    assert getattr(cfg, "norm_before_fc", None) is norm_before_fc


@pytest.mark.parametrize(
    ("fc_norm", "norm_output"), [(True, True), (False, True), (True, False), (False, False)]
)
def test_fc_norm_and_norm_output_of_a_speculators_head_reach_the_drafter_config(
    tmp_path: Path, fc_norm: bool, norm_output: bool
) -> None:
    head = fixture.write_speculators_eagle3_head(
        tmp_path / "head", norm_before_fc=False, fc_norm=fc_norm, norm_output=norm_output
    )
    cfg = drafter_config(head)
    assert (getattr(cfg, "fc_norm", None), getattr(cfg, "norm_output", None)) == (
        fc_norm,
        norm_output,
    )


def test_a_speculators_head_with_a_qwen3_layer_is_not_built_as_a_llama_drafter(
    tmp_path: Path,
) -> None:
    head = fixture.write_speculators_eagle3_head(tmp_path / "head", layer_type="qwen3")
    try:
        cfg = drafter_config(head)
    except ValueError as exc:
        # Refused at config time, naming the layer type (the series).
        assert "model_type qwen3" in str(exc)
        return
    # Or built by a drafter of its own (upstream from v0.24.0).
    assert cfg.architectures != ["Eagle3LlamaForCausalLM"]
