"""Differential test against upstream's own implementation (vLLM 0.18.1).

Upstream added EAGLE-3 aux hidden states to ``DeepseekV2Model.forward`` in
v0.18.0. The driver (tests/integration/test_semantics.py) extracts that
function's source from the hash-pinned 0.18.1 sdist and passes its path in
``VPQ_UPSTREAM_DEEPSEEK_V2``. Here it runs as a method of the same real
model, with the same stub layers, as our patched forward, and for every id
upstream supports (``0..N-1``) both must agree exactly. Where we deliberately
differ, the test says so in its name.
"""

from __future__ import annotations

import ast
import itertools
import os
import textwrap
from pathlib import Path

import pytest
import torch
from vllm.model_executor.models import deepseek_v2 as ds
from vllm.sequence import IntermediateTensors

from tests.semantics import stubs, unpatched

pytestmark = [unpatched.AUX_INTERFACE]

IDS = torch.tensor([7, 2, 9])
POS = torch.arange(3)
N = 5


@pytest.fixture(scope="module")
def upstream_forward():  # type: ignore[no-untyped-def]
    path = os.environ.get("VPQ_UPSTREAM_DEEPSEEK_V2")
    if not path:
        pytest.fail(
            "VPQ_UPSTREAM_DEEPSEEK_V2 is not set: run via tests/integration/test_semantics.py"
        )
    tree = ast.parse(Path(path).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DeepseekV2Model"]
    (fn,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    src = textwrap.dedent(ast.get_source_segment(Path(path).read_text(), fn) or "")
    namespace: dict[str, object] = {}
    # The live module dict as globals, so the test's get_pp_group applies.
    exec(compile(src, f"{path}:DeepseekV2Model.forward", "exec"), ds.__dict__, namespace)
    return namespace["forward"]


def both(model, upstream_forward, layers, **kw):  # type: ignore[no-untyped-def]
    model.set_aux_hidden_state_layers(layers)
    ours = model.model(IDS, POS, kw.get("intermediate_tensors"))
    theirs = upstream_forward(model.model, IDS, POS, kw.get("intermediate_tensors"))
    return ours, theirs


def assert_same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert type(a) is type(b)
    if isinstance(a, tuple):
        torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)
        assert len(a[1]) == len(b[1])
        for x, y in zip(a[1], b[1], strict=True):
            torch.testing.assert_close(x, y, rtol=0, atol=0)
    else:
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_matches_0_18_1_for_every_nonempty_set_of_ids_from_1_to_n_minus_1(
    make_model, upstream_forward
) -> None:
    """The ids 0.18.1 supports: it crashes on 0 and drops N (tests below)."""
    model = make_model(N)
    for k in range(1, N):
        for layers in itertools.combinations(range(1, N), k):
            ours, theirs = both(model, upstream_forward, layers)
            assert isinstance(ours, tuple), layers
            assert_same(ours, theirs)


def test_matches_0_18_1_after_aux_layers_are_cleared(make_model, upstream_forward) -> None:
    model = make_model(N)
    model.set_aux_hidden_state_layers((1,))
    ours, theirs = both(model, upstream_forward, ())
    assert isinstance(ours, torch.Tensor)
    assert_same(ours, theirs)


def test_matches_0_18_1_on_a_pp_last_rank_holding_the_ids(
    make_model, pp_rank, upstream_forward
) -> None:
    model = make_model(N)
    streams = stubs.oracle_streams(IDS, N)
    pp_rank(model, 2, N, first=False, last=True)
    inter = IntermediateTensors({"hidden_states": streams[2] - streams[1], "residual": streams[1]})
    ours, theirs = both(model, upstream_forward, (2, 4), intermediate_tensors=inter)
    assert_same(ours, theirs)


def test_differs_from_0_18_1_at_id_zero_where_0_18_1_crashes(make_model, upstream_forward) -> None:
    """Deliberate: on the first rank the residual entering layer 0 is None,
    and 0.18.1 computes ``hidden_states + residual`` anyway (TypeError). We
    return the embedding output."""
    model = make_model(N)
    model.set_aux_hidden_state_layers((0, 2))
    with pytest.raises(TypeError):
        upstream_forward(model.model, IDS, POS, None)
    _, aux = model.model(IDS, POS, None)
    streams = stubs.oracle_streams(IDS, N)
    torch.testing.assert_close(aux[0], streams[0], rtol=0, atol=0)
    torch.testing.assert_close(aux[1], streams[2], rtol=0, atol=0)


def test_differs_from_0_18_1_by_returning_id_n_which_0_18_1_silently_drops(
    make_model, upstream_forward
) -> None:
    """Deliberate: 0.18.1 collects only ids entering a layer, so id N (the
    stream after the last layer) is dropped and the drafter gets fewer states
    than it was configured for. We return it."""
    model = make_model(N)
    ours, theirs = both(model, upstream_forward, (1, N))
    assert len(ours[1]) == 2 and len(theirs[1]) == 1
    torch.testing.assert_close(ours[1][0], theirs[1][0], rtol=0, atol=0)
    torch.testing.assert_close(ours[1][1], stubs.oracle_streams(IDS, N)[N], rtol=0, atol=0)


def test_differs_from_0_18_1_on_a_pp_last_rank_by_returning_the_earlier_stages_states(
    make_model, pp_rank, upstream_forward
) -> None:
    """Deliberate: 0.18.1's last rank drops the states of ids on earlier
    stages, and returns a bare tensor when none fell on it, which the
    runner, expecting (hidden, aux), fails to unpack. We return the states
    the earlier stages carried in the intermediate tensors."""
    model = make_model(N)
    streams = stubs.oracle_streams(IDS, N)
    pp_rank(model, 3, N, first=False, last=True)
    inter = IntermediateTensors(
        {
            "hidden_states": streams[3] - streams[2],
            "residual": streams[2],
            "aux_hidden_states_0": streams[0],
            "aux_hidden_states_1": streams[1],
        }
    )
    ours, theirs = both(model, upstream_forward, (0, 1), intermediate_tensors=inter)
    assert isinstance(ours, tuple) and len(ours[1]) == 2
    torch.testing.assert_close(ours[1][1], streams[1], rtol=0, atol=0)
    assert isinstance(theirs, torch.Tensor)
    torch.testing.assert_close(ours[0], theirs, rtol=0, atol=0)
