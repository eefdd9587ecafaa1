"""Semantics of the EAGLE-3 aux hidden states, on the shipped code.

Every rule here comes from the series (patch
``deepseek_v2-collect-eagle3-aux-hidden-states.patch``): ids are global
decoder-layer indices; id ``i`` is the residual stream entering layer ``i``
(the embedding output for ``i = 0``); id ``N`` the stream after the last
layer, before the final norm; states are ``[num_tokens, hidden_size]`` in
ascending order; ids outside ``0..N`` raise ``ValueError`` at set time.
Each test fails on unpatched vLLM 0.17.1.
"""

from __future__ import annotations

import pytest
import torch
from vllm.model_executor.models.interfaces import SupportsEagle3, supports_eagle3
from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration
from vllm.sequence import IntermediateTensors

from tests.semantics import stubs, unpatched

pytestmark = [unpatched.AUX_INTERFACE]

IDS = torch.tensor([3, 1, 4, 1, 5])
POS = torch.arange(5)
N = 8


def run(model, **kw):  # type: ignore[no-untyped-def]
    return model(IDS, POS, **kw)


def aux_of(model, layers):  # type: ignore[no-untyped-def]
    """Set ``layers`` the way the model runner does, then run forward.

    The runner sets aux layers only on a model that upstream's
    ``supports_eagle3`` accepts; on any other it raises "Model does not
    support EAGLE3 interface", which is what 0.17.1 does for DeepSeek-V3.
    """
    assert supports_eagle3(model), (
        f"{type(model).__name__} is not SupportsEagle3: the runner refuses EAGLE-3 on it"
    )
    model.set_aux_hidden_state_layers(layers)
    out = run(model)
    assert isinstance(out, tuple), f"forward returned {type(out).__name__}, not (hidden, aux)"
    return out


def test_aux_state_for_layer_zero_is_the_embedding(make_model) -> None:
    _, aux = aux_of(make_model(N), (0,))
    torch.testing.assert_close(aux[0], stubs.StubEmbedding(0, stubs.HIDDEN)(IDS), rtol=0, atol=0)


@pytest.mark.parametrize("layer", range(1, N))
def test_aux_state_for_layer_i_is_the_residual_stream_entering_it(make_model, layer: int) -> None:
    _, aux = aux_of(make_model(N), (layer,))
    torch.testing.assert_close(aux[0], stubs.oracle_streams(IDS, N)[layer], rtol=0, atol=0)


def test_aux_state_for_id_n_is_the_stream_before_the_final_norm(make_model) -> None:
    hidden, aux = aux_of(make_model(N), (N,))
    streams = stubs.oracle_streams(IDS, N)
    torch.testing.assert_close(aux[0], streams[N], rtol=0, atol=0)
    torch.testing.assert_close(hidden, streams[N] * 2.0, rtol=0, atol=0)  # the norm ran after


def test_states_come_back_in_ascending_order_whatever_the_order_set(make_model) -> None:
    _, aux = aux_of(make_model(N), (5, 1, 8, 3))
    streams = stubs.oracle_streams(IDS, N)
    assert len(aux) == 4
    for got, layer in zip(aux, (1, 3, 5, 8), strict=True):
        torch.testing.assert_close(got, streams[layer], rtol=0, atol=0)


def test_each_state_is_num_tokens_by_hidden_size(make_model) -> None:
    _, aux = aux_of(make_model(N), (0, 2, 8))
    assert [tuple(a.shape) for a in aux] == [(len(IDS), stubs.HIDDEN)] * 3


def test_hidden_output_is_the_same_with_and_without_aux_layers(make_model) -> None:
    model = make_model(N)
    plain = run(model)
    hidden, _ = aux_of(model, (1, 2, 3))
    torch.testing.assert_close(hidden, plain, rtol=0, atol=0)
    torch.testing.assert_close(hidden, stubs.oracle_streams(IDS, N)[N] * 2.0, rtol=0, atol=0)


def test_clearing_aux_layers_restores_the_plain_forward(make_model) -> None:
    model = make_model(N)
    model.set_aux_hidden_state_layers((2,))
    model.set_aux_hidden_state_layers(())
    out = run(model)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, stubs.oracle_streams(IDS, N)[N] * 2.0, rtol=0, atol=0)


@pytest.mark.parametrize("num_layers, expected", [(8, (2, 4, 5)), (61, (2, 30, 58))])
def test_default_layers_are_two_half_and_n_minus_three(
    make_model, num_layers: int, expected
) -> None:
    """61 decoder layers is Kimi-K2.5's (DeepSeek-V3's) depth."""
    assert make_model(num_layers).get_eagle3_aux_hidden_state_layers() == expected


