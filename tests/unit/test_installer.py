"""Local wheel files go into the tool's venvs by uv where it is installed,
by pip otherwise, and either way the venv holds the same distributions and
files (``vpq.envs.installer``; used by ``venv.wheel_env`` and the engine tier's
base venv)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from vpq.envs import installer, venv
from vpq.envs.installer import InstallerError

from tests.unit.tiny_upstream import _wheel

#: The installers' own bookkeeping in the dist-info, not the install.
BOOKKEEPING = {"INSTALLER", "RECORD", "uv_cache.json"}


def test_vpq_installer_forces_one_and_names_a_wrong_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VPQ_INSTALLER", "pip")
    assert installer.chosen() is None
    assert installer.command(Path("/v/bin/python"), [Path("/w.whl")])[:4] == [
        "/v/bin/python", "-m", "pip", "install",
    ]  # fmt: skip
    monkeypatch.setenv("VPQ_INSTALLER", "conda")
    with pytest.raises(InstallerError, match="VPQ_INSTALLER='conda': expected 'pip' or 'uv'"):
        installer.chosen()
    monkeypatch.setenv("VPQ_INSTALLER", "uv")
    monkeypatch.setattr(installer, "uv_bin", lambda: None)
    with pytest.raises(InstallerError, match="uv is not installed"):
        installer.chosen()
    monkeypatch.delenv("VPQ_INSTALLER")
    assert installer.chosen() is None  # no uv: pip


def test_uv_is_used_where_installed_offline_and_without_a_cache_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VPQ_INSTALLER", raising=False)
    monkeypatch.setattr(installer, "uv_bin", lambda: "/opt/uv")
    cmd = installer.command(Path("/v/bin/python"), [Path("/c/a.whl"), Path("/c/b.whl")])
    assert cmd[:3] == ["/opt/uv", "pip", "install"]
    assert {"--offline", "--no-config", "--no-cache", "--no-deps"} <= set(cmd)
    assert "--compile-bytecode" not in cmd  # pip is told --no-compile
    assert cmd[cmd.index("--python") + 1] == "/v/bin/python"
    assert cmd[-2:] == ["/c/a.whl", "/c/b.whl"]


def _installed(python: Path) -> dict[str, object]:
    """What the venv of ``python`` holds: each distribution's name and
    version, which installer put vllm there, and every file under
    site-packages (``__pycache__`` included) less the installers' bookkeeping."""
    probe = (
        "import sys; sys.dont_write_bytecode = True\n"
        "import importlib.metadata as md, json, pathlib, sysconfig\n"
        "site = pathlib.Path(sysconfig.get_path('purelib'))\n"
        "print(json.dumps({'dists': sorted([d.metadata['Name'], d.version] "
        "for d in md.distributions()), 'installer': md.distribution('vllm')"
        ".read_text('INSTALLER').strip(), 'files': sorted(str(p.relative_to(site)) "
        "for p in site.rglob('*') if p.is_file())}))\n"
    )
    out = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    data["files"] = [f for f in data["files"] if f.rsplit("/", 1)[-1] not in BOOKKEEPING]
    return data


def test_uv_and_pip_install_the_same_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``venv.wheel_env`` with each installer on the same wheel: the same
    distributions (ensurepip's, asked for in both, and the wheel) and files,
    no bytecode from either (Python writes it on first import); only
    ``INSTALLER`` says which one ran."""
    if installer.uv_bin() is None:
        pytest.skip("uv is not installed in this Python (a test dependency: noxfile.py)")
    wheel = tmp_path / "vllm-1.0-cp38-abi3-linux_x86_64.whl"
    _wheel(wheel)
    deps_site = tmp_path / "deps" / "lib" / "python3.11" / "site-packages"
    deps_site.mkdir(parents=True)
    got = {}
    for name in ("pip", "uv"):
        monkeypatch.setenv("VPQ_INSTALLER", name)
        got[name] = _installed(venv.wheel_env(tmp_path / name, tmp_path / "deps", wheel, pip=True))
    assert got["pip"].pop("installer") == "pip" and got["uv"].pop("installer") == "uv"
    assert got["uv"] == got["pip"]
    assert ["vllm", "1.0"] in got["pip"]["dists"]  # type: ignore[operator]
    assert "vllm/mod.py" in got["pip"]["files"]  # type: ignore[operator]
    assert not [f for f in got["pip"]["files"] if f.startswith("vllm/__pycache__/")]  # type: ignore[attr-defined]


def test_the_venv_writes_bytecode_on_first_import_even_where_told_not_to(
    tmp_path: Path,
) -> None:
    """No installer writes bytecode, so the venv's Python must: with
    ``PYTHONDONTWRITEBYTECODE=1`` (set on our machines) every start would
    otherwise compile torch and vLLM again."""
    wheel = tmp_path / "vllm-1.0-cp38-abi3-linux_x86_64.whl"
    _wheel(wheel)
    deps_site = tmp_path / "deps" / "lib" / "python3.11" / "site-packages"
    deps_site.mkdir(parents=True)
    python = venv.wheel_env(tmp_path / "w", tmp_path / "deps", wheel)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([str(python), "-c", "import vllm.mod"], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    site = python.parents[1] / "lib"
    assert list(site.glob("python3*/site-packages/vllm/__pycache__/mod.*.pyc"))
