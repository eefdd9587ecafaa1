"""EAGLE 3.1 on the Llama-shaped drafter (``Eagle3LlamaForCausalLM``), on CPU.

Built by its own ``__init__`` from a real ``SpeculativeConfig`` (tiny
DeepSeek-V3 target; a config-only ``LlamaForCausalLMEagle3`` head with
``fc_norm``, ``norm_output`` and its layer ids under ``eagle_config``),
with the decoder layer replaced (its attention needs CUDA kernels;
``StubEagle3Layer`` keeps the EAGLE-3 layer's call shape
``layer(positions, embeds, hidden_states, residual) -> (hidden, residual)``)
and RMSNorm in plain torch. Rules (upstream ``llama_eagle3.py`` v0.22.0,
vllm PR #42764): ``fc_norm.{i}.weight`` from the checkpoint land in one
RMSNorm per captured state, applied before ``fc`` in
``combine_hidden_states([num_tokens, 3 * hidden]) -> [num_tokens, hidden]``;
with ``norm_output`` the next draft step gets the post-norm state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from vllm.config import (
    set_current_vllm_config,
)

from tests.semantics import stubs, unpatched
from tests.semantics.mla_head import (
    N_AUX,
    TorchRMSNorm,
    aux_states,
    eagle3_vllm_config,
    rms,
)

pytestmark = [
    unpatched.EAGLE3_GATE,
    unpatched.fails_unpatched_with(
        raises="KeyError",
        match="fc_norm",
        reason="the error the patch fixes: without it the head's load_weights has no "
        "fc_norm parameter for the checkpoint's fc_norm.{i}.weight",
    ),
]

H = stubs.HIDDEN
VOCAB = 128  # the target's (stubs.write_text_config)
DRAFT_VOCAB = 64  # smaller, as real heads that ship d2t are; 0.30.0 drops d2t otherwise


class StubEagle3Layer(nn.Module):
    """Stands in for the EAGLE-3 Llama decoder layer (attention needs CUDA):
    first-layer call shape, a fixed mix of ``[embeds, hidden]``."""

    def __init__(self, vllm_config, prefix, config=None, layer_idx=0) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.register_buffer("proj", torch.linspace(-1, 1, 2 * H * H).reshape(2 * H, H))

    def forward(self, positions, embeds, hidden_states, residual):  # type: ignore[no-untyped-def]
        residual = hidden_states if residual is None else hidden_states + residual
        return torch.tanh(torch.cat([embeds, hidden_states], -1) @ self.proj), residual


@pytest.fixture
def llama_eagle3(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import llama_eagle3

    monkeypatch.setattr(llama_eagle3, "LlamaDecoderLayer", StubEagle3Layer)
    monkeypatch.setattr(llama_eagle3, "RMSNorm", TorchRMSNorm)
    return llama_eagle3


def build(module, tmp_path: Path, distributed, norm_output: bool):  # type: ignore[no-untyped-def]
    target = stubs.write_text_config(tmp_path / "target", 4)
    head = tmp_path / "head"
    head.mkdir(parents=True, exist_ok=True)
    (head / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "architectures": ["LlamaForCausalLMEagle3"],
                "hidden_size": H,
                "target_hidden_size": H,
                "intermediate_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "vocab_size": VOCAB,
                "draft_vocab_size": DRAFT_VOCAB,
                "max_position_embeddings": 256,
                "rms_norm_eps": 1e-6,
                "torch_dtype": "float32",
                "tie_word_embeddings": False,
                "fc_norm": True,
                "norm_output": norm_output,
                "eagle_config": {
                    "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
                    "use_aux_hidden_state": True,
                },
            }
        )
    )
    vc = eagle3_vllm_config(target, head)
    g = torch.Generator().manual_seed(11)
    save_file(
        {
            "fc.weight": torch.randn(H, N_AUX * H, generator=g) * 0.2,
            **{
                f"fc_norm.{i}.weight": 1.0 + 0.5 * torch.randn(H, generator=g) for i in range(N_AUX)
            },
            "norm.weight": 1.0 + 0.1 * torch.randn(H, generator=g),
            "embed_tokens.weight": torch.randn(VOCAB, H, generator=g),
            "lm_head.weight": torch.randn(DRAFT_VOCAB, H, generator=g),
            "d2t": torch.zeros(DRAFT_VOCAB, dtype=torch.int64),
            "t2d": torch.ones(VOCAB, dtype=torch.bool),
        },
        str(tmp_path / "head.safetensors"),
    )
    w = load_file(str(tmp_path / "head.safetensors"))
    with set_current_vllm_config(vc):
        distributed()
        model = module.Eagle3LlamaForCausalLM(vllm_config=vc, prefix="")
        model.load_weights(w.items())
    return model, w


def test_fc_norm_weights_load_and_normalise_each_state(llama_eagle3, tmp_path, distributed) -> None:
    model, w = build(llama_eagle3, tmp_path, distributed, norm_output=False)
    for i in range(N_AUX):
        torch.testing.assert_close(
            model.model.fc_norm[i].weight.data, w[f"fc_norm.{i}.weight"], rtol=0, atol=0
        )
    x = aux_states()
    chunks = x.chunk(N_AUX, dim=-1)
    expected = (
        torch.cat([rms(c, w[f"fc_norm.{i}.weight"]) for i, c in enumerate(chunks)], -1)
        @ w["fc.weight"].T
    )
    torch.testing.assert_close(model.combine_hidden_states(x), expected)


@pytest.mark.parametrize("norm_output", [True, False])
def test_norm_output_feeds_the_post_norm_state_to_the_next_step(
    llama_eagle3, tmp_path, distributed, norm_output
) -> None:
    model, w = build(llama_eagle3, tmp_path, distributed, norm_output=norm_output)
    ids, pos = torch.tensor([3, 9, 27, 81, 5]), torch.arange(5)
    hidden = model.combine_hidden_states(aux_states())
    normed, nxt = model(ids, pos, hidden)
    out, residual = model.model.layers[0](pos, model.model.embed_input_ids(ids), hidden, None)
    prenorm = out + residual
    torch.testing.assert_close(normed, rms(prenorm, w["norm.weight"]))
    torch.testing.assert_close(nxt, normed if norm_output else prenorm)
