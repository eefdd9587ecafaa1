"""One command at a time on a checkout: a second one waits and says for whom,
or fails at once with --no-wait; a killed holder blocks nobody."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from vpq import cli
from vpq.core import worklock

from tests.unit.cli import assert_clean_error, run_cli, snapshot
from tests.unit.tiny_upstream import Upstream


def _start_cli(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vpq", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_command_waits_and_names_the_holder(one_patch: Upstream) -> None:
    root = one_patch.root
    with worklock.held(root, "rebase"):
        child = _start_cli(root, "build", "--no-contract")
        assert child.stderr is not None
        line = child.stderr.readline()  # blocks until the child reports it waits
        assert line.startswith(
            f"waiting for {root / 'build/.vpq.lock'}: held by `vpq rebase` "
            f"(pid {os.getpid()}, since "
        )
        time.sleep(0.5)
        assert child.poll() is None  # still waiting while we hold the lock
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert "audit ok" in out


def test_no_wait_fails_at_once_and_changes_nothing(one_patch: Upstream) -> None:
    root = one_patch.root
    assert run_cli(root, "build", "--no-contract").returncode == 0
    before = snapshot(root)
    with worklock.held(root, "build"):
        proc = run_cli(root, "build", "--no-contract", "--no-wait")
    assert_clean_error(proc, "build/.vpq.lock is held by `vpq build` (pid", "--no-wait")
    assert snapshot(root) == before


def test_every_command_taking_no_wait_holds_the_lock() -> None:
    """--no-wait and the lock come from one declaration beside each command's
    parser: a command accepts the flag exactly when it holds the lock."""
    ap = cli.parser()
    (sub,) = [a for a in ap._actions if isinstance(a, argparse._SubParsersAction)]
    for name, p in sub.choices.items():
        takes = any("--no-wait" in a.option_strings for a in p._actions)
        assert bool(p.get_default("holds_lock")) == takes, name
    assert ap.parse_args(["move-check"]).holds_lock
    assert not ap.parse_args(["lint"]).holds_lock


def test_move_check_no_wait_fails_at_once_while_held(one_patch: Upstream) -> None:
    root = one_patch.root
    before = snapshot(root)
    with worklock.held(root, "build"):
        proc = run_cli(root, "move-check", "--no-wait")
    assert_clean_error(proc, "build/.vpq.lock is held by `vpq build` (pid", "--no-wait")
    assert snapshot(root) == before


def test_concurrent_builds_both_succeed(one_patch: Upstream) -> None:
    root = one_patch.root
    children = [_start_cli(root, "build", "--no-contract") for _ in range(3)]
    results = [(c.wait(timeout=300), c.communicate()) for c in children]
    assert [rc for rc, _ in results] == [0, 0, 0], [err for _, (_, err) in results]
    assert len(list((root / "dist").glob("*.whl"))) == 1


def test_a_killed_holder_does_not_block_the_next_command(one_patch: Upstream) -> None:
    root = one_patch.root
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from vpq.core import worklock\n"
            "with worklock.held(Path(sys.argv[1]), 'build'):\n"
            "    print('held', flush=True); time.sleep(600)\n",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    proc = run_cli(root, "build", "--no-contract", "--no-wait")
    assert proc.returncode == 0, proc.stderr
