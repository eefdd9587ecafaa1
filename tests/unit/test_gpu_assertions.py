"""The GPU tests' assertions, on CPU: fed engine results shaped like
``tests/gpu/engine_probe.py``'s, each test passes on a correct run and fails
on the fault it is there to catch. (The engine run itself needs a GPU.)"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from vpq.checkpoints import fixture

from tests.gpu import test_eagle3_engine as gt
from tests.gpu import test_eagle3_heads as ht
from tests.gpu import test_eagle3_serving_fixes as sf
from tests.support.gpu_cases import (
    FIXTURE_IMAGE_TOKENS,
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    Checkpoints,
)

K = NUM_SPECULATIVE_TOKENS
UPSTREAM = "/upstream/bin/python"


def _outputs(n: int, seed: int) -> list[dict]:
    return [
        {
            "token_ids": [(seed + i * 7 + j) % 1024 for j in range(10)],
            "text": "x",
            "finish_reason": "length",
            "prompt_len": 12,
            "media_tokens": 0,
        }
        for i in range(n)
    ]


def _metrics(drafts: int, accepted: list[int]) -> dict:
    return {
        "num_drafts": drafts,
        "num_draft_tokens": K * drafts,
        "num_accepted_tokens": sum(accepted),
        "accepted_per_pos": accepted,
    }


def _result(tp: int, eagle3: bool) -> dict:
    worker = {
        "class": "KimiK25ForConditionalGeneration",
        "language_model_class": "DeepseekV2ForCausalLM",
        "aux_layers": list(fixture.AUX_LAYER_IDS) if eagle3 else [],
        "default_aux_layers": [2, 2, 1],
    }
    image_out = _outputs(1, 500)
    image_out[0]["media_tokens"] = FIXTURE_IMAGE_TOKENS
    return {
        "ok": True,
        "phase": "generate",
        "vllm_version": "0.17.1+eagle3.957853fc",
        "engine": {
            "architectures": ["KimiK25ForConditionalGeneration"],
            "speculative": {
                "method": "eagle3",
                "num_speculative_tokens": K,
                "draft_architectures": ["LlamaForCausalLMEagle3"],
            }
            if eagle3
            else None,
            "workers": [dict(worker) for _ in range(tp)],
        },
        "batches": {
            "greedy": {
                "seconds": 1.0,
                "outputs": _outputs(len(PROMPTS), 0),
                "metrics": _metrics(9 * len(PROMPTS), [50, 20, 10]) if eagle3 else _metrics(0, []),
            },
            "image": {
                "seconds": 1.0,
                "outputs": image_out,
                "metrics": _metrics(9, [0, 0, 0]) if eagle3 else _metrics(0, []),
            },
        },
    }


UPSTREAM_RESULT = {
    "ok": False,
    "phase": "start",
    "vllm_version": "0.17.1",
    "error": "ValueError: eagle3 is only supported for ['llama', 'qwen'] models. "
    "Got self.target_model_config.hf_text_config.model_type='deepseek_v3'",
}


@pytest.fixture
def checkpoints(tmp_path: Path) -> Checkpoints:
    target, drafter = fixture.write_fixture(tmp_path)
    return Checkpoints(target, drafter, False)


@pytest.fixture
def results() -> dict:
    out = {(tp, e3, None): _result(tp, e3) for tp in (1, 2) for e3 in (True, False)}
    out[(1, True, UPSTREAM)] = copy.deepcopy(UPSTREAM_RESULT)
    return out


def _engine(results: dict):  # type: ignore[no-untyped-def]
    return lambda tp, eagle3, python=None: results[(tp, eagle3, python)]


def _run_all(results: dict, ck: Checkpoints, tp: int = 1) -> None:
    engine = _engine(results)
    gt.test_engine_starts_with_eagle3_on_the_target(engine, ck, tp, tp)
    gt.test_aux_layers_on_the_model_are_the_drafter_configs(engine, ck, tp, tp)
    gt.test_no_aux_layers_without_speculation(engine, tp, tp)
    gt.test_spec_decode_metrics_show_drafts_proposed_and_verified(engine, ck, tp, tp)
    gt.test_greedy_outputs_match_without_speculation(engine, ck, tp, tp)
    gt.test_image_request_runs_with_eagle3(engine, ck, tp, tp)
    gt.test_unpatched_upstream_rejects_eagle3_for_kimi_k25(engine, ck, UPSTREAM)


@pytest.mark.parametrize("tp", [1, 2])
def test_a_correct_run_passes(results, checkpoints, tp) -> None:
    _run_all(results, checkpoints, tp)


def test_default_aux_layers_fail(results, checkpoints) -> None:
    for w in results[(1, True, None)]["engine"]["workers"]:
        w["aux_layers"] = [2, 2, 1]
    with pytest.raises(AssertionError):
        gt.test_aux_layers_on_the_model_are_the_drafter_configs(_engine(results), checkpoints, 1, 1)


def test_no_drafts_fail(results, checkpoints) -> None:
    results[(1, True, None)]["batches"]["greedy"]["metrics"] = _metrics(0, [0, 0, 0])
    with pytest.raises(AssertionError):
        gt.test_spec_decode_metrics_show_drafts_proposed_and_verified(
            _engine(results), checkpoints, 1, 1
        )


def test_inconsistent_acceptance_fails(results, checkpoints) -> None:
    results[(1, True, None)]["batches"]["greedy"]["metrics"]["accepted_per_pos"] = [20, 50, 10]
    with pytest.raises(AssertionError):
        gt.test_spec_decode_metrics_show_drafts_proposed_and_verified(
            _engine(results), checkpoints, 1, 1
        )


@pytest.mark.parametrize(("differing", "passes"), [(0, True), (8, True), (9, False), (21, False)])
def test_the_equivalence_rule_is_vllms(results, checkpoints, differing, passes) -> None:
    """21 requests (20 prompts + the image): ``matches > int(0.6 * 21) = 12``."""
    outs = results[(1, True, None)]["batches"]["greedy"]["outputs"]
    image = results[(1, True, None)]["batches"]["image"]["outputs"]
    for o in (outs + image)[:differing]:
        o["token_ids"] = [t + 1 for t in o["token_ids"]]
    if passes:
        gt.test_greedy_outputs_match_without_speculation(_engine(results), checkpoints, 1, 1)
    else:
        with pytest.raises(AssertionError):
            gt.test_greedy_outputs_match_without_speculation(_engine(results), checkpoints, 1, 1)


def test_an_unexpanded_image_fails(results, checkpoints) -> None:
    results[(1, True, None)]["batches"]["image"]["outputs"][0]["media_tokens"] = 1
    with pytest.raises(AssertionError):
        gt.test_image_request_runs_with_eagle3(_engine(results), checkpoints, 1, 1)


def test_upstream_starting_fails_the_negative_test(results, checkpoints) -> None:
    results[(1, True, UPSTREAM)] = _result(1, True) | {"vllm_version": "0.17.1"}
    with pytest.raises(AssertionError):
        gt.test_unpatched_upstream_rejects_eagle3_for_kimi_k25(
            _engine(results), checkpoints, UPSTREAM
        )


def test_an_engine_error_fails_with_its_message(results, checkpoints) -> None:
    results[(1, True, None)] = {
        "ok": False,
        "phase": "start",
        "error": "ValueError: boom",
        "log_tail": "log",
    }
    with pytest.raises(pytest.fail.Exception, match="phase start: ValueError: boom"):
        gt.test_engine_starts_with_eagle3_on_the_target(_engine(results), checkpoints, 1, 1)


def test_report_table_for_real_checkpoints(results, checkpoints) -> None:
    real = Checkpoints(checkpoints.target, checkpoints.drafter, True)
    for e3, secs in ((True, 2.0), (False, 4.0)):
        b = results[(1, e3, None)]["batches"]
        b["bench"] = {**b["greedy"], "seconds": secs}
    report: list[str] = []
    gt.test_report_acceptance_and_throughput(_engine(results), real, 1, 1, report)
    assert report[1].split()[:4] == ["run", "mean", "acceptance", "length"]
    assert report[2].split() == ["without", "EAGLE-3", "-", "200", "4.0", "50.0"]
    # 1 + 80 accepted / 180 drafts
    assert report[3].split() == ["EAGLE-3,", f"k={K}", "1.44", "200", "2.0", "100.0"]


# --- data parallel at max_model_len (tests/gpu/test_eagle3_serving_fixes.py) ---

MAX_MODEL_LEN = 1024


def _rank0(prompt_len: int, generated: int, finish: str = "length") -> dict:
    """Rank 0's output, shaped as engine_probe.py records it."""
    return {
        "token_ids": [7] * generated,
        "text": "x",
        "finish_reason": finish,
        "prompt_len": prompt_len,
        "media_tokens": 0,
    }


