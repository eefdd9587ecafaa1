"""Parsing and linting ``series`` and the patch mails in ``patches/``.

``series`` is quilt's format: one patch path per line, relative to
``patches/``, applied top to bottom; ``#`` starts a comment and blank lines
are ignored. A patch is a ``git format-patch`` mail: headers, a body saying
why, trailers (``Upstream-Status:`` per Yocto, ``Forwarded:`` per DEP-3),
then a ``-p1`` diff.

This module knows nothing about git.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path

from vpq.core.errors import VpqError
from vpq.core.files import sha256_bytes, write_atomic

SERIES_FILE = "series"
PATCHES_DIR = "patches"

#: Yocto's strict check, from ``check_upstream_status`` in oe-core
#: (meta/lib/oe/qa.py / insane.bbclass).
UPSTREAM_STATUS_RE = re.compile(
    r"^Upstream-Status: (Pending|Submitted|Denied|Inappropriate|Backport"
    r"|Inactive-Upstream)( .+)?$",
    re.MULTILINE,
)
#: DEP-3: ``Forwarded: no | not-needed | <url>``.
FORWARDED_RE = re.compile(r"^Forwarded: (no|not-needed|\S+://\S+)$", re.MULTILINE)
_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


class SeriesError(VpqError):
    """``series`` or a patch file is malformed."""


@dataclass(frozen=True)
class Hunk:
    """One hunk of a file diff."""

    file: str
    index: int  # 1-based within its file
    old_start: int
    old_len: int
    header: str
    old_lines: tuple[bytes, ...]  # context and '-' lines, without prefix


@dataclass(frozen=True)
class Patch:
    """A parsed patch file."""

    name: str  # path relative to patches/, as written in series
    path: Path
    data: bytes
    subject: str
    author: str
    date: str
    body: str
    files: tuple[str, ...]
    new_files: tuple[str, ...]
    deleted_files: tuple[str, ...]
    hunks: tuple[Hunk, ...] = field(repr=False)

    @property
    def sha256(self) -> str:
        """Hex sha256 of the patch file's bytes."""
        return sha256_bytes(self.data)

    @property
    def upstream_status(self) -> str | None:
        """The ``Upstream-Status:`` value, e.g. ``Backport [v0.18.0]``, or None."""
        m = UPSTREAM_STATUS_RE.search(self.body)
        return m.group(0).split(": ", 1)[1] if m else None


def read_series(root: Path) -> list[str]:
    """Patch names in ``<root>/series``, in apply order.

    Raises:
        SeriesError: ``series`` is missing, names a patch twice or names a
            file that does not exist (message names the line).
    """
    path = root / SERIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SeriesError(f"{path}: not found") from None
    return _names(path, text, lambda name: (root / PATCHES_DIR / name).is_file())


def _names(path: Path, text: str, exists: Callable[[str], bool]) -> list[str]:
    """The patch names ``series`` (at ``path``, holding ``text``) lists;
    ``exists`` says whether ``patches/<name>`` is a file.

    Raises:
        SeriesError: see ``read_series``.
    """
    names: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name = line.split()[0]  # quilt allows options such as -p1 after it
        if name in seen:
            raise SeriesError(
                f"{path}:{lineno}: {name} is listed twice (first on line {seen[name]})"
            )
        if not exists(name):
            raise SeriesError(f"{path}:{lineno}: {name} does not exist under {PATCHES_DIR}/")
        seen[name] = lineno
        names.append(name)
    return names


def _diff_sections(data: bytes) -> tuple[bytes, bytes]:
    """Split a mail into (headers+body, diff)."""
    m = re.search(rb"^diff --git ", data, re.MULTILINE)
    if not m:
        return data, b""
    return data[: m.start()], data[m.start() :]


def decode_subject(raw: str) -> str:
    """A mail ``Subject:`` as text: RFC 2047 encoded words decoded (what
    ``git format-patch`` writes for a non-ASCII subject), folding undone."""
    try:
        text = str(make_header(decode_header(raw)))
    except (UnicodeDecodeError, LookupError, ValueError):
        text = raw
    return " ".join(text.split())


def am_break(message: str) -> tuple[int, str] | None:
    """The first line of a commit message at which ``git am`` would take the
    diff to begin, cutting the message there: (1-based line number, line),
    or None. The rule is git's ``patchbreak()`` (``mailinfo.c``): a line
    starting with ``diff -`` or ``Index: ``, or ``---`` followed by nothing
    but whitespace, or by a space and a file name."""
    for lineno, line in enumerate(message.splitlines(), start=1):
        if line.startswith(("diff -", "Index: ")):
            return lineno, line
        if line.startswith("---") and (
            not line[3:].strip() or (line[3:4] == " " and line[4:5] not in ("", " ", "\t"))
        ):
            return lineno, line
    return None


