"""Running the CLI (``python -m vpq``) on a tiny upstream, and what a clean
error and an unchanged input look like."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ["series", "upstream.lock", "patches", "dist"]:
        p = root / sub
        files = (
            [p]
            if p.is_file()
            else sorted(q for q in p.rglob("*") if q.is_file())
            if p.exists()
            else []
        )
        for f in files:
            out[str(f.relative_to(root))] = f.read_bytes()
    return out


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vpq", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )


def assert_clean_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for n in needles:
        assert n in proc.stderr, proc.stderr
