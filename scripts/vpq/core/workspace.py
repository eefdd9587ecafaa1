"""The checkout's work paths, in one place: everything the tool writes under
``build/`` (git-ignored) and the wheels' ``dist/``.

A ``Workspace`` is made from the repository root; modules ask it for paths
instead of joining literals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BUILD = Path("build")


@dataclass(frozen=True)
class Workspace:
    """The work paths of the checkout at ``root``."""

    root: Path

    @property
    def build(self) -> Path:
        """``build/``: everything the tool writes besides ``dist/``."""
        return self.root / BUILD

    @property
    def work(self) -> Path:
        """``build/work``: the git tree where the series is applied."""
        return self.build / "work"

    @property
    def native_src(self) -> Path:
        """``build/native-src``: the tree the setuptools backend builds."""
        return self.build / "native-src"

    @property
    def rebase(self) -> Path:
        """``build/rebase``: a rebase's state, reports and staircase."""
        return self.build / "rebase"

    @property
    def wheels(self) -> Path:
        """``build/wheels``: wheels built for a check, not for shipping."""
        return self.build / "wheels"

    @property
    def bench_src(self) -> Path:
        """``build/bench-src``: the tree ``nox -s bench`` builds with vLLM's build."""
        return self.build / "bench-src"

    @property
    def bench_report(self) -> Path:
        """``build/bench.json``: the last ``nox -s bench`` figures."""
        return self.build / "bench.json"

    @property
    def dist(self) -> Path:
        """``dist/``: the shipped wheels (and the published index)."""
        return self.root / "dist"
