"""The ledger against OSV: ``vpq osv`` asks OSV's query API
(https://google.github.io/osv.dev/post-v1-query/, the database pip-audit,
Grype and Trivy read) for every ``vllm`` advisory and names each one whose
affected range includes the pin and that ``advisories.toml`` lacks, or whose
range or severity differs from what the ledger read.

OSV publishes one record per database (GitHub's GHSA, PyPA's PYSEC, ...)
for the same bug, each naming the others as ``aliases``; the records are
grouped by shared ids and a group is judged once, by its GHSA record where
it has one (GitHub's rating and ranges are the ones the ledger copies).
A range is read from the record's ``ECOSYSTEM`` events (``introduced`` /
``fixed`` / ``last_affected``), as PEP 440 specifiers joined by `` || ``,
the ledger's own spelling, so the two compare as specifier sets.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vpq.core.errors import VpqError
from vpq.wheels import advisories

#: OSV's query endpoint (POST; pages through ``next_page_token``).
QUERY_URL = "https://api.osv.dev/v1/query"
_TIMEOUT_S = 30
#: At most this many pages (1,000 records each): a server that never stops
#: paging is an error, not a hang.
_MAX_PAGES = 20
Kind = Literal["missing", "range", "severity", "aliases"]


class OsvUnreachable(VpqError):
    """OSV could not be asked (no network, DNS, a refused connection)."""


class OsvError(VpqError):
    """OSV answered something that is not its query response."""


@dataclass(frozen=True)
class Record:
    """One advisory as OSV publishes it (the group's chosen record)."""

    id: str
    aliases: tuple[str, ...]
    summary: str
    affected: str
    severity: advisories.Severity

    @property
    def ids(self) -> tuple[str, ...]:
        """The record's id and every alias."""
        return (self.id, *self.aliases)

    def includes(self, version: str) -> bool:
        """Whether ``version`` lies in the published range."""
        return advisories.covers(self.affected, version)


@dataclass(frozen=True)
class Finding:
    """One way the ledger and OSV disagree."""

    kind: Kind
    id: str
    text: str


def _post(url: str, body: dict[str, object]) -> dict[str, Any]:
    """One query, its JSON answer."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as resp:
            data = resp.read()
    except urllib.error.HTTPError as exc:
        raise OsvError(f"{url}: OSV answered HTTP {exc.code} ({exc.reason})") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OsvUnreachable(f"{url}: OSV could not be reached ({reason})") from exc
    try:
        answer = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OsvError(f"{url}: OSV's answer is not JSON: {exc}") from exc
    if not isinstance(answer, dict):
        raise OsvError(f"{url}: OSV's answer is not a JSON object")
    return answer


def query(package: str, url: str = QUERY_URL) -> list[dict[str, Any]]:
    """Every OSV record for the PyPI ``package``, all pages.

    Raises:
        OsvUnreachable: no connection.
        OsvError: an answer that is not OSV's.
    """
    body: dict[str, object] = {"package": {"name": package, "ecosystem": "PyPI"}}
    vulns: list[dict[str, Any]] = []
    for _ in range(_MAX_PAGES):
        answer = _post(url, body)
        page = answer.get("vulns", [])
        if not isinstance(page, list):
            raise OsvError(f"{url}: OSV's 'vulns' is not a list")
        vulns.extend(v for v in page if isinstance(v, dict))
        token = answer.get("next_page_token")
        if not token:
            return vulns
        body = {**body, "page_token": token}
    raise OsvError(f"{url}: OSV kept paging past {_MAX_PAGES} pages")


def _events_text(events: Iterable[dict[str, str]]) -> list[str]:
    """One range's events as specifier sets (``introduced`` opens one)."""
    out: list[str] = []
    low: str | None = None
    for event in events:
        if "introduced" in event:
            low = event["introduced"]
        elif "fixed" in event or "last_affected" in event:
            op, high = ("<", event["fixed"]) if "fixed" in event else ("<=", event["last_affected"])
            lower = [f">= {low}"] if low not in (None, "0") else []
            out.append(", ".join([*lower, f"{op} {high}"]))
            low = None
    if low is not None:
        out.append(f">= {low}" if low != "0" else ">= 0")
    return out


def _affected(raw: dict[str, Any], package: str) -> str:
    """The record's ranges for ``package`` on PyPI, joined by `` || ``."""
    parts: list[str] = []
    for aff in raw.get("affected", []):
        pkg = aff.get("package", {})
        if pkg.get("ecosystem") != "PyPI" or pkg.get("name", "").lower() != package.lower():
            continue
        for rng in aff.get("ranges", []):
            if rng.get("type") == "ECOSYSTEM":
                parts.extend(_events_text(rng.get("events", [])))
        if not aff.get("ranges"):
            parts.extend(f"== {v}" for v in aff.get("versions", []))
    return " || ".join(parts)


def _severity(raw: dict[str, Any]) -> advisories.Severity:
    """GitHub's rating where the record carries one, else ``unrated``."""
    text = str(raw.get("database_specific", {}).get("severity", "")).lower()
    return next((s for s in advisories.SEVERITIES if s == text), "unrated")


def _groups(vulns: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Records that share an id (their own or an alias), together."""
    groups: list[tuple[set[str], list[dict[str, Any]]]] = []
    for raw in vulns:
        ids = {str(raw.get("id", "")), *map(str, raw.get("aliases", []))} - {""}
        hits = [g for g in groups if g[0] & ids]
        merged = (ids.union(*(g[0] for g in hits)), [r for g in hits for r in g[1]] + [raw])
        groups = [g for g in groups if g not in hits] + [merged]
    return [g[1] for g in groups]


def records(vulns: Sequence[dict[str, Any]], package: str) -> list[Record]:
    """One record per group, GHSA first, with every id of the group as aliases."""
    out: list[Record] = []
    for group in _groups(vulns):
        live = [r for r in group if not r.get("withdrawn")] or group
        chosen = min(live, key=lambda r: (not str(r.get("id")).startswith("GHSA-"), str(r["id"])))
        ids = {str(r.get("id")) for r in group}
        ids |= {str(a) for r in group for a in r.get("aliases", [])}
        out.append(
            Record(
                id=str(chosen["id"]),
                aliases=tuple(sorted(i for i in ids if i != chosen["id"])),
                summary=str(chosen.get("summary") or chosen.get("details", ""))[:120],
                affected=_affected(chosen, package),
                severity=_severity(chosen),
            )
        )
    return sorted(out, key=lambda r: r.id)


def _same_range(a: str, b: str) -> bool:
    """Whether two `` || ``-joined ranges are the same specifier sets."""
    ra, rb = advisories.ranges(a), advisories.ranges(b)
    if ra is None or rb is None:
        return a == b
    return set(ra) == set(rb)


def compare(
    entries: Sequence[advisories.Advisory], found: Sequence[Record], pin: str
) -> list[Finding]:
    """What the ledger lacks or reads otherwise: records whose range includes
    ``pin`` and that no entry names, and for every record an entry names, a
    range, severity or alias that differs."""
    by_id = {i: e for e in entries for i in e.ids}
    out: list[Finding] = []
    for rec in found:
        entry = next((by_id[i] for i in rec.ids if i in by_id), None)
        if entry is None:
            if rec.includes(pin):
                out.append(
                    Finding("missing", rec.id, f"{rec.affected} ({rec.severity}): {rec.summary}")
                )
            continue
        if rec.affected and not _same_range(entry.affected, rec.affected):
            moved = f"ledger {entry.affected!r}, OSV {rec.affected!r}"
            out.append(Finding("range", entry.id, moved))
        if rec.severity != "unrated" and rec.severity != entry.severity:
            out.append(
                Finding("severity", entry.id, f"ledger {entry.severity}, OSV {rec.severity}")
            )
        lacking = [i for i in rec.ids if advisories.is_advisory_id(i) and i not in entry.ids]
        if lacking:
            out.append(Finding("aliases", entry.id, f"ledger lacks {', '.join(lacking)}"))
    return out
