"""Drive tests/parsers inside the wheel venvs: every test passes on the
patched wheel; on unpatched upstream vLLM 0.17.1 each multi-token replay
(tool parser, reasoning parser, the server's streaming path) fails for every
k >= 2.

The reference upstream for the differential test (tests/reference-upstreams.toml)
is fetched here, hash-checked, and its sdist path passed in ``VPQ_REFERENCE_SDIST``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from vpq.source import fetch

from tests.integration.venv_runs import run_in_venv
from tests.support.paths import REPO_ROOT

REFERENCE = "vllm-0_20_0"


@pytest.fixture(scope="module")
def reference_sdist() -> Path:
    ref = tomllib.loads((REPO_ROOT / "tests/reference-upstreams.toml").read_text())[REFERENCE]
    return fetch.fetch("vllm", ref["filename"], ref["sha256"])


def run_parsers(python: Path, sdist: Path, tmp_path: Path) -> dict[str, str]:
    """Run tests/parsers with ``python``; return test id -> outcome."""
    env = {
        "VPQ_PARSERS": "1",
        "VPQ_REFERENCE_SDIST": str(sdist),
    }
    return run_in_venv(python, "parsers", env, tmp_path)


def test_every_parser_replay_passes_on_the_patched_wheel(
    patched_python, reference_sdist, tmp_path
) -> None:
    outcomes = run_parsers(patched_python, reference_sdist, tmp_path)
    assert len(outcomes) >= 300
    assert any("test_differential_0_20_0" in name for name in outcomes)
    assert {k: v for k, v in outcomes.items() if v != "passed"} == {}


#: Test functions in tests/parsers that replay k tokens per delta, by file.
MULTI_TOKEN_REPLAYS = (
    "test_kimi_k2_tool_parser_replay::test_streamed_calls_equal_the_encoded_and_the_non_streaming_calls",
    "test_kimi_k2_reasoning_parser_replay::test_reasoning_alone_streams_what_the_non_streaming_parse_returns",
    "test_server_streaming::test_server_streams_the_encoded_tool_calls",
    "test_server_streaming::test_server_streams_reasoning_then_tool_calls",
)


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_multi_token_replays_fail_on_unpatched_upstream_for_every_k_from_2(
    upstream_python, reference_sdist, tmp_path
) -> None:
    outcomes = run_parsers(upstream_python, reference_sdist, tmp_path)
    for function in MULTI_TOKEN_REPLAYS:
        runs = {name: v for name, v in outcomes.items() if f"{function}[" in name}
        assert len(runs) >= 40, function
        failing_ks = {
            int(m.group(1))
            for n, v in runs.items()
            if v == "failed" and (m := re.search(r"-(\d+)\]$", n))
        }
        assert set(range(2, 9)) <= failing_ks, function
    tool = [v for n, v in outcomes.items() if MULTI_TOKEN_REPLAYS[0] in n and not n.endswith("-1]")]
    assert tool.count("failed") > len(tool) // 2, (
        "most multi-token tool-call replays break, not an odd one"
    )
