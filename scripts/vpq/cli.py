"""Command line: ``python -m vpq <command>``.

Maps every ``VpqError`` to a one-paragraph message on stderr, without a
traceback: exit 1 for a user-fixable error, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from vpq import build, contract, fetch, lock, queue, series
from vpq.errors import UsageError, VpqError


def _root(ns: argparse.Namespace) -> Path:
    root = Path(ns.root).resolve()
    if not (root / "series").exists() and not (root / lock.LOCK_FILE).exists():
        raise UsageError(f"{root} is not a patch-queue repository (no series, no upstream.lock)")
    return root


def cmd_build(ns: argparse.Namespace) -> int:
    t0 = time.monotonic()
    root = _root(ns)
    prep = build.prepare(root, ns.upstream_source)
    results = build.build_wheels(
        root, platform=ns.platform, out_dir=Path(ns.out).resolve() if ns.out else None, prep=prep
    )
    for r in results:
        print(f"built {r.wheel.path}")
        print(f"  sha256 {r.wheel.sha256}")
        print(f"  audit ok: {r.report.members} members; differ from upstream: "
              f"{', '.join(r.report.differing)} + dist-info")
    print(f"built in {time.monotonic() - t0:.1f} s")
    mine = [r for r in results if r.platform == build.host_platform()]
    if ns.no_contract or not mine:
        print("contract check skipped" + ("" if mine else " (no wheel for this host's platform)"))
        return 0
    return _report_contract(build.contract_table(prep, mine[0].wheel.path), "the patched wheel")


def _report_contract(table: contract.Table, what: str) -> int:
    print(f"EAGLE-3 contract on {what}:")
    print(table.render())
    if table.gaps:
        gaps = "; ".join(f"{item} is {v} on {arch}" for item, arch, v in table.gaps)
        raise contract.ContractError(f"the EAGLE-3 contract does not hold for {what}: {gaps}")
    print("contract ok")
    return 0


def cmd_contract(ns: argparse.Namespace) -> int:
    what = "unpatched upstream" if ns.upstream else "the patched wheel"
    return _report_contract(build.contract_for_root(_root(ns), upstream=ns.upstream), what)


def cmd_apply(ns: argparse.Namespace) -> int:
    prep = build.prepare(_root(ns), ns.upstream_source)
    print(f"{prep.repo}: branch {queue.PATCHED_BRANCH} = {prep.upstream_ref} + {len(prep.patches)} patches")
    print("Commit changes there, then run `nox -s export` to write patches/ and series.")
    return 0


def cmd_export(ns: argparse.Namespace) -> int:
    root = _root(ns)
    pin = lock.load(root)
    old = series.load(root)
    repo = root / build.WORK_DIR
    entries = queue.export(repo, f"upstream/{pin.version}", old)
    changed = series.write(root, entries)
    for name in changed:
        print(f"wrote patches/{name}")
    print(f"series: {len(entries)} patches, {len(changed)} rewritten")
    if ns.check and changed:
        print("export changed files: the series is not in canonical form", file=sys.stderr)
        return 1
    return 0


def cmd_lint(ns: argparse.Namespace) -> int:
    problems = series.lint(_root(ns))
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("series ok")
    return 1 if problems else 0


def cmd_fetch(ns: argparse.Namespace) -> int:
    pin = lock.load(_root(ns))
    for art in [pin.sdist, *(pin.wheel(p) for p in build.platforms_for(pin, ns.platform))]:
        print(fetch.fetch(pin.name, art.filename, art.sha256))
    return 0


def cmd_fixture(ns: argparse.Namespace) -> int:
    from vpq import fixture

    for path in fixture.write_fixture(Path(ns.dest).resolve()):
        print(path)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vpq", description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--root", default=".", help="repository root (default: .)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="apply the series and build audited wheels into dist/")
    b.add_argument("--platform", default="all", help="x86_64, aarch64 or all (default)")
    b.add_argument("--upstream-source", choices=["sdist", "git"], default="sdist")
    b.add_argument("--out", help="output directory (default: dist/)")
    b.add_argument("--no-contract", action="store_true",
                   help="skip the EAGLE-3 contract check after the build (it needs a CPU venv)")
    b.set_defaults(func=cmd_build)
    a = sub.add_parser("apply", help="apply the series in build/work (to add or edit patches)")
    a.add_argument("--upstream-source", choices=["sdist", "git"], default="sdist")
    a.set_defaults(func=cmd_apply)
    e = sub.add_parser("export", help="write build/work's patch commits back to patches/ and series")
    e.add_argument("--check", action="store_true", help="fail if the export changed any file")
    e.set_defaults(func=cmd_export)
    sub.add_parser("lint", help="lint series and patches").set_defaults(func=cmd_lint)
    k = sub.add_parser("contract", help="discover the EAGLE-3 contract and check it on the claimed architectures")
    k.add_argument("--upstream", action="store_true", help="check unpatched upstream instead (shows the gaps the series fixes)")
    k.set_defaults(func=cmd_contract)
    f = sub.add_parser("fetch", help="download the pinned files into the cache")
    f.add_argument("--platform", default="all")
    f.set_defaults(func=cmd_fetch)
    x = sub.add_parser("fixture", help="write the tiny Kimi-K2.5 target and EAGLE-3 drafter (no weights) into DEST")
    x.add_argument("dest")
    x.set_defaults(func=cmd_fixture)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    ns = ap.parse_args(argv)
    try:
        return int(ns.func(ns))
    except VpqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; inputs and dist/ are unchanged", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
