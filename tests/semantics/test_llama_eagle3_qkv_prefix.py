"""A Llama EAGLE-3 head's first-layer ``qkv_proj`` is named as in the checkpoint.

``llama_eagle3-build-the-first-layer-s-qkv_proj-under-self_attn.patch`` (vllm PR #48068,
upstream from 0.26.0): the head's decoder layer replaces the attention's
``qkv_proj`` with one of input size ``2 * hidden``. 0.17.1 built it under
the prefix ``model.layers.N.qkv_proj``, not ``model.layers.N.self_attn.qkv_proj``,
so a quantization config's ignore list (FP8/NVFP4 heads with
``ignore: ["...self_attn..."]``) missed it: the layer was quantized anyway
and the ``2 * hidden`` weight failed its shape check at load. A recording
quantization config shows the prefix the quantization config is asked
about. The parent ``LlamaDecoderLayer.__init__`` (its attention needs a
CUDA backend) is a stand-in that sets what the override reads.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch


def _recording_config(asked: list[str]) -> object:
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

    class Recording(QuantizationConfig):
        def get_name(self):  # type: ignore[no-untyped-def]
            return "recording"

        def get_supported_act_dtypes(self) -> list[torch.dtype]:
            return [torch.float32]

        @classmethod
        def get_min_capability(cls) -> int:
            return 0

        @staticmethod
        def get_config_filenames() -> list[str]:
            return []

        @classmethod
        def from_config(cls, config):  # type: ignore[no-untyped-def]
            return cls()

        def get_quant_method(self, layer, prefix):  # type: ignore[no-untyped-def]
            asked.append(prefix)
            return UnquantizedLinearMethod()

    return Recording()


def test_first_layer_qkv_proj_is_quantized_under_its_checkpoint_name(
    make_model, monkeypatch
) -> None:
    from transformers import LlamaConfig
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.models import llama, llama_eagle3

    make_model(4)  # the single-process distributed state linear layers need
    asked: list[str] = []
    quant = _recording_config(asked)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: quant)

    def parent_init(self, vllm_config, prefix="", config=None):  # type: ignore[no-untyped-def]
        torch.nn.Module.__init__(self)
        self.hidden_size = config.hidden_size
        self.self_attn = SimpleNamespace(head_dim=32, total_num_heads=2, total_num_kv_heads=2)

    monkeypatch.setattr(llama.LlamaDecoderLayer, "__init__", parent_init)
    hf = LlamaConfig(hidden_size=64, num_attention_heads=2, rms_norm_eps=1e-6)
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        llama_eagle3.LlamaDecoderLayer(
            SimpleNamespace(), prefix="model.layers.4", config=hf, layer_idx=0
        )
    assert asked == ["model.layers.4.self_attn.qkv_proj"]
