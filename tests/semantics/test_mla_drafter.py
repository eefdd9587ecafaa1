"""The MLA EAGLE-3 drafter (``Eagle3DeepseekV2ForCausalLM``) on CPU.

The drafter is built by its own ``__init__`` from a real
``SpeculativeConfig`` (a tiny DeepSeek-V3 target, a config-only MLA head:
``mla_head.py``, shared with the modules that build the same head), with
three parts replaced because they need CUDA kernels:
the MLA attention (``StubMLAAttention``: records the config it is given and
applies a fixed projection ``[num_tokens, input_size] -> [num_tokens,
hidden]``), the dense MLP and the RMSNorm (``TorchRMSNorm``: vLLM's RMSNorm
math in plain torch, weights loadable). Everything else is shipped code:
``combine_hidden_states``, the model's forward, ``load_weights`` with its
name mapping (``midlayer.`` -> ``layers.0.``, ``d2t`` -> the draft-to-target
map, ``t2d`` dropped).

Rules checked (upstream ``vllm/model_executor/models/deepseek_eagle3.py``,
v0.18.0, EAGLE 3.1 from v0.22.0/v0.23.0, vllm PRs #42764 and #43482):
``combine_hidden_states([num_tokens, 3 * target_hidden]) -> [num_tokens,
hidden]`` is ``fc`` of the concatenated states, each first normalised by
its own ``fc_norm`` RMSNorm when the head has ``fc_norm``; the model's
forward returns ``(normed, state for the next draft step)``, the latter
post-norm with ``norm_output`` and pre-norm without; the head keeps its
``rope_theta`` (vllm PR #51092, v0.28.0).

The differential tests run upstream v0.23.0's own ``deepseek_eagle3.py``
(extracted from the hash-pinned sdist by tests/integration/test_semantics.py,
path in ``VPQ_UPSTREAM_DEEPSEEK_EAGLE3``) with the same stubs, config,
weights and inputs, and require identical results.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest
import torch
from vllm.config import set_current_vllm_config

from tests.semantics import stubs, unpatched
from tests.semantics.mla_head import (
    N_AUX,
    ROPE_THETA,
    H,
    StubMLAAttention,
    aux_states,
    build,
    checkpoint,
    eagle3_vllm_config,
    rms,
    stub,
    write_head,
)

pytestmark = [
    unpatched.MLA_DRAFTER_MODULE,
    unpatched.MLA_DRAFTER_ARCH,
    unpatched.fails_unpatched_with(
        raises="ValidationError",
        match="model type `kimi_k2` but Transformers does not recognize",
        reason="0.17.1 cannot read a kimi_k2-typed head's config before use_mla is decided",
        dependency=True,
    ),
]


@pytest.fixture
def ours(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from vllm.model_executor.models import deepseek_eagle3

    stub(deepseek_eagle3, monkeypatch)
    return deepseek_eagle3


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    path = os.environ.get("VPQ_UPSTREAM_DEEPSEEK_EAGLE3")
    if not path:
        pytest.fail(
            "VPQ_UPSTREAM_DEEPSEEK_EAGLE3 is not set: run via tests/integration/test_semantics.py"
        )
    name = "vllm.model_executor.models._vpq_reference_deepseek_eagle3"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    stub(module, monkeypatch)
    return module


def test_load_weights_places_fc_norm_d2t_and_the_midlayer(ours, tmp_path, distributed) -> None:
    model, w = build(ours, tmp_path, distributed, fc_norm=True, norm_output=True)
    assert getattr(model.model, "fc_norm", None) is not None, "the head built no fc_norm"
    for i in range(N_AUX):
        torch.testing.assert_close(
            model.model.fc_norm[i].weight.data, w[f"fc_norm.{i}.weight"], rtol=0, atol=0
        )
    torch.testing.assert_close(model.model.fc.weight.data, w["fc.weight"], rtol=0, atol=0)
    torch.testing.assert_close(
        model.model.layers[0].hidden_norm.weight.data, w["midlayer.hidden_norm.weight"]
    )
    assert torch.equal(model.draft_id_to_target_id.data, w["d2t"])
    assert not any("t2d" in n for n, _ in model.named_parameters())


def test_plain_mla_head_loads_and_combines_the_aux_states_with_fc_alone(
    tmp_path, distributed, monkeypatch
) -> None:
    """The MLA drafter as 0.18.0 shipped it, before EAGLE 3.1: the class the
    loader resolves for a head naming ``Eagle3DeepseekV2ForCausalLM`` (the
    draft model config's architecture, through vLLM's registry) loads a
    head without ``fc_norm`` (fc, midlayer, ``d2t``) and combines the aux
    states with fc alone (the probe of the MLA drafter patch)."""
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.model_executor.models import ModelRegistry

    arch = "Eagle3DeepseekV2ForCausalLM"  # 0.17.1 refuses a head naming it
    assert arch in ModelRegistry.get_supported_archs(), f"vLLM's model registry has no {arch}"
    target = stubs.write_text_config(tmp_path / "target", 4)
    head = write_head(tmp_path / "head", fc_norm=False, norm_output=False)
    vc = eagle3_vllm_config(target, head)
    cls, resolved = get_model_architecture(vc.speculative_config.draft_model_config)
    assert resolved == arch
    stub(sys.modules[cls.__module__], monkeypatch)
    with set_current_vllm_config(vc):
        distributed()
        model = cls(vllm_config=vc, prefix="")
    every = checkpoint(tmp_path / "head.safetensors")
    w = {k: v for k, v in every.items() if not k.startswith("fc_norm.")}
    with set_current_vllm_config(vc):
        model.load_weights(w.items())
    torch.testing.assert_close(model.model.fc.weight.data, w["fc.weight"], rtol=0, atol=0)
    assert torch.equal(model.draft_id_to_target_id.data, w["d2t"])
    x = aux_states()
    torch.testing.assert_close(model.combine_hidden_states(x), x @ w["fc.weight"].T)


@pytest.mark.parametrize("model_type", ["deepseek_v2", "kimi_k2"])
def test_an_mla_head_of_either_model_type_uses_mla(tmp_path, model_type) -> None:
    """The draft model config of an MLA head says ``use_mla`` whether the head
    declares ``deepseek_v2`` or ``kimi_k2`` (Kimi-K2.6-style heads; vllm PR
    #45764): the probe of the kimi_k2 patch."""
    target = stubs.write_text_config(tmp_path / "target", 4)
    head = write_head(tmp_path / "head", fc_norm=False, norm_output=False)
    cfg = json.loads((head / "config.json").read_text())
    (head / "config.json").write_text(json.dumps({**cfg, "model_type": model_type}))
    vc = eagle3_vllm_config(target, head)
    assert vc.speculative_config.draft_model_config.use_mla is True


def test_combine_hidden_states_normalises_each_state_with_fc_norm(
    ours, tmp_path, distributed
) -> None:
    model, w = build(ours, tmp_path, distributed, fc_norm=True, norm_output=False)
    x = aux_states()
    chunks = x.chunk(N_AUX, dim=-1)
    expected = (
        torch.cat([rms(c, w[f"fc_norm.{i}.weight"]) for i, c in enumerate(chunks)], -1)
        @ w["fc.weight"].T
    )
    got = model.combine_hidden_states(x)
    assert got.shape == (5, H)
    torch.testing.assert_close(got, expected)


def test_combine_hidden_states_is_plain_fc_without_fc_norm(ours, tmp_path, distributed) -> None:
    model, w = build(ours, tmp_path, distributed, fc_norm=False, norm_output=False)
    assert model.model.fc_norm is None
    x = aux_states()
    torch.testing.assert_close(model.combine_hidden_states(x), x @ w["fc.weight"].T)


@pytest.mark.parametrize("norm_output", [True, False])
def test_norm_output_chooses_the_state_for_the_next_draft_step(
    ours, tmp_path, distributed, norm_output
) -> None:
    model, w = build(ours, tmp_path, distributed, fc_norm=True, norm_output=norm_output)
    ids, pos = torch.tensor([3, 9, 27, 81, 5]), torch.arange(5)
    hidden = model.combine_hidden_states(aux_states())
    normed, nxt = model(ids, pos, hidden)
    assert normed.shape == nxt.shape == (5, H)
    # normed = norm(prenorm); prenorm = normed / (norm weight * 1/rms): recompute it.
    layer_out, residual = model.model.layers[0](pos, model.model.embed_input_ids(ids), hidden, None)
    prenorm = layer_out + residual
    torch.testing.assert_close(normed, rms(prenorm, w["norm.weight"]))
    torch.testing.assert_close(nxt, normed if norm_output else prenorm)
    assert not torch.allclose(normed, prenorm)


def test_mla_drafter_keeps_rope_theta(ours, tmp_path, distributed) -> None:
    StubMLAAttention.configs.clear()
    build(ours, tmp_path, distributed, fc_norm=False, norm_output=False)
    (cfg,) = StubMLAAttention.configs
    assert cfg.rope_parameters.get("rope_theta") == ROPE_THETA, cfg.rope_parameters
    assert cfg.rope_parameters["rope_type"] == "default"


@pytest.mark.parametrize(("fc_norm", "norm_output"), [(True, True), (True, False), (False, False)])
def test_same_as_upstream_0_23_0(
    ours, reference, tmp_path, distributed, fc_norm, norm_output
) -> None:
    a, _ = build(ours, tmp_path / "ours", distributed, fc_norm=fc_norm, norm_output=norm_output)
    b, _ = build(reference, tmp_path / "ref", distributed, fc_norm=fc_norm, norm_output=norm_output)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0)
    x = aux_states()
    ha, hb = a.combine_hidden_states(x), b.combine_hidden_states(x)
    torch.testing.assert_close(ha, hb, rtol=0, atol=0)
    ids, pos = torch.tensor([3, 9, 27, 81, 5]), torch.arange(5)
    for oa, ob in zip(a(ids, pos, ha), b(ids, pos, hb), strict=True):
        torch.testing.assert_close(oa, ob, rtol=0, atol=0)


def test_differs_from_0_23_0_which_drops_rope_theta(reference, tmp_path, distributed) -> None:
    """Upstream's drafter before v0.28.0 (vllm PR #51092) replaces
    rope_parameters with ``{"rope_type": "default"}`` when the head has no
    rope_scaling, so get_rope falls back to base 10000: the rope test above
    fails on that code."""
    StubMLAAttention.configs.clear()
    build(reference, tmp_path, distributed, fc_norm=False, norm_output=False)
    (cfg,) = StubMLAAttention.configs
    assert cfg.rope_parameters == {"rope_type": "default"}
