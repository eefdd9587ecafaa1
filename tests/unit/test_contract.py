"""Contract discovery on small synthetic sources, and the probe's verdicts
on plain classes (the import-based check on real vLLM is in
tests/integration/test_contract_real.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Protocol

import pytest
from vpq.contract import items as contract_items
from vpq.contract import probe as contract_probe
from vpq.contract import table as contract_table
from vpq.contract import target as contract_target
from vpq.envs import venv
from vpq.envs.contract_run import first_time_plan

RUNNER = textwrap.dedent(
    """
    class GPUModelRunner:
        def load_model(self):
            self.model.unrelated_call()
            if self.use_aux_hidden_state_outputs:
                if not supports_eagle3(self.get_model()):
                    raise RuntimeError("no")
                layers = self.model.get_eagle3_aux_hidden_state_layers()
                self.model.set_aux_hidden_state_layers(layers)
                self.model.brand_new_hook(layers)
    """
)
PROPOSER = textwrap.dedent(
    """
    class EagleProposer:
        def load_model(self, target_model):
            if supports_multimodal(target_model):
                if self.get_model_name(target_model) in ["A", "B"]:
                    self.model.config.image_token_index = target_model.config.image_token_id
                elif self.get_model_name(target_model) == "Kimi":
                    self.model.config.image_token_index = (
                        target_model.config.media_placeholder_token_id)
                else:
                    self.model.config.image_token_index = (
                        target_model.config.vision_config.image_token_id)
                lm = cast(SupportsMultiModal, target_model).get_language_model()
    """
)


def _source(proposer: str):
    """A reader of a tree whose proposer module is ``proposer``."""
    return {contract_items.PROPOSER: proposer}.__getitem__


def test_runner_discovery_finds_the_interface_check_and_every_model_call_on_the_eagle3_path() -> (
    None
):
    items = contract_target.discover_runner(RUNNER)
    assert [(i.kind, i.name) for i in items] == [
        ("interface", "supports_eagle3"),
        ("method", "get_eagle3_aux_hidden_state_layers"),
        ("method", "set_aux_hidden_state_layers"),
        ("method", "brand_new_hook"),  # new calls are found, not listed by hand
    ]


def test_proposer_discovery_records_the_branch_that_leads_to_each_config_read() -> None:
    items = {i.name: i for i in contract_target.discover_proposer(_source(PROPOSER))}
    assert set(items) == {
        "image_token_id",
        "media_placeholder_token_id",
        "vision_config.image_token_id",
        "get_language_model",
    }
    kimi = items["media_placeholder_token_id"].guards
    assert kimi[0] == {"kind": "interface", "name": "supports_multimodal", "expect": True}
    assert kimi[1] == {"kind": "arch_in", "names": ["A", "B"], "expect": False}
    assert kimi[2] == {"kind": "arch_in", "names": ["Kimi"], "expect": True}
    assert items["vision_config.image_token_id"].guards[2] == {
        "kind": "arch_in",
        "names": ["Kimi"],
        "expect": False,
    }
    assert items["get_language_model"].kind == "method"


def test_proposer_discovery_follows_load_model_into_the_base_class_module() -> None:
    """0.20.0 moved ``load_model`` from eagle.py into ``SpecDecodeBaseProposer``
    in llm_base_proposer.py; the reads are found there, and named so."""
    eagle = textwrap.dedent(
        """
        from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

        class EagleProposer(SpecDecodeBaseProposer):
            pass
        """
    )
    base = "vllm/v1/spec_decode/llm_base_proposer.py"
    sources = {base: PROPOSER.replace("class EagleProposer:", "class SpecDecodeBaseProposer:")}
    sources[contract_items.PROPOSER] = eagle
    items = contract_target.discover_proposer(sources.__getitem__)
    assert {i.name for i in items} == {
        i.name for i in contract_target.discover_proposer(_source(PROPOSER))
    }
    assert {i.where.split(":")[0] for i in items} == {base}


def test_guards_pick_the_branch_for_each_architecture() -> None:
    items = {i.name: i for i in contract_target.discover_proposer(_source(PROPOSER))}
    Kimi = type("Kimi", (), {})
    A = type("A", (), {})
    g = items["media_placeholder_token_id"].guards
    assert contract_probe.guard_holds(g[2], Kimi) is True
    assert contract_probe.guard_holds(g[2], A) is False
    assert contract_probe.guard_holds(g[1], A) is False  # A takes the first branch
    assert contract_probe.guard_holds({"kind": "unknown", "text": "x", "expect": True}, A) is None


class _Proto(Protocol):
    def set_layers(self, layers: tuple[int, ...]) -> None:
        """Set them."""
        ...


class _OnlyInheritsTheProtocol(_Proto):
    pass


class _Implements(_Proto):
    def set_layers(self, layers: tuple[int, ...]) -> None:
        self.layers = layers


def test_a_protocol_method_inherited_without_implementation_is_a_stub() -> None:
    item = {"kind": "method", "name": "set_layers", "guards": []}
    assert contract_probe.verdict(item, _OnlyInheritsTheProtocol, {}) == "stub"
    assert contract_probe.verdict(item, _Implements, {}) == "ok"
    assert contract_probe.verdict(item, type("Bare", (), {}), {}) == "missing"


def test_table_reports_the_worst_verdict_and_lists_gaps() -> None:
    t = contract_table.Table(
        rows={
            "model.x()": {a: "ok" for a in contract_items.CLAIMS}
            | {"DeepseekV2ForCausalLM": "stub"}
        },
        where={"model.x()": "f.py:1"},
    )
    assert t.gaps == [("model.x()", "DeepseekV2ForCausalLM", "stub")]
    assert "stub" in t.render() and "f.py:1" in t.render()


SPECULATIVE = textwrap.dedent(
    """
    class SpeculativeConfig:
        def _verify_args(self):
            other = ["not", "this"]
            eagle3_target_supported = ["llama", "qwen"]
            if self.method == "eagle3" and not any(
                m in self.target_model_config.hf_text_config.model_type
                for m in eagle3_target_supported
            ):
                raise ValueError("no")
    """
)


def test_gate_discovery_finds_the_allowlist_the_eagle3_check_uses() -> None:
    (gate,) = contract_target.discover_gate(SPECULATIVE)
    assert (gate.kind, gate.name, gate.values) == (
        "gate",
        "eagle3_target_supported",
        ["llama", "qwen"],
    )
    assert contract_probe.verdict(gate.__dict__, object, {"text_model_type": "qwen3"}) == "ok"
    assert (
        contract_probe.verdict(gate.__dict__, object, {"text_model_type": "deepseek_v3"})
        == "missing"
    )


def test_holds_for_needs_an_ok_cell_owned_by_each_file() -> None:
    t = contract_table.Table(
        rows={"a": {"X": "ok"}, "b": {"X": "missing"}},
        where={"a": "f:1", "b": "g:1"},
        files={("a", "X"): {"f.py"}, ("b", "X"): {"g.py"}},
    )
    assert t.holds_for(["f.py"]) and not t.holds_for(["g.py"]) and not t.holds_for(["h.py"])
    assert not t.holds_for(["f.py", "g.py"])


RUNNER_GUARD_CLAUSE = textwrap.dedent(
    """
    class GPUModelRunner:
        def _setup_eagle3_aux_hidden_state_outputs(self):
            if not self.use_aux_hidden_state_outputs:
                return
            if not supports_eagle3(self.get_model()):
                raise RuntimeError("no")
            layers = self.model.get_eagle3_default_aux_hidden_state_layers()
            self.model.set_aux_hidden_state_layers(layers)

        def load_model(self):
            self.model.unrelated_call()
            self._setup_eagle3_aux_hidden_state_outputs()
    """
)
RUNNER_V2 = textwrap.dedent(
    """
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

    class GPUModelRunner:
        def load_model(self):
            if self.use_aux_hidden_state_outputs:
                set_eagle3_aux_hidden_state_layers(self.model, self.speculative_config)
    """
)
HELPER = textwrap.dedent(
    """
    def set_eagle3_aux_hidden_state_layers(model, spec_config):
        if not supports_eagle3(model):
            raise RuntimeError("no")
        eagle3_model = cast(SupportsEagle3, model)
        eagle3_model.set_aux_hidden_state_layers(eagle3_model.get_eagle3_default_aux_hidden_state_layers())
    """
)


def test_runner_discovery_follows_a_guard_clause_in_a_helper_method() -> None:
    items = contract_target.discover_runner(RUNNER_GUARD_CLAUSE)
    assert [(i.kind, i.name, i.where) for i in items] == [
        ("interface", "supports_eagle3", f"{contract_items.RUNNER}:6"),
        ("method", "get_eagle3_default_aux_hidden_state_layers", f"{contract_items.RUNNER}:8"),
        ("method", "set_aux_hidden_state_layers", f"{contract_items.RUNNER}:9"),
    ]


def test_runner_discovery_follows_the_model_into_a_helper_module() -> None:
    helper = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    items = contract_target.discover_runner(
        RUNNER_V2, contract_items.RUNNER_V2, {helper: HELPER}.__getitem__
    )
    assert [(i.kind, i.name, i.where) for i in items] == [
        ("interface", "supports_eagle3", f"{helper}:3"),
        ("method", "set_aux_hidden_state_layers", f"{helper}:6"),
        ("method", "get_eagle3_default_aux_hidden_state_layers", f"{helper}:6"),
    ]


def test_a_runner_whose_eagle3_path_is_lost_names_the_functions_to_look_at() -> None:
    lost = RUNNER_V2.replace(
        "set_eagle3_aux_hidden_state_layers(self.model,", "set_eagle3_aux_hidden_state_layers(None,"
    )
    with pytest.raises(contract_items.ContractError) as err:
        contract_target.discover_runner(lost, contract_items.RUNNER_V2, {}.__getitem__)
    assert f"Discovery lost the path in load_model ({contract_items.RUNNER_V2}:5)" in str(err.value)


def test_an_opt_in_runner_without_an_eagle3_path_adds_nothing() -> None:
    """0.16.0's opt-in runner sets no EAGLE-3 layers at all: not an error there."""
    quiet = RUNNER_V2.replace("set_eagle3_aux_hidden_state_layers(self.model,", "print(")
    assert (
        contract_target.discover_runner(
            quiet, contract_items.RUNNER_V2, {}.__getitem__, required=False
        )
        == []
    )


