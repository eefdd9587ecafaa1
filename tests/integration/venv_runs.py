"""What the integration tests run in the wheel venvs: the probe scripts, a
tier of tests inside a venv, the contract discovered at a ref of build/work."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from vpq.contract import items as contract_items
from vpq.core.proc import tagged_json
from vpq.envs import contract_run
from vpq.source import git as g
from vpq.wheels import build

from tests.support.paths import REPO_ROOT

PROBE = Path(__file__).with_name("eagle3_probe.py")


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
