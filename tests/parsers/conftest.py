"""Fixtures for the parser replay tests. These run *inside* a venv that has a
vLLM wheel installed (the patched one, or unpatched upstream to show they
fail there); tests/integration/test_parsers.py drives them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
pytest.importorskip("vllm")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from vpq.checkpoints import fixture  # noqa: E402


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny fixture's tokenizer (Kimi's markers as single special tokens),
    loaded through vLLM's own ``get_tokenizer`` as the server loads it."""
    from vllm.tokenizers import get_tokenizer

    dest = tmp_path_factory.mktemp("tok")
    fixture.write_tokenizer(dest)
    return get_tokenizer(str(dest))
