"""The lint composition: every lint ``vpq lint`` runs, in the order its
messages come, and what each needs clean first. ``vpq lint`` runs it over
the checkout; ``vpq export`` over the entries it would write, before it
writes them, and refuses what any lint but the mutation record reports.

The order: ``series`` itself (readable: it exists, names each patch once,
each a file); the rest of the series lint (its last newline, files left
out of it, each patch file); ``probes.toml`` (once ``series`` is readable);
``mutation.toml`` (after the series and probes lints are clean);
``rerere/``; ``advisories.toml``, ``peer-tests.toml`` /
``peer-expected.toml`` and ``backport-tests.toml`` (each after a clean
series); ``cpu-deps.lock`` (against upstream.lock's sdist). A lint whose
file is absent reports nothing (the advisory ledger's lint still holds
the patches' ``Advisory:`` trailers to it).

This module knows nothing about how any one lint decides, nor about git.
"""

from __future__ import annotations

from pathlib import Path

from vpq.checks import mutation, peer_backports, peer_list
from vpq.envs import deps_lock, engine_env
from vpq.source import linting, lock, probe, rerere, series
from vpq.source.linting import Checkout, Finding, Lint
from vpq.wheels import advisories


def _series(co: Checkout) -> list[str]:
    """Why ``series`` cannot be read (missing, a name twice, a missing file)."""
    return list(co.series_problems)


def _patches(co: Checkout) -> list[str]:
    """The rest of ``vpq.source.series.lint``: ``series``'s last newline,
    unlisted files, and each patch file."""
    return list(co.patch_problems)


def _probes(co: Checkout) -> list[str]:
    """``probes.toml`` against the series, where the queue has one."""
    if not (co.root / probe.PROBES_FILE).is_file():
        return []
    return probe.lint(co.root, list(co.names))


def _mutation(co: Checkout) -> list[str]:
    """``mutation.toml`` against the patches' bytes, where the queue has one."""
    if not (co.root / mutation.RECORD_FILE).is_file():
        return []
    return mutation.lint(co.root, list(co.names), co.sha256)


def _peer_tests(co: Checkout) -> list[str]:
    """``peer-tests.toml`` and ``peer-expected.toml``, where the queue has them."""
    if not (co.root / peer_list.PEER_FILE).is_file():
        return []
    return peer_list.lint(co.root, co.patches)


def _deps_lock(co: Checkout) -> list[str]:
    """``cpu-deps.lock``, the engine tier's ``cpu-engine.lock`` and
    ``reference-engine.lock`` against the tool's requirements, the engine
    pins and the pinned sdist or wheel, where the checkout has them."""
    if not (co.root / lock.LOCK_FILE).is_file():
        return []
    pin = lock.load(co.root)
    locks = engine_env.all_locks(co.root, b"", pin.sdist.sha256)
    return [p for spec, _, source in locks for p in deps_lock.lint(co.root, spec, source)]


#: Where a person fixes the series and the patches: export writes them.
_COMMITS = (
    "the commit messages in build/work (`git commit --amend`, or "
    "`git rebase -i` for an earlier one)"
)
#: Every lint, in the order ``vpq lint`` prints its messages.
LINTS: tuple[Lint, ...] = (
    Lint("series", _series, _COMMITS),
    Lint("patches", _patches, _COMMITS, needs=("series",)),
    Lint("probes", _probes, probe.PROBES_FILE, needs=("series",)),
    Lint(
        "mutation",
        _mutation,
        f"{mutation.RECORD_FILE} (`nox -s mutation -- --record PATCH`)",
        needs=("series", "patches", "probes"),
        before_export=False,  # a patch's mutants are built from patches/
    ),
    Lint("rerere", lambda co: rerere.lint(co.root), f"{rerere.RERERE_DIR}/"),
    Lint(
        "advisories",
        lambda co: advisories.lint(co.root, co.patches),
        f"{advisories.LEDGER_FILE} or the commits' 'Advisory:' trailers",
        needs=("series", "patches"),
    ),
    Lint(
        "peer-tests",
        _peer_tests,
        f"{peer_list.PEER_FILE} or {peer_list.EXPECTED_FILE}",
        needs=("series", "patches"),
    ),
    Lint(
        "backport-tests",
        lambda co: peer_backports.lint(co.root, co.patches),
        peer_backports.BACKPORTS_FILE,
        needs=("series", "patches"),
    ),
    Lint("deps-lock", _deps_lock, "cpu-deps.lock, tests/engine/*.lock (`nox -s lock_deps`)"),
)


def check(root: Path) -> list[Finding]:
    """Every lint's problems with the checkout at ``root`` (each patch parsed once)."""
    return linting.run(LINTS, linting.checkout(series.on_disk(root)))
