"""Both model runners' EAGLE-3 layer-id lookups on a draft config alone.

The default runner's ``GPUModelRunner._get_eagle3_aux_layers_from_config``
is called unbound on a stand-in ``self`` that holds only the speculative
config (all it reads); the opt-in runner's
``eagle3_utils.get_eagle3_aux_layers_from_config`` takes the config itself.
The draft config is a plain namespace shaped like a head's ``config.json``.
No model and no GPU are needed. These are the probes of the layer-id
patches (probes.toml): each fails on unpatched 0.17.1, which reads only the
top-level key and says nothing when it falls back.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Iterator

import pytest

KEY = "eagle_aux_hidden_state_layer_ids"


def _spec(**hf: object) -> types.SimpleNamespace:
    """A speculative config whose draft model config's hf_config has ``hf``."""
    return types.SimpleNamespace(
        draft_model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(**hf))
    )


def _default_runner(spec: types.SimpleNamespace) -> object:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    return GPUModelRunner._get_eagle3_aux_layers_from_config(
        types.SimpleNamespace(speculative_config=spec)
    )


def _opt_in_runner(spec: types.SimpleNamespace) -> object:
    from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

    return eagle3_utils.get_eagle3_aux_layers_from_config(spec)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def warnings_of() -> Iterator[Callable[[str], list[str]]]:
    """``warnings_of(logger_name)``: the warning texts that logger emitted
    since the test began (vLLM's loggers do not propagate to the root)."""
    handlers: dict[str, _Records] = {}

    def get(name: str) -> list[str]:
        return [r.getMessage() for r in handlers[name].records if r.levelno >= logging.WARNING]

    levels = {}
    for name in ("vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.gpu.spec_decode.eagle"):
        handlers[name] = _Records()
        logger = logging.getLogger(name)
        levels[name] = logger.level
        logger.setLevel(logging.INFO)  # the suite runs with VLLM_LOGGING_LEVEL=ERROR
        logger.addHandler(handlers[name])
    yield get
    for name, h in handlers.items():
        logging.getLogger(name).removeHandler(h)
        logging.getLogger(name).setLevel(levels[name])


def test_default_runner_reads_ids_nested_under_eagle_config() -> None:
    assert _default_runner(_spec(eagle_config={KEY: [1, 3, 5]})) == (1, 3, 5)


def test_default_runner_warns_naming_the_key_when_ids_fall_back(warnings_of) -> None:
    assert _default_runner(_spec()) is None
    texts = warnings_of("vllm.v1.worker.gpu_model_runner")
    assert len(texts) == 1, texts
    assert KEY in texts[0] and "default" in texts[0]


def test_opt_in_runner_reads_ids_nested_under_eagle_config() -> None:
    assert _opt_in_runner(_spec(eagle_config={KEY: [1, 3, 5]})) == (1, 3, 5)


def test_opt_in_runner_warns_naming_the_key_when_ids_fall_back(warnings_of) -> None:
    assert _opt_in_runner(_spec()) is None
    texts = warnings_of("vllm.v1.worker.gpu.spec_decode.eagle")
    assert len(texts) == 1, texts
    assert KEY in texts[0] and "default" in texts[0]
