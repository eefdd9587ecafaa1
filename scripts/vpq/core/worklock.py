"""The work-tree lock: one command at a time on a checkout.

Every command that writes ``build/work``, ``dist/`` or the inputs
(``patches/``, ``series``, ``upstream.lock``) holds ``build/.vpq.lock``, an
OS file lock (``filelock``), for its whole run. A second command on the
same checkout waits, after one line on stderr naming the command that holds
the lock, its pid and since when; with ``--no-wait`` it fails at once
instead. The kernel drops the lock when its holder dies, even by SIGKILL, so
a crashed command never blocks the next one; the owner note beside the
lock (``build/.vpq.lock.owner``) is informational only.

The lock is per process and not re-entrant across ``held`` calls: take it
once, at the command's entry point.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.core.workspace import BUILD

LOCK_FILE = BUILD / ".vpq.lock"


class LockBusy(VpqError):
    """Another command holds the work-tree lock and ``--no-wait`` was given."""


def _owner_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".owner")


def holder(lock_path: Path) -> str:
    """Who holds ``lock_path``, from its owner note: ``vpq build (pid 123,
    since 2026-11-30 07:01:02 UTC)``, or ``another command`` if unreadable."""
    try:
        note = json.loads(_owner_path(lock_path).read_text())
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(note["since"])))
        return f"`vpq {note['command']}` (pid {int(note['pid'])}, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another command"


@contextmanager
def held(root: Path, command: str, *, wait: bool = True) -> Iterator[None]:
    """Hold the work-tree lock of the checkout at ``root`` while in the block.

    Args:
        command: the command's name, shown to a command that has to wait.
        wait: wait for the holder to finish (after one line on stderr), or
            raise at once.

    Raises:
        LockBusy: ``wait`` is False and another command holds the lock.
    """
    path = root / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder(path)
        if not wait:
            raise LockBusy(
                f"{path} is held by {who}; this checkout runs one command at a time. "
                "Wait for it to finish, or run without --no-wait to wait for it."
            ) from None
        print(f"waiting for {path}: held by {who}", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        note = {"command": command, "pid": os.getpid(), "since": time.time()}
        write_atomic(_owner_path(path), (json.dumps(note) + "\n").encode())
        yield
    finally:
        _owner_path(path).unlink(missing_ok=True)
        lock.release()
