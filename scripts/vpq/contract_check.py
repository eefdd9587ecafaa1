"""Running the EAGLE-3 contract check on a tree or a built wheel.

``vpq.contract`` discovers what vLLM's EAGLE-3 path uses on the target model
(from source) and checks it in an interpreter that imports vLLM; this module
supplies both: the source at a ref of the work repository, and a CPU venv
made from that tree's ``requirements/common.txt``. It is used by ``build``
(after each build), ``rebase`` (on the target and the rebased tree) and the
CLI (``nox -s contract``).

A wheel's verdict is cached under ``<cache>/contract/``, keyed by the
wheel's sha256, the discovered items and the contract code's own source
(both sides and the probe), so
a warm ``build_wheel`` with an unchanged series does not import vLLM again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from vpq import build, contract, contract_drafter, fetch, progress, tree, venv
from vpq import git as g
from vpq.files import sha256_file, write_atomic
from vpq.workspace import Workspace


def _reader(repo: Path, ref: str) -> Callable[[str], str]:
    """A reader of files at ``ref`` of the work repository, for discovery."""

    def read(path: str) -> str:
        """The text of ``path`` at the ref."""
        return g.git(["show", f"{ref}:{path}"], repo).stdout.decode()

    return read


def deps_python(repo: Path, common_ref: str) -> Path:
    """The python of the cached deps venv for ``common_ref``'s
    ``requirements/common.txt`` (made on first use).

    Raises:
        VenvError.
    """
    common = g.git(["show", f"{common_ref}:requirements/common.txt"], repo).stdout
    return venv.deps_env(common) / "bin" / "python"


@contextmanager
def exported(work_root: Path, repo: Path, ref: str) -> Iterator[Path]:
    """The tree at ``ref``, exported into a temporary directory under
    ``work_root`` for as long as the ``with`` block runs."""
    work_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_root, prefix=".contract-") as tmp:
        src = Path(tmp) / "src"
        tree.export_tree(repo, ref, src)
        yield src


def _cache_key(wheel_sha256: str, items: list[contract.Item]) -> str:
    code = (
        b"".join(Path(m.__file__).read_bytes() for m in (contract, contract_drafter))
        + contract.PROBE.read_bytes()
    )
    payload = json.dumps([wheel_sha256, [asdict(i) for i in items]], sort_keys=True).encode()
    return hashlib.sha256(code + payload).hexdigest()[:24]


def for_wheel(
    wheel_path: Path, common_txt: Callable[[], bytes], wheel_sha256: str | None = None
) -> contract.Table:
    """The contract discovered in the sources ``wheel_path`` ships (what a
    serving host runs), checked with the wheel installed (``--no-deps``)
    over a CPU deps venv made from ``common_txt()`` (vLLM's
    ``requirements/common.txt``, asked for only when the venv is needed).

    Cached by the wheel's sha256 (``wheel_sha256`` when the caller has it),
    the items and the contract code: an unchanged wheel is not checked again.

    Raises:
        ContractError, VenvError.
    """
    with zipfile.ZipFile(wheel_path) as z:
        items = contract.discover(lambda path: z.read(path).decode())
        modules = contract.model_modules(z.read(contract.REGISTRY).decode())
    cached = (
        fetch.cache_dir()
        / "contract"
        / f"{_cache_key(wheel_sha256 or sha256_file(wheel_path), items)}.json"
    )
    if cached.is_file():
        os.utime(cached)  # its last use, for `vpq cache --prune`
        return contract.Table.from_json(json.loads(cached.read_text()))
    python = venv.cached_wheel_env(venv.deps_env(common_txt()), wheel_path)
    with progress.step(f"checking the EAGLE-3 contract: importing {wheel_path.name} on CPU"):
        table = contract.check(python, items, modules=modules)
    write_atomic(cached, json.dumps(table.to_json()).encode())
    return table


def for_tree(work_root: Path, repo: Path, ref: str, common_ref: str) -> contract.Table:
    """The contract discovered and checked on the source tree at ``ref``
    (vLLM imported from an export of it, in a temporary directory under
    ``work_root``), over the deps venv for ``common_ref``: what the rebase
    uses, no wheel needed.

    Raises:
        ContractError, VenvError.
    """
    python = deps_python(repo, common_ref)
    with exported(work_root, repo, ref) as src:
        return check_source(python, repo, ref, src)


def check_source(python: Path, repo: Path, ref: str, src: Path) -> contract.Table:
    """The contract discovered at ``ref`` and checked with ``python``, vLLM
    importing from ``src`` (that ref, exported: see ``exported``).

    Raises:
        ContractError.
    """
    read = _reader(repo, ref)
    items = contract.discover(read)
    modules = contract.model_modules(read(contract.REGISTRY))
    with progress.step(f"checking the EAGLE-3 contract: importing vLLM at {ref} on CPU"):
        return contract.check(python, items, sys_path=src, modules=modules)


def require(table: contract.Table, what: str) -> None:
    """Raise when ``table`` has a gap.

    Raises:
        ContractError: naming every gap (``Table.gap_message``).
    """
    message = table.gap_message(what)
    if message:
        raise contract.ContractError(message)


def for_checkout(root: Path, *, upstream: bool = False) -> contract.Table:
    """``nox -s contract``: the table for this host's platform, on the wheel
    built from the series (into ``build/wheels``), or with ``upstream`` on
    the pinned, unpatched release wheel. The series is applied once.

    Raises:
        ContractError, VenvError, and any error of ``build``.
    """
    prep = build.prepare(root)
    plat = build.host_platform()

    def common_txt() -> bytes:
        """The pinned upstream's requirements/common.txt, from the work tree."""
        return g.git(["show", f"{prep.upstream_ref}:requirements/common.txt"], prep.repo).stdout

    if upstream:
        pinned = prep.lock.wheel(plat)
        wheel_path = fetch.fetch(prep.lock.name, pinned.filename, pinned.sha256)
        return for_wheel(wheel_path, common_txt, pinned.sha256)
    (res,) = build.build_wheels(root, platform=plat, out_dir=Workspace(root).wheels, prep=prep)
    return for_wheel(res.wheel.path, common_txt, res.wheel.sha256)
