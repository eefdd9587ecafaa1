"""A thin, typed runner for the git commands the queue uses.

Commits made by the tool get a fixed identity and date so that the same
inputs give the same commit ids on any machine.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from vpq.core.errors import VpqError

#: Identity and date used for every commit the tool itself creates.
TOOL_IDENT = {
    "GIT_AUTHOR_NAME": "vpq",
    "GIT_AUTHOR_EMAIL": "vpq@localhost",
    "GIT_COMMITTER_NAME": "vpq",
    "GIT_COMMITTER_EMAIL": "vpq@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
}

#: Diff settings pinned for every git call, so exported patches have the
#: same bytes on any machine whatever the user's git config says.
PINNED_CONFIG = (
    "core.abbrev=12",
    "core.autocrlf=false",
    "core.quotePath=true",
    "diff.renames=false",
    "diff.algorithm=myers",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.context=3",
    "diff.interHunkContext=0",
    "diff.suppressBlankEmpty=false",
    "format.signature=",
    "format.numbered=false",
    "format.coverLetter=false",
    "am.threeWay=false",
    "am.keepcr=false",
    "apply.whitespace=nowarn",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "init.defaultBranch=main",
    "gc.auto=0",
)


class GitError(VpqError):
    """A git command failed; the message carries its stderr."""


def git(
    args: list[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in ``cwd`` with the pinned config.

    Raises:
        GitError: the command exited non-zero and ``check`` is true.
    """
    cmd = ["git"]
    for item in PINNED_CONFIG:
        cmd += ["-c", item]
    cmd += args
    full_env = {
        **os.environ,
        **TOOL_IDENT,
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
    }
    if env:
        full_env.update(env)
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, input=input)
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        out = proc.stdout.decode(errors="replace").strip()
        raise GitError(
            f"git {' '.join(args[:3])} failed in {cwd} (exit {proc.returncode}): {err or out}"
        )
    return proc


def out(args: list[str], cwd: Path, **kw: object) -> str:
    """Run git and return stdout as stripped text."""
    return git(args, cwd, **kw).stdout.decode().strip()  # type: ignore[arg-type]


def ensure_repo(path: Path) -> None:
    """Create an empty git repository at ``path`` unless one is there."""
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        git(["init", "-q"], path)


def ref_exists(repo: Path, ref: str) -> bool:
    """Whether ``ref`` resolves to a commit in ``repo``."""
    return (
        git(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], repo, check=False).returncode == 0
    )


def tracked_files(repo: Path, ref: str) -> list[str]:
    """Every file path in ``ref``'s tree."""
    return out(["ls-tree", "-r", "--name-only", ref], repo).splitlines()


def commit_of(repo: Path, ref: str) -> str:
    """The full commit id ``ref`` names."""
    return out(["rev-parse", f"{ref}^{{commit}}"], repo)


def force_branch(repo: Path, branch: str, ref: str | None = None, *, check: bool = True) -> None:
    """Check out ``branch`` with the work tree forced to it; with ``ref``,
    (re)point the branch at ``ref`` first. ``check=False`` for a best-effort
    clean-up that must not raise."""
    git(["checkout", "-q", "-f", *(["-B", branch, ref] if ref else [branch])], repo, check=check)


def reset_hard(repo: Path, ref: str) -> None:
    """Point the current branch, index and work tree at ``ref``."""
    git(["reset", "-q", "--hard", ref], repo)


def same_tree(repo: Path, a: str, b: str) -> bool:
    """Whether commits ``a`` and ``b`` hold the same tree."""
    return out(["rev-parse", f"{a}^{{tree}}"], repo) == out(["rev-parse", f"{b}^{{tree}}"], repo)


def unmerged(repo: Path) -> list[str]:
    """The paths the index still holds as unmerged (conflicted)."""
    return out(["diff", "--name-only", "--diff-filter=U"], repo).split()


def index_matches_head(repo: Path) -> bool:
    """Whether the index (what the next commit would hold) equals ``HEAD``."""
    return git(["diff", "--cached", "--quiet", "HEAD"], repo, check=False).returncode == 0


def cherry_pick(repo: Path, commit: str) -> subprocess.CompletedProcess[bytes]:
    """``git cherry-pick`` one commit, keeping it even when it turns out
    empty; never raises (a conflict is a non-zero exit to inspect)."""
    return git(
        ["cherry-pick", "--keep-redundant-commits", "--allow-empty", commit], repo, check=False
    )


def picking(repo: Path) -> bool:
    """Whether a cherry-pick is stopped in ``repo`` (``CHERRY_PICK_HEAD``)."""
    return ref_exists(repo, "CHERRY_PICK_HEAD")


def cherry_pick_continue(repo: Path) -> None:
    """Commit a resolved cherry-pick with its own message (no editor)."""
    git(["-c", "core.editor=true", "cherry-pick", "--continue"], repo, env={"GIT_EDITOR": "true"})


def cherry_pick_skip(repo: Path) -> None:
    """Drop a stopped cherry-pick (its result was empty), back to ``HEAD``."""
    git(["cherry-pick", "--skip"], repo, check=False)
    reset_hard(repo, "HEAD")


def cherry_pick_abort(repo: Path) -> None:
    """Give up a stopped cherry-pick, if there is one."""
    git(["cherry-pick", "--abort"], repo, check=False)


def apply_check_reverse(repo: Path, ref: str, patch: Path) -> bool:
    """Whether ``patch`` applies in reverse to ``ref``'s tree (checked in a
    throw-away index: nothing in ``repo`` changes)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(["read-tree", ref], repo, env=env)
        args = ["apply", "--cached", "--check", "--reverse", str(patch)]
        return git(args, repo, env=env, check=False).returncode == 0


def show(repo: Path, ref: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``ref``, or None where it has no such file."""
    proc = git(["show", f"{ref}:{path}"], repo, check=False)
    return proc.stdout if proc.returncode == 0 else None
