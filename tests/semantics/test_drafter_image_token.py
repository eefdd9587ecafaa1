"""A multimodal target's image token id reaches the EAGLE drafter's config:
Kimi-K2.5's is ``media_placeholder_token_id`` (patch
``eagle-map-kimi_k25-media-placeholder-token.patch``).

``EagleProposer.load_model`` copies the target's image token id into the
drafter's config as ``image_token_index``. For an architecture it does not
list, 0.17.1 reads ``target.config.image_token_index``, which
``KimiK25Config`` lacks, so loading any drafter for Kimi-K2.5 raises
``AttributeError``. The proposer runs as in test_drafter_multimodal_inputs.py
(the shipped ``load_model`` on a proposer made without ``__init__``); the
target is the stand-in with Kimi-K2.5's class name and vLLM's real
``KimiK25Config``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch import nn

from tests.semantics import unpatched
from tests.semantics.proposer import (
    KimiK25ForConditionalGeneration,
    load_into_proposer,
)


def _kimi_k25_config():  # type: ignore[no-untyped-def]
    """vLLM's own ``KimiK25Config`` where the release ships one (0.17.1
    does, 0.33.0 does not: it takes the config from the checkpoint's code);
    elsewhere a plain ``PretrainedConfig`` with the same token id, and no
    ``image_token_index`` either, stands in."""
    try:
        from vllm.transformers_utils.configs.kimi_k25 import KimiK25Config
    except ImportError:
        from transformers import PretrainedConfig

        return PretrainedConfig(media_placeholder_token_id=163605)
    return KimiK25Config()


class TextOnlyDrafter(nn.Module):
    """A drafter with a config and no multimodal embedding path."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace()


@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="image_token_index",
    reason="the error eagle-map-kimi_k25-media-placeholder-token.patch fixes: the proposer "
    "reads image_token_index, which KimiK25Config does not have",
    dependency=False,
)
def test_kimi_k25_media_placeholder_token_becomes_the_drafters_image_token(monkeypatch) -> None:
    """``load_model`` copies a multimodal target's image token id into the
    drafter's config; Kimi-K2.5's is its real ``KimiK25Config``'s
    ``media_placeholder_token_id`` (its default, 163605)."""
    target = KimiK25ForConditionalGeneration()
    target.config = _kimi_k25_config()
    assert target.config.media_placeholder_token_id == 163605
    drafter = TextOnlyDrafter()
    load_into_proposer(drafter, monkeypatch, target)
    assert getattr(drafter.config, "image_token_index", None) == 163605


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
