"""The Llama EAGLE-3 head on CPU, for the semantic tests that build one.

``build`` makes ``Eagle3LlamaForCausalLM`` by its own ``__init__`` from
``head_vllm_config`` (a stand-in ``VllmConfig``: the real one would build
the drafter's CUDA layers) with its ``LlamaModel`` replaced by
``StubLlamaModel`` (its attention needs CUDA); ``eagle3_head`` does it with
the embedding 0.17.1's multimodal probe calls. ``write_head_config``,
``write_target_config`` and ``speculative_config`` give config-only
checkpoints and the real ``SpeculativeConfig`` over them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from tests.semantics import stubs


class StubLlamaModel(nn.Module):
    """Stands in for the drafter's ``LlamaModel`` (its attention needs CUDA)."""

    def __init__(self, *, vllm_config: object, prefix: str, start_layer_id: int) -> None:
        super().__init__()
        self.use_aux_hidden_state = True
        # What the head reads of its model besides the layers (EAGLE 3.1
        # options, off for a plain EAGLE-3 head).
        self.norm_before_fc = False
        self.fc_norm = None


def build(llama_eagle3, vllm_config):  # type: ignore[no-untyped-def]
    """The Llama EAGLE-3 head, built by its own ``__init__`` under a CPU
    ``VllmConfig`` (with its CUDA parts stubbed by the caller)."""
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        return llama_eagle3.Eagle3LlamaForCausalLM(vllm_config=vllm_config)


def head_vllm_config() -> SimpleNamespace:
    """What the head's ``__init__`` reads of a ``VllmConfig``: a tiny Llama
    draft config (hidden 64, vocabulary 128) on a 4-layer target. A stand-in,
    since the real ``VllmConfig`` would build the drafter's CUDA layers."""
    from transformers import LlamaConfig

    hf = LlamaConfig(hidden_size=64, vocab_size=128, num_hidden_layers=1, num_attention_heads=2)
    return SimpleNamespace(
        speculative_config=SimpleNamespace(
            draft_model_config=SimpleNamespace(hf_config=hf), parallel_drafting=False
        ),
        model_config=SimpleNamespace(
            get_total_num_hidden_layers=lambda: 4,
            get_num_layers=lambda _: 4,
            # The target's vocabulary, larger than the head's draft vocabulary
            # as for heads that ship d2t (read from 0.30.0, which drops d2t otherwise).
            get_vocab_size=lambda: 256,
        ),
        parallel_config=None,
    )


class StubLlamaModelWithEmbedding(StubLlamaModel):
    """The Llama head's ``LlamaModel`` stand-in, with the token embedding the
    real one has (0.17.1's probe calls it)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.embed_tokens = nn.Embedding(128, 64)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


def eagle3_head(make_model, monkeypatch):  # type: ignore[no-untyped-def]
    """The Llama head with its decoder stubbed (``StubLlamaModelWithEmbedding``)
    and no quantization, on a 4-layer target's distributed state."""
    from vllm.model_executor.models import llama_eagle3

    make_model(4)  # the single-process distributed state the head needs
    monkeypatch.setattr(llama_eagle3, "LlamaModel", StubLlamaModelWithEmbedding)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: None)
    return build(llama_eagle3, head_vllm_config())


def write_head_config(dest: Path, eagle_config: dict[str, object] | None = None) -> str:
    """A config-only Llama EAGLE-3 head at ``dest`` (aux layer ids 1, 2, 3;
    ``eagle_config`` where given); its path."""
    cfg: dict[str, object] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": stubs.HIDDEN,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 128,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
    }
    if eagle_config is not None:
        cfg["eagle_config"] = eagle_config
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def write_target_config(dest: Path) -> str:
    """A config-only 4-layer Llama target at ``dest``; its path."""
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": stubs.HIDDEN,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "vocab_size": 128,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def speculative_config(target: str, drafter: str, pp: int, **kw: object):  # type: ignore[no-untyped-def]
    """vLLM's ``SpeculativeConfig`` for ``drafter`` on ``target`` with
    ``pp`` pipeline stages, 2 speculative tokens."""
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(
        target_model_config=ModelConfig(model=target, skip_tokenizer_init=True),
        target_parallel_config=ParallelConfig(pipeline_parallel_size=pp),
        method="eagle3",
        model=drafter,
        num_speculative_tokens=2,
        **kw,
    )


def scheduler(tmp_path: Path, batched_tokens: int, **scheduler_kw: object):  # type: ignore[no-untyped-def]
    """The real ``Scheduler`` of an EAGLE-3 deployment (this module's tiny
    Llama target and head, 2 speculative tokens, one stage) with a KV cache
    of 64 blocks of 16 of its own, since no worker sizes it here.
    ``scheduler_kw`` goes to its ``SchedulerConfig``."""
    from vllm.config import (
        CacheConfig,
        CompilationConfig,
        CompilationMode,
        DeviceConfig,
        ModelConfig,
        SchedulerConfig,
        VllmConfig,
    )
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    target = write_target_config(tmp_path / "target")
    head = write_head_config(tmp_path / "drafter")
    vc = VllmConfig(
        model_config=ModelConfig(model=target, skip_tokenizer_init=True, max_model_len=256),
        speculative_config=speculative_config(target, head, pp=1),
        device_config=DeviceConfig(device="cpu"),
        scheduler_config=SchedulerConfig(
            max_num_batched_tokens=batched_tokens,
            max_num_seqs=4,
            max_model_len=256,
            is_encoder_decoder=False,
            enable_chunked_prefill=True,
            **scheduler_kw,
        ),
        cache_config=CacheConfig(block_size=16, enable_prefix_caching=False),
        compilation_config=CompilationConfig(mode=CompilationMode.NONE),
    )
    vc.cache_config.num_gpu_blocks = 64
    spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=16, dtype=torch.float32)
    kv = KVCacheConfig(
        num_blocks=64, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)]
    )
    sched = Scheduler(
        vllm_config=vc,
        kv_cache_config=kv,
        structured_output_manager=StructuredOutputManager(vc),
        block_size=16,
    )
    assert sched.use_eagle
    return sched
