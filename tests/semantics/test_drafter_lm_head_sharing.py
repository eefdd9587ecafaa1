"""A drafter whose ``lm_head`` is quantized keeps it instead of crashing.

``eagle-share-lm_head-only-between-plain-weights.patch`` (upstream from
0.19.0): ``EagleProposer._maybe_share_lm_head`` compares the drafter's and
the target's ``lm_head.weight`` to decide whether to share one head. A
quantized head (AWQ/GPTQ: ``qweight``, no ``weight``) loads (our two
quantized-``lm_head`` patches), then 0.17.1 raised ``AttributeError: ...
has no attribute 'weight'`` there and the server did not start.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tests.semantics import unpatched


def _proposer(drafter_head: object) -> object:
    from vllm.v1.spec_decode.eagle import EagleProposer

    proposer = object.__new__(EagleProposer)
    proposer.model = SimpleNamespace(has_own_lm_head=True, lm_head=drafter_head)
    proposer.use_local_argmax_reduction = False
    proposer.vllm_config = SimpleNamespace(speculative_config=None)  # read from 0.23.0
    return proposer


@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="has no attribute 'weight'",
    reason="the crash the patch fixes: 0.17.1 reads lm_head.weight of a quantized head",
    dependency=False,
)
def test_quantized_drafter_head_is_kept_and_identical_plain_heads_are_shared() -> None:
    quantized = SimpleNamespace(qweight=torch.zeros(4, 2, dtype=torch.int32))
    # ``model``: the target's text model (later releases look for buffers there).
    target = SimpleNamespace(lm_head=SimpleNamespace(weight=torch.ones(8, 4)), model=None)
    proposer = _proposer(quantized)
    proposer._maybe_share_lm_head(target)
    assert proposer.model.lm_head is quantized
    proposer = _proposer(SimpleNamespace(weight=torch.ones(8, 4)))
    proposer._maybe_share_lm_head(target)
    assert proposer.model.lm_head is target.lm_head, "the guard keeps sharing plain heads"
