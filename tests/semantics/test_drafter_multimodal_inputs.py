"""An EAGLE-3 head that cannot merge multimodal embeddings is given none
(backport of vllm PR #50417, first released in v0.28.0; patch
``eagle-text-only-drafter-skips-multimodal-inputs.patch``).

With a multimodal target (Kimi-K2.5) 0.17.1's ``EagleProposer.load_model``
probes the drafter with ``embed_input_ids(ids, multimodal_embeddings=None)``
and keeps multimodal inputs on unless that raises. Both EAGLE-3 heads
(``Eagle3LlamaForCausalLM``, the MLA ``Eagle3DeepseekV2ForCausalLM``)
accept the keyword and ignore it, so every drafter step the runner
gathers image embeddings (``propose_draft_token_ids`` calls
``_gather_mm_embeddings`` while ``drafter.supports_mm_inputs`` holds) for
a drafter that throws them away. Upstream's rule (0.28.0): only a drafter
declaring ``SupportsMultiModalEmbeddings`` (``supports_multimodal_embeddings``)
takes them; any other runs text-only, with one warning naming its class.

``load_model`` is the shipped method, on a proposer made without
``__init__`` (it allocates CUDA buffers); the drafters are real heads
built by their own ``__init__`` on CPU with their CUDA parts stubbed (the
Llama head's decoder, the MLA head's attention and MLP, as in
llama_head.py and mla_head.py); the target is
a stand-in with Kimi-K2.5's class name and the one config field the
proposer reads. Attention-layer discovery and the embedding / lm_head
sharing are stubbed out (they need a loaded target). Each test fails on
unpatched 0.17.1 and on the series before this patch.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.semantics import llama_head, mla_head, unpatched
from tests.semantics.proposer import load_into_proposer


def mla_eagle3_head(tmp_path, distributed, monkeypatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import deepseek_eagle3

    mla_head.stub(deepseek_eagle3, monkeypatch)
    model, _ = mla_head.build(
        deepseek_eagle3, tmp_path, distributed, fc_norm=False, norm_output=False
    )
    return model


@unpatched.MLA_DRAFTER_MODULE
@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="image_token_index",
    reason="0.17.1 reads the target's image_token_index, which Kimi-K2.5 lacks, before "
    "the tested branch (eagle-map-kimi_k25-media-placeholder-token.patch)",
)
@pytest.mark.parametrize("head", ["llama", "mla"])
def test_eagle3_head_runs_text_only_on_a_multimodal_target(
    head, make_model, tmp_path, distributed, monkeypatch
) -> None:
    """The runner gathers image embeddings for the drafter only while
    ``drafter.supports_mm_inputs`` holds: after loading an EAGLE-3 head it
    must not, and one warning says so, naming the head's class."""
    if head == "llama":
        drafter = llama_head.eagle3_head(make_model, monkeypatch)
    else:
        drafter = mla_eagle3_head(tmp_path, distributed, monkeypatch)
    proposer, warnings = load_into_proposer(drafter, monkeypatch)
    assert proposer.supports_mm_inputs is False
    named = [w for w in warnings if type(drafter).__name__ in w]
    assert len(named) == 1, warnings
    assert "multimodal embeddings" in named[0]
    # The target's placeholder id still reaches the drafter's config.
    assert drafter.config.image_token_index == 7


@unpatched.fails_unpatched_with(
    raises="ImportError",
    match="SupportsMultiModalEmbeddings",
    reason="0.17.1 has no SupportsMultiModalEmbeddings interface: the patch adds it",
)
def test_drafter_declaring_multimodal_embeddings_keeps_them(monkeypatch) -> None:
    """A drafter that merges the target's embeddings (0.17.1's Llama 4 and
    Mistral Large 3 EAGLE heads declare it) still gets them, silently."""
    from vllm.model_executor.models import SupportsMultiModalEmbeddings

    class MergingDrafter(nn.Module, SupportsMultiModalEmbeddings):
        def __init__(self) -> None:
            super().__init__()
            self.config = SimpleNamespace()

        def embed_input_ids(self, input_ids, multimodal_embeddings=None, *, is_multimodal=None):  # type: ignore[no-untyped-def]
            return torch.zeros(input_ids.shape[0], 4)

    proposer, warnings = load_into_proposer(MergingDrafter(), monkeypatch)
    assert proposer.supports_mm_inputs is True and warnings == []


@unpatched.fails_unpatched_with(
    raises="ImportError",
    match="supports_multimodal_embeddings",
    reason="0.17.1 has no supports_multimodal_embeddings: the patch adds it",
)
def test_only_the_merging_drafters_declare_multimodal_embeddings() -> None:
    """The flag on 0.17.1's drafter classes, as 0.28.0 sets it: the two that
    merge external embeddings and every multimodal model (``SupportsMultiModal``
    inherits it: Kimi-K2.5 itself, and ``Qwen3_5MTP`` as a drafter) have it;
    the EAGLE-3 heads do not."""
    from vllm.model_executor.models import supports_multimodal_embeddings
    from vllm.model_executor.models.deepseek_eagle3 import Eagle3DeepseekV2ForCausalLM
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration
    from vllm.model_executor.models.llama4_eagle import EagleLlama4ForCausalLM
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
    from vllm.model_executor.models.mistral_large_3_eagle import EagleMistralLarge3ForCausalLM

    assert supports_multimodal_embeddings(EagleLlama4ForCausalLM)
    assert supports_multimodal_embeddings(EagleMistralLarge3ForCausalLM)
    assert supports_multimodal_embeddings(KimiK25ForConditionalGeneration)
    assert not supports_multimodal_embeddings(Eagle3LlamaForCausalLM)
    assert not supports_multimodal_embeddings(Eagle3DeepseekV2ForCausalLM)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
