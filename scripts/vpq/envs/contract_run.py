"""Running the EAGLE-3 contract on a tree or a built wheel.

``discover`` gathers both sides' items from source (``vpq.contract.target``,
``vpq.contract.drafter``); ``check`` evaluates them on the claimed
architectures in an interpreter that imports vLLM (``vpq.contract.probe``,
run there as a script) and makes the table (``vpq.contract.table``). The
rest supplies both: the source in a wheel or at a ref of the work
repository, and a CPU venv made from that tree's
``requirements/common.txt``. It is used by the CLI (``build_wheel``, ``nox
-s contract``), ``rebase`` (on the target and the rebased tree) and
``mutation``.

A wheel's verdict is cached under ``<cache>/contract/``, keyed by the
wheel's sha256, the discovered items and the contract code's own source
(every module of
this package), so a warm ``build_wheel`` with an unchanged series does not import vLLM again.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from vpq.contract import drafter, target
from vpq.contract.items import (
    CLAIMS,
    DRAFTERS,
    PROPOSER,
    REGISTRY,
    RUNNER,
    RUNNER_V2,
    SPECULATIVE,
    ContractError,
    Item,
)
from vpq.contract.table import Table, from_results
from vpq.core import progress
from vpq.core.errors import VpqError
from vpq.core.files import sha256_file, write_atomic
from vpq.core.proc import tagged_json
from vpq.core.workspace import Workspace
from vpq.envs import installer, venv
from vpq.source import fetch, tree
from vpq.source import git as g
from vpq.wheels import build

#: The contract package (``vpq.contract``), whose code decides a verdict.
PACKAGE = Path(__file__).resolve().parents[1] / "contract"
#: The probe, run as a script in an interpreter that imports vLLM.
PROBE = PACKAGE / "probe.py"
#: Seconds the contract probe may take (it imports vLLM in a CPU venv).
PROBE_TIMEOUT_S = 900


def discover(read: Callable[[str], str]) -> list[Item]:
    """All contract items of a tree; ``read(path)`` returns a file's text.

    Both model runners are covered (the default one and, where the release
    has it, the opt-in ``v1/worker/gpu/`` one), following their helpers;
    then the drafter side (``vpq.contract.drafter``: the proposer and its
    bases, the speculative-decoding registry).

    Raises:
        ContractError: a file is missing, or a runner's EAGLE-3 path was not
            found (the message names the functions where discovery lost it).
    """
    try:
        runner, _, speculative = read(RUNNER), read(PROPOSER), read(SPECULATIVE)
    except (OSError, KeyError, VpqError) as exc:
        raise ContractError(
            f"cannot read the runner, proposer or speculative config source: {exc}"
        ) from None
    items = target.discover_runner(runner, RUNNER, read)
    try:
        v2 = read(RUNNER_V2)
    except (OSError, KeyError, VpqError):
        v2 = None  # releases before the opt-in runner
    if v2 is not None:
        items += target.discover_runner(v2, RUNNER_V2, read, required=False)
    items += target.discover_gate(speculative) + target.discover_proposer(read, PROPOSER)
    return items + drafter.discover(read)


def check(
    python: Path,
    items: list[Item],
    *,
    sys_path: Path | None = None,
    modules: dict[str, str] | None = None,
) -> Table:
    """Evaluate ``items`` on the claimed architectures with ``python``, an
    interpreter that imports the vLLM under test (or, with ``sys_path``, one
    whose packages let vLLM import from that source tree).

    ``modules`` (architecture -> model module path, see
    ``target.model_modules``)
    fills ``Table.files``.

    Raises:
        ContractError: the probe failed to run.
    """
    # A config item is read on the config class made with the checkpoint's
    # top-level keys, as loading a real config.json would make it.
    archs = {
        a: {
            "model_type": c.model_type,
            "text_model_type": c.text_model_type,
            "checkpoint": dict(c.checkpoint),
        }
        for a, c in CLAIMS.items()
    }
    drafters = {a: {"model_type": mt} for a, mt in DRAFTERS.items()}
    payload = json.dumps(
        {
            "items": [asdict(i) for i in items],
            "archs": archs,
            "drafter_archs": drafters,
            "sys_path": [str(sys_path)] if sys_path else [],
        }
    )
    # -I -c: run the probe's text isolated, so the modules beside it in
    # scripts/vpq (queue, venv, wheel, ...) cannot shadow the stdlib or pip's.
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", PROBE.read_text()],
            input=payload,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
        )
    except subprocess.TimeoutExpired:
        raise ContractError(
            f"contract probe under {python} did not finish in {PROBE_TIMEOUT_S} s "
            "(importing vLLM hung?); run it again, or delete that venv to have it made anew"
        ) from None
    results = tagged_json(proc.stdout, "CONTRACT")
    if proc.returncode != 0 or not isinstance(results, list):
        raise ContractError(f"contract probe failed under {python}: {proc.stderr.strip()[-1500:]}")
    return from_results(items, results, modules or {})


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


def _cache_key(wheel_sha256: str, items: list[Item]) -> str:
    code = b"".join(p.read_bytes() for p in [*sorted(PACKAGE.glob("*.py")), Path(__file__)])
    payload = json.dumps([wheel_sha256, [asdict(i) for i in items]], sort_keys=True).encode()
    return hashlib.sha256(code + payload).hexdigest()[:24]


def for_wheel(
    wheel_path: Path, common_txt: Callable[[], bytes], wheel_sha256: str | None = None
) -> Table:
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
        items = discover(lambda path: z.read(path).decode())
        modules = target.model_modules(z.read(REGISTRY).decode())
    cached = (
        fetch.cache_dir()
        / "contract"
        / f"{_cache_key(wheel_sha256 or sha256_file(wheel_path), items)}.json"
    )
    if cached.is_file():
        os.utime(cached)  # its last use, for `vpq cache --prune`
        return Table.from_json(json.loads(cached.read_text()))
    t0 = time.monotonic()
    common = common_txt()
    print(first_time_plan(common, wheel_sha256 or sha256_file(wheel_path)), file=sys.stderr)
    python = venv.wheel_over_deps(common, wheel_path)
    with progress.step(f"checking the EAGLE-3 contract: importing {wheel_path.name} on CPU"):
        table = check(python, items, modules=modules)
    write_atomic(cached, json.dumps(table.to_json()).encode())
    took = progress.human_seconds(time.monotonic() - t0)
    print(f"contract check: {took} the first time; its verdict is cached", file=sys.stderr)
    return table


def first_time_plan(common_txt: bytes, wheel_sha256: str) -> str:
    """One line, said before a contract check whose verdict is not cached:
    which of its slow steps are still to do (docs/build.md, "What the two
    commands do", has their measured times)."""
    envs = venv.envs_dir()
    steps = ["import it on CPU"]
    if not (envs / f"wheel-{wheel_sha256[:12]}" / ".complete").is_file():
        how = "uv" if installer.chosen() else "pip"
        steps.insert(0, f"install the wheel into a venv ({how})")
    if not (envs / f"deps-{venv.deps_key(common_txt)}" / ".complete").is_file():
        steps.insert(0, "make the CPU venv of torch and vLLM's requirements (once a release)")
    return "contract check, first time for this wheel: " + ", then ".join(steps)


def for_tree(work_root: Path, repo: Path, ref: str, common_ref: str) -> Table:
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


def check_source(python: Path, repo: Path, ref: str, src: Path) -> Table:
    """The contract discovered at ``ref`` and checked with ``python``, vLLM
    importing from ``src`` (that ref, exported: see ``exported``).

    Raises:
        ContractError.
    """
    read = _reader(repo, ref)
    items = discover(read)
    modules = target.model_modules(read(REGISTRY))
    with progress.step(f"checking the EAGLE-3 contract: importing vLLM at {ref} on CPU"):
        return check(python, items, sys_path=src, modules=modules)


def require(table: Table, what: str) -> None:
    """Raise when ``table`` has a gap.

    Raises:
        ContractError: naming every gap (``Table.gap_message``).
    """
    message = table.gap_message(what)
    if message:
        raise ContractError(message)


def for_checkout(root: Path, *, upstream: bool = False) -> Table:
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
