"""CPU stand-ins for the parts of DeepseekV2Model that need CUDA kernels.

Real decoder layers need MLA attention and fused-MoE kernels, so the model
under test gets small deterministic torch modules in their place: the
decoder layer (with the real layer's residual contract,
``layer(positions, hidden_states, residual, scaling) -> (hidden_states,
residual)``, ``residual is None`` on the first layer), the embedding and the
final norm. Everything else is the shipped code: ``DeepseekV2Model.__init__``
and ``forward``, ``DeepseekV3ForCausalLM.__init__``,
``set_aux_hidden_state_layers`` / ``get_eagle3_aux_hidden_state_layers``,
and the Kimi-K2.5 wrapper's delegation. The distributed state is real too:
a single-process gloo group.

``oracle_streams`` computes, independently of vLLM, the residual stream
entering each layer, so tests compare against first principles.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

HIDDEN = 16


class StubEmbedding(nn.Module):
    """``[num_tokens] -> [num_tokens, hidden]``; token t gives a distinct row."""

    def __init__(self, vocab_size: int, hidden_size: int, **_: object) -> None:
        super().__init__()
        self.hidden_size = hidden_size

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        cols = torch.arange(self.hidden_size, dtype=torch.float64)
        return input_ids.to(torch.float64).unsqueeze(-1) * 0.1 + cols * 0.01


def layer_fn(idx: int, stream: torch.Tensor) -> torch.Tensor:
    """What stub layer ``idx`` adds to the stream: distinct per layer."""
    return torch.tanh(stream * (0.3 + 0.1 * idx)) + (idx + 1)


class StubDecoderLayer(nn.Module):
    """A decoder layer with the real one's residual contract."""

    def __init__(self, vllm_config: object, prefix: str, **_: object) -> None:
        # Later releases pass more builders (0.30.0: index_group_builder); the
        # stub reads only its layer index from the prefix.
        super().__init__()
        self.idx = int(prefix.rsplit(".", 1)[-1])
        self.mlp = nn.Identity()  # not a DeepseekV2MoE: a dense layer to set_moe_parameters

    def forward(self, positions, hidden_states, residual, llama_4_scaling=None):  # type: ignore[no-untyped-def]
        residual = hidden_states if residual is None else hidden_states + residual
        return layer_fn(self.idx, residual), residual


class StubRMSNorm(nn.Module):
    """The fused add-norm call shape: ``norm(x, residual) -> (out, residual)``."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()

    def forward(self, x, residual=None):  # type: ignore[no-untyped-def]
        if residual is None:
            return x * 2.0
        s = x + residual
        return s * 2.0, s


def oracle_streams(input_ids: torch.Tensor, num_layers: int) -> list[torch.Tensor]:
    """``streams[i]``: the residual stream entering layer ``i``;
    ``streams[num_layers]``: after the last layer, before the final norm."""
    s = StubEmbedding(0, HIDDEN)(input_ids)
    streams = [s]
    for i in range(num_layers):
        s = layer_fn(i, s) + s
        streams.append(s)
    return streams


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FakePPGroup:
    """Stands in for ``get_pp_group()`` to put the model on one rank of a
    pipeline; a real multi-rank group needs one process (and GPU) per rank."""

    is_first_rank: bool
    is_last_rank: bool
    world_size: int = 2  # a pipeline (0.33.0's EagleModelMixin reads it)


def write_text_config(dest: Path, num_layers: int) -> Path:
    import json

    cfg = {
        "model_type": "deepseek_v3",
        "architectures": ["DeepseekV3ForCausalLM"],
        "vocab_size": 128,
        "hidden_size": HIDDEN,
        "intermediate_size": 32,
        "moe_intermediate_size": 8,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
        "n_shared_experts": 1,
        "kv_lora_rank": 8,
        "q_lora_rank": 8,
        "qk_rope_head_dim": 4,
        "qk_nope_head_dim": 4,
        "v_head_dim": 4,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def assert_quantized_head_loaded(drafter: nn.Module, ckpt: dict[str, torch.Tensor]) -> None:
    """The drafter's ``lm_head`` holds the checkpoint's quantized tensors
    (``qweight``, ``qzeros``, ``scales``; no plain ``weight``) exactly, and
    its ``d2t`` map is the checkpoint's."""
    params = dict(drafter.named_parameters())
    assert "lm_head.weight" not in params
    for name in ("qweight", "qzeros", "scales"):
        got = params[f"lm_head.{name}"].data
        torch.testing.assert_close(
            got.to(ckpt[f"lm_head.{name}"].dtype), ckpt[f"lm_head.{name}"], rtol=0, atol=0
        )
    assert torch.equal(drafter.draft_id_to_target_id.data, ckpt["d2t"])


def cpu_awq_config(group_size: int) -> object:
    """A 4-bit AWQ config with a quantized ``lm_head`` whose layers build on
    CPU: ``CPUAWQConfig`` (``quantization/cpu_wna16.py``, 0.17.1 to 0.22.x)
    or ``AutoAWQConfig`` (``auto_awq.py``, 0.24.0 on), which picks the CPU
    WNA16 kernel itself; on 0.23.0, which has neither (its lm_head-capable
    ``awq_marlin.py`` needs CUDA), Intel Neural Compressor's ``INCConfig``
    with the AutoAWQ packing and ``lm_head`` named in its ``extra_config``:
    off CUDA it builds the plain ``AWQLinearMethod`` (``qweight``,
    ``qzeros``, ``scales``). Skips the test on a release with none of them."""
    import importlib

    import pytest

    cfg = {"bits": 4, "group_size": group_size, "zero_point": True, "lm_head": True}
    for module, name in (("cpu_wna16", "CPUAWQConfig"), ("auto_awq", "AutoAWQConfig")):
        try:
            m = importlib.import_module(f"vllm.model_executor.layers.quantization.{module}")
        except ImportError:
            continue
        return getattr(m, name).from_config(cfg)
    try:
        inc = importlib.import_module("vllm.model_executor.layers.quantization.inc")
    except ImportError:
        inc = None
    if inc is not None:
        return inc.INCConfig.from_config(
            {
                "bits": 4,
                "group_size": group_size,
                "sym": False,  # AWQ's zero point
                "packing_format": "auto_round:auto_awq",
                "extra_config": {"lm_head": {"bits": 4}},
            }
        )
    pytest.skip("this vLLM has no AWQ config that quantizes an lm_head on CPU")


def kimi_k25_wrapper(language_model):  # type: ignore[no-untyped-def]
    """The Kimi-K2.5 wrapper around a real language model. Its own __init__
    builds the MoonViT tower, which needs a GPU platform; the methods under
    test are the shipped ones."""
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

    kimi = KimiK25ForConditionalGeneration.__new__(KimiK25ForConditionalGeneration)
    torch.nn.Module.__init__(kimi)
    kimi.language_model = language_model
    return kimi
