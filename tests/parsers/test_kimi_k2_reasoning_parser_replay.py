"""The ``kimi_k2`` reasoning parser's streaming path with k tokens per delta
(the server's reasoning-only branch): ``<think>`` and ``</think>`` bundled
with text, and a tool section starting in the same delta as the end of
reasoning. For every case and k in 1..8 the streamed reasoning and content
must equal the server's non-streaming parse, and the reasoning what the
completion encodes. With the tool parser as well, the server's own code
hands over between the two: tests/parsers/test_server_streaming.py.
"""

from __future__ import annotations

import pytest
from vllm.reasoning.kimi_k2_reasoning_parser import KimiK2ReasoningParser

from tests.parsers import replay
from tests.parsers.cases import REASONING_CASES, ReasoningCase

KS = range(1, 9)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", REASONING_CASES, ids=lambda c: c.name)
def test_reasoning_alone_streams_what_the_non_streaming_parse_returns(
    tokenizer, case: ReasoningCase, k: int
) -> None:
    ids = replay.encode(tokenizer, case.text)
    req = replay.request(tools=None, tool_choice=None)
    streamed = replay.stream(tokenizer, ids, k, reasoning_parser_cls=KimiK2ReasoningParser, req=req)
    whole = replay.full(tokenizer, ids, reasoning_parser_cls=KimiK2ReasoningParser, req=req)
    assert streamed.errors == []
    assert whole.reasoning == case.reasoning
    assert (streamed.reasoning, streamed.content) == (whole.reasoning, whole.content)
