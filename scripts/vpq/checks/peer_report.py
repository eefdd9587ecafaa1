"""The peer-test report: upstream's tests, unpatched against patched.

One ``FileResult`` per upstream test file: each side's outcome per node id
(``passed``, ``failed``, ``skipped``, ``error``) and, for a test that did not
pass, why (the skip's reason, or the exception's first line). A test that
passes unpatched and does not pass patched is a *regression*; it is
*explained* when ``peer-expected.toml`` lists it. Tests that skipped or
errored on both sides are counted by what they need: a GPU, the Hub (or a
model download), or something else, listed by reason.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vpq.checks.peer_list import Expected, selects
from vpq.core.files import write_atomic

OUTCOMES = ("passed", "failed", "skipped", "error")
#: A side that produced no outcomes: its process timed out or crashed.
NO_REPORT = "no report"
#: Temporary paths in reasons, which would keep equal reasons apart.
_TMP_RE = re.compile(r"/tmp/[\w.-]+")
#: What a test that did not run needs, by words in its reason (first match
#: wins): ``hub`` is the Hub or another download (models, vLLM's assets).
NEEDS = (
    (
        "hub",
        (
            "huggingface.co",
            "HF_HUB_OFFLINE",
            "OfflineModeIsEnabled",
            "LocalEntryNotFound",
            "snapshot_download",
            "outgoing traffic has been disabled",
            "Can't load",
            "is not a local folder",
            "Repository Not Found",
            "Hugging Face repository",
            # a model or asset download from elsewhere (vLLM's public assets)
            "NameResolutionError",
            "Max retries exceeded",
        ),
    ),
    (
        "gpu",
        (
            "CUDA",
            "cuda",
            "GPU",
            "gpu",
            "NVIDIA",
            "nvml",
            "NCCL",
            "flash_attn",
            "FlashInfer",
            "ROCm",
            "rocm",
            "device_count",
            "compute capability",
        ),
    ),
)


@dataclass(frozen=True)
class Side:
    """One environment's run of one test file."""

    outcomes: dict[str, str]  # node id -> one of OUTCOMES
    reasons: dict[str, str]  # node id -> why it was skipped / how it failed
    seconds: float
    status: str = "ran"  # "ran", or NO_REPORT with the process's end
    messages: dict[str, str] = field(default_factory=dict)  # node id -> whole failure message

    def counts(self) -> dict[str, int]:
        """Tests per outcome (the file's own node, a collection error, counts as one)."""
        c = Counter(self.outcomes.values())
        return {o: c.get(o, 0) for o in OUTCOMES}


@dataclass(frozen=True)
class FileResult:
    """One upstream test file on both sides."""

    file: str
    sources: list[str]  # the patched files it is a peer of
    unpatched: Side
    patched: Side


@dataclass(frozen=True)
class Regression:
    """A test that passes unpatched and does not pass patched."""

    test: str
    patched: str  # its outcome there
    reason: str
    expected: Expected | None = None


@dataclass(frozen=True)
class BackportResult:
    """A ``Backport [vX]`` patch's source tests (release X's), on both sides."""

    patch: str
    release: str
    adapted: list[str]  # what was rewritten (moved imports), one line each
    unpatched: Side
    patched: Side

    def failing(self) -> list[str]:
        """The source tests that do not pass on our backport."""
        return sorted(n for n, o in self.patched.outcomes.items() if o != "passed")


@dataclass
class Report:
    """The whole tier's result."""

    version: str
    files: list[FileResult]
    expected: list[Expected] = field(default_factory=list)
    standins: dict[str, str] = field(default_factory=dict)  # Hub repo -> what stands in
    backports: list[BackportResult] = field(default_factory=list)

    def failed(self) -> bool:
        """Whether the tier fails: an unexplained regression, or a backport's
        source test that does not pass on the backport."""
        return bool(self.unexplained() or any(b.failing() for b in self.backports))

    def regressions(self) -> list[Regression]:
        """Every regression, with the expectation that explains it, if any."""
        out = []
        for f in self.files:
            for node, outcome in sorted(f.unpatched.outcomes.items()):
                if outcome != "passed":
                    continue
                after = _outcome_in(f.patched, node, f.file)
                if after == "passed":
                    continue
                why = next((e for e in self.expected if selects(e.test, node)), None)
                out.append(Regression(node, after, f.patched.reasons.get(node, ""), why))
        return out

    def unexplained(self) -> list[Regression]:
        """The regressions ``peer-expected.toml`` does not list."""
        return [r for r in self.regressions() if r.expected is None]

    def fixed(self) -> list[str]:
        """Tests that fail or error unpatched and pass patched."""
        return sorted(
            node
            for f in self.files
            for node, o in f.unpatched.outcomes.items()
            if o in ("failed", "error") and f.patched.outcomes.get(node) == "passed"
        )

    def needs(self) -> dict[str, Counter[str]]:
        """Tests that did not pass on either side, by what they need
        (``hub``, ``gpu``, ``other``), each reason with its count."""
        out: dict[str, Counter[str]] = {}
        for f in self.files:
            for node, o in f.patched.outcomes.items():
                if o == "passed" or f.unpatched.outcomes.get(node) == "passed":
                    continue
                reason = _TMP_RE.sub("/tmp/...", f.patched.reasons.get(node) or o)
                need = need_of(f"{reason} {f.patched.messages.get(node, '')}")
                out.setdefault(need, Counter())[reason] += 1
        return out


def need_of(reason: str) -> str:
    """``hub``, ``gpu`` or ``other``: what a test that did not run needs."""
    for need, words in NEEDS:
        if any(w in reason for w in words):
            return need
    return "other"


