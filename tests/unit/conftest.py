from pathlib import Path

import pytest

from tests.support import heads
from tests.unit.rerere_moves import two  # noqa: F401  (a fixture)
from tests.unit.tiny_upstream import one_patch, upstream  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Kimi-K2.5 target the preflight tests check heads against,
    one per test module."""
    return heads.write_target(tmp_path_factory.mktemp("target") / "kimi-k25-tiny")
