"""Mutation check: take each patch out of the series in turn and run the
tests its probe names (``probes.toml``); every patch must make at least one
of them fail on an assertion.

A mutant is the patched tree (``build/work``'s ``patched`` branch) with one
patch reverse-applied (``git apply -R``: atomic, no fuzz), or, where later
patches rewrote its lines so that it does not reverse-apply, the series
cherry-picked onto upstream without it and without the later patches that
no longer apply (named in the verdict: a failure there may be theirs),
exported outside any repository and imported from the pinned release's CPU deps venv, the
way ``vpq.move.rebase`` runs probes on an unpatched release. How each test
failed comes from ``vpq.envs.probe_report``: a patch is *caught* when one of its
tests fails on its own check (an assertion) or on the error its
``fails_unpatched_with`` marker says the patch fixes (``declared-error``);
it is *missed* when its tests pass without it, or fail only where they reach
for an interface (``declared-dependency``, an undeclared error, a file that
no longer imports). A baseline run on the whole series comes first: a test
that does not pass there proves nothing by failing on a mutant.

Outside CI (``nox -s mutation``): one pytest run per patch, about 20-40 s
each on two cores.

``--record`` keeps the verdicts in ``mutation.toml`` beside ``series``: per
patch its status, the sha256 of the pinned upstream sdist, of the patch
file's bytes and of its probe's selectors, the tests that caught it and the
sha256 of the files holding them. ``vpq lint`` (``lint`` here) fails,
naming the patch, where a patch in the series has no ``caught`` record that
still matches those bytes: moving the pin, or adding or changing a patch,
its probe or a test that caught it, asks for a mutation run of that patch
(``nox -s mutation -- --record PATCH``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import tomli_w

from vpq.core.errors import VpqError
from vpq.core.files import sha256_file, write_atomic
from vpq.envs import contract_run as contract
from vpq.envs import probe_run
from vpq.source import git as g
from vpq.source import lock, probe, queue, series, tree
from vpq.wheels import build

#: What a patch's mutant showed.
CAUGHT, MISSED, NO_TESTS, NOT_REVERTED, BASELINE = (
    "caught",
    "missed",
    "no tests",
    "does not revert",
    "baseline fails",
)
#: Failure kinds (``vpq.envs.probe_report``) that show the patch's behaviour missing.
CATCHING_KINDS = ("assertion", "declared-error")
REPORT = Path("build") / "mutation.json"
#: The checked-in record of each patch's verdict (``record``, ``lint``).
RECORD_FILE = "mutation.toml"
RECORD_HEADER = """\
# Mutation check record: each patch's verdict when it was last taken out of
# the series (scripts/vpq/checks/mutation.py). Written by `nox -s mutation -- --record
# [PATCH ...]`; `nox -s lint` requires a "caught" record whose hashes match the
# upstream pin, the patch file, its probes.toml table and the test files that
# caught it.

"""


class MutationError(VpqError):
    """The mutation check cannot run (an unknown patch name, no tree)."""


@dataclass(frozen=True)
class Verdict:
    """One patch taken out: what its tests did, and the sha256 of the patch
    file and of its tests' files as they were when they ran."""

    patch: str
    status: str
    detail: str
    failures: dict[str, dict[str, str]]
    patch_sha256: str = ""
    test_sha256: dict[str, str] = field(default_factory=dict)


def selected(p: probe.Probe, nodes: list[str]) -> list[str]:
    """The node ids among ``nodes`` that probe ``p`` selects (after its excludes)."""
    return [n for n in nodes if probe.selects(p, n)]


def mutant(repo: Path, patch: Path, dest: Path) -> str | None:
    """Export the patched tree to ``dest`` (outside any repository) and
    reverse-apply ``patch`` there; None on success, else git's complaint."""
    tree.export_tree(repo, queue.PATCHED_BRANCH, dest)
    proc = g.git(
        ["apply", "-R", str(patch)],
        dest,
        env={"GIT_CEILING_DIRECTORIES": str(dest.parent)},
        check=False,
    )
    if proc.returncode == 0:
        return None
    return proc.stderr.decode(errors="replace").strip().splitlines()[0]


def series_without(repo: Path, base: str, commits: list[str], skip: str, dest: Path) -> list[str]:
    """Export to ``dest`` the tree of ``base`` plus ``commits`` (the series'
    patch commits, in order) without ``skip``, each cherry-picked in a
    temporary worktree; a later commit that no longer applies without it is
    left out too. Returns the commits so left out."""
    wt = dest.parent / "worktree"
    g.git(["worktree", "add", "-q", "--detach", str(wt), base], repo)
    dropped = []
    try:
        for commit in commits:
            if commit == skip:
                continue
            if g.git(["cherry-pick", "--allow-empty", commit], wt, check=False).returncode:
                g.git(["cherry-pick", "--abort"], wt, check=False)
                dropped.append(commit)
        tree.export_tree(repo, g.out(["rev-parse", "HEAD"], wt), dest)
    finally:
        g.git(["worktree", "remove", "--force", str(wt)], repo, check=False)
    return dropped


