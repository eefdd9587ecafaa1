"""The ``kimi_k2`` tool parser's streaming path with k tokens per delta.

For every case and every k in 1..8 the streamed calls, assembled as a client
assembles them, must equal the server's non-streaming parse, and both must
equal the calls the completion encodes (a stream cut off mid-call: the
completed calls, plus a prefix of the cut one). On unpatched vLLM 0.17.1 this
fails for k >= 2 (truncated arguments, an IndexError at k = 5); see
tests/integration/test_parsers.py.
"""

from __future__ import annotations

import json

import pytest
from vllm.tool_parsers.kimi_k2_tool_parser import KimiK2ToolParser

from tests.parsers import replay
from tests.parsers.cases import CASES, Case

KS = range(1, 9)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_streamed_calls_equal_the_encoded_and_the_non_streaming_calls(
    tokenizer, case: Case, k: int
) -> None:
    ids = replay.encode(tokenizer, case.text)
    streamed = replay.stream(tokenizer, ids, k, tool_parser_cls=KimiK2ToolParser)
    whole = replay.full(tokenizer, ids, tool_parser_cls=KimiK2ToolParser)
    assert streamed.errors == []
    assert whole.content == case.content
    assert streamed.content == case.content
    if case.cut:
        # The non-streaming parse drops the unterminated call up to 0.24.0
        # and reports it with its arguments so far from 0.25.0 on; either
        # way the calls before it are whole, and the stream ends in it.
        assert case.partial is not None
        extra = whole.calls[len(case.calls) :]
        assert whole.calls[: len(case.calls)] == list(case.calls) and len(extra) <= 1
        *done, last = streamed.calls
        assert done == list(case.calls)
        for c in (last, *extra):
            assert (c.id, c.name) == (case.partial.id, case.partial.name)
            assert case.partial.arguments.startswith(c.arguments)
    else:
        assert whole.calls == list(case.calls)
        assert streamed.calls == whole.calls
        for c in streamed.calls:
            json.loads(c.arguments)


def test_adjust_request_keeps_the_markers_in_the_text(tokenizer) -> None:
    """The parser reads markers as text, so a request with tools must not
    skip special tokens (upstream PR #38579's ``adjust_request``)."""
    req = KimiK2ToolParser(tokenizer).adjust_request(replay.request())
    assert req.skip_special_tokens is False
