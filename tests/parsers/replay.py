"""Replay a Kimi-K2 completion through vLLM's streaming parsers, k tokens per delta.

With EAGLE-3 each engine step emits up to ``num_speculative_tokens + 1``
tokens, so one streaming delta carries several tokens. This module drives the
``kimi_k2`` tool and reasoning parsers the way vLLM 0.17.1's chat-completions
server does (``vllm/entrypoints/openai/chat_completion/serving.py``,
``chat_completion_stream_generator``): for every delta it passes the previous
and current text, the previous and current token ids and the delta, and keeps
the same running state. (The hand-over from the reasoning parser to the tool
parser is the server's own code; test_server_streaming.py drives that.) It
then assembles the stream as an
OpenAI client does and compares it with the server's non-streaming path
(``chat_completion_full_generator``: ``extract_reasoning``, then
``extract_tool_calls`` on the content).

Text is decoded with ``skip_special_tokens=False``: the markers are single
special tokens, and the Kimi-K2 parsers read them as text (Kimi's own
tokenizer keeps them in the text; the patched tool parser's
``adjust_request`` forces it for any tokenizer). The delta text of a step is
``decode(ids[:n + k])`` minus ``decode(ids[:n])``, which is what vLLM's
incremental detokenizer yields for the ASCII text used here (it is computed
with a few tokens of left context, and the deltas must add up to the whole
text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

try:
    from vllm.entrypoints.openai.engine.protocol import DeltaMessage
except ImportError:  # 0.29.0 moved it (the probes run on later releases too)
    from vllm.entrypoints.generate.base.protocol import DeltaMessage

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
SECTION_BEGIN_SINGULAR = "<|tool_call_section_begin|>"
SECTION_END_SINGULAR = "<|tool_call_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    for name in ("get_weather", "search", "write_file")
]


@dataclass(frozen=True)
class Call:
    """One tool call as the client sees it: id, function name, arguments (a JSON string)."""

    id: str
    name: str
    arguments: str


@dataclass
class Result:
    """What one replay produced, assembled as an OpenAI client assembles a stream.

    ``calls`` are in tool-call index order; ``errors`` holds the ``repr`` of
    any exception the parser raised (the server would log it and drop the
    delta).
    """

    reasoning: str = ""
    content: str = ""
    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def request(**kw: Any) -> ChatCompletionRequest:
    """A streaming chat request offering ``TOOLS`` with ``tool_choice="auto"``
    unless ``kw`` says otherwise."""
    fields: dict[str, Any] = {"tools": TOOLS, "tool_choice": "auto", **kw}
    return ChatCompletionRequest(
        model="kimi-k2.5", messages=[{"role": "user", "content": "hi"}], stream=True, **fields
    )


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text``, each marker one special token; checks the round trip."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    assert decode(tokenizer, ids) == text, "the fixture tokenizer must be lossless"
    return ids


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """Text of ``ids`` with the special tokens kept (see the module docstring)."""
    return tokenizer.decode(list(ids), skip_special_tokens=False)


def deltas(tokenizer: Any, ids: Sequence[int], k: int) -> list[tuple[str, list[int]]]:
    """``(delta_text, delta_token_ids)`` for each engine step of ``k`` tokens.

    Returns ``ceil(len(ids) / k)`` steps; each carries ``k`` token ids (the
    last one ``len(ids) % k`` when that is not 0), and the texts add up to
    ``decode(ids)``.

    Raises:
        ValueError: ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    out = []
    for n in range(0, len(ids), k):
        # A few tokens of left context, as vLLM's incremental detokenizer keeps.
        context = list(ids[max(0, n - 6) : n])
        chunk = list(ids[n : n + k])
        before, after = decode(tokenizer, context), decode(tokenizer, context + chunk)
        assert after.startswith(before)
        out.append((after[len(before) :], chunk))
    assert "".join(text for text, _ in out) == decode(tokenizer, ids)
    return out


