"""``nox -s bench``'s installer cases: the contract check's wheel venv by
pip and by uv in turn, each with its ratio to pip's case of the same round
(``vpq.bench.installer_cases``; the bench runs them on upstream's wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq import bench, installer

from tests.unit.tiny_upstream import _wheel


def test_installer_cases_time_pip_and_uv_in_turn_with_ratios_to_pip(tmp_path: Path) -> None:
    if installer.uv_bin() is None:
        pytest.skip("uv is not installed in this Python (a test dependency: noxfile.py)")
    wheel = tmp_path / "vllm-1.0-cp38-abi3-linux_x86_64.whl"
    _wheel(wheel)
    cases = bench.installer_cases(tmp_path, wheel, rounds=1)
    assert [c.name for c in cases] == [
        "contract wheel venv by pip, round 1",
        "contract wheel venv by uv, round 1",
    ]
    assert all(c.ok for c in cases) and cases[0].vs_pip == 1.0
    assert cases[1].vs_pip == round(cases[1].seconds / cases[0].seconds, 3)
    assert list((tmp_path / "build").iterdir()) == []  # the venvs are gone
    table = bench.render(cases).splitlines()
    assert table[0].split()[-2:] == ["pip", "ok"] and table[2].split()[-2:] == [
        f"{cases[1].vs_pip:.3f}",
        "yes",
    ]
