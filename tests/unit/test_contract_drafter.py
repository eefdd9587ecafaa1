"""The drafter side of the EAGLE-3 contract on small synthetic sources, and
the probe's drafter verdicts on plain classes (the check on real vLLM is in
tests/integration/test_contract_real.py)."""

from __future__ import annotations

import textwrap
from collections import OrderedDict

import pytest
from vpq.contract import drafter as contract_drafter
from vpq.contract import items as contract_items
from vpq.contract import probe as contract_probe
from vpq.contract import table as contract_table

EAGLE = textwrap.dedent(
    """
    from vllm.v1.spec_decode.base_proposer import BaseProposer


    class EagleProposer(BaseProposer):
        def load_model(self, target_model):
            if self.parallel_drafting:
                self.model.combine_hidden_states(self.mask)
    """
)
BASE = textwrap.dedent(
    """
    from vllm.compilation.wrapper import GraphWrapper
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
    from vllm.model_executor.models.deepseek_eagle3 import Eagle3DeepseekV2ForCausalLM


    class BaseProposer:
        def _greedy(self, h):
            if self.use_local_argmax:
                return self.model.get_top_tokens(h)
            return self.model.compute_logits(h).argmax(-1)

        def propose(self, h):
            if self.method in ("eagle3", "dflash"):
                model = self.model
                if isinstance(model, GraphWrapper):
                    model = model.unwrap()
                assert isinstance(model, (Eagle3LlamaForCausalLM, Eagle3DeepseekV2ForCausalLM))
                h = self.model.combine_hidden_states(h)
            if self.method == "mtp":
                self.model.mtp_only_hook()
            return self.model(input_ids=None, hidden_states=h)

        def check(self):
            if not hasattr(self.model, "get_top_tokens"):
                raise ValueError("no")
            cfg = self.draft_model_config.hf_config
            self.token = cfg.needed_token_id
            self.model.config.image_token_index = 3  # a write, not a read

        def _use_aux(self):
            if self.method != "eagle3":
                return False
            eagle_config = getattr(self.draft_model_config.hf_config, "eagle_config", None)
            self.model.brand_new_hook()
            return eagle_config
    """
)
SOURCES = {
    contract_items.PROPOSER: EAGLE,
    "vllm/v1/spec_decode/base_proposer.py": BASE,
}
REGISTRY = textwrap.dedent(
    """
    _TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}
    _SPECULATIVE_DECODING_MODELS = {
        "EagleLlamaForCausalLM": ("llama_eagle", "EagleLlamaForCausalLM"),
        "Eagle3LlamaForCausalLM": ("llama_eagle3", "Eagle3LlamaForCausalLM"),
        "LlamaForCausalLMEagle3": ("llama_eagle3", "Eagle3LlamaForCausalLM"),
        "DeepSeekMTPModel": ("deepseek_mtp", "DeepSeekMTP"),
    }
    """
)
M = "vllm.model_executor.models."


def _by_label() -> dict[str, contract_items.Item]:
    items = contract_drafter.discover_proposer(SOURCES.__getitem__)
    out: dict[str, contract_items.Item] = {}
    for i in items:
        out.setdefault(i.label, i)
    return out


def _method_guards(item: contract_items.Item) -> list[tuple[object, object]]:
    return [(g["names"], g["expect"]) for g in item.guards if g["kind"] == "method_in"]


def test_drafter_discovery_follows_the_proposer_into_its_base_class_module() -> None:
    items = contract_drafter.discover_proposer(SOURCES.__getitem__)
    assert {i.file for i in items} == {
        "vllm/v1/spec_decode/base_proposer.py",
        contract_items.PROPOSER,
    }
    assert all(i.side == "drafter" for i in items)


def test_drafter_discovery_finds_the_type_check_calls_and_config_reads() -> None:
    items = _by_label()
    (check,) = [i for i in items.values() if i.kind == "drafter_type"]
    assert check.values == [
        M + "llama_eagle3.Eagle3LlamaForCausalLM",
        M + "deepseek_eagle3.Eagle3DeepseekV2ForCausalLM",
    ]  # the wrapper class is not a model class: no type item for it
    assert _method_guards(check) == [(["eagle3", "dflash"], True)]
    methods = {i.name for i in items.values() if i.kind == "drafter_method"}
    # new calls are found, not listed by hand; forward is the call of the model itself
    assert methods == {
        "get_top_tokens",
        "compute_logits",
        "unwrap",
        "combine_hidden_states",
        "mtp_only_hook",
        "forward",
        "brand_new_hook",
    }
    configs = {i.name: i for i in items.values() if i.kind == "drafter_config_attr"}
    assert set(configs) == {"needed_token_id", "eagle_config"}  # image_token_index is a write
    assert not configs["needed_token_id"].optional and configs["eagle_config"].optional


def test_drafter_discovery_records_the_branches_and_the_optional_names() -> None:
    items = _by_label()
    assert items["drafter.get_top_tokens() (optional)"].optional  # hasattr-checked
    assert not items["drafter.compute_logits()"].optional
    assert _method_guards(items["drafter.mtp_only_hook()"]) == [(["mtp"], True)]
    # a guard clause ``if self.method != "eagle3": return`` guards what follows
    assert _method_guards(items["drafter.brand_new_hook()"]) == [(["eagle3"], True)]
    unwrap = items["drafter.unwrap()"].guards
    assert {"kind": "drafter_isinstance", "names": ["vllm.compilation.wrapper.GraphWrapper"],
            "expect": True} in unwrap  # fmt: skip


