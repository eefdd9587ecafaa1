"""Moving the pin: rebase the series onto another upstream release.

Steps (``gbp pq rebase`` / ``gbp import-orig`` style, in ``build/work``):

1. import the pinned upstream and apply the series, one commit per patch;
2. import the target release as the next upstream commit (its parent is the
   pinned one), from its hash-checked sdist or, with ``--upstream-source
   git``, from the repository;
3. replay the patch commits onto it with 3-way merges (``git cherry-pick``),
   classifying each patch:

   - **clean**: every hunk applies as is (zero fuzz, zero offset);
   - **rebased**: the context moved; 3-way merged; re-exported;
   - **absorbed**: upstream already has it, by one of four signals: the
     patch became *empty*; it *reverse-applies* on the target release; its
     *contract* already holds there (the part of the EAGLE-3 contract that
     the patch's files are responsible for, checked on the unpatched target
     with ``vpq.contract``); or its *probe* passes there (the patch's
     behaviour as tests, ``probes.toml``, run on the unpatched target in a
     venv made from that release's requirements; see ``vpq.probe``). A
     patch with a probe is judged by it and the textual signals only: the
     file-level contract signal is for patches without one, since a file
     the contract holds for may carry other behaviour too.
     Checked for every patch, clean or conflicting, so a patch that still
     applies but duplicates upstream's behaviour is dropped too, and one that
     conflicts only textually does not land on a person;
   - **conflict**: needs a person. The rebase stops with normal git state in
     ``build/work``; ``--continue`` after resolving, ``--abort`` to give up.

4. on success, check the contract on the rebased tree, then write
   ``patches/``, ``series`` and ``upstream.lock`` (only now), and print the
   table. Absorbed patches are recorded as ``Applied-Upstream: <version>``
   in the report (``build/rebase/report-<old>-to-<new>.md``).

``check`` runs the same steps for one or more releases without changing
anything, and does not stop at a conflict.

This module orchestrates; it knows nothing about wheel internals.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from vpq import (
    build,
    contract,
    contract_check,
    contract_drafter,
    fetch,
    lock,
    probe,
    queue,
    series,
    tree,
    venv,
    wheel,
)
from vpq import git as g
from vpq.errors import VpqError
from vpq.files import write_atomic

STATE_DIR = Path("build") / "rebase"
REBASE_BRANCH = "rebase"
CONTINUE = "nox -s rebase_upstream -- --continue"
ABORT = "nox -s rebase_upstream -- --abort"


class RebaseError(VpqError):
    """The rebase cannot proceed; the repository's inputs are unchanged."""


