"""Lints as data: a checkout parsed once, named lints over it, and the one
rule for which of them run and in what order their messages come.

A ``Checkout`` is the repository root with ``series`` and ``patches/``
linted and parsed once (``vpq.source.series.lint_contents``), from disk or
from the entries an export would write. A ``Lint`` is a named function of
it. ``run`` takes a list of lints and returns their messages in the list's
order, each lint's in the order it found them; a lint runs only when every
lint it ``needs`` ran and reported nothing.

This module knows nothing about which lints there are (``vpq.checks.lints``
composes them) or about git.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vpq.source import series
from vpq.source.series import Patch


@dataclass(frozen=True)
class Checkout:
    """What every lint reads besides the repository's other files: the
    root, and ``series`` and ``patches/`` linted and parsed once."""

    root: Path
    series_problems: tuple[str, ...]  # series unreadable: the one reason
    names: tuple[str, ...]  # what series lists, in order (when readable)
    patch_problems: tuple[str, ...]  # series' newline, unlisted files, the patches
    patches: tuple[Patch, ...]  # those that parsed, in series order

    @property
    def sha256(self) -> dict[str, str]:
        """Each parsed patch's sha256, by name."""
        return {p.name: p.sha256 for p in self.patches}


def checkout(contents: series.Contents) -> Checkout:
    """``contents`` linted and parsed, each patch once."""
    try:
        names = series.contents_names(contents)
    except series.SeriesError as exc:
        return Checkout(contents.root, (str(exc),), (), (), ())
    problems, patches = series.lint_listed(contents, names)
    return Checkout(contents.root, (), tuple(names), tuple(problems), tuple(patches))


@dataclass(frozen=True)
class Lint:
    """One named lint: ``check`` gives its problems, one line each.

    ``needs``: the lints (earlier in the list) that must have run and
    reported nothing for this one to run. ``fix``: where a person fixes what
    it reports, for export's refusal. ``before_export``: False for a lint
    that only a run after the export can satisfy (export writes, then names
    what is left instead of refusing)."""

    name: str
    check: Callable[[Checkout], list[str]]
    fix: str
    needs: tuple[str, ...] = ()
    before_export: bool = True


@dataclass(frozen=True)
class Finding:
    """One problem and the lint that reported it."""

    lint: Lint
    message: str


def run(lints: Sequence[Lint], co: Checkout) -> list[Finding]:
    """The problems of ``lints`` over ``co``: in the order of ``lints``, each
    lint's in its own order; a lint whose ``needs`` did not all run clean
    is skipped."""
    clean: set[str] = set()
    found: list[Finding] = []
    for lint in lints:
        if not set(lint.needs) <= clean:
            continue
        problems = lint.check(co)
        found += [Finding(lint, p) for p in problems]
        if not problems:
            clean.add(lint.name)
    return found
