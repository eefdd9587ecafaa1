"""Pipeline parallel with EAGLE-3 on a real engine: starts, is lossless, ends.

Two stages split the tiny target's 4 layers (0-1, 2-3); the head's ids
(1, 2, 3) put id 1 and 2 on the first stage, so the aux states must travel
(``deepseek_v2-carry-eagle3-aux-states-across-pipeline-stages.patch``). On
the series before ``gpu_model_runner-pipeline-stages-without-the-drafter-
skip-its-uses.patch`` the first stage died at start (``'CPUModelRunner'
object has no attribute 'drafter'``); before ``core-pipeline-parallel-
speculative-decoding-runs-one-batch-at-a-time.patch`` outputs diverged
after the first token (one batch per stage in flight, each step's drafts
taken before its output). ``core-overlap-pipeline-batches-with-
speculative-decoding.patch`` puts the second batch back: the stages
overlap batches of different requests, each request's drafts handed over
after its step's output. The overlap cases serve 12 requests of mixed
lengths through a token budget of 16 (a speculative step takes 4), so
each batch holds a few requests, prompts are prefilled in chunks and
requests finish in different steps; the engine core's spy
(``cpu_shims.SPY_IN_FLIGHT``) counts the batches in flight. With the
overlap patch taken out the engine keeps one batch in flight and the
overlap assertion fails; with the overlap and without its draft hand-over
(the series before the one-batch patch) outputs diverge.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.engine import cpu_shims
from tests.engine.cases import HEAD_IDS, PROMPTS, Run, expected_tokens, metrics, outputs
from tests.support.engine_result import ok

ASYNC_OFF_WARNING = "Async scheduling is disabled: speculative decoding with"
ASYNC_REFUSED = "Async scheduling is not supported with speculative decoding"


def test_pipeline_parallel_2_starts_with_the_heads_ids_on_every_stage(engine) -> None:
    """Every stage sets the head's ids; the head, which has no
    ``embed_tokens``, shares the target's embedding on the last stage
    (``eagle-share-target-embedding-on-the-drafter-pipeline-stage.patch``:
    no "unloaded embedding" warning)."""
    r = ok(engine(Run("llama-top", pp=2)))
    assert [w["aux_layers"] for w in r["engine"]["workers"]] == [HEAD_IDS, HEAD_IDS]
    assert "unloaded embedding" not in r["log"], r["log_tail"]


def test_pipeline_parallel_2_is_lossless_and_drafts_are_accepted(engine) -> None:
    r = engine(Run("llama-top", pp=2))
    assert outputs(r) == outputs(engine(Run(None))) == [expected_tokens(p) for p in PROMPTS]
    m = metrics(r)
    assert m["num_drafts"] > 0 and m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m
    assert m["accepted_per_pos"][1:] == [0, 0], m


def test_pipeline_parallel_2_drafts_and_accepts_exactly_as_one_stage(engine) -> None:
    """The same counters as one stage scheduled the same way (synchronously,
    which is what pipeline parallel with a drafter runs)."""
    one_stage = engine(Run("llama-top", args=(("async_scheduling", False),)))
    assert metrics(engine(Run("llama-top", pp=2))) == metrics(one_stage)


def test_pipeline_parallel_2_turns_async_scheduling_off_with_one_warning(engine) -> None:
    r = ok(engine(Run("llama-top", pp=2)))
    assert r["log"].count(ASYNC_OFF_WARNING) == 1, r["log_tail"]


def test_pipeline_parallel_2_refuses_explicit_async_scheduling_at_config_time(engine) -> None:
    r = engine(Run("llama-top", pp=2, args=(("async_scheduling", True),)))
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert ASYNC_REFUSED in r["error"] and "--no-async-scheduling" in r["error"], r["error"]


#: Twelve requests of mixed lengths: the tier's six prompts (one longer than
#: the budget, prefilled in chunks) and six one-token prompts on the script.
MIXED = tuple(tuple(p) for p in PROMPTS) + tuple((t,) for t in (20, 21, 22, 23, 24, 25))
#: A token budget of four speculative steps' worth: a few requests per batch.
BUDGET = (("max_num_batched_tokens", 16),)
SPY = ((cpu_shims.SPY_ENV, "1"),)
#: Then two image requests (Kimi-K2.5's vision tower on the first stage).
OVERLAP = Run("llama-top", pp=2, args=BUDGET, prompts=MIXED, env=SPY, images=2)
#: The same load on one stage, scheduled as pipeline parallel with a drafter
#: schedules (synchronously): the acceptance and the image outputs to match.
ONE_STAGE = Run("llama-top", args=(*BUDGET, ("async_scheduling", False)), prompts=MIXED, images=2)


def _in_flight(result: dict, backend: str) -> int:
    """The most batches the engine core had in flight (the CPU spy)."""
    if backend != "cpu":
        pytest.skip("the spy is one of the CPU engine's plugins")
    seen = cpu_shims.spied(ok(result)["log"], cpu_shims.SPY_IN_FLIGHT)
    assert seen, "the engine core's spy printed nothing: a harness error"
    return max(seen)


def test_pipeline_parallel_2_overlaps_batches_losslessly_with_a_drafter(engine, backend) -> None:
    """Two batches in flight, every output the oracle's (the target's greedy
    tokens without speculation), drafts accepted as on one stage; the image
    requests' outputs are one stage's."""
    r = engine(OVERLAP)
    assert _in_flight(r, backend) == 2, "the stages never overlapped two batches"
    assert outputs(r) == [expected_tokens(list(p)) for p in MIXED]
    assert metrics(r) == metrics(engine(ONE_STAGE)), (metrics(r), metrics(engine(ONE_STAGE)))
    images = [o["token_ids"] for o in ok(r)["batches"]["images"]["outputs"]]
    one = [o["token_ids"] for o in ok(engine(ONE_STAGE))["batches"]["images"]["outputs"]]
    assert images == one and all(images), (images, one)
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2, metrics(r)


@pytest.mark.outside_ci  # a third PP=2 engine start on CI's two cores
def test_pipeline_parallel_2_overlaps_batches_losslessly_under_preemption(engine, backend) -> None:
    """The same load in a KV cache of 3 blocks (of 128 tokens on the CPU
    backend): requests are preempted (with a step of theirs in flight,
    some) and resumed; every output is still the oracle's."""
    small = Run("llama-top", pp=2, prompts=MIXED, env=SPY,
                args=(*BUDGET, ("num_gpu_blocks_override", 3), ("max_model_len", 256)))  # fmt: skip
    r = engine(small)
    assert ok(r)["batches"]["greedy"]["preemptions"] > 0, "nothing was preempted: a harness error"
    assert _in_flight(r, backend) == 2
    assert outputs(r) == [expected_tokens(list(p)) for p in MIXED]