def test_registry_discovery_lists_the_eagle3_heads() -> None:
    (item,) = contract_drafter.discover_registry(REGISTRY)
    assert item.kind == "drafter_registry"
    assert item.values == ["Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3"]
    assert item.where == f"{contract_items.REGISTRY}:5"


def test_a_registry_without_eagle3_heads_is_one_clear_error() -> None:
    with pytest.raises(contract_items.ContractError) as err:
        contract_drafter.discover_registry(REGISTRY.replace("Eagle3", "Eagle4"))
    assert str(err.value).startswith(f"{contract_items.REGISTRY}: found no EAGLE-3 head")


def test_a_proposer_that_moved_names_the_file_where_discovery_lost_it() -> None:
    moved = {contract_items.PROPOSER: EAGLE.replace("class EagleProposer", "class EagleDrafter")}
    with pytest.raises(contract_items.ContractError) as err:
        contract_drafter.discover_proposer(moved.__getitem__)
    assert f"{contract_items.PROPOSER}: no class EagleProposer" in str(err.value)


def test_a_proposer_without_drafter_calls_names_the_classes_scanned() -> None:
    quiet = {
        contract_items.PROPOSER: EAGLE.replace("self.model.", "self.other."),
        "vllm/v1/spec_decode/base_proposer.py": BASE.replace("self.model", "self.other"),
    }
    with pytest.raises(contract_items.ContractError) as err:
        contract_drafter.discover_proposer(quiet.__getitem__)
    message = str(err.value)
    assert "found no call on the draft model" in message
    assert "EagleProposer (vllm/v1/spec_decode/eagle.py:5)" in message
    assert "BaseProposer (vllm/v1/spec_decode/base_proposer.py:7)" in message


class _Head(OrderedDict):  # stands in for a registered head class
    def combine_hidden_states(self, h):  # type: ignore[no-untyped-def]
        return h


def test_drafter_verdicts_on_a_head_class() -> None:
    info = {"model_type": "llama"}
    typed = {"kind": "drafter_type", "name": "isinstance", "guards": [],
             "values": ["collections.OrderedDict"]}  # fmt: skip
    assert contract_probe.drafter_verdict(typed, _Head, "H", info) == "ok"
    assert contract_probe.drafter_verdict(typed, dict, "H", info) == "missing"
    call = {"kind": "drafter_method", "name": "combine_hidden_states", "guards": []}
    assert contract_probe.drafter_verdict(call, _Head, "H", info) == "ok"
    assert contract_probe.drafter_verdict(call, dict, "H", info) == "missing"
    optional = {**call, "name": "get_top_tokens", "optional": True}
    assert contract_probe.drafter_verdict(optional, _Head, "H", info) == "n/a"
    mtp = {**call, "name": "mtp_only", "guards": [
        {"kind": "method_in", "names": ["mtp"], "expect": True}]}  # fmt: skip
    assert contract_probe.drafter_verdict(mtp, _Head, "H", info) == "n/a"


def test_an_unregistered_head_is_missing_from_the_registry_and_unchecked_elsewhere() -> None:
    registry = {"kind": "drafter_registry", "name": "eagle3_heads", "guards": [],
                "values": ["H"]}  # fmt: skip
    assert contract_probe.drafter_verdict(registry, _Head, "H", {}) == "ok"
    assert contract_probe.drafter_verdict(registry, None, "H", {}) == "missing"
    assert contract_probe.drafter_verdict(registry, _Head, "Other", {}) == "missing"
    call = {"kind": "drafter_method", "name": "combine_hidden_states", "guards": []}
    assert contract_probe.drafter_verdict(call, None, "H", {}) == "n/a"


def test_table_renders_the_drafter_rows_under_their_own_heads() -> None:
    heads = list(contract_items.DRAFTERS)
    t = contract_table.from_results(
        [
            contract_items.Item("method", "x", "r.py:1"),
            contract_items.Item(
                "drafter_method", "combine_hidden_states", "p.py:2", side="drafter"
            ),
            contract_items.Item("drafter_registry", "eagle3_heads", "g.py:3", side="drafter"),
        ],
        [
            {a: "ok" for a in contract_items.CLAIMS},
            {h: "ok" for h in heads[:2]} | {h: "n/a" for h in heads[2:]},
            {h: "ok" for h in heads[:2]} | {h: "missing" for h in heads[2:]},
        ],
        {heads[0]: "vllm/model_executor/models/llama_eagle3.py"},
    )
    text = t.render()
    assert "drafter item" in text and "Eagle3DeepseekV2" in text and "KimiK25" in text
    target, drafter = text.split("\n\n")
    assert "Eagle3Llama" not in target and "KimiK25" not in drafter
    assert t.gaps == [("speculative registry: EAGLE-3 head", h, "missing") for h in heads[2:]]
    # the head's module owns its calls, the registry its entry
    assert t.files[("drafter.combine_hidden_states()", heads[0])] == {
        "vllm/model_executor/models/llama_eagle3.py"
    }
    assert t.holds_for([contract_items.REGISTRY]) is False
    # a rebase leaves out the heads the series did not serve before
    assert t.without(set(heads[2:])).gaps == []
    again = contract_table.Table.from_json(t.to_json())
    assert again.rows == t.rows and again.files == t.files
