"""What ``InputProcessor`` lets through to EngineCore: a negative prompt
token id (GHSA-25q3-v2hm-8vpf) and a ``min_tokens`` above the ``max_tokens``
it fills in (GHSA-4xqp-c3mv-qff7).

``v1/engine/input_processor-refuse-negative-token-ids-in-a-prompt.patch``
(0.28.0's check) and
``v1/engine/input_processor-check-min_tokens-once-max_tokens-is-filled-in.patch``
(0.31.0's): 0.17.1 checks only the largest prompt id, so a negative one
reaches the embedding and stops the engine; and it checks ``min_tokens``
only against a ``max_tokens`` the request set, so a request without one
kills EngineCore's input thread when it decodes the filled-in params.

The methods are the shipped ones, called on a stand-in ``self`` that
carries only what they read before the checks (the engine tier serves both
attacks to a real server: tests/engine/test_advisories.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest
from vllm.sampling_params import SamplingParams
from vllm.v1.engine.input_processor import InputProcessor

VOCAB = 100


def _validating() -> SimpleNamespace:
    """What ``_validate_model_input`` reads of its processor; releases from
    0.33.0 on check the ids in the renderer (``BaseRenderer.validate_token_ids``,
    the same check), which the stand-in then calls on itself."""
    stub = SimpleNamespace(
        model_config=SimpleNamespace(get_vocab_size=lambda: VOCAB),
        tokenizer=SimpleNamespace(max_token_id=VOCAB - 1),
        mm_encoder_cache_size=0,
        _validate_prompt_len=lambda length, prompt_type: None,
    )
    from vllm.renderers import base

    check = getattr(base.BaseRenderer, "validate_token_ids", None)
    if check is not None:
        stub.renderer = SimpleNamespace(validate_token_ids=lambda ids, **kw: check(stub, ids, **kw))
    return stub


def test_a_negative_prompt_token_id_is_refused() -> None:
    check = InputProcessor._validate_model_input
    check(_validating(), {"type": "token", "prompt_token_ids": [0, VOCAB - 1]}, "decoder")
    with pytest.raises(Exception) as refused:
        check(_validating(), {"type": "token", "prompt_token_ids": [3, -5, 4]}, "decoder")
    assert "Token id -5 is out of vocabulary" in str(refused.value)


def test_min_tokens_above_the_filled_in_max_tokens_is_refused() -> None:
    processor = mock.MagicMock()
    processor.model_config.max_model_len = 64
    params = SamplingParams(temperature=1.0, max_tokens=None, min_tokens=1000)
    prompt = {"type": "token", "prompt_token_ids": [1, 2, 3]}
    with pytest.raises(Exception) as refused:
        InputProcessor.process_inputs(processor, "r0", prompt, params, ("generate",))
    assert "min_tokens must be less than or equal to max_tokens=61, got 1000" in str(
        refused.value
    ), refused.value
