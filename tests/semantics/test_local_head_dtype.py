"""A local checkpoint whose config has no dtype (an EAGLE-3 head in the
``speculators`` format: the drafter config vLLM converts it to carries
none) gets its dtype from its own safetensors headers, with no Hugging Face
Hub lookup.

0.17.1's ``ModelArchConfigConvertorBase.get_torch_dtype`` asked the Hub
(``huggingface_hub.get_safetensors_metadata``) whatever the model was: for
a local directory that is no repo id, so each ``ModelConfig`` of the head
logged two ``ERROR ... Error retrieving safetensors: Repo id must be in the
form ...`` lines, slept 2 s between them, and fell back to float32.
Upstream reads a local directory's ``*.safetensors`` headers instead
(``get_safetensors_params_metadata``; vllm PR #36218, v0.18.0). The heads
are ``vpq.checkpoints.fixture.write_speculators_eagle3_head`` with one
tensor written beside the config. Config only: no model built, no GPU.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vpq.checkpoints import fixture  # noqa: E402

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

HUB_ERROR = "Error retrieving safetensors"


def local_head(dest: Path, dtype: torch.dtype) -> Path:
    """A speculators head at ``dest`` whose one tensor is stored as ``dtype``."""
    head = fixture.write_speculators_eagle3_head(dest)
    safetensors_torch.save_file(
        {"fc.weight": torch.zeros(4, 8, dtype=dtype)}, str(head / "model.safetensors")
    )
    return head


@pytest.fixture
def hub_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model ids vLLM asks the Hub about (the call still goes through).

    Every release from 0.17.1 to 0.33.0 asks through
    ``try_get_safetensors_metadata``: 0.17.1's convertor holds its own
    import of it, later ones call it from ``vllm.transformers_utils.config``
    (the Hub function under it moved to ``hf_api()`` by 0.33.0)."""
    from vllm.transformers_utils import config as tu_config
    from vllm.transformers_utils import model_arch_config_convertor as convertor

    real = tu_config.try_get_safetensors_metadata
    calls: list[str] = []

    def recorded(model: str, *args: object, **kwargs: object) -> object:
        calls.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(tu_config, "try_get_safetensors_metadata", recorded)
    if hasattr(convertor, "try_get_safetensors_metadata"):
        monkeypatch.setattr(convertor, "try_get_safetensors_metadata", recorded)
    return calls


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname} {record.getMessage()}")


@pytest.fixture
def vllm_log() -> Iterator[list[str]]:
    """What vLLM's loggers emit during the test, as ``LEVEL message``."""
    handler = _Records()
    logger = logging.getLogger("vllm")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_a_local_head_s_dtype_is_read_from_its_safetensors(
    tmp_path: Path, dtype: torch.dtype, hub_calls: list[str]
) -> None:
    import vllm.config  # noqa: F401  (model_arch_config_convertor imports it first)
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig
    from vllm.transformers_utils.model_arch_config_convertor import (
        ModelArchConfigConvertorBase,
    )

    head = local_head(tmp_path / "head", dtype)
    cfg = SpeculatorsConfig.from_pretrained(str(head))
    assert getattr(cfg, "dtype", None) is None  # the converted config has none
    got = ModelArchConfigConvertorBase.get_torch_dtype(cfg, str(head), None, "hf")
    assert got == dtype
    assert hub_calls == []


def test_a_local_head_s_model_config_asks_no_hub_and_logs_no_error(
    tmp_path: Path, hub_calls: list[str], vllm_log: list[str]
) -> None:
    from vllm.config import ModelConfig

    head = local_head(tmp_path / "head", torch.bfloat16)
    cfg = ModelConfig(model=str(head), skip_tokenizer_init=True)
    assert cfg.hf_config.architectures == ["Eagle3LlamaForCausalLM"]
    assert cfg.dtype == torch.bfloat16
    assert [m for m in vllm_log if HUB_ERROR in m] == []
    assert hub_calls == []
