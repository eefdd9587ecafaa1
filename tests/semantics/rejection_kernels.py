"""Run the installed vLLM's rejection-sampler Triton kernels in Triton's
interpreter and print what they emit, as JSON.

The kernels must be decorated with ``TRITON_INTERPRET=1`` already set, so
``test_rejection_sampler_padded_drafts.py`` runs this file in a fresh
process of the same Python. Usage: ``python rejection_kernels.py``.
"""

from __future__ import annotations

import json

import torch

VOCAB = 64
BONUS = [[11], [12]]


def _random_sampling_metadata(batch: int) -> object:
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    zeros = torch.zeros(batch)
    return SamplingMetadata(
        temperature=torch.ones(batch), all_greedy=False, all_random=True, top_p=None,
        top_k=None, generators={}, max_num_logprobs=None, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=zeros, presence_penalties=zeros,
        repetition_penalties=zeros, output_token_ids=[], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=LogitsProcessors(),
    )  # fmt: skip


def padded_drafts() -> list[list[int]]:
    """Request 0 drafts ``[5]``; request 1's two drafts failed its grammar, so
    the scheduler padded them with ``-1``. Reading the target probability at
    index -1 reads the previous row's last entry, which is made certain here:
    an unguarded kernel accepts ``-1`` as a token."""
    from vllm.v1.sample.rejection_sampler import rejection_sample

    drafts = torch.tensor([5, -1, -1], dtype=torch.int32)
    logits = torch.full((3, VOCAB), -30.0)
    # Row r is the target's distribution at draft position r. Index -1 of
    # rows 1 and 2 (request 1's positions) reads the last entry of rows 0 and 1.
    logits[0, VOCAB - 1] = logits[1, VOCAB - 1] = 30.0
    logits[2, 9] = 30.0
    out = rejection_sample(
        drafts, [1, 2], 2, torch.tensor([1, 3], dtype=torch.int32), None, logits,
        torch.tensor(BONUS, dtype=torch.int32), _random_sampling_metadata(2),
    )  # fmt: skip
    return out.tolist()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(json.dumps({"padded_drafts": padded_drafts()}))
