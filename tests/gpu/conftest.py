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
(``engine_probe.py``); the tests read its JSON result.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).parent.parent / "engine" / "engine_probe.py"
NUM_SPECULATIVE_TOKENS = 3  # as vLLM's own EAGLE correctness tests
#: Greedy, 10 new tokens: the sampling vLLM 0.17.1's
#: tests/v1/e2e/test_spec_decode.py uses for its equivalence checks (which
#: honour EOS; so do we with real checkpoints, see ``batches``).
EQUIVALENCE_MAX_TOKENS = 10
BENCH_MAX_TOKENS = 256
#: One 224 x 168 pixel image: with the fixture's processor, 16 x 12 patches
#: of 14 pixels, merged 2 x 2 into 48 placeholder tokens.
IMAGE_SIZE = [224, 168]
FIXTURE_IMAGE_TOKENS = 48
#: Kimi-K2.5's image prompt, from vLLM 0.17.1's
#: examples/offline_inference/vision_language.py (run_kimi_k25).
IMAGE_PROMPT = (
    "<|im_user|>user<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
    "Describe this image in one sentence.<|im_end|><|im_assistant|>assistant<|im_middle|>"
)
PROMPTS = [
    "Please repeat the word 'hello' ten times.",
    "Please repeat the word 'where' ten times.",
    "Write a haiku about the sea.",
    "What is the capital of France?",
    "List the first ten prime numbers.",
    "Explain speculative decoding in one sentence.",
    "Translate 'good morning' into German.",
    "Count from one to twenty.",
    "Name three colours of the rainbow.",
    "Why is the sky blue?",
    "Give a synonym for quick.",
    "Finish the sentence: the quick brown fox",
    "What does a compiler do?",
    "Spell the word banana backwards.",
    "How many legs does a spider have?",
    "Describe a cat in five words.",
    "Sort these numbers: 9, 2, 7, 4.",
    "What is twelve times twelve?",
    "Suggest a name for a small boat.",
    "Write one line of Python that prints hi.",
]


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


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in item.path.parents]
    reason = skip_reason() if mine else None
    for item in mine if reason else []:
        item.add_marker(pytest.mark.skip(reason=reason))


@dataclass(frozen=True)
class Checkpoints:
    """The target and drafter directories under test."""

    target: Path
    drafter: Path
    real: bool  # False: the tiny fixture with dummy weights

    @functools.cached_property
    def target_config(self) -> dict[str, Any]:
        return json.loads((self.target / "config.json").read_text())

    @functools.cached_property
    def drafter_config(self) -> dict[str, Any]:
        return json.loads((self.drafter / "config.json").read_text())

    @property
    def is_kimi_k25(self) -> bool:
        return "KimiK25ForConditionalGeneration" in self.target_config.get("architectures", [])


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


def batches(ck: Checkpoints) -> list[dict[str, Any]]:
    """The requests every engine runs, in order (see engine_probe.py)."""
    if ck.real:
        chats = [[{"role": "user", "content": p}] for p in PROMPTS]
        out = [
            {
                "name": "greedy",
                "kind": "chat",
                "prompts": chats,
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        ]
    else:
        # Raw prompts: a dummy-weight model mostly reacts to the last token,
        # and a chat template would end every prompt the same way.
        out = [
            {
                "name": "greedy",
                "kind": "text",
                "prompts": PROMPTS,
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        ]
    if ck.is_kimi_k25:
        image = {"prompt": IMAGE_PROMPT, "image_size": IMAGE_SIZE}
        out.append(
            {
                "name": "image",
                "kind": "image",
                "prompts": [image],
                "max_tokens": EQUIVALENCE_MAX_TOKENS,
            }
        )
    if ck.real:
        out.append(
            {"name": "bench", "kind": "chat", "prompts": chats, "max_tokens": BENCH_MAX_TOKENS}
        )
    for b in out:
        # EOS means nothing to dummy weights; ignoring it there keeps every
        # request decoding (and drafting) for all its tokens.
        b["ignore_eos"] = not ck.real
    return out


def engine_spec(ck: Checkpoints, tp: int, eagle3: bool) -> dict[str, Any]:
    return {
        "model": str(ck.target),
        "drafter": str(ck.drafter) if eagle3 else None,
        "tp": tp,
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "load_format": "auto" if ck.real else "dummy",
        # The real Kimi-K2.5 tokenizer is remote code; the fixture's is not.
        "trust_remote_code": ck.real,
        "max_model_len": 4096 if ck.real else 1024,
        "max_num_seqs": None if ck.real else 32,
        "gpu_memory_utilization": None if ck.real else 0.25,
        "batches": batches(ck),
    }


def run_probe(python: str, spec: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    """Run engine_probe.py under ``python``; its result, plus the tail of its log."""
    spec_file, result_file, log_file = (
        workdir / n for n in ("spec.json", "result.json", "engine.log")
    )
    spec_file.write_text(json.dumps(spec))
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [python, str(PROBE), str(spec_file), str(result_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a hang can be killed with its workers
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    tail = log_file.read_text(errors="replace")[-6000:]
    if not result_file.exists():
        return {
            "ok": False,
            "phase": "crashed",
            "error": f"no result (exit {proc.returncode})",
            "log_tail": tail,
        }
    return {**json.loads(result_file.read_text()), "log_tail": tail}


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


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` if the engine ran; fails the test with its error otherwise."""
    if not result.get("ok"):
        pytest.fail(
            f"engine failed in phase {result.get('phase')}: {result.get('error')}\n"
            f"{result.get('traceback', '')}\n--- log tail ---\n{result.get('log_tail', '')}"
        )
    return result


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
