"""Moving the pin: rebase the series onto another upstream release.

Steps (``gbp pq rebase`` / ``gbp import-orig`` style, in ``build/work``):

1. import the pinned upstream and apply the series, one commit per patch;
2. import the target release as the next upstream commit (its parent is the
   pinned one), from its hash-checked sdist or, with ``--upstream-source
   git``, from the repository; refuse the move when the release lacks a
   file the series needs (one no earlier patch creates and no patch
   absorbed by its probe there changes: ``missing_files``; the target is
   judged first only where every patch needing such a file claims it is
   upstream there: ``claimed_upstream``);
3. replay the patch commits onto it with 3-way merges (``git cherry-pick``,
   with the recorded resolutions of ``rerere/`` installed: ``vpq.source.rerere``),
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
     venv made from that release's requirements; see ``vpq.source.probe``). A
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
   ``patches/``, ``series`` and ``upstream.lock`` (only now), re-resolve
   ``cpu-deps.lock`` for the new pin where the checkout has one, and print the
   table. Absorbed patches are recorded as ``Applied-Upstream: <version>``
   in the report (``build/rebase/report-<old>-to-<new>.md``).

``check`` runs the same steps for one or more releases without changing
anything, and does not stop at a conflict; each release's verdicts come
from the verdict cache (``vpq.move.verdicts``) when nothing they depend on
changed.

This module is the cherry-pick state machine. The target's lock comes from
``vpq.move.releases``; the reports it returns, and the staircase over several
releases, are ``vpq.move.staircase``'s. It knows nothing about wheel internals.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from vpq.contract import drafter as contract_drafter
from vpq.contract import items as contract_items
from vpq.contract import table as contract_table
from vpq.core import progress
from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.core.workspace import Workspace
from vpq.envs import contract_run, deps_lock, engine_env, probe_run
from vpq.move import changelog, ledgers, releases, verdicts
from vpq.move.staircase import (
    ABORT,
    CONTINUE,
    RECORDED,
    Outcome,
    Report,
    ReportError,
    Status,
    expected_absorbed,
)
from vpq.source import git as g
from vpq.source import lock, probe, queue, rerere, series, tree
from vpq.wheels import build

REBASE_BRANCH = "rebase"


class RebaseError(VpqError):
    """The rebase cannot proceed; the repository's inputs are unchanged."""


