"""The pipeline: pin -> upstream tree -> patched tree -> wheels -> audit.

::

    upstream.lock --fetch--> upstream tree (git, one commit)
    series + patches/ --git am--> patched tree (one commit per patch)
    patched tree + upstream release wheel --overlay--> wheel --audit--> dist/

Everything is staged under ``dist/.staging-*`` and moved into ``dist/``
only when every platform has been built and audited, so a failed or
interrupted build leaves ``dist/`` as it was.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import platform as host
import shutil
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from vpq.contract.items import manifest_claims
from vpq.core.compat import tarfile
from vpq.core.errors import VpqError
from vpq.core.files import write_atomic
from vpq.core.workspace import Workspace
from vpq.source import fetch, lock, queue, series, tree
from vpq.source import git as g
from vpq.wheels import advisories, native, wheel
from vpq.wheels import audit as audit_module
from vpq.wheels.audit import AuditReport, audit, compare_backends

LABEL_PREFIX = "eagle3"
BACKENDS = ("overlay", "setuptools")
WORK_DIR = Workspace(Path(".")).work  # relative to the root
STAGING_PREFIX = ".staging-"
#: What a successful build leaves in ``dist/`` beside the wheels: its inputs'
#: key and each wheel's name, size, mtime, sha256 and audit, so the next
#: build with the same inputs can reuse the wheels (``reuse``).
STAMP = ".vpq-build.json"


class BuildError(VpqError):
    """The series cannot be built into wheels."""


class Inputs(NamedTuple):
    """What a build reads from the checkout, read once: the pin and the
    series' patches, parsed (and linted)."""

    pin: lock.Lock
    patches: list[series.Patch]


@dataclass(frozen=True)
class Prepared:
    """A patched work tree ready to build from."""

    root: Path
    lock: lock.Lock
    patches: list[series.Patch]
    repo: Path
    upstream_ref: str
    changed: dict[str, str]  # path -> A/M/D


@dataclass(frozen=True)
class Result:
    """One platform's built wheel and its audit."""

    wheel: wheel.BuiltWheel
    report: AuditReport
    platform: str


def label_for(patches: list[series.Patch]) -> str:
    """The local label: ``eagle3.<first 8 hex of the series id>``."""
    return f"{LABEL_PREFIX}.{series.series_id(patches)[:8]}"


def load_inputs(root: Path) -> Inputs:
    """Read and lint ``upstream.lock``, ``series`` and ``patches/`` (each
    patch parsed once, for the lint and the result).

    Raises:
        LockError, SeriesError: naming the bad file.
    """
    pin = lock.load(root)
    problems, patches = series.lint_and_load(root)
    if problems:
        raise series.SeriesError("the series does not lint: " + "; ".join(problems))
    return Inputs(pin, patches)


def prepare(
    root: Path, source: str = "sdist", work: Path | None = None, inputs: Inputs | None = None
) -> Prepared:
    """Import the pinned upstream and apply the series in the work tree;
    ``inputs`` (``load_inputs``'s) when the caller has read them already.

    Raises:
        BuildError: the work tree holds changes not yet exported.
        LockError, SeriesError, FetchError, TreeError, ApplyError.
    """
    if source not in tree.SOURCES:
        raise BuildError(f"unknown upstream source {source!r}; use one of {tree.SOURCES}")
    pin, patches = inputs or load_inputs(root)
    repo = work or Workspace(root).work
    if source == "sdist":
        sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
        tree.import_sdist(repo, sdist, pin.version)
    else:
        tree.import_git(repo, pin.repository, pin.tag, pin.version, pin.commit)
    ref = tree.upstream_tag(pin.version)
    lost = queue.unexported_work(repo) if repo.exists() else None
    if lost:
        raise BuildError(
            f"{repo} has {lost}; applying the series again would discard them. Run "
            "`nox -s export` to write them to patches/ (or commit them first), or "
            f"delete {repo} to drop them."
        )
    queue.apply_series(repo, ref, patches)
    changed = queue.changed_files(repo, ref, queue.PATCHED_BRANCH)
    return Prepared(root, pin, patches, repo, ref, changed)