def test_both_sides_follow_the_proposer_s_class_chain_however_deep() -> None:
    """The target side reads ``load_model`` along the same class chain the
    drafter side scans (``items.proposer_classes``): two levels of bases,
    each in its own module, are followed to the one that defines it."""
    chain = {
        contract_items.PROPOSER: textwrap.dedent(
            """
            from vllm.v1.spec_decode.mid import MidProposer

            class EagleProposer(MidProposer):
                pass
            """
        ),
        "vllm/v1/spec_decode/mid.py": textwrap.dedent(
            """
            from vllm.v1.spec_decode.base import BaseProposer

            class MidProposer(BaseProposer):
                pass
            """
        ),
        "vllm/v1/spec_decode/base.py": PROPOSER.replace(
            "class EagleProposer:", "class BaseProposer:"
        ),
    }
    classes = contract_items.proposer_classes(chain.__getitem__)
    assert [c.name for _, c, _ in classes] == ["EagleProposer", "MidProposer", "BaseProposer"]
    items = contract_target.discover_proposer(chain.__getitem__)
    assert {i.file for i in items} == {"vllm/v1/spec_decode/base.py"}
    assert {i.name for i in items} == {
        i.name for i in contract_target.discover_proposer(_source(PROPOSER))
    }


def test_the_contract_reads_kimi_s_config_with_the_tiny_checkpoint_s_top_level_keys() -> None:
    """The probe makes Kimi-K2.5's config with ``Claim.checkpoint``, the
    top-level keys the tiny checkpoint writes (the contract imports no test
    checkpoints; this holds the two equal)."""
    from vpq.checkpoints import fixture

    kimi = contract_items.CLAIMS["KimiK25ForConditionalGeneration"]
    assert dict(kimi.checkpoint) == fixture.KIMI_K25_TOP_LEVEL


def test_a_first_contract_check_says_which_slow_steps_are_still_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vpq build`` says it before the check (contract_run.first_time_plan):
    the CPU deps venv only when it is not cached, the wheel's venv only when
    that is not, with the installer that will make it."""
    monkeypatch.setenv("VPQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VPQ_INSTALLER", "pip")
    common, sha = b"numpy\n", "ab" * 32
    head = "contract check, first time for this wheel: "
    assert first_time_plan(common, sha) == head + (
        "make the CPU venv of torch and vLLM's requirements (once a release), "
        "then install the wheel into a venv (pip), then import it on CPU"
    )
    for name in (f"deps-{venv.deps_key(common)}", f"wheel-{sha[:12]}"):
        (venv.envs_dir() / name).mkdir()
        (venv.envs_dir() / name / ".complete").write_text("ok\n")
        if name.startswith("deps"):
            assert first_time_plan(common, sha) == head + (
                "install the wheel into a venv (pip), then import it on CPU"
            )
    assert first_time_plan(common, sha) == head + "import it on CPU"