def _outcome_in(side: Side, node: str, file: str) -> str:
    """``node``'s outcome on ``side``; a missing node takes the file's own
    (a collection error), else ``missing``."""
    if node in side.outcomes:
        return side.outcomes[node]
    if side.status != "ran":
        return side.status
    return side.outcomes.get(file, "missing")


def _cell(counts: dict[str, int], side: Side) -> str:
    """``pass/fail/skip/err``, or why the side has no outcomes."""
    return "/".join(str(counts[o]) for o in OUTCOMES) if side.status == "ran" else side.status


def _row(name: str, a: dict[str, int], b: dict[str, int], sa: Side, sb: Side) -> str:
    left, right = _cell(a, sa), _cell(b, sb)
    return f"{name:<64} {left:>15} {right:>15} {sa.seconds:6.0f}s {sb.seconds:6.0f}s"


def _table(report: Report) -> list[str]:
    lines = [f"{'upstream test file':<64} {'unpatched':>15} {'patched':>15} {'time':>7} {'':>7}"]
    lines.append(f"{'':<64} {'pass/fail/skip/err':>15}")
    total_a: Counter[str] = Counter()
    total_b: Counter[str] = Counter()
    for f in report.files:
        a, b = f.unpatched.counts(), f.patched.counts()
        total_a.update(a)
        total_b.update(b)
        lines.append(_row(f.file, a, b, f.unpatched, f.patched))
    zero = Side({}, {}, sum(f.unpatched.seconds for f in report.files))
    zero_b = Side({}, {}, sum(f.patched.seconds for f in report.files))
    ta, tb = ({o: t[o] for o in OUTCOMES} for t in (total_a, total_b))
    lines.append(_row(f"total ({len(report.files)} files)", ta, tb, zero, zero_b))
    return lines


def _needs_lines(report: Report) -> list[str]:
    lines = ["", "not run on either side, by what they need (reason: tests):"]
    for need, reasons in sorted(report.needs().items()):
        lines.append(f"  {need}: {sum(reasons.values())} tests")
        lines += [f"    {n:4d}  {r}" for r, n in reasons.most_common()]
    return lines


def _regression_lines(report: Report) -> list[str]:
    regs = report.regressions()
    lines = ["", f"regressions (pass unpatched, not patched): {len(regs)}, "
             f"unexplained: {len(report.unexplained())}"]  # fmt: skip
    for r in regs:
        tag = f"expected ({r.expected.patch}: {r.expected.why})" if r.expected else "UNEXPLAINED"
        lines.append(f"  {r.test}: {r.patched} {r.reason[:160]!r}\n    {tag}")
    seen = {r.expected.test for r in regs if r.expected}
    stale = [e.test for e in report.expected if e.test not in seen and _ran(report, e.test)]
    lines += [f"  expected but not seen (it passes patched now?): {t}" for t in stale]
    fixed = report.fixed()
    lines.append(f"fixed by the series (fail unpatched, pass patched): {len(fixed)}")
    lines += [f"  {t}" for t in fixed]
    return lines


def _ran(report: Report, test: str) -> bool:
    return any(selects(test, n) for f in report.files for n in f.unpatched.outcomes)


def _backport_lines(report: Report) -> list[str]:
    if not report.backports:
        return []
    lines = ["", "backports against their source's tests (release X's tests, our 0.17.1 backport):"]
    lines.append(f"  {'patch / release':<20} {'unpatched':>15} {'patched':>15}    time")
    for b in report.backports:
        a, p = _cell(b.unpatched.counts(), b.unpatched), _cell(b.patched.counts(), b.patched)
        times = f"{b.unpatched.seconds:6.0f}s {b.patched.seconds:6.0f}s"
        lines += [f"  {b.patch}", f"    {b.release:<18} {a:>15} {p:>15} {times}"]
        lines += [f"    adapted: {a}" for a in b.adapted] or ["    adapted: nothing"]
        lines += [f"    FAILS ON THE BACKPORT: {t}: {b.patched.reasons.get(t, '')[:160]!r}"
                  for t in b.failing()]  # fmt: skip
    return lines


def render(report: Report) -> str:
    """The report as text: the per-file table, what the tests that did not
    run need, the regressions and the fixes, then the backports' source tests."""
    head = [f"peer tests: upstream vllm {report.version}'s own tests, unpatched vs patched"]
    head += [f"Hub stand-in: {repo}: {what}" for repo, what in report.standins.items()]
    body = _table(report) + _needs_lines(report) + _regression_lines(report)
    body += _backport_lines(report)
    return "\n".join(head + body) + "\n"


def to_json(report: Report) -> str:
    """The report as JSON (per file both sides' outcomes and reasons)."""
    data = {
        "version": report.version,
        "standins": report.standins,
        "files": [asdict(f) for f in report.files],
        "regressions": [asdict(r) for r in report.regressions()],
        "unexplained": [r.test for r in report.unexplained()],
        "fixed": report.fixed(),
        "needs": {k: dict(v) for k, v in report.needs().items()},
        "backports": [asdict(b) for b in report.backports],
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def write(report: Report, out_dir: Path, name: str = "peer-tests") -> tuple[Path, Path]:
    """Write ``<name>.txt`` and ``<name>.json`` into ``out_dir``, each atomically."""
    text, js = out_dir / f"{name}.txt", out_dir / f"{name}.json"
    write_atomic(js, to_json(report).encode())
    write_atomic(text, render(report).encode())
    return text, js
