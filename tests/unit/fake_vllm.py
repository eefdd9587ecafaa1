"""A stand-in ``vllm`` for the preflight's questions to the installed wheel
(registry, ``SpeculativeConfig``, the runner's id reader), answering either
way; ``test_preflight_vllm.py`` says what it is for."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import verify_install as vi


class Drafter:
    """Stands in for a drafter model class."""


class Target:
    eagle3 = True


class TextModel:
    """Stands in for the target's text model class (``DeepseekV3ForCausalLM``):
    refuses ids outside ``0..N`` at set time, as the series does."""

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        n = self.config.num_hidden_layers  # type: ignore[attr-defined]
        bad = [i for i in layers if not 0 <= i <= n]
        if bad:
            raise ValueError(f"EAGLE-3 aux hidden state layer ids {bad} are out of range")
        self.model.aux_hidden_state_layers = layers  # type: ignore[attr-defined]


#: The norm flags 0.17.1's speculators converter copies (update_eagle3).
SPECULATORS_017 = ("norm_before_residual",)


def convert_speculators(raw: dict, fields: tuple[str, ...]) -> dict:
    """A speculators head's config as vLLM's converter builds it: the layer
    config, the vocabulary, target size and ids, and ``fields``."""
    cfg = dict(raw["transformer_layer_config"])
    if cfg.get("model_type", "llama") != "llama":
        raise ValueError(f"Unsupported model_type {cfg['model_type']} for Eagle3 speculator")
    cfg["draft_vocab_size"] = raw.get("draft_vocab_size")
    for key in ("target_hidden_size", "eagle_aux_hidden_state_layer_ids"):
        if raw.get(key):
            cfg[key] = raw[key]
    cfg |= {f: raw.get(f, False) for f in fields}  # 0.17.1 leaves the others out
    cfg["architectures"] = ["Eagle3LlamaForCausalLM"]
    return cfg


def fake_vllm(
    monkeypatch: pytest.MonkeyPatch,
    *,
    target_eagle3: bool = True,
    registered: tuple[str, ...] = ("LlamaForCausalLMEagle3",),
    refuse: str | None = None,
    reads_nested: bool = False,
    rewrites_deepseek_v3: bool = True,
    text_model: bool = True,
    private_apis: bool = True,
    target_len: int = 2048,
    speculators_fields: tuple[str, ...] = (
        "norm_before_residual",
        "norm_before_fc",
        "fc_norm",
        "norm_output",
    ),
) -> None:
    """Put a stand-in ``vllm`` (and ``transformers.PretrainedConfig``) in sys.modules.

    ``private_apis=False``: the private functions the preflight calls
    (``ModelRegistry._try_load_model_cls``, ``GPUModelRunner.
    _get_eagle3_aux_layers_from_config``) are renamed, as a release may do.
    ``target_len``: the target's max model length; the drafter's is its
    ``max_position_embeddings`` capped at it, as 0.17.1's
    ``SpeculativeConfig`` resolves it. ``speculators_fields``: the norm
    flags the stand-in's speculators converter copies from a head in that
    format (``SPECULATORS_017``: 0.17.1's, which copies only
    ``norm_before_residual``); it refuses a layer that is not llama, as the
    series does.
    """

    class Registry:
        def _try_load_model_cls(self, arch: str) -> type | None:
            classes = {"KimiK25ForConditionalGeneration": Target}
            if text_model:
                classes["DeepseekV3ForCausalLM"] = TextModel
            return classes.get(arch, Drafter if arch in registered else None)

        def get_supported_archs(self) -> set[str]:
            return {"KimiK25ForConditionalGeneration", *registered}

        def resolve_model_cls(self, archs: list[str], cfg: object) -> tuple[type, str]:
            for a in archs:
                if a in registered:
                    return Drafter, a
            raise ValueError(f"Model architectures {archs} are not supported for now.")

    class SpeculativeConfig:
        def __init__(self, *, model: str, **kw: object) -> None:
            if refuse:
                raise ValueError(refuse)
            cfg = json.loads((Path(model) / "config.json").read_text())
            if "speculators_model_type" in cfg:
                cfg = convert_speculators(cfg, speculators_fields)
            self.draft_model_config = SimpleNamespace(
                architectures=cfg["architectures"],
                hf_config=SimpleNamespace(**cfg),
                max_model_len=min(cfg["max_position_embeddings"], target_len),
            )
            self.target_model_config = SimpleNamespace(max_model_len=target_len)

        @staticmethod
        def hf_config_override(c: SimpleNamespace) -> SimpleNamespace:
            if rewrites_deepseek_v3 and c.model_type == "deepseek_v3":
                c.model_type, c.architectures = "deepseek_mtp", ["DeepSeekMTPModel"]
            return c

    class GPUModelRunner:
        def _get_eagle3_aux_layers_from_config(self) -> tuple[int, ...] | None:
            hf = self.speculative_config.draft_model_config.hf_config  # type: ignore[attr-defined]
            ids = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
            if ids is None and reads_nested:
                ids = (getattr(hf, "eagle_config", None) or {}).get(
                    "eagle_aux_hidden_state_layer_ids"
                )
            return tuple(ids) if ids else None

    class PretrainedConfig(SimpleNamespace):
        pass

    mods = {
        name: types.ModuleType(name)
        for name in (
            "vllm",
            "vllm.config",
            "vllm.model_executor",
            "vllm.model_executor.models",
            "vllm.model_executor.models.interfaces",
            "vllm.model_executor.models.registry",
            "vllm.v1",
            "vllm.v1.worker",
            "vllm.v1.worker.gpu_model_runner",
            "transformers",
        )
    }
    mods["vllm.model_executor.models.interfaces"].supports_eagle3 = (  # type: ignore[attr-defined]
        lambda cls: target_eagle3 and getattr(cls, "eagle3", False)
    )
    mods["vllm.model_executor.models.registry"].ModelRegistry = Registry()  # type: ignore[attr-defined]
    cfgmod = mods["vllm.config"]
    cfgmod.SpeculativeConfig = SpeculativeConfig  # type: ignore[attr-defined]
    cfgmod.ModelConfig = lambda **kw: SimpleNamespace(**kw)  # type: ignore[attr-defined]
    cfgmod.ParallelConfig = SimpleNamespace  # type: ignore[attr-defined]
    mods["vllm.v1.worker.gpu_model_runner"].GPUModelRunner = GPUModelRunner  # type: ignore[attr-defined]
    mods["transformers"].PretrainedConfig = PretrainedConfig  # type: ignore[attr-defined]
    if not private_apis:
        Registry.load_model_cls = Registry._try_load_model_cls  # type: ignore[attr-defined]
        del Registry._try_load_model_cls
        GPUModelRunner.eagle3_aux_layers = GPUModelRunner._get_eagle3_aux_layers_from_config  # type: ignore[attr-defined]
        del GPUModelRunner._get_eagle3_aux_layers_from_config
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(vi.md, "version", lambda name: "0.0.0+fake")
