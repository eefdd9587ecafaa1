"""A worker builds its message queues after ``init_device``, so a node of a
multi-node deployment can start.

Module-level check of ``multiproc_executor-build-the-message-queues-after-
init_device.patch`` (vllm PR #35892, issue #36389, in 0.18.0). With
``--nnodes 2`` the multiprocessing executor's workers (``nnodes_within_dp``
> 1) reach the executor across nodes through queues made by the inner DP
world group, which ``worker.init_device()`` creates. 0.17.1's
``WorkerProc.__init__`` asks for that group before ``init_device``, so
every worker on both nodes dies at start with ``AssertionError: inner dp
world group is not initialized``.

The real ``WorkerProc.__init__`` runs here on stand-ins: a worker wrapper
whose ``init_device`` installs a stand-in group where vLLM's
``get_inner_dp_world_group`` looks for it (``parallel_state._INNER_DP_WORLD``),
and a stand-in ``MessageQueue`` for the single-node queues. Each records
what happened in order. The engine tier (tests/engine/test_two_nodes.py,
outside CI) starts two real nodes on loopback.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest

#: The order the patched ``__init__`` (and upstream's from 0.18.0) keeps.
EXPECTED = ["init_device", "load_model", "rpc broadcast queue", "response queue"]


def _config(nnodes_within_dp: int) -> SimpleNamespace:
    """What ``WorkerProc.__init__`` reads of a ``VllmConfig``: two ranks,
    one per node when ``nnodes_within_dp`` is 2 (PP=2 over two nodes)."""
    return SimpleNamespace(
        parallel_config=SimpleNamespace(
            world_size=2, nnodes_within_dp=nnodes_within_dp, enable_expert_parallel=False
        ),
        scheduler_config=SimpleNamespace(async_scheduling=False),
    )


def _stand_ins(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> SimpleNamespace:
    """Replace what ``WorkerProc.__init__`` reaches beyond itself; return
    the stand-in inner DP group and queues it should end up holding."""
    from vllm.distributed import parallel_state
    from vllm.v1.executor import multiproc_executor as mpe

    rpc_queue, response_queue = object(), object()
    peer_handles = ["handle of rank 0", "handle of rank 1"]

    class InnerDpGroup:
        """The cross-node group; its queue builders record their calls."""

        def create_mq_broadcaster(self, external_writer_handle: object, blocking: bool) -> object:
            events.append("rpc broadcast queue")
            self.broadcaster_args = (external_writer_handle, blocking)
            return rpc_queue

        def create_single_reader_mq_broadcasters(
            self, reader_rank_in_group: int
        ) -> tuple[object, list[str]]:
            events.append("response queue")
            return response_queue, peer_handles

    group = InnerDpGroup()

    class Wrapper:
        """``WorkerWrapperBase``: ``init_device`` creates the group, as the
        real worker's ``init_worker_distributed_environment`` does."""

        def __init__(self, rpc_rank: int, global_rank: int) -> None:
            self.rank = global_rank

        def init_worker(self, all_kwargs: list[dict[str, object]]) -> None:
            events.append("init_worker")

        def init_device(self) -> None:
            events.append("init_device")
            monkeypatch.setattr(parallel_state, "_INNER_DP_WORLD", group)

        def load_model(self) -> None:
            events.append("load_model")

    class MessageQueue:
        """The single-node queues (shared memory and zmq in vLLM)."""

        def __init__(self, n_reader: int, n_local_reader: int) -> None:
            events.append("response queue")

        @classmethod
        def create_from_handle(cls, handle: object, rank: int) -> object:
            events.append("rpc broadcast queue")
            return rpc_queue

    monkeypatch.delenv("VLLM_ELASTIC_EP_SCALE_UP_LAUNCH", raising=False)
    monkeypatch.setattr(parallel_state, "_INNER_DP_WORLD", None)
    monkeypatch.setattr(mpe, "WorkerWrapperBase", Wrapper)
    monkeypatch.setattr(mpe, "MessageQueue", MessageQueue)
    # process title and log prefix, the env cache: process-wide, not tested
    monkeypatch.setattr(
        mpe.WorkerProc, "setup_proc_title_and_log_prefix", staticmethod(lambda enable_ep: None)
    )
    monkeypatch.setattr(mpe, "enable_envs_cache", lambda: None)
    if hasattr(mpe, "current_platform"):  # 0.18.0 on: the block size update
        monkeypatch.setattr(
            mpe, "current_platform", SimpleNamespace(update_block_size_for_backend=lambda c: None)
        )
    return SimpleNamespace(
        group=group, rpc=rpc_queue, response=response_queue, peer_handles=peer_handles
    )


@pytest.fixture
def start_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[int], tuple[object, list[str], SimpleNamespace]]:
    """``start_worker(nnodes_within_dp)``: run the real ``WorkerProc.__init__``
    for rank 1 on the stand-ins; return the worker, the events in order and
    the stand-ins."""

    def start(nnodes_within_dp: int) -> tuple[object, list[str], SimpleNamespace]:
        from vllm.v1.executor.multiproc_executor import WorkerProc

        events: list[str] = []
        made = _stand_ins(monkeypatch, events)
        try:
            worker = WorkerProc(
                vllm_config=_config(nnodes_within_dp),
                local_rank=0,
                rank=1,
                distributed_init_method="tcp://127.0.0.1:1",
                input_shm_handle="the executor's handle",
                shared_worker_lock=None,
                is_driver_worker=False,
            )
        except AssertionError as e:  # vLLM's own assert in get_inner_dp_world_group
            pytest.fail(f"the worker died at start after {events}: {e}")
        return worker, events, made

    return start


def test_cross_node_queues_are_built_after_init_device_creates_their_group(
    start_worker: Callable[[int], tuple[object, list[str], SimpleNamespace]],
) -> None:
    worker, events, made = start_worker(2)
    assert events == ["init_worker", *EXPECTED]
    assert worker.rpc_broadcast_mq is made.rpc  # type: ignore[attr-defined]
    assert made.group.broadcaster_args == ("the executor's handle", False)
    assert worker.worker_response_mq is made.response  # type: ignore[attr-defined]
    assert worker.peer_response_handles == made.peer_handles  # type: ignore[attr-defined]


def test_single_node_queues_are_built_where_upstream_builds_them(
    start_worker: Callable[[int], tuple[object, list[str], SimpleNamespace]],
) -> None:
    """One node needs no group for its queues; the patch (as upstream from
    0.18.0) builds them at the same place, after ``load_model``."""
    worker, events, made = start_worker(1)
    assert events == ["init_worker", *EXPECTED]
    assert worker.rpc_broadcast_mq is made.rpc  # type: ignore[attr-defined]
    assert worker.peer_response_handles == []  # type: ignore[attr-defined]
