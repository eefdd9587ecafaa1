"""Pipeline parallel 2 under Ray, with EAGLE-3: lossless against no speculation.

``distributed_executor_backend="ray"``, ``pipeline_parallel_size=2`` on two
GPUs (one stage each: Ray's executor, not the multiprocessing one the
other cases use), the fixture's EAGLE-3 head on the last stage; the same
engine without speculation is the reference. The head's ids (1, 2, 3) put
two aux layers on the first stage, so the aux states travel between the
Ray workers (``deepseek_v2-carry-eagle3-aux-states-across-pipeline-
stages.patch``). Checked: both stages set the head's ids, drafts are made
and verified, and greedy outputs match by vLLM's own rule for EAGLE
equivalence (``test_greedy_outputs_match_without_speculation``).

Runs where Ray is installed beside vLLM (``pip install ray``; the wheel's
dependencies do not pull it in) and two GPUs are visible; elsewhere it
skips with one line. The CPU engine tier cannot run it: the CPU platform
turns every distributed executor backend into ``mp``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import pytest

from tests.support.engine_result import ok
from tests.support.gpu_cases import (
    NUM_SPECULATIVE_TOKENS,
    PROMPTS,
    Checkpoints,
    cuda_device_count,
    engine_spec,
    run_probe,
)

RAY_PP = {"pipeline_parallel_size": 2, "distributed_executor_backend": "ray"}


@pytest.fixture(scope="module")
def ray_engine(checkpoints: Checkpoints, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``ray_engine(eagle3)``: PP=2 under Ray, one GPU per stage, started once."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed beside vLLM (pip install ray)")
    if cuda_device_count() < 2:
        pytest.skip(f"PP=2 under Ray needs 2 GPUs, {cuda_device_count()} visible")

    @functools.cache
    def get(eagle3: bool) -> dict[str, Any]:
        spec = engine_spec(checkpoints, 1, eagle3) | {"engine_args": dict(RAY_PP)}
        workdir = tmp_path_factory.mktemp(f"ray-pp2-{'eagle3' if eagle3 else 'ref'}")
        return run_probe(sys.executable, spec, workdir, 1800)

    return get


def test_ray_pipeline_parallel_2_starts_with_the_heads_ids_on_both_stages(
    ray_engine, checkpoints: Checkpoints
) -> None:
    e = ok(ray_engine(True))["engine"]
    assert e["speculative"]["num_speculative_tokens"] == NUM_SPECULATIVE_TOKENS, e
    ids = checkpoints.drafter_config.get("eagle_aux_hidden_state_layer_ids")
    workers = e["workers"]
    assert len(workers) == 2, workers  # one per stage
    for w in workers:
        assert w["aux_layers"] == (list(ids) if ids else w["default_aux_layers"]), w


def test_ray_pipeline_parallel_2_greedy_outputs_match_without_speculation(
    ray_engine,
) -> None:
    """vLLM's rule (tests/v1/e2e/test_spec_decode.py, 0.17.1): more than 60%
    of the prompts identical over 10 greedy tokens, on token ids; drafts made."""
    spec, ref = ok(ray_engine(True))["batches"], ok(ray_engine(False))["batches"]
    m = spec["greedy"]["metrics"]
    assert m["num_drafts"] > 0 and ref["greedy"]["metrics"]["num_drafts"] == 0, m
    spec_out = [o["token_ids"] for o in spec["greedy"]["outputs"]]
    ref_out = [o["token_ids"] for o in ref["greedy"]["outputs"]]
    assert len(spec_out) == len(ref_out) == len(PROMPTS) and all(ref_out)
    matches = sum(a == b for a, b in zip(spec_out, ref_out, strict=True))
    assert matches > int(0.6 * len(ref_out)), f"{matches}/{len(ref_out)} matched"
