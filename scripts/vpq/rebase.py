"""Moving the pin: rebase the series onto another upstream release.

Steps (``gbp pq rebase`` / ``gbp import-orig`` style, in ``build/work``):

1. import the pinned upstream and apply the series, one commit per patch;
2. import the target release as the next upstream commit (its parent is the
   pinned one), from its hash-checked sdist or, with ``--upstream-source
   git``, from the repository; refuse the move when the release lacks a
   file the series needs (one no earlier patch creates: ``missing_files``);
3. replay the patch commits onto it with 3-way merges (``git cherry-pick``,
   with the recorded resolutions of ``rerere/`` installed: ``vpq.rerere``),
   classifying each patch:

   - **clean**: every hunk applies as is (zero fuzz, zero offset);
   - **rebased**: the context moved; 3-way merged; re-exported (``rebased
     (recorded)`` where a recorded resolution settled its conflicts);
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
     ``build/work``; ``--continue`` after resolving (git records the
     resolution, and it is copied into ``rerere/`` at once), ``--abort`` to
     give up.

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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from vpq import (
    build,
    fetch,
    lock,
    probe,
    progress,
    queue,
    rerere,
    series,
    tree,
    wheel,
)
from vpq import git as g
from vpq.contract import drafter as contract_drafter
from vpq.contract import run as contract_check
from vpq.contract import table as contract
from vpq.errors import VpqError
from vpq.files import write_atomic
from vpq.workspace import Workspace

REBASE_BRANCH = "rebase"
CONTINUE = "nox -s rebase_upstream -- --continue"
#: The signal of a patch whose conflict a recorded resolution settled.
RECORDED = "recorded resolution"
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
    """How one patch fared: its ``status``, why (``signal``), how its text went
    onto the target (``merge``) and what its probe saw there (``probe``)."""

    patch: str
    status: str  # clean | rebased | absorbed | conflict | pending
    signal: str  # why: "applies as is", "3-way merge", "empty", "reverse-applies", "contract", ...
    files: list[str] = field(default_factory=list)  # the files that conflicted
    probe: str = ""  # what the patch's probe saw on the unpatched target ("" when it has none)
    merge: str = ""  # "applies as is", "3-way merge", "3-way merge conflicted", ...

    def cells(self, new: str) -> list[str]:
        """The report's row for this patch (columns: ``Report.COLUMNS``)."""
        merge = self.merge + (f" ({', '.join(self.files)})" if self.files else "")
        note = {
            "absorbed": f"Applied-Upstream: {new}",
            "conflict": "needs a person",
            "pending": "not reached",
        }.get(self.status, "")
        absorbed_by = self.signal if self.status == "absorbed" else ""
        return [self.patch, self.label, merge, absorbed_by, note, self.probe]

    @property
    def label(self) -> str:
        """The status as the report and the staircase show it: a patch that
        a recorded resolution (``rerere/``) settled reads ``rebased (recorded)``,
        apart from a clean 3-way merge."""
        recorded = self.status == "rebased" and self.signal.startswith(RECORDED)
        return f"{self.status} (recorded)" if recorded else self.status


