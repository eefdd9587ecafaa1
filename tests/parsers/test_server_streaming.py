"""vLLM's own chat-completions streaming code with multi-token engine outputs.

``OpenAIServingChat.chat_completion_stream_generator`` (vLLM 0.17.1,
``vllm/entrypoints/openai/chat_completion/serving.py``) runs as the server
runs it, with ``--tool-call-parser kimi_k2 --reasoning-parser kimi_k2
--enable-auto-tool-choice``, and the server-sent events are assembled as an
OpenAI client assembles them. Each engine step yields k tokens, as an
EAGLE-3 step does when k - 1 drafts are accepted.

The engine is a stand-in (an async generator of ``RequestOutput`` deltas,
and a model config with the fields the serving layer reads, as upstream's
tests/entrypoints/openai/test_serving_chat.py does): the real engine needs a
GPU. Everything between the engine and the client is vLLM's.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import MagicMock

import pytest
from vllm.config import MultiModalConfig
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat

try:
    from vllm.entrypoints.openai.engine.protocol import RequestResponseMetadata
except ImportError:  # 0.29.0 moved it (the probes run on later releases too)
    from vllm.entrypoints.generate.base.protocol import RequestResponseMetadata
from vllm.entrypoints.openai.models.serving import BaseModelPath, OpenAIServingModels
from vllm.outputs import CompletionOutput, RequestOutput

from tests.parsers import replay
from tests.parsers.cases import CASES, REASONING_CASES, Case, ReasoningCase

KS = range(1, 9)
MODEL = "kimi-k2.5"


@dataclass
class _HFConfig:
    model_type: str = "kimi_k25"


@dataclass
class StandInModelConfig:
    """The model-config fields OpenAIServingChat reads (stand-in: no engine)."""

    model: str = MODEL
    tokenizer: str = MODEL
    task: str = "generate"
    runner_type: str = "generate"
    trust_remote_code: bool = False
    tokenizer_mode: str = "auto"
    max_model_len: int = 65536
    tokenizer_revision: str | None = None
    multimodal_config: MultiModalConfig = field(default_factory=MultiModalConfig)
    hf_config: _HFConfig = field(default_factory=_HFConfig)
    hf_text_config: _HFConfig = field(default_factory=lambda: _HFConfig("deepseek_v3"))
    logits_processors: list[str] | None = None
    diff_sampling_param: dict | None = None
    allowed_local_media_path: str = ""
    allowed_media_domains: list[str] | None = None
    encoder_config: None = None
    generation_config: str = "auto"
    override_generation_config: dict[str, Any] = field(default_factory=dict)
    media_io_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    skip_tokenizer_init: bool = False
    is_encoder_decoder: bool = False
    is_multimodal_model: bool = False

    def get_diff_sampling_param(self) -> dict:
        return self.diff_sampling_param or {}


@dataclass
class StandInEngine:
    """Stands in for AsyncLLM, which needs a GPU; only what the serving layer touches."""

    model_config: StandInModelConfig = field(default_factory=StandInModelConfig)
    input_processor: MagicMock = field(default_factory=MagicMock)
    io_processor: MagicMock = field(default_factory=MagicMock)
    renderer: MagicMock = field(default_factory=MagicMock)
    errored: bool = False


def renderer_stand_ins() -> dict[str, MagicMock]:
    """A stand-in for each required keyword-only argument the stream
    generator does not use: the request renderer (0.20.0-0.24.0
    ``openai_serving_render``, 0.28.0 on ``online_renderer``)."""
    params = inspect.signature(OpenAIServingChat).parameters.values()
    return {
        p.name: MagicMock()
        for p in params
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty and "render" in p.name
    }


def serving(*, reasoning: bool) -> OpenAIServingChat:
    engine = StandInEngine()
    models = OpenAIServingModels(
        engine_client=engine, base_model_paths=[BaseModelPath(name=MODEL, model_path=MODEL)]
    )
    return OpenAIServingChat(
        engine,
        models,
        "assistant",
        **renderer_stand_ins(),
        request_logger=None,
        chat_template=None,
        chat_template_content_format="auto",
        reasoning_parser="kimi_k2" if reasoning else "",
        enable_auto_tools=True,
        tool_parser="kimi_k2",
    )


async def engine_steps(
    tokenizer: Any, ids: Sequence[int], k: int, finish: str
) -> AsyncIterator[RequestOutput]:
    """``RequestOutput`` deltas of ``k`` tokens each (``RequestOutputKind.DELTA``)."""
    steps = replay.deltas(tokenizer, ids, k)
    for n, (text, token_ids) in enumerate(steps):
        last = n == len(steps) - 1
        yield RequestOutput(
            request_id="chatcmpl-test",
            prompt=None,
            prompt_token_ids=[1, 2, 3],
            prompt_logprobs=None,
            outputs=[
                CompletionOutput(
                    index=0,
                    text=text,
                    token_ids=token_ids,
                    cumulative_logprob=None,
                    logprobs=None,
                    finish_reason=finish if last else None,
                    stop_reason=None,
                )
            ],
            finished=last,
        )


def adjusted_request(
    chat: OpenAIServingChat, tokenizer: Any, *, reasoning: bool
) -> tuple[Any, dict[str, Any]]:
    """The request as the server adjusts it, and the stream generator's
    parser argument. Up to 0.28.0 the server holds a tool parser and passes
    the generator a reasoning parser; from 0.29.0 one ``parser_cls`` does
    both, and the generator builds its own."""
    req = replay.request()
    if hasattr(chat, "tool_parser"):
        parser = chat.reasoning_parser_cls if reasoning else None
        return chat.tool_parser(tokenizer).adjust_request(req), {
            "reasoning_parser": parser(tokenizer) if parser else None
        }
    parser = chat.parser_cls(
        tokenizer, req.tools, chat_template_kwargs={}, model_config=chat.model_config
    )
    return parser.adjust_request(req), {}


def run_server(
    tokenizer: Any, text: str, k: int, *, reasoning: bool, finish: str = "stop"
) -> tuple[replay.Result, list[str]]:
    """Stream ``text`` through the server; the assembled result and the finish reasons sent."""
    chat = serving(reasoning=reasoning)
    req, extra = adjusted_request(chat, tokenizer, reasoning=reasoning)
    ids = replay.encode(tokenizer, text)

    async def collect() -> list[str]:
        gen = chat.chat_completion_stream_generator(
            req,
            engine_steps(tokenizer, ids, k, finish),
            "chatcmpl-test",
            MODEL,
            [],
            tokenizer,
            RequestResponseMetadata(request_id="chatcmpl-test"),
            **extra,
        )
        return [chunk async for chunk in gen]

    result, calls, finishes = replay.Result(), {}, []
    for chunk in asyncio.run(collect()):
        body = chunk.removeprefix("data: ").strip()
        if body == "[DONE]":
            continue
        event = json.loads(body)
        assert "error" not in event, event
        for choice in event["choices"]:
            delta = choice["delta"]
            result.reasoning += delta.get("reasoning") or delta.get("reasoning_content") or ""
            result.content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                finishes.append(choice["finish_reason"])
    result.calls = [replay.Call(**calls[i]) for i in sorted(calls)]
    return result, finishes


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_server_streams_the_encoded_tool_calls(tokenizer, case: Case, k: int) -> None:
    got, finishes = run_server(
        tokenizer, case.text, k, reasoning=False, finish="length" if case.cut else "stop"
    )
    assert got.content == case.content
    if case.cut:
        assert case.partial is not None
        *done, last = got.calls
        assert done == list(case.calls)
        assert (last.id, last.name) == (case.partial.id, case.partial.name)
        assert case.partial.arguments.startswith(last.arguments)
    else:
        assert got.calls == list(case.calls)
        assert finishes == ["tool_calls"]


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", REASONING_CASES, ids=lambda c: c.name)
def test_server_streams_reasoning_then_tool_calls(tokenizer, case: ReasoningCase, k: int) -> None:
    got, _ = run_server(tokenizer, case.text, k, reasoning=True)
    assert (got.reasoning, got.content, got.calls) == (
        case.reasoning,
        case.content,
        list(case.calls),
    )
