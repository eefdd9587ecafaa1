"""Applying the series as commits (``git am``) and exporting commits back.

Apply: check out the upstream commit as branch ``patched``, then for each
patch check that every hunk's context sits exactly at its stated line (zero
fuzz *and* zero offset, as Yocto demands; ``git am`` alone tolerates
offsets), then ``git am`` it. Export: ``git format-patch`` with pinned
settings, one file per commit, so unchanged commits give unchanged bytes.

This module knows nothing about wheels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from vpq.core.errors import VpqError
from vpq.source import git as g
from vpq.source import linting, probe, series, tree
from vpq.source.series import Patch, am_break

PATCHED_BRANCH = "patched"
REBASE_HINT = "If upstream moved, run `nox -s rebase_upstream` to refresh the series."

#: Options that make format-patch output stable: the same commit gives the
#: same bytes on any machine (zero commit id, no numbering, no signature or
#: diffstat, no rename detection, 3 lines of context, UTF-8).
FORMAT_PATCH_ARGS = [
    "format-patch",
    "--stdout",
    "--zero-commit",
    "--no-numbered",
    "--keep-subject",
    "--no-signature",
    "--no-stat",
    "--no-renames",
    "-U3",
    "--encoding=UTF-8",
]


class ApplyError(VpqError):
    """A patch does not apply exactly."""


def check_exact(repo: Path, patch: Patch) -> None:
    """Check that each hunk's old lines sit at its stated line in the tree.

    Raises:
        ApplyError: naming the patch, file and hunk.
    """
    cache: dict[str, list[bytes] | None] = {}
    for h in patch.hunks:
        if h.file not in cache:
            p = repo / h.file
            cache[h.file] = p.read_bytes().split(b"\n") if p.is_file() else None
        lines = cache[h.file]
        where = f"{patch.path.as_posix()}: {h.file}, hunk #{h.index} ({h.header})"
        if lines is None:
            if h.old_len == 0 and h.file in patch.new_files:
                continue
            raise ApplyError(f"{where}: {h.file} does not exist in the tree. {REBASE_HINT}")
        start = h.old_start - 1 if h.old_len else h.old_start
        got = lines[start : start + len(h.old_lines)]
        if tuple(got) != h.old_lines:
            found = _find(lines, h.old_lines)
            detail = (
                f"its context is at line {found + 1} instead (offset "
                f"{found + 1 - h.old_start:+d}); offsets are not accepted"
                if found is not None
                else "its context is not in the file"
            )
            raise ApplyError(f"{where} does not apply: {detail}. {REBASE_HINT}")


def _find(lines: list[bytes], needle: tuple[bytes, ...]) -> int | None:
    n = len(needle)
    for i in range(len(lines) - n + 1):
        if tuple(lines[i : i + n]) == needle:
            return i
    return None


def apply_series(repo: Path, upstream_ref: str, patches: list[Patch]) -> None:
    """Apply ``patches`` on ``upstream_ref`` as one commit each.

    The work directory ends on branch ``patched``.

    Raises:
        ApplyError: a patch does not apply with zero fuzz and offset; the
            message names the patch file, the file and the hunk.
    """
    tree.checkout(repo, upstream_ref, PATCHED_BRANCH)
    try:
        _apply_all(repo, patches)
    finally:
        record_tool_head(repo)


def _apply_all(repo: Path, patches: list[Patch]) -> None:
    for patch in patches:
        check_exact(repo, patch)
        proc = g.git(
            ["am", "--no-3way", "--keep", "--keep-cr", "--quiet", str(patch.path)],
            repo,
            check=False,
        )
        if proc.returncode != 0:
            msg = (proc.stderr + proc.stdout).decode(errors="replace")
            g.git(["am", "--abort"], repo, check=False)
            m = re.search(r"patch failed: (\S+):(\d+)", msg)
            hunk = ""
            if m:
                for h in patch.hunks:
                    if h.file == m.group(1) and h.old_start == int(m.group(2)):
                        hunk = f", hunk #{h.index} ({h.header})"
                where = f"{m.group(1)}{hunk}"
            else:
                where = "git am"
            first = msg.strip().splitlines()[0] if msg.strip() else "no output"
            raise ApplyError(
                f"{patch.path.as_posix()}: {where} does not apply: {first}. {REBASE_HINT}"
            )


_INDEX_LINE = re.compile(rb"^index [0-9a-f]+\.\.[0-9a-f]+(?: [0-7]+)?\n", re.MULTILINE)


_RECORD = "vpq-last-head"


def record_tool_head(repo: Path) -> None:
    """Remember the commit the tool itself left branch ``patched`` at."""
    (repo / ".git" / _RECORD).write_text(g.out(["rev-parse", "HEAD"], repo) + "\n")


def unexported_work(repo: Path) -> str | None:
    """Why re-applying the series in ``repo`` would lose someone's work, or
    None: uncommitted changes to tracked files, or commits on ``patched``
    since the tool last left it there (work not yet written back with
    ``nox -s export``)."""
    record = repo / ".git" / _RECORD
    if not record.exists() or not g.ref_exists(repo, PATCHED_BRANCH):
        return None
    if g.out(["rev-parse", "--abbrev-ref", "HEAD"], repo) != PATCHED_BRANCH:
        return None
    dirty = g.out(["diff", "--name-only", "HEAD"], repo).split()
    if dirty:
        return f"uncommitted changes to {', '.join(dirty[:5])}"
    tip = g.out(["rev-parse", PATCHED_BRANCH], repo)
    if tip != record.read_text().strip():
        return f"commits on branch {PATCHED_BRANCH} that are not in patches/ (tip {tip[:12]})"
    return None


def format_patch(repo: Path, commit: str) -> bytes:
    """The stable format-patch mail for one commit.

    ``index <blob>..<blob>`` lines are dropped: blob ids change with every
    upstream release even where the diff does not, and nothing that applies
    the series (``git am``, ``patch -p1``, quilt) needs them. So a patch
    whose hunks did not change keeps its bytes across a rebase.
    """
    return _INDEX_LINE.sub(b"", g.git([*FORMAT_PATCH_ARGS, "-1", commit], repo).stdout)


def changed_files(repo: Path, base: str, head: str) -> dict[str, str]:
    """Files that differ between two commits: path -> status letter (A/M/D)."""
    text = g.out(["diff", "--no-renames", "--name-status", base, head], repo)
    result: dict[str, str] = {}
    for line in text.splitlines():
        status, path = line.split("\t", 1)
        result[path] = status[0]
    return result


def commits_since(repo: Path, base: str, head: str = "HEAD") -> list[str]:
    """Commit ids in ``base..head``, oldest first."""
    text = g.out(["rev-list", "--reverse", f"{base}..{head}"], repo)
    return text.split() if text else []


def subject_of(repo: Path, commit: str) -> str:
    """The subject line of ``commit``, as git decodes it."""
    return g.out(["log", "-1", "--format=%s", commit], repo)


def slug(subject: str) -> str:
    """A patch file name from a subject, the way format-patch names files."""
    s = re.sub(r"[^A-Za-z0-9._]+", "-", subject).strip("-.")
    return (s[:64].rstrip("-.") or "patch") + ".patch"


class ExportError(VpqError):
    """A commit cannot be exported as a patch that applies the same way."""


def check_message(repo: Path, commit: str) -> None:
    """Refuse a commit message that ``git am`` would cut short.

    Raises:
        ExportError: naming the commit and the line (see ``series.am_break``).
    """
    hit = am_break(g.out(["log", "-1", "--format=%B", commit], repo))
    if hit:
        lineno, line = hit
        raise ExportError(
            f"commit {commit[:12]} ({subject_of(repo, commit)!r}): line {lineno} of its "
            f"message, {line!r}, would end the message for `git am`, which reads "
            "'---', 'diff -' and 'Index: ' lines as the start of the diff; the exported "
            "patch would lose the rest of its body and its trailers. Reword that line "
            "(`git commit --amend` or `git rebase -i` in build/work) and export again."
        )


def export(repo: Path, base: str, old: list[Patch], head: str = "HEAD") -> list[tuple[str, bytes]]:
    """Export ``base..head`` as (patch name, mail bytes), in series order.

    A commit keeps the name of the old patch with the same subject; a new
    commit is named after its subject.

    Raises:
        ExportError: a commit message holds a line ``git am`` would cut at.
    """
    by_subject = {p.subject: p for p in old}
    result: list[tuple[str, bytes]] = []
    for commit in commits_since(repo, base, head):
        check_message(repo, commit)
        data = format_patch(repo, commit)
        prev = by_subject.get(" ".join(subject_of(repo, commit).split()))
        name = prev.name if prev else slug(subject_of(repo, commit))
        result.append((name, data))
    return result


def lint_problems(
    root: Path, entries: list[tuple[str, bytes]], lints: Sequence[linting.Lint]
) -> list[linting.Finding]:
    """What ``lints`` (``vpq lint``'s: ``vpq.checks.lints.LINTS``) report
    once ``entries`` are written, found in memory: nothing is written, and
    the messages are those ``vpq lint`` would print then."""
    return linting.run(lints, linting.checkout(series.after_write(root, entries)))


def shown(root: Path, message: str) -> str:
    """``message`` with the paths under ``root`` made relative to it."""
    return message.replace(f"{root}/", "")


def _fix_advice(refused: list[linting.Finding]) -> str:
    """Where to fix what export refused: each lint's place, in lint order."""
    places = list(dict.fromkeys(f.lint.fix for f in refused))
    if len(places) > 1:
        places = [", ".join(places[:-1]), places[-1]]
    return "Fix " + " and ".join(places)


def write_checked(
    root: Path, entries: list[tuple[str, bytes]], lints: Sequence[linting.Lint]
) -> tuple[series.Changes, list[str]]:
    """Write ``entries`` to ``patches/`` and ``series`` if ``lints`` accept
    them; return what changed and what the lints that only a later run can
    satisfy (``before_export=False``: the mutation record) still report.

    Raises:
        ExportError: listing every problem the other lints report, and how
            to fix them; ``patches/``, ``series`` and ``probes.toml`` are
            unchanged.
    """
    found = lint_problems(root, entries, lints)
    changes = series.plan(root, entries)
    refused = [f for f in found if f.lint.before_export]
    if refused:
        hints = [f"({i}) {shown(root, f.message)}" for i, f in enumerate(refused, start=1)]
        if changes.new and (root / probe.PROBES_FILE).is_file():
            hints.append(
                f"a new patch needs its table in {probe.PROBES_FILE}, e.g. "
                f'["{changes.new[0]}"] with tests = ["tests/semantics/...::test_..."], '
                'or covered-by = "contract" with a why'
            )
        raise ExportError(
            "export refused, `nox -s lint` would reject the exported series: "
            + "; ".join(hints)
            + f". {_fix_advice(refused)}, then run "
            "`nox -s export` again. patches/, series and probes.toml are unchanged."
        )
    series.write(root, entries, changes)
    return changes, [shown(root, f.message) for f in found if not f.lint.before_export]
