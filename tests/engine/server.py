"""``vllm serve`` on loopback for the engine tier: start, wait, read, stop.

One place for what the server cases share: the command line for the
scripted target (with or without an EAGLE-3 head, the ``kimi_k2`` parsers
on), a server in its own process group that is killed whole however the
case ends, its ``/metrics`` read as numbers, and a streamed chat answer
assembled as a client assembles it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.engine.cases import NUM_SPECULATIVE_TOKENS, Checkpoints

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(
    python: str,
    ck: Checkpoints,
    port: int,
    backend: str,
    head: str | None = "llama-top",
    extra: Sequence[str] = (),
) -> list[str]:
    """``vllm serve`` for the scripted target and ``head`` (None: no speculation)."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(ck.targets[4])]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512"]
    cmd += ["--max-num-seqs", "8"]
    if head is not None:
        spec = {"method": "eagle3", "model": str(ck.heads[head]),
                "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}  # fmt: skip
        cmd += ["--speculative-config", json.dumps(spec)]
    cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "kimi_k2"]
    cmd += ["--reasoning-parser", "kimi_k2"]
    # the fixture's image processor is remote code: trusted, as Kimi-K2.5
    # needs (GHSA-7972-pg2x-xr59: the series runs it only when trusted)
    cmd += ["--trust-remote-code", *extra]
    return cmd + (["--enforce-eager"] if backend == "cpu" else [])


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def serving(cmd: list[str], env: dict[str, str], log: Path, port: int) -> Iterator[int | None]:
    """Start ``cmd`` in its own process group; yield the port once healthy
    (None if the server exited first); stop the whole group afterwards."""
    with running(cmd, env, log) as proc:
        yield port if wait_healthy(proc, port, log) else None


def wait_healthy(proc: subprocess.Popen[bytes], port: int, log: Path) -> bool:
    """Wait for ``proc``'s server on ``port`` to answer ``/health``: True once
    it does, False if the process exited first; after ``START_TIMEOUT_S``
    an AssertionError with the log's tail."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None and not healthy(port):
        time.sleep(1)
    if proc.poll() is None and not healthy(port):
        raise AssertionError(f"server not healthy after {START_TIMEOUT_S} s:\n{tail(log)}")
    return proc.poll() is None


@contextlib.contextmanager
def running(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` in its own process group, logging to ``log``; the group is
    stopped (SIGTERM, then SIGKILL) however the block ends."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env}, start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, then SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def tail(log: Path, n: int = 6000) -> str:
    return log.read_text(errors="replace")[-n:]


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def counter(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` (exactly that name) whose labels
    include ``labels``."""
    total = 0.0
    for line in metrics.splitlines():
        m = re.fullmatch(r"([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        if all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
            total += float(m.group(3))
    return total


def reasoning(obj: object) -> str | None:
    return getattr(obj, "reasoning_content", None) or getattr(obj, "reasoning", None)


def assemble(chunks: list[Any]) -> dict[str, Any]:
    """A streamed chat answer as a client assembles it: reasoning, content, calls."""
    out: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "finish_reason": None}
    for chunk in chunks:
        for choice in chunk.choices:
            d = choice.delta
            out["reasoning"] += reasoning(d) or ""
            out["content"] += d.content or ""
            for tc in d.tool_calls or []:
                call = out["calls"].setdefault(tc.index, {"name": "", "arguments": ""})
                call["name"] += (tc.function and tc.function.name) or ""
                call["arguments"] += (tc.function and tc.function.arguments) or ""
            out["finish_reason"] = choice.finish_reason or out["finish_reason"]
    return out
