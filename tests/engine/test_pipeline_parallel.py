"""Pipeline parallel with EAGLE-3 on a real engine: starts, is lossless, ends.

Two stages split the tiny target's 4 layers (0-1, 2-3); the head's ids
(1, 2, 3) put id 1 and 2 on the first stage, so the aux states must travel
(``deepseek_v2-carry-eagle3-aux-states-across-pipeline-stages.patch``). On
the series before ``gpu_model_runner-pipeline-stages-without-the-drafter-
skip-its-uses.patch`` the first stage died at start (``'CPUModelRunner'
object has no attribute 'drafter'``); before ``core-pipeline-parallel-
speculative-decoding-runs-one-batch-at-a-time.patch`` outputs diverged
after the first token (one batch per stage in flight).
"""

from __future__ import annotations

import pytest

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


@pytest.mark.outside_ci  # four workers on CI's two cores: about 4 minutes
def test_pipeline_parallel_2_with_tensor_parallel_2_is_lossless(engine) -> None:
    r = engine(Run("llama-top", tp=2, pp=2))
    assert [w["aux_layers"] for w in ok(r)["engine"]["workers"]] == [HEAD_IDS] * 4
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2
