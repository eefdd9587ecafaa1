"""The preflight's one entry: ``python scripts/verify_install.py``, ``python -m
vpq preflight`` and ``python -m vpq --root . preflight`` (the tool's CLI) give
the same output and exit code on bad input, and none prints a traceback.

Each entry runs as a subprocess, as an operator runs it; the last test runs
the CLI and the script in-process to reach the guard with an exception no
checkpoint can raise on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import verify_install as vi

from tests.support import heads
from tests.support.paths import REPO_ROOT

ENTRIES = {
    "script": [str(REPO_ROOT / "scripts" / "verify_install.py")],
    "vpq preflight": ["-m", "vpq", "preflight"],
    "vpq cli": ["-m", "vpq", "--root", str(REPO_ROOT), "preflight"],
}


def run(entry: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *ENTRIES[entry], *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "scripts")},
        cwd=REPO_ROOT,
        timeout=120,
    )


def _bad_json_head(tmp_path: Path) -> Path:
    head = tmp_path / "bad-json"
    head.mkdir()
    (head / "config.json").write_text('{"architectures": [\n')
    return head


def _target_with_int_architectures(target: Path, tmp_path: Path) -> Path:
    """The tiny target, its ``architectures`` an integer: a rule that reads
    it as a list raised (before one guarded entry, a traceback from the CLI)."""
    bad = tmp_path / "int-architectures"
    bad.mkdir()
    cfg = json.loads((target / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**cfg, "architectures": 5}))
    return bad


CASES = {
    "missing --drafter": lambda target, tmp: ["--model", str(target)],
    "missing --model": lambda target, tmp: ["--drafter", str(target)],
    "--json alone": lambda target, tmp: ["--json"],
    "drafter config.json not JSON": lambda target, tmp: [
        "--model",
        str(target),
        "--drafter",
        str(_bad_json_head(tmp)),
        "--no-vllm",
    ],
    "target architectures an integer": lambda target, tmp: [
        "--model",
        str(_target_with_int_architectures(target, tmp)),
        "--drafter",
        str(heads.write_head(tmp / "h", heads.llama_top_level())),
        "--no-vllm",
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_entry_gives_the_same_output_and_exit_code(
    case: str, target: Path, tmp_path: Path
) -> None:
    args = CASES[case](target, tmp_path)
    results = {entry: run(entry, *args) for entry in ENTRIES}
    for entry, proc in results.items():
        assert "Traceback" not in proc.stdout + proc.stderr, (entry, proc.stderr)
        assert proc.returncode in (1, 2), (entry, proc.returncode)
    seen = {entry: (p.returncode, p.stdout, p.stderr) for entry, p in results.items()}
    assert len(set(seen.values())) == 1, seen


def test_a_usage_error_is_one_paragraph_after_the_usage_line(target: Path) -> None:
    proc = run("vpq cli", "--model", str(target))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"usage: {vi.PREFLIGHT_USAGE}\npreflight: error: preflight needs --model TARGET_DIR "
        "and --drafter HEAD_DIR\n"
    )


def test_an_unexpected_exception_is_one_line_from_both_entries(
    target: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from vpq import cli

    def boom(*args: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(vi, "load_pair", boom)
    head = heads.write_head(tmp_path / "h", heads.llama_top_level())
    args = ["--model", str(target), "--drafter", str(head), "--no-vllm"]
    seen = []
    for entry in (lambda: cli.main(["preflight", *args]), lambda: vi.main(args)):
        code = entry()
        out = capsys.readouterr()
        seen.append((code, out.out, out.err))
    assert seen[0] == seen[1]
    code, out, err = seen[0]
    assert code == 1 and out == ""
    assert err == (
        "preflight: FAILED: unexpected RuntimeError: boom (a bug in this script; please report "
        "it with the two config.json files)\n"
    )
