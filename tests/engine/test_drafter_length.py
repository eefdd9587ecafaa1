"""Drafting stops where the preflight says: a head with a short position limit.

0.17.1's model runner drafts for a batch only while its longest sequence
plus ``num_speculative_tokens`` fits in the drafter's max model length (the
head's ``max_position_embeddings``, capped at the target's max model
length): ``max_seq_len + k <= effective_drafter_max_model_len`` in
``GPUModelRunner.sample_tokens``. Past it, no request in the batch gets
drafts, and nothing says so. ``scripts/verify_install.py`` warns
(``drafter-max-len``) with that length; here the engine shows the same one.
"""

from __future__ import annotations

import json
import re
import subprocess

from vpq.checkpoints import scripted

from tests.engine import cpu_shims
from tests.engine.cases import (
    MAX_TOKENS,
    NUM_SPECULATIVE_TOKENS,
    SHORT_HEAD,
    SHORT_HEAD_POSITIONS,
    Run,
    expected_tokens,
    metrics,
    outputs,
)
from tests.support.engine_result import ok
from tests.support.paths import REPO_ROOT

#: A prompt ending on the script, long enough that the request passes the
#: head's limit within ``MAX_TOKENS``: 55 + 12 tokens against 64.
LONG_PROMPT = (*(3 + (11 * i) % 250 for i in range(SHORT_HEAD_POSITIONS - 10)), scripted.SCRIPT[0])
SHORT = Run(SHORT_HEAD, prompts=(LONG_PROMPT,), env=((cpu_shims.SPY_ENV, "1"),))


def preflight_stop(python: str, target: str, head: str) -> int:
    """The length the preflight says drafting stops at (its
    ``drafter-max-len`` warning), run with ``python``."""
    proc = subprocess.run(
        [python, str(REPO_ROOT / "scripts" / "verify_install.py")]
        + ["--model", target, "--drafter", head, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    findings = json.loads(proc.stdout)["findings"]
    (f,) = [f for f in findings if f["rule"] == "drafter-max-len"]
    assert f["severity"] == "warning", f
    m = re.match(r"drafting stops at (\d+) tokens", f["message"])
    assert m, f["message"]
    return int(m.group(1))


def test_drafting_stops_at_the_length_the_preflight_warns_of(
    engine, patched_python, checkpoints, backend
) -> None:
    """The preflight (run in the venv of this series' wheel, which the
    integration tests make; the CPU engine's overlay has no ``vllm``
    metadata for it to read) gives the length, and it is the engine's: every step the drafter ran
    had ``max_seq_len + k`` within it, the last one was the last step that
    fit (a step moves a sequence on by at most ``k + 1``), and the request
    went on past it without drafts. Outputs stay the oracle's."""
    k = NUM_SPECULATIVE_TOKENS
    target, head = str(checkpoints.targets[SHORT.layers]), str(checkpoints.heads[SHORT_HEAD])
    stop = preflight_stop(str(patched_python), target, head)
    assert stop == SHORT_HEAD_POSITIONS
    r = ok(engine(SHORT))
    assert outputs(r) == [expected_tokens(list(LONG_PROMPT))]
    assert metrics(r)["accepted_per_pos"][0] > 0, metrics(r)
    if backend == "cpu":  # the spy is one of the CPU engine's plugins
        drafted = cpu_shims.spied(r["log"], cpu_shims.SPY_DRAFTED)
        assert drafted, r["log_tail"]
        assert max(drafted) + k <= stop < max(drafted) + k + (k + 1), drafted
        assert len(LONG_PROMPT) + MAX_TOKENS > stop
