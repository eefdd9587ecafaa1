"""scripts/verify_install.py on the Pythons of serving hosts, 3.10 to 3.13
(vLLM 0.17.1's wheel is cp38-abi3, and its torch has wheels for those).

The script is copied to a host whose Python is not ours, so it must parse
at 3.10's feature level and run there on the standard library alone. Each
interpreter is found on this machine without installing one (PATH outside
venvs, ``/usr/bin``, pyenv's versions: ``tests/support/pythons.py``; this machine's
image has pyenv's 3.10.13, 3.11.7, 3.12.1 and 3.13.0, and Debian's 3.11.2),
and runs the script isolated (``-I``: no site-packages of ours, no
PYTHONPATH): ``--help``, the install check without vLLM, and the offline
preflight (``--no-vllm``) on tiny checkpoints, whose output must be byte for
byte what this Python prints. A version is skipped only where no
interpreter of it is on the machine.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import heads
from tests.support.paths import REPO_ROOT
from tests.support.pythons import find_minor

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"
#: The serving hosts' Pythons (vLLM 0.17.1 supports 3.10 to 3.13).
SERVING_MINORS = (10, 11, 12, 13)


def test_the_script_parses_at_the_oldest_serving_python_s_feature_level() -> None:
    """The grammar check that holds even where no 3.10 is installed
    (``feature_version`` rejects newer syntax such as ``except*`` or PEP 695
    generics; it does not see newer standard-library names)."""
    ast.parse(SCRIPT.read_text(encoding="utf-8"), feature_version=(3, SERVING_MINORS[0]))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny target and three heads: a good one, one without layer ids
    (a warning), one with a truncated safetensors header (an error)."""
    root = tmp_path_factory.mktemp("pair")
    bad = heads.write_head(root / "bad", heads.llama_top_level())
    (bad / "model.safetensors").write_bytes((bad / "model.safetensors").read_bytes()[:40])
    return {
        "target": heads.write_target(root / "kimi-k25-tiny"),
        "good": heads.write_head(root / "good", heads.llama_top_level()),
        "no-ids": heads.write_head(root / "no-ids", heads.llama_no_ids()),
        "bad": bad,
    }


def _run(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-I", str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def _offline(python: str, pair: dict[str, Path]) -> list[subprocess.CompletedProcess[str]]:
    """The preflight's file rules on each head, as text and as JSON."""
    target = ["--model", str(pair["target"]), "--no-vllm"]
    return [
        _run(python, *target, "--drafter", str(pair[name]), *extra)
        for name in ("good", "no-ids", "bad")
        for extra in ([], ["--json"], ["--strict"])
    ]


@pytest.fixture(scope="module")
def ours(pair: dict[str, Path]) -> list[subprocess.CompletedProcess[str]]:
    """The offline runs under the Python that runs the tests."""
    return _offline(sys.executable, pair)


@pytest.mark.parametrize("minor", SERVING_MINORS, ids=[f"3.{m}" for m in SERVING_MINORS])
def test_the_script_runs_on_each_serving_python(
    minor: int, pair: dict[str, Path], ours: list[subprocess.CompletedProcess[str]]
) -> None:
    python = find_minor(minor)
    if python is None:
        pytest.skip(f"no Python 3.{minor} on this machine (PATH, /usr/bin, pyenv)")
    exe = str(python.executable)
    helped = _run(exe, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage:"), helped.stderr
    assert "--model" in helped.stdout and "--drafter" in helped.stdout
    check = _run(exe)  # no vLLM in an isolated interpreter: one line, exit 1
    assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr
    assert len(check.stderr.strip().splitlines()) == 1, check.stderr
    theirs = _offline(exe, pair)
    assert [p.returncode for p in theirs] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    for t, o in zip(theirs, ours, strict=True):
        assert (t.returncode, t.stdout, t.stderr) == (o.returncode, o.stdout, o.stderr), t.args