def _collect(
    result: Result, msg: DeltaMessage | None, index_ids: dict[int, dict[str, str]]
) -> None:
    if msg is None:
        return
    result.reasoning += (
        getattr(msg, "reasoning", None) or getattr(msg, "reasoning_content", None) or ""
    )
    result.content += msg.content or ""
    for tc in msg.tool_calls or []:
        call = index_ids.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
        if tc.id:
            call["id"] = tc.id
        fn = tc.function
        if fn is not None:
            name = fn.get("name") if isinstance(fn, dict) else fn.name
            args = fn.get("arguments") if isinstance(fn, dict) else fn.arguments
            call["name"] += name or ""
            call["arguments"] += args or ""


def _finish(result: Result, calls: dict[int, dict[str, str]]) -> Result:
    result.calls = [Call(**calls[i]) for i in sorted(calls)]
    return result


def stream(
    tokenizer: Any,
    ids: Sequence[int],
    k: int,
    *,
    tool_parser_cls: type | None = None,
    reasoning_parser_cls: type | None = None,
    req: ChatCompletionRequest | None = None,
) -> Result:
    """Replay ``ids`` in deltas of ``k`` tokens through a fresh parser instance.

    With a tool parser this is the server's ``tool_choice_auto`` branch, with
    a reasoning parser its reasoning-only branch (the prompt taken not to end
    reasoning). The hand-over between the two lives in the server's own code,
    so tests/parsers/test_server_streaming.py drives that code instead.

    Raises:
        ValueError: both parsers, or neither, given.
    """
    if (tool_parser_cls is None) == (reasoning_parser_cls is None):
        raise ValueError("give exactly one of tool_parser_cls and reasoning_parser_cls")
    req = req or request()
    tool = tool_parser_cls(tokenizer) if tool_parser_cls else None
    if tool is not None:
        req = tool.adjust_request(req)
    reasoning = reasoning_parser_cls(tokenizer) if reasoning_parser_cls else None
    result = Result()
    calls: dict[int, dict[str, str]] = {}
    previous_text, previous_ids = "", []
    for delta_text, delta_ids in deltas(tokenizer, ids, k):
        current_text = previous_text + delta_text
        current_ids = previous_ids + delta_ids
        msg: DeltaMessage | None = None
        try:
            if tool is not None:
                msg = tool.extract_tool_calls_streaming(
                    previous_text=previous_text,
                    current_text=current_text,
                    delta_text=delta_text,
                    previous_token_ids=previous_ids,
                    current_token_ids=current_ids,
                    delta_token_ids=delta_ids,
                    request=req,
                )
            else:
                assert reasoning is not None
                msg = reasoning.extract_reasoning_streaming(
                    previous_text, current_text, delta_text, previous_ids, current_ids, delta_ids
                )
        except Exception as exc:  # the server does not catch here; record it
            result.errors.append(repr(exc))
        _collect(result, msg, calls)
        previous_text, previous_ids = current_text, current_ids
    return _finish(result, calls)


def full(
    tokenizer: Any,
    ids: Sequence[int],
    *,
    tool_parser_cls: type | None = None,
    reasoning_parser_cls: type | None = None,
    req: ChatCompletionRequest | None = None,
) -> Result:
    """The server's non-streaming parse of the same completion: reasoning
    first (``extract_reasoning``), then ``extract_tool_calls`` on the content."""
    req = req or request()
    tool = tool_parser_cls(tokenizer) if tool_parser_cls else None
    if tool is not None:
        req = tool.adjust_request(req)
    text = decode(tokenizer, ids)
    result = Result()
    content: str | None = text
    if reasoning_parser_cls is not None:
        r, content = reasoning_parser_cls(tokenizer).extract_reasoning(text, req)
        result.reasoning = r or ""
    if tool is not None and content is not None:
        info = tool.extract_tool_calls(content, req)
        if info.tools_called:
            result.calls = [
                Call(c.id or "", c.function.name, c.function.arguments) for c in info.tool_calls
            ]
        content = info.content
    result.content = content or ""
    return result
