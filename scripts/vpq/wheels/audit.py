"""Comparing a built wheel with the upstream release wheel.

The rule: the members that differ from the upstream wheel
are exactly the files the series changes, plus ``vllm/_version.py`` and the
dist-info; each changed member holds exactly the patched tree's bytes; the
tags are upstream's, and ``WHEEL`` (parsed the standard way) names the
same tags and build tag as the file name; RECORD matches the content of every rewritten member.

Members are compared by CRC-32 and size from the central directories, so
the audit reads only the few members that differ. This module knows
nothing about how the wheel was built.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from vpq.core.errors import VpqError
from vpq.core.files import VERSION_FILE, record_hash
from vpq.wheels.wheel import read_wheel_file, record_rows


class AuditError(VpqError):
    """A built wheel is not exactly upstream plus the series."""


@dataclass(frozen=True)
class AuditReport:
    """What the audit saw in a built wheel: the members that differ from
    upstream's (dist-info left out) and how many members it has."""

    wheel: Path
    differing: tuple[str, ...]  # non-dist-info members that differ, sorted
    members: int


def _is_dist_info(name: str) -> bool:
    return name.split("/", 1)[0].endswith(".dist-info")


def _differing(zb: zipfile.ZipFile, zu: zipfile.ZipFile) -> set[str]:
    """Members outside the dist-info that differ (by CRC-32 and size) or are
    in one wheel only."""
    b = {i.filename: i for i in zb.infolist()}
    u = {i.filename: i for i in zu.infolist()}
    differing = set()
    for name in b.keys() | u.keys():
        bi, ui = b.get(name), u.get(name)
        if _is_dist_info(name):
            continue
        if bi is None or ui is None or (bi.CRC, bi.file_size) != (ui.CRC, ui.file_size):
            differing.add(name)
    return differing


def _change_problems(
    zb: zipfile.ZipFile, differing: set[str], expected: dict[str, bytes | None]
) -> list[str]:
    """Where the differing members are not exactly the series' changes."""
    names = set(zb.namelist())
    allowed = set(expected) | {VERSION_FILE}
    problems = [
        f"{n} differs from upstream but the series does not change it"
        for n in sorted(differing - allowed)
    ]
    problems += [
        f"{n} should differ from upstream (the series changes it) but does not"
        for n in sorted(allowed - differing)
    ]
    for name, content in sorted(expected.items()):
        if content is None and name in names:
            problems.append(f"{name} is deleted by the series but still in the wheel")
        elif content is not None and name in names and zb.read(name) != content:
            problems.append(f"{name} does not hold the patched tree's bytes")
    return problems


def _record_problems(zb: zipfile.ZipFile, di: str, differing: set[str]) -> list[str]:
    """Where RECORD (PEP 376) disagrees with the members: unlisted members,
    listed ghosts, and wrong rows for every rewritten member."""
    names = set(zb.namelist())
    rows = record_rows(zb, di)
    problems = [f"{n} is not listed in RECORD" for n in sorted(names - set(rows))]
    problems += [f"RECORD lists {n}, which is not in the wheel" for n in sorted(set(rows) - names)]
    for name in sorted(differing | {n for n in names if n.startswith(di + "/")}):
        if name not in names or name == f"{di}/RECORD" or name not in rows:
            continue
        data = zb.read(name)
        if rows[name][1] != record_hash(data) or rows[name][2] != str(len(data)):
            problems.append(f"RECORD row for {name} does not match its content")
    return problems


def audit(built: Path, upstream: Path, expected: dict[str, bytes | None]) -> AuditReport:
    """Check ``built`` against ``upstream``.

    Args:
        expected: wheel member -> the patched tree's bytes (None: deleted),
            for every wheel member the series changes.

    Raises:
        AuditError: listing every unexpected difference, missing change,
            wrong content, tag mismatch, bad ``WHEEL`` or bad RECORD row.
    """
    problems: list[str] = []
    b_tags, u_tags = parse_wheel_filename(built.name)[3], parse_wheel_filename(upstream.name)[3]
    if b_tags != u_tags:
        problems.append(
            f"tags {sorted(map(str, b_tags))} differ from upstream's {sorted(map(str, u_tags))}"
        )
    with zipfile.ZipFile(built) as zb, zipfile.ZipFile(upstream) as zu:
        differing = _differing(zb, zu)
        problems += _change_problems(zb, differing, expected)
        dist_infos = {n.split("/", 1)[0] for n in zb.namelist() if _is_dist_info(n)}
        if len(dist_infos) != 1:
            problems.append(f"expected one dist-info directory, found {sorted(dist_infos)}")
        else:
            di = dist_infos.pop()
            problems += _wheel_file_problems(built.name, zb.read(f"{di}/WHEEL"))
            problems += _record_problems(zb, di, differing)
        members = len(zb.namelist())
    if problems:
        raise AuditError(
            f"audit of {built.name} against {upstream.name} failed: " + "; ".join(problems)
        )
    return AuditReport(wheel=built, differing=tuple(sorted(differing)), members=members)


def _wheel_file_problems(filename: str, wheel_file: bytes) -> list[str]:
    """Where ``WHEEL``, parsed as an email header block (PEP 427), disagrees
    with the file name on the tags or the build tag."""
    tags, build_tag = read_wheel_file(wheel_file)
    _, _, name_build, name_tags = parse_wheel_filename(filename)
    problems = []
    if sorted(tags) != sorted(map(str, name_tags)):
        problems.append(
            f"WHEEL's Tag: headers {tags} are not the file name's tags "
            f"{sorted(map(str, name_tags))}"
        )
    want_build = "".join(map(str, name_build)) if name_build else None
    if build_tag != want_build:
        problems.append(
            f"WHEEL's Build: header is {build_tag!r}, the file name's build tag {want_build!r}"
        )
    return problems


def compare_backends(a: Path, b: Path) -> int:
    """Check two wheels of the same series have the same files with the same
    contents outside the dist-info (e.g. the overlay and vLLM's own build).

    Returns:
        The number of members compared.

    Raises:
        AuditError: listing the members only one has, or whose bytes differ.
    """
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        ia = {i.filename: i for i in za.infolist() if not _is_dist_info(i.filename)}
        ib = {i.filename: i for i in zb.infolist() if not _is_dist_info(i.filename)}
        problems = [f"only in {a.name}: {n}" for n in sorted(ia.keys() - ib.keys())]
        problems += [f"only in {b.name}: {n}" for n in sorted(ib.keys() - ia.keys())]
        for n in sorted(ia.keys() & ib.keys()):
            x, y = ia[n], ib[n]
            if (x.CRC, x.file_size) != (y.CRC, y.file_size) and za.read(n) != zb.read(n):
                problems.append(f"{n} differs")
    if problems:
        shown = "; ".join(problems[:20]) + (
            f"; ... {len(problems) - 20} more" if len(problems) > 20 else ""
        )
        raise AuditError(f"{a.name} and {b.name} differ outside the dist-info: {shown}")
    return len(ia)
