"""GPU integration tests: EAGLE-3 on a Kimi-K2.5-shaped target, end to end.

Run them with ``nox -s gpu_tests`` (it installs the built wheel with its
dependencies into a fresh environment and runs pytest there). Every test
here skips, with the reason, when vLLM is not importable or torch sees no
CUDA device, so ``nox -s tests`` on a CPU machine reports them as skipped.

Options (``nox -s gpu_tests -- ...`` passes them through):

- ``--model DIR --drafter DIR``: a real target checkpoint and its EAGLE-3
  head instead of the tiny fixture (``vpq.checkpoints.fixture``, dummy weights);
- ``--tensor-parallel-size N``: with real checkpoints (default 1); the tiny
  fixture runs at 1 and, with two or more GPUs, at 2;
- ``--upstream-python PATH`` (or ``$VPQ_UPSTREAM_PYTHON``): a python whose
  environment has the *unpatched* upstream wheel, for the negative test.

Each engine configuration (tensor-parallel size, with or without EAGLE-3,
which wheel) starts once per session in its own process
(``engine_probe.py``); the tests read its JSON result. The prompts,
checkpoints and engine specs are ``tests/support/gpu_cases.py``'s (tests/unit
checks the assertions on CPU); this file holds the tier's options, skips and
fixtures.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.gpu_cases import Checkpoints, cuda_device_count, engine_spec, run_probe


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("vpq-gpu", "GPU integration tests (tests/gpu)")
    g.addoption("--model", default=None, help="target checkpoint directory (default: tiny fixture)")
    g.addoption("--drafter", default=None, help="EAGLE-3 head directory (with --model)")
    g.addoption(
        "--tensor-parallel-size",
        type=int,
        default=None,
        help="tensor-parallel size for --model (default 1)",
    )
    g.addoption(
        "--upstream-python",
        default=None,
        help="python of an environment with the unpatched upstream wheel",
    )


def _opt(config: pytest.Config, name: str) -> Any:
    # Registered only when this conftest is an initial one (pytest tests/gpu ...).
    return config.getoption(name, default=None)


@functools.cache
def skip_reason() -> str | None:
    """Why the GPU tests cannot run here, or None."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed in this environment (run `nox -s gpu_tests`)"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed in this environment"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in item.path.parents]
    reason = skip_reason() if mine else None
    for item in mine if reason else []:
        item.add_marker(pytest.mark.skip(reason=reason))


def _checkpoints(config: pytest.Config, tmp: Path) -> Checkpoints:
    model, drafter = _opt(config, "--model"), _opt(config, "--drafter")
    if bool(model) != bool(drafter):
        raise pytest.UsageError("--model and --drafter go together")
    if model:
        return Checkpoints(Path(model).resolve(), Path(drafter).resolve(), True)
    from vpq.checkpoints import fixture

    target, head = fixture.write_fixture(tmp)
    return Checkpoints(target, head, False)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tp" in metafunc.fixturenames:
        tp = _opt(metafunc.config, "--tensor-parallel-size")
        sizes = [tp or 1] if _opt(metafunc.config, "--model") else [1, 2]
        metafunc.parametrize("tp", sizes, ids=[f"tp{n}" for n in sizes])


@pytest.fixture(scope="session")
def checkpoints(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Checkpoints:
    return _checkpoints(request.config, tmp_path_factory.mktemp("fixture"))


@pytest.fixture
def gpus(tp: int) -> int:
    """Skips a test that needs more GPUs than there are."""
    have = cuda_device_count()
    if have < tp:
        pytest.skip(f"tensor-parallel size {tp} needs {tp} GPUs, {have} visible")
    return tp


@pytest.fixture(scope="session")
def engine(checkpoints: Checkpoints, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``engine(tp, eagle3, python=None)``: the engine probe's result, run once per key."""
    cache: dict[tuple[int, bool, str], dict[str, Any]] = {}

    def get(tp: int, eagle3: bool, python: str | None = None) -> dict[str, Any]:
        key = (tp, eagle3, python or sys.executable)
        if key not in cache:
            name = f"tp{tp}-{'eagle3' if eagle3 else 'ref'}-{'upstream' if python else 'patched'}"
            workdir = tmp_path_factory.mktemp(name)
            timeout = 3600 if checkpoints.real else 900
            cache[key] = run_probe(key[2], engine_spec(checkpoints, tp, eagle3), workdir, timeout)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def upstream_python(request: pytest.FixtureRequest) -> str:
    py = _opt(request.config, "--upstream-python") or os.environ.get("VPQ_UPSTREAM_PYTHON")
    if not py:
        pytest.skip(
            "no python with the unpatched upstream wheel (--upstream-python or "
            "VPQ_UPSTREAM_PYTHON; `nox -s gpu_tests` provides one)"
        )
    return py


REPORT_KEY = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def report(request: pytest.FixtureRequest) -> list[str]:
    """Lines printed in the terminal summary (numbers to report, not assertions)."""
    return request.config.stash.setdefault(REPORT_KEY, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    lines = config.stash.get(REPORT_KEY, [])
    if lines:
        terminalreporter.section("EAGLE-3 acceptance and throughput")
        for line in lines:
            terminalreporter.write_line(line)
