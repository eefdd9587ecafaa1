"""Fixtures for the semantic tests. These run *inside* a venv that has a
vLLM wheel installed (the patched one, or unpatched upstream to show they
fail there); tests/integration/test_semantics.py drives them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

from vllm.config import (  # noqa: E402
    CompilationConfig,
    CompilationMode,
    DeviceConfig,
    ModelConfig,
    VllmConfig,
    set_current_vllm_config,
)
from vllm.distributed import (  # noqa: E402
    init_distributed_environment,
    initialize_model_parallel,
)

from tests.semantics import stubs  # noqa: E402

_DIST_READY = False


def _deepseek_v2():  # type: ignore[no-untyped-def]
    """``vllm.model_executor.models.deepseek_v2``, imported when a fixture
    needs it, not at collection: where the module does not import (the
    series without deepseek_v2-import-SupportsEagle3.patch) only the tests
    that use it fail, and test_deepseek_v2_imports.py says why."""
    from vllm.model_executor.models import deepseek_v2

    return deepseek_v2


def ensure_distributed() -> None:
    """A single-process gloo world with TP = PP = 1, made once per process.
    Call inside ``set_current_vllm_config``."""
    global _DIST_READY
    if not _DIST_READY:
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{stubs.free_port()}",
            backend="gloo",
        )
        initialize_model_parallel(1, 1)
        _DIST_READY = True


@pytest.fixture
def distributed() -> Callable[[], None]:
    """``distributed()`` inside ``set_current_vllm_config``: see ``ensure_distributed``."""
    return ensure_distributed


@pytest.fixture
def make_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], object]]:
    """``make_model(num_layers)`` -> a real ``DeepseekV3ForCausalLM`` built by
    its own ``__init__``, with stub layers, embedding and norm."""
    ds = _deepseek_v2()
    monkeypatch.setattr(ds, "DeepseekV2DecoderLayer", stubs.StubDecoderLayer)
    monkeypatch.setattr(ds, "VocabParallelEmbedding", stubs.StubEmbedding)
    monkeypatch.setattr(ds, "RMSNorm", stubs.StubRMSNorm)
    made = []

    def make(num_layers: int) -> object:
        cfg_dir = stubs.write_text_config(tmp_path / f"cfg{num_layers}-{len(made)}", num_layers)
        vc = VllmConfig(
            model_config=ModelConfig(model=str(cfg_dir), skip_tokenizer_init=True),
            device_config=DeviceConfig(device="cpu"),
            compilation_config=CompilationConfig(mode=CompilationMode.NONE),
        )
        with set_current_vllm_config(vc):
            ensure_distributed()
            model = ds.DeepseekV3ForCausalLM(vllm_config=vc, prefix="")
        made.append(model)
        return model

    yield make


@pytest.fixture
def pp_rank(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``pp_rank(model, start, end, first=..., last=...)`` puts ``model`` on
    one pipeline rank owning global layers ``[start, end)``."""
    ds = _deepseek_v2()

    def place(model: object, start: int, end: int, *, first: bool, last: bool) -> None:
        monkeypatch.setattr(ds, "get_pp_group", lambda: stubs.FakePPGroup(first, last))
        model.model.start_layer, model.model.end_layer = start, end  # type: ignore[attr-defined]

    return place
