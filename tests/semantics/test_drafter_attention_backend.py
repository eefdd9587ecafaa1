"""``speculative_config.attention_backend``: the drafter's own attention
backend (backport of vllm PR #39930, first released in v0.21.0; patch
``speculative-drafter-attention-backend.patch``).

In 0.17.1 the drafter's layers select their backend from the target's
``attention_config.backend``, so pinning an MLA backend for Kimi-K2.5
(``--attention-backend TRITON_MLA``) fails at startup for a GQA EAGLE-3
head. Upstream's rule (``LLMBaseProposer._create_draft_vllm_config`` in
0.21.0): the drafter never inherits the target's backend; it uses
``speculative_config.attention_backend``, or automatic selection when that
is unset. Loading the drafter needs a GPU, so ``get_model`` is replaced by
a recorder of the backend its layers would select. Each test fails on
unpatched 0.17.1 and on the series before this patch.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from vllm.v1.attention.backends.registry import AttentionBackendEnum

from tests.semantics import llama_head, stubs, unpatched

pytestmark = unpatched.fails_unpatched_with(
    raises="ValidationError",
    match=r"attention_backend\s+Unexpected keyword argument",
    reason="0.17.1's SpeculativeConfig has no attention_backend field: the patch adds it",
    dependency=True,
)


def _config(tmp_path, **kw):  # type: ignore[no-untyped-def]
    target = str(stubs.write_text_config(tmp_path / "ds", 8))
    return llama_head.speculative_config(
        target, llama_head.write_head_config(tmp_path / "d"), pp=1, **kw
    )


@pytest.mark.parametrize(
    "given, parsed",
    [
        ("FLASH_ATTN", AttentionBackendEnum.FLASH_ATTN),
        ("flash_attn", AttentionBackendEnum.FLASH_ATTN),
        ("auto", None),
        (None, None),
        (AttentionBackendEnum.TRITON_ATTN, AttentionBackendEnum.TRITON_ATTN),
    ],
)
def test_attention_backend_parses_names_auto_and_members(tmp_path, given, parsed) -> None:
    assert _config(tmp_path, attention_backend=given).attention_backend is parsed


def test_an_unknown_attention_backend_is_refused_naming_it(tmp_path) -> None:
    with pytest.raises(Exception, match="NO_SUCH_BACKEND"):
        _config(tmp_path, attention_backend="no_such_backend")


def _load_drafter_with_target_backend(tmp_path, monkeypatch, target_backend, **kw):  # type: ignore[no-untyped-def]
    """Run ``EagleProposer._get_model`` (the drafter's load) on a stand-in
    proposer; return the backend its layers would select, and the target's
    backend afterwards."""
    from vllm.config import AttentionConfig
    from vllm.v1.spec_decode import eagle

    seen = []
    monkeypatch.setattr(
        eagle,
        "get_model",
        lambda *, vllm_config, **_: seen.append(vllm_config.attention_config.backend),
    )
    vllm_config = SimpleNamespace(attention_config=AttentionConfig(backend=target_backend))
    proposer = SimpleNamespace(vllm_config=vllm_config, speculative_config=_config(tmp_path, **kw))
    eagle.EagleProposer._get_model(proposer)
    return seen[0], vllm_config.attention_config.backend


@unpatched.EAGLE3_GATE
def test_drafter_does_not_inherit_a_pinned_mla_backend(tmp_path, monkeypatch) -> None:
    drafter, target = _load_drafter_with_target_backend(
        tmp_path, monkeypatch, AttentionBackendEnum.TRITON_MLA
    )
    assert drafter is None  # selected for the drafter's own (GQA) shape
    assert target is AttentionBackendEnum.TRITON_MLA  # the target keeps its pin


def test_drafter_uses_the_speculative_attention_backend(tmp_path, monkeypatch) -> None:
    drafter, target = _load_drafter_with_target_backend(
        tmp_path, monkeypatch, AttentionBackendEnum.TRITON_MLA, attention_backend="FLASH_ATTN"
    )
    assert drafter is AttentionBackendEnum.FLASH_ATTN
    assert target is AttentionBackendEnum.TRITON_MLA


def test_speculative_attention_backend_reaches_the_backend_selector(tmp_path, monkeypatch) -> None:
    """The selector (vllm/v1/attention/selector.py) reads the current
    config's ``attention_config.backend`` while a layer is built."""
    from vllm.config import (
        DeviceConfig,
        VllmConfig,
        get_current_vllm_config,
        set_current_vllm_config,
    )
    from vllm.v1.spec_decode import eagle

    seen = []
    monkeypatch.setattr(
        eagle,
        "get_model",
        lambda **_: seen.append(get_current_vllm_config().attention_config.backend),
    )
    vc = VllmConfig(device_config=DeviceConfig(device="cpu"))
    vc.attention_config.backend = AttentionBackendEnum.TRITON_MLA
    proposer = SimpleNamespace(
        vllm_config=vc, speculative_config=_config(tmp_path, attention_backend="triton_attn")
    )
    with set_current_vllm_config(vc):
        eagle.EagleProposer._get_model(proposer)
    assert seen == [AttentionBackendEnum.TRITON_ATTN]
    assert vc.attention_config.backend is AttentionBackendEnum.TRITON_MLA
