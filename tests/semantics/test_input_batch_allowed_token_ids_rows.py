"""One request's ``allowed_token_ids`` never constrains another's
(GHSA-6cxc-2vcg-w5qc).

``v1/worker/gpu_input_batch-keep-allowed_token_ids-masks-with-their-requests.patch``
(0.31.0's ``InputBatch``): 0.17.1's ``condense`` copies the mask row of the
request it moves into the freed slot but leaves the old row set, and
``add_request`` writes a row only for a request that has
``allowed_token_ids``: the next request placed in that slot samples under
the moved request's mask. ``swap_states`` (the MLA backends' decode/prefill
reorder, Kimi-K2.5's path) swaps two rows by assigning views, so both end up
with the second row's mask. The real ``InputBatch``, on CPU.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from vllm.sampling_params import SamplingParams
from vllm.v1.worker import gpu_input_batch
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

VOCAB = 64


def _batch(monkeypatch: pytest.MonkeyPatch) -> InputBatch:
    """A 4-slot batch on CPU, with the arguments this release's constructor
    takes (0.17.1's, and those of the releases with the fix; those read a
    module-level PIN_MEMORY instead, which no CPU-only host can honour)."""
    monkeypatch.setattr(gpu_input_batch, "PIN_MEMORY", False, raising=False)
    offered = {
        "max_num_reqs": 4,
        "max_model_len": 64,
        "max_num_batched_tokens": 64,
        "device": torch.device("cpu"),
        "pin_memory": False,
        "vocab_size": VOCAB,
        "block_sizes": [16],
        "kernel_block_sizes": [16],
        "max_num_blocks_per_req": [4],
    }
    takes = inspect.signature(InputBatch).parameters
    return InputBatch(**{k: v for k, v in offered.items() if k in takes})


def _request(name: str, allowed: list[int] | None = None) -> CachedRequestState:
    return CachedRequestState(
        req_id=name,
        prompt_token_ids=[1, 2, 3],
        mm_features=[],
        sampling_params=SamplingParams(temperature=1.0, allowed_token_ids=allowed),
        generator=None,
        block_ids=([],),
        num_computed_tokens=0,
        output_token_ids=[],
    )


def _disallowed(batch: InputBatch, name: str) -> int:
    """How many tokens the sampler masks out for request ``name``."""
    batch.refresh_metadata()
    mask = batch.sampling_metadata.allowed_token_ids_mask
    assert mask is not None, "a request with allowed_token_ids is in the batch"
    return int(mask[batch.req_id_to_index[name]].sum())


def test_a_request_placed_where_a_constrained_one_was_moved_from_is_not_constrained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = _batch(monkeypatch)
    for req in (_request("b"), _request("gone"), _request("a", allowed=[5])):
        batch.add_request(req)
    batch.remove_request("gone")
    batch.condense()  # "a" moves from slot 2 into slot 1
    batch.add_request(_request("c"))  # slot 2 again, without allowed_token_ids
    assert batch.req_id_to_index["c"] == 2
    assert _disallowed(batch, "a") == VOCAB - 1
    assert _disallowed(batch, "c") == 0, "c samples under a's allowed_token_ids"


def test_swapping_two_requests_swaps_their_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = _batch(monkeypatch)
    batch.add_request(_request("x", allowed=[1]))
    batch.add_request(_request("y", allowed=[2, 3]))
    batch.swap_states(0, 1)
    batch.refresh_metadata()
    mask = batch.sampling_metadata.allowed_token_ids_mask
    assert mask is not None
    allowed = {
        name: (~mask[batch.req_id_to_index[name]]).nonzero().flatten().tolist()
        for name in ("x", "y")
    }
    assert allowed == {"x": [1], "y": [2, 3]}, allowed
