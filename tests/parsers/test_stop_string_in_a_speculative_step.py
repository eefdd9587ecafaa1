"""A stop string completed inside a multi-token (speculative) step.

With EAGLE-3 one engine step appends up to ``num_speculative_tokens + 1``
tokens. 0.17.1's detokenizer cut the *text* at a stop string but kept every
token of the step in ``token_ids`` (and their logprobs): tokens generated
after the stop string reached the client, ``usage.completion_tokens``
counted them, and a streamed request could differ from its non-streamed
twin (the engine tier's load found it: ``tests/engine/test_server_load.py``).
``detokenizer-drop-tokens-after-the-stop-string.patch`` backports vLLM
0.32.0's fix (PR #47616). The cases are upstream's own, from 0.32.0's
``tests/detokenizer/test_stop_string_while_stop_model_terminates.py``,
without the sampling-mask and routed-expert checks (0.17.1 has no sampling
masks), and run through 0.17.1's ``EngineCoreRequest``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from vllm.sampling_params import SamplingParams
from vllm.v1.engine import EngineCoreOutput, EngineCoreRequest, FinishReason
from vllm.v1.engine.detokenizer import BaseIncrementalDetokenizer
from vllm.v1.engine.output_processor import OutputProcessor
from vllm.v1.outputs import LogprobsLists


@pytest.fixture(params=[True, False])
def include_stop_str_in_output(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


class _Detokenizer(BaseIncrementalDetokenizer):
    """Each token id decodes to one character (``chr``)."""

    def decode_next(self, next_token_id: int) -> str:
        return chr(next_token_id)


def _request(stop: list[str], include: bool, min_tokens: int = 0) -> EngineCoreRequest:
    params = SamplingParams(stop=stop, include_stop_str_in_output=include, min_tokens=min_tokens)
    return EngineCoreRequest(
        request_id="test",
        prompt_token_ids=[],
        mm_features=None,
        sampling_params=params,
        pooling_params=None,
        arrival_time=0.0,
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
    )


def test_tokens_after_the_stop_string_and_the_stop_token_are_dropped(
    include_stop_str_in_output: bool,
) -> None:
    """``abcdeZ`` in one step, ``Z`` a stop token, ``cd`` the stop string:
    the text ends at the stop string and so do the token ids."""
    token_ids = [ord(c) for c in "abcdeZ"]
    detok = _Detokenizer(_request(["cd"], include_stop_str_in_output))
    assert detok.update(new_token_ids=token_ids, stop_terminated=True) == "cd"
    expected_text = "abcd" if include_stop_str_in_output else "ab"
    assert detok.output_text == expected_text
    assert detok.output_token_ids == token_ids[:4]
    assert detok.get_next_output_text(finished=True, delta=False) == expected_text


@pytest.mark.parametrize("min_tokens,num_kept", [(0, 2), (1, 2), (2, 4), (3, 4), (4, None)])
@pytest.mark.parametrize("num_prev_tokens", [0, 1])
def test_min_tokens_boundary_inside_a_step(
    include_stop_str_in_output: bool, min_tokens: int, num_kept: int | None, num_prev_tokens: int
) -> None:
    """A stop string completing within ``min_tokens`` is ignored, also when
    the ``min_tokens`` boundary falls inside a multi-token step."""
    token_ids = [ord(c) for c in "cdcdx"]
    detok = _Detokenizer(_request(["cd"], include_stop_str_in_output, min_tokens))
    if num_prev_tokens:
        assert detok.update(token_ids[:num_prev_tokens], False) is None
    result = detok.update(token_ids[num_prev_tokens:], False)
    if num_kept is None:
        assert result is None
        assert (detok.output_text, detok.output_token_ids) == ("cdcdx", token_ids)
        return
    assert result == "cd"
    text_len = num_kept if include_stop_str_in_output else num_kept - 2
    assert detok.output_text == "cdcdx"[:text_len]
    assert detok.output_token_ids == token_ids[:num_kept]


def _logprobs(token_ids: list[int]) -> Any:
    n = len(token_ids)
    return LogprobsLists(
        np.array(token_ids).reshape(-1, 1), np.zeros((n, 1)), np.ones(n, dtype=int), None
    )


@pytest.mark.parametrize(
    "decoded_tokens,keep",
    [
        (["a", "b", "c", "d", "e", "f"], 4),
        (["ab", "cdx", "ef"], 2),
        (["ab", "", "c", "", "d", "", "ef"], 5),
    ],
)
@pytest.mark.parametrize("stop_terminated", [False, True])
def test_the_request_output_ends_at_the_stop_string(
    include_stop_str_in_output: bool,
    decoded_tokens: list[str],
    keep: int,
    stop_terminated: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the ``OutputProcessor``: one step's tokens past the stop
    string are dropped from the request output's ``token_ids`` and
    logprobs, not only from its text."""
    if stop_terminated:  # the engine also stopped on a stop token ending the step
        decoded_tokens = [*decoded_tokens, ""]
    token_ids = list(range(len(decoded_tokens)))
    req = _request(["cd"], include_stop_str_in_output)
    req.external_req_id = req.request_id
    assert req.sampling_params is not None
    req.sampling_params.logprobs = 0
    detok = _Detokenizer(req)
    monkeypatch.setattr(detok, "decode_next", decoded_tokens.__getitem__)
    processor = OutputProcessor(tokenizer=None, log_stats=False)
    processor.add_request(req, prompt=None)
    processor.request_states[req.request_id].detokenizer = detok
    out = EngineCoreOutput(
        request_id=req.request_id,
        new_token_ids=token_ids,
        finish_reason=FinishReason.STOP if stop_terminated else None,
        new_logprobs=_logprobs(token_ids),
    )
    result = processor.process_outputs([out]).request_outputs[0].outputs[0]
    assert result.stop_reason == "cd"
    assert detok.output_text == ("abcd" if include_stop_str_in_output else "ab")
    assert detok.output_token_ids == token_ids[:keep]
    assert result.token_ids == token_ids[:keep]
    assert result.logprobs is not None and len(result.logprobs) == keep
