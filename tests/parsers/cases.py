"""Kimi-K2 completions to replay: the text the model emits and the calls it encodes.

A call is written the way Kimi-K2 writes one:
``<|tool_call_begin|>functions.NAME:I<|tool_call_argument_begin|>ARGS<|tool_call_end|>``,
inside ``<|tool_calls_section_begin|>`` ... ``<|tool_calls_section_end|>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.parsers.replay import (
    ARG_BEGIN,
    CALL_BEGIN,
    CALL_END,
    SECTION_BEGIN,
    SECTION_BEGIN_SINGULAR,
    SECTION_END,
    SECTION_END_SINGULAR,
    Call,
)


@dataclass(frozen=True)
class Case:
    """``text`` is the completion; ``calls`` and ``content`` what it encodes.

    ``cut`` marks a completion that stops inside its last call (``max_tokens``
    reached): ``calls`` then holds the completed calls only and ``partial``
    the one that was cut.
    """

    name: str
    text: str
    content: str
    calls: tuple[Call, ...]
    cut: bool = False
    partial: Call | None = None


def args(obj: object) -> str:
    return json.dumps(obj, separators=(", ", ": "))


def call(name: str, index: int, arguments: str, *, header: str | None = None) -> tuple[str, Call]:
    tool_id = f"functions.{name}:{index}"
    text = (
        f"{CALL_BEGIN}{header if header is not None else tool_id}{ARG_BEGIN}{arguments}{CALL_END}"
    )
    return text, Call(tool_id, name, arguments)


def section(
    content: str, *calls: tuple[str, Call], begin: str = SECTION_BEGIN, end: str = SECTION_END
) -> tuple[str, tuple[Call, ...]]:
    return content + begin + "".join(t for t, _ in calls) + end, tuple(c for _, c in calls)


WEATHER = call("get_weather", 0, args({"city": "Paris", "unit": "celsius"}))
SEARCH = call(
    "search",
    1,
    args({"query": "eagle speculative decoding", "top_k": 5, "filters": {"lang": ["en", "fr"]}}),
)
WRITE = call(
    "write_file", 2, args({"path": "/tmp/notes.md", "text": "line one\nline two", "append": False})
)
BIG = call("write_file", 0, args({"path": "/tmp/big.txt", "text": "abcdefghij klmnopq " * 500}))
MARKERS = call(
    "write_file",
    0,
    args(
        {
            "path": "a<|b",
            "text": "ends <|tool_call_en and <|tool_calls_sec and <|tool_call_arg",
            "note": "<|",
        }
    ),
)


def _case(name: str, content: str, *calls: tuple[str, Call], **kw: str) -> Case:
    text, encoded = section(content, *calls, **kw)
    return Case(name, text, content, encoded)


CASES: list[Case] = [
    _case("one_call", "", WEATHER),
    _case("two_calls", "Checking both.", WEATHER, SEARCH),
    _case(
        "three_calls_after_content",
        "I'll look that up, then write it down. ",
        WEATHER,
        SEARCH,
        WRITE,
    ),
    _case("arguments_over_8_KiB", "", BIG),
    _case("arguments_with_marker_text", "Note the <| and <|tool_call in here: ", MARKERS, WEATHER),
    _case("content_ending_in_a_partial_section_marker", "almost <|tool_calls_sec", SEARCH),
    _case(
        "singular_section_marker",
        "One moment.",
        WEATHER,
        SEARCH,
        begin=SECTION_BEGIN_SINGULAR,
        end=SECTION_END_SINGULAR,
    ),
    _case(
        "tool_ids_with_newlines",
        "Sure.",
        call("get_weather", 0, WEATHER[1].arguments, header="\nfunctions.get_weather:0\n"),
        call("search", 1, SEARCH[1].arguments, header="\n functions.search:1 \n"),
    ),
]

_cut_text, _cut_calls = section("Two calls:", WEATHER, SEARCH)
_cut_at = _cut_text.index('"top_k"')  # inside the second call's arguments
CASES.append(
    Case(
        "stream_cut_off_mid_call",
        _cut_text[:_cut_at],
        "Two calls:",
        _cut_calls[:1],
        cut=True,
        partial=Call(
            _cut_calls[1].id, _cut_calls[1].name, _cut_text[:_cut_at].rsplit(ARG_BEGIN, 1)[1]
        ),
    )
)

#: Completions with reasoning, for the reasoning parser (alone and with the tool parser).
THINK, END_THINK = "<think>", "</think>"
REASONING = "The user wants the weather. Paris is in France; I should call get_weather."


@dataclass(frozen=True)
class ReasoningCase:
    """``text`` is the completion; ``reasoning``, ``content`` and ``calls`` what it encodes."""

    name: str
    text: str
    reasoning: str
    content: str
    calls: tuple[Call, ...]


_tools, _calls = section("", WEATHER, SEARCH)
REASONING_CASES: list[ReasoningCase] = [
    ReasoningCase(
        "think_then_content",
        f"{THINK}{REASONING}{END_THINK}It is sunny in Paris.",
        REASONING,
        "It is sunny in Paris.",
        (),
    ),
    ReasoningCase(
        "no_think_start_then_content",
        f"{REASONING}{END_THINK}It is sunny.",
        REASONING,
        "It is sunny.",
        (),
    ),
    ReasoningCase(
        "think_then_content_then_tools",
        f"{THINK}{REASONING}{END_THINK}Let me check.{_tools}",
        REASONING,
        "Let me check.",
        _calls,
    ),
    ReasoningCase(
        "think_then_tools", f"{THINK}{REASONING}{END_THINK}{_tools}", REASONING, "", _calls
    ),
    ReasoningCase(
        "tool_section_ends_reasoning", f"{THINK}{REASONING}{_tools}", REASONING, "", _calls
    ),
]