def _overlay(prep: Prepared, upstream_wheel: Path) -> dict[str, bytes | None]:
    """Wheel member -> patched content (None: deleted), for shipped paths."""
    with zipfile.ZipFile(upstream_wheel) as z:
        members = set(z.namelist())
        packages = {
            n.split("/", 1)[0]
            for n in members
            if "/" in n and not n.split("/", 1)[0].endswith(".dist-info")
        }
        overlay: dict[str, bytes | None] = {}
        for path, status in sorted(prep.changed.items()):
            if path not in members and path.split("/", 1)[0] not in packages:
                continue  # tests/, docs/, ...: not shipped in the wheel
            if status != "A":
                if path not in members:
                    raise BuildError(
                        f"the series changes {path}, which the sdist has but "
                        f"{upstream_wheel.name} does not ship; the overlay build "
                        "cannot place it"
                    )
                base = g.git(["show", f"{prep.upstream_ref}:{path}"], prep.repo).stdout
                if z.read(path) != base:
                    raise BuildError(
                        f"{path} in {upstream_wheel.name} differs from the pinned "
                        "sdist's copy, so the series' change cannot be overlaid on it"
                    )
            overlay[path] = (
                None
                if status == "D"
                else g.git(["show", f"{queue.PATCHED_BRANCH}:{path}"], prep.repo).stdout
            )
    return overlay


def manifest(prep: Prepared, platform: str, label: str) -> dict[str, object]:
    """The dist-info manifest: upstream pin and hashes, each patch, and the
    claimed architectures with their modules (``manifest_claims``)."""
    pin = prep.lock
    w = pin.wheel(platform)
    return {
        "format": 1,
        "name": pin.name,
        "version": wheel.local_version(pin.version, label),
        "local_label": label,
        "upstream": {
            "version": pin.version,
            "tag": pin.tag,
            "repository": pin.repository,
            "commit": pin.commit,
            "sdist": {"filename": pin.sdist.filename, "sha256": pin.sdist.sha256},
            "wheel": {"filename": w.filename, "sha256": w.sha256},
        },
        "series_sha256": series.series_id(prep.patches),
        "patches": [
            {
                "name": p.name,
                "sha256": p.sha256,
                "subject": p.subject,
                "upstream_status": p.upstream_status,
                # the advisories it fixes (its header's trailers), for verify_install.py
                "advisories": advisories.TRAILER_RE.findall(p.body),
            }
            for p in prep.patches
        ],
        "changed_files": sorted(prep.changed),
        # the claimed architectures and their modules, for verify_install.py
        **manifest_claims(),
    }


def platforms_for(pin: lock.Lock, choice: str) -> list[str]:
    """``all`` or one platform name, checked against the lock."""
    if choice == "all":
        return sorted(pin.wheels)
    pin.wheel(choice)
    return [choice]


def prefetch(pin: lock.Lock, plats: list[str]) -> threading.Thread:
    """Start downloading the pinned release wheels of ``plats`` in the
    background, so the network works while ``prepare`` imports the sdist
    and applies the series (CPU); the started thread. ``_build_one`` fetches
    them again: it waits on the same file lock and, on a failed download,
    raises that error itself. A daemon thread: an error in ``prepare`` does
    not wait for 800 MB (a download cut off leaves a ``.part`` file that the
    next download of that file removes)."""

    def fetch_all() -> None:
        """Download each platform's wheel; errors are the build's to raise."""
        for plat in plats:
            pinned = pin.wheel(plat)
            try:
                fetch.fetch(pin.name, pinned.filename, pinned.sha256)
            except VpqError:
                return

    thread = threading.Thread(target=fetch_all, name="vpq-prefetch", daemon=True)
    thread.start()
    return thread


def _prepare_while_fetching(
    root: Path, source: str, platform: str, inputs: Inputs | None
) -> tuple[Prepared, threading.Thread]:
    """``prepare`` (from ``inputs`` where given), with the release wheels of
    ``platform`` downloading meanwhile; the tree and the download thread."""
    inputs = inputs or load_inputs(root)
    fetching = prefetch(inputs.pin, platforms_for(inputs.pin, platform))
    return prepare(root, source, inputs=inputs), fetching


def _check_backend(backend: str) -> None:
    """Refuse an unknown backend, or setuptools without its tools, before
    any work.

    Raises:
        BuildError: an unknown backend.
        NativeBuildError: setuptools without pypa's ``build`` or ``wheel``.
    """
    if backend not in BACKENDS:
        raise BuildError(f"unknown backend {backend!r}; use one of {BACKENDS}")
    if backend == "setuptools":
        native.require_tools()


