"""The MLA EAGLE-3 head on CPU, for the semantic tests that build one
(test_mla_drafter.py and the modules that share its setup).

A tiny DeepSeek-V3 target and a config-only MLA head (``write_head``), the
head's ``VllmConfig`` (``eagle3_vllm_config``), its weights in the public
heads' naming (``checkpoint``) and the drafter built by its own
``__init__`` (``build``), with the three parts that need CUDA kernels
replaced (``stub``): the MLA attention (``StubMLAAttention``: records the
config it is given and applies a fixed projection), the dense MLP and the
RMSNorm (``TorchRMSNorm``: vLLM's RMSNorm math in plain torch).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from vllm.config import (
    CompilationConfig,
    CompilationMode,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    VllmConfig,
    set_current_vllm_config,
)

from tests.semantics import stubs

H = stubs.HIDDEN  # draft and target hidden size
VOCAB, DRAFT_VOCAB = 128, 96
N_AUX = 3
ROPE_THETA = 50000.0


class TorchRMSNorm(nn.Module):
    """vLLM's ``RMSNorm`` in plain torch: ``x / rms(x) * weight``; with a
    residual, the fused add-norm ``(norm(x + residual), x + residual)``."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, **_: object) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def forward(self, x, residual=None):  # type: ignore[no-untyped-def]
        if residual is None:
            return self._norm(x)
        s = x + residual
        return self._norm(s), s


class StubMLAAttention(nn.Module):
    """Stands in for ``DeepseekV2MLAAttention`` (MLA kernels need CUDA)."""

    configs: list[object] = []

    def __init__(self, *, config, hidden_size, input_size=None, **_: object) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        StubMLAAttention.configs.append(config)
        width = input_size or hidden_size
        self.register_buffer(
            "proj",
            torch.linspace(-1, 1, width * hidden_size, dtype=torch.float32).reshape(
                width, hidden_size
            ),
        )

    def forward(self, positions, hidden_states, llama_4_scaling=None):  # type: ignore[no-untyped-def]
        return torch.tanh(hidden_states @ self.proj)


class StubMLP(nn.Module):
    """Stands in for ``DeepseekV2MLP`` (its fused SiLU-and-mul needs CUDA)."""

    def __init__(self, **_: object) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(0.5 * x) + 0.1 * x


def stub(module, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Replace the CUDA-only parts of ``module`` (``deepseek_eagle3``, ours
    or a reference release's) with the CPU stand-ins above."""
    monkeypatch.setattr(module, "DeepseekV2MLAAttention", StubMLAAttention)
    monkeypatch.setattr(module, "DeepseekV2MLP", StubMLP)
    monkeypatch.setattr(module, "RMSNorm", TorchRMSNorm)


def write_head(dest: Path, *, fc_norm: bool, norm_output: bool) -> Path:
    cfg = {
        "model_type": "deepseek_v2",
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "hidden_size": H,
        "target_hidden_size": H,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "kv_lora_rank": 8,
        "q_lora_rank": 8,
        "qk_rope_head_dim": 4,
        "qk_nope_head_dim": 4,
        "v_head_dim": 4,
        "n_routed_experts": 2,  # unused by the dense drafter; newer transformers refuse None
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
            "use_aux_hidden_state": True,
        },
        "fc_norm": fc_norm,
        "norm_output": norm_output,
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def checkpoint(dest: Path) -> dict[str, torch.Tensor]:
    """A tiny safetensors checkpoint in the public heads' naming, read back."""
    g = torch.Generator().manual_seed(7)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    tensors = {
        "fc.weight": r(H, N_AUX * H) * 0.2,
        **{f"fc_norm.{i}.weight": 1.0 + 0.5 * r(H) for i in range(N_AUX)},
        "norm.weight": 1.0 + 0.1 * r(H),
        "midlayer.hidden_norm.weight": 1.0 + 0.1 * r(H),
        "midlayer.input_layernorm.weight": 1.0 + 0.1 * r(H),
        "midlayer.post_attention_layernorm.weight": 1.0 + 0.1 * r(H),
        "embed_tokens.weight": r(VOCAB, H),
        "lm_head.weight": r(DRAFT_VOCAB, H),
        "d2t": torch.arange(DRAFT_VOCAB, dtype=torch.int64) % 5,
        "t2d": torch.arange(VOCAB) % 4 != 0,
    }
    from safetensors.torch import load_file

    save_file(tensors, str(dest))
    return load_file(str(dest))


def eagle3_vllm_config(target: Path, head: Path) -> VllmConfig:
    """A CPU ``VllmConfig`` (no compilation) with EAGLE-3 speculation: the
    head at ``head`` on the target at ``target``, 2 speculative tokens."""
    mc = ModelConfig(model=str(target), skip_tokenizer_init=True, dtype="float32")
    sc = SpeculativeConfig(
        target_model_config=mc,
        target_parallel_config=ParallelConfig(),
        method="eagle3",
        model=str(head),
        num_speculative_tokens=2,
    )
    return VllmConfig(
        model_config=mc,
        speculative_config=sc,
        device_config=DeviceConfig(device="cpu"),
        compilation_config=CompilationConfig(mode=CompilationMode.NONE),
    )


def build(module, tmp_path: Path, distributed, *, fc_norm: bool, norm_output: bool):  # type: ignore[no-untyped-def]
    target = stubs.write_text_config(tmp_path / "target", 4)
    head = write_head(
        tmp_path / f"head-{fc_norm}-{norm_output}", fc_norm=fc_norm, norm_output=norm_output
    )
    vc = eagle3_vllm_config(target, head)
    with set_current_vllm_config(vc):
        distributed()
        model = module.Eagle3DeepseekV2ForCausalLM(vllm_config=vc, prefix="")
    every = checkpoint(tmp_path / "head.safetensors")
    # A plain (pre-3.1) head ships no fc_norm weights; upstream's loader
    # refuses them where the head has no fc_norm (0.28.0 on).
    weights = {k: v for k, v in every.items() if fc_norm or not k.startswith("fc_norm.")}
    with set_current_vllm_config(vc):
        model.load_weights(weights.items())
    return model, weights


def aux_states() -> torch.Tensor:
    """``[num_tokens, 3 * target_hidden]``: three captured target states with
    very different scales, so per-state normalisation matters."""
    t = torch.linspace(-1, 1, 5 * H, dtype=torch.float32).reshape(5, H)
    return torch.cat([t, 10.0 * t.flip(0) + 1.0, 0.01 * torch.cos(3 * t)], dim=-1)


def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
