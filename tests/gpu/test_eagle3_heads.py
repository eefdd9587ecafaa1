"""The fixture's other head shapes on the same tiny Kimi-K2.5 target: an MLA
head (``Eagle3DeepseekV2ForCausalLM``) and an EAGLE 3.1 head (``fc_norm``,
``norm_output``) with its layer ids under ``eagle_config``
(``vpq.checkpoints.fixture.GPU_HEADS``; dummy weights). For each: the engine starts with
it, the live aux layers equal the head's own ids (not the model default),
and greedy outputs match the non-speculative run by vLLM's rule (see
``test_greedy_outputs_match_without_speculation``). Fixture only: with
``--model/--drafter`` these skip. Like every test here they skip without a
GPU.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import pytest

from tests.support.engine_result import ok
from tests.support.gpu_cases import PROMPTS, Checkpoints, engine_spec, run_probe

HEADS = ["eagle3-mla-tiny", "eagle3.1-tiny"]


@pytest.fixture(scope="session")
def head_engine(checkpoints: Checkpoints, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``head_engine(tp, name)``: the engine probe's result with head ``name``."""
    if checkpoints.real:
        pytest.skip("fixture heads only (no --model/--drafter)")
    from vpq.checkpoints import fixture

    heads = {p.name: p for p in fixture.write_fixture_heads(tmp_path_factory.mktemp("heads"))}
    cache: dict[tuple[int, str], dict[str, Any]] = {}

    def get(tp: int, name: str) -> dict[str, Any]:
        if (tp, name) not in cache:
            ck = replace(checkpoints, drafter=heads[name])
            workdir = tmp_path_factory.mktemp(f"tp{tp}-{name}")
            cache[(tp, name)] = run_probe(
                sys.executable, engine_spec(ck, tp, True), workdir, 900
            ) | {"head_config": ck.drafter_config}
        return cache[(tp, name)]

    return get


def head_ids(cfg: dict[str, Any]) -> list[int]:
    """The head's own ids: top level first, then ``eagle_config``."""
    ids = cfg.get("eagle_aux_hidden_state_layer_ids")
    if ids is None:
        ids = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    assert ids, cfg
    return list(ids)


@pytest.mark.parametrize("name", HEADS)
def test_engine_starts_with_the_head(head_engine, name, tp, gpus) -> None:
    r = head_engine(tp, name)
    e = ok(r)["engine"]
    assert e["speculative"]["draft_architectures"] == r["head_config"]["architectures"]


@pytest.mark.parametrize("name", HEADS)
def test_live_aux_layers_are_the_heads_own_ids(head_engine, name, tp, gpus) -> None:
    r = head_engine(tp, name)
    for w in ok(r)["engine"]["workers"]:
        assert w["aux_layers"] == head_ids(r["head_config"]), w
        assert w["default_aux_layers"] != w["aux_layers"]


@pytest.mark.parametrize("name", HEADS)
def test_greedy_outputs_match_without_speculation_with_the_head(
    head_engine, engine, name, tp, gpus
) -> None:
    spec, ref = ok(head_engine(tp, name))["batches"], ok(engine(tp, eagle3=False))["batches"]
    names = [n for n in ("greedy", "image") if n in ref]
    spec_out = [o["token_ids"] for n in names for o in spec[n]["outputs"]]
    ref_out = [o["token_ids"] for n in names for o in ref[n]["outputs"]]
    assert len(spec_out) == len(ref_out) == len(PROMPTS) + ("image" in ref)
    matches = sum(a == b for a, b in zip(spec_out, ref_out, strict=True))
    assert matches > int(0.6 * len(ref_out)), f"{matches}/{len(ref_out)} matched"
