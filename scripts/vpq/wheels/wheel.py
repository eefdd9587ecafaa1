"""The overlay build: upstream release wheel + the series' changed files.

The upstream release wheel supplies everything compiled, all package data
and the dependency metadata. The Python files the series changes come from
the patched tree. Members the series does not change are copied as their
compressed bytes (never inflated and deflated again), so a build costs
about one copy of the wheel. New members are written uncompressed
(``ZIP_STORED``), so the output does not depend on the local zlib and the
same inputs give the same bytes on any machine.

Tags are exactly the upstream wheel's; the version gets a PEP 440 local
label naming the series (``0.17.1+eagle3.1a2b3c4d``), also in
``vllm/_version.py``; the dist-info carries ``MANIFEST_NAME``, a JSON
manifest (upstream pin, hashes, each patch).

This module knows nothing about git.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import struct
import tempfile
import zipfile
from dataclasses import dataclass
from email.generator import BytesGenerator
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path
from typing import BinaryIO

from packaging.tags import parse_tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from vpq.core.errors import VpqError
from vpq.core.files import CHUNK, VERSION_FILE, record_hash, sha256_file

MANIFEST_NAME = "vpq_manifest.json"

#: Paths whose change the precompiled binaries or metadata depend on; the
#: overlay build refuses a series that touches them (use vLLM's own build).
BINARY_INPUTS = ("csrc/", "cmake/", "requirements/", "CMakeLists.txt", "setup.py", "pyproject.toml")

#: The PEP 427 build tag of every wheel this builder writes (file name and
#: ``Build:`` in ``WHEEL``). Bump it whenever the builder's output bytes
#: change for the same pin and series, so a changed wheel never reuses a file
#: name an earlier build used: serving hosts and lock files hold hashes.
#: ``tests/unit/test_wheel.py`` holds the builder's output hash per tag.
#: History: none (until 2026-11), the ``Tag:`` lines fell outside the
#: ``WHEEL`` header block; ``1``, ``WHEEL`` written by ``email``'s generator.
BUILD_TAG = "1"

_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip time for members with no upstream counterpart
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_LOCAL_SIG = b"PK\x03\x04"


class WheelError(VpqError):
    """The wheel cannot be built from these inputs."""


@dataclass(frozen=True)
class BuiltWheel:
    """A wheel the build wrote: its path, sha256 and version."""

    path: Path
    sha256: str
    version: str


def touches_binary_inputs(paths: list[str]) -> list[str]:
    """The paths among ``paths`` that the precompiled build depends on."""
    return sorted(
        p
        for p in paths
        if any(p == b or (b.endswith("/") and p.startswith(b)) for b in BINARY_INPUTS)
    )


def local_version(upstream_version: str, label: str) -> str:
    """``<upstream>+<label>``, validated as PEP 440.

    Raises:
        WheelError: the result is not a valid version, or upstream already
            carries a local label.
    """
    up = Version(upstream_version)
    if up.local:
        raise WheelError(f"upstream version {upstream_version} already has a local label")
    v = Version(f"{upstream_version}+{label}")
    return str(v)


def _dist_info(names: list[str]) -> str:
    dirs = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(dirs) != 1:
        raise WheelError(f"expected one .dist-info directory, found {sorted(dirs)}")
    return dirs.pop()


def rewrite_version_py(text: str, version: str) -> str:
    """Upstream's setuptools-scm ``_version.py`` with ``version`` (and its
    tuple, the local label as the last element) in place of upstream's."""
    v = Version(version)
    tup = ", ".join([*(str(x) for x in v.release), repr(v.local)])
    out, n1 = re.subn(
        r"^__version__ = version = .*$",
        f"__version__ = version = {version!r}",
        text,
        flags=re.MULTILINE,
    )
    out, n2 = re.subn(
        r"^__version_tuple__ = version_tuple = .*$",
        f"__version_tuple__ = version_tuple = ({tup})",
        out,
        flags=re.MULTILINE,
    )
    if n1 != 1 or n2 != 1:
        raise WheelError("vllm/_version.py in the upstream wheel has an unexpected layout")
    return out


def _rewrite_metadata(text: str, version: str) -> str:
    out, n = re.subn(r"^Version: .*$", f"Version: {version}", text, count=1, flags=re.MULTILINE)
    if n != 1:
        raise WheelError("dist-info METADATA has no Version: field")
    return out


def rewrite_wheel_file(data: bytes, tags: list[str], build_tag: str | None) -> bytes:
    """``WHEEL`` (PEP 427) with ``tags`` and ``build_tag`` in place of the
    original's ``Tag:`` and ``Build:`` headers; the other headers keep their
    order. Written as a header block with ``email``'s generator, the way the
    ``wheel`` tool's ``bdist_wheel`` writes it (``Build:`` before ``Tag:``).
    """
    msg = BytesHeaderParser(policy=compat32).parsebytes(data)
    del msg["Tag"]
    del msg["Build"]
    if build_tag:
        msg["Build"] = build_tag
    for tag in tags:
        msg["Tag"] = tag
    buf = io.BytesIO()
    BytesGenerator(buf, maxheaderlen=0).flatten(msg)
    return buf.getvalue()


