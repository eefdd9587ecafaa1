"""Client-supplied ``stop_token_ids`` and ``allowed_token_ids`` are held to
the model's vocabulary, the width of the logits they index
(GHSA-v5gm-qgmv-gc6c, CVE-2026-93840).

``sampling_params-check-stop-and-allowed-token-ids-against-the-mod.patch``
(vllm PR #54196, in 0.29.0): 0.17.1 never checks ``stop_token_ids``, which
``min_tokens`` writes into the logits as column indices (an id past the
vocabulary stops the engine: an index error on CPU, a device assert on a
GPU), and checks ``allowed_token_ids`` against the tokenizer's length,
which can exceed the logits' width. ``SamplingParams.verify`` reads only
``get_vocab_size``, ``max_logprobs``, ``logits_processors`` (and from
0.33.0 ``is_diffusion``) of the model config here, so a stand-in with a
vocabulary of 100 is enough.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from vllm.sampling_params import SamplingParams

VOCAB = 100
#: What ``verify`` reads of a model config, in 0.17.1 and in the releases
#: that have the fix (``is_diffusion`` from 0.33.0 on).
MODEL = SimpleNamespace(
    get_vocab_size=lambda: VOCAB, max_logprobs=20, logits_processors=None, is_diffusion=False
)


class _Tokenizer:
    """Knows more ids than the logits have columns (placeholder tokens past
    the language model's vocabulary)."""

    def __len__(self) -> int:
        return VOCAB + 50


def _verify(**kw: Any) -> None:
    SamplingParams(temperature=1.0, **kw).verify(MODEL, None, None, _Tokenizer())  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [VOCAB, VOCAB + 49, -1])
def test_a_stop_token_id_outside_the_vocabulary_is_refused(bad: int) -> None:
    _verify(stop_token_ids=[0, VOCAB - 1], min_tokens=2)  # inside: served as before
    with pytest.raises(Exception, match=r"stop_token_ids contain out-of-vocab token ids"):
        _verify(stop_token_ids=[1, bad], min_tokens=2)


def test_an_allowed_token_id_the_tokenizer_knows_but_the_logits_lack_is_refused() -> None:
    _verify(allowed_token_ids=[0, VOCAB - 1])  # inside: served as before
    with pytest.raises(Exception, match="allowed_token_ids contains out-of-vocab token id"):
        _verify(allowed_token_ids=[3, VOCAB + 10])
