"""EAGLE-3 really runs on a Kimi-K2.5-shaped target, and losslessly.

Each test reads the result of an engine started by ``engine_probe.py`` (see
conftest.py): the tiny fixture (``vpq.checkpoints.fixture``: KimiK25 wrapper around a
4-layer DeepSeek-V3 with MLA and MoE, a one-layer MoonViT, an EAGLE-3 head
reading aux layers (1, 2, 3); dummy weights) at tensor-parallel size 1 and,
with two or more GPUs, 2; or real checkpoints given with
``--model/--drafter/--tensor-parallel-size``.

With dummy weights the head's drafts are effectively random, so on the tiny
fixture drafts are proposed and verified but hardly ever accepted; the
equivalence test then mostly proves rejection is lossless. With a real,
trained head, acceptance must be above zero too.
"""

from __future__ import annotations

import pytest

from tests.support.engine_result import ok
from tests.support.gpu_cases import (
    BENCH_MAX_TOKENS,
    FIXTURE_IMAGE_TOKENS,
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    Checkpoints,
)

K = NUM_SPECULATIVE_TOKENS


def test_engine_starts_with_eagle3_on_the_target(
    engine, checkpoints: Checkpoints, tp, gpus
) -> None:
    e = ok(engine(tp, eagle3=True))["engine"]
    assert e["architectures"] == checkpoints.target_config["architectures"]
    assert e["speculative"] == {
        "method": "eagle3",
        "num_speculative_tokens": K,
        "draft_architectures": checkpoints.drafter_config["architectures"],
    }
    # One entry per tensor-parallel worker, each holding the real wrapper.
    assert [w["class"] for w in e["workers"]] == [e["architectures"][0]] * tp


def test_aux_layers_on_the_model_are_the_drafter_configs(
    engine, checkpoints: Checkpoints, tp, gpus
) -> None:
    """Read back from the live model in every worker through ``llm.apply_model``:
    ``model.language_model.model.aux_hidden_state_layers``."""
    configured = checkpoints.drafter_config.get("eagle_aux_hidden_state_layer_ids")
    workers = ok(engine(tp, eagle3=True))["engine"]["workers"]
    for w in workers:
        # Without ids in the drafter config the runner uses the model's default.
        expected = list(configured) if configured else w["default_aux_layers"]
        assert w["aux_layers"] == expected, w
    if not checkpoints.real:
        # The fixture's ids are not the model's default, which for 4 layers
        # repeats an id; so the engine took them from the drafter config.
        assert workers[0]["default_aux_layers"] != configured


def test_no_aux_layers_without_speculation(engine, tp, gpus) -> None:
    workers = ok(engine(tp, eagle3=False))["engine"]["workers"]
    assert [w["aux_layers"] for w in workers] == [[]] * tp


def test_spec_decode_metrics_show_drafts_proposed_and_verified(
    engine, checkpoints: Checkpoints, tp, gpus
) -> None:
    """``vllm:spec_decode_*`` counters over the greedy batch (deltas)."""
    m = ok(engine(tp, eagle3=True))["batches"]["greedy"]["metrics"]
    assert m["num_drafts"] > 0, m
    assert 0 < m["num_draft_tokens"] <= K * m["num_drafts"], m
    assert 0 <= m["num_accepted_tokens"] <= m["num_draft_tokens"], m
    per_pos = m["accepted_per_pos"]
    assert len(per_pos) == K and sum(per_pos) == m["num_accepted_tokens"], m
    # A draft token is accepted only if every earlier one was.
    assert all(a >= b for a, b in zip(per_pos, per_pos[1:], strict=False)), m
    if checkpoints.real:
        assert m["num_accepted_tokens"] > 0, (
            f"a trained EAGLE-3 head accepted nothing: {m}; wrong aux layers or hidden states?"
        )
    ref = ok(engine(tp, eagle3=False))["batches"]["greedy"]["metrics"]
    assert ref["num_drafts"] == 0, ref


