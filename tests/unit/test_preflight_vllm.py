"""The preflight's questions to the installed vLLM, against a stand-in vLLM.

The real wheels are asked in tests/integration/test_preflight_installed.py;
there the answers depend on what the series carries. Here a small stand-in
(registry, ``SpeculativeConfig``, the runner's id reader) answers both ways,
so every wheel rule has a passing and a failing test whatever the wheel.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import verify_install as vi

from tests.support import heads
from tests.unit.fake_vllm import fake_vllm


def wheel_findings(target: Path, head: Path) -> dict[str, tuple[str, str]]:
    findings = vi.preflight(target, head)
    return {f.rule: (f.severity, f.message) for f in findings if f.section == "vllm"}


def test_a_wheel_that_serves_the_pair_says_so(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch)
    got = wheel_findings(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    assert {r: s for r, (s, _) in got.items()} == {
        "vllm": "info",
        "target-eagle3": "info",
        "speculative-config": "info",
        "drafter-class": "info",
        "layer-ids-wheel": "info",
        "drafter-max-len": "info",
    }
    assert (
        got["layer-ids-wheel"][1] == "this wheel will use ids [1, 4, 6] (from the drafter config)"
    )
    assert got["drafter-max-len"][1] == (
        "drafter max length 2048: drafting runs up to the target's max model length 2048"
    )


def test_whether_vllm_was_asked_is_data_not_a_message(monkeypatch, target, tmp_path) -> None:
    """``Report.vllm_asked`` says whether the installed vLLM answered; the
    summary's ``OK`` (not ``OK (file rules only ...)``) reads it, never a
    finding's text: rewording the version line changes nothing."""
    head = heads.write_head(tmp_path / "h", heads.llama_top_level())
    file_rules_only = vi.preflight_report(target, head, use_vllm=False)
    assert not file_rules_only.vllm_asked
    assert vi.render(file_rules_only, target, head, strict=False).endswith(
        ": OK (file rules only: vLLM not asked)"
    )
    fake_vllm(monkeypatch)
    report = vi.preflight_report(target, head)
    assert report.vllm_asked and vi.exit_code(report.findings) == 0
    reworded = [
        dataclasses.replace(f, message=f"installed: {f.message}") if f.rule == "vllm" else f
        for f in report.findings
    ]
    for r in (report, vi.Report(reworded, vllm_asked=True)):
        assert vi.render(r, target, head, strict=False).endswith(": OK")
        assert json.loads(vi.to_json(r, target, head, strict=False))["verdict"] == "OK"


def head_of_length(n: int) -> heads.Head:
    """The top-level-ids Llama head with ``max_position_embeddings`` ``n``."""
    cfg, tensors = heads.llama_top_level()
    return cfg | {"max_position_embeddings": n}, tensors


def test_a_head_shorter_than_the_target_warns_where_drafting_stops(
    monkeypatch, target, tmp_path
) -> None:
    """0.17.1 drafts for a batch only while its longest sequence plus
    ``num_speculative_tokens`` fits in the drafter's max length (the head's,
    capped at the target's): a head with a short ``max_position_embeddings``
    turns speculation off for long batches. The warning names that length."""
    fake_vllm(monkeypatch, target_len=262144)
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", head_of_length(4096)))
    (f,) = [f for f in findings if f.rule == "drafter-max-len"]
    assert (f.severity, f.key) == ("warning", "max_position_embeddings")
    assert f.message.startswith(
        "drafting stops at 4096 tokens: the drafter's max length 4096 "
        "(max_position_embeddings 4096) is below the target's max model length 262144."
    ), f.message
    assert "--max-model-len 4096" in f.message
    assert vi.exit_code(findings) == 0 and vi.exit_code(findings, strict=True) == 1


def test_a_head_as_long_as_the_target_drafts_to_the_end(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch, target_len=4096)
    got = wheel_findings(target, heads.write_head(tmp_path / "h", head_of_length(8192)))
    assert got["drafter-max-len"] == (
        "info",
        "drafter max length 4096: drafting runs up to the target's max model length 4096",
    )


