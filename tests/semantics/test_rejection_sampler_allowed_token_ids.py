"""``allowed_token_ids`` under speculative decoding, without penalties.

``rejection_sampler-count-requests-by-their-draft-counts.patch`` (vllm PR
#35654, in 0.18.0): the rejection sampler expands each request's allowed-
token mask over its draft positions. Without penalties the runner leaves
``output_token_ids`` empty, and 0.17.1 took its length as the number of
requests: ``repeat_interleave`` raised "repeats must have the same size as
input along dim" and EngineCore died (the engine tier's
``test_allowed_token_ids_without_penalties_is_served_losslessly``).
"""

from __future__ import annotations

import torch

from tests.semantics import unpatched

VOCAB = 8


def _sampling_metadata(mask: torch.Tensor) -> object:
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    empty = torch.tensor([])
    return SamplingMetadata(
        temperature=None, all_greedy=True, all_random=False, top_p=None, top_k=None,
        generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=empty, presence_penalties=empty, repetition_penalties=empty,
        output_token_ids=[], allowed_token_ids_mask=mask, bad_words_token_ids={},
        logitsprocs=LogitsProcessors(), spec_token_ids=[[1, 2], [3]],
    )  # fmt: skip


@unpatched.fails_unpatched_with(
    raises="RuntimeError",
    match="repeats must have the same size as input along dim",
    reason="the EngineCore crash the patch fixes",
)
def test_each_draft_position_gets_its_requests_allowed_token_mask(monkeypatch) -> None:
    import vllm.utils.torch_utils as torch_utils
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    # No pinned memory on a CPU-only host: 0.33.0 stages copies through the
    # module's PIN_MEMORY, 0.32.0 asks is_pin_memory_available() each time.
    monkeypatch.setattr(torch_utils, "PIN_MEMORY", False, raising=False)
    monkeypatch.setattr(torch_utils, "is_pin_memory_available", lambda: False, raising=False)
    drafts = [[1, 2], [3]]  # two requests: two draft positions, then one
    mask = torch.zeros(2, VOCAB, dtype=torch.bool)
    mask[0, 5:] = True  # request 0 may not emit 5..7
    mask[1, :4] = True  # request 1 may not emit 0..3
    logits = torch.zeros(3 + 2, VOCAB)  # draft positions plus one bonus row each
    meta = SpecDecodeMetadata.make_dummy(drafts, device=torch.device("cpu"))
    out = RejectionSampler(Sampler()).apply_logits_processors(
        logits[meta.target_logits_indices], _sampling_metadata(mask), meta
    )
    banned = torch.isinf(out)
    assert banned.tolist() == [mask[0].tolist(), mask[0].tolist(), mask[1].tolist()]
