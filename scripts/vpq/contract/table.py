"""The EAGLE-3 contract's verdict table: items down, claimed architectures
across (the target's, then the EAGLE-3 heads'), each cell ``ok``,
``missing``, ``stub`` or ``n/a``, and the files responsible for each cell
(what a rebase reads to tell whether a patch's part of the contract already
holds upstream).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from vpq.contract.items import CLAIMS, DRAFTERS, REGISTRY, Item


@dataclass(frozen=True)
class Table:
    """item label -> architecture -> ok | missing | stub | n/a.

    ``files`` says, for each (item label, architecture), which source files
    are responsible for that cell holding: the architecture's model module
    for interfaces and methods, the file doing the read for config reads and
    the gate.
    """

    rows: dict[str, dict[str, str]]
    where: dict[str, str]
    files: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def holds_for(self, paths: list[str]) -> bool:
        """Whether the part of the contract ``paths`` are responsible for
        holds: each path owns at least one cell, at least one is ``ok`` and
        none is ``missing`` or ``stub``."""
        for path in paths:
            cells = [self.rows[item][arch] for (item, arch), fs in self.files.items() if path in fs]
            if not cells or "ok" not in cells or {"missing", "stub"} & set(cells):
                return False
        return bool(paths)

    @property
    def gaps(self) -> list[tuple[str, str, str]]:
        """(item, architecture, verdict) for every ``missing`` or ``stub`` cell."""
        return [
            (item, arch, v)
            for item, row in self.rows.items()
            for arch, v in row.items()
            if v in ("missing", "stub")
        ]

    def gap_message(self, what: str) -> str | None:
        """One sentence naming every gap, e.g. ``the EAGLE-3 contract does not
        hold for the patched wheel: model.x() is missing on DeepseekV2ForCausalLM``,
        or None when there is none."""
        if not self.gaps:
            return None
        gaps = "; ".join(f"{item} is {v} on {arch}" for item, arch, v in self.gaps)
        return f"the EAGLE-3 contract does not hold for {what}: {gaps}"

    def without(self, archs: set[str]) -> Table:
        """The table without the columns for ``archs`` (a rebase leaves out
        the EAGLE-3 heads the series did not serve before the move)."""
        rows = {
            item: {a: v for a, v in row.items() if a not in archs}
            for item, row in self.rows.items()
        }
        rows = {item: row for item, row in rows.items() if row}
        files = {k: fs for k, fs in self.files.items() if k[1] not in archs and k[0] in rows}
        return Table(rows, {k: self.where[k] for k in rows}, files)

    def to_json(self) -> dict[str, object]:
        """The table as JSON-able data (``from_json`` reads it back)."""
        return {
            "rows": self.rows,
            "where": self.where,
            "files": [[item, arch, sorted(fs)] for (item, arch), fs in self.files.items()],
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Table:
        """The table ``to_json`` wrote."""
        rows = cast(dict[str, dict[str, str]], d["rows"])
        where = cast(dict[str, str], d["where"])
        cells = cast(list[tuple[str, str, list[str]]], d["files"])
        files = {(item, arch): set(fs) for item, arch, fs in cells}
        return cls(rows, where, files)

    def render(self) -> str:
        """The table as printed: items down, architectures across, then the
        source line; the target's rows first, then the drafter's (one column
        per EAGLE-3 head architecture) under a heading of their own."""
        sections = []
        for title, archs in (("item", list(CLAIMS)), ("drafter item", list(DRAFTERS))):
            rows = {k: r for k, r in self.rows.items() if set(r) <= set(archs)}
            if not rows:
                continue
            w = max(len(title), *(len(k) for k in rows))
            short = {a: _short(a) for a in archs}
            width = max(10, *(len(v) for v in short.values()))
            lines = [
                f"{title:<{w}}  " + "  ".join(f"{short[a]:<{width}}" for a in archs) + "  source"
            ]
            for item, row in rows.items():
                cells = "  ".join(f"{row.get(a, 'n/a'):<{width}}" for a in archs)
                lines.append(f"{item:<{w}}  {cells}  {self.where[item]}")
            sections.append("\n".join(lines))
        return "\n\n".join(sections)


def _short(arch: str) -> str:
    """A column heading: the architecture without ``ForCausalLM`` and the like."""
    return arch.replace("ForConditionalGeneration", "").replace("ForCausalLM", "")


def from_results(
    items: list[Item], results: list[dict[str, str]], modules: dict[str, str]
) -> Table:
    """The probe's per-item verdicts as a table: one row per item label (an
    item found on several paths keeps its worst verdict), each cell's
    responsible files."""
    rows: dict[str, dict[str, str]] = {}
    where: dict[str, str] = {}
    files: dict[tuple[str, str], set[str]] = {}
    rank = {"n/a": 0, "ok": 1, "stub": 2, "missing": 3}
    for item, res in zip(items, results, strict=True):
        archs = list(DRAFTERS) if item.side == "drafter" else list(CLAIMS)
        row = rows.setdefault(item.label, {a: "n/a" for a in archs})
        where.setdefault(item.label, item.where)
        for arch, v in res.items():
            if rank[v] > rank[row[arch]]:
                row[arch] = v
            if v != "n/a":
                owners = _owners(item, modules.get(arch))
                files.setdefault((item.label, arch), set()).update(owners)
    return Table(rows, where, files)


def _owners(item: Item, arch_module: str | None) -> set[str]:
    """The files responsible for ``item`` holding on an architecture whose
    model module is ``arch_module``: that module for what the class must
    provide (and, for a drafter type check, also the file doing the check),
    the registry for a registry entry, the reading file otherwise."""
    model = {arch_module} if arch_module else set()
    if item.kind in ("interface", "method", "drafter_method"):
        return model
    if item.kind == "drafter_type":
        return model | {item.file}
    return {REGISTRY if item.kind == "drafter_registry" else item.file}
