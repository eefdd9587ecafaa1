"""A pytest plugin for ``vpq.source.probe``: writes node id -> outcome as JSON to
``$VPQ_PROBE_REPORT`` when the session ends, and, where
``$VPQ_PROBE_FAILURES`` is set, node id -> how it failed; where
``$VPQ_PROBE_SKIPS`` is set, node id -> why it was skipped, and where
``$VPQ_PROBE_MESSAGES`` is set, node id -> the failure's whole message on
one line (the peer tests, ``vpq.peer_run``, count tests that need a GPU or
the Hub by them).

Outcomes are ``passed``, ``failed``, ``skipped`` and ``error`` (a setup or
teardown failure, or a file that did not collect: every selector under that
file then sees ``error``). Loaded with ``pytest -p vpq.envs.probe_report`` in the
interpreter that imports the vLLM under test, so it uses only pytest and the
standard library.

How a test failed is one of ``FAILURE_KINDS``: on its own check
(``assertion``: an ``AssertionError``, or pytest's ``Failed``:
``pytest.fail``, ``DID NOT RAISE``), or with an exception that a
``fails_unpatched_with`` marker on the test (or its module) declares, with a
reason: ``declared-error`` (the very error the patch fixes), or
``declared-dependency`` (the test stops before its check because another
part of the series is missing: an import or attribute error by default, or
any error marked ``dependency=True``), or anything else (``undeclared``). The negative controls
(tests/integration/test_semantics.py) and the mutation check
(``vpq.checks.mutation``) read this.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pluggy

#: The marker naming how a test fails where the series' behaviour is missing:
#: ``fails_unpatched_with(raises="AttributeError", match="regex", reason="...")``.
MARKER = "fails_unpatched_with"
FAILURE_KINDS = ("assertion", "declared-error", "declared-dependency", "undeclared")
#: Failures that by default show only that an interface is absent.
API_ERRORS = ("ImportError", "AttributeError")

_OUTCOMES: dict[str, str] = {}
_FAILURES: dict[str, dict[str, str]] = {}
_SKIPS: dict[str, str] = {}
_MESSAGES: dict[str, str] = {}


def pytest_configure(config: Any) -> None:
    """Register the marker, so ``--strict-markers`` runs accept it."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(raises, match, reason, dependency=None): how the test fails where the series' "
        "behaviour is missing, when not on its own assertion",
    )


def _first_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def describe(item: Any, exc: BaseException) -> dict[str, str]:
    """How ``item`` failed with ``exc``: ``kind`` (one of ``FAILURE_KINDS``),
    ``exception`` (type and first line) and, when a marker declares it,
    ``reason``."""
    found = {"exception": _first_line(exc)[:300]}
    if isinstance(exc, AssertionError | pytest.fail.Exception):
        return {**found, "kind": "assertion"}
    names = [c.__name__ for c in type(exc).__mro__]
    for mark in item.iter_markers(MARKER):
        raises, match = mark.kwargs.get("raises", ""), mark.kwargs.get("match", "")
        if raises in names and re.search(match, str(exc)):
            dependency = mark.kwargs.get("dependency")
            if dependency is None:
                dependency = any(n in API_ERRORS for n in names)
            kind = "declared-dependency" if dependency else "declared-error"
            return {**found, "kind": kind, "reason": str(mark.kwargs.get("reason", ""))}
    return {**found, "kind": "undeclared"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: Any, call: Any
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Record how a test failed (the first failing phase wins)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None and report.nodeid not in _FAILURES:
        _FAILURES[report.nodeid] = describe(item, call.excinfo.value)
        exc = call.excinfo.value
        _MESSAGES[report.nodeid] = " ".join(f"{type(exc).__name__}: {exc}".split())[:600]


def pytest_runtest_logreport(report: Any) -> None:
    """Record each test's outcome; a failing setup or teardown is an error."""
    if report.when == "call" or report.outcome != "passed":
        failed = report.outcome == "failed"
        outcome = ("error" if report.when != "call" else "failed") if failed else report.outcome
        if _OUTCOMES.get(report.nodeid) in (None, "passed"):
            _OUTCOMES[report.nodeid] = outcome
        if report.skipped and report.nodeid not in _SKIPS:
            _SKIPS[report.nodeid] = _skip_reason(report.longrepr)


def _skip_reason(longrepr: Any) -> str:
    """A skip's reason (pytest gives ``(file, line, "Skipped: why")``)."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")[:300]


def pytest_collectreport(report: Any) -> None:
    """A module that fails to collect: its node id is an error; one that
    skips itself (``pytest.importorskip``, a module-level skip): skipped."""
    if report.skipped and report.nodeid:
        _OUTCOMES[report.nodeid] = "skipped"
        _SKIPS[report.nodeid] = _skip_reason(report.longrepr)
    if report.failed:
        _OUTCOMES[report.nodeid] = "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash else str(report.longrepr).strip()[-300:]
        _FAILURES[report.nodeid] = {"kind": "undeclared", "exception": message[:300]}
        _MESSAGES[report.nodeid] = " ".join(str(report.longrepr).split())[-600:]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Write the outcomes (and failures) where the environment says."""
    for var, data in (
        ("VPQ_PROBE_REPORT", _OUTCOMES),
        ("VPQ_PROBE_FAILURES", _FAILURES),
        ("VPQ_PROBE_SKIPS", _SKIPS),
        ("VPQ_PROBE_MESSAGES", _MESSAGES),
    ):
        dest = os.environ.get(var)
        if dest:
            Path(dest).write_text(json.dumps(data, indent=1, sort_keys=True))
