"""The preflight on heads in the ``speculators`` format (vllm-project/speculators).

The format keeps the drafter's sizes under ``transformer_layer_config`` and
its EAGLE-3 fields at the top level; vLLM reads it through its speculators
converter. The heads here are ``tests/support/heads.py``'s ``speculators_head``,
whose config and tensor names are held equal to what speculators 0.9.0
itself writes (tests/data/speculators-0.9.0/, made by the library's own
classes: see generate.py there). The wheel's side is asked of the stand-in
vLLM of test_preflight_vllm.py, with 0.17.1's converter and the series'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import verify_install as vi
from vpq.checkpoints import fixture

from tests.support import heads
from tests.unit.fake_vllm import SPECULATORS_017, fake_vllm
from tests.unit.preflight_files import preflight as file_rules
from tests.unit.preflight_files import problems

DATA = Path(__file__).resolve().parents[1] / "data" / "speculators-0.9.0"

#: Each file the library wrote, with the arguments that give the same head here.
LIBRARY_HEADS: dict[str, dict[str, Any]] = {
    "eagle3-default-recipe": {"aux_layer_ids": (1, 2, 3)},
    "eagle3-fc_norm": {"aux_layer_ids": (1, 2, 3), "norm_before_fc": False, "fc_norm": True},
    "eagle3-qwen3-layer-no-ids": {"aux_layer_ids": None, "layer_type": "qwen3"},
}


def by_rule(findings: list[vi.Finding], rule: str) -> list[vi.Finding]:
    return [f for f in findings if f.rule == rule]


@pytest.mark.parametrize("name", sorted(LIBRARY_HEADS))
def test_the_test_heads_are_what_speculators_0_9_0_writes(name: str) -> None:
    cfg, tensors = heads.speculators_head(**LIBRARY_HEADS[name])
    assert cfg == json.loads((DATA / f"{name}.config.json").read_text())
    shapes = {n: list(t.shape) for n, t in tensors.items()}
    assert shapes == json.loads((DATA / f"{name}.tensors.json").read_text())


GOOD_HEADS: dict[str, tuple[dict[str, Any], list[tuple[str, str]]]] = {
    "default-recipe": ({}, []),
    "default-recipe-no-ids": ({"aux_layer_ids": None}, [(vi.WARNING, "layer-ids-absent")]),
    "fc_norm": ({"norm_before_fc": False, "fc_norm": True}, []),
    "plain-eagle3": ({"norm_before_fc": False, "norm_output": False}, []),
    "smaller-draft-vocab": ({"draft_vocab_size": heads.DRAFT_VOCAB}, []),
}


@pytest.mark.parametrize("name", sorted(GOOD_HEADS))
def test_a_speculators_head_passes_the_file_rules(name: str, target: Path, tmp_path: Path) -> None:
    kwargs, expected = GOOD_HEADS[name]
    head = heads.write_head(tmp_path / name, heads.speculators_head(**kwargs))
    findings = file_rules(target, head)
    assert problems(findings) == expected, findings
    assert vi.exit_code(findings) == 0


def test_sizes_are_read_from_the_transformer_layer_config(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "h", heads.speculators_head())
    got = {f.rule: f.message for f in file_rules(target, head)}
    assert got["drafter"] == "Eagle3LlamaForCausalLM, model_type llama"
    assert got["target-hidden-size"] == "hidden_size 256 = the target's hidden_size"
    assert got["fc-width"] == "fc.weight [256, 768] = [hidden_size, 3 * 256]: 3 aux states"
    assert got["draft-vocab"] == "draft_vocab_size 1024: lm_head.weight rows agree"
    assert got["embeddings"] == "own embed_tokens.weight [1024, 256]"
    assert got["layer-ids-source"] == (
        "ids [1, 4, 6] (from the top-level eagle_aux_hidden_state_layer_ids)"
    )
    assert got["speculators"] == (
        "speculators format (speculators_model_type eagle3, speculators 0.9.0): read as "
        "transformer_layer_config (model_type llama) -> Eagle3LlamaForCausalLM, with "
        "norm_before_residual True, norm_before_fc True, fc_norm False, norm_output True"
    )


def test_the_default_recipe_s_norms_are_checked_against_its_weights(
    target: Path, tmp_path: Path
) -> None:
    cfg, tensors = heads.speculators_head()
    del tensors["input_norm.weight"]
    findings = file_rules(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    assert problems(findings) == [(vi.ERROR, "eagle31-weights")]
    assert (
        "norm_before_fc needs input_norm.weight [768]"
        in by_rule(findings, "eagle31-weights")[0].message
    )


BROKEN: dict[str, tuple[dict[str, Any], str, str]] = {
    "qwen3-layer": (
        {"layer_type": "qwen3"},
        "transformer_layer_config.model_type",
        "transformer_layer_config.model_type 'qwen3'",
    ),
    "both-norms": ({"fc_norm": True}, "fc_norm", "norm_before_fc and fc_norm are both set"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_what_the_wheel_cannot_serve_is_a_format_error(
    name: str, target: Path, tmp_path: Path
) -> None:
    kwargs, key, says = BROKEN[name]
    findings = file_rules(
        target, heads.write_head(tmp_path / name, heads.speculators_head(**kwargs))
    )
    (err,) = by_rule(findings, "speculators-format")
    assert (err.severity, err.key) == (vi.ERROR, key)
    assert says in err.message
    assert vi.exit_code(findings) == 1


def test_another_speculators_algorithm_is_a_format_error(target: Path, tmp_path: Path) -> None:
    cfg, tensors = heads.speculators_head()
    cfg["speculators_model_type"] = "dflash"
    findings = file_rules(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    (err,) = by_rule(findings, "speculators-format")
    assert err.message.startswith("speculators_model_type 'dflash': this series' vLLM (0.17.1)")


def test_a_head_trained_for_another_verifier_is_a_warning(target: Path, tmp_path: Path) -> None:
    cfg, tensors = heads.speculators_head()
    cfg["speculators_config"]["verifier"] = {
        "architectures": ["Qwen3ForCausalLM"],
        "name_or_path": "q",
    }
    findings = file_rules(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    assert problems(findings) == [(vi.WARNING, "speculators-verifier")]


@pytest.mark.parametrize("where", ["plain", "speculators"])
def test_a_head_without_model_type_is_checked_not_crashed_on(
    where: str, monkeypatch: pytest.MonkeyPatch, target: Path, tmp_path: Path
) -> None:
    if where == "plain":
        cfg, tensors = heads.llama_top_level()
        del cfg["model_type"]
    else:
        cfg, tensors = heads.speculators_head()
        del cfg["transformer_layer_config"]["model_type"]
    head = heads.write_head(tmp_path / "h", (cfg, tensors))
    assert problems(file_rules(target, head)) == []
    fake_vllm(monkeypatch, registered=("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"))
    findings = vi.preflight(target, head)
    assert [p for p in problems(findings) if p[1] != "speculators-wheel"] == [], findings


# --- the wheel's side -------------------------------------------------------


def wheel(monkeypatch: pytest.MonkeyPatch, fields: tuple[str, ...] | None = None) -> None:
    registered = ("Eagle3LlamaForCausalLM",)
    if fields is None:
        fake_vllm(monkeypatch, registered=registered)
    else:
        fake_vllm(monkeypatch, registered=registered, speculators_fields=fields)


@pytest.mark.parametrize(
    "kwargs", [{}, {"norm_before_fc": False, "fc_norm": True}], ids=["default-recipe", "fc_norm"]
)
def test_a_wheel_whose_converter_keeps_the_norms_serves_the_head(
    kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, target: Path, tmp_path: Path
) -> None:
    wheel(monkeypatch)
    findings = vi.preflight(
        target, heads.write_head(tmp_path / "h", heads.speculators_head(**kwargs))
    )
    assert problems(findings) == [], findings
    (ok,) = by_rule(findings, "speculators-wheel")
    assert ok.severity == vi.INFO
    assert by_rule(findings, "layer-ids-wheel")[0].message == (
        "this wheel will use ids [1, 4, 6] (from the drafter config)"
    )


@pytest.mark.parametrize(
    ("kwargs", "dropped", "says"),
    [
        ({}, "norm_before_fc", "input_norm.weight is skipped at load"),
        ({"norm_before_fc": False, "fc_norm": True}, "fc_norm", "fails to load (KeyError)"),
    ],
    ids=["default-recipe", "fc_norm"],
)
def test_a_wheel_that_drops_the_norms_is_an_error(
    kwargs: dict[str, Any],
    dropped: str,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    target: Path,
    tmp_path: Path,
) -> None:
    wheel(monkeypatch, SPECULATORS_017)
    findings = vi.preflight(
        target, heads.write_head(tmp_path / "h", heads.speculators_head(**kwargs))
    )
    assert problems(findings) == [(vi.ERROR, "speculators-wheel")], findings
    (err,) = by_rule(findings, "speculators-wheel")
    assert err.key == dropped
    assert f"{dropped} (True in the head, not in the drafter config)" in err.message
    assert "norm_output (True in the head, not in the drafter config)" in err.message
    assert says in err.message


def test_a_wheel_that_refuses_a_qwen3_layer_says_why(
    monkeypatch: pytest.MonkeyPatch, target: Path, tmp_path: Path
) -> None:
    wheel(monkeypatch)
    head = heads.write_head(tmp_path / "h", heads.speculators_head(layer_type="qwen3"))
    findings = vi.preflight(target, head)
    assert sorted(problems(findings)) == [
        (vi.ERROR, "drafter-class"),
        (vi.ERROR, "speculative-config"),
        (vi.ERROR, "speculators-format"),
    ]
    (spec,) = by_rule(findings, "speculative-config")
    assert "Unsupported model_type qwen3 for Eagle3 speculator" in spec.message


def test_plain_heads_are_not_asked_about_the_converter(
    monkeypatch: pytest.MonkeyPatch, target: Path, tmp_path: Path
) -> None:
    fake_vllm(monkeypatch)
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    assert by_rule(findings, "speculators-wheel") == []
    assert by_rule(findings, "speculators") == []


def test_the_fixture_head_is_the_library_default_recipe() -> None:
    cfg = fixture.speculators_eagle3_config()
    assert (cfg["norm_before_fc"], cfg["norm_output"], cfg["fc_norm"]) == (True, True, False)
