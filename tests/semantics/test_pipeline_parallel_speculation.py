"""Pipeline parallel with a drafter: stages without it skip its uses, and
one batch is in flight at a time, synchronously.

Module-level checks of ``gpu_model_runner-pipeline-stages-without-the-
drafter-skip-its-uses.patch`` and ``core-pipeline-parallel-speculative-
decoding-runs-one-batch-at-a-time.patch``; the engine tier (tests/engine/
test_pipeline_parallel.py) shows the same on a real engine. On unpatched
0.17.1 the runner test fails with the crash the patch fixes
(``AttributeError: ... 'drafter'``), the others on their assertions.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.semantics import unpatched


def _runner(drafter: object | None) -> object:
    """A ``GPUModelRunner`` made without ``__init__``: a stage with no KV
    cache groups, an EAGLE speculative config and ``drafter`` (None: a stage
    without one, as every stage but the last under pipeline parallelism)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = object.__new__(GPUModelRunner)
    runner.attn_groups = []
    runner.calculate_reorder_batch_threshold = lambda: None
    runner.speculative_config = SimpleNamespace(
        use_eagle=lambda: True, uses_draft_model=lambda: False
    )
    if drafter is not None:
        runner.drafter = drafter
    return runner


def _eagle_proposer(calls: list[object]) -> object:
    from vllm.v1.spec_decode.eagle import EagleProposer

    proposer = object.__new__(EagleProposer)
    proposer.initialize_attn_backend = lambda *args: calls.append(args)
    return proposer


@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="no attribute 'drafter'",
    reason="the crash the patch fixes: a stage without the drafter reached for it",
    dependency=False,
)
def test_stage_without_the_drafter_builds_its_metadata_builders() -> None:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    no_groups = SimpleNamespace(kv_cache_groups=[])
    GPUModelRunner.initialize_metadata_builders(_runner(None), no_groups, [])
    calls: list[object] = []
    GPUModelRunner.initialize_metadata_builders(_runner(_eagle_proposer(calls)), no_groups, [])
    assert calls == [(no_groups, [])], "the last stage still sets up its drafter"


def _config(pp: int, speculative: bool) -> object:
    return SimpleNamespace(
        parallel_config=SimpleNamespace(pipeline_parallel_size=pp),
        speculative_config=object() if speculative else None,
    )


@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="batch_queue_size",
    reason="the rule is a function of vllm.v1.engine.core the patch adds; the test asks it",
)
def test_engine_keeps_one_batch_in_flight_with_a_drafter_under_pipeline_parallel() -> None:
    """The engine core's batch queue where the executor cannot hand over
    each batch's drafts (Ray's compiled graph): one batch with a drafter
    over two stages; the executor's number otherwise. (The later overlap
    patch adds the third argument, whether it can.)"""
    from vllm.v1.engine import core

    assert core.batch_queue_size(_config(2, speculative=True), 2, False) == 1
    assert core.batch_queue_size(_config(2, speculative=False), 2, False) == 2
    assert core.batch_queue_size(_config(1, speculative=True), 2, False) == 2


def _vllm_config(tmp_path: Path, async_scheduling: bool | None) -> object:
    from vllm.config import (
        DeviceConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )
    from vpq.checkpoints import fixture

    target = ModelConfig(
        model=str(fixture.write_tiny_kimi_k25(tmp_path / "t")), skip_tokenizer_init=True
    )
    parallel = ParallelConfig(pipeline_parallel_size=2, distributed_executor_backend="mp")
    spec = SpeculativeConfig(
        target_model_config=target,
        target_parallel_config=parallel,
        method="eagle3",
        model=str(fixture.write_tiny_eagle3_drafter(tmp_path / "head")),
        num_speculative_tokens=2,
    )
    scheduler = SchedulerConfig(
        max_model_len=target.max_model_len,
        is_encoder_decoder=False,
        async_scheduling=async_scheduling,
    )
    return VllmConfig(
        model_config=target,
        parallel_config=parallel,
        scheduler_config=scheduler,
        speculative_config=spec,
        device_config=DeviceConfig(device="cpu"),
    )


@unpatched.PIPELINE_PARALLEL_REFUSED
def test_config_turns_async_scheduling_off_for_pipeline_parallel_speculation(
    tmp_path: Path,
) -> None:
    assert _vllm_config(tmp_path, None).scheduler_config.async_scheduling is False


@unpatched.PIPELINE_PARALLEL_REFUSED
def test_config_refuses_explicit_async_scheduling_with_pipeline_parallel_speculation(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="--no-async-scheduling"):
        _vllm_config(tmp_path, True)
