"""Progress on long work: downloads, making venvs, importing a release,
running probes.

On a terminal a download is a ``tqdm`` bar and a step an in-place elapsed
time; elsewhere (CI logs, pipes) both are plain lines: a download says how
much is done at every tenth, a step says it started, that it is still running
every ``HEARTBEAT_S`` seconds, and how long it took (a step over within
``QUIET_S`` says nothing). Everything goes to stderr, so a command's results
on stdout stay as they were.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

#: Seconds between "still ..." lines of a step when output is not a terminal.
HEARTBEAT_S = 30.0
#: A step over within this many seconds prints nothing.
QUIET_S = 2.0


def _stream(stream: IO[str] | None) -> IO[str]:
    return stream if stream is not None else sys.stderr


def _is_tty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _tqdm() -> Any | None:
    """The ``tqdm`` class, or None where it is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def human_bytes(n: float) -> str:
    """``n`` bytes as a short figure: ``512 B``, ``3.4 MB``, ``1.2 GB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def human_seconds(s: float) -> str:
    """``s`` seconds as ``42 s`` or ``3 min 05 s``."""
    return f"{s:.0f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60):02d} s"


def download_line(name: str, done: int, total: int | None) -> str:
    """One plain progress line of a download."""
    if not total:
        return f"downloading {name}: {human_bytes(done)}"
    share = 100 * done // total
    return f"downloading {name}: {human_bytes(done)} of {human_bytes(total)} ({share}%)"


class Download:
    """A download's progress: ``update(n)`` per chunk; ``close()`` at the end.

    A terminal gets a ``tqdm`` bar; anything else a plain line at the start,
    at every further tenth of ``total`` (every 100 MB when it is unknown)
    and at the end.
    """

    def __init__(self, name: str, total: int | None, stream: IO[str] | None = None) -> None:
        self.name, self.total, self.done = name, total, 0
        self.out = _stream(stream)
        tqdm = _tqdm() if _is_tty(self.out) else None
        self.bar = (
            tqdm(total=total, desc=name, unit="B", unit_scale=True, file=self.out, leave=True)
            if tqdm
            else None
        )
        self._next = 0
        if self.bar is None:
            self._line()

    def _step(self) -> int:
        return self.total // 10 if self.total else 100_000_000

    def _line(self) -> None:
        print(download_line(self.name, self.done, self.total), file=self.out, flush=True)
        self._next = self.done + max(self._step(), 1)

    def update(self, n: int) -> None:
        """``n`` more bytes arrived."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.done >= self._next and self.done != self.total:
            self._line()

    def close(self) -> None:
        """The download ended (the last line says how much arrived)."""
        if self.bar is not None:
            self.bar.close()
        else:
            self._line()


@contextmanager
def download(name: str, total: int | None, stream: IO[str] | None = None) -> Iterator[Download]:
    """A ``Download`` for the ``with`` block, closed at its end."""
    d = Download(name, total, stream)
    try:
        yield d
    finally:
        d.close()


@contextmanager
def step(
    what: str,
    stream: IO[str] | None = None,
    heartbeat_s: float = HEARTBEAT_S,
    quiet_s: float = QUIET_S,
) -> Iterator[None]:
    """Say that ``what`` is happening, that it still is while it runs, and how
    long it took (or that it failed). A step over within ``quiet_s`` says
    nothing.

    Plain lines where output is not a terminal (``what ...``, then
    ``  still what (1 min 30 s)`` every ``heartbeat_s``, then
    ``what: done in 2 min 05 s``); on a terminal the elapsed time counts in
    place instead of the ``still`` lines.
    """
    out = _stream(stream)
    tty = _is_tty(out)
    t0 = time.monotonic()
    stop, shown = threading.Event(), threading.Event()

    def beat() -> None:
        """Announce the step once it outlasts ``quiet_s``, then the elapsed time."""
        if stop.wait(quiet_s):
            return
        print(f"{what} ...", file=out, flush=True)
        shown.set()
        while not stop.wait(1.0 if tty else heartbeat_s):
            took = human_seconds(time.monotonic() - t0)
            if tty:
                print(f"\r  {took}", end="", file=out, flush=True)
            else:
                print(f"  still {what} ({took})", file=out, flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        if shown.is_set():
            took = human_seconds(time.monotonic() - t0)
            end = "\r" if tty else ""
            verdict = "done in" if ok else "failed after"
            print(f"{end}{what}: {verdict} {took}", file=out, flush=True)
