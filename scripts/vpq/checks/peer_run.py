"""Running the peer tests: upstream's own test files, unpatched and patched.

Each chosen test file runs in its own pytest process (one crash or hang
costs one file), first in the control environment, then in the patched
one (``vpq.checks.peer_env``), with the tree of ``vpq.checks.peer_env.extract_tests`` as
the working directory, on CPU: no CUDA device, Triton's interpreter (the
rejection sampler's and EAGLE's kernels), the Hub offline. Outcomes, skip
reasons and failures come from the ``vpq.envs.probe_report`` plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vpq.checks import peer_backports, peer_env, peer_list, peer_report
from vpq.checks.peer_report import NO_REPORT, BackportResult, FileResult, Report, Side
from vpq.core import progress
from vpq.core.files import VERSION_FILE
from vpq.envs import engine_env
from vpq.source import fetch, lock
from vpq.wheels import build

#: The environment upstream's tests run under: CPU only, nothing downloaded.
ENV = {
    "CUDA_VISIBLE_DEVICES": "",
    "TRITON_INTERPRET": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
}
#: One test's limit (pytest-timeout) and one file's (its whole process).
TEST_TIMEOUT_S = 300
FILE_TIMEOUT_S = 1800
_TOOL_DIR = Path(__file__).resolve().parents[2]  # the directory holding vpq/


@dataclass(frozen=True)
class Envs:
    """The two interpreters and the upstream test tree they run in."""

    unpatched: Path
    patched: Path
    tree: Path
    version: str
    hf_home: Path  # peer_env.hub_home: the stand-ins, nothing else


def _pytest_cmd(python: Path, targets: list[str]) -> list[str]:
    return [
        str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "vpq.envs.probe_report",
        "-q", "-rN", "--no-header", "-o", "addopts=", "-o", f"timeout={TEST_TIMEOUT_S}", *targets,
    ]  # fmt: skip


def run_file(
    python: Path, tree: Path, targets: list[str], log: Path, hf_home: Path | None = None
) -> Side:
    """Run ``targets`` (one file, or node ids within it) with ``python`` in
    ``tree``, the Hub offline (``hf_home``: its cache); output to ``log``."""
    with tempfile.TemporaryDirectory(prefix="vpq-peer-") as tmp:
        out = {v: Path(tmp) / f"{v}.json" for v in ("REPORT", "FAILURES", "SKIPS", "MESSAGES")}
        env = {**os.environ, **ENV, "PYTHONPATH": str(_TOOL_DIR)}
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"  # its `vllm`
        if hf_home is not None:
            env["HF_HOME"] = str(hf_home)
        env.update({f"VPQ_PROBE_{v}": str(p) for v, p in out.items()})
        start = time.monotonic()
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as fh:
            try:
                rc = subprocess.run(
                    _pytest_cmd(python, targets), cwd=tree, env=env, stdout=fh,
                    stderr=subprocess.STDOUT, timeout=FILE_TIMEOUT_S, start_new_session=True,
                ).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                rc = -9
        seconds = time.monotonic() - start
        if not out["REPORT"].is_file():
            return Side({}, {}, seconds, f"{NO_REPORT} (exit {rc})")
        outcomes = json.loads(out["REPORT"].read_text())
        failures: dict[str, dict[str, str]] = _load(out["FAILURES"])
        reasons = {n: f["exception"] for n, f in failures.items()}
        reasons.update(_load(out["SKIPS"]))
        messages = _load(out["MESSAGES"])
    return Side(outcomes, reasons, seconds, messages=messages)


def _load(path: Path) -> Any:
    """The JSON in ``path``; none there (nothing recorded): ``{}``."""
    return json.loads(path.read_text()) if path.is_file() else {}


def targets_for(test_file: str, only: list[str] | None) -> list[str] | None:
    """What to run of ``test_file``: all of it, the ``only`` selectors within
    it, or None when ``only`` selects nothing there."""
    if only is None:
        return [test_file]
    mine = [s for s in only if s.split("::", 1)[0] == test_file]
    return mine or None


def run_all(
    envs: Envs,
    pl: peer_list.PeerList,
    logs: Path,
    only: list[str] | None = None,
    say: Callable[[str], None] | None = None,
    done: Callable[[list[FileResult]], None] | None = None,
) -> list[FileResult]:
    """Every chosen test file (or the ``only`` selectors) on both sides;
    ``done`` gets the results so far after each file."""
    results = []
    for test_file in pl.test_files():
        targets = targets_for(test_file, only)
        if targets is None:
            continue
        if not (envs.tree / test_file).is_file():
            raise peer_env.PeerEnvError(f"{test_file}: not in upstream {envs.version}'s tests/")
        log = logs / test_file.replace("/", "__")
        pythons = (("unpatched", envs.unpatched), ("patched", envs.patched))
        sides = [
            run_file(py, envs.tree, targets, Path(f"{log}.{n}.log"), envs.hf_home)
            for n, py in pythons
        ]
        result = FileResult(test_file, pl.sources_of(test_file), *sides)
        (say or _say)(_line(result))
        results.append(result)
        if done is not None:
            done(results)
    return results


def _part(side: Side, test_file: str, share: float) -> Side:
    """The part of a grouped run's ``side`` that is ``test_file``'s."""
    mine = {n for n in side.outcomes if n == test_file or n.startswith(test_file + "::")}
    outcomes = {n: side.outcomes[n] for n in mine}
    reasons = {n: r for n, r in side.reasons.items() if n in mine}
    messages = {n: m for n, m in side.messages.items() if n in mine}
    return Side(outcomes, reasons, side.seconds * share, side.status, messages)


def run_grouped(
    envs: Envs, pl: peer_list.PeerList, logs: Path, only: list[str]
) -> list[FileResult]:
    """The ``only`` selectors in one pytest process per side (two interpreter
    starts instead of two per file: CI's subset); each file's time is its
    share of the process's, by its number of selectors."""
    picked = {f: t for f in pl.test_files() if (t := targets_for(f, only)) is not None}
    targets = [t for ts in picked.values() for t in ts]
    pythons = (("unpatched", envs.unpatched), ("patched", envs.patched))
    sides = [run_file(py, envs.tree, targets, logs / f"grouped.{n}.log", envs.hf_home)
             for n, py in pythons]  # fmt: skip
    return [
        FileResult(f, pl.sources_of(f), *(_part(s, f, len(t) / len(targets)) for s in sides))
        for f, t in picked.items()
    ]


def _say(line: str) -> None:
    print(line, flush=True)


def _line(r: FileResult) -> str:
    a, b = r.unpatched.counts(), r.patched.counts()
    return (
        f"peer: {r.file}: unpatched {a} ({r.unpatched.seconds:.0f} s), "
        f"patched {b} ({r.patched.seconds:.0f} s)"
    )


def make_envs(root: Path, wheel: Path, changed: list[str], work: Path) -> Envs:
    """The two peer environments over the engine tier's base venv, and the
    pinned sdist's tests extracted under ``work``."""
    pin = lock.load(root)
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    base = engine_env.base_env(root, build.common_txt(pin))
    files = engine_env.overlay_files(wheel, [n for n in changed if n != VERSION_FILE])
    tools = peer_env.tools_of(sdist)
    with progress.step("peer tests: the unpatched and patched environments"):
        unpatched = peer_env.control_env(base, tools)
        patched = peer_env.patched_env(base, files, tools)
    tree = peer_env.extract_tests(sdist, work / f"upstream-{pin.version}")
    return Envs(unpatched, patched, tree, pin.version, peer_env.hub_home(work / "hf-home"))


def built_x86(root: Path) -> tuple[Path, list[str]]:
    """The x86_64 wheel of the series (the last build's when its inputs are
    the same, else built now) and the files it changes."""
    results = build.reuse(root) or build.build_wheels(root)
    x86 = next(r for r in results if r.platform == "x86_64")
    return x86.wheel.path, list(x86.report.differing)


def run_backports(root: Path, envs: Envs, work: Path) -> list[BackportResult]:
    """Each ``backport-tests.toml`` entry's tests, from its release's own test
    tree (moved imports adapted), on both sides."""
    entries, pins = peer_backports.load(root)
    trees: dict[str, Path] = {}
    out = []
    for e in (e for e in entries if e.tests):
        if e.release not in trees:
            sdist = peer_backports.sdist(e.release, pins[e.release])
            trees[e.release] = peer_env.extract_tests(sdist, work / f"upstream-{e.release}")
        tree = trees[e.release]
        adapted = peer_backports.adapt(tree, e)
        log = work / "logs" / f"backport-{e.patch.replace('/', '__')}"
        pythons = (("unpatched", envs.unpatched), ("patched", envs.patched))
        sides = [run_file(py, tree, list(e.tests), Path(f"{log}.{n}.log"), envs.hf_home)
                 for n, py in pythons]  # fmt: skip
        result = BackportResult(e.patch, e.release, adapted, *sides)
        _say(f"backport: {e.patch} ({e.release}): unpatched {sides[0].counts()}, "
             f"patched {sides[1].counts()}")  # fmt: skip
        out.append(result)
    return out


def run_tier(
    root: Path, out_dir: Path, only: list[str] | None = None, backports: bool = True
) -> Report:
    """Build (or reuse) the wheel, make both environments, run every chosen
    file (or ``only``) and, with ``backports``, the backports' source tests;
    return the report. After each file the report so far is written into
    ``out_dir`` (``peer_report.write``), so a run cut short leaves its part."""
    pl = peer_list.load(root)
    expected = peer_list.load_expected(root)
    wheel, changed = built_x86(root)
    envs = make_envs(root, wheel, changed, out_dir / "peer")
    standins = dict(peer_env.HUB_STANDINS)

    def partial(files: list[FileResult]) -> None:
        """Write the report of the files run so far."""
        peer_report.write(Report(envs.version, list(files), expected, standins), out_dir)

    files = run_all(envs, pl, out_dir / "peer" / "logs", only, done=partial)
    done = run_backports(root, envs, out_dir / "peer") if backports else []
    return Report(envs.version, files, expected, standins, done)