def _check_buildable(prep: Prepared, plats: list[str], backend: str, precompiled: bool) -> None:
    """Refuse what this backend cannot build in this series.

    Raises:
        BuildError: a series touching what the precompiled binaries depend
            on; setuptools for another platform.
    """
    binary = wheel.touches_binary_inputs(list(prep.changed))
    if binary and (backend == "overlay" or precompiled):
        raise BuildError(
            f"the series changes {', '.join(binary)}, which the precompiled "
            "release binaries or the wheel metadata depend on; the overlay build "
            "would ship binaries that do not match. Build with vLLM's own build "
            "instead (`--backend setuptools --no-precompiled` on a CUDA host)."
        )
    if backend == "setuptools" and plats != [host_platform()]:
        raise BuildError(
            f"--backend setuptools builds for this host's platform only ({host_platform()}); "
            f"pass --platform {host_platform()}"
        )


def _build_one(prep: Prepared, plat: str, staging: Path, backend: str, precompiled: bool) -> Result:
    """Build and audit one platform's wheel into ``staging``.

    With ``backend="setuptools"``, vLLM's own build makes the wheel, and the
    overlay wheel (built too) must have the same files outside the dist-info.
    """
    pinned = prep.lock.wheel(plat)
    up = fetch.fetch(prep.lock.name, pinned.filename, pinned.sha256)
    label = label_for(prep.patches)
    overlay = _overlay(prep, up)
    built = wheel.build(up, overlay, label, manifest(prep, plat, label), staging)
    if backend != "setuptools":
        return Result(built, audit(built.path, up, overlay), plat)
    src = Workspace(prep.root).native_src
    tree.export_tree(prep.repo, queue.PATCHED_BRANCH, src)
    native_wheel = native.build(
        src, up, label, manifest(prep, plat, label), staging / "native", precompiled=precompiled
    )
    report = audit(native_wheel.path, up, overlay)
    compare_backends(native_wheel.path, built.path)
    built.path.unlink()
    return Result(native_wheel, report, plat)


def build_wheels(
    root: Path,
    platform: str = "all",
    source: str = "sdist",
    out_dir: Path | None = None,
    prep: Prepared | None = None,
    backend: str = "overlay",
    precompiled: bool = True,
    inputs: Inputs | None = None,
) -> list[Result]:
    """Build and audit one wheel per platform into ``out_dir`` (``dist/``).

    Platforms build concurrently in ``out_dir/.staging-*``; the wheels move
    into ``out_dir`` only when all are built and audited. Callers that may
    run beside another command hold the work-tree lock (``vpq.core.worklock``).
    ``prep`` reuses an already prepared work tree; without it the tree is
    prepared here (from ``inputs`` where the caller has read them), with the
    release wheels downloading meanwhile (``prefetch``).

    ``backend="setuptools"`` builds with vLLM's own build instead (see
    ``vpq.wheels.native``; this host's platform only) and, besides the audit, checks
    that its files equal the overlay wheel's outside the dist-info.

    Raises:
        BuildError: see ``_check_backend`` and ``_check_buildable``; or any
            error of ``prepare``, ``wheel.build`` and ``audit``. ``dist/`` is
            unchanged on any error.
    """
    _check_backend(backend)
    fetching = None
    if prep is None:
        prep, fetching = _prepare_while_fetching(root, source, platform, inputs)
    plats = platforms_for(prep.lock, platform)
    _check_buildable(prep, plats, backend, precompiled)
    out_dir = out_dir or Workspace(root).dist
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out_dir)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))
    try:
        with ThreadPoolExecutor(max_workers=len(plats)) as pool:
            results = list(
                pool.map(lambda p: _build_one(prep, p, staging, backend, precompiled), plats)
            )
        if fetching:  # done, or re-hashing a cached file: not left behind the build
            fetching.join()
        final = []
        for r in results:
            dest = out_dir / r.wheel.path.name
            r.wheel.path.replace(dest)
            final.append(
                Result(
                    wheel.BuiltWheel(dest, r.wheel.sha256, r.wheel.version), r.report, r.platform
                )
            )
        drop_other_builds(out_dir, final[0].wheel.path.name)
        _write_stamp(out_dir, _inputs_key(prep.lock, prep.patches, plats, backend, source), final)
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _inputs_key(
    pin: lock.Lock, patches: list[series.Patch], plats: list[str], backend: str, source: str
) -> str:
    """Everything a build's bytes depend on: the lock (as loaded), the
    series, the platforms, backend and upstream source, and the builder's
    own code."""
    code = b"".join(
        Path(inspect.getfile(m)).read_bytes() for m in (wheel, audit_module, native, queue, tree)
    )
    data = json.dumps(
        [
            lock.dumps(pin),
            series.series_id(patches),
            plats,
            backend,
            source,
            wheel.BUILD_TAG,
            Path(__file__).read_text(),
        ]
    )
    return hashlib.sha256(code + data.encode()).hexdigest()