def _read_hunk(lines: list[bytes], i: int, path: Path, file: str, index: int) -> tuple[Hunk, int]:
    """Read the hunk whose ``@@`` header is ``lines[i]``; return it and the
    index of the line after it.

    Raises:
        SeriesError: a bad header, or a body that is truncated or malformed.
    """
    header = lines[i]
    m = _HUNK_RE.match(header)
    if not m:
        raise SeriesError(f"{path}: bad hunk header {header.decode(errors='replace')!r}")
    old_start = int(m.group(1))
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    old: list[bytes] = []
    o = n = 0
    i += 1
    while i < len(lines) and (o < old_len or n < new_len):
        line = lines[i]
        tag, text = line[:1], line[1:]
        if tag == b" " or line == b"":
            old.append(text)
            o, n = o + 1, n + 1
        elif tag == b"-":
            old.append(text)
            o += 1
        elif tag == b"+":
            n += 1
        elif tag != b"\\":
            raise SeriesError(
                f"{path}: hunk #{index} of {file} ({header.decode()}) is truncated or malformed"
            )
        i += 1
    hunk = Hunk(
        file=file,
        index=index,
        old_start=old_start,
        old_len=old_len,
        header=header.decode(errors="replace"),
        old_lines=tuple(old),
    )
    return hunk, i


@dataclass
class _Diff:
    """What a patch's diff touches: files, added and deleted files, hunks."""

    files: list[str] = field(default_factory=list)
    new_files: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)


