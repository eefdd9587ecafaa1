"""Kimi-K2.5's image processor is remote code, and vLLM runs it only when
the operator trusts remote code (GHSA-7972-pg2x-xr59, patch
``kimi_k25-nemotron_vl-respect-trust_remote_code.patch``).

0.17.1's ``KimiK25ProcessingInfo`` loads the checkpoint's image processor
with ``trust_remote_code=True`` whatever the model config says, so building
the multimodal processor for a Kimi-K2.5 checkpoint imports and runs the
Python its ``preprocessor_config.json`` names even under
``--trust-remote-code=False``. The checkpoint is the tiny Kimi-K2.5 fixture
(``vpq.checkpoints.fixture``), whose image processor is remote code; its module here
also writes a marker file when imported, so the test sees whether the
remote code ran. The path is vLLM's own: a real ``ModelConfig`` and
``MULTIMODAL_REGISTRY.create_processor``, what the engine does at start.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checkpoints import fixture

#: A line appended to the fixture's remote image-processor module: it runs
#: when transformers imports the module, i.e. when the remote code runs.
MARKER_LINE = "\n__import__('pathlib').Path({path!r}).write_text('remote code ran')\n"


def _checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny Kimi-K2.5 checkpoint (named uniquely: transformers caches
    remote modules by directory name) and the marker its remote code writes."""
    target = fixture.write_tiny_kimi_k25(tmp_path / f"kimi-k25-remote-{tmp_path.name}")
    marker = tmp_path / "REMOTE_CODE_RAN"
    module = target / f"{fixture.IMAGE_PROCESSOR_MODULE}.py"
    module.write_text(module.read_text() + MARKER_LINE.format(path=str(marker)))
    return target, marker


def test_kimi_k25_image_processor_remote_code_does_not_run_without_trust(tmp_path) -> None:
    """With ``trust_remote_code=False`` the multimodal processor for a
    Kimi-K2.5 checkpoint refuses to load its remote image processor (vLLM's
    one ``RuntimeError`` naming ``trust_remote_code``) and the checkpoint's
    code never runs. Later releases (0.33.0) build the processing info, and
    so refuse, while the ``ModelConfig`` is made: both are inside the ``try``."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    target, marker = _checkpoint(tmp_path)
    refused = None
    try:
        mc = ModelConfig(model=str(target), trust_remote_code=False)
        assert mc.trust_remote_code is False
        MULTIMODAL_REGISTRY.create_processor(mc)
    except RuntimeError as exc:  # vLLM's 'Failed to load the image processor...'
        refused = str(exc)
    assert not marker.exists(), (
        "the checkpoint's remote image processor ran although trust_remote_code=False"
    )
    assert refused is not None and "trust_remote_code" in refused, refused


def test_kimi_k25_image_processor_loads_at_the_pinned_revision(tmp_path, monkeypatch) -> None:
    """GHSA-3ww4-5jv9-j5gm (``kimi_k25-load-the-image-processor-at-the-pinned-revision.patch``,
    0.22.0's line): the remote image processor is loaded with the model
    config's ``revision``, so ``--revision`` pins the code Kimi-K2.5 runs
    from the Hub as it pins the weights. The loader is wrapped to record
    its arguments, then called through (a local checkpoint ignores the
    revision)."""
    from vllm.config import ModelConfig
    from vllm.model_executor.models import kimi_k25
    from vllm.multimodal import MULTIMODAL_REGISTRY

    target, _ = _checkpoint(tmp_path)
    seen: list[dict[str, object]] = []
    load = kimi_k25.cached_get_image_processor

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(kwargs)
        return load(*args, **kwargs)

    monkeypatch.setattr(kimi_k25, "cached_get_image_processor", recording)
    mc = ModelConfig(model=str(target), trust_remote_code=True, revision="pinned-rev")
    MULTIMODAL_REGISTRY.create_processor(mc)
    assert seen, "the image processor was not loaded through cached_get_image_processor"
    assert {k.get("revision") for k in seen} == {"pinned-rev"}, seen


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