def _write_stamp(out_dir: Path, key: str, results: list[Result]) -> None:
    wheels = []
    for r in results:
        st = r.wheel.path.stat()
        wheels.append(
            {
                "platform": r.platform,
                "name": r.wheel.path.name,
                "sha256": r.wheel.sha256,
                "version": r.wheel.version,
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "differing": list(r.report.differing),
                "members": r.report.members,
            }
        )
    write_atomic(
        out_dir / STAMP, (json.dumps({"key": key, "wheels": wheels}, indent=1) + "\n").encode()
    )


def reuse(
    root: Path,
    platform: str = "all",
    out_dir: Path | None = None,
    backend: str = "overlay",
    source: str = "sdist",
    inputs: Inputs | None = None,
) -> list[Result] | None:
    """The wheels the last build with these same inputs left in ``out_dir``
    (``dist/``), when each is still there with the size and mtime that build
    gave it; None otherwise (then build). Builds are reproducible, so the
    same inputs would give the same bytes. ``inputs`` as for ``prepare``.

    Raises:
        LockError, SeriesError: the inputs do not load.
    """
    pin, patches = inputs or load_inputs(root)
    out_dir = out_dir or Workspace(root).dist
    try:
        stamp = json.loads((out_dir / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("key") != _inputs_key(pin, patches, platforms_for(pin, platform), backend, source):
        return None
    results = []
    for w in stamp["wheels"]:
        path = out_dir / w["name"]
        try:
            st = path.stat()
        except OSError:
            return None
        if (st.st_size, st.st_mtime_ns) != (w["size"], w["mtime_ns"]):
            return None
        report = AuditReport(path, tuple(w["differing"]), w["members"])
        results.append(
            Result(wheel.BuiltWheel(path, w["sha256"], w["version"]), report, w["platform"])
        )
    return results


def common_txt(pin: lock.Lock) -> bytes:
    """vLLM's ``requirements/common.txt`` from the pinned sdist (for the CPU
    venvs that import a wheel).

    Raises:
        FetchError: the sdist cannot be had; BuildError: it has no such file.
    """
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    with tarfile.open(sdist) as tar:
        for member in tar:
            if member.name.endswith("/requirements/common.txt") and member.name.count("/") == 2:
                data = tar.extractfile(member)
                if data is not None:
                    return data.read()
    raise BuildError(f"{sdist.name} has no requirements/common.txt")


def remove_stale_staging(out_dir: Path) -> None:
    """Remove ``.staging-*`` directories an interrupted build (SIGKILL, power
    loss) left in ``out_dir``. Callers hold the work-tree lock
    (``vpq.core.worklock``), so no other build is using them."""
    for stale in out_dir.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)


def drop_other_builds(out_dir: Path, built_name: str) -> None:
    """Remove wheels of the same project in ``out_dir`` whose version or
    build tag differ from ``built_name``'s (earlier series, pins or builder
    formats), so ``dist/`` holds one build; other platforms' wheels of this
    build stay."""
    name, version, build_tag, _ = parse_wheel_filename(built_name)
    for other in out_dir.glob("*.whl"):
        try:
            o_name, o_version, o_build, _ = parse_wheel_filename(other.name)
        except InvalidWheelFilename:
            continue
        if o_name == name and (o_version, o_build) != (version, build_tag):
            other.unlink()


def host_platform() -> str:
    """The lock's platform name for this machine (``x86_64`` or ``aarch64``)."""
    return {"arm64": "aarch64"}.get(host.machine(), host.machine())
