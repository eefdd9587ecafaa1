"""vLLM's own build as the second backend (``--backend setuptools``) on the
real pin: it passes the same audit as the overlay and holds the same files.

Slow (about 5 minutes here: vLLM's build installs a CUDA torch 2.10 into its
isolated build environment, several GB on first use, then the wheel tool
repacks 430 MB)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.wheels import audit, build

from tests.support.paths import REPO_ROOT


@pytest.mark.outside_ci
def test_setuptools_backend_passes_the_audit_and_matches_the_overlay(built, tmp_path: Path) -> None:
    plat = build.host_platform()
    (res,) = build.build_wheels(REPO_ROOT, platform=plat, out_dir=tmp_path, backend="setuptools")
    overlay = built[plat].wheel
    assert res.wheel.path.name == overlay.path.name  # same version label and upstream's tags
    assert res.report.differing == built[plat].report.differing
    assert audit.compare_backends(res.wheel.path, overlay.path) > 2000