def _read_diff(diff: bytes, path: Path) -> _Diff:
    """Parse the ``diff --git`` sections of a patch.

    Raises:
        SeriesError: a ``diff --git`` line or a hunk cannot be parsed.
    """
    out = _Diff()
    cur: str | None = None
    per_file = 0
    lines = diff.split(b"\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"diff --git "):
            m = re.match(rb"diff --git a/(\S+) b/(\S+)", line)
            if not m:
                raise SeriesError(f"{path}: cannot parse {line.decode(errors='replace')!r}")
            cur, per_file = m.group(2).decode(), 0
            out.files.append(cur)
        elif line.startswith(b"new file mode") and cur:
            out.new_files.append(cur)
        elif line.startswith(b"deleted file mode") and cur:
            out.deleted.append(cur)
        elif line.startswith(b"@@ ") and cur:
            per_file += 1
            hunk, i = _read_hunk(lines, i, path, cur, per_file)
            out.hunks.append(hunk)
            continue
        i += 1
    return out


def parse_patch(root: Path, name: str, data: bytes | None = None) -> Patch:
    """Parse ``patches/<name>``: ``data``, or the file's bytes when not given.

    Raises:
        SeriesError: it is not a format-patch mail with a diff (names the file).
    """
    path = root / PATCHES_DIR / name
    data = path.read_bytes() if data is None else data
    head, diff = _diff_sections(data)
    if not diff or not re.search(rb"^@@ ", diff, re.MULTILINE):
        raise SeriesError(f"{path}: not a patch: it holds no 'diff --git' section with a hunk")
    msg = BytesHeaderParser(policy=compat32).parsebytes(head)
    subject = decode_subject(str(msg.get("Subject", "")))
    if not subject:
        raise SeriesError(f"{path}: no Subject: header; is it a git format-patch mail?")
    payload = msg.get_payload()
    body = (payload if isinstance(payload, str) else "").split("\n---\n", 1)[0]
    d = _read_diff(diff, path)
    return Patch(
        name=name,
        path=path,
        data=data,
        subject=subject,
        author=str(msg.get("From", "")),
        date=str(msg.get("Date", "")),
        body=body,
        files=tuple(d.files),
        new_files=tuple(d.new_files),
        deleted_files=tuple(d.deleted),
        hunks=tuple(d.hunks),
    )


def load(root: Path) -> list[Patch]:
    """Read ``series`` and parse every patch it lists, in order.

    Raises:
        SeriesError: see ``read_series`` and ``parse_patch``.
    """
    return [parse_patch(root, name) for name in read_series(root)]


def files_needed(patches: list[Patch]) -> dict[str, list[str]]:
    """The files the series needs upstream to have, each with the patches
    (in series order) that change it.

    A patch that changes or deletes a file needs it to exist when it applies:
    in upstream, unless an earlier patch of the series created it (and no
    patch since deleted it). Files a patch creates are needed from nobody.
    """
    created: set[str] = set()
    needed: dict[str, list[str]] = {}
    for p in patches:
        for f in p.files:
            if f not in p.new_files and f not in created:
                needed.setdefault(f, []).append(p.name)
        created |= set(p.new_files)
        created -= set(p.deleted_files)
    return needed


@dataclass(frozen=True)
class Contents:
    """``series`` and the files under ``patches/``, as bytes: what the lints
    read of them. ``on_disk`` reads the checkout; ``after_write`` is what
    ``write(root, entries)`` would leave there, with nothing written."""

    root: Path
    series: bytes | None  # None: there is no ``series`` file
    files: dict[str, bytes]  # every file under patches/, by its path there


def _dir_files(root: Path, keep: Callable[[str], bool]) -> dict[str, bytes]:
    """The files under ``<root>/patches`` whose relative path ``keep`` accepts."""
    pdir = root / PATCHES_DIR
    if not pdir.is_dir():
        return {}
    found = (p for p in sorted(pdir.rglob("*")) if p.is_file())
    return {n: p.read_bytes() for p in found if keep(n := p.relative_to(pdir).as_posix())}


def on_disk(root: Path) -> Contents:
    """``series`` and ``patches/`` as the checkout holds them."""
    spath = root / SERIES_FILE
    raw = spath.read_bytes() if spath.is_file() else None
    return Contents(root, raw, _dir_files(root, lambda _: True))


def after_write(root: Path, entries: list[tuple[str, bytes]]) -> Contents:
    """``series`` and ``patches/`` as ``write(root, entries)`` would leave
    them: the entries, the files under ``patches/`` that are not ``*.patch``
    files, and ``series`` listing the entries below its comment lines."""
    kept = _dir_files(root, lambda name: not name.endswith(".patch"))
    text = _series_text(root, [name for name, _ in entries])
    return Contents(root, text.encode(), kept | dict(entries))


def lint(root: Path) -> list[str]:
    """Problems with the series, one line each; empty when it is clean.

    Checks: every listed file exists and is listed once; no file in
    ``patches/`` is left out; every file ends with a newline; each patch is
    an LF file and a diff with a why-body, a Yocto ``Upstream-Status:`` and
    a DEP-3 ``Forwarded:`` trailer, and no ``[PATCH n/m]`` subject.
    """
    return lint_and_load(root)[0]


def lint_and_load(root: Path) -> tuple[list[str], list[Patch]]:
    """``lint``'s problems and, parsed once for both, the patches ``load``
    returns (those that parsed, in series order: all of them when there is
    no problem)."""
    return lint_contents(on_disk(root))


def lint_contents(contents: Contents) -> tuple[list[str], list[Patch]]:
    """``lint_and_load`` over ``contents``, in memory: the problems name
    files as ``<root>/series`` and ``<root>/patches/...`` all the same."""
    try:
        names = contents_names(contents)
    except SeriesError as exc:
        return [str(exc)], []
    return lint_listed(contents, names)


def contents_names(contents: Contents) -> list[str]:
    """``read_series`` over ``contents``.

    Raises:
        SeriesError: see ``read_series``.
    """
    path = contents.root / SERIES_FILE
    if contents.series is None:
        raise SeriesError(f"{path}: not found")
    return _names(path, contents.series.decode("utf-8"), contents.files.__contains__)


def lint_listed(contents: Contents, names: list[str]) -> tuple[list[str], list[Patch]]:
    """``lint_contents`` once ``series`` read as ``names``: ``series`` ends
    with a newline, no file under ``patches/`` is left out, each patch
    parses and keeps the rules; and the patches that parsed."""
    root = contents.root
    problems: list[str] = []
    if contents.series and not contents.series.endswith(b"\n"):
        problems.append(f"{root / SERIES_FILE}: does not end with a newline")
    for extra in sorted(set(contents.files) - set(names)):
        problems.append(f"{root / PATCHES_DIR / extra}: not listed in {SERIES_FILE}")
    patches: list[Patch] = []
    for name in names:
        try:
            patch = parse_patch(root, name, contents.files[name])
        except SeriesError as exc:
            problems.append(str(exc))
            continue
        patches.append(patch)
        problems += [f"{patch.path}: {p}" for p in _patch_problems(patch)]
    return problems, patches


def _patch_problems(patch: Patch) -> list[str]:
    """What is wrong with one patch file, each without the file name."""
    if patch.data.split(b"\n", 1)[0].endswith(b"\r"):
        return [
            "has CRLF line endings, so git am and the exact-context check would misread "
            "it. Patches are byte-exact LF files: the repository's .gitattributes marks "
            "them -text, but this checkout converted them (core.autocrlf=true?). Check "
            "them out again unconverted: "
            "`git -c core.autocrlf=false checkout -- patches series upstream.lock`"
        ]
    problems = []
    if not patch.data.endswith(b"\n"):
        problems.append("does not end with a newline")
    if re.match(r"\[PATCH", patch.subject):
        problems.append("subject carries a [PATCH] prefix")
    if not UPSTREAM_STATUS_RE.search(patch.body):
        problems.append(
            "no valid 'Upstream-Status:' trailer (Yocto values: Pending, Submitted [url], "
            "Backport [version], Denied, Inappropriate [reason], Inactive-Upstream)"
        )
    if not FORWARDED_RE.search(patch.body):
        problems.append("no valid 'Forwarded:' trailer (DEP-3: no, not-needed or a URL)")
    why_problem = _why_problem(patch.body)
    if why_problem:
        problems.append(why_problem)
    return problems


_TRAILER_LINE = re.compile(r"^[A-Za-z-]+: ")
_KNOWN_TRAILERS = (
    "Upstream-Status",
    "Forwarded",
    "Applied-Upstream",
    "Signed-off-by",
    "Co-authored-by",
)


def _why_problem(body: str) -> str | None:
    """Why a patch body fails the why-rule (two lines of prose besides the
    trailers), or None. ``Key: value`` lines read as trailers, so a why
    written as ``Why: ...`` is named in the message."""
    lines = [ln for ln in body.splitlines() if ln.strip()]
    prose = [ln for ln in lines if not _TRAILER_LINE.match(ln)]
    if len(prose) >= 2:
        return None
    keyed = [ln for ln in lines if _TRAILER_LINE.match(ln) and not ln.startswith(_KNOWN_TRAILERS)]
    msg = (
        "the body does not say why the patch exists "
        "(at least two lines of prose before the trailers"
    )
    if keyed:
        shown = ", ".join(repr(ln[:40]) for ln in keyed[:3])
        msg += (
            f"); lines of the form 'Key: value' read as trailers, not prose, e.g. {shown}. "
            "Write the why as sentences: what breaks without the patch, how to tell it is "
            "no longer needed and which upstream change replaces it, then the trailers"
        )
        return msg
    return msg + ")"


def series_id(patches: list[Patch]) -> str:
    """Hex sha256 naming the series: over each patch's name and sha256, in order."""
    text = "".join(f"{p.name}\0{p.sha256}\n" for p in patches)
    return sha256_bytes(text.encode())


def _series_text(root: Path, names: list[str]) -> str:
    """``series`` listing ``names``, keeping the comment lines at its top."""
    spath = root / SERIES_FILE
    header = []
    if spath.is_file():
        for line in spath.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                header.append(line)
            else:
                break
    return "\n".join([*header, *names]) + "\n"


def _patch_files(root: Path) -> set[str]:
    """The ``*.patch`` files under ``patches/``, relative to it."""
    pdir = root / PATCHES_DIR
    if not pdir.is_dir():
        return set()
    return {p.relative_to(pdir).as_posix() for p in pdir.rglob("*.patch")}


@dataclass(frozen=True)
class Changes:
    """What writing a series would do to ``patches/``, by patch name."""

    new: list[str]
    rewritten: list[str]
    unchanged: list[str]
    removed: list[str]


def plan(root: Path, entries: list[tuple[str, bytes]]) -> Changes:
    """What ``write(root, entries)`` would change, without changing anything."""
    pdir = root / PATCHES_DIR
    new, rewritten, unchanged = [], [], []
    for name, data in entries:
        path = pdir / name
        if not path.is_file():
            new.append(name)
        elif path.read_bytes() != data:
            rewritten.append(name)
        else:
            unchanged.append(name)
    removed = sorted(_patch_files(root) - {name for name, _ in entries})
    return Changes(new, rewritten, unchanged, removed)


def write(
    root: Path, entries: list[tuple[str, bytes]], changes: Changes | None = None
) -> list[str]:
    """Write patches and ``series`` for ``entries``; return the names rewritten
    or added.

    ``changes`` is ``plan(root, entries)``, when the caller has it already.
    Patches whose bytes did not change are not touched. Files of patches no
    longer in the series are removed. Comment lines at the top of ``series``
    are kept.
    """
    changes = changes or plan(root, entries)
    pdir = root / PATCHES_DIR
    written = set(changes.new) | set(changes.rewritten)
    changed = [name for name, _ in entries if name in written]
    for name, data in entries:
        if name in written:
            write_atomic(pdir / name, data)
    for gone in changes.removed:
        (pdir / gone).unlink()
    spath = root / SERIES_FILE
    text = _series_text(root, [name for name, _ in entries])
    if not spath.is_file() or spath.read_text() != text:
        write_atomic(spath, text.encode())
    return changed