def test_a_drafter_length_that_cannot_be_read_is_a_note(monkeypatch, target, tmp_path) -> None:
    """A release whose ``SpeculativeConfig`` keeps the lengths elsewhere: a
    note, not a false warning."""
    fake_vllm(monkeypatch)
    spec_cls = sys.modules["vllm.config"].SpeculativeConfig  # type: ignore[attr-defined]
    real_init = spec_cls.__init__

    def without_target(self, **kw: object) -> None:  # type: ignore[no-untyped-def]
        real_init(self, **kw)
        del self.target_model_config

    monkeypatch.setattr(spec_cls, "__init__", without_target)
    got = wheel_findings(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    severity, message = got["drafter-max-len"]
    assert severity == "note" and message.startswith(
        "could not ask the SpeculativeConfig for the drafter's max length: "
    ), message


def test_target_without_eagle3_support_is_an_error(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch, target_eagle3=False)
    got = wheel_findings(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    assert got["target-eagle3"][0] == "error"
    assert "does not implement SupportsEagle3" in got["target-eagle3"][1]


def test_a_refused_pair_gives_the_wheels_reason(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch, refuse="eagle3 is only supported for ['llama']\nsecond line")
    head = heads.write_head(tmp_path / "h", heads.mla_deepseek_v2())
    got = wheel_findings(target, head)
    assert got["speculative-config"] == (
        "error",
        "this wheel refuses the pair in SpeculativeConfig(method=eagle3): "
        "ValueError: eagle3 is only supported for ['llama']",
    )
    assert got["drafter-class"] == (
        "error",
        "Eagle3DeepseekV2ForCausalLM -> "
        "Eagle3DeepseekV2ForCausalLM: not in this wheel's model registry",
    )
    assert "layer-ids-wheel" not in got


def test_a_registered_mla_head_resolves(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch, registered=("Eagle3DeepseekV2ForCausalLM",))
    got = wheel_findings(target, heads.write_head(tmp_path / "h", heads.mla_kimi_k2()))
    assert got["drafter-class"][0] == "info" and got["drafter-class"][1].startswith(
        "Eagle3DeepseekV2ForCausalLM -> Eagle3DeepseekV2ForCausalLM -> "
    )


@pytest.mark.parametrize("reads_nested", [False, True])
def test_nested_ids_are_checked_against_what_the_runner_reads(
    monkeypatch, target, tmp_path, reads_nested
) -> None:
    fake_vllm(monkeypatch, reads_nested=reads_nested)
    head = heads.write_head(tmp_path / "h", heads.llama_nested_ids())
    sev, msg = wheel_findings(target, head)["layer-ids-wheel"]
    if reads_nested:
        assert (sev, msg) == ("info", "this wheel will use ids [1, 4, 6] (from the drafter config)")
    else:
        assert (sev, msg) == (
            "error",
            "this wheel will use ids [2, 4, 5] (the target's default), "
            "not the [1, 4, 6] the drafter declares in "
            "eagle_config.eagle_aux_hidden_state_layer_ids",
        )


@pytest.mark.parametrize("rewrites", [True, False])
def test_the_mtp_trap_follows_the_wheels_override(monkeypatch, target, tmp_path, rewrites) -> None:
    fake_vllm(
        monkeypatch, rewrites_deepseek_v3=rewrites, registered=("Eagle3DeepseekV2ForCausalLM",)
    )
    cfg, tensors = heads.mla_deepseek_v2()
    cfg["model_type"] = "deepseek_v3"
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    (trap,) = [f for f in findings if f.rule == "mtp-trap"]
    if rewrites:
        assert trap.severity == "error" and trap.message.endswith(
            "confirmed: this wheel rewrites it to deepseek_mtp ['DeepSeekMTPModel']"
        )
    else:
        assert trap.severity == "info" and "NOT rewritten" in trap.message
        assert vi.exit_code(findings) == 0


def test_out_of_range_ids_give_the_wheels_refusal_not_ids_in_use(
    monkeypatch, target, tmp_path
) -> None:
    """Ids [1, 4, 12] on an 8-layer target: the runner reads them, the
    target's text model refuses them; the preflight must not show them as used."""
    fake_vllm(monkeypatch)
    cfg, tensors = heads.llama_top_level()
    cfg["eagle_aux_hidden_state_layer_ids"] = [1, 4, 12]
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    (ids,) = [f for f in findings if f.rule == "layer-ids-wheel"]
    assert ids.severity == "error"
    assert ids.message == (
        "this wheel's runner reads ids [1, 4, 12] (from the drafter config) and its target "
        "model refuses them at load: ValueError: EAGLE-3 aux hidden state layer ids [12] "
        "are out of range"
    )
    assert "will use" not in ids.message


def test_a_target_model_that_cannot_be_asked_is_a_note(monkeypatch, target, tmp_path) -> None:
    fake_vllm(monkeypatch, text_model=False)
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    got = [(f.severity, f.message) for f in findings if f.rule == "layer-ids-wheel"]
    assert got == [
        (
            "note",
            "could not ask the target model whether it takes ids [1, 4, 6]: "
            "LookupError: DeepseekV3ForCausalLM has no set_aux_hidden_state_layers in this wheel",
        ),
        ("info", "this wheel will use ids [1, 4, 6] (from the drafter config)"),
    ]


def test_a_text_config_without_architectures_is_asked_by_its_model_type(
    monkeypatch, target, tmp_path
) -> None:
    """Kimi-K2.5's ``text_config`` need not name its architecture: the ids
    check asks ``DeepseekV3ForCausalLM``, from ``model_type: deepseek_v3``."""
    fake_vllm(monkeypatch)
    cfg = json.loads((target / "config.json").read_text())
    del cfg["text_config"]["architectures"]
    bare = tmp_path / "target"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps(cfg))
    head_cfg, tensors = heads.llama_top_level()
    head_cfg["eagle_aux_hidden_state_layer_ids"] = [1, 4, 12]
    findings = vi.preflight(bare, heads.write_head(tmp_path / "h", (head_cfg, tensors)))
    got = [(f.severity, f.message) for f in findings if f.rule == "layer-ids-wheel"]
    assert len(got) == 1 and got[0][0] == "error" and "refuses them at load" in got[0][1], got


def test_renamed_private_vllm_apis_are_notes_not_false_errors(
    monkeypatch, target, tmp_path
) -> None:
    """A release that renames ``_try_load_model_cls`` or the runner's id
    reader leaves those questions unanswered: a note each, never an error
    saying the registry has no class."""
    fake_vllm(monkeypatch, private_apis=False)
    findings = vi.preflight(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    got = {f.rule: (f.severity, f.message) for f in findings if f.section == "vllm"}
    assert got["target-eagle3"] == (
        "note",
        "could not ask vLLM's registry for KimiK25ForConditionalGeneration's class: "
        "AttributeError: 'Registry' object has no attribute '_try_load_model_cls'",
    )
    assert got["layer-ids-wheel"][0] == "note" and got["layer-ids-wheel"][1].startswith(
        "could not ask the model runner which ids it uses: AttributeError: "
    )
    assert got["speculative-config"][0] == got["drafter-class"][0] == "info"
    assert vi.exit_code(findings) == 0
