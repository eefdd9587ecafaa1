"""A head in the ``speculators`` format serves the scripted Kimi-K2.5 on a
real engine, losslessly, with the norm it was trained with.

The head (``cases.SPECULATORS_HEAD``) is what speculators 0.9.0's default
eagle3 recipe writes: ``speculators_model_type`` eagle3, the layer under
``transformer_layer_config``, ``norm_before_fc`` and ``norm_output`` set,
ids (1, 2, 3) at the top level, the library's tensor names. Its scripted
weights (``scripted.write_speculators_head_weights``) draft right only when
the drafter applies ``input_norm`` before ``fc`` and reads aux states 1, 2,
3: a wheel whose speculators converter drops ``norm_before_fc`` (0.17.1's)
would serve it losslessly with nothing accepted. Its config carries no
dtype, so the engine reads it from the head's safetensors, with no Hugging
Face Hub lookup of the local path (0.17.1 logged two ERROR lines for it).
"""

from __future__ import annotations

import pytest

from tests.engine.cases import (
    HEAD_IDS,
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    SPECULATORS_HEAD,
    Run,
    expected_tokens,
)
from tests.support.engine_result import ok

K = NUM_SPECULATIVE_TOKENS


def test_a_speculators_head_serves_with_its_norm_and_its_aux_states(engine) -> None:
    r = ok(engine(Run(SPECULATORS_HEAD)))
    (w,) = r["engine"]["workers"]
    assert w["aux_layers"] == HEAD_IDS
    greedy = r["batches"]["greedy"]
    assert [o["token_ids"] for o in greedy["outputs"]] == [expected_tokens(p) for p in PROMPTS]
    m = greedy["metrics"]
    assert m["num_drafts"] > 0 and m["num_draft_tokens"] == K * m["num_drafts"], m
    assert m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m
    assert m["accepted_per_pos"][1:] == [0] * (K - 1), m


def test_a_speculators_head_loads_without_a_hub_lookup(engine) -> None:
    # The head's converted config has no dtype; 0.17.1 asked the Hub for the
    # local path's (two ERROR lines, 2 s). The series reads its safetensors.
    r = ok(engine(Run(SPECULATORS_HEAD)))
    assert "Error retrieving safetensors" not in r["log"], r["log_tail"]


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_engine_refuses_the_speculators_head_on_kimi_k25(engine) -> None:
    r = engine(Run(SPECULATORS_HEAD, engine="control"))
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert "eagle3 is only supported for" in r["error"], r["error"]
