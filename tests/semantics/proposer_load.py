"""The shipped ``EagleProposer.load_model`` run on stand-ins: a multimodal
Kimi-K2.5 target, a recorder for the proposer's log, and the two real
EAGLE-3 heads (Llama and MLA) built on CPU. ``test_drafter_multimodal_inputs.py``
says what they are for; other semantic tests load heads the same way."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.semantics import llama_head, mla_head


class KimiK25ForConditionalGeneration(nn.Module):
    """Stands in for the multimodal target: the proposer reads its class
    name, ``config.media_placeholder_token_id`` and ``get_language_model()``."""

    supports_multimodal = True

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(media_placeholder_token_id=7)
        self.language_model = nn.Module()

    def get_language_model(self) -> nn.Module:
        return self.language_model


class StubLlamaModelWithEmbedding(llama_head.StubLlamaModel):
    """The Llama head's ``LlamaModel`` stand-in, with the token embedding the
    real one has (0.17.1's probe calls it)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.embed_tokens = nn.Embedding(128, 64)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


class LogRecorder:
    """Stands in for ``vllm.v1.spec_decode.eagle.logger``: keeps warnings."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def _warn(self, msg: str, *args: object, **_: object) -> None:
        self.warnings.append(msg % args if args else msg)

    warning = warning_once = _warn

    def info(self, *a: object, **k: object) -> None:
        pass

    debug = info_once = info


def load_into_proposer(drafter: nn.Module, monkeypatch: pytest.MonkeyPatch, target=None):  # type: ignore[no-untyped-def]
    """Run the shipped ``EagleProposer.load_model`` for ``drafter`` on a
    multimodal ``target`` (default: the Kimi-K2.5 stand-in); return the
    proposer and the warnings it logged."""
    from vllm.v1.spec_decode import eagle

    # load_model's own module: eagle.py, or from 0.20.0 the base
    # proposer's llm_base_proposer.py.
    home = sys.modules[eagle.EagleProposer.load_model.__module__]
    log = LogRecorder()
    monkeypatch.setattr(home, "logger", log)
    monkeypatch.setattr(home, "get_layers_from_vllm_config", lambda *a, **k: {})
    proposer = object.__new__(eagle.EagleProposer)
    proposer.vllm_config = None
    proposer.supports_mm_inputs = True  # what __init__ sets for a multimodal target
    proposer.input_ids = torch.zeros(8, dtype=torch.int32)
    proposer.parallel_drafting = False
    proposer._get_model = lambda: drafter  # type: ignore[method-assign]
    proposer._maybe_share_embeddings = lambda target: None  # type: ignore[method-assign]
    proposer._maybe_share_lm_head = lambda target: None  # type: ignore[method-assign]
    proposer.load_model(target or KimiK25ForConditionalGeneration())
    return proposer, log.warnings


def llama_eagle3_head(make_model, monkeypatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import llama_eagle3

    make_model(4)  # the single-process distributed state the head needs
    monkeypatch.setattr(llama_eagle3, "LlamaModel", StubLlamaModelWithEmbedding)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: None)
    return llama_head._build(llama_eagle3, llama_head._head_vllm_config())


def mla_eagle3_head(tmp_path, distributed, monkeypatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import deepseek_eagle3

    mla_head._stub(deepseek_eagle3, monkeypatch)
    model, _ = mla_head.build(
        deepseek_eagle3, tmp_path, distributed, fc_norm=False, norm_output=False
    )
    return model
