"""Child processes: one way to run a command and report its failure, and
the tagged-line protocol the probes speak.

A probe (``contract/probe.py``, the tests' ``eagle3_probe.py`` and
``fixture_probe.py``) runs in another interpreter and prints its result as
one line ``<TAG> <json>``; ``tagged_json`` reads the last such line, so
whatever vLLM logs to stdout around it does not matter.

Standard library only: ``noxfile.py`` imports ``vpq.envs.gpu``, which uses this,
before anything is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from vpq.core.errors import VpqError

#: The pytest requirement of every venv the tool makes to run tests in.
PYTEST = "pytest>=8"


def run(
    cmd: list[str],
    error: type[VpqError],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stream: bool = False,
) -> None:
    """Run ``cmd`` (with ``env`` added to this process's environment).

    ``stream`` lets its output through to the terminal after a ``+ cmd``
    line (long installs a person watches); otherwise it is captured and its
    tail goes into the error.

    Raises:
        error: the command failed; the message names it (and ``cwd``).
    """
    shown = " ".join(cmd[:6]) + (" ..." if len(cmd) > 6 else "")
    where = f" in {cwd}" if cwd else ""
    full_env = {**os.environ, **(env or {})}
    if stream:
        print("+ " + " ".join(cmd), flush=True)
        if subprocess.run(cmd, cwd=cwd, env=full_env).returncode != 0:
            raise error(f"{shown} failed{where} (output above)")
        return
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout[-2000:] + "\n" + proc.stderr[-2000:]).strip().replace("\n", " | ")
        raise error(f"{shown} failed{where}: {tail}")


def tagged_json(stdout: str, tag: str) -> object | None:
    """The JSON value on the last line of ``stdout`` that starts with
    ``<tag> ``, or None when there is no such line."""
    prefix = tag + " "
    lines = [ln for ln in stdout.splitlines() if ln.startswith(prefix)]
    return json.loads(lines[-1][len(prefix) :]) if lines else None
