"""Requests any client can send do not take an EAGLE-3 engine down.

Each case is a real engine serving the scripted fixture with a head that
reads its own ids; outputs are compared with the scripted oracle.
"""

from __future__ import annotations

from vpq import scripted

from tests.engine.conftest import PROMPTS, Run, expected_tokens
from tests.engine.test_eagle3_engine import metrics, outputs


def test_allowed_token_ids_without_penalties_is_served_losslessly(engine) -> None:
    """``allowed_token_ids`` and no penalties: 0.17.1's rejection sampler
    took the (empty) output-token list's length as the number of requests,
    and ``repeat_interleave`` killed EngineCore ("repeats must have the same
    size as input along dim"), failing every request on the server
    (``rejection_sampler-count-requests-by-their-draft-counts.patch``, vllm PR
    #35654). Allowing every script token leaves the greedy outputs as they
    are, so they must equal the oracle, with drafts still accepted."""
    r = engine(Run("llama-top", sampling=(("allowed_token_ids", scripted.SCRIPT),)))
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2
