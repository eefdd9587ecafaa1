"""Under pipeline parallelism an EAGLE-3 head without ``embed_tokens``
drafts from the target's input embedding, or says it cannot (our patch
``eagle-share-target-embedding-on-the-drafter-pipeline-stage.patch``,
Pending).

The drafter lives on the last pipeline stage. In 0.17.1
``EagleProposer._maybe_share_embeddings`` shares nothing when
``pipeline_parallel_size > 1`` ("loaded separately"), and
``DeepseekV2Model`` builds ``embed_tokens`` on the first stage only, so a
head whose checkpoint has no ``embed_tokens`` (the EAGLE-3 loader skips the
missing weight) drafts from an embedding nothing loaded: outputs stay
correct, acceptance collapses, nothing says so. The patch: with EAGLE the
DeepSeek/Kimi-K2.5 target's last stage builds and loads the embedding
too; the proposer shares the embedding a stage holds, as vLLM's opt-in V2
runner does from v0.30.0 (``maybe_share_target_embed``); where the stage
holds none, one warning names the checkpoint and the workaround.

The target is a real ``DeepseekV3ForCausalLM`` built by its own
``__init__`` with stub decoder layers and norm (they need CUDA kernels;
the loading test keeps vLLM's real ``VocabParallelEmbedding``, the sharing
test the stub embedding of ``stubs.py``) and put on the
last stage of two with a stand-in ``get_pp_group`` (a real multi-rank
group needs a process per rank). The head is the real
``Eagle3LlamaForCausalLM`` with its decoder stubbed, as in
test_drafter_multimodal_inputs.py; ``_maybe_share_embeddings`` is the
shipped method on a proposer made without ``__init__`` (it allocates CUDA
buffers). Each test fails on unpatched 0.17.1 and on the series before
this patch.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.semantics import llama_head, stubs, unpatched
from tests.semantics.proposer import LogRecorder

HEAD = "/ckpt/kimi-k2.5-eagle3-no-embed"  # what the warning must name


def last_stage_target(tmp_path: Path, distributed, monkeypatch, *, eagle: bool):  # type: ignore[no-untyped-def]
    """A 4-layer ``DeepseekV3ForCausalLM`` built as the last of two pipeline
    stages, with an EAGLE-3 speculative config when ``eagle``."""
    from vllm.config import (
        CompilationConfig,
        CompilationMode,
        DeviceConfig,
        ModelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.model_executor.models import deepseek_v2 as ds

    monkeypatch.setattr(ds, "DeepseekV2DecoderLayer", stubs.StubDecoderLayer)
    monkeypatch.setattr(ds, "RMSNorm", stubs.StubRMSNorm)
    monkeypatch.setattr(ds, "get_pp_group", lambda: stubs.FakePPGroup(False, True))
    target = str(stubs.write_text_config(tmp_path / f"target-{eagle}", 4))
    vc = VllmConfig(
        model_config=ModelConfig(model=target, skip_tokenizer_init=True, dtype="float32"),
        speculative_config=llama_head.speculative_config(
            target, llama_head.write_head_config(tmp_path / "head"), pp=1
        )
        if eagle
        else None,
        device_config=DeviceConfig(device="cpu"),
        compilation_config=CompilationConfig(mode=CompilationMode.NONE),
    )
    with set_current_vllm_config(vc):
        distributed()
        return ds.DeepseekV3ForCausalLM(vllm_config=vc, prefix="")


def proposer_for(drafter: nn.Module, monkeypatch, pp: int = 2):  # type: ignore[no-untyped-def]
    """A proposer holding ``drafter`` on a stage of ``pp``, logging to a recorder."""
    from vllm.v1.spec_decode import eagle

    log = LogRecorder()
    monkeypatch.setattr(eagle, "logger", log)
    monkeypatch.setattr(eagle, "get_pp_group", lambda: SimpleNamespace(world_size=pp))
    proposer = object.__new__(eagle.EagleProposer)
    proposer.model = drafter
    proposer.draft_model_config = SimpleNamespace(model=HEAD)
    return proposer, log.warnings


@unpatched.EAGLE3_GATE
def test_last_stage_builds_and_loads_the_target_embedding_for_an_eagle_drafter(
    tmp_path, distributed, monkeypatch
) -> None:
    """With EAGLE the last stage holds the target's embedding, loaded from
    the target checkpoint by the target's own ``load_weights``; without
    speculation it still holds none."""
    from vllm.model_executor.models.utils import PPMissingLayer, is_pp_missing_parameter

    model = last_stage_target(tmp_path, distributed, monkeypatch, eagle=True)
    assert not isinstance(model.model.embed_tokens, PPMissingLayer)
    assert not is_pp_missing_parameter("model.embed_tokens.weight", model)
    weight = torch.linspace(-1, 1, 128 * stubs.HIDDEN).reshape(128, stubs.HIDDEN)
    model.load_weights([("model.embed_tokens.weight", weight)])
    assert torch.equal(model.model.embed_tokens.weight.data, weight)

    plain = last_stage_target(tmp_path, distributed, monkeypatch, eagle=False)
    assert isinstance(plain.model.embed_tokens, PPMissingLayer)


@unpatched.EAGLE3_GATE
def test_head_without_embed_tokens_drafts_from_the_last_stage_target_embedding(
    make_model, tmp_path, distributed, monkeypatch
) -> None:
    """The drafter's embedding becomes the target's (no copy), silently."""
    head = llama_head.eagle3_head(make_model, monkeypatch)
    assert head.has_own_embed_tokens is False  # the checkpoint had none
    target = last_stage_target(tmp_path, distributed, monkeypatch, eagle=True)
    proposer, warnings = proposer_for(head, monkeypatch)
    proposer._maybe_share_embeddings(target)
    assert head.model.embed_tokens is target.model.embed_tokens
    assert warnings == []


def test_one_warning_names_a_head_without_embed_tokens_on_a_stage_without_one(
    make_model, monkeypatch
) -> None:
    """A stage holding no target embedding (a target that builds it on the
    first stage only): one warning, naming the checkpoint and the ways out.
    A head that ships its own embedding needs none."""
    from vllm.model_executor.models.utils import PPMissingLayer

    head = llama_head.eagle3_head(make_model, monkeypatch)
    own = head.model.embed_tokens
    stage = nn.Module()
    stage.model = nn.Module()
    stage.model.embed_tokens = PPMissingLayer()
    proposer, warnings = proposer_for(head, monkeypatch)
    proposer._maybe_share_embeddings(stage)
    assert len(warnings) == 1, warnings
    assert HEAD in warnings[0] and "pipeline_parallel_size=2" in warnings[0]
    assert "embed_tokens" in warnings[0] and "pipeline_parallel_size=1" in warnings[0]
    assert head.model.embed_tokens is own

    head.has_own_embed_tokens = True  # what load_weights sets for embed_tokens.weight
    proposer, warnings = proposer_for(head, monkeypatch)
    proposer._maybe_share_embeddings(stage)
    assert warnings == [] and head.model.embed_tokens is own


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