def test_the_dp_prompt_is_sized_in_the_fixture_tokenizers_tokens(checkpoints) -> None:
    """The fixture's tokenizer splits the words into several tokens each (a
    prompt of N words is not N tokens); the prompt is sized in tokens, so it
    sits exactly ``DP_ROOM`` below ``max_model_len``."""
    unit = sf.token_ids(checkpoints.target, sf.DP_PROMPT_TEXT)
    assert len(unit) > len(sf.DP_PROMPT_TEXT.split())
    ids = sf.prompt_below_max_model_len(checkpoints.target, MAX_MODEL_LEN, sf.DP_ROOM)
    assert len(ids) == MAX_MODEL_LEN - sf.DP_ROOM
    assert ids[: len(unit)] == unit
    assert sf.DP_ROOM < sf.DP_MAX_TOKENS  # max_model_len comes first


def test_a_request_stopped_by_max_model_len_passes() -> None:
    out = _rank0(MAX_MODEL_LEN - sf.DP_ROOM, sf.DP_ROOM)
    sf.assert_finished_at_max_model_len(out, MAX_MODEL_LEN, sf.DP_MAX_TOKENS)


@pytest.mark.parametrize(
    "out",
    [
        _rank0(100, sf.DP_MAX_TOKENS),  # a short prompt: max_tokens stopped it
        _rank0(MAX_MODEL_LEN - sf.DP_ROOM, sf.DP_ROOM, "stop"),
        _rank0(MAX_MODEL_LEN - sf.DP_ROOM, sf.DP_ROOM - 3),  # stopped short of the limit
        _rank0(MAX_MODEL_LEN - sf.DP_ROOM, sf.DP_ROOM + 2),  # ran past max_model_len
    ],
    ids=["by-max-tokens", "by-stop", "short", "past-the-limit"],
)
def test_a_request_not_stopped_by_max_model_len_fails(out) -> None:
    with pytest.raises(AssertionError):
        sf.assert_finished_at_max_model_len(out, MAX_MODEL_LEN, sf.DP_MAX_TOKENS)


