"""``nox -s bench``: build speed against vLLM's own build, in one run.

Each case runs ``python -m vpq ...`` in a child process and records its
wall time (s) and peak resident memory (MiB, from ``wait4``'s rusage).
Ratios are against vLLM's own precompiled build (``--backend setuptools``)
measured in the same run on the same machine. The staircase cases
(``rebase_upstream --check`` on two releases: cold, warm and unchanged,
the last answered by the verdict cache) compare with each other too. The
installer cases (the contract check's wheel venv for upstream's wheel of
this host, by pip and by uv in turn) compare with pip's case of the same
round (``vs_pip``). The cold-path cases (the first ``vpq build`` on a cold
cache, and the tests' deps venv made on one: fresh ``VPQ_CACHE_DIR``,
``PIP_CACHE_DIR`` and ``UV_CACHE_DIR`` each) run by the old pip path
(``VPQ_DEPS_LOCK=off``) and from ``cpu-deps.lock``, the lock's ``vs_pip``
its ratio to pip's. Results go to ``build/bench.json`` and a table on
stdout. Nothing here asserts on time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vpq.core.files import write_atomic
from vpq.core.workspace import Workspace
from vpq.envs import installer
from vpq.source import fetch, lock, queue, tree
from vpq.wheels import build


@dataclass
class Case:
    """One timed command: wall time, peak RSS, whether it succeeded, its
    ratio to the baseline and, for a staircase case, to the cold staircase
    run of the same bench (``vs_cold``); for an installer case, to pip's
    case of its round (``vs_pip``); for a serving case, to the same load
    served without speculation (``vs_plain``); for a pipeline case, to the
    same load with one batch in flight (``vs_one_batch``)."""

    name: str
    seconds: float
    peak_rss_mib: float
    ok: bool
    ratio: float | None = None
    vs_cold: float | None = None
    vs_pip: float | None = None
    vs_plain: float | None = None
    vs_one_batch: float | None = None


def measure(
    name: str,
    args: list[str],
    root: Path,
    *,
    cmd: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Case:
    """Run ``python -m vpq --root ROOT ARGS`` (or ``cmd``) and measure it."""
    # stderr goes to a file, not a pipe: a child writing more than a pipe
    # holds (64 KiB) would block while we wait for it.
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd or [sys.executable, "-m", "vpq", "--root", str(root), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        ok = os.waitstatus_to_exitcode(status) == 0
        if not ok:
            err.seek(0)
            sys.stderr.write(f"{name}: {err.read().decode(errors='replace')[-2000:]}\n")
    return Case(name, round(seconds, 2), round(usage.ru_maxrss / 1024, 1), ok)


BASELINE = "vLLM's own build"


def _whole_command_warm(root: Path) -> Case:
    """``nox -s build_wheel`` as a user types it (nox, the venv check, the
    build of every platform into dist/, the contract check), run once to warm
    every cache and measured the second time, with an unchanged series."""
    nox = [sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-s", "build_wheel"]
    measure("warm-up", [], root, cmd=nox)
    return measure("nox -s build_wheel, whole command, warm", [], root, cmd=nox)


def _vllm_own_build(root: Path, pin: lock.Lock, plat: str, out: Path) -> Case:
    """The baseline: exactly vLLM's documented Python-only build of the
    patched tree (``VLLM_USE_PRECOMPILED=1 python -m build --wheel``), with
    none of our steps."""
    prep = build.prepare(root)
    src = Workspace(root).bench_src
    tree.export_tree(prep.repo, queue.PATCHED_BRANCH, src)
    up = fetch.fetch(pin.name, pin.wheel(plat).filename, pin.wheel(plat).sha256)
    try:
        return measure(
            f"{BASELINE} (VLLM_USE_PRECOMPILED=1 python -m build) {plat}",
            [],
            root,
            cmd=[sys.executable, "-m", "build", "--wheel", "--outdir", str(out / "vllm"), str(src)],
            env={"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_LOCATION": str(up)},
        )
    finally:
        shutil.rmtree(src, ignore_errors=True)


def _build(name: str, root: Path, out: Path, *args: str) -> Case:
    """One ``vpq build --no-contract --out OUT ARGS`` case."""
    return measure(name, ["build", *args, "--no-contract", "--out", str(out)], root)


def _build_cases(root: Path, plats: list[str], out: Path) -> list[Case]:
    """Cold (no ``build/work``) and warm overlay builds per platform, both
    platforms warm, and the whole ``nox -s build_wheel`` warm."""
    cases = []
    for plat in plats:
        shutil.rmtree(Workspace(root).work, ignore_errors=True)
        cases.append(_build(f"build_wheel cold {plat}", root, out / "c", "--platform", plat))
        cases.append(_build(f"build_wheel warm {plat}", root, out / "w", "--platform", plat))
    cases.append(_build("build_wheel warm all platforms", root, out / "a", "--platform", "all"))
    cases.append(_whole_command_warm(root))
    return cases


#: The releases of the staircase cases: the first after the pin and the newest.
STAIRCASE_RELEASES = ("0.18.1", "0.33.0")


def _staircase_cases(root: Path, releases: list[str]) -> list[Case]:
    """``rebase_upstream --check RELEASES`` three ways: cold (no
    ``build/work``, every verdict computed: ``--no-cache``), warm
    (``build/work`` kept, still ``--no-cache``: the replay, the contract
    import and the probe run again) and unchanged (the verdict cache, which
    the warm run refreshed, answers). The releases' deps venvs are reused
    in all three."""
    args = ["rebase", "--check", *releases]
    what = f"rebase_upstream --check {' '.join(releases)}"
    shutil.rmtree(Workspace(root).work, ignore_errors=True)
    cases = [
        measure(f"{what}, cold (--no-cache, no build/work)", [*args, "--no-cache"], root),
        measure(f"{what}, warm (--no-cache)", [*args, "--no-cache"], root),
        measure(f"{what}, unchanged (verdict cache)", args, root),
    ]
    for c in cases:
        c.vs_cold = round(c.seconds / cases[0].seconds, 3) if cases[0].ok else None
    return cases


#: A child that makes one wheel venv: ``python -c WHEEL_ENV DEST DEPS WHEEL``.
WHEEL_ENV = (
    "import sys; from pathlib import Path; from vpq.envs import venv; "
    "venv.wheel_env(*map(Path, sys.argv[1:4]))"
)


def installer_cases(root: Path, wheel: Path, rounds: int = 2) -> list[Case]:
    """``venv.wheel_env`` on ``wheel`` (``python -m venv``, then the wheel
    with ``--no-deps``: the contract check's first-time step) by pip and,
    where it is installed, by uv (``VPQ_INSTALLER``), in turn for ``rounds``
    rounds; each case's ``vs_pip`` is its ratio to pip's of the same round."""
    names = ["pip", "uv"] if installer.uv_bin() else ["pip"]
    Workspace(root).build.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-venv-", dir=Workspace(root).build))
    site = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (tmp / "deps" / "lib" / site / "site-packages").mkdir(parents=True)
    cases = []
    try:
        for n in range(1, rounds + 1):
            pip = None
            for name in names:
                dest = tmp / f"{name}-{n}"
                cmd = [sys.executable, "-c", WHEEL_ENV, str(dest), str(tmp / "deps"), str(wheel)]
                case = measure(f"contract wheel venv by {name}, round {n}", [], root,
                               cmd=cmd, env={"VPQ_INSTALLER": name})  # fmt: skip
                pip = pip or case
                case.vs_pip = round(case.seconds / pip.seconds, 3) if pip.ok else None
                cases.append(case)
                shutil.rmtree(dest, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cases


#: A child that makes the tests' deps venv: ``python -c DEPS_ENV COMMON_TXT``.
DEPS_ENV = (
    "import sys; from pathlib import Path; from vpq.envs import venv; "
    "venv.deps_env(Path(sys.argv[1]).read_bytes())"
)
#: A child that makes the engine tier's base venv: ``python -c ENGINE_ENV ROOT COMMON_TXT``.
ENGINE_ENV = (
    "import sys; from pathlib import Path; from vpq.envs import engine_env; "
    "engine_env.base_env(Path(sys.argv[1]), Path(sys.argv[2]).read_bytes())"
)
#: A child that makes the reference engine's venv: ``python -c REFERENCE_ENV ROOT``.
REFERENCE_ENV = (
    "import sys; from pathlib import Path; from vpq.envs import engine_env; "
    "engine_env.reference_engine(Path(sys.argv[1]))"
)
#: The cold-path cases' two ways: the old path (pip resolving), then the
#: locks (cpu-deps.lock, tests/engine/cpu-engine.lock, reference-engine.lock).
COLD_WAYS = (("pip", "off"), ("the lock", "on"))


def cold_caches(where: Path) -> dict[str, str]:
    """Fresh, empty download, pip and uv caches under ``where``, as the
    environment the tool, pip and uv honour."""
    env = {}
    for var, name in (("VPQ_CACHE_DIR", "vpq"), ("PIP_CACHE_DIR", "pip"), ("UV_CACHE_DIR", "uv")):
        (where / name).mkdir(parents=True)
        env[var] = str(where / name)
    return env


def cold_cases(root: Path, common_txt: bytes, *, engine: bool = True) -> list[Case]:
    """The first ``vpq build`` (no ``build/work``, into a fresh out dir:
    downloads, both wheels, the deps venv, the wheel's venv, the contract),
    the tests' deps venv alone (``venv.deps_env`` on ``common_txt``, as
    tests/integration/conftest.py makes it) and, with ``engine``, the
    engine tier's base venv (``engine_env.base_env``, about 4 GB) and the
    reference engine's (``engine_env.reference_engine``), each on cold
    caches by the old pip path and from its lock; ``vs_pip``: the ratio
    to pip's."""
    Workspace(root).build.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-", dir=Workspace(root).build))
    (tmp / "common.txt").write_bytes(common_txt)
    deps = [sys.executable, "-c", DEPS_ENV, str(tmp / "common.txt")]
    runs: list[tuple[str, list[str], list[str] | None]] = [
        ("first vpq build, cold caches", ["build", "--out", str(tmp / "dist")], None),
        ("the tests' deps venv, cold caches", [], deps),
    ]
    if engine:
        base = [sys.executable, "-c", ENGINE_ENV, str(root), str(tmp / "common.txt")]
        runs.append(("the engine tier's base venv, cold caches", [], base))
        ref = [sys.executable, "-c", REFERENCE_ENV, str(root)]
        runs.append(("the reference engine's venv, cold caches", [], ref))
    cases: list[Case] = []
    try:
        for what, args, cmd in runs:
            pip = None
            for how, mode in COLD_WAYS:
                shutil.rmtree(Workspace(root).work, ignore_errors=True)
                env = {**cold_caches(tmp / "caches"), "VPQ_DEPS_LOCK": mode}
                case = measure(f"{what}, {how}", args, root, cmd=cmd, env=env)
                pip = pip or case
                case.vs_pip = round(case.seconds / pip.seconds, 3) if pip.ok else None
                cases.append(case)
                shutil.rmtree(tmp / "caches", ignore_errors=True)
                shutil.rmtree(tmp / "dist", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cases


def _reported_run(
    root: Path, label: str, test: str, report_env: str, *args: str
) -> tuple[Case, list[dict[str, Any]]]:
    """Run the engine-tier ``test`` (with ``args``) as one measured case,
    and the rows it wrote, one JSON object a line, to the file named by
    ``$report_env`` (a temporary file under build/, removed after)."""
    fd, name = tempfile.mkstemp(prefix="bench-report-", suffix=".jsonl", dir=Workspace(root).build)
    os.close(fd)
    report = Path(name)
    cmd = [sys.executable, "-m", "pytest", str(root / test), *args, "-q", "-p", "no:cacheprovider"]
    env = {report_env: str(report), "PYTHONPATH": str(root / "scripts")}
    whole = measure(label, [], root, cmd=cmd, env=env)
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    report.unlink(missing_ok=True)
    return whole, rows


#: The engine tier's load case that serves the same 34 requests from two
#: ``vllm serve`` processes, EAGLE-3 and none (tests/engine/test_server_load.py).
LOAD_TEST = (
    "tests/engine/test_server_load.py::test_the_load_equals_the_load_served_without_speculation"
)


def serving_cases(root: Path) -> list[Case]:
    """The load test run for its figures: the whole run, then each load's
    wall time as the test measured it (``VPQ_LOAD_REPORT``), with
    ``vs_plain`` the ratio to the load served without speculation. On the
    CPU engine (EAGLE-3's kernels in Triton's interpreter) this is not a
    GPU throughput figure."""
    whole, rows = _reported_run(root, "load test: two vllm serve, one load each",
                                LOAD_TEST, "VPQ_LOAD_REPORT")  # fmt: skip
    cases = [Case(f"load: {r['requests']} requests, {r['name']}", r["seconds"], 0.0, whole.ok)
             for r in rows]  # fmt: skip
    plain = next((c for c in cases if c.name.endswith("no speculation")), None)
    for c in cases:
        c.vs_plain = round(c.seconds / plain.seconds, 3) if plain else None
    return [whole, *cases]


#: The engine tier's PP=2 case that serves one load overlapped and under the
#: one-batch rule (tests/engine/test_pipeline_parallel.py).
PIPELINE_TEST = (
    "tests/engine/test_pipeline_parallel.py::"
    "test_pipeline_parallel_2_overlap_and_the_one_batch_rule_serve_one_load"
)


def pipeline_cases(root: Path) -> list[Case]:
    """The PP=2 case run for its figures: the whole run, then each load's
    wall time as the test measured it (``VPQ_PIPELINE_REPORT``), with
    ``vs_one_batch`` the ratio to the load with one batch in flight. On the
    CPU engine (two stages on two cores, EAGLE-3's kernels in Triton's
    interpreter) this is not a GPU throughput figure."""
    whole, rows = _reported_run(root, "PP=2: one load overlapped, one with one batch",
                                PIPELINE_TEST, "VPQ_PIPELINE_REPORT", "--outside-ci")  # fmt: skip
    cases = [Case(f"PP=2: {r['requests']} requests, {r['name']}", r["seconds"], 0.0, whole.ok)
             for r in rows]  # fmt: skip
    base = next((c for c in cases if c.name.endswith("one batch in flight")), None)
    for c in cases:
        c.vs_one_batch = round(c.seconds / base.seconds, 3) if base else None
    return [whole, *cases]


def run(
    root: Path,
    *,
    with_native: bool = True,
    with_builds: bool = True,
    rebase_targets: list[str] | None = None,
    with_installers: bool = True,
    with_serving: bool = False,
    with_cold: bool = True,
    with_pipeline: bool = False,
) -> list[Case]:
    """All cases (``with_builds=False``: no build cases); the native
    build is the baseline for the ratios. ``rebase_targets``: the staircase
    cases' releases (default ``STAIRCASE_RELEASES``; empty: none).
    ``with_installers``: the installer cases (``installer_cases``);
    ``with_serving``: the load test's cases (``serving_cases``);
    ``with_cold``: the cold-path cases (``cold_cases``); ``with_pipeline``:
    the PP=2 overlap cases (``pipeline_cases``)."""
    pin = lock.load(root)
    out = Path(tempfile.mkdtemp(prefix="bench-", dir=Workspace(root).build))
    targets = list(STAIRCASE_RELEASES) if rebase_targets is None else rebase_targets
    try:
        cases = _build_cases(root, sorted(pin.wheels), out) if with_builds else []
        if with_native:
            host = build.host_platform()
            cases.append(_vllm_own_build(root, pin, host, out))
            name = f"build_wheel --backend setuptools {host}"
            cases.append(
                _build(name, root, out / "n", "--platform", host, "--backend", "setuptools")
            )
        if targets:
            cases += _staircase_cases(root, targets)
        if with_installers:
            art = pin.wheel(build.host_platform())
            cases += installer_cases(root, fetch.fetch(pin.name, art.filename, art.sha256))
        if with_serving:
            cases += serving_cases(root)
        if with_pipeline:
            cases += pipeline_cases(root)
        if with_cold:
            cases += cold_cases(root, build.common_txt(pin))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    base = next((c for c in cases if c.name.startswith(BASELINE) and c.ok), None)
    for c in cases:
        c.ratio = round(c.seconds / base.seconds, 3) if base else None
    write_atomic(
        Workspace(root).bench_report,
        (json.dumps([asdict(c) for c in cases], indent=2) + "\n").encode(),
    )
    return cases


def render(cases: list[Case]) -> str:
    """The bench table as printed: case, wall s, peak RSS MiB, ratio to the
    baseline, and a staircase case's ratio to the cold staircase run."""
    w = max(len(c.name) for c in cases)
    head = f"{'case':<{w}}  {'wall s':>8}  {'peak RSS MiB':>12}  {'/ vLLM build':>12}"
    cols = f"  {'/ cold check':>12}  {'/ pip':>6}  {'/ no spec':>9}  {'/ 1 batch':>9}  ok"
    lines = [head + cols]
    for c in cases:
        ratio, cold, pip, plain, one = (
            f"{x:.3f}" if x is not None else "-"
            for x in (c.ratio, c.vs_cold, c.vs_pip, c.vs_plain, c.vs_one_batch)
        )
        lines.append(
            f"{c.name:<{w}}  {c.seconds:>8.2f}  {c.peak_rss_mib:>12.1f}  {ratio:>12}  "
            f"{cold:>12}  {pip:>6}  {plain:>9}  {one:>9}  {'yes' if c.ok else 'NO'}"
        )
    return "\n".join(lines)
