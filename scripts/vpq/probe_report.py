"""A pytest plugin for ``vpq.probe``: writes node id -> outcome as JSON to
``$VPQ_PROBE_REPORT`` when the session ends.

Outcomes are ``passed``, ``failed``, ``skipped`` and ``error`` (a setup or
teardown failure, or a file that did not collect: every selector under that
file then sees ``error``). Loaded with ``pytest -p vpq.probe_report`` in the
interpreter that imports the vLLM under test, so it uses only pytest and the
standard library.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: Any) -> None:
    """Record each test's outcome; a failing setup or teardown is an error."""
    if report.when == "call" or report.outcome != "passed":
        failed = report.outcome == "failed"
        outcome = ("error" if report.when != "call" else "failed") if failed else report.outcome
        if _OUTCOMES.get(report.nodeid) in (None, "passed"):
            _OUTCOMES[report.nodeid] = outcome


def pytest_collectreport(report: Any) -> None:
    """A module that fails to collect: its node id is an error."""
    if report.failed:
        _OUTCOMES[report.nodeid] = "error"


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Write the outcomes where ``$VPQ_PROBE_REPORT`` says."""
    dest = os.environ.get("VPQ_PROBE_REPORT")
    if dest:
        Path(dest).write_text(json.dumps(_OUTCOMES, indent=1, sort_keys=True))