# --- the fixture's other heads (tests/gpu/test_eagle3_heads.py) ---------------


@pytest.fixture
def head_configs(tmp_path: Path) -> dict[str, dict]:
    import json

    heads = fixture.write_fixture_heads(tmp_path / "heads")
    return {p.name: json.loads((p / "config.json").read_text()) for p in heads}


def _head_engine(cfgs: dict[str, dict], tp: int = 1):  # type: ignore[no-untyped-def]
    """``head_engine(tp, name)`` over results shaped like engine_probe.py's,
    for a run that serves each head right."""
    runs = {}
    for name, cfg in cfgs.items():
        r = _result(tp, True)
        r["engine"]["speculative"]["draft_architectures"] = cfg["architectures"]
        for w in r["engine"]["workers"]:
            w["aux_layers"] = ht.head_ids(cfg)
        runs[name] = r | {"head_config": cfg}
    return lambda tp, name: runs[name]


def test_the_gpu_heads_are_written_where_the_fixture_says(head_configs) -> None:
    """A CPU check (it sat behind the GPU skip): the heads the GPU tests run."""
    assert list(head_configs) == ht.HEADS
    assert ht.head_ids(head_configs["eagle3.1-tiny"]) == list(fixture.AUX_LAYER_IDS)


@pytest.mark.parametrize("name", ht.HEADS)
def test_a_correct_head_run_passes(results, checkpoints, head_configs, name) -> None:
    head_engine = _head_engine(head_configs)
    ht.test_engine_starts_with_the_head(head_engine, name, 1, 1)
    ht.test_live_aux_layers_are_the_heads_own_ids(head_engine, name, 1, 1)
    ht.test_greedy_outputs_match_without_speculation_with_the_head(
        head_engine, _engine(results), name, 1, 1
    )


@pytest.mark.parametrize("name", ht.HEADS)
def test_a_head_run_on_the_default_layers_or_another_head_fails(head_configs, name) -> None:
    run = _head_engine(head_configs)(1, name)
    for w in run["engine"]["workers"]:
        w["aux_layers"] = w["default_aux_layers"]
    with pytest.raises(AssertionError):
        ht.test_live_aux_layers_are_the_heads_own_ids(lambda tp, n: run, name, 1, 1)
    run["engine"]["speculative"]["draft_architectures"] = ["LlamaForCausalLMEagle3"]
    if head_configs[name]["architectures"] != ["LlamaForCausalLMEagle3"]:
        with pytest.raises(AssertionError):
            ht.test_engine_starts_with_the_head(lambda tp, n: run, name, 1, 1)


def test_a_head_run_whose_outputs_diverge_fails(results, head_configs) -> None:
    run = _head_engine(head_configs)(1, ht.HEADS[0])
    for o in run["batches"]["greedy"]["outputs"]:
        o["token_ids"] = [t + 1 for t in o["token_ids"]]
    with pytest.raises(AssertionError):
        ht.test_greedy_outputs_match_without_speculation_with_the_head(
            lambda tp, n: run, _engine(results), ht.HEADS[0], 1, 1
        )