def test_greedy_outputs_match_without_speculation(
    engine, checkpoints: Checkpoints, tp, gpus
) -> None:
    """vLLM's rule for EAGLE equivalence, from ``_run_eagle_correctness`` in
    tests/v1/e2e/test_spec_decode.py of the 0.17.1 sdist: greedy sampling,
    10 new tokens, and ``matches > int(0.6 * len(ref_outputs))`` (a minimum
    fraction of prompts whose outputs are identical; numerics may flip a
    near-tie). We compare token ids, which is stricter than vLLM's text
    comparison, over the text prompts plus the image request; on the
    dummy-weight fixture EOS is ignored (vLLM honours it; so do we with real
    checkpoints)."""
    spec, ref = ok(engine(tp, eagle3=True))["batches"], ok(engine(tp, eagle3=False))["batches"]
    names = [n for n in ("greedy", "image") if n in ref]
    spec_out = [o["token_ids"] for n in names for o in spec[n]["outputs"]]
    ref_out = [o["token_ids"] for n in names for o in ref[n]["outputs"]]
    assert len(spec_out) == len(ref_out) == len(PROMPTS) + ("image" in ref)
    assert all(ref_out), "every reference request produced tokens"
    matches = sum(a == b for a, b in zip(spec_out, ref_out, strict=True))
    mismatched = [
        (i, r, s) for i, (s, r) in enumerate(zip(spec_out, ref_out, strict=True)) if s != r
    ]
    assert matches > int(0.6 * len(ref_out)), (
        f"{matches}/{len(ref_out)} matched; (i, ref, spec): {mismatched}"
    )


def test_image_request_runs_with_eagle3(engine, checkpoints: Checkpoints, tp, gpus) -> None:
    if not checkpoints.is_kimi_k25:
        pytest.skip("the target is not KimiK25ForConditionalGeneration")
    batch = ok(engine(tp, eagle3=True))["batches"]["image"]
    (out,) = batch["outputs"]
    # The one <|media_pad|> was expanded to one token per image embedding.
    if checkpoints.real:
        assert out["media_tokens"] > 1, out
    else:
        assert out["media_tokens"] == FIXTURE_IMAGE_TOKENS, out
    assert 1 <= len(out["token_ids"]) and out["finish_reason"] in ("length", "stop"), out
    # The drafter ran on the multimodal request too.
    assert batch["metrics"]["num_drafts"] > 0, batch["metrics"]


def test_unpatched_upstream_rejects_eagle3_for_kimi_k25(
    engine, checkpoints: Checkpoints, upstream_python
) -> None:
    """The failure the series fixes: 0.17.1's speculative config refuses an
    EAGLE-3 target whose text model is ``deepseek_v3``."""
    r = engine(1, eagle3=True, python=upstream_python)
    assert r.get("vllm_version") == "0.17.1", r.get("vllm_version")
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert "eagle3 is only supported for" in r["error"] and "deepseek_v3" in r["error"], r["error"]


def test_report_acceptance_and_throughput(
    engine, checkpoints: Checkpoints, tp, gpus, report
) -> None:
    """With ``--model/--drafter``: mean acceptance length and output tokens/s
    with and without EAGLE-3 on the same prompts, printed as a table.
    Numbers to report, not assertions (only that both runs produced them)."""
    if not checkpoints.real:
        pytest.skip("reported only for real checkpoints (--model/--drafter)")
    rows = []
    for label, eagle3 in (("without EAGLE-3", False), (f"EAGLE-3, k={K}", True)):
        b = ok(engine(tp, eagle3=eagle3))["batches"]["bench"]
        tokens = sum(len(o["token_ids"]) for o in b["outputs"])
        m = b["metrics"]
        accept = 1 + m["num_accepted_tokens"] / m["num_drafts"] if m["num_drafts"] else None
        rows.append((label, accept, tokens, b["seconds"]))
    assert all(r[2] > 0 for r in rows)
    report.append(
        f"{checkpoints.target.name} + {checkpoints.drafter.name}, tensor-parallel size {tp}, "
        f"{len(PROMPTS)} chat prompts, greedy, up to {BENCH_MAX_TOKENS} new tokens each"
    )
    report.append(
        f"{'run':<18}{'mean acceptance length':>24}{'output tokens':>15}"
        f"{'seconds':>10}{'tokens/s':>10}"
    )
    for label, accept, tokens, secs in rows:
        acc = f"{accept:.2f}" if accept is not None else "-"
        report.append(f"{label:<18}{acc:>24}{tokens:>15}{secs:>10.1f}{tokens / secs:>10.1f}")
