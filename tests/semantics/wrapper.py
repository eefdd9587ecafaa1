"""The Kimi-K2.5 wrapper (``KimiK25ForConditionalGeneration``) around a real
language model, for the semantic tests of its delegation."""

from __future__ import annotations

import torch
from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration


def _wrapper(language_model):  # type: ignore[no-untyped-def]
    """The Kimi-K2.5 wrapper around a real language model. Its own __init__
    builds the MoonViT tower, which needs a GPU platform; the methods under
    test are the shipped ones."""
    kimi = KimiK25ForConditionalGeneration.__new__(KimiK25ForConditionalGeneration)
    torch.nn.Module.__init__(kimi)
    kimi.language_model = language_model
    return kimi
