"""A thin, typed runner for the git commands the queue uses.

Commits made by the tool get a fixed identity and date so that the same
inputs give the same commit ids on any machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from vpq.errors import VpqError

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
