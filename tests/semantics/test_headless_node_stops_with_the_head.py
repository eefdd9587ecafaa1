"""A headless node stops when the head node stops (patch
``entrypoints/cli/serve-a-headless-node-stops-when-the-head-node-stops.patch``).

In a multi-node deployment on the multiprocessing executor (``vllm serve
--nnodes 2``, node 1 ``--headless``), node 1's workers wait on node 0's
broadcast queue with no liveness check across nodes: in 0.17.1 (and every
release to 0.33.0) node 1 stays up after node 0 stopped, until someone
stops it. The patch has ``run_headless`` watch the head node's
torch.distributed store (at ``--master-addr:--master-port``, held by node
0's rank-0 worker) and send its own process SIGTERM once the store is
gone, the path an operator's SIGTERM takes.

Here ``run_headless`` is vLLM's own (``headless_node``), on a stand-in
executor, in a process of its own; the head node's store is a real
``TCPStore`` in another process, on loopback. The node must stay up while
the store is there (longer than two checks) and stop within
``STOP_S`` of the store's process being killed. Unpatched, the node waits
on until its stand-in wait runs out. The engine tier
(tests/engine/test_two_nodes.py, outside CI) shows it with two real nodes.
"""

from __future__ import annotations

import subprocess
import sys
import time

from tests.semantics.stubs import free_port
from tests.support.paths import REPO_ROOT

#: The head node's store: a real TCPStore server, as node 0's rank 0 holds it.
STORE = (
    "import sys, time; from datetime import timedelta; "
    "from torch.distributed import TCPStore; "
    "s = TCPStore('127.0.0.1', int(sys.argv[1]), is_master=True, "
    "timeout=timedelta(seconds=30)); print('up', flush=True); time.sleep(600)"
)
#: How long the node must stay up while the head node is there: over two
#: checks of the patched node (every 5 s).
ALIVE_S = 12.0
#: How long the node may take to stop once the head node is gone: a check,
#: a new connection's timeout (10 s) and slack for a loaded machine.
STOP_S = 45.0
#: How long the stand-in executor waits on its workers.
WAIT_S = ALIVE_S + STOP_S


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def test_a_headless_node_stops_when_the_head_node_s_store_is_gone() -> None:
    port = free_port()
    head = subprocess.Popen(
        [sys.executable, "-c", STORE, str(port)], stdout=subprocess.PIPE, text=True
    )
    node = None
    try:
        if _line(head) != "up":
            raise RuntimeError("harness error: the head node's store did not start")
        node = subprocess.Popen(
            [sys.executable, "-m", "tests.semantics.headless_node", str(port), str(WAIT_S)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = _line(node)
        if first != "waiting":
            err = node.stderr.read() if node.stderr else ""
            raise RuntimeError(f"harness error: node 1 did not start: {first!r}\n{err[-2000:]}")
        time.sleep(ALIVE_S)
        assert node.poll() is None, f"node 1 stopped while the head node was up: {_line(node)}"
        head.kill()
        head.wait(timeout=30)
        out, err = node.communicate(timeout=STOP_S + 60)
    finally:
        for proc in (head, node):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    said = [ln for ln in out.splitlines() if ln.startswith(("stopped after", "still up after"))]
    assert said and said[0].startswith("stopped after"), (
        f"node 1 did not stop when the head node's store went: {said}\n{(out + err)[-2000:]}"
    )
    assert "is gone" in out + err, (out + err)[-2000:]