def judge(p: probe.Probe, baseline: probe_run.Report, report: probe_run.Report) -> Verdict:
    """The verdict for probe ``p``'s patch from the whole series' run
    (``baseline``) and the mutant's (``report``)."""
    nodes = selected(p, [n for n in baseline.outcomes if "::" in n])
    if not nodes:
        return Verdict(p.patch, NO_TESTS, "its probe names no test that runs", {})
    unwell = [n for n in nodes if baseline.outcomes[n] != "passed"]
    if unwell:
        return Verdict(p.patch, BASELINE, f"{unwell[0]} does not pass with the patch", {})
    failures: dict[str, dict[str, str]] = {}
    for n in nodes:
        file = _file_of(n)
        if n in report.failures:
            failures[n] = report.failures[n]
        elif n not in report.outcomes and file in report.failures:
            failures[n] = report.failures[file]  # the file did not collect
        elif report.outcomes.get(n) != "passed":
            failures[n] = {"kind": "undeclared", "exception": str(report.outcomes.get(n))}
    kinds = [f["kind"] for f in failures.values()]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
    detail = f"{len(failures)} of {len(nodes)} failed" + (f" ({counts})" if counts else "")
    caught = any(k in CATCHING_KINDS for k in kinds)
    return Verdict(p.patch, CAUGHT if caught else MISSED, detail, failures)


def _file_of(node: str) -> str:
    """The test file of a selector or node id (``f.py::test[x]`` -> ``f.py``)."""
    return node.split("::", 1)[0].split("[", 1)[0]


def _files(probes: list[probe.Probe]) -> list[str]:
    """The test files the probes' selectors name."""
    return sorted({_file_of(t) for p in probes for t in p.tests})


def check(root: Path, names: list[str] | None = None) -> list[Verdict]:
    """Take each patch in ``names`` (default: the whole series) out in turn
    and judge it by its probe's tests.

    Raises:
        MutationError: a name that is not in the series.
        BuildError, ApplyError, ProbeError, VenvError: see ``vpq.wheels.build.prepare``
            and ``vpq.envs.probe_run.run_report``.
    """
    names = [n.removeprefix("patches/") for n in names] if names else None  # a path works too
    prep = build.prepare(root)
    by_name = {p.name: p for p in prep.patches}
    unknown = sorted(set(names or []) - set(by_name))
    if unknown:
        raise MutationError(
            f"not in series: {', '.join(unknown)} (name a patch as series does, "
            "relative to patches/)"
        )
    probes = probe.load(root)
    chosen = [probes[n] for n in (names or list(by_name)) if n in probes]
    python = contract.deps_python(prep.repo, prep.upstream_ref)
    commits = queue.commits_since(prep.repo, prep.upstream_ref, queue.PATCHED_BRANCH)
    series = Series(prep.repo, prep.upstream_ref, dict(zip(by_name, commits, strict=True)))
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="vpq-mutation-") as tmp:
        whole = Path(tmp) / "whole"
        tree.export_tree(prep.repo, queue.PATCHED_BRANCH, whole)
        files = _files([p for p in chosen if p.tests])
        baseline = (
            probe_run.run_report(python, root, files, whole) if files else probe_run.Report({}, {})
        )
        for i, p in enumerate(chosen, 1):
            verdicts.append(_one(root, series, python, p, by_name[p.patch].path, baseline))
            v = verdicts[-1]
            print(f"[{i}/{len(chosen)}] {v.patch}: {v.status} ({v.detail})", file=sys.stderr)
    return verdicts


@dataclass(frozen=True)
class Series:
    """The applied series: its repository, upstream ref and patch -> commit."""

    repo: Path
    base: str
    commits: dict[str, str]


def _one(
    root: Path,
    series: Series,
    python: Path,
    p: probe.Probe,
    patch: Path,
    baseline: probe_run.Report,
) -> Verdict:
    """One mutant: the series without ``patch``, judged by probe ``p``."""
    if not p.tests:
        why = f"covered by {p.covered_by}" if p.covered_by else "contract items only"
        return Verdict(p.patch, NO_TESTS, why, {})
    note = ""
    patch_sha256 = sha256_file(patch)  # as they are when the tests run
    test_sha256 = {f: sha256_file(root / f) for f in _files([p])}
    with tempfile.TemporaryDirectory(prefix="vpq-mutant-") as tmp:
        src = Path(tmp) / "src"
        if mutant(series.repo, patch, src):
            order = list(series.commits.values())
            dropped = series_without(series.repo, series.base, order, series.commits[p.patch], src)
            names = [n for n, c in series.commits.items() if c in dropped]
            note = f"{NOT_REVERTED}; series without it and {len(names)} later patches"
            note += f" that no longer apply ({', '.join(names)})" if names else ""
        report = probe_run.run_report(python, root, _files([p]), src)
    v = replace(judge(p, baseline, report), patch_sha256=patch_sha256, test_sha256=test_sha256)
    return replace(v, detail=f"{note}: {v.detail}") if note else v


