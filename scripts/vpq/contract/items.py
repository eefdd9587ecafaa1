"""The EAGLE-3 contract's vocabulary, shared one way by the target side
(``vpq.contract.target``), the drafter side (``vpq.contract.drafter``), the
table and the run: the vLLM files it reads, the claimed target and head
architectures (the one table of them: the build's manifest carries it to
scripts/verify_install.py), an ``Item`` and its error, and the ``ast``
helpers both sides use.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vpq.core.errors import VpqError

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
#: The opt-in model runner (``VLLM_USE_V2_MODEL_RUNNER``), where it exists.
RUNNER_V2 = "vllm/v1/worker/gpu/model_runner.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
SPECULATIVE = "vllm/config/speculative.py"
REGISTRY = "vllm/model_executor/models/registry.py"
#: The proposer class the runner builds for ``method="eagle3"``.
PROPOSER_CLASS = "EagleProposer"


@dataclass(frozen=True)
class Claim:
    """One target architecture the series makes EAGLE-3 capable.

    ``model_type``: the HF model_type whose config class it reads (for
    ``target_model.config.<attr>`` items); ``text_model_type``: the
    ``hf_text_config.model_type`` it presents to the speculative config gate
    (Kimi-K2.5's text model is DeepSeek-V3); ``module``: the vLLM module
    that defines it, where the serving-host script imports it from;
    ``checkpoint``: the top-level keys of its config.json beside the nested
    configs, which the config class needs to show what vLLM reads (the
    contract probe makes the config with them).
    """

    model_type: str
    text_model_type: str
    module: str
    checkpoint: Mapping[str, object] = field(default_factory=dict)

    def to_manifest(self) -> dict[str, str]:
        """What the wheel's manifest records for this claim
        (``eagle3_claims``; scripts/verify_install.py reads it)."""
        return {
            "model_type": self.model_type,
            "text_model_type": self.text_model_type,
            "module": self.module,
        }


#: The one table of claimed target architectures, in the order the contract
#: table shows them. The build writes it into each wheel's manifest
#: (``eagle3_architectures``, ``eagle3_claims``: ``manifest_claims``), and
#: scripts/verify_install.py reads it from the installed wheel; that file's
#: fallback copy (``FALLBACK_CLAIMS``) is held equal to this table by
#: tests/unit/test_verify_install.py.
CLAIMS = {
    "KimiK25ForConditionalGeneration": Claim(
        "kimi_k25",
        "deepseek_v3",
        "vllm.model_executor.models.kimi_k25",
        # the tiny checkpoint's ids (vpq.checkpoints.fixture.KIMI_K25_TOP_LEVEL,
        # held equal by a test)
        {
            "media_placeholder_token_id": 1000,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    "DeepseekV3ForCausalLM": Claim(
        "deepseek_v3", "deepseek_v3", "vllm.model_executor.models.deepseek_v2"
    ),
    "DeepseekV2ForCausalLM": Claim(
        "deepseek_v2", "deepseek_v2", "vllm.model_executor.models.deepseek_v2"
    ),
}
#: The EAGLE-3 head architectures the series claims, and the HF model_type
#: whose config class each one's ``config.json`` names (for config reads).
DRAFTERS = {
    "LlamaForCausalLMEagle3": "llama",
    "Eagle3LlamaForCausalLM": "llama",
    "Eagle3DeepseekV2ForCausalLM": "deepseek_v2",
    "Eagle3DeepseekV3ForCausalLM": "deepseek_v2",
}


def manifest_claims(claims: Mapping[str, Claim] | None = None) -> dict[str, object]:
    """The manifest's keys for ``claims`` (default ``CLAIMS``):
    ``eagle3_architectures`` (the names, as copies of verify_install.py
    from before ``eagle3_claims`` read them) and ``eagle3_claims`` (each
    name's ``Claim.to_manifest``)."""
    claims = CLAIMS if claims is None else claims
    return {
        "eagle3_architectures": list(claims),
        "eagle3_claims": {arch: c.to_manifest() for arch, c in claims.items()},
    }


class ContractError(VpqError):
    """The contract does not hold, or could not be checked."""


@dataclass(frozen=True)
class Item:
    """One thing vLLM uses on the target model (``side="target"``) or on
    the EAGLE-3 head (``side="drafter"``, see ``vpq.contract.drafter``)."""

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


def is_self_attr(node: ast.AST, *names: str) -> bool:
    """``self.<n0>.<n1>...``, e.g. ``is_self_attr(node, "model")`` for ``self.model``."""
    for name in reversed(names):
        if not (isinstance(node, ast.Attribute) and node.attr == name):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def is_self_model(node: ast.AST) -> bool:
    """The model a runner or proposer holds: ``self.model`` or ``self.get_model()``."""
    if isinstance(node, ast.Call):
        return is_self_attr(node.func, "get_model")
    return is_self_attr(node, "model")


def read_tree(read: Callable[[str], str], path: str) -> ast.Module | None:
    """``path`` parsed, or None where ``read`` cannot give it (a module a
    release does not have) or it does not parse."""
    try:
        return ast.parse(read(path))
    except (OSError, KeyError, SyntaxError, VpqError):
        return None


def proposer_classes(
    read: Callable[[str], str], path: str = PROPOSER, name: str = PROPOSER_CLASS
) -> list[tuple[str, ast.ClassDef, dict[str, str]]]:
    """``(path, class, imports)`` for ``name`` in ``path`` and every base
    class it names, followed into the vLLM modules they are imported from.

    Raises:
        ContractError: ``name`` is not defined in ``path``.
    """
    out: list[tuple[str, ast.ClassDef, dict[str, str]]] = []
    todo, seen = [(path, name)], set()
    while todo:
        where, cls_name = todo.pop()
        if (where, cls_name) in seen:
            continue
        seen.add((where, cls_name))
        tree = read_tree(read, where)
        if tree is None:
            continue
        imports = imported_functions(tree)
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name]
        if not found:
            if where == path and cls_name == name:
                raise ContractError(
                    f"{path}: no class {name}, the proposer vLLM builds for EAGLE-3. "
                    "Discovery (both sides follow this class) lost the path there; the proposer "
                    "moved and the contract discovery needs a look."
                )
            continue
        out.append((where, found[0], imports))
        for base in found[0].bases:
            if isinstance(base, ast.Name):
                module = imports.get(base.id)
                target = module.replace(".", "/") + ".py" if module else where
                todo.append((target, base.id))
    return out
