"""The second backend: vLLM's own build (``--backend setuptools``).

Builds the patched tree with ``python -m build --wheel``, as vLLM documents
for Python-only changes: ``VLLM_USE_PRECOMPILED=1`` with
``VLLM_PRECOMPILED_WHEEL_LOCATION`` pointing at the pinned, hash-checked
release wheel, so the compiled extensions come from upstream's release. The
version goes through setuptools-scm (``VLLM_VERSION_OVERRIDE``, which vLLM's
``setup.py`` turns into ``SETUPTOOLS_SCM_PRETEND_VERSION``) as our
``<upstream>+<label>``. The wheel it makes is tagged for the build
interpreter (``cp311-cp311-linux_x86_64``); the ``wheel`` tool then adds our
manifest and upstream's ``_version.py`` with our version (``wheel unpack`` /
``wheel pack``, which rewrites RECORD) and retags it to upstream's tags
(``wheel tags``), so one file installs on
CPython 3.10-3.13 like the release.

With ``precompiled=False`` (``--no-precompiled``) it is a full compile of
``csrc/``: only on a CUDA build host, for a series that touches compiled
code; not exercised here.

This backend needs a CUDA torch 2.10 in the isolated build environment
(vLLM's ``pyproject.toml`` build requirements), several GB on first use.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from vpq.core import proc
from vpq.core.errors import VpqError
from vpq.core.files import VERSION_FILE, sha256_file
from vpq.wheels import wheel


class NativeBuildError(VpqError):
    """vLLM's own build failed."""


#: The Python packages this backend runs (pyproject.toml's ``native`` extra).
TOOLS = ("build", "wheel")


def require_tools() -> None:
    """Refuse before any work where pypa's ``build`` or ``wheel`` is missing.

    Raises:
        NativeBuildError: naming the missing packages and how to get them.
    """
    missing = [t for t in TOOLS if importlib.util.find_spec(t) is None]
    if missing:
        raise NativeBuildError(
            "--backend setuptools runs the Python packages build and wheel, and "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed "
            "here: run it as `nox -s build_wheel -- --backend setuptools`, which installs "
            "them (pyproject.toml's `native` extra)"
        )


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc.run(cmd, NativeBuildError, cwd=cwd, env=env)


def _one(folder: Path, pattern: str, step: str) -> Path:
    """The one entry of ``folder`` matching ``pattern``, as ``step`` left it.

    Raises:
        NativeBuildError: none or several match.
    """
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "nothing"
        raise NativeBuildError(f"{step} left {names} in {folder}; expected one {pattern}")
    return found[0]


def build(
    tree_dir: Path,
    upstream_wheel: Path,
    label: str,
    manifest: dict[str, object],
    out_dir: Path,
    *,
    precompiled: bool = True,
) -> wheel.BuiltWheel:
    """Build the patched tree at ``tree_dir`` with vLLM's own build.

    Args:
        tree_dir: a plain copy of the patched tree (it is built in place).
        upstream_wheel: the pinned release wheel: the precompiled binaries
            and the tags to give the result.
        label: the local version label.
        manifest: stored as ``<dist-info>/vpq_manifest.json``.
        out_dir: receives the wheel (temporary name, then rename).

    Raises:
        NativeBuildError: the build or the ``wheel`` tool failed.
    """
    up_version = upstream_wheel.name.split("-")[1]
    version = wheel.local_version(up_version, label)
    env = {"VLLM_VERSION_OVERRIDE": version}
    if precompiled:
        env |= {"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_LOCATION": str(upstream_wheel)}
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".native-") as tmp:
        raw_dir = Path(tmp) / "raw"
        _run(
            [sys.executable, "-m", "build", "--wheel", "--outdir", str(raw_dir), str(tree_dir)],
            tree_dir,
            env,
        )
        raw = _one(raw_dir, "*.whl", "python -m build")
        return finish(raw, upstream_wheel, version, manifest, out_dir)


def _wheel_tool(t: Path, *args: str) -> None:
    """``python -m wheel ARGS`` in ``t``."""
    _run([sys.executable, "-m", "wheel", *args], t)


def _add_our_files(
    unpacked: Path, upstream_wheel: Path, version: str, manifest: dict[str, object]
) -> None:
    """The manifest, and upstream's ``_version.py`` with ``version``: setuptools-scm
    writes its own (its template, commit_id None), so both backends report
    the same version and the pinned upstream commit."""
    dist_info = _one(unpacked, "*.dist-info", "wheel unpack")
    (dist_info / wheel.MANIFEST_NAME).write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    )
    with zipfile.ZipFile(upstream_wheel) as up:
        (unpacked / VERSION_FILE).write_text(
            wheel.rewrite_version_py(up.read(VERSION_FILE).decode(), version)
        )


def finish(
    raw: Path, upstream_wheel: Path, version: str, manifest: dict[str, object], out_dir: Path
) -> wheel.BuiltWheel:
    """Turn the wheel ``python -m build`` made into ours, with the ``wheel``
    tool: add the manifest and upstream's ``_version.py`` (with ``version``),
    repack with our build tag (RECORD rewritten), retag to the upstream
    wheel's tags.

    Raises:
        NativeBuildError: a ``wheel`` command failed.
    """
    py_tag, abi_tag, plat_tag = wheel.tag_part(upstream_wheel.name).split("-")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".finish-") as tmp:
        t = Path(tmp)
        _wheel_tool(t, "unpack", "--dest", str(t / "unpacked"), str(raw))
        unpacked = _one(t / "unpacked", "*", "wheel unpack")
        _add_our_files(unpacked, upstream_wheel, version, manifest)
        (t / "packed").mkdir()
        _wheel_tool(
            t,
            "pack",
            "--build-number",
            wheel.BUILD_TAG,
            "--dest-dir",
            str(t / "packed"),
            str(unpacked),
        )
        packed = _one(t / "packed", "*.whl", "wheel pack")
        _wheel_tool(
            t, "tags", "--remove", "--python-tag", py_tag, "--abi-tag", abi_tag,
            "--platform-tag", plat_tag, str(packed),
        )  # fmt: skip
        tagged = _one(t / "packed", "*.whl", "wheel tags")
        final = out_dir / tagged.name
        shutil.move(str(tagged), final)
    return wheel.BuiltWheel(path=final, sha256=sha256_file(final), version=version)