@pytest.mark.parametrize("bad", [(-1,), (N + 1,), (0, N + 5)])
def test_ids_outside_zero_to_n_raise_value_error_naming_the_range(make_model, bad) -> None:
    model = make_model(N)
    with pytest.raises(ValueError, match=rf"valid ids are 0\.\.{N}"):
        model.set_aux_hidden_state_layers(bad)


def test_a_repeated_id_raises_value_error(make_model) -> None:
    with pytest.raises(ValueError, match="duplicates"):
        make_model(N).set_aux_hidden_state_layers((2, 2))


def test_pp_last_rank_returns_carried_states_then_its_own_for_global_ids(
    make_model, pp_rank
) -> None:
    model = make_model(N)
    streams = stubs.oracle_streams(IDS, N)
    pp_rank(model, 4, N, first=False, last=True)
    model.set_aux_hidden_state_layers((2, 5, 8))  # 2 lives on the previous rank
    inter = IntermediateTensors(
        {
            "hidden_states": streams[4] - streams[3],
            "residual": streams[3],
            "aux_hidden_states_2": streams[2],
        }
    )
    hidden, aux = run(model, intermediate_tensors=inter)
    assert len(aux) == 3
    for got, layer in zip(aux, (2, 5, 8), strict=True):
        torch.testing.assert_close(got, streams[layer], rtol=0, atol=0)
    torch.testing.assert_close(hidden, streams[N] * 2.0, rtol=0, atol=0)


def test_pp_last_rank_returns_a_tuple_even_if_no_id_falls_on_its_slice(make_model, pp_rank) -> None:
    model = make_model(N)
    streams = stubs.oracle_streams(IDS, N)
    pp_rank(model, 4, N, first=False, last=True)
    model.set_aux_hidden_state_layers((1, 2))
    inter = IntermediateTensors(
        {
            "hidden_states": streams[4] - streams[3],
            "residual": streams[3],
            "aux_hidden_states_1": streams[1],
            "aux_hidden_states_2": streams[2],
        }
    )
    out = run(model, intermediate_tensors=inter)
    assert isinstance(out, tuple) and len(out[1]) == 2
    torch.testing.assert_close(out[1][0], streams[1], rtol=0, atol=0)


def test_pp_first_rank_passes_intermediate_tensors_on_unchanged(make_model, pp_rank) -> None:
    model = make_model(N)
    streams = stubs.oracle_streams(IDS, N)
    pp_rank(model, 0, 4, first=True, last=False)
    model.set_aux_hidden_state_layers((1, 2, 6))
    out = run(model)
    assert isinstance(out, IntermediateTensors)
    torch.testing.assert_close(out["residual"], streams[3], rtol=0, atol=0)
    torch.testing.assert_close(out["hidden_states"] + out["residual"], streams[4], rtol=0, atol=0)


def test_kimi_k25_wrapper_declares_the_eagle3_interface() -> None:
    assert supports_eagle3(KimiK25ForConditionalGeneration)


def test_kimi_k25_wrapper_methods_are_not_the_protocol_stubs() -> None:
    for name in ("set_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers"):
        assert getattr(KimiK25ForConditionalGeneration, name) is not getattr(
            SupportsEagle3, name
        ), name


def test_kimi_k25_wrapper_delegates_set_and_get_to_the_language_model(make_model) -> None:
    lm = make_model(N)
    kimi = stubs.kimi_k25_wrapper(lm)
    assert kimi.get_eagle3_aux_hidden_state_layers() == (2, 4, 5)
    kimi.set_aux_hidden_state_layers((0, 8))
    assert lm.model.aux_hidden_state_layers == (0, 8)
    with pytest.raises(ValueError, match=r"valid ids are 0\.\.8"):
        kimi.set_aux_hidden_state_layers((9,))


def test_kimi_k25_wrapper_forward_returns_the_language_models_aux_states(make_model) -> None:
    kimi = stubs.kimi_k25_wrapper(make_model(N))
    kimi.set_aux_hidden_state_layers((0, 3))
    hidden, aux = kimi(IDS, POS)
    streams = stubs.oracle_streams(IDS, N)
    torch.testing.assert_close(aux[0], streams[0], rtol=0, atol=0)
    torch.testing.assert_close(aux[1], streams[3], rtol=0, atol=0)