def record_rows(zf: zipfile.ZipFile, dist_info: str) -> dict[str, list[str]]:
    """The rows of ``dist_info``'s RECORD (PEP 376) in ``zf``, by member name."""
    reader = csv.reader(io.StringIO(zf.read(f"{dist_info}/RECORD").decode()))
    return {row[0]: row for row in reader if row}


def read_wheel_file(data: bytes) -> tuple[list[str], str | None]:
    """The ``Tag:`` values and the ``Build:`` value of a ``WHEEL`` file, read
    with the email header parser (what ``wheel pack`` and installers use)."""
    msg = BytesHeaderParser(policy=compat32).parsebytes(data)
    return [str(t) for t in msg.get_all("Tag", [])], msg.get("Build")


def _append_raw(zout: zipfile.ZipFile, fin: BinaryIO, info: zipfile.ZipInfo) -> bool:
    """Append member ``info`` of the zip open as ``fin`` to ``zout`` as its
    local header and compressed bytes, without inflating them.

    ``zipfile`` has no public API for this, so this one adapter writes the
    bytes at ``zout``'s current position and then records the member the
    way ``ZipFile.writestr`` does (``filelist``, ``NameToInfo``,
    ``start_dir``), so the central directory ``zout`` writes on close lists
    it. Streams in ``CHUNK`` pieces, so memory stays flat for large members.
    Returns False (copying nothing) for a member with a data descriptor.

    Raises:
        WheelError: the local header is corrupt or the member truncated.
    """
    if info.flag_bits & 0x08:  # data descriptor follows: rare, not worth it
        return False
    fout: BinaryIO = zout.fp  # type: ignore[assignment]
    fin.seek(info.header_offset)
    header = fin.read(_LOCAL_HEADER.size)
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != _LOCAL_SIG:
        raise WheelError(f"corrupt local header for {info.filename}")
    copied = copy.copy(info)
    copied.header_offset = fout.tell()
    fout.write(header)
    remaining = fields[9] + fields[10] + info.compress_size  # name, extra, data
    while remaining:
        chunk = fin.read(min(remaining, CHUNK))
        if not chunk:
            raise WheelError(f"truncated member {info.filename}")
        fout.write(chunk)
        remaining -= len(chunk)
    zout.filelist.append(copied)
    zout.NameToInfo[copied.filename] = copied
    zout.start_dir = fout.tell()
    return True


@dataclass(frozen=True)
class _Plan:
    """What the output wheel holds, worked out before anything is written."""

    out_name: str
    version: str
    old_di: str  # upstream's dist-info directory
    new_di: str
    infos: list[zipfile.ZipInfo]  # upstream's members, in order
    deleted: frozenset[str]
    replaced: dict[str, bytes]  # member -> new content; members not in infos are added
    dist_info: dict[str, bytes]  # dist-info file (relative name) -> rewritten content
    old_record: dict[str, list[str]]


def _plan(
    zin: zipfile.ZipFile,
    wheel_name: str,
    overlay: dict[str, bytes | None],
    label: str,
    manifest: dict[str, object],
) -> _Plan:
    """The output wheel for ``overlay`` on the upstream wheel open as ``zin``.

    Raises:
        WheelError: see ``build``.
    """
    name, up_version, _build, _tags = parse_wheel_filename(wheel_name)
    version = local_version(str(up_version), label)
    tags = tag_part(wheel_name)
    dist = str(name).replace("-", "_")
    infos = zin.infolist()
    names = [i.filename for i in infos]
    old_di = _dist_info(names)
    missing = sorted(p for p, c in overlay.items() if c is None and p not in names)
    if missing:
        raise WheelError(f"{wheel_name}: cannot delete {missing}: not in the wheel")
    replaced = {p: c for p, c in overlay.items() if c is not None}
    replaced[VERSION_FILE] = rewrite_version_py(zin.read(VERSION_FILE).decode(), version).encode()
    dist_info = {
        "METADATA": _rewrite_metadata(zin.read(f"{old_di}/METADATA").decode(), version).encode(),
        "WHEEL": rewrite_wheel_file(zin.read(f"{old_di}/WHEEL"), expand_tag_part(tags), BUILD_TAG),
        MANIFEST_NAME: (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
    }
    return _Plan(
        out_name=f"{dist}-{version}-{BUILD_TAG}-{tags}.whl",
        version=version,
        old_di=old_di,
        new_di=f"{dist}-{version}.dist-info",
        infos=infos,
        deleted=frozenset(p for p, c in overlay.items() if c is None),
        replaced=replaced,
        dist_info=dist_info,
        old_record=record_rows(zin, old_di),
    )


class _Writer:
    """Writes members into the output zip and keeps their RECORD rows."""

    def __init__(self, zout: zipfile.ZipFile) -> None:
        self.zout = zout
        self.rows: list[list[str]] = []

    def put(self, arcname: str, data: bytes, like: zipfile.ZipInfo | None) -> None:
        """Store ``data`` uncompressed, with ``like``'s time and mode (or fixed ones)."""
        zi = zipfile.ZipInfo(arcname, date_time=like.date_time if like else _EPOCH)
        zi.external_attr = like.external_attr if like else 0o644 << 16
        zi.create_system = 3
        zi.compress_type = zipfile.ZIP_STORED
        self.zout.writestr(zi, data)
        if not arcname.endswith(".dist-info/RECORD"):
            self.rows.append([arcname, record_hash(data), str(len(data))])

    def record(self, arcname: str, date_time: tuple[int, int, int, int, int, int]) -> None:
        """Write RECORD (PEP 376) listing every member written so far, and itself."""
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*self.rows, [arcname, "", ""]])
        like = zipfile.ZipInfo(arcname, date_time=date_time)
        like.external_attr = 0o644 << 16
        self.put(arcname, buf.getvalue().encode(), like)


