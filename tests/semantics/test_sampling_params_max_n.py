"""``n`` is bounded by ``VLLM_MAX_N_SEQUENCES`` (GHSA-3mwp-wvh9-7528).

``sampling_params-bound-n-by-VLLM_MAX_N_SEQUENCES.patch`` (vllm PR #37952,
in 0.19.0): 0.17.1 checked only ``n >= 1``, so one request with a huge
``n`` made the API server fan it out into that many child requests in its
event loop until it ran out of memory. Now ``SamplingParams`` refuses ``n``
above ``VLLM_MAX_N_SEQUENCES`` (default 16384) with a ``ValueError``, which
the OpenAI server answers with 400 before any fan-out.
"""

from __future__ import annotations

import pytest
from vllm.sampling_params import SamplingParams


def test_n_above_the_default_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_MAX_N_SEQUENCES", raising=False)
    assert SamplingParams(n=16384, temperature=1.0).n == 16384
    # ValueError here; VLLMValidationError (not a ValueError) in later releases
    with pytest.raises(Exception, match="n must be at most 16384"):
        SamplingParams(n=16385, temperature=1.0)


def test_the_limit_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MAX_N_SEQUENCES", "4")
    assert SamplingParams(n=4, temperature=1.0).n == 4
    with pytest.raises(Exception, match="VLLM_MAX_N_SEQUENCES"):
        SamplingParams(n=5, temperature=1.0)
