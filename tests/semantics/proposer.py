"""The shipped ``EagleProposer.load_model`` on CPU, for the semantic tests
that load a drafter next to a multimodal target.

``load_into_proposer`` runs it on a proposer made without ``__init__`` (it
allocates CUDA buffers), for a Kimi-K2.5 stand-in target
(``KimiK25ForConditionalGeneration``: its class name and the config field
the proposer reads), keeping the warnings it logs (``LogRecorder``).
Attention-layer discovery and the embedding / lm_head sharing are stubbed
out (they need a loaded target).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn


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
