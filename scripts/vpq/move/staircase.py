"""The rebase's reports: one release's outcomes, and the staircase over many.

A ``Report`` is one move (or one ``--check`` release): each patch's
``Outcome``, rendered as the table ``nox -s rebase_upstream`` prints. The
``Staircase`` holds several checked releases side by side, patches down
and releases across, each ``Cell`` held to the patch's ``Upstream-Status``
header, with the lists of headers the releases contradict, probes that do
not probe, and recorded resolutions no release met; and the security
advisories of ``advisories.toml``, each fixed at the releases from its
``fixed-in`` on. Statuses are ``Literal`` types, not free strings.

This module renders and writes reports; it runs nothing (``vpq.move.rebase``
does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, cast, get_args

from packaging.version import Version

from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.core.workspace import Workspace
from vpq.source import probe, series
from vpq.wheels import advisories

#: How one patch fared at one release.
Status = Literal["clean", "rebased", "absorbed", "conflict", "pending"]
#: The status as a report shows it: a rebase a recorded resolution settled apart.
Label = Literal["clean", "rebased", "rebased (recorded)", "absorbed", "conflict", "pending"]
#: A staircase cell: a label, or ``error`` where the release could not be checked.
CellStatus = Literal[
    "clean", "rebased", "rebased (recorded)", "absorbed", "conflict", "pending", "error"
]
STATUSES: tuple[Status, ...] = get_args(Status)
#: The signal of a patch whose conflict a recorded resolution settled.
RECORDED = "recorded resolution"
CONTINUE = "nox -s rebase_upstream -- --continue"
ABORT = "nox -s rebase_upstream -- --abort"
WORK_DIR = Workspace(Path(".")).work  # relative to the root, for messages


class ReportError(VpqError):
    """A saved report (``build/rebase/state.json``, a cached verdict) is malformed."""


def _status(value: object, where: str) -> Status:
    """``value`` as a ``Status``.

    Raises:
        ReportError: it is not one of ``STATUSES``.
    """
    if value not in STATUSES:
        raise ReportError(f"{where}: {value!r} is not a patch status ({', '.join(STATUSES)})")
    return value


@dataclass
class Outcome:
    """How one patch fared: its ``status``, why (``signal``: "applies as is",
    "empty", "reverse-applies", "contract", "probe", ...), the files that
    conflicted, how its text went onto the target (``merge``: "applies as
    is", "3-way merge", "3-way merge conflicted", ...) and what its probe saw
    there (``probe``, "" when it has none)."""

    patch: str
    status: Status
    signal: str
    files: list[str] = field(default_factory=list)
    probe: str = ""
    merge: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str) -> Outcome:
        """An outcome from its ``asdict`` form; ``where`` names the file in errors.

        Raises:
            ReportError: a field is missing or of the wrong type.
        """
        try:
            files = [str(f) for f in cast(list[object], data.get("files", []))]
            return cls(
                str(data["patch"]), _status(data["status"], where), str(data["signal"]),
                files, str(data.get("probe", "")), str(data.get("merge", "")),
            )  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise ReportError(f"{where}: an outcome lacks {exc}") from None

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
    def label(self) -> Label:
        """The status as the report and the staircase show it: a patch that
        a recorded resolution (``rerere/``) settled reads ``rebased (recorded)``,
        apart from a clean 3-way merge."""
        if self.status == "rebased" and self.signal.startswith(RECORDED):
            return "rebased (recorded)"
        return self.status


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
    was changed), ``cached`` when ``--check`` took it from the verdict cache
    (``vpq.move.verdicts``)."""

    old: str
    new: str
    outcomes: list[Outcome]
    seconds: float = 0.0
    error: str = ""
    checked: bool = False
    used: list[str] = field(default_factory=list)  # recorded resolutions (rerere ids) it met
    stale: list[str] = field(default_factory=list)  # those it did not meet, described
    pruned: bool = False  # whether the stale ones were removed from rerere/
    cached: bool = False
    edited: list[str] = field(default_factory=list)  # the ledgers and changelog the move edited

    COLUMNS = ("patch", "status", "merge onto the target", "absorbed by", "note", "probe")

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str) -> Report:
        """A report from its ``asdict`` form; ``where`` names the file in errors.

        Raises:
            ReportError: a field is missing or of the wrong type.
        """
        try:
            outcomes = cast(list[Mapping[str, object]], data["outcomes"])
            used = [str(u) for u in cast(list[object], data.get("used", []))]
            return cls(
                str(data["old"]), str(data["new"]),
                [Outcome.from_json(o, where) for o in outcomes],
                float(cast(float, data.get("seconds", 0.0))), str(data.get("error", "")),
                bool(data.get("checked")), used,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{where}: not a report ({exc})") from None

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
            return f"Next: resolve the conflict in {WORK_DIR}, `git add`, then `{CONTINUE}`"
        if not self.checked:
            return (
                f"Next: review and commit patches/, series, {probe.PROBES_FILE}, "
                f"upstream.lock, the ledgers and CHANGELOG.md (now vllm {self.new})."
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
        if self.edited:
            lines.append("  edited to follow the move:")
            lines += [f"    {line}" for line in self.edited]
        lines.append("  " + self.next_step())
        return "\n".join(lines)


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


@dataclass(frozen=True)
class Cell:
    """One patch at one release: its status, why (the release's error where
    it could not be checked), what its probe saw, and whether that agrees
    with the patch's header (None where the header names no release, or
    the release could not be checked)."""

    status: CellStatus
    signal: str
    probe: str
    expected_absorbed: bool | None
    agrees: bool | None


@dataclass(frozen=True)
class Row:
    """One patch across the checked releases (release -> ``Cell``)."""

    patch: str
    upstream_status: str | None
    cells: dict[str, Cell]


def _cell(patch: series.Patch, rep: Report) -> Cell:
    """``patch`` at the release of ``rep``."""
    got = next((o for o in rep.outcomes if o.patch == patch.name), None)
    want = expected_absorbed(patch.upstream_status, rep.new)
    if got is None:
        return Cell("error", rep.error, "", want, None)
    agrees = None if want is None else (got.label == "absorbed") == want
    return Cell(got.label, got.signal, got.probe, want, agrees)


def header_flags(rows: list[Row]) -> list[str]:
    """One sentence per patch whose ``Upstream-Status`` the checked releases
    contradict (its first contradicting release): absorbed before the
    release its header names, or not absorbed from it on."""
    flags = []
    for row in rows:
        bad = [(v, c) for v, c in row.cells.items() if c.agrees is False]
        if not bad:
            continue
        v, c = bad[0]
        head = f"patches/{row.patch} says {row.upstream_status!r}, but at {v} it is "
        if c.status == "absorbed":
            flags.append(
                head + f"absorbed ({c.signal}): the header should name the first release "
                "that has the patch's behaviour, as Backport [vX]"
            )
        else:
            seen = f"; {c.probe}" if c.probe else ""
            flags.append(head + f"{c.status} ({c.signal}{seen})")
    return flags


def probe_flags(rows: list[Row]) -> list[str]:
    """One sentence per patch whose probe does not probe at some release:
    absorbed by its text (``empty``, ``reverse-applies``) where its probe did
    not pass (its stand-ins or imports drifted), or with a selected test that
    skipped there (``vpq.source.probe.NOT_PROBING``: a skip decides nothing). Either
    way the probe would not catch that behaviour going missing."""
    flags = []
    for row in rows:
        for v, c in row.cells.items():
            signals = c.signal.split(" (")[0].split(", ")
            if c.status == "absorbed" and c.probe and "probe" not in signals:
                flags.append(
                    f"patches/{row.patch} is absorbed at {v} by its text ({c.signal}), "
                    f"but its probe did not pass there ({c.probe}): fix the probe"
                )
                break
            if probe.NOT_PROBING in c.probe:
                flags.append(
                    f"patches/{row.patch}: its probe is {probe.NOT_PROBING} at {v} "
                    f"({c.probe}): make it run there"
                )
                break
    return flags


@dataclass(frozen=True)
class AdvisoryRow:
    """One ledger advisory across the checked releases: release -> ``fixed``
    (the release is at or above its ``fixed-in``) or ``affected``."""

    id: str
    status: str
    fixed_in: str | None
    cells: dict[str, str]


def advisory_rows(ledger: list[advisories.Advisory], releases: list[str]) -> list[AdvisoryRow]:
    """The ledger's advisories at each release, as the staircase shows them."""
    return [
        AdvisoryRow(
            a.id,
            a.status,
            a.fixed_in,
            {v: "fixed" if advisories.fixed_at(a, v) else "affected" for v in releases},
        )
        for a in ledger
    ]


def _shown(cell: Cell) -> str:
    """A cell as the Markdown table shows it: ``!`` where it disagrees."""
    return cell.status + (" !" if cell.agrees is False else "")


@dataclass
class Staircase:
    """``--check`` over several releases: each patch's ``Cell`` at each
    release, the releases that could not be checked (release -> why), and
    the three lists under the table (``header_flags``, ``probe_flags``, and
    the recorded resolutions no checked release met)."""

    pin: str
    releases: list[str]
    errors: dict[str, str]
    patches: list[Row]
    flags: list[str] = field(default_factory=list)
    probe_flags: list[str] = field(default_factory=list)
    stale_resolutions: list[str] = field(default_factory=list)
    advisories: list[AdvisoryRow] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The staircase as ``staircase.json`` holds it."""
        return asdict(self)

    def render(self) -> str:
        """The staircase as a Markdown table; ``!`` marks a cell that disagrees
        with the patch's header, and the last line counts the agreeing cells."""
        lines = [
            f"Staircase from vllm {self.pin}: status per patch and release "
            "(! = disagrees with the patch's Upstream-Status)",
            "",
            "| patch | " + " | ".join(self.releases) + " |",
            "|---|" + "---|" * len(self.releases),
        ]
        cells = [c for row in self.patches for c in (row.cells[v] for v in self.releases)]
        for row in self.patches:
            shown = [_shown(row.cells[v]) for v in self.releases]
            lines.append(f"| `{row.patch}` | " + " | ".join(shown) + " |")
        for adv in self.advisories:
            shown = [adv.cells[v] for v in self.releases]
            lines.append(f"| advisory {adv.id} ({adv.status}) | " + " | ".join(shown) + " |")
        lines += [f"\n{v}: cannot rebase: {err}" for v, err in self.errors.items()]
        flags = self.render_flags()
        if flags:
            lines += ["", flags]
        agree, total = sum(bool(c.agrees) for c in cells), sum(c.agrees is not None for c in cells)
        lines.append(f"\n{agree} of {total} cells agree with the patch headers.")
        return "\n".join(lines)

    def render_flags(self) -> str:
        """The lists under the table: headers the releases contradict, probes
        the text contradicts, recorded resolutions no release met; empty when
        all three are."""
        lines: list[str] = []
        if self.flags:
            lines += ["Headers the releases contradict:"] + [f"- {f}" for f in self.flags]
        if self.probe_flags:
            lines += [""] * bool(lines) + ["Probes that do not probe:"]
            lines += [f"- {f}" for f in self.probe_flags]
        if self.stale_resolutions:
            lines += [""] * bool(lines) + ["Recorded resolutions no checked release met:"]
            lines += [f"- {u}" for u in self.stale_resolutions]
        fixed = [a for a in self.advisories if "fixed" in a.cells.values()]
        if fixed:
            lines += [""] * bool(lines) + [f"Advisories fixed upstream ({advisories.LEDGER_FILE}):"]
            lines += [
                f"- {a.id} ({a.status} here): fixed from {a.fixed_in}, so at "
                + ", ".join(v for v, c in a.cells.items() if c == "fixed")
                for a in fixed
            ]
        return "\n".join(lines)

    def write(self, root: Path) -> Path:
        """Write ``build/rebase/staircase.md`` and ``.json`` (for a scheduled
        job to diff); return the Markdown path."""
        out = Workspace(root).rebase
        write_atomic(out / "staircase.json", (json.dumps(self.to_json(), indent=1) + "\n").encode())
        md = out / "staircase.md"
        write_atomic(md, (self.render() + "\n").encode())
        return md


def build(
    pin: str,
    patches: list[series.Patch],
    reports: list[Report],
    stale: list[str] | None = None,
    ledger: list[advisories.Advisory] | None = None,
) -> Staircase:
    """The staircase of ``reports`` (one per checked release) for ``patches``:
    each patch's status at each release (``rebased (recorded)`` where a
    recorded resolution settled it), held to its ``Upstream-Status`` header
    (absorbed exactly from the release the header names). ``stale``: the
    recorded resolutions no checked release met; ``ledger``: the advisories,
    each shown fixed at the releases from its ``fixed-in`` on."""
    rows = [
        Row(p.name, p.upstream_status, {rep.new: _cell(p, rep) for rep in reports}) for p in patches
    ]
    return Staircase(
        pin, [r.new for r in reports], {r.new: r.error for r in reports if r.error}, rows,
        header_flags(rows), probe_flags(rows), stale or [],
        advisory_rows(ledger or [], [r.new for r in reports]),
    )  # fmt: skip