def _dist_info_member(w: _Writer, plan: _Plan, zin: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    """Write upstream's dist-info file ``info`` under the new dist-info name,
    rewritten where the plan says; RECORD is skipped (written last)."""
    rel = info.filename[len(plan.old_di) + 1 :]
    if rel != "RECORD":
        w.put(f"{plan.new_di}/{rel}", plan.dist_info.get(rel) or zin.read(info), info)


def _write_members(w: _Writer, plan: _Plan, zin: zipfile.ZipFile, fin: BinaryIO) -> None:
    """Upstream's members in upstream's order, with the overlay applied (the
    untouched ones as their compressed bytes, the dist-info renamed), then
    the added members in sorted order.

    Raises:
        WheelError: an untouched member has no hash in upstream's RECORD.
    """
    for info in plan.infos:
        n = info.filename
        if n.startswith(plan.old_di + "/"):
            _dist_info_member(w, plan, zin, info)
        elif n in plan.deleted:
            continue
        elif n in plan.replaced:
            w.put(n, plan.replaced[n], info)
        elif not _append_raw(w.zout, fin, info):
            w.put(n, zin.read(info), info)
        else:
            row = plan.old_record.get(n)
            if row is None or not row[1]:
                raise WheelError(f"{n} has no hash in the upstream wheel's RECORD")
            w.rows.append(row[:3])
    upstream = {i.filename for i in plan.infos}
    for n in sorted(set(plan.replaced) - upstream):
        w.put(n, plan.replaced[n], None)


def build(
    upstream_wheel: Path,
    overlay: dict[str, bytes | None],
    label: str,
    manifest: dict[str, object],
    out_dir: Path,
) -> BuiltWheel:
    """Build one wheel from ``upstream_wheel`` with ``overlay`` applied.

    Args:
        upstream_wheel: the pinned, hash-checked release wheel.
        overlay: wheel member path -> new content, or None to delete it.
        label: the PEP 440 local label, e.g. ``eagle3.1a2b3c4d``.
        manifest: JSON-able data stored as ``<dist-info>/vpq_manifest.json``.
        out_dir: where the wheel goes; written under a temporary name, then
            renamed, so a failed build leaves ``out_dir`` as it was.

    Raises:
        WheelError: the upstream wheel is unusable or an overlay path that
            should be deleted is missing from it.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(upstream_wheel) as zin:
        plan = _plan(zin, upstream_wheel.name, overlay, label, manifest)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{plan.out_name}.", suffix=".tmp", dir=out_dir)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            with open(upstream_wheel, "rb") as fin, zipfile.ZipFile(tmp, "w") as zout:
                w = _Writer(zout)
                _write_members(w, plan, zin, fin)
                record_info = zin.getinfo(f"{plan.old_di}/RECORD")
                w.put(f"{plan.new_di}/{MANIFEST_NAME}", plan.dist_info[MANIFEST_NAME], record_info)
                w.record(f"{plan.new_di}/RECORD", record_info.date_time)
            tmp.chmod(0o644)
            digest = sha256_file(tmp)
            final = out_dir / plan.out_name
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return BuiltWheel(path=final, sha256=digest, version=plan.version)


def tag_part(filename: str) -> str:
    """The compressed tag set of a wheel file name, e.g.
    ``cp38-abi3-manylinux_2_31_x86_64`` (PEP 425), from the tags
    ``packaging`` parses out of the name (build tag dropped); each field's
    values are sorted."""
    tags = parse_wheel_filename(filename)[3]
    fields = ("interpreter", "abi", "platform")
    return "-".join(".".join(sorted({getattr(t, f) for t in tags})) for f in fields)


def expand_tag_part(part: str) -> list[str]:
    """Every tag of a (possibly compressed) tag set such as
    ``cp38-abi3-manylinux_2_31_x86_64``, sorted (``packaging.tags.parse_tag``)."""
    return sorted(str(t) for t in parse_tag(part))
