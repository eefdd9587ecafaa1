"""Absorption probes, run: each patch's probe (``vpq.source.probe``, the
``probes.toml`` table) on an interpreter that imports the vLLM under test.

The tests a probe selects run in one pytest process with the
``vpq.envs.probe_report`` plugin, which writes each node's outcome and how it
failed; the contract items a probe names are read off the target's
verdict table (``vpq.contract.table``).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vpq.contract.table import Table
from vpq.core import progress
from vpq.source.probe import Probe, ProbeError, load, verdict

#: The gates that let tests/semantics and tests/parsers be collected.
SUITE_ENV = {"VPQ_SEMANTICS": "1", "VPQ_PARSERS": "1", "VLLM_LOGGING_LEVEL": "ERROR"}
PROBE_TIMEOUT_S = 1800
_PLUGIN = "vpq.envs.probe_report"
_TOOL_DIR = Path(__file__).resolve().parents[2]  # the directory holding vpq/


def contract_verdict(probe: Probe, table: Table) -> tuple[bool, str]:
    """``(holds, what it saw)`` for the probe's contract items on the target's
    table: each item must be in it (discovered in the target's source), with
    at least one ``ok`` cell and no ``missing`` or ``stub`` cell."""
    for item in probe.contract:
        cells = set(table.rows.get(item, {}).values())
        if not cells:
            return False, f"contract: {item} not found in the target's source"
        if "ok" not in cells or {"missing", "stub"} & cells:
            return False, f"contract: {item} does not hold"
    return True, f"contract: {len(probe.contract)} of {len(probe.contract)} hold"


def _combine(*verdicts: tuple[bool, str]) -> tuple[bool, str]:
    """Absorbed when every part is; the text of each part, joined."""
    return all(ok for ok, _ in verdicts), "; ".join(text for _, text in verdicts)


@dataclass(frozen=True)
class Report:
    """One pytest run's report: node id -> outcome, and node id -> how it
    failed (``vpq.envs.probe_report.describe``: kind, exception, reason)."""

    outcomes: dict[str, str]
    failures: dict[str, dict[str, str]]


def run(python: Path, root: Path, files: list[str], sys_path: Path | None) -> dict[str, str]:
    """Run the test ``files`` (paths relative to ``root``) with ``python``,
    vLLM importing from ``sys_path`` when given; return node id -> outcome.

    Raises:
        ProbeError: pytest did not report (it crashed or timed out).
    """
    return run_report(python, root, files, sys_path).outcomes


def run_report(
    python: Path,
    root: Path,
    files: list[str],
    sys_path: Path | None,
    env: dict[str, str] | None = None,
) -> Report:
    """``run``, with how each test failed; ``env`` is added to the
    environment (after ``SUITE_ENV``).

    Raises:
        ProbeError: pytest did not report (it crashed or timed out).
    """
    with tempfile.TemporaryDirectory(prefix="vpq-probe-") as tmp:
        report, failures = Path(tmp) / "outcomes.json", Path(tmp) / "failures.json"
        path = [str(sys_path)] if sys_path else []
        full_env = {
            **os.environ,
            **SUITE_ENV,
            **(env or {}),
            "VPQ_PROBE_REPORT": str(report),
            "VPQ_PROBE_FAILURES": str(failures),
            "PYTHONPATH": os.pathsep.join(path + [str(_TOOL_DIR)]),
        }
        cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", _PLUGIN]
        cmd.append("--continue-on-collection-errors")
        try:
            with progress.step(f"running the probes ({len(files)} test files) with {python}"):
                proc = subprocess.run(
                    cmd + ["--rootdir", str(root), *files],
                    cwd=root, env=full_env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise ProbeError(f"the probes under {python} ran past {PROBE_TIMEOUT_S} s") from None
        if not report.is_file():
            tail = (proc.stdout[-1500:] + proc.stderr[-1500:]).strip().replace("\n", " | ")
            raise ProbeError(f"the probes under {python} did not report: {tail}")
        return Report(json.loads(report.read_text()), json.loads(failures.read_text()))


def run_all(
    python: Path, root: Path, names: list[str], sys_path: Path | None, table: Table
) -> dict[str, tuple[bool, str]]:
    """Every probe of the patches ``names``, the tests in one pytest run and
    the contract items on ``table`` (the target's): patch name -> ``(absorbed,
    what the probe saw)``. Patches covered by another signal are left out.

    Raises:
        ProbeError: see ``load`` and ``run``.
    """
    probes = [p for n, p in load(root).items() if n in names and not p.covered_by]
    files = sorted({t.split("::", 1)[0] for p in probes for t in p.tests})
    outcomes = run(python, root, files, sys_path) if files else {}
    return {
        p.patch: _combine(
            *([verdict(p, outcomes)] if p.tests else []),
            *([contract_verdict(p, table)] if p.contract else []),
        )
        for p in probes
    }