#: Where the bench's case writes each load's wall time (``nox -s bench -- --pipeline``).
PIPELINE_REPORT = "VPQ_PIPELINE_REPORT"
#: The bench's load: the mixed requests twice over.
BENCH_LOAD = MIXED * 2


@pytest.mark.outside_ci  # two more PP=2 engines: the bench's figures
def test_pipeline_parallel_2_overlap_and_the_one_batch_rule_serve_one_load(engine, backend) -> None:
    """The same 24 requests through PP=2 with the overlap and under the
    one-batch rule (``cpu_shims.ONE_BATCH_ENV``): both lossless; the rule's
    engine never had two batches in flight (so the overlap case can tell).
    Each load's wall time goes to ``$VPQ_PIPELINE_REPORT`` for the bench;
    nothing here asserts on time."""
    one_batch = ((cpu_shims.ONE_BATCH_ENV, "1"),)
    runs = {
        "overlapped": Run("llama-top", pp=2, args=BUDGET, prompts=BENCH_LOAD, env=SPY),
        "one batch in flight": Run(
            "llama-top", pp=2, args=BUDGET, prompts=BENCH_LOAD, env=SPY + one_batch
        ),
    }
    rows = []
    for name, run in runs.items():
        r = engine(run)
        assert outputs(r) == [expected_tokens(list(p)) for p in BENCH_LOAD], name
        assert _in_flight(r, backend) == (2 if name == "overlapped" else 1), name
        seconds = ok(r)["batches"]["greedy"]["seconds"]
        rows.append({"name": name, "requests": len(BENCH_LOAD), "seconds": seconds})
    report = os.environ.get(PIPELINE_REPORT)
    if report:
        Path(report).write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.outside_ci  # four workers on CI's two cores: about 4 minutes
def test_pipeline_parallel_2_with_tensor_parallel_2_is_lossless(engine) -> None:
    r = engine(Run("llama-top", tp=2, pp=2))
    assert [w["aux_layers"] for w in ok(r)["engine"]["workers"]] == [HEAD_IDS] * 4
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2