def render(verdicts: list[Verdict]) -> str:
    """A Markdown table, and a last line naming the patches no test catches."""
    lines = ["| patch | without it | its tests |", "|---|---|---|"]
    lines += [f"| `{v.patch}` | {v.status} | {v.detail} |" for v in verdicts]
    uncaught = [v.patch for v in verdicts if v.status != CAUGHT]
    lines.append("")
    lines.append(
        f"{len(verdicts) - len(uncaught)} of {len(verdicts)} patches make a test fail on an "
        "assertion (or on the error they fix)"
        + (": not " + ", ".join(uncaught) if uncaught else ".")
    )
    return "\n".join(lines)


def write(root: Path, verdicts: list[Verdict]) -> Path:
    """``build/mutation.json``: every verdict with each failing test's kind."""
    dest = root / REPORT
    data = [asdict(v) for v in verdicts]
    write_atomic(dest, (json.dumps(data, indent=1) + "\n").encode())
    return dest


def _probe_sha256(p: probe.Probe) -> str:
    """sha256 of the probe's selectors (its tests and excludes, in order)."""
    return hashlib.sha256(json.dumps([p.tests, p.exclude]).encode()).hexdigest()


def _entry(root: Path, v: Verdict, p: probe.Probe | None) -> dict[str, object]:
    """The record of verdict ``v``: the hashes it ran with (those of the
    files in ``root`` now where it has none), and the pin's now."""
    caught_by = sorted(n for n, f in v.failures.items() if f["kind"] in CATCHING_KINDS)
    files = sorted({_file_of(n) for n in caught_by})
    return {
        "status": v.status,
        "detail": v.detail,
        "upstream-sha256": lock.load(root).sdist.sha256,
        "patch-sha256": v.patch_sha256 or sha256_file(root / series.PATCHES_DIR / v.patch),
        "probe-sha256": _probe_sha256(p) if p else "",
        "caught-by": caught_by,
        "test-sha256": {f: v.test_sha256.get(f) or sha256_file(root / f) for f in files},
    }


def load_record(root: Path) -> dict[str, dict[str, object]]:
    """``mutation.toml`` by patch name; empty when the file is absent.

    Raises:
        MutationError: the file is not TOML.
    """
    path = root / RECORD_FILE
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MutationError(f"{path}: not valid TOML: {exc}") from None


def record(root: Path, verdicts: list[Verdict]) -> Path:
    """Write ``verdicts`` into ``mutation.toml``, keeping the records of the
    other patches still in ``series`` and dropping those of patches no
    longer in it; entries in series order."""
    names = series.read_series(root)
    probes = probe.load(root)
    entries = load_record(root)
    entries.update({v.patch: _entry(root, v, probes.get(v.patch)) for v in verdicts})
    data = {n: entries[n] for n in names if n in entries}
    dest = root / RECORD_FILE
    write_atomic(dest, (RECORD_HEADER + tomli_w.dumps(data)).encode())
    return dest


def _stale(
    root: Path, entry: dict[str, object], p: probe.Probe | None, pin: str, patch_sha256: str
) -> str | None:
    """What changed since a patch's ``entry`` was recorded (``pin``: the
    upstream sdist's sha256 now; ``patch_sha256``: the patch's now), or None."""
    if entry.get("upstream-sha256") != pin:
        return f"the upstream pin ({lock.LOCK_FILE}) moved since"
    if entry.get("patch-sha256") != patch_sha256:
        return "the patch file changed since"
    if entry.get("probe-sha256") != (_probe_sha256(p) if p else ""):
        return f"its {probe.PROBES_FILE} table changed since"
    tests = entry.get("test-sha256")
    for file, digest in (tests if isinstance(tests, dict) else {}).items():
        path = root / file
        if not path.is_file() or sha256_file(path) != digest:
            return f"{file}, which caught it, changed since"
    return None


def lint(
    root: Path, patch_names: list[str], patch_sha256: Mapping[str, str] | None = None
) -> list[str]:
    """Problems with ``mutation.toml`` against the series, one line each:
    every patch needs a ``caught`` record matching the upstream pin, its
    current bytes (``patch_sha256``, by name; default: the files in
    ``patches/``), its probe and the test files that caught it."""
    path = root / RECORD_FILE
    try:
        entries = load_record(root)
        probes = probe.load(root)
        pin = lock.load(root).sdist.sha256
    except (MutationError, probe.ProbeError, lock.LockError) as exc:
        return [str(exc)]
    fix = "run `nox -s mutation -- --record {}`"
    problems = []
    for name in patch_names:
        entry = entries.get(name)
        if not isinstance(entry, dict):
            problems.append(f"{path}: patches/{name} has no mutation record; " + fix.format(name))
            continue
        if entry.get("status") != CAUGHT:
            why = f"{entry.get('status')}: {entry.get('detail')}"
            problems.append(f"{path}: patches/{name} is not caught by its tests ({why})")
            continue
        now = (patch_sha256 or {}).get(name) or sha256_file(root / series.PATCHES_DIR / name)
        stale = _stale(root, entry, probes.get(name), pin, now)
        if stale:
            problems.append(f"{path}: patches/{name}: {stale} its record; " + fix.format(name))
    return problems
