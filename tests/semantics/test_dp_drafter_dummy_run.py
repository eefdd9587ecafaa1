"""A data-parallel rank that cannot run the drafter still joins its
collectives (backport of vllm PR #40589, first released in v0.25.0; patch
``gpu_model_runner-dp-dummy-drafter-run-near-max-model-len.patch``).

With data parallelism every rank's drafter forward syncs across DP (batch
padding, and the expert-parallel collectives of a MoE target). In 0.17.1
a rank whose batch is within ``num_speculative_tokens`` of
``max_model_len`` skips the drafter while the other ranks run it, and the
server hangs. Upstream's rule (``GPUModelRunner.sample_tokens`` in
0.25.0): when the input does not fit in the drafter and
``data_parallel_size > 1``, run ``drafter.dummy_run(num_tokens=1)``.

``GPUModelRunner`` needs CUDA to construct, so ``sample_tokens`` (the
shipped method) runs on a stand-in runner whose sampling, bookkeeping and
drafter are recorders; no collective runs here. Each test fails on
unpatched 0.17.1 and on the series before this patch.
"""

from __future__ import annotations

import ast
import inspect
from types import SimpleNamespace

import pytest
import torch

MAX_MODEL_LEN = 64
NUM_SPEC = 3


class EagleOnly(SimpleNamespace):
    """A speculative config for EAGLE: every other method query
    (``uses_draft_model()``, and those later releases add, such as 0.25.0's
    ``use_dflash()`` and ``use_ngram_gpu()``) answers False."""

    def __getattr__(self, name: str) -> object:
        if name.startswith(("use_", "uses_")):
            return lambda: False
        raise AttributeError(name)


class DraftingDone(Exception):
    """Raised by the stand-in ``eplb_step``, which ``sample_tokens`` calls
    once both drafter paths are through (0.17.1 through 0.33.0); what follows
    builds the step's output, which these tests do not read."""


def _drafting_done(*a: object, **kw: object) -> None:
    raise DraftingDone


def sample_tokens(r) -> None:  # type: ignore[no-untyped-def]
    """Run the shipped ``GPUModelRunner.sample_tokens`` up to ``eplb_step``."""
    with pytest.raises(DraftingDone):
        r.sample_tokens(None)


def bookkeeping_arity(runner_cls: type) -> int:
    """How many values ``_bookkeeping_sync`` returns, from its annotation
    (``tuple[...]``: seven in 0.17.1, eight from 0.28.0)."""
    ann = inspect.signature(runner_cls._bookkeeping_sync).return_annotation
    tree = ast.parse(ann if isinstance(ann, str) else repr(ann), mode="eval").body
    assert isinstance(tree, ast.Subscript) and isinstance(tree.slice, ast.Tuple), ann
    return len(tree.slice.elts)


def _runner(max_seq_len: int, dp: int, padded: bool = True):  # type: ignore[no-untyped-def]
    from vllm.v1.spec_decode.eagle import EagleProposer
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    calls: list[tuple[str, object]] = []
    drafter = object.__new__(EagleProposer)
    drafter.dummy_run = lambda num_tokens, **kw: calls.append(("dummy_run", num_tokens))  # type: ignore[method-assign]
    r = object.__new__(GPUModelRunner)
    attn = SimpleNamespace(max_seq_len=max_seq_len)
    r.execute_model_state = (
        SimpleNamespace(total_num_scheduled_tokens=1),
        None,
        None,
        attn,
        None,
        None,
        None,
        None,
        None,
        None,
    )
    r._sample = lambda logits, meta: SimpleNamespace(
        sampled_token_ids=torch.zeros(1, 1, dtype=torch.int32)
    )
    r._update_states_after_model_execute = lambda *a: None
    r.use_async_scheduling = False
    r.input_batch = SimpleNamespace(
        prev_sampled_token_ids=None, req_ids=["r0"], sampling_metadata=None
    )
    r.speculative_config = EagleOnly(
        use_eagle=lambda: True, disable_padded_drafter_batch=not padded
    )
    r.device = torch.device("cpu")
    r.broadcast_pp_output = False
    r.drafter = drafter
    r.num_spec_tokens = NUM_SPEC
    r.effective_drafter_max_model_len = MAX_MODEL_LEN
    r.valid_sampled_token_count_event = None
    r.parallel_config = SimpleNamespace(data_parallel_size=dp)
    r.propose_draft_token_ids = lambda *a, **kw: calls.append(("propose", None))
    r._copy_draft_token_ids_to_cpu = lambda *a, **kw: None
    n = bookkeeping_arity(GPUModelRunner)
    r._bookkeeping_sync = lambda *a: (None,) * n  # read only after eplb_step
    r.clear_kv_connector_metadata = lambda: None
    r.finalize_kv_connector = lambda: None
    r.eplb_step = _drafting_done
    r.kv_connector_output = None
    r.model_config = SimpleNamespace(enable_return_routed_experts=False)
    r.supports_mm_inputs = False
    return r, calls


@pytest.mark.parametrize("padded", [True, False], ids=["padded-drafter-batch", "padding-disabled"])
def test_dp_rank_near_max_model_len_takes_the_dummy_drafter_run(padded: bool) -> None:
    """Both drafter paths of ``sample_tokens``: the default padded batch
    (drafts before bookkeeping) and ``disable_padded_drafter_batch`` (after)."""
    r, calls = _runner(max_seq_len=MAX_MODEL_LEN - NUM_SPEC + 1, dp=2, padded=padded)
    sample_tokens(r)
    assert calls == [("dummy_run", 1)]


@pytest.mark.parametrize(
    "max_seq_len, dp, expected",
    [
        (MAX_MODEL_LEN - NUM_SPEC, 2, [("propose", None)]),  # fits: the real drafter runs
        (MAX_MODEL_LEN - NUM_SPEC + 1, 1, []),
    ],  # no DP: nothing to keep in step
)
def test_dummy_drafter_run_only_where_a_dp_rank_skips_the_drafter(
    max_seq_len, dp, expected
) -> None:
    """Pins the rule's edges; with the first test, fails where the dummy run
    is missing."""
    r, calls = _runner(max_seq_len=max_seq_len, dp=dp)
    sample_tokens(r)
    assert calls == expected
    r2, calls2 = _runner(max_seq_len=MAX_MODEL_LEN, dp=4)
    sample_tokens(r2)
    assert calls2 == [("dummy_run", 1)]
