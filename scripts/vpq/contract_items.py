"""The EAGLE-3 contract's vocabulary, shared one way by the target side
(``vpq.contract``) and the drafter side (``vpq.contract_drafter``): the
vLLM files it reads, the claimed architectures, an ``Item`` and its error.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from vpq.errors import VpqError

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
#: The opt-in model runner (``VLLM_USE_V2_MODEL_RUNNER``), where it exists.
RUNNER_V2 = "vllm/v1/worker/gpu/model_runner.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
SPECULATIVE = "vllm/config/speculative.py"
REGISTRY = "vllm/model_executor/models/registry.py"

#: The architectures the series claims, and the HF model_type whose config
#: class each one reads (for ``target_model.config.<attr>`` items).
CLAIMED = {
    "KimiK25ForConditionalGeneration": "kimi_k25",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
}
#: The ``hf_text_config.model_type`` each one presents to the speculative
#: config gate (Kimi-K2.5's text model is DeepSeek-V3).
TEXT_MODEL_TYPES = {
    "KimiK25ForConditionalGeneration": "deepseek_v3",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
}


class ContractError(VpqError):
    """The contract does not hold, or could not be checked."""


@dataclass(frozen=True)
class Item:
    """One thing vLLM uses on the target model (``side="target"``) or on
    the EAGLE-3 head (``side="drafter"``, see ``vpq.contract_drafter``)."""

    #: target: "interface" | "method" | "config_attr" | "gate";
    #: drafter: "drafter_type" | "drafter_method" | "drafter_config_attr" | "drafter_registry"
    kind: str
    name: (
        str  # e.g. "supports_eagle3", "set_aux_hidden_state_layers", "vision_config.image_token_id"
    )
    where: str  # "vllm/...py:LINE"
    guards: list[dict[str, object]] = field(default_factory=list)
    #: a gate's allowlist, a type check's qualified classes, the registry's EAGLE-3 heads
    values: list[str] = field(default_factory=list)
    side: str = "target"
    #: the proposer copes without it (it tests ``hasattr`` or reads with a default)
    optional: bool = False

    @property
    def label(self) -> str:
        """The row label, e.g. ``model.set_aux_hidden_state_layers()``."""
        opt = " (optional)" if self.optional else ""
        classes = " | ".join(v.rsplit(".", 1)[-1] for v in self.values)
        return {
            "interface": f"{self.name}(model)",
            "method": f"model.{self.name}()",
            "config_attr": f"config.{self.name}",
            "gate": f"speculative gate: {self.name}",
            "drafter_type": f"isinstance(drafter, {classes})",
            "drafter_method": f"drafter.{self.name}(){opt}",
            "drafter_config_attr": f"drafter config.{self.name}{opt}",
            "drafter_registry": "speculative registry: EAGLE-3 head",
        }[self.kind]

    @property
    def file(self) -> str:
        """The source file of ``where`` (``vllm/...py``)."""
        return self.where.rsplit(":", 1)[0]


def imported_functions(tree: ast.Module) -> dict[str, str]:
    """Name -> module for ``from vllm.x import name`` at module level."""
    return {
        a.asname or a.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vllm.")
        for a in node.names
    }
