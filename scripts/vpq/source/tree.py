"""Upstream trees as git commits in the work directory.

The work directory (``build/work`` by default, git-ignored) is one git
repository. Each upstream release becomes one commit tagged
``upstream/<version>``, made with a fixed identity and date, so the same
sdist always gives the same commit id. Two sources:

- ``sdist`` (default): the pinned, hash-checked release sdist, the whole
  tree at the tag (``vllm/``, ``csrc/``, ``tests/``, ...), imported the way
  ``gbp import-orig`` imports a tarball.
- ``git``: the pinned commit fetched from the lock's repository URL, for
  hosts that reach it. Its commit id is checked against the lock's.

This module knows nothing about patches.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from vpq.core.compat import tarfile
from vpq.core.errors import VpqError
from vpq.core.files import VERSION_FILE
from vpq.source import git as g

SOURCES = ("sdist", "git")


class TreeError(VpqError):
    """An upstream tree could not be imported."""


def upstream_tag(version: str) -> str:
    """The work repository's tag for an upstream version, ``upstream/<version>``."""
    return f"upstream/{version}"


def _extract_sdist(sdist: Path, dest: Path) -> None:
    """Extract ``sdist`` into ``dest``, dropping its top directory."""
    try:
        with tarfile.open(sdist, "r:*") as tar:
            members = tar.getmembers()
            tops = {m.name.split("/", 1)[0] for m in members}
            if len(tops) != 1:
                raise TreeError(
                    f"{sdist}: expected one top-level directory, found {sorted(tops)[:5]}"
                )
            top = tops.pop() + "/"
            for m in members:
                if m.name + "/" == top:
                    continue
                m.name = m.name[len(top) :]
            tar.extractall(
                dest,
                members=[m for m in members if m.name and m.name + "/" != top],
                filter="data",
            )
    except (tarfile.TarError, OSError) as exc:
        raise TreeError(f"{sdist}: cannot extract: {exc}") from None


def import_sdist(repo: Path, sdist: Path, version: str, parent: str | None = None) -> str:
    """Import ``sdist`` as the commit tagged ``upstream/<version>``.

    Reuses the tag when it already exists. ``parent`` makes the new upstream
    commit follow an older one (as ``gbp import-orig`` does on a new release).

    Returns:
        The commit id.

    Raises:
        TreeError: the sdist cannot be read.
    """
    g.ensure_repo(repo)
    tag = upstream_tag(version)
    if g.ref_exists(repo, tag):
        return g.out(["rev-parse", f"{tag}^{{commit}}"], repo)
    with tempfile.TemporaryDirectory(dir=repo.parent, prefix=".import-") as tmp:
        tree_dir = Path(tmp) / "tree"
        tree_dir.mkdir()
        _extract_sdist(sdist, tree_dir)
        index = Path(tmp) / "index"
        env = {
            "GIT_DIR": str(repo / ".git"),
            "GIT_INDEX_FILE": str(index),
            "GIT_WORK_TREE": str(tree_dir),
        }
        # -f: import everything, whatever a .gitignore inside the sdist says.
        g.git(["add", "-A", "-f", "."], tree_dir, env=env)
        tree = g.out(["write-tree"], tree_dir, env=env)
    args = ["commit-tree", tree, "-m", f"Import upstream {sdist.name}\n\nversion {version}"]
    if parent:
        args[2:2] = ["-p", parent]
    commit = g.out(args, repo)
    g.git(["tag", "-f", tag, commit], repo)
    return commit


def import_git(repo: Path, url: str, tag: str, version: str, expect_commit: str) -> str:
    """Fetch ``tag`` from ``url`` and tag its commit ``upstream/<version>``.

    Raises:
        TreeError: the fetch fails, or the fetched commit does not start
            with ``expect_commit`` (the lock's commit).
    """
    g.ensure_repo(repo)
    try:
        g.git(
            ["fetch", "--no-tags", "--depth=1", url, f"refs/tags/{tag}:refs/vpq/fetched"],
            repo,
        )
    except g.GitError as exc:
        raise TreeError(
            f"cannot fetch tag {tag} from {url} (--upstream-source git): {exc}"
        ) from None
    commit = g.out(["rev-parse", "refs/vpq/fetched^{commit}"], repo)
    if not commit.startswith(expect_commit):
        raise TreeError(
            f"{url} tag {tag} is commit {commit}, but upstream.lock pins "
            f"{expect_commit}; refusing to build from it"
        )
    g.git(["tag", "-f", upstream_tag(version), commit], repo)
    return commit


def sdist_commit(sdist: Path) -> str | None:
    """The commit id setuptools-scm recorded in the sdist's ``vllm/_version.py``
    (``__commit_id__ = 'g95c0f928c'`` -> ``95c0f928c``), or None."""
    import re

    with tarfile.open(sdist, "r:*") as tar:
        for m in tar.getmembers():
            if m.name.endswith("/" + VERSION_FILE) and m.name.count("/") == 2:
                fh = tar.extractfile(m)
                text = fh.read().decode() if fh else ""
                found = re.search(r"commit_id = '(?:g)?([0-9a-f]{7,40})'", text)
                return found.group(1) if found else None
    return None


def checkout(repo: Path, ref: str, branch: str) -> None:
    """Force-check out ``ref`` as ``branch`` in the work directory."""
    g.git(["am", "--abort"], repo, check=False)
    g.git(["checkout", "-q", "-f", "-B", branch, ref], repo)
    g.git(["clean", "-q", "-fdx"], repo)


def export_tree(repo: Path, ref: str, dest: Path) -> None:
    """Write the files of ``ref`` to a fresh directory ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = g.git(["archive", "--format=tar", ref], repo).stdout
    tmp = dest.parent / f".{dest.name}.tar"
    tmp.write_bytes(archive)
    try:
        with tarfile.open(tmp) as tar:
            tar.extractall(dest, filter="data")
    finally:
        os.unlink(tmp)
