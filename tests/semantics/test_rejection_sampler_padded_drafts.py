"""Drafts padded with ``-1`` are rejected by the random rejection kernel.

``rejection_sampler-reject-drafts-padded-with-minus-one.patch`` (vllm PR
#46533, in 0.25.0): with structured output the scheduler replaces the drafts
that fail the request's grammar with ``-1``. The greedy kernel never matches
``-1``, but 0.17.1's random kernel (temperature > 0) read the target
probability at index ``-1`` (the previous row's last entry) and could accept
``-1`` as a token. The kernels run in Triton's interpreter
(``rejection_kernels.py``), so this needs the ``triton`` package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

SCRIPT = Path(__file__).with_name("rejection_kernels.py")


def _kernels() -> dict[str, list[list[int]]]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_draft_padded_with_minus_one_is_rejected_at_temperature_one() -> None:
    out = _kernels()["padded_drafts"]
    # Request 0: its draft 5 is rejected; the recovered token is the target's 63.
    assert out[0][0] == 63
    # Request 1: the padded draft is rejected at once and replaced by the
    # target's own token for that position (63); nothing follows it (-1 is
    # the output's placeholder there, not a token).
    assert out[1][0] != -1, f"the kernel accepted the padding -1 as a token: {out[1]}"
    assert out[1] == [63, -1, -1]
