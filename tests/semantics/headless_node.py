"""Node 1 of two, headless, on a stand-in executor: vLLM's own
``run_headless`` (``vllm serve --headless``) with the head node's
torch.distributed store at 127.0.0.1:PORT. Run by
test_headless_node_stops_with_the_head.py in a process of its own, so that
the SIGTERM the node may send itself reaches no test runner.

``python -m tests.semantics.headless_node PORT WAIT_S`` prints ``waiting``
once the node waits on its (stand-in) workers, then ``stopped after S s``
if a SIGTERM ended the wait, or ``still up after WAIT_S s`` if the wait
ran out.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace


class StandInExecutor:
    """Stands in for ``MultiprocExecutor``: no workers; ``start_worker_monitor``
    waits up to ``WAIT_S`` as the real one waits on its workers."""

    wait_s = 0.0

    def __init__(self, vllm_config: object, monitor_workers: bool) -> None:
        assert not monitor_workers

    def start_worker_monitor(self, inline: bool = False) -> None:
        assert inline
        print("waiting", flush=True)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < self.wait_s:
                time.sleep(0.1)
        except SystemExit:
            print(f"stopped after {time.monotonic() - t0:.1f} s", flush=True)
            raise
        print(f"still up after {self.wait_s:.0f} s", flush=True)


def engine_args(port: int) -> SimpleNamespace:
    """What ``run_headless`` reads of ``AsyncEngineArgs``: node 1 of two in
    one DP rank (PP or TP across the nodes), head node at 127.0.0.1:``port``."""
    parallel = SimpleNamespace(
        data_parallel_size_local=1,
        node_rank_within_dp=1,
        master_addr="127.0.0.1",
        master_port=port,
    )
    config = SimpleNamespace(parallel_config=parallel)
    return SimpleNamespace(
        data_parallel_hybrid_lb=False,
        create_engine_config=lambda **_: config,
    )


def cli_args() -> SimpleNamespace:
    """What ``run_headless`` reads of the parsed ``vllm serve --headless``
    arguments before ``from_cli_args`` (0.17.1 reads the first; 0.32.0 and
    0.33.0 the second as well). vLLM's own parser cannot stand in: it
    builds ``EngineArgs`` defaults, which need a device."""
    return SimpleNamespace(api_server_count=0, reasoning_parser_plugin=None)


def main(port: int, wait_s: float) -> None:
    import vllm
    from vllm.entrypoints.cli import serve

    StandInExecutor.wait_s = wait_s
    serve.MultiprocExecutor = StandInExecutor  # type: ignore[assignment,misc]
    vllm.AsyncEngineArgs.from_cli_args = lambda args: engine_args(port)  # type: ignore[assignment,method-assign]
    serve.run_headless(cli_args())  # type: ignore[arg-type]


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
