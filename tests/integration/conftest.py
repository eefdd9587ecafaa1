"""Integration fixtures: the real pinned upstream (sdist + release wheels).

The first run downloads about 850 MB into the cache and makes the CPU deps
venv (a few minutes); later runs reuse both.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from vpq.checkpoints import fixture
from vpq.contract import items as contract_items
from vpq.contract import table as contract_table
from vpq.core.proc import tagged_json
from vpq.envs import contract_run
from vpq.envs import venv as envs
from vpq.source import fetch, lock
from vpq.source import git as g
from vpq.wheels import build

from tests.conftest import REPO_ROOT

PROBE = Path(__file__).with_name("eagle3_probe.py")


@pytest.fixture(scope="session")
def pin() -> lock.Lock:
    return lock.load(REPO_ROOT)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, build.Result]:
    """Both platforms' wheels, built and audited from the real pin."""
    out = tmp_path_factory.mktemp("dist")
    return {r.platform: r for r in build.build_wheels(REPO_ROOT, platform="all", out_dir=out)}


@pytest.fixture(scope="session")
def upstream_wheel(pin: lock.Lock) -> Path:
    w = pin.wheel("x86_64")
    return fetch.fetch(pin.name, w.filename, w.sha256)


@pytest.fixture(scope="session")
def deps_venv(pin: lock.Lock, built: dict[str, build.Result]) -> Path:
    common = g.git(
        ["show", f"upstream/{pin.version}:requirements/common.txt"], REPO_ROOT / build.WORK_DIR
    ).stdout
    return envs.deps_env(common)


@pytest.fixture(scope="session")
def tiny_configs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("configs")
    return (
        fixture.write_tiny_kimi_k25(base / "kimi-k25-tiny"),
        fixture.write_tiny_eagle3_drafter(base / "eagle3-tiny"),
    )


def run_probe(
    python: Path, configs: tuple[Path, Path], probe: Path = PROBE, timeout: int = 600
) -> dict[str, object]:
    """Run ``probe`` (a script printing ``PROBE <json>``) with ``python`` on
    the target and drafter config directories; return its result."""
    proc = subprocess.run(
        [str(python), str(probe), str(configs[0]), str(configs[1])],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result = tagged_json(proc.stdout, "PROBE")
    assert proc.returncode == 0 and result is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return result  # type: ignore[return-value]


@pytest.fixture(scope="session")
def patched_python(tmp_path_factory, deps_venv, built) -> Path:
    """A fresh venv with the patched x86_64 wheel installed."""
    return envs.wheel_env(
        tmp_path_factory.mktemp("venv") / "patched", deps_venv, built["x86_64"].wheel.path
    )


@pytest.fixture(scope="session")
def upstream_python(tmp_path_factory, deps_venv, upstream_wheel) -> Path:
    """A fresh venv with the unpatched upstream wheel installed."""
    return envs.wheel_env(tmp_path_factory.mktemp("venv") / "upstream", deps_venv, upstream_wheel)


@pytest.fixture(scope="session")
def patched_probe(patched_python, tiny_configs) -> dict[str, object]:
    return run_probe(patched_python, tiny_configs)


@pytest.fixture(scope="session")
def upstream_probe(upstream_python, tiny_configs) -> dict[str, object]:
    return run_probe(upstream_python, tiny_configs)


def run_in_venv(python: Path, suite: str, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Run ``tests/<suite>`` with ``python`` (a wheel venv) and ``env`` added;
    return test id -> passed | failed | skipped, read from its JUnit XML."""
    xml = tmp_path / "junit.xml"
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    cmd += ["--rootdir", str(REPO_ROOT), str(REPO_ROOT / "tests" / suite)]
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", **env},
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert xml.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        failed, skipped = kinds & {"failure", "error"}, "skipped" in kinds
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = (
            "failed" if failed else "skipped" if skipped else "passed"
        )
    return outcomes


def discover_at(ref: str) -> list[contract_items.Item]:
    """The EAGLE-3 contract discovered at ``ref`` of build/work."""
    repo = REPO_ROOT / build.WORK_DIR
    return contract_run.discover(lambda p: g.git(["show", f"{ref}:{p}"], repo).stdout.decode())


@pytest.fixture(scope="session")
def patched_table(patched_python) -> contract_table.Table:
    """The contract table of the patched wheel."""
    build.prepare(REPO_ROOT)
    return contract_run.check(patched_python, discover_at("patched"))


@pytest.fixture(scope="session")
def upstream_table(upstream_python, pin) -> contract_table.Table:
    """The contract table of unpatched upstream 0.17.1."""
    build.prepare(REPO_ROOT)
    return contract_run.check(upstream_python, discover_at(f"upstream/{pin.version}"))
