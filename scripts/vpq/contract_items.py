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

@dataclass(frozen=True)
class Claim:
    """One target architecture the series makes EAGLE-3 capable.

    ``model_type``: the HF model_type whose config class it reads (for
    ``target_model.config.<attr>`` items); ``text_model_type``: the
    ``hf_text_config.model_type`` it presents to the speculative config gate
    (Kimi-K2.5's text model is DeepSeek-V3); ``module``: the vLLM module
    that defines it, where the serving-host script imports it from.
    """

    model_type: str
    text_model_type: str
    module: str


#: The one table of claimed target architectures. ``CLAIMED``,
#: ``TEXT_MODEL_TYPES`` and ``build.CLAIMED_ARCHITECTURES`` (the manifest's
#: ``eagle3_architectures``) derive from it; scripts/verify_install.py, a
#: standard-library file for serving hosts, keeps a copy (``MODULES``,
#: ``TEXT_ARCHS``) that tests/unit/test_verify_install.py holds equal to it.
CLAIMS = {
    "KimiK25ForConditionalGeneration": Claim(
        "kimi_k25", "deepseek_v3", "vllm.model_executor.models.kimi_k25"
    ),
    "DeepseekV3ForCausalLM": Claim(
        "deepseek_v3", "deepseek_v3", "vllm.model_executor.models.deepseek_v2"
    ),
    "DeepseekV2ForCausalLM": Claim(
        "deepseek_v2", "deepseek_v2", "vllm.model_executor.models.deepseek_v2"
    ),
}
#: Each claimed architecture's HF model_type (``Claim.model_type``).
CLAIMED = {a: c.model_type for a, c in CLAIMS.items()}
#: Each claimed architecture's text model_type (``Claim.text_model_type``).
TEXT_MODEL_TYPES = {a: c.text_model_type for a, c in CLAIMS.items()}


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
