"""A static package index over dist/'s wheels, for a fleet to install from.

``publish`` writes, next to the wheels ``vpq build`` left in ``dist/``::

    simple/index.html  simple/index.json             PEP 503 / PEP 691 project list
    simple/<project>/index.html  .../index.json      one link per wheel, with #sha256=
    requirements.txt                                 our wheel pinned by hash
    constraints.txt                                  upstream's runtime requirements
    vex.cdx.json                                     the advisory ledger as CycloneDX VEX

pip and uv read ``simple/`` from disk (``--index-url file://.../simple``) or
the directory itself (``--find-links``), with no network. The links are
relative, so the directory can be copied or served by any static web server.

``constraints.txt`` is upstream's declared requirement set: the release
wheel's ``Requires-Dist`` (our wheel carries the same lines; the audit proves
we change only Python files, ``_version.py`` and the dist-info). Where
upstream pins a range, the version vLLM's own CI resolved for that release
(``requirements/test.txt`` in the pinned sdist, a ``uv pip compile`` lock)
replaces it when it lies inside the range. Everything else stays a range, as
upstream declares it: upstream publishes no lock of its runtime set.
"""

from __future__ import annotations

import html
import json
import urllib.parse
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from vpq.core.compat import tarfile
from vpq.core.errors import VpqError
from vpq.core.files import sha256_file, write_atomic
from vpq.core.workspace import Workspace
from vpq.source import fetch, lock

SIMPLE = "simple"
REQUIREMENTS = "requirements.txt"
CONSTRAINTS = "constraints.txt"
#: vLLM's CI lock in the sdist: ``uv pip compile requirements/test.in``.
CI_LOCK = "requirements/test.txt"
_PEP691_META = {"api-version": "1.0"}


class PublishError(VpqError):
    """dist/ cannot be published as a package index."""


@dataclass(frozen=True)
class Wheel:
    """One wheel of dist/, as its file name and METADATA say."""

    path: Path
    project: NormalizedName
    version: Version
    sha256: str
    requires_python: str | None
    requires_dist: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    """What ``publish`` wrote."""

    dist: Path
    wheels: list[Wheel]
    written: list[Path]
    exact: int  # constraints pinned with ``==``
    ranges: int  # constraints left as upstream's range