def _aligned(rows: list[list[str]], indent: str = "  ") -> list[str]:
    """``rows`` as lines of left-aligned columns; an empty cell shows ``-``."""
    rows = [[c or "-" for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]


@dataclass
class Report:
    """One move's outcomes; ``checked`` when it came from ``--check`` (nothing
    was changed)."""

    old: str
    new: str
    outcomes: list[Outcome]
    seconds: float = 0.0
    error: str = ""
    checked: bool = False
    used: list[str] = field(default_factory=list)  # recorded resolutions (rerere ids) it met
    stale: list[str] = field(default_factory=list)  # those it did not meet, described
    pruned: bool = False  # whether the stale ones were removed from rerere/

    COLUMNS = ("patch", "status", "merge onto the target", "absorbed by", "note", "probe")

    def counts(self) -> dict[str, int]:
        """How many patches have each status."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.status] = out.get(o.status, 0) + 1
        return out

    def next_step(self) -> str:
        """One sentence: what to do after this report."""
        n = self.counts()
        if self.error:
            return f"Next: vllm {self.new} cannot take the series until that is fixed."
        if n.get("pending") or (n.get("conflict") and not self.checked):
            return f"Next: resolve the conflict in {build.WORK_DIR}, `git add`, then `{CONTINUE}`"
        if not self.checked:
            return (
                f"Next: review and commit patches/, series, {probe.PROBES_FILE} and "
                f"upstream.lock (now vllm {self.new})."
            )
        move = f"nox -s rebase_upstream -- {self.new}"
        if n.get("conflict"):
            many = "patches conflict" if n["conflict"] > 1 else "patch conflicts"
            return (
                f"Next: {n['conflict']} {many} at {self.new}: run `{move}` and resolve each "
                f"as it stops (`{CONTINUE}` after each)."
            )
        return f"Next: nothing conflicts at {self.new}: `{move}` moves the pin without stopping."

    def render(self) -> str:
        """The report as printed: a header row naming every column, one row per
        patch, the counts, and the next step."""
        lines = [f"vllm {self.old} -> {self.new}" + (" (check only)" if self.checked else "")]
        if self.error:
            lines.append(f"  cannot rebase: {self.error}")
        if self.outcomes:
            lines += _aligned([list(self.COLUMNS)] + [o.cells(self.new) for o in self.outcomes])
            counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items()))
            lines.append(f"  {len(self.outcomes)} patches: {counts}")
        if self.stale:
            head = "pruned" if self.pruned else "not met (stale; --prune-resolutions removes them)"
            lines.append(f"  recorded resolutions {head}:")
            lines += [f"    {line}" for line in self.stale]
        lines.append("  " + self.next_step())
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
    return Workspace(root).rebase / "state.json"


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


def missing_files(listed: set[str], patches: list[series.Patch]) -> dict[str, list[str]]:
    """The files the series needs that the target (whose files are
    ``listed``) lacks, each with the patches that change it: a file is
    missing only if upstream lacks it and no earlier patch creates it."""
    return {f: ps for f, ps in series.files_needed(patches).items() if f not in listed}


def missing_message(version: str, missing: dict[str, list[str]]) -> str:
    """One paragraph naming each missing file once, with the patches that need it."""
    names = "; no ".join(
        f"{f} (changed by {', '.join(f'patches/{p}' for p in ps)})" for f, ps in missing.items()
    )
    return (
        f"vllm {version} has no {names}: the series cannot be moved there. "
        "patches/, series and upstream.lock are unchanged."
    )


def _commit_resolution(repo: Path) -> bool:
    """Commit the resolved cherry-pick; False (and the pick dropped) when
    the resolution leaves nothing to commit."""
    if g.index_matches_head(repo):
        g.cherry_pick_skip(repo)
        return False
    g.cherry_pick_continue(repo)
    return True


def _pick(repo: Path, commit: str, patch: series.Patch) -> tuple[list[str], str, str]:
    """Cherry-pick ``commit`` onto ``HEAD``. Returns the files left
    conflicted; ``"recorded"`` (committed) or ``"recorded-empty"`` (dropped)
    where recorded resolutions (``rerere/``) settled every conflict, else
    ``""``; and which resolutions git replayed (``rerere/<id>``, comma-separated).

    Raises:
        RebaseError: the cherry-pick failed without a conflict.
    """
    before = rerere.used(repo)
    proc = g.cherry_pick(repo, commit)
    if proc.returncode == 0:
        return [], "", ""
    replayed = ", ".join(f"{rerere.RERERE_DIR}/{i}" for i in sorted(rerere.used(repo) - before))
    conflicted = g.unmerged(repo)
    if conflicted:
        return conflicted, "", replayed
    if not g.picking(repo):
        raise RebaseError(f"{patch.name}: git cherry-pick failed: {proc.stderr.decode().strip()}")
    # It stopped at a conflict, and rerere.autoupdate staged a recorded
    # resolution for every conflicted file.
    return [], "recorded" if _commit_resolution(repo) else "recorded-empty", replayed


def _step(
    repo: Path, state: State, table: contract.Table, commit: str, patch: series.Patch, *, stop: bool
) -> Outcome:
    """Replay one patch commit onto ``HEAD`` and classify it.

    Every absorption signal is evaluated for every patch, and all that hold
    are reported: ``empty`` (the 3-way result changes nothing),
    ``reverse-applies`` (on the unpatched target), ``contract`` (the part of
    the contract the patch's files are responsible for holds on the target),
    ``probe`` (the patch's probe passes on the target).
    """
    try:
        queue.check_exact(repo, patch)
        exact = True
    except queue.ApplyError:
        exact = False
    conflicted, recorded, replayed = _pick(repo, commit, patch)
    picked = not conflicted and recorded != "recorded-empty"  # HEAD is the patch's commit
    empty = recorded == "recorded-empty" or (picked and g.same_tree(repo, "HEAD", "HEAD~1"))
    # A probe, where the patch has one, replaces the file-level contract
    # signal: a file the contract holds for (config/speculative.py) also
    # carries patches the contract knows nothing about.
    has_probe = patch.name in state.probes
    probed, seen = state.probes.get(patch.name, [False, ""])
    signals = [
        name
        for name, holds in (
            ("empty", lambda: empty),
            ("reverse-applies", lambda: g.apply_check_reverse(repo, state.new_ref, patch.path)),
            ("contract", lambda: not has_probe and table.holds_for(list(patch.files))),
            ("probe", lambda: bool(probed)),
        )
        if holds()
    ]
    merge = "3-way merge conflicted" if conflicted else "applies as is" if exact else "3-way merge"
    if signals:
        if conflicted:
            g.cherry_pick_abort(repo)
        elif picked:
            g.reset_hard(repo, "HEAD~1")
        if recorded:
            merge = f"3-way merge, {RECORDED} {replayed}"
        return Outcome(patch.name, "absorbed", ", ".join(signals), conflicted, str(seen), merge)
    if conflicted:
        if not stop:
            g.cherry_pick_abort(repo)
        if replayed:
            merge += f" (the rest replayed from {replayed})"
        return Outcome(patch.name, "conflict", "needs a person", conflicted, str(seen), merge)
    if recorded:
        how = f"{RECORDED} {replayed}"
        return Outcome(patch.name, "rebased", how, probe=str(seen), merge=f"3-way merge, {how}")
    status = "clean" if exact else "rebased"
    return Outcome(patch.name, status, merge, probe=str(seen), merge=merge)


def _patches_by_name(root: Path) -> dict[str, series.Patch]:
    return {p.name: p for p in series.load(root)}


def _run(root: Path, state: State, *, stop: bool = True) -> list[Outcome]:
    """Step 3: replay the pending patch commits, saving the state after each.

    Raises:
        RebaseStopped: a conflict needs a person (only with ``stop``).
    """
    repo = Workspace(root).work
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
            old, new = _versions(state)
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
    with contract_check.exported(Workspace(root).build, repo, ref) as src:
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
    old_commit = g.commit_of(repo, prep.upstream_ref)
    with progress.step(f"importing vllm {new.version} into {repo} (from its {source})"):
        if source == "git":
            tree.import_git(repo, new.repository, new.tag, new.version, new.commit)
        else:
            tree.import_sdist(repo, sdist, new.version, parent=old_commit)
    new_ref = tree.upstream_tag(new.version)
    missing = missing_files(set(g.tracked_files(repo, new_ref)), prep.patches)
    if missing:
        raise RebaseError(missing_message(new.version, missing))
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
    g.force_branch(repo, REBASE_BRANCH, new_ref)
    rerere.install(root, repo)
    return state


def start(root: Path, version: str, source: str = "sdist", *, prune: bool = False) -> Report:
    """Rebase the series onto ``version`` and, on success, move the pin
    (with ``prune``, and drop the recorded resolutions the move did not meet).

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
    return _finish(root, state, _run(root, state), prune)


def resume(root: Path, *, prune: bool = False) -> Report:
    """``--continue``: commit the resolved patch, record its resolution in
    ``rerere/`` at once (an ``--abort`` later keeps it), and go on.

    Raises:
        RebaseError: conflicts are still unresolved (names the files).
        RebaseStopped: another conflict.
    """
    state = _load(root)
    repo = Workspace(root).work
    left = g.unmerged(repo)
    if left:
        raise RebaseError(
            f"still unresolved in {repo}: {', '.join(left)}; resolve them, `git add` them, "
            f"then run `{CONTINUE}` (or `{ABORT}`)"
        )
    if state.current:
        name = state.current[1]
        outcomes = [Outcome(**o) for o in state.outcomes]  # type: ignore[arg-type]
        files = rerere.conflicts(repo)
        rerere.record(repo)
        if _commit_resolution(repo):
            outcomes[-1] = Outcome(name, "rebased", "resolved by hand", merge="resolved by hand")
        else:
            outcomes[-1] = Outcome(
                name, "absorbed", "empty after resolution", merge="resolved by hand"
            )
        state.outcomes = [asdict(o) for o in outcomes]
        state.current = None
        _save(root, state)
        old, new = _versions(state)
        rerere.harvest(root, repo, name, files, f"{old} -> {new}")
    return _finish(root, state, _run(root, state), prune)


def _versions(state: State) -> tuple[str, str]:
    """The move's (old, new) upstream versions."""
    old = lock.parse(state.old_lock, Path("old")).version
    return old, lock.parse(state.new_lock, Path("new")).version


def abort(root: Path) -> None:
    """``--abort``: drop the rebase; the repository's inputs were never
    touched (resolutions already recorded in ``rerere/`` stay)."""
    _load(root)  # raises when no rebase is in progress
    repo = Workspace(root).work
    g.cherry_pick_abort(repo)
    g.force_branch(repo, queue.PATCHED_BRANCH, check=False)
    _state_path(root).unlink()


def _served_heads(repo: Path) -> set[str]:
    """The EAGLE-3 heads the series served before the move (the registry on
    the patched branch); none where the tree has no registry."""
    registry = g.show(repo, queue.PATCHED_BRANCH, contract.REGISTRY)
    if registry is None:
        return set()
    return set(contract_drafter.eagle3_heads(registry.decode()))


def _finish(root: Path, state: State, outcomes: list[Outcome], prune: bool = False) -> Report:
    """Step 4: check the contract on the rebased tree, then write the inputs
    and the report, and report (with ``prune``: remove) the recorded
    resolutions the move did not meet.

    Raises:
        RebaseError: the contract does not hold on the rebased tree.
    """
    repo = Workspace(root).work
    old = lock.parse(state.old_lock, Path("old"))
    new = lock.parse(state.new_lock, Path("new"))
    # The contract must hold on the rebased tree before anything is written,
    # for every EAGLE-3 head the series served before the move (a series
    # without the MLA drafter is not required to serve it afterwards).
    table = contract_check.for_tree(Workspace(root).build, repo, REBASE_BRANCH, state.new_ref)
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
    met = rerere.used(repo)
    stale = rerere.stale(root, met)
    if prune and stale:
        rerere.prune(root, [r.id for r in stale])
    report = Report(
        old.version, new.version, outcomes, time.time() - state.started, used=sorted(met),
        stale=[r.describe() for r in stale], pruned=prune and bool(stale),
    )  # fmt: skip
    write_atomic(
        Workspace(root).rebase / f"report-{old.version}-to-{new.version}.md",
        (report.render() + "\n").encode(),
    )
    _state_path(root).unlink(missing_ok=True)
    g.force_branch(repo, queue.PATCHED_BRANCH, REBASE_BRANCH)
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
            met = sorted(rerere.used(Workspace(root).work))
            took = time.monotonic() - t0
            reports.append(Report(old_version, version, outcomes, took, checked=True, used=met))
        except VpqError as exc:  # this release's column says why; the others still run
            took = time.monotonic() - t0
            reports.append(Report(old_version, version, [], took, str(exc), checked=True))
        finally:
            if on_report and reports and reports[-1].new == version:
                on_report(reports[-1])
            repo = Workspace(root).work
            g.cherry_pick_abort(repo)
            g.force_branch(repo, queue.PATCHED_BRANCH, check=False)
    return reports


def stale_resolutions(root: Path, reports: list[Report], *, prune: bool = False) -> list[str]:
    """The recorded resolutions (``rerere/``) that no checked release met,
    one line each, removed with ``prune``; none when no release could be
    checked."""
    checked = [r for r in reports if not r.error]
    if not checked:
        return []
    stale = rerere.stale(root, {rid for r in checked for rid in r.used})
    if prune and stale:
        rerere.prune(root, [r.id for r in stale])
    return [r.describe() for r in stale]


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


def staircase(
    pin: str, patches: list[series.Patch], reports: list[Report], stale: list[str] | None = None
) -> dict[str, object]:
    """One table for ``--check`` over several releases: each patch's status at
    each release (``rebased (recorded)`` where a recorded resolution settled
    it), and whether it agrees with the patch's ``Upstream-Status`` header
    (absorbed exactly from the release the header names). ``stale``: the
    recorded resolutions no checked release met (``stale_resolutions``)."""
    rows = []
    for p in patches:
        cells: dict[str, dict[str, object]] = {}
        for rep in reports:
            got = next((o for o in rep.outcomes if o.patch == p.name), None)
            want = expected_absorbed(p.upstream_status, rep.new)
            status = got.label if got else "error"
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
    table["stale_resolutions"] = stale or []
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
    flags = render_flags(table)
    if flags:
        lines += ["", flags]
    lines.append(f"\n{agree} of {total} cells agree with the patch headers.")
    return "\n".join(lines)


def render_flags(table: dict[str, object]) -> str:
    """The staircase's two lists, headers the releases contradict and probes
    the text contradicts; empty when both are."""
    lines: list[str] = []
    flags: list[str] = table.get("flags", [])  # type: ignore[assignment]
    if flags:
        lines += ["Headers the releases contradict:"] + [f"- {f}" for f in flags]
    stale: list[str] = table.get("probe_flags", [])  # type: ignore[assignment]
    if stale:
        lines += [""] * bool(lines) + ["Probes that do not probe:"] + [f"- {f}" for f in stale]
    unmet: list[str] = table.get("stale_resolutions", [])  # type: ignore[assignment]
    if unmet:
        lines += [""] * bool(lines) + ["Recorded resolutions no checked release met:"]
        lines += [f"- {u}" for u in unmet]
    return "\n".join(lines)


def write_staircase(root: Path, table: dict[str, object]) -> Path:
    """Write the staircase to ``build/rebase/staircase.md`` and ``.json`` (for a
    scheduled job to diff); return the Markdown path."""
    out = Workspace(root).rebase
    write_atomic(out / "staircase.json", (json.dumps(table, indent=1) + "\n").encode())
    md = out / "staircase.md"
    write_atomic(md, (render_staircase(table) + "\n").encode())
    return md