class RebaseStopped(VpqError):
    """The rebase stopped at a conflict that needs a person; ``report`` holds
    the outcomes so far."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class State:
    """A rebase in progress, saved in ``build/rebase/state.json``: the two
    locks as ``upstream.lock``'s tables (``vpq.source.lock.to_table``), the patch
    commits still to replay, the outcomes so far, and the target's contract
    table and probe verdicts (patch -> ``(absorbed, what it saw)``)."""

    old_lock: dict[str, object]
    new_lock: dict[str, object]
    old_ref: str
    new_ref: str
    pending: list[list[str]]  # [commit, patch name]
    outcomes: list[Outcome]
    table: dict[str, object]
    current: list[str] | None = None
    started: float = 0.0
    probes: dict[str, tuple[bool, str]] = field(default_factory=dict)


def _state_path(root: Path) -> Path:
    return Workspace(root).rebase / "state.json"


def _save(root: Path, state: State) -> None:
    write_atomic(_state_path(root), json.dumps(asdict(state), indent=1).encode())


def _load(root: Path) -> State:
    """The saved rebase.

    Raises:
        RebaseError: none is in progress, or its file is not a saved rebase.
    """
    path = _state_path(root)
    if not path.exists():
        raise RebaseError("no rebase is in progress (nothing to --continue or --abort)")
    try:
        data = json.loads(path.read_text())
        outcomes = [Outcome.from_json(o, str(path)) for o in data.pop("outcomes")]
        probes = {k: (bool(v[0]), str(v[1])) for k, v in data.pop("probes", {}).items()}
        state = State(**data, outcomes=outcomes, probes=probes)
        if not (isinstance(state.old_lock, dict) and isinstance(state.new_lock, dict)):
            raise ValueError("its locks are not tables (saved by an older vpq?)")
        return state
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, ReportError) as exc:
        raise RebaseError(
            f"{path}: not a saved rebase ({exc}); run `{ABORT}` and start the move again"
        ) from None


def _locks(root: Path, state: State) -> tuple[lock.Lock, lock.Lock]:
    """The move's old and new lock.

    Raises:
        LockError: the saved tables are malformed (names ``state.json``).
    """
    path = _state_path(root)
    return lock.from_table(state.old_lock, path), lock.from_table(state.new_lock, path)


def missing_files(
    listed: set[str], patches: list[series.Patch], absorbed: frozenset[str] = frozenset()
) -> dict[str, list[str]]:
    """The files the series needs that the target (whose files are
    ``listed``) lacks, each with the patches that change it: a file is
    missing only if upstream lacks it and no earlier patch creates it.
    A patch in ``absorbed`` (its probe passes on the unpatched target)
    needs nothing: upstream may have moved its file (0.23.0 moved
    ``entrypoints/openai/server_utils.py`` under ``serve/``), and the
    patch is dropped whatever its 3-way merge does."""
    kept = [p for p in patches if p.name not in absorbed]
    return {f: ps for f, ps in series.files_needed(kept).items() if f not in listed}


def claimed_upstream(
    missing: dict[str, list[str]], patches: list[series.Patch], version: str
) -> bool:
    """Whether every patch that needs a ``missing`` file says upstream has
    it at ``version`` (``Backport [vX]``, X up to ``version``): only then
    can the probes absorb them all, so only then is the target judged
    before the move is refused (0.14.1, without kimi_k25.py, is refused at
    once; 0.23.0, which moved server_utils.py, is judged)."""
    headers = {p.name: p.upstream_status for p in patches}
    return all(expected_absorbed(headers[n], version) for ps in missing.values() for n in ps)


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
    repo: Path,
    state: State,
    table: contract_table.Table,
    commit: str,
    patch: series.Patch,
    *,
    stop: bool,
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
    probed, seen = state.probes.get(patch.name, (False, ""))
    checks: tuple[tuple[str, Callable[[], bool]], ...] = (
        ("empty", lambda: empty),
        ("reverse-applies", lambda: g.apply_check_reverse(repo, state.new_ref, patch.path)),
        ("contract", lambda: not has_probe and table.holds_for(list(patch.files))),
        ("probe", lambda: bool(probed)),
    )
    signals = [name for name, holds in checks if holds()]
    merge = "3-way merge conflicted" if conflicted else "applies as is" if exact else "3-way merge"
    if signals:
        if conflicted:
            g.cherry_pick_abort(repo)
        elif picked:
            g.reset_hard(repo, "HEAD~1")
        if recorded:
            merge = f"3-way merge, {RECORDED} {replayed}"
        return Outcome(patch.name, "absorbed", ", ".join(signals), conflicted, seen, merge)
    if conflicted:
        if not stop:
            g.cherry_pick_abort(repo)
        if replayed:
            merge += f" (the rest replayed from {replayed})"
        return Outcome(patch.name, "conflict", "needs a person", conflicted, seen, merge)
    if recorded:
        how = f"{RECORDED} {replayed}"
        return Outcome(patch.name, "rebased", how, probe=seen, merge=f"3-way merge, {how}")
    status: Status = "clean" if exact else "rebased"
    return Outcome(patch.name, status, merge, probe=seen, merge=merge)


def _patches_by_name(root: Path) -> dict[str, series.Patch]:
    return {p.name: p for p in series.load(root)}


def _run(root: Path, state: State, *, stop: bool = True) -> list[Outcome]:
    """Step 3: replay the pending patch commits, saving the state after each.

    Raises:
        RebaseStopped: a conflict needs a person (only with ``stop``).
    """
    repo = Workspace(root).work
    table = contract_table.Table.from_json(state.table)
    patches = _patches_by_name(root)
    outcomes = list(state.outcomes)
    while state.pending:
        commit, name = state.pending[0]
        outcome = _step(repo, state, table, commit, patches[name], stop=stop)
        state.pending.pop(0)
        outcomes.append(outcome)
        state.outcomes = list(outcomes)
        if not stop:
            continue
        stopped = outcome.status == "conflict"
        state.current = [commit, name] if stopped else None
        _save(root, state)  # a later stop (here, or the contract in _finish) resumes from it
        if stopped:
            old, new = (x.version for x in _locks(root, state))
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
) -> tuple[contract_table.Table, dict[str, tuple[bool, str]]]:
    """The unpatched tree at ``ref``, exported once and imported in the venv
    made from that release's own requirements: its contract table, and each
    patch's probe (patch -> ``(absorbed, what it saw)``).

    Raises:
        ContractError, ProbeError, VenvError.
    """
    python = contract_run.deps_python(repo, ref)
    with contract_run.exported(Workspace(root).build, repo, ref) as src:
        table = contract_run.check_source(python, repo, ref, src)
        return table, probe_run.run_all(python, root, names, src, table)


def _judged(
    root: Path, repo: Path, ref: str, names: list[str], cache: verdicts.Use | None
) -> tuple[contract_table.Table, dict[str, tuple[bool, str]]]:
    """``_judge_target``, through the verdict cache where ``cache`` says
    (read unless ``--no-cache``; written either way)."""
    if cache and cache.read:
        hit = verdicts.load_judge(cache.keys.judge)
        if hit is not None:
            return hit
    table, probes = _judge_target(root, repo, ref, names)
    if cache:
        verdicts.save_judge(cache.keys.judge, table, probes)
    return table, probes


def _begin(
    root: Path,
    target: tuple[lock.Lock, Path],
    source: str,
    cache: verdicts.Use | None = None,
) -> State:
    """Steps 1-2 onto ``target`` (its lock and sdist: ``releases.target_lock``),
    the checks that can refuse the move, and the set-up of step 3.

    Raises:
        RebaseError: the target lacks a file the series changes.
    """
    prep = build.prepare(root, source)
    old = prep.lock
    new, sdist = target
    repo = prep.repo
    old_commit = g.commit_of(repo, prep.upstream_ref)
    with progress.step(f"importing vllm {new.version} into {repo} (from its {source})"):
        if source == "git":
            tree.import_git(repo, new.repository, new.tag, new.version, new.commit)
        else:
            tree.import_sdist(repo, sdist, new.version, parent=old_commit)
    new_ref = tree.upstream_tag(new.version)
    listed = set(g.tracked_files(repo, new_ref))
    missing = missing_files(listed, prep.patches)
    if missing and not claimed_upstream(missing, prep.patches, new.version):
        raise RebaseError(missing_message(new.version, missing))  # before any judging
    table, probes = _judged(root, repo, new_ref, [p.name for p in prep.patches], cache)
    absorbed = frozenset(name for name, (passed, _) in probes.items() if passed)
    missing = missing_files(listed, prep.patches, absorbed)
    if missing:
        raise RebaseError(missing_message(new.version, missing))
    commits = queue.commits_since(repo, prep.upstream_ref, queue.PATCHED_BRANCH)
    state = State(
        old_lock=lock.to_table(old),
        new_lock=lock.to_table(new),
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
    old = lock.load(root)
    if Version(version) == Version(old.version):
        raise RebaseError(f"upstream.lock already pins vllm {version}")
    state = _begin(root, releases.target_lock(old, version), source)
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
        outcomes = list(state.outcomes)
        files = rerere.conflicts(repo)
        rerere.record(repo)
        if _commit_resolution(repo):
            outcomes[-1] = Outcome(name, "rebased", "resolved by hand", merge="resolved by hand")
        else:
            outcomes[-1] = Outcome(
                name, "absorbed", "empty after resolution", merge="resolved by hand"
            )
        state.outcomes = outcomes
        state.current = None
        _save(root, state)
        old, new = (x.version for x in _locks(root, state))
        rerere.harvest(root, repo, name, files, f"{old} -> {new}")
    return _finish(root, state, _run(root, state), prune)


def abort(root: Path) -> None:
    """``--abort``: drop the rebase; the repository's inputs were never
    touched (resolutions already recorded in ``rerere/`` stay)."""
    if not _state_path(root).exists():  # not parsed: a malformed one is dropped too
        raise RebaseError("no rebase is in progress (nothing to --continue or --abort)")
    repo = Workspace(root).work
    g.cherry_pick_abort(repo)
    g.force_branch(repo, queue.PATCHED_BRANCH, check=False)
    _state_path(root).unlink()


def _served_heads(repo: Path) -> set[str]:
    """The EAGLE-3 heads the series served before the move (the registry on
    the patched branch); none where the tree has no registry."""
    registry = g.show(repo, queue.PATCHED_BRANCH, contract_items.REGISTRY)
    if registry is None:
        return set()
    return set(contract_drafter.eagle3_heads(registry.decode()))


def _write_inputs(root: Path, repo: Path, state: State, outcomes: list[Outcome]) -> list[str]:
    """Write the moved series: ``patches/``, ``series``, ``probes.toml`` and
    ``upstream.lock``, then the ledgers (``vpq.move.ledgers``) and the
    changelog (``vpq.move.changelog``); the lines saying what the last two
    edited (or could not)."""
    old, new = _locks(root, state)
    old_patches = list(_patches_by_name(root).values())
    entries = queue.export(repo, state.new_ref, old_patches, head=REBASE_BRANCH)
    kept = {name for name, _ in entries}
    probes = probe.keep_only(root, [name for name, _ in entries])
    series.write(root, entries)
    if probes is not None:
        write_atomic(root / probe.PROBES_FILE, probes)
    lock.dump(new, root)
    dropped = [p.name for p in old_patches if p.name not in kept]
    tests = g.out(["ls-tree", "-r", "--name-only", state.new_ref, "--", "tests/"], repo)
    edited = ledgers.follow(root, dropped, new.version, tests.splitlines())
    signals = {o.patch: o.signal for o in outcomes if o.patch in dropped}
    if changelog.record(root, old.version, new, changelog.absorbed_of(old_patches, signals)):
        edited.append(f"{changelog.CHANGELOG_FILE}: the move and {len(dropped)} dropped patch(es)")
    return edited


def _relock(root: Path, repo: Path, ref: str, sdist_sha256: str) -> None:
    """Re-resolve each lock the checkout has (``cpu-deps.lock``, the engine
    tier's ``cpu-engine.lock``) for the new pin (``ref``'s
    ``requirements/common.txt``); where that cannot be done here (another
    interpreter, no network, no such file), one line says it must be
    (``nox -s lint`` will say so too)."""
    for spec in engine_env.lock_specs(root):
        if not (root / spec.file).is_file():
            continue
        try:
            common = g.git(["show", f"{ref}:requirements/common.txt"], repo).stdout
            with progress.step(f"re-resolving {spec.file} for the new pin (pip)"):
                deps_lock.relock(root, spec, common, sdist_sha256, Workspace(root).build)
        except VpqError as exc:
            print(
                f"{spec.file} still locks the old pin ({exc}); re-resolve it: `nox -s lock_deps`",
                file=sys.stderr,
            )


def _finish(root: Path, state: State, outcomes: list[Outcome], prune: bool = False) -> Report:
    """Step 4: check the contract on the rebased tree, then write the inputs
    and the report, and report (with ``prune``: remove) the recorded
    resolutions the move did not meet.

    Raises:
        RebaseError: the contract does not hold on the rebased tree.
    """
    repo = Workspace(root).work
    old, new = _locks(root, state)
    # The contract must hold on the rebased tree before anything is written,
    # for every EAGLE-3 head the series served before the move (a series
    # without the MLA drafter is not required to serve it afterwards).
    table = contract_run.for_tree(Workspace(root).build, repo, REBASE_BRANCH, state.new_ref)
    table = table.without(set(contract_items.DRAFTERS) - _served_heads(repo))
    gaps = table.gap_message(f"the rebased series on vllm {new.version}")
    if gaps:
        raise RebaseError(
            f"{gaps}. Fix it in {repo} (branch {REBASE_BRANCH}) and `{CONTINUE}`, or `{ABORT}`."
        )
    edited = _write_inputs(root, repo, state, outcomes)
    _relock(root, repo, state.new_ref, new.sdist.sha256)
    met = rerere.used(repo)
    stale = rerere.stale(root, met)
    if prune and stale:
        rerere.prune(root, [r.id for r in stale])
    report = Report(
        old.version, new.version, outcomes, time.time() - state.started, used=sorted(met),
        stale=[r.describe() for r in stale], pruned=prune and bool(stale), edited=edited,
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
    *,
    use_cache: bool = True,
) -> list[Report]:
    """``--check``: the classification table for each release; changes
    nothing. ``on_report`` gets each release's report as soon as it is done
    (the whole staircase takes a while). Each release's verdicts come from
    the verdict cache (``vpq.move.verdicts``) when nothing they depend on
    changed; ``use_cache=False`` (``--no-cache``) computes them afresh (and
    refreshes the cache)."""
    if _state_path(root).exists():
        raise RebaseError(f"a rebase is in progress: run `{CONTINUE}` or `{ABORT}` first")
    reports = []
    old = lock.load(root)
    for version in versions:
        reports.append(_check_one(root, old, version, source, use_cache))
        if on_report:
            on_report(reports[-1])
    return reports


def _check_one(root: Path, old: lock.Lock, version: str, source: str, use_cache: bool) -> Report:
    """One release of ``check``: from the cache, or replayed in
    ``build/work`` (left on the patched branch after); any ``VpqError``
    becomes the report's ``error``, so the other releases still run."""
    t0 = time.monotonic()
    begun = False
    try:
        target = releases.target_lock(old, version)
        use = verdicts.Use(verdicts.keys(root, old, target[0], source), read=use_cache)
        hit = verdicts.load_report(use.keys.report) if use_cache else None
        if hit is not None:
            return replace(hit, seconds=time.monotonic() - t0, cached=True)
        begun = True
        state = _begin(root, target, source, use)
        outcomes = _run(root, state, stop=False)
        met = sorted(rerere.used(Workspace(root).work))
        report = Report(
            old.version, version, outcomes, time.monotonic() - t0, checked=True, used=met
        )
        verdicts.save_report(use.keys.report, report)
        return report
    except VpqError as exc:  # this release's column says why; the others still run
        return Report(old.version, version, [], time.monotonic() - t0, str(exc), checked=True)
    finally:
        if begun:
            repo = Workspace(root).work
            g.cherry_pick_abort(repo)
            g.force_branch(repo, queue.PATCHED_BRANCH, check=False)


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