def _metadata(path: Path) -> bytes:
    """The ``*.dist-info/METADATA`` member of the wheel at ``path``."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1]
            found = [n for n in names if n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise PublishError(f"{path}: expected one *.dist-info/METADATA, found {found}")
            return zf.read(found[0])
    except (OSError, zipfile.BadZipFile) as exc:
        raise PublishError(f"{path} is not a readable wheel ({exc}); rebuild dist/") from exc


def read_wheel(path: Path) -> Wheel:
    """The wheel at ``path``: name and version from its file name, checked
    against its METADATA, and its sha256.

    Raises:
        PublishError: a bad file name, an unreadable wheel, or METADATA that
            names another project or version.
    """
    try:
        project, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise PublishError(f"{path}: not a wheel file name ({exc})") from exc
    msg = BytesParser(policy=compat32).parsebytes(_metadata(path))
    try:
        meta_version = Version(msg["Version"] or "")
    except InvalidVersion as exc:
        raise PublishError(f"{path}: METADATA has no valid Version ({exc})") from exc
    if canonicalize_name(msg["Name"] or "") != project or meta_version != version:
        raise PublishError(
            f"{path}: METADATA says {msg['Name']} {msg['Version']}, the file name says "
            f"{project} {version}; the wheel is damaged or renamed"
        )
    return Wheel(
        path=path,
        project=project,
        version=version,
        sha256=sha256_file(path),
        requires_python=msg["Requires-Python"],
        requires_dist=tuple(msg.get_all("Requires-Dist") or ()),
    )


def wheels_in(dist: Path) -> list[Wheel]:
    """Every wheel in ``dist``, sorted by file name; one version per project.

    Raises:
        PublishError: no wheel there, or two versions of one project.
    """
    paths = sorted(dist.glob("*.whl")) if dist.is_dir() else []
    if not paths:
        raise PublishError(
            f"{dist} holds no wheel to publish: run `nox -s build_wheel` first (or pass --dist DIR)"
        )
    wheels = [read_wheel(p) for p in paths]
    versions: dict[str, set[Version]] = {}
    for w in wheels:
        versions.setdefault(w.project, set()).add(w.version)
    mixed = {p: sorted(str(v) for v in vs) for p, vs in versions.items() if len(vs) > 1}
    if mixed:
        raise PublishError(
            f"{dist} holds several versions of {', '.join(mixed)} ({mixed}): a fleet pins "
            "one; remove the stale wheels or rebuild with `nox -s build_wheel`"
        )
    return wheels


def _href(wheel: Wheel) -> str:
    """The link from ``simple/<project>/`` to the wheel, with its hash."""
    return f"../../{urllib.parse.quote(wheel.path.name)}#sha256={wheel.sha256}"


def project_page_html(project: str, wheels: list[Wheel]) -> bytes:
    """A PEP 503 project page: one anchor per wheel, ``#sha256=`` on each,
    ``data-requires-python`` where the wheel declares it."""
    lines = ["<!DOCTYPE html>", "<html>", "<head>", '<meta name="pypi:repository-version" '
             'content="1.0">', f"<title>Links for {html.escape(project)}</title>", "</head>",
             "<body>", f"<h1>Links for {html.escape(project)}</h1>"]  # fmt: skip
    for w in wheels:
        attrs = f'href="{html.escape(_href(w))}"'
        if w.requires_python:
            attrs += f' data-requires-python="{html.escape(w.requires_python)}"'
        lines.append(f"<a {attrs}>{html.escape(w.path.name)}</a><br>")
    lines += ["</body>", "</html>", ""]
    return "\n".join(lines).encode()


def project_page_json(project: str, wheels: list[Wheel]) -> bytes:
    """The same page as PEP 691 JSON."""
    files = [
        {
            "filename": w.path.name,
            "url": _href(w).split("#", 1)[0],
            "hashes": {"sha256": w.sha256},
            **({"requires-python": w.requires_python} if w.requires_python else {}),
        }
        for w in wheels
    ]
    page = {"meta": _PEP691_META, "name": project, "files": files}
    return (json.dumps(page, indent=2, sort_keys=True) + "\n").encode()


def root_pages(projects: Sequence[str]) -> dict[str, bytes]:
    """``index.html`` and ``index.json`` of ``simple/``: the project list."""
    links = [f'<a href="{html.escape(p)}/">{html.escape(p)}</a><br>' for p in projects]
    page = ["<!DOCTYPE html>", "<html>", "<head>", "<title>Simple index</title>", "</head>",
            "<body>", *links, "</body>", "</html>", ""]  # fmt: skip
    listing = {"meta": _PEP691_META, "projects": [{"name": p} for p in projects]}
    return {
        "index.html": "\n".join(page).encode(),
        "index.json": (json.dumps(listing, indent=2, sort_keys=True) + "\n").encode(),
    }


def _pin(project: str, version: Version) -> Requirement:
    """``project==version`` as a packaging requirement."""
    req = Requirement(project)
    req.specifier = SpecifierSet(f"=={version}")
    return req


def requirements_txt(wheels: list[Wheel]) -> bytes:
    """A requirements file that pins each project to its one version, with
    the sha256 of every wheel of it (one per platform), for
    ``--require-hashes``."""
    lines = [
        "# Our wheels, pinned by hash, for",
        "#   pip install --require-hashes --no-deps -r requirements.txt",
        "# over an environment that already holds upstream's dependencies (see",
        "# docs/fleet.md, 'Deploying to a fleet'). Written by `nox -s publish`; do not edit.",
    ]
    projects = sorted({w.project for w in wheels})
    for project in projects:
        mine = [w for w in wheels if w.project == project]
        lines.append(f"{_pin(project, mine[0].version)} \\")
        hashes = [f"    --hash=sha256:{w.sha256}" for w in mine]
        lines += [h + " \\" for h in hashes[:-1]] + hashes[-1:]
    return ("\n".join(lines) + "\n").encode()


def ci_pins(lock_text: str) -> dict[NormalizedName, Version]:
    """The exact versions of a compiled requirements file (``name==version``
    lines, as ``uv pip compile`` or ``pip-compile`` write them), by project.
    Local labels (``+cu129``) are dropped: they name the index, not the
    release. Comments, options and indented lines (``# via``, ``--hash``) are
    skipped.

    Raises:
        PublishError: a requirement line does not parse.
    """
    pins: dict[NormalizedName, Version] = {}
    for n, raw in enumerate(lock_text.splitlines(), 1):
        if not raw.strip() or raw[0] in " \t#-":
            continue
        text = raw.split(" #", 1)[0].rstrip(" \\")
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise PublishError(f"{CI_LOCK} line {n}: {raw!r} is no requirement ({exc})") from exc
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
            pins[canonicalize_name(req.name)] = Version(Version(specs[0].version).public)
    return pins


def _mentions_extra(markers: object) -> bool:
    """Whether a parsed marker tree (``Marker._markers``) tests ``extra``."""
    if isinstance(markers, list):
        return any(_mentions_extra(m) for m in markers)
    if isinstance(markers, tuple):
        return any(getattr(m, "value", None) == "extra" for m in markers)
    return False


@dataclass(frozen=True)
class Constraint:
    """One line of constraints.txt and where its version comes from."""

    requirement: Requirement
    source: str  # "upstream" (upstream's own ==), "ci" (CI lock), "range"


def constraints(
    requires_dist: tuple[str, ...], pins: dict[NormalizedName, Version]
) -> list[Constraint]:
    """Upstream's runtime requirements as constraints: extras-only lines
    left out, extras dropped (pip refuses them in a constraints file),
    markers kept; a range becomes the CI lock's ``==`` where that version is
    inside it.

    Raises:
        PublishError: a Requires-Dist line does not parse.
    """
    out = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise PublishError(f"METADATA Requires-Dist {line!r} does not parse ({exc})") from exc
        if req.marker is not None and _mentions_extra(getattr(req.marker, "_markers", [])):
            continue
        req.extras = set()
        specs = list(req.specifier)
        pinned = pins.get(canonicalize_name(req.name))
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            out.append(Constraint(req, "upstream"))
        elif pinned is not None and req.specifier.contains(pinned, prereleases=True):
            req.specifier = SpecifierSet(f"=={pinned}")
            out.append(Constraint(req, "ci"))
        else:
            out.append(Constraint(req, "range"))
    return out


_SECTIONS = {
    "upstream": "exact: pinned with == by upstream itself",
    "ci": "exact: the version vLLM's CI lock ({lock}) resolved, inside upstream's range",
    "range": "not exact: upstream's range (no CI pin, or the CI pin falls outside it)",
}


def constraints_txt(items: list[Constraint], pin: lock.Lock, lock_found: bool) -> bytes:
    """constraints.txt: a header naming the sources, then the lines grouped
    by where their version comes from."""
    source = f"{pin.sdist.filename} (sha256 {pin.sdist.sha256})"
    lines = [
        f"# Upstream {pin.name} {pin.version}'s runtime requirements (Requires-Dist of the",
        "# release wheel, which ours carries unchanged), for `pip install -c constraints.txt`.",
        f"# CI lock: {CI_LOCK} in {source}"
        + ("" if lock_found else ": not in this sdist, so no CI pins"),
        "# Written by `nox -s publish`; do not edit.",
    ]
    for key, title in _SECTIONS.items():
        group = [c for c in items if c.source == key]
        if group:
            lines += ["", f"# {title.format(lock=CI_LOCK)} ({len(group)})"]
            lines += [str(c.requirement) for c in group]
    return ("\n".join(lines) + "\n").encode()


def sdist_member(pin: lock.Lock, relpath: str) -> bytes | None:
    """The file ``relpath`` of the pinned sdist (fetched into, or read from,
    the hash-checked cache); None if the sdist has no such file."""
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    with tarfile.open(sdist) as tar:
        for member in tar:
            if member.isfile() and member.name.split("/", 1)[-1] == relpath:
                data = tar.extractfile(member)
                return data.read() if data is not None else None
    return None


def index_files(wheels: list[Wheel]) -> dict[str, bytes]:
    """Every file of ``simple/`` by its path relative to dist/."""
    projects = sorted({w.project for w in wheels})
    files = {f"{SIMPLE}/{name}": data for name, data in root_pages(projects).items()}
    for project in projects:
        mine = [w for w in wheels if w.project == project]
        files[f"{SIMPLE}/{project}/index.html"] = project_page_html(project, mine)
        files[f"{SIMPLE}/{project}/index.json"] = project_page_json(project, mine)
    return files


def _requires_dist(wheels: list[Wheel], project: str, dist: Path) -> tuple[str, ...]:
    """The one Requires-Dist list the wheels of ``project`` share."""
    mine = [w for w in wheels if w.project == canonicalize_name(project)]
    if not mine:
        raise PublishError(f"{dist} holds no {project} wheel: run `nox -s build_wheel` first")
    if len({w.requires_dist for w in mine}) != 1:
        raise PublishError(
            f"{dist}: the {project} wheels declare different Requires-Dist; they come from "
            "different builds, rebuild with `nox -s build_wheel --force`"
        )
    return mine[0].requires_dist


def _vex(root: Path, wheels: list[Wheel], project: str) -> dict[str, bytes]:
    """The VEX document for the wheels of ``project`` (one version), by its name.
    Imported here: only publish needs cyclonedx-python-lib (pyproject's ``vex`` extra)."""
    from vpq.wheels import advisories, vex

    versions = sorted({str(w.version) for w in wheels if w.project == canonicalize_name(project)})
    entries = advisories.load(root)
    return {vex.VEX_FILE: vex.document(entries, project, versions[0]).encode()}


def publish(root: Path, dist: Path | None = None) -> Published:
    """Write the package index, requirements.txt, constraints.txt and the VEX document into
    ``dist`` (default ``root/dist``), each file atomically.

    Raises:
        PublishError: dist/ holds no publishable wheels; LockError, FetchError:
            the pin or its sdist cannot be had.
    """
    dist = dist or Workspace(root).dist
    wheels = wheels_in(dist)
    pin = lock.load(root)
    requires = _requires_dist(wheels, pin.name, dist)
    ci_lock = sdist_member(pin, CI_LOCK)
    items = constraints(requires, ci_pins(ci_lock.decode()) if ci_lock else {})
    files = index_files(wheels)
    files[REQUIREMENTS] = requirements_txt(wheels)
    files[CONSTRAINTS] = constraints_txt(items, pin, ci_lock is not None)
    files.update(_vex(root, wheels, pin.name))
    written = []
    for rel, data in files.items():
        write_atomic(dist / rel, data, mode=0o644)  # a web server may serve it
        written.append(dist / rel)
    exact = sum(c.source != "range" for c in items)
    return Published(dist, wheels, written, exact=exact, ranges=len(items) - exact)
