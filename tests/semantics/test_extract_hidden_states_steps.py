"""Hidden-state extraction past its first step.

``extract_hidden_states-serve-synchronous-scheduling-and-later-ste.patch``
(0.20.0's proposer; vllm PR #37013, 0.18.0, for the connector). Rules: the
extraction "drafter" proposes one draft per request, ``[batch, 1]``, the
target-sampled column, whatever columns the sampled ids have (0.17.1
unsqueezed them, 0.18.0 returned them whole, and the copy into the runner's
``[batch, 1]`` draft buffer failed at once); and the hidden-states connector
takes a step in which a running request gets no new block (its second output
token, a later prefill chunk that fits its last block) without failing
(0.17.1: ``assert new_block_ids is not None`` killed EngineCore). The engine
tier's ``test_extract_hidden_states.py`` runs both on a real engine; here the
proposer and the connector are driven directly, with stand-ins for the
model and the scheduler's output.
"""

from __future__ import annotations

import contextlib
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
import torch


class _Builder:
    def build_for_drafting(self, common_attn_metadata: object, draft_index: int) -> None:
        return None


def _proposer(num_tokens: int) -> SimpleNamespace:
    """What ``propose`` reads of its proposer, with a model that does nothing."""
    return SimpleNamespace(
        model=lambda hidden_states: None,
        hidden_states=torch.zeros(num_tokens, 2, 4),
        attn_metadata_builder=_Builder(),
        attn_layer_names=[],
        _determine_batch_execution_and_padding=lambda n: (None, n, None),
        _get_slot_mapping=lambda n, slot_mapping: slot_mapping,
        dp_rank=0,
        vllm_config=None,
        eplb_state=None,  # 0.33.0
        num_speculative_tokens=1,  # 0.33.0
    )


def test_the_proposer_returns_one_draft_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.v1.spec_decode import extract_hidden_states as ehs

    monkeypatch.setattr(ehs, "set_forward_context", lambda *a, **k: contextlib.nullcontext())
    # the rejection sampler's output on a step with one verified draft a
    # request: the target-sampled column, then the bonus token or -1
    sampled = torch.tensor([[5, 8], [6, -1], [7, 9]])
    states = [torch.ones(3, 4), torch.zeros(3, 4)]  # two aux layers, three tokens
    kwargs: dict[str, Any] = {
        "sampled_token_ids": sampled,
        "target_hidden_states": states,
        "common_attn_metadata": SimpleNamespace(slot_mapping=None),
    }
    params = inspect.signature(ehs.ExtractHiddenStatesProposer.propose).parameters
    if "scheduler_output" in params:  # 0.17.1: the proposer ran the KV connector
        kwargs["scheduler_output"] = None
    if "num_speculative_tokens" in params:  # 0.33.0
        kwargs["num_speculative_tokens"] = 1
    out = ehs.ExtractHiddenStatesProposer.propose(_proposer(3), **kwargs)  # type: ignore[arg-type]
    drafts = out[0] if isinstance(out, tuple) else out
    assert drafts.tolist() == [[5], [6], [7]], f"draft ids of shape {tuple(drafts.shape)}"


def _connector(tmp: str) -> Any:
    from vllm.distributed.kv_transfer.kv_connector.v1 import example_hidden_states_connector as c

    conn = c.ExampleHiddenStatesConnector.__new__(c.ExampleHiddenStatesConnector)
    conn._storage_path, conn._block_size = tmp, 16
    conn._request_filenames, conn._pending_saves = {}, {}  # the latter: 0.33.0
    conn._active_requests = {"r": SimpleNamespace(req_id="r", prompt_token_ids=list(range(20)))}
    conn._req_blocks = {"r": [0, 1]}
    return conn


def test_a_running_request_without_a_new_block_is_taken(tmp_path: Any) -> None:
    """Request ``r`` (20 prompt tokens in blocks 0 and 1) decodes its second
    token: the scheduler gives it no new block (``new_block_ids`` None)."""
    conn = _connector(str(tmp_path))
    cached = SimpleNamespace(
        req_ids=["r"], new_block_ids=[None], num_computed_tokens=[21], resumed_req_ids=set()
    )
    output = SimpleNamespace(scheduled_new_reqs=[], scheduled_cached_reqs=cached)
    meta = conn.build_connector_meta(output)
    assert [m.req_id for m in getattr(meta, "requests", [])] == []  # nothing new to write
    assert conn._req_blocks["r"] == [0, 1]