class RebaseStopped(VpqError):
    """The rebase stopped at a conflict that needs a person; ``report`` holds
    the outcomes so far."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class Outcome:
    """How one patch fared."""

    patch: str
    status: str  # clean | rebased | absorbed | conflict
    signal: str  # why: "applies as is", "3-way merge", "empty", "reverse-applies", "contract", ...
    files: list[str] = field(default_factory=list)
    probe: str = ""  # what the patch's probe saw on the unpatched target ("" when it has none)


@dataclass
class Report:
    old: str
    new: str
    outcomes: list[Outcome]
    seconds: float = 0.0
    error: str = ""

    def render(self) -> str:
        """The report as printed: one row per patch with its status and signals."""
        w = max([len(o.patch) for o in self.outcomes] + [5])
        lines = [f"vllm {self.old} -> {self.new}"]
        if self.error:
            lines.append(f"  cannot rebase: {self.error}")
        if self.outcomes:
            lines.append(f"  {'patch':<{w}}  {'status':<9} signal")
        for o in self.outcomes:
            extra = f"  Applied-Upstream: {self.new}" if o.status == "absorbed" else ""
            files = f" ({', '.join(o.files)})" if o.status == "conflict" else ""
            lines.append(f"  {o.patch:<{w}}  {o.status:<9} {o.signal}{files}{extra}")
        return "\n".join(lines)


@dataclass
class State:
    """A rebase in progress, saved in ``build/rebase/state.json``."""

    old_lock: str
    new_lock: str
    old_ref: str
    new_ref: str
    pending: list[list[str]]  # [commit, patch name]
    outcomes: list[dict[str, object]]
    table: dict[str, object]
    current: list[str] | None = None
    started: float = 0.0
    probes: dict[str, list[object]] = field(default_factory=dict)  # patch -> [absorbed, what]


def _state_path(root: Path) -> Path:
    return root / STATE_DIR / "state.json"


def _save(root: Path, state: State) -> None:
    write_atomic(_state_path(root), json.dumps(asdict(state), indent=1).encode())


def _load(root: Path) -> State:
    path = _state_path(root)
    if not path.exists():
        raise RebaseError("no rebase is in progress (nothing to --continue or --abort)")
    return State(**json.loads(path.read_text()))


# --- the target release ----------------------------------------------------


def target_lock(old: lock.Lock, version: str) -> tuple[lock.Lock, Path]:
    """The lock for ``version``, from the index, and its verified sdist.

    Wheels are picked per platform the old lock pins, with the old wheel's
    python and ABI tags (``cp38-abi3``).

    Raises:
        RebaseError: the index has no such release, or no wheel for a platform.
    """
    try:
        Version(version)
    except InvalidVersion:
        raise RebaseError(f"{version!r} is not a version") from None
    files = {f.filename: f for f in fetch.list_files(old.name) if not f.yanked}
    sdist_name = f"{old.name}-{version}.tar.gz"
    if sdist_name not in files:
        raise RebaseError(
            f"the package index has no {sdist_name}: is {old.name} {version} released?"
        )
    wheels = {}
    for plat, art in old.wheels.items():
        py_abi = wheel.tag_part(art.filename).rsplit("-", 1)[0]  # cp38-abi3
        cands = sorted(
            n
            for n in files
            if n.startswith(f"{old.name}-{version}-{py_abi}-") and n.endswith(f"_{plat}.whl")
        )
        if not cands:
            raise RebaseError(f"{old.name} {version} publishes no {py_abi} wheel for {plat}")
        wheels[plat] = lock.Artifact(cands[0], files[cands[0]].sha256)
    sdist = fetch.fetch(old.name, sdist_name, files[sdist_name].sha256)
    commit = tree.sdist_commit(sdist)
    if not commit:
        raise RebaseError(f"{sdist_name}: vllm/_version.py records no commit id")
    new = lock.Lock(
        name=old.name,
        version=version,
        tag=old.tag.replace(old.version, version),
        repository=old.repository,
        commit=commit,
        commit_source="sdist vllm/_version.py",
        sdist=lock.Artifact(sdist_name, files[sdist_name].sha256),
        wheels=wheels,
    )
    return new, sdist


def latest_version(project: str) -> str:
    """The newest final release on the index."""
    vs = [Version(v) for v in fetch.versions(project) if not Version(v).is_prerelease]
    if not vs:
        raise RebaseError(f"the package index lists no release of {project}")
    return str(max(vs))


def newer_versions(project: str, than: str) -> list[str]:
    """Final releases newer than ``than``, oldest first."""
    pivot = Version(than)
    return [
        str(v)
        for v in sorted(Version(x) for x in fetch.versions(project))
        if v > pivot and not v.is_prerelease
    ]


def _missing_files(repo: Path, ref: str, patches: list[series.Patch]) -> list[tuple[str, str]]:
    listed = set(g.out(["ls-tree", "-r", "--name-only", ref], repo).splitlines())
    return [
        (p.name, f) for p in patches for f in p.files if f not in p.new_files and f not in listed
    ]


def _reverse_applies(repo: Path, ref: str, patch_path: Path) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        g.git(["read-tree", ref], repo, env=env)
        proc = g.git(
            ["apply", "--cached", "--check", "--reverse", str(patch_path)],
            repo,
            env=env,
            check=False,
        )
        return proc.returncode == 0


def _unmerged(repo: Path) -> list[str]:
    return g.out(["diff", "--name-only", "--diff-filter=U"], repo).split()


def _step(
    repo: Path, state: State, table: contract.Table, commit: str, patch: series.Patch, *, stop: bool
) -> Outcome:
    """Replay one patch commit onto ``HEAD`` and classify it.

    Every absorption signal is evaluated for every patch, and all that hold
    are reported: ``empty`` (the 3-way result changes nothing),
    ``reverse-applies`` (on the unpatched target), ``contract`` (the part of
    the contract the patch's files are responsible for holds on the target).
    """
    try:
        queue.check_exact(repo, patch)
        exact = True
    except queue.ApplyError:
        exact = False
    proc = g.git(
        ["cherry-pick", "--keep-redundant-commits", "--allow-empty", commit], repo, check=False
    )
    conflicted = _unmerged(repo) if proc.returncode != 0 else []
    if proc.returncode != 0 and not conflicted:
        raise RebaseError(f"{patch.name}: git cherry-pick failed: {proc.stderr.decode().strip()}")
    empty = not conflicted and (
        g.out(["rev-parse", "HEAD^{tree}"], repo) == g.out(["rev-parse", "HEAD~1^{tree}"], repo)
    )
    # A probe, where the patch has one, replaces the file-level contract
    # signal: a file the contract holds for (config/speculative.py) also
    # carries patches the contract knows nothing about.
    has_probe = patch.name in state.probes
    probed, seen = state.probes.get(patch.name, [False, ""])
    signals = [
        name
        for name, holds in (
            ("empty", lambda: empty),
            ("reverse-applies", lambda: _reverse_applies(repo, state.new_ref, patch.path)),
            ("contract", lambda: not has_probe and table.holds_for(list(patch.files))),
            ("probe", lambda: bool(probed)),
        )
        if holds()
    ]
    if signals:
        if conflicted:
            g.git(["cherry-pick", "--abort"], repo)
        else:
            g.git(["reset", "-q", "--hard", "HEAD~1"], repo)
        how = " (3-way merge conflicted)" if conflicted else ""
        return Outcome(patch.name, "absorbed", ", ".join(signals) + how, probe=str(seen))
    if conflicted:
        if not stop:
            g.git(["cherry-pick", "--abort"], repo)
        return Outcome(patch.name, "conflict", "needs a person", conflicted, str(seen))
    how = ("clean", "applies as is") if exact else ("rebased", "3-way merge")
    return Outcome(patch.name, *how, probe=str(seen))


def _patches_by_name(root: Path) -> dict[str, series.Patch]:
    return {p.name: p for p in series.load(root)}


def _run(root: Path, state: State, *, stop: bool = True) -> list[Outcome]:
    repo = root / build.WORK_DIR
    table = contract.Table.from_json(state.table)
    patches = _patches_by_name(root)
    outcomes = [Outcome(**o) for o in state.outcomes]  # type: ignore[arg-type]
    while state.pending:
        commit, name = state.pending[0]
        outcome = _step(repo, state, table, commit, patches[name], stop=stop)
        state.pending.pop(0)
        outcomes.append(outcome)
        state.outcomes = [asdict(o) for o in outcomes]
        if outcome.status == "conflict" and stop:
            state.current = [commit, name]
            _save(root, state)
            old = lock.parse(state.old_lock, Path("old")).version
            new = lock.parse(state.new_lock, Path("new")).version
            raise RebaseStopped(
                f"rebase to vllm {new} stopped: patches/{name} conflicts in "
                f"{', '.join(outcome.files)}. Resolve the conflict in {repo} (edit, then "
                f"`git add <file>`) and run `{CONTINUE}`, or run `{ABORT}` to give up. "
                "patches/, series and upstream.lock are unchanged.",
                Report(old, new, outcomes + [Outcome(n, "pending", "") for _, n in state.pending]),
            )
    return outcomes


def _judge_target(
    root: Path, repo: Path, ref: str, names: list[str]
) -> tuple[contract.Table, dict[str, list[object]]]:
    """The unpatched tree at ``ref``, exported once and imported in the venv
    made from that release's own requirements: its contract table, and each
    patch's probe (patch -> ``[absorbed, what it saw]``).

    Raises:
        ContractError, ProbeError, VenvError.
    """
    python = contract_check.deps_python(repo, ref)
    with contract_check.exported(root / "build", repo, ref) as src:
        table = contract_check.check_source(python, repo, ref, src)
        verdicts = probe.run_all(python, root, names, src, table)
    return table, {name: [absorbed, seen] for name, (absorbed, seen) in verdicts.items()}


def _begin(root: Path, version: str, source: str) -> State:
    """Steps 1-2, the checks that can refuse the move, and the set-up of step 3.

    Raises:
        RebaseError: the target lacks a file the series changes, or cannot
            be fetched.
    """
    prep = build.prepare(root, source)
    old = prep.lock
    new, sdist = target_lock(old, version)
    repo = prep.repo
    old_commit = g.out(["rev-parse", f"{prep.upstream_ref}^{{commit}}"], repo)
    if source == "git":
        tree.import_git(repo, new.repository, new.tag, new.version, new.commit)
    else:
        tree.import_sdist(repo, sdist, new.version, parent=old_commit)
    new_ref = tree.upstream_tag(new.version)
    missing = _missing_files(repo, new_ref, prep.patches)
    if missing:
        names = "; ".join(f"{f} (changed by patches/{p})" for p, f in missing)
        raise RebaseError(
            f"vllm {new.version} has no {names}: the series cannot be moved there. "
            "patches/, series and upstream.lock are unchanged."
        )
    table, probes = _judge_target(root, repo, new_ref, [p.name for p in prep.patches])
    commits = queue.commits_since(repo, prep.upstream_ref, queue.PATCHED_BRANCH)
    state = State(
        old_lock=lock.dumps(old),
        new_lock=lock.dumps(new),
        old_ref=prep.upstream_ref,
        new_ref=new_ref,
        pending=[[c, p.name] for c, p in zip(commits, prep.patches, strict=True)],
        outcomes=[],
        table=table.to_json(),
        started=time.time(),
        probes=probes,
    )
    g.git(["checkout", "-q", "-f", "-B", REBASE_BRANCH, new_ref], repo)
    return state


def start(root: Path, version: str, source: str = "sdist") -> Report:
    """Rebase the series onto ``version`` and, on success, move the pin.

    Raises:
        RebaseError: it cannot start or finish (inputs unchanged).
        RebaseStopped: a conflict needs a person (state saved for --continue).
    """
    if _state_path(root).exists():
        raise RebaseError(f"a rebase is already in progress: run `{CONTINUE}` or `{ABORT}`")
    old_version = lock.load(root).version
    if Version(version) == Version(old_version):
        raise RebaseError(f"upstream.lock already pins vllm {version}")
    state = _begin(root, version, source)
    _save(root, state)
    return _finish(root, state, _run(root, state))


def resume(root: Path) -> Report:
    """``--continue``: commit the resolved patch and go on.

    Raises:
        RebaseError: conflicts are still unresolved (names the files).
        RebaseStopped: another conflict.
    """
    state = _load(root)
    repo = root / build.WORK_DIR
    left = _unmerged(repo)
    if left:
        raise RebaseError(
            f"still unresolved in {repo}: {', '.join(left)}; resolve them, `git add` them, "
            f"then run `{CONTINUE}` (or `{ABORT}`)"
        )
    if state.current:
        name = state.current[1]
        outcomes = [Outcome(**o) for o in state.outcomes]  # type: ignore[arg-type]
        if g.git(["diff", "--cached", "--quiet", "HEAD"], repo, check=False).returncode == 0:
            g.git(["cherry-pick", "--skip"], repo, check=False)
            g.git(["reset", "-q", "--hard", "HEAD"], repo)
            outcomes[-1] = Outcome(name, "absorbed", "empty after resolution")
        else:
            g.git(
                ["-c", "core.editor=true", "cherry-pick", "--continue"],
                repo,
                env={"GIT_EDITOR": "true"},
            )
            outcomes[-1] = Outcome(name, "rebased", "resolved by hand")
        state.outcomes = [asdict(o) for o in outcomes]
        state.current = None
        _save(root, state)
    return _finish(root, state, _run(root, state))


def abort(root: Path) -> None:
    """``--abort``: drop the rebase; the repository's inputs were never touched."""
    _load(root)  # raises when no rebase is in progress
    repo = root / build.WORK_DIR
    g.git(["cherry-pick", "--abort"], repo, check=False)
    g.git(["checkout", "-q", "-f", queue.PATCHED_BRANCH], repo, check=False)
    _state_path(root).unlink()


def _served_heads(repo: Path) -> set[str]:
    """The EAGLE-3 heads the series served before the move (the registry on
    the patched branch); none where the tree has no registry."""
    proc = g.git(["show", f"{queue.PATCHED_BRANCH}:{contract.REGISTRY}"], repo, check=False)
    if proc.returncode != 0:
        return set()
    return set(contract_drafter.eagle3_heads(proc.stdout.decode()))


def _finish(root: Path, state: State, outcomes: list[Outcome]) -> Report:
    repo = root / build.WORK_DIR
    old = lock.parse(state.old_lock, Path("old"))
    new = lock.parse(state.new_lock, Path("new"))
    # The contract must hold on the rebased tree before anything is written,
    # for every EAGLE-3 head the series served before the move (a series
    # without the MLA drafter is not required to serve it afterwards).
    table = contract_check.for_tree(root / "build", repo, REBASE_BRANCH, state.new_ref)
    table = table.without(set(contract_drafter.DRAFTERS) - _served_heads(repo))
    gaps = table.gap_message(f"the rebased series on vllm {new.version}")
    if gaps:
        raise RebaseError(
            f"{gaps}. Fix it in {repo} (branch {REBASE_BRANCH}) and `{CONTINUE}`, or `{ABORT}`."
        )
    old_patches = list(_patches_by_name(root).values())
    entries = queue.export(repo, state.new_ref, old_patches, head=REBASE_BRANCH)
    probes = probe.keep_only(root, [name for name, _ in entries])
    series.write(root, entries)
    if probes is not None:
        write_atomic(root / probe.PROBES_FILE, probes)
    lock.dump(new, root)
    report = Report(old.version, new.version, outcomes, time.time() - state.started)
    write_atomic(
        root / STATE_DIR / f"report-{old.version}-to-{new.version}.md",
        (report.render() + "\n").encode(),
    )
    _state_path(root).unlink(missing_ok=True)
    g.git(["checkout", "-q", "-f", "-B", queue.PATCHED_BRANCH, REBASE_BRANCH], repo)
    queue.record_tool_head(repo)
    return report


def check(
    root: Path,
    versions: list[str],
    source: str = "sdist",
    on_report: Callable[[Report], None] | None = None,
) -> list[Report]:
    """``--check``: the classification table for each release; changes
    nothing. ``on_report`` gets each release's report as soon as it is done
    (the whole staircase takes a while)."""
    if _state_path(root).exists():
        raise RebaseError(f"a rebase is in progress: run `{CONTINUE}` or `{ABORT}` first")
    reports = []
    old_version = lock.load(root).version
    for version in versions:
        t0 = time.monotonic()
        try:
            state = _begin(root, version, source)
            outcomes = _run(root, state, stop=False)
            reports.append(Report(old_version, version, outcomes, time.monotonic() - t0))
        except (
            RebaseError,
            fetch.FetchError,
            tree.TreeError,
            contract.ContractError,
            venv.VenvError,
            queue.ApplyError,
            probe.ProbeError,
        ) as exc:
            reports.append(Report(old_version, version, [], time.monotonic() - t0, str(exc)))
        finally:
            if on_report and reports and reports[-1].new == version:
                on_report(reports[-1])
            repo = root / build.WORK_DIR
            g.git(["cherry-pick", "--abort"], repo, check=False)
            g.git(["checkout", "-q", "-f", queue.PATCHED_BRANCH], repo, check=False)
    return reports


# --- the staircase: every release at once -----------------------------------


def expected_absorbed(upstream_status: str | None, version: str) -> bool | None:
    """Whether the patch header says ``version`` already has the patch:
    ``Backport [vX]`` means absorbed at every release from X on; a patch in
    no release (``Pending``, ``Submitted``, ...) is expected to survive. None
    when the header names no release (``Backport [<commit>]``)."""
    if not upstream_status or not upstream_status.startswith("Backport"):
        return False
    m = re.search(r"\[v?(\d+(?:\.\d+)+)\]", upstream_status)
    if not m:
        return None
    return Version(version) >= Version(m.group(1))


def staircase(pin: str, patches: list[series.Patch], reports: list[Report]) -> dict[str, object]:
    """One table for ``--check`` over several releases: each patch's status at
    each release, and whether it agrees with the patch's ``Upstream-Status``
    header (absorbed exactly from the release the header names)."""
    rows = []
    for p in patches:
        cells: dict[str, dict[str, object]] = {}
        for rep in reports:
            got = next((o for o in rep.outcomes if o.patch == p.name), None)
            want = expected_absorbed(p.upstream_status, rep.new)
            status = got.status if got else "error"
            agrees = None if got is None or want is None else (status == "absorbed") == want
            cells[rep.new] = {
                "status": status,
                "signal": got.signal if got else rep.error,
                "probe": got.probe if got else "",
                "expected_absorbed": want,
                "agrees": agrees,
            }
        rows.append({"patch": p.name, "upstream_status": p.upstream_status, "cells": cells})
    table: dict[str, object] = {
        "pin": pin,
        "releases": [r.new for r in reports],
        "errors": {r.new: r.error for r in reports if r.error},
        "patches": rows,
    }
    table["flags"] = header_flags(rows)
    table["probe_flags"] = probe_flags(rows)
    return table


def header_flags(rows: list[dict[str, object]]) -> list[str]:
    """One sentence per patch whose ``Upstream-Status`` the checked releases
    contradict (its first contradicting release): absorbed before the
    release its header names, or not absorbed from it on."""
    flags = []
    for row in rows:
        cells: dict[str, dict[str, object]] = row["cells"]  # type: ignore[assignment]
        bad = [(v, c) for v, c in cells.items() if c["agrees"] is False]
        if not bad:
            continue
        v, c = bad[0]
        head = f"patches/{row['patch']} says {row['upstream_status']!r}, but at {v} it is "
        if c["status"] == "absorbed":
            flags.append(
                head + f"absorbed ({c['signal']}): the header should name the first release "
                "that has the patch's behaviour, as Backport [vX]"
            )
        else:
            seen = f"; {c['probe']}" if c["probe"] else ""
            flags.append(head + f"{c['status']} ({c['signal']}{seen})")
    return flags


def probe_flags(rows: list[dict[str, object]]) -> list[str]:
    """One sentence per patch whose probe does not probe at some release:
    absorbed by its text (``empty``, ``reverse-applies``) where its probe did
    not pass (its stand-ins or imports drifted), or with a selected test that
    skipped there (``vpq.probe.NOT_PROBING``: a skip decides nothing). Either
    way the probe would not catch that behaviour going missing."""
    flags = []
    for row in rows:
        cells: dict[str, dict[str, object]] = row["cells"]  # type: ignore[assignment]
        for v, c in cells.items():
            signals = str(c["signal"]).split(" (")[0].split(", ")
            if c["status"] == "absorbed" and c["probe"] and "probe" not in signals:
                flags.append(
                    f"patches/{row['patch']} is absorbed at {v} by its text ({c['signal']}), "
                    f"but its probe did not pass there ({c['probe']}): fix the probe"
                )
                break
            if probe.NOT_PROBING in str(c["probe"]):
                flags.append(
                    f"patches/{row['patch']}: its probe is {probe.NOT_PROBING} at {v} "
                    f"({c['probe']}): make it run there"
                )
                break
    return flags


def render_staircase(table: dict[str, object]) -> str:
    """The staircase as a Markdown table; ``!`` marks a cell that disagrees
    with the patch's header, and the last line counts the agreeing cells."""
    releases: list[str] = table["releases"]  # type: ignore[assignment]
    lines = [
        f"Staircase from vllm {table['pin']}: status per patch and release "
        "(! = disagrees with the patch's Upstream-Status)",
        "",
        "| patch | " + " | ".join(releases) + " |",
        "|---|" + "---|" * len(releases),
    ]
    agree = total = 0
    for row in table["patches"]:  # type: ignore[attr-defined]
        cells = []
        for v in releases:
            c = row["cells"][v]
            total += c["agrees"] is not None
            agree += bool(c["agrees"])
            cells.append(c["status"] + (" !" if c["agrees"] is False else ""))
        lines.append(f"| `{row['patch']}` | " + " | ".join(cells) + " |")
    for v, err in table["errors"].items():  # type: ignore[attr-defined]
        lines.append(f"\n{v}: cannot rebase: {err}")
    flags: list[str] = table.get("flags", [])  # type: ignore[assignment]
    if flags:
        lines += ["", "Headers the releases contradict:"] + [f"- {f}" for f in flags]
    stale: list[str] = table.get("probe_flags", [])  # type: ignore[assignment]
    if stale:
        lines += ["", "Probes that do not probe:"] + [f"- {f}" for f in stale]
    lines.append(f"\n{agree} of {total} cells agree with the patch headers.")
    return "\n".join(lines)


def write_staircase(root: Path, table: dict[str, object]) -> Path:
    """Write the staircase to ``build/rebase/staircase.md`` and ``.json`` (for a
    scheduled job to diff); return the Markdown path."""
    out = root / STATE_DIR
    write_atomic(out / "staircase.json", (json.dumps(table, indent=1) + "\n").encode())
    md = out / "staircase.md"
    write_atomic(md, (render_staircase(table) + "\n").encode())
    return md
