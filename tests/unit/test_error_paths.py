"""Error paths that used to end in a traceback end in one paragraph naming
the file or command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from vpq.contract import items as contract_items
from vpq.envs import contract_run, venv
from vpq.source import fetch
from vpq.wheels import native


def test_no_index_and_no_pip_is_a_fetch_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    monkeypatch.delenv("VPQ_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "none.conf"))  # no index-url configured
    monkeypatch.setattr(fetch.sys, "executable", str(bare / "bin" / "python"))
    with pytest.raises(fetch.FetchError, match="no package index is configured.*set VPQ_INDEX_URL"):
        fetch.index_url()


def test_with_no_index_configured_pip_names_its_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("VPQ_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "none.conf"))
    url = fetch.index_url()
    assert url.startswith("https://") and url.endswith("/simple/")


def test_a_contract_probe_that_hangs_is_a_contract_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in interpreter that never answers: the real probe imports vLLM,
    # which is what hangs in the field; the timeout path is what is tested.
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setattr(contract_run, "PROBE_TIMEOUT_S", 1)
    item = contract_items.Item(kind="interface", name="supports_eagle3", where="x.py:1")
    with pytest.raises(contract_items.ContractError, match=r"did not finish in 1 s"):
        contract_run.check(hang, [item])


def test_a_build_step_that_leaves_no_wheel_is_a_native_build_error(tmp_path: Path) -> None:
    with pytest.raises(
        native.NativeBuildError, match=r"wheel pack left nothing in .*; expected one \*\.whl"
    ):
        native._one(tmp_path, "*.whl", "wheel pack")


def test_a_venv_without_site_packages_is_a_venv_error(tmp_path: Path) -> None:
    with pytest.raises(venv.VenvError, match=r"expected one lib/python3\*/site-packages, found 0"):
        venv._site_packages(tmp_path)
