#!/usr/bin/env python3
"""Check a patched vLLM install, and a target + EAGLE-3 drafter pair, on a serving host.

Standard library only: copy this one file to the host. Two modes::

    python verify_install.py
    python verify_install.py --model TARGET_DIR --drafter HEAD_DIR [--json] [--strict] [--no-vllm]

Without ``--model``/``--drafter`` it prints the installed vLLM version and the
patch manifest (upstream pin, each patch), then checks that the version's
local label matches the manifest and that ``supports_eagle3`` holds for every
architecture the manifest claims, imported from the module the manifest names
for it (``eagle3_claims``; a wheel built before it recorded them is checked
against this file's own copy, ``FALLBACK_CLAIMS``, with a note). Exits 0
when all holds, else 1 with a one-line reason on stderr.

With both, it runs the **preflight**: offline, no GPU, in seconds. Each of
``--model`` and ``--drafter`` is a directory or a Hugging Face Hub id found
in the local cache (``resolve_model_arg``). It reads the two ``config.json``
files and both checkpoints' safetensors headers (the JSON header only;
``model.safetensors.index.json`` when sharded; no tensor is loaded; each
tensor's data range is checked against its file's size), applies the rules
below, then asks the installed vLLM (its model registry,
``SpeculativeConfig``, the model runner's layer-id reader, the target
model's id check) what it will do with the pair. When vLLM does not import
that is an error: only the file rules ran (``--no-vllm`` runs them alone on
purpose, and the summary says so). Each finding
has a severity (``error``, ``warning``, ``note``, ``info``), a rule id, and
the file and key or tensor it comes from. Exit codes: 0 no errors (warnings
allowed), 1 an error (with ``--strict`` warnings count as errors), 2 usage.

The rules (``check_pair``) need no vLLM. Every way in (this script,
the repository's ``PYTHONPATH=scripts python -m vpq preflight`` and the
tool's CLI) goes through ``preflight_entry``: one usage check, one guard
(an unexpected exception is one line, exit 1), the same output.

How the preflight reads, top to bottom:

1. **The pair** (``Pair``, built once by ``load_pair``, frozen): both
   configs, the drafter's tensor headers, N, the hidden size and the
   declared layer ids, exactly as the files say; a head in the
   ``speculators`` format is read in vLLM's layout (``drafter_view``: its
   ``transformer_layer_config`` with its EAGLE-3 fields over it, read
   once by ``read_speculators``), the file as written kept beside it
   (``Pair.drafter_raw``). What the rules derive from it (the drafter's
   architecture, the checked layer ids, the EAGLE 3.1 flags) are cached
   properties of the pair, worked out once.
2. **The file rules**, one function per family, each taking the pair and
   returning findings (``target_rules``, ``drafter_rules``,
   ``layer_ids_source_rules``, ``layer_ids_value_rules``,
   ``target_hidden_size_rule``, ``fc_rules``, ``draft_vocab_rules``,
   ``embeddings_rule``; ``speculators_rules`` within ``drafter_rules``);
   ``check_pair`` runs them in report order.
3. **The questions to the installed vLLM**, one function each
   (``ask_installed``, ``ask_registry``, ``ask_target_class``,
   ``ask_mtp_override``, ``ask_speculative_config``, ``ask_drafter_class``,
   ``ask_registered``, ``ask_module_source``, ``ask_runner_ids``,
   ``ask_ids_refusal``, ``ask_drafter_flags``), each returning a typed
   answer, or ``Unanswered`` when the API it needs is missing (a private
   function renamed): a
   ``note``, never a false error. ``ask_vllm`` asks them all.
4. **The answers as findings** (``wheel_findings``), and
   ``preflight_report``, which combines the two: the wheel's
   ``hf_config_override`` answer sets the ``mtp-trap`` rule's severity
   once, nothing is rewritten afterwards. Its ``Report`` carries the
   findings and whether vLLM was asked (``vllm_asked``), which the verdict
   reads; ``render`` and ``to_json`` print it, ``preflight_entry`` is the
   one way in.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata as md
import json
import os
import re
import struct
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MANIFEST = "vpq_manifest.json"
#: This file's own copy of the claimed target architectures, as the manifest
#: records them (``eagle3_claims``: each one's ``model_type``,
#: ``text_model_type`` and the vLLM module that defines it). Used only where
#: the installed vLLM's manifest carries none (a wheel built before it
#: recorded them, or no patch-queue vLLM here), and then with a note. The
#: repository's one table is ``vpq.contract.items.CLAIMS``;
#: tests/unit/test_verify_install.py holds this copy equal to it.
FALLBACK_CLAIMS: dict[str, dict[str, str]] = {
    "KimiK25ForConditionalGeneration": {
        "model_type": "kimi_k25",
        "text_model_type": "deepseek_v3",
        "module": "vllm.model_executor.models.kimi_k25",
    },
    "DeepseekV3ForCausalLM": {
        "model_type": "deepseek_v3",
        "text_model_type": "deepseek_v3",
        "module": "vllm.model_executor.models.deepseek_v2",
    },
    "DeepseekV2ForCausalLM": {
        "model_type": "deepseek_v2",
        "text_model_type": "deepseek_v2",
        "module": "vllm.model_executor.models.deepseek_v2",
    },
}


class Failed(Exception):
    """The install check failed; the message is the one-line reason."""


@dataclass(frozen=True)
class Claims:
    """The claimed target architectures (architecture -> ``model_type``,
    ``text_model_type``, ``module``) and, where they are this file's
    ``FALLBACK_CLAIMS`` rather than the installed wheel's manifest's, the
    ``note`` that says so."""

    table: Mapping[str, Mapping[str, str]]
    note: str = ""

    @property
    def modules(self) -> dict[str, str]:
        """Architecture -> the vLLM module that defines it."""
        return {arch: str(c["module"]) for arch, c in self.table.items()}

    @property
    def text_archs(self) -> dict[str, str]:
        """A text model_type -> the claimed architecture that is that text
        model itself (for a ``text_config`` that names no architectures)."""
        return {
            str(c["text_model_type"]): arch
            for arch, c in self.table.items()
            if c.get("model_type") == c.get("text_model_type")
        }


def _claims_table(manifest: Mapping[str, Any]) -> dict[str, dict[str, str]] | None:
    """The manifest's ``eagle3_claims`` where each entry names its three
    fields as strings, else None."""
    table = manifest.get("eagle3_claims")
    fields = ("model_type", "text_model_type", "module")
    if not isinstance(table, dict) or not table:
        return None
    for claim in table.values():
        if not (isinstance(claim, dict) and all(isinstance(claim.get(f), str) for f in fields)):
            return None
    return {str(arch): {f: claim[f] for f in fields} for arch, claim in table.items()}


def claims_from(manifest: Mapping[str, Any] | None) -> Claims:
    """The claimed architectures a manifest carries (``eagle3_claims``), or,
    where it carries none, ``FALLBACK_CLAIMS`` with a note saying why."""
    table = _claims_table(manifest) if manifest is not None else None
    if table is not None:
        return Claims(table)
    why = (
        "no patch-queue vLLM is installed here"
        if manifest is None
        else f"the installed wheel's {MANIFEST} records no eagle3_claims (built before it did)"
    )
    return Claims(
        FALLBACK_CLAIMS,
        f"{why}: using this script's own copy of the claimed architectures "
        f"({', '.join(FALLBACK_CLAIMS)}); a newer wheel may claim others",
    )


def read_manifest() -> dict[str, Any] | None:
    """The installed vLLM's manifest, parsed (metadata only: vLLM is not
    imported); None where vLLM is not installed or carries none."""
    try:
        text = md.distribution("vllm").read_text(MANIFEST)
        manifest = json.loads(text) if text else None
    except (md.PackageNotFoundError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


@functools.cache
def installed_claims() -> Claims:
    """``claims_from`` the installed vLLM's manifest, read once."""
    return claims_from(read_manifest())


def _print_manifest(version: str, man: Mapping[str, Any]) -> None:
    """The installed version, its upstream pin and each patch."""
    up = man["upstream"]
    print(f"vllm {version}")
    print(f"  upstream: vllm {up['version']} ({up['tag']}, commit {up['commit']})")
    print(f"  upstream wheel: {up['wheel']['filename']} sha256 {up['wheel']['sha256']}")
    for p in man["patches"]:
        print(f"  patch: {p['name']}  sha256 {p['sha256'][:16]}  [{p.get('upstream_status')}]")


def check(vex: Vex | None = None, list_advisories: bool = False) -> None:
    """The install check: print the installed vLLM's version, patch
    manifest and advisory status (``advisory_line``; every advisory with
    ``list_advisories``), and raise ``Failed`` unless the version, its local
    label and ``vllm.__version__`` agree with the manifest and
    ``supports_eagle3`` holds for every architecture it claims (imported
    from the module the manifest names for it: ``claims_from``)."""
    try:
        dist = md.distribution("vllm")
    except md.PackageNotFoundError:
        raise Failed("vllm is not installed in this Python") from None
    text = dist.read_text(MANIFEST)
    if text is None:
        raise Failed(f"vllm {dist.version} has no {MANIFEST}: this is not a patch-queue build")
    man = json.loads(text)
    _print_manifest(dist.version, man)
    print(f"  {advisory_line(dist.version, man, vex)}")
    if list_advisories:
        print_advisories(man, vex)
    if dist.version != man["version"]:
        raise Failed(f"installed version {dist.version} != manifest version {man['version']}")
    if dist.version.partition("+")[2] != man["local_label"]:
        raise Failed(f"local label of {dist.version} != manifest label {man['local_label']}")
    import vllm

    if vllm.__version__ != dist.version:
        raise Failed(f"vllm.__version__ {vllm.__version__} != installed {dist.version}")
    from vllm.model_executor.models.interfaces import supports_eagle3

    claims = claims_from(man)
    if claims.note:
        print(f"  note: {claims.note}")
    for arch in man.get("eagle3_architectures", list(claims.table)):
        module = claims.modules.get(arch)
        if module is None:
            raise Failed(f"manifest claims {arch}, which this check does not know")
        cls = getattr(importlib.import_module(module), arch)
        if not supports_eagle3(cls):
            raise Failed(f"{arch} does not support EAGLE-3 in this install")
        print(f"  supports_eagle3({arch}) = True")


# --------------------------------------------------------------------------
# Advisories: the wheel's own fixes (manifest) and the VEX document
# --------------------------------------------------------------------------

#: The VEX document ``nox -s publish`` writes beside the wheels (CycloneDX
#: 1.6; vpq.wheels.vex); looked for beside this script unless ``--vex`` names it.
VEX_FILE = "vex.cdx.json"
#: CycloneDX analysis states as the one line counts them.
_STATE_WORDS = {"resolved": "fixed", "not_affected": "not affected", "exploitable": "open"}


@dataclass(frozen=True)
class Vex:
    """The advisories a VEX document lists for one wheel version."""

    path: Path
    version: str
    rows: tuple[tuple[str, str, str, str], ...]  # id, severity, state, detail


def fixed_by_patches(man: Mapping[str, Any]) -> list[str]:
    """The advisory ids the wheel's patches name in their ``Advisory:`` trailers."""
    return sorted({a for p in man.get("patches", []) for a in p.get("advisories", [])})


def read_vex(path: Path) -> Vex:
    """``path``'s CycloneDX VEX document.

    Raises:
        Failed: not a readable CycloneDX document with one subject version.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        version = str(doc["metadata"]["component"]["version"])
        rows = tuple(
            (
                str(v["id"]),
                str((v.get("ratings") or [{}])[0].get("severity", "unknown")),
                str(v["analysis"]["state"]),
                str(v["analysis"].get("detail", "")),
            )
            for v in doc.get("vulnerabilities", [])
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise Failed(f"{path}: not a CycloneDX VEX document vpq publish wrote ({exc})") from None
    return Vex(path, version, rows)


def find_vex(explicit: str | None) -> Vex | None:
    """The VEX document ``--vex`` names, else the one beside this script, if any."""
    path = Path(explicit) if explicit else Path(__file__).resolve().with_name(VEX_FILE)
    if explicit is None and not path.is_file():
        return None
    return read_vex(path)


def advisory_line(version: str, man: Mapping[str, Any], vex: Vex | None) -> str:
    """The installed wheel's advisory status in one line."""
    fixed = fixed_by_patches(man)
    own = f"this wheel's patches fix {len(fixed)}"
    if vex is None:
        return (
            f"advisories: {own}; the open ones are in {VEX_FILE} (nox -s publish writes it), "
            "not found beside verify_install.py: pass --vex PATH"
        )
    if vex.version != version:
        return f"advisories: {own}; {vex.path} is for vllm {vex.version}, not this install"
    counts = {w: sum(r[2] == s for r in vex.rows) for s, w in _STATE_WORDS.items()}
    told = ", ".join(f"{n} {w}" for w, n in counts.items())
    return f"advisories: {len(vex.rows)} covering this wheel ({told}); --advisories lists them"


def print_advisories(man: Mapping[str, Any], vex: Vex | None) -> None:
    """Every advisory: the VEX document's rows, else the patches' own fixes."""
    if vex is None:
        for gid in fixed_by_patches(man):
            print(f"  {gid}: fixed by this wheel's patches")
        return
    for gid, severity, state, detail in vex.rows:
        print(f"  {gid} [{severity}] {_STATE_WORDS.get(state, state)}: {detail}")


# --------------------------------------------------------------------------
# Preflight: findings
# --------------------------------------------------------------------------

ERROR, WARNING, NOTE, INFO = "error", "warning", "note", "info"
SEVERITIES = (ERROR, WARNING, NOTE, INFO)

LAYER_IDS_KEY = "eagle_aux_hidden_state_layer_ids"
#: Drafter ``model_type`` values that vLLM's ``SpeculativeConfig.hf_config_override``
#: (vllm/config/speculative.py, 0.17.1) rewrites to ``deepseek_mtp`` with
#: ``architectures = ["DeepSeekMTPModel"]``: an EAGLE-3 head typed so loads as MTP.
MTP_REWRITTEN_TYPES = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa")
#: Drafter ``model_type`` values of MLA (DeepSeek-style latent attention) heads.
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2")
#: EAGLE 3.1 config flags (``eagle31_findings`` checks the weights each needs):
#: ``fc_norm``: one RMSNorm per aux state before ``fc``, an ``nn.ModuleList``
#: whose weights are ``fc_norm.0.weight``, ``fc_norm.1.weight``, ... (vLLM
#: from 0.22.0, vllm PR #42764; the series backports it);
#: ``norm_before_fc``: one RMSNorm over the concatenated states, weight
#: ``input_norm.weight`` (Llama heads, vLLM from 0.18.0; top level or under
#: ``eagle_config``); ``norm_output``: the head's final ``norm`` applied to
#: what it hands to the next step (``norm.weight``).
EAGLE31_FLAGS = ("fc_norm", "norm_before_fc", "norm_output")
FC_NORM = re.compile(r"fc_norm\.(\d+)\.weight")
#: vLLM 0.17.1's ``Eagle3LlamaForCausalLM`` builds ``fc`` for exactly three
#: aux states (``target_hidden_size * 3``, vllm/model_executor/models/llama_eagle3.py).
UPSTREAM_FC_STATES = 3
#: The ``speculators`` checkpoint format (vllm-project/speculators): a
#: ``config.json`` with ``speculators_model_type`` and ``speculators_config``
#: (proposal methods, verifier), the decoder layer's own config under
#: ``transformer_layer_config`` (``model_type``, ``hidden_size``,
#: ``vocab_size``, ...) and the algorithm's fields at the top level. vLLM
#: reads it through ``vllm/transformers_utils/configs/speculators/``: the
#: layer config, then the algorithm's fields copied over it (``update_eagle3``).
SPECULATORS_TYPE_KEY = "speculators_model_type"
#: The ``eagle3`` fields of the format (speculators 0.9.0's
#: ``Eagle3SpeculatorConfig``) that change what the drafter computes, as the
#: series' converter copies them onto the layer config. 0.17.1's copies only
#: the first three and the ids; ``norm_before_fc`` (vllm PR #38111, 0.19.0)
#: and ``fc_norm`` / ``norm_output`` (vllm PR #46488, 0.25.0) it drops.
SPECULATORS_EAGLE3_FIELDS = (
    "draft_vocab_size",
    "target_hidden_size",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    LAYER_IDS_KEY,
)
#: The boolean ones among them: a wheel that does not carry one into the
#: drafter's config builds the drafter without it (``speculators-wheel``).
SPECULATORS_MATH_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
#: The decoder layer types the wheel builds an EAGLE-3 drafter for from the
#: format: 0.17.1 names every layer ``Eagle3LlamaForCausalLM``; upstream maps
#: ``qwen3`` to ``Eagle3Qwen3ForCausalLM`` from 0.24.0 (q/k norms), which
#: 0.17.1 does not have.
SPECULATORS_LAYER_TYPES = {"llama": "Eagle3LlamaForCausalLM"}


@dataclass
class Finding:
    """One preflight result.

    ``severity``: ``error`` (will fail or silently degrade), ``warning``
    (probably wrong), ``note`` (worth a look; never fails), ``info`` (a
    fact). ``rule``: a stable id (e.g. ``layer-id-range``). ``section``:
    ``target``, ``drafter``, ``layer-ids``, ``sizes``, ``input`` or ``vllm``.
    ``file`` and ``key``: where it comes from (a config key such as
    ``eagle_config.eagle_aux_hidden_state_layer_ids`` or a tensor name).
    """

    severity: str
    rule: str
    section: str
    message: str
    file: str = ""
    key: str = ""


class InputError(Exception):
    """A file the preflight reads is missing, unreadable or malformed.

    The message is one line naming the file.
    """


@dataclass
class Tensor:
    """One entry of a safetensors header: ``dtype``, ``shape`` (list of ints), and
    the shard file it lives in."""

    name: str
    dtype: str
    shape: list[int]
    file: str


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from ``path``; ``InputError`` naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


#: A safetensors header larger than this is treated as corrupt (the format's
#: reference implementation refuses headers over 100 MB).
MAX_HEADER_BYTES = 100_000_000


def _header_bytes(path: Path) -> tuple[int, int, bytes]:
    """A safetensors file's size, header length ``n`` and ``n`` header bytes.

    Raises ``InputError`` naming the file when it is missing, unreadable or
    shorter than the header it announces.
    """
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(8)
            if len(raw) < 8:
                raise InputError(
                    f"{path}: truncated safetensors header "
                    f"({size} bytes, the length prefix alone is 8)"
                )
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8 or n > MAX_HEADER_BYTES:
                raise InputError(
                    f"{path}: truncated safetensors header "
                    f"(says {n} bytes, the file has {size - 8} after the prefix)"
                )
            return size, n, f.read(n)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def check_data_offsets(path: Path, entries: dict[str, Any], size: int, n: int) -> None:
    """Every tensor's ``data_offsets`` ``[begin, end]`` lies inside the file.

    The data of a tensor sits at bytes ``8 + n + begin .. 8 + n + end`` of
    the file (``n``: the header length). A file cut short (an interrupted
    download) keeps its header and loses its tail, so its last tensors end
    past the end of the file. Raises ``InputError`` naming the file and the
    first tensor (in file order) whose data is missing.
    """
    past: list[tuple[int, str]] = []
    for name, info in entries.items():
        offs = info.get("data_offsets")
        if not (
            isinstance(offs, list)
            and len(offs) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
            and 0 <= offs[0] <= offs[1]
        ):
            raise InputError(f"{path}: safetensors header entry {name!r} has no valid data_offsets")
        if 8 + n + offs[1] > size:
            past.append((offs[0], name))
    if past:
        begin, name = min(past)
        end = 8 + n + entries[name]["data_offsets"][1]
        more = f" (and {len(past) - 1} more tensor(s) after it)" if len(past) > 1 else ""
        raise InputError(
            f"{path}: truncated: tensor {name!r}{more} needs bytes up to {end} but the file "
            f"has {size}; the header is intact and the data is cut short, as after an "
            "interrupted download: download this file again"
        )


def read_safetensors_header(path: Path) -> dict[str, Tensor]:
    """The tensors listed in a safetensors file's header, without loading any.

    The format (https://github.com/huggingface/safetensors): 8 bytes,
    little-endian unsigned length ``n``, then ``n`` bytes of JSON mapping each
    tensor name to ``{"dtype", "shape", "data_offsets"}`` (and an optional
    ``__metadata__``), then the data. Raises ``InputError`` naming the file
    when it is missing, shorter than its header, the header is not that
    JSON, or a tensor's data runs past the end of the file
    (``check_data_offsets``).
    """
    size, n, header = _header_bytes(path)
    try:
        obj = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{path}: safetensors header is not valid JSON") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: safetensors header is not a JSON object")
    entries: dict[str, Any] = {}
    out: dict[str, Tensor] = {}
    for name, info in obj.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        if not (isinstance(shape, list) and all(isinstance(d, int) for d in shape)):
            raise InputError(f"{path}: safetensors header entry {name!r} has no integer shape")
        entries[name] = info
        out[name] = Tensor(name, str(info.get("dtype")), shape, path.name)
    check_data_offsets(path, entries, size, n)
    return out


def read_checkpoint_tensors(model_dir: Path) -> dict[str, Tensor]:
    """Every tensor header of a checkpoint directory, by name.

    Uses ``model.safetensors.index.json`` (``weight_map``: tensor -> shard)
    when present, else every ``*.safetensors`` file. Empty when the
    directory has no safetensors file. ``InputError`` for a bad index, a
    shard the index names that is missing, a tensor the index places in a
    shard that does not hold it, or a bad or truncated file.
    """
    index = model_dir / "model.safetensors.index.json"
    if not index.exists():
        out: dict[str, Tensor] = {}
        for shard in sorted(p.name for p in model_dir.glob("*.safetensors")):
            out.update(read_safetensors_header(model_dir / shard))
        return out
    wm = read_json(index).get("weight_map")
    if not isinstance(wm, dict):
        raise InputError(f"{index}: no weight_map object")
    shards = sorted(set(map(str, wm.values())))
    missing = [s for s in shards if not (model_dir / s).is_file()]
    if missing:
        raise InputError(
            f"{model_dir / missing[0]}: no such file, but {index.name} names it"
            + (f" (and {len(missing) - 1} more missing shard(s))" if len(missing) > 1 else "")
            + ": the download is incomplete"
        )
    out = {}
    for shard in shards:
        out.update(read_safetensors_header(model_dir / shard))
    absent = sorted(
        name for name, shard in wm.items() if name not in out or out[name].file != Path(shard).name
    )
    if absent:
        raise InputError(
            f"{model_dir / str(wm[absent[0]])}: has no tensor {absent[0]!r}, "
            f"which {index.name} places there"
        )
    return out


def normalise(name: str) -> str:
    """Tensor names as vLLM's EAGLE-3 loaders see them: no leading ``model.``."""
    return name[len("model.") :] if name.startswith("model.") else name


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The text model's config: ``text_config`` for a multimodal wrapper
    (Kimi-K2.5 nests its DeepSeek-V3 config there), else the config itself."""
    tc = cfg.get("text_config")
    return tc if isinstance(tc, dict) else cfg


def declared_layer_ids(cfg: dict[str, Any]) -> tuple[Any, str]:
    """The drafter's ``eagle_aux_hidden_state_layer_ids`` and where they come from.

    Top level first, then ``eagle_config.eagle_aux_hidden_state_layer_ids``
    (the resolution issue 9 adds to the wheel); ``(None, "")`` when neither
    is there. An explicit empty list is returned as ``[]``, not as absent.
    """
    if cfg.get(LAYER_IDS_KEY) is not None:
        return cfg[LAYER_IDS_KEY], LAYER_IDS_KEY
    nested = cfg.get("eagle_config")
    if isinstance(nested, dict) and nested.get(LAYER_IDS_KEY) is not None:
        return nested[LAYER_IDS_KEY], f"eagle_config.{LAYER_IDS_KEY}"
    return None, ""


def is_speculators(cfg: Mapping[str, Any]) -> bool:
    """A head in the ``speculators`` format: ``speculators_model_type`` or a
    ``speculators_config`` object (the key vLLM's config loader switches on)."""
    return SPECULATORS_TYPE_KEY in cfg or isinstance(cfg.get("speculators_config"), dict)


@dataclass(frozen=True)
class SpeculatorsReading:
    """How a head in the ``speculators`` format is read, worked out once at
    load (``read_speculators``) for ``drafter_view`` and every rule.

    ``layer``: its ``transformer_layer_config`` when that is an object, else
    ``None``. ``layer_type``: that layer's ``model_type`` as written
    (``"llama"`` when unset or when there is no layer object). ``arch``: the
    architecture vLLM gives such a layer (``SPECULATORS_LAYER_TYPES``),
    ``None`` for a layer type it has no EAGLE-3 drafter for.
    """

    layer: Mapping[str, Any] | None
    layer_type: Any
    arch: str | None


def read_speculators(raw: Mapping[str, Any]) -> SpeculatorsReading | None:
    """The drafter's ``config.json`` read as a ``speculators`` head, ``None``
    for a plain head (``is_speculators``)."""
    if not is_speculators(raw):
        return None
    layer = raw.get("transformer_layer_config")
    layer = layer if isinstance(layer, dict) else None
    layer_type = layer.get("model_type", "llama") if layer is not None else "llama"
    return SpeculatorsReading(layer, layer_type, SPECULATORS_LAYER_TYPES.get(str(layer_type)))


def drafter_view(raw: dict[str, Any], reading: SpeculatorsReading | None) -> dict[str, Any]:
    """The drafter's config as the rules read it, in vLLM's own layout.

    A plain head's config (``reading`` ``None``) is returned as it is. A
    ``speculators`` head's is its ``transformer_layer_config`` with the
    ``eagle3`` fields (``SPECULATORS_EAGLE3_FIELDS``) the file sets copied
    over it, and the architecture vLLM gives it (``reading.arch``; an
    unknown layer type keeps the format's own ``architectures``): what the
    head was trained as, whatever a wheel's converter keeps
    (``speculators-wheel`` compares the two). A ``null`` field is left out,
    as vLLM's converter leaves out a ``null`` ``target_hidden_size``.
    """
    if reading is None:
        return raw
    view: dict[str, Any] = dict(reading.layer) if reading.layer is not None else {}
    for key in SPECULATORS_EAGLE3_FIELDS:
        if raw.get(key) is not None:
            view[key] = raw[key]
    view["architectures"] = [reading.arch] if reading.arch else raw.get("architectures")
    return view


def default_layer_ids(num_layers: int) -> list[int]:
    """The target's default aux layers, ``(2, N // 2, N - 3)``
    (``get_eagle3_aux_hidden_state_layers`` in vLLM's Llama and DeepSeek models)."""
    return [2, num_layers // 2, num_layers - 3]


def _is_int_list(ids: Any) -> bool:
    return isinstance(ids, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    )


def _flag(cfg: Mapping[str, Any], flag: str) -> bool:
    """An EAGLE 3.1 flag as the series' drafters read it: ``norm_before_fc``
    under ``eagle_config`` first, then at the top level; the others at the
    top level."""
    nested = cfg.get("eagle_config")
    if flag == "norm_before_fc" and isinstance(nested, dict) and flag in nested:
        return bool(nested[flag])
    return bool(cfg.get(flag))


@dataclass(frozen=True)
class Pair:
    """What the files say about a target + drafter pair: built once by
    ``load_pair`` and never changed; every rule and every question to vLLM
    reads it.

    ``text_cfg`` is the target's text config (``text_config`` for a
    multimodal wrapper such as Kimi-K2.5, else ``target_cfg`` itself).
    ``tensors``: the drafter's tensor headers by normalised name.
    ``target_weights``: how many tensors and shard files the target's
    safetensors hold. ``num_layers`` (N) and ``target_hidden``: the text
    config's ``num_hidden_layers`` and ``hidden_size``, ``None`` when not an
    integer. ``declared_ids``: the drafter's
    ``eagle_aux_hidden_state_layer_ids`` as written (``None`` when absent,
    any JSON value otherwise) and ``ids_key`` where (``declared_layer_ids``).
    ``speculators_reading``: how a ``speculators`` head is read
    (``read_speculators``), ``None`` for a plain head.

    The facts the rules derive from these are worked out once, here, as
    cached properties (``target_arch``, ``drafter_arch``, ``default_ids``,
    ``checked_ids``, ``eagle31_flags``): every rule and every question reads the same value.
    """

    target_dir: Path
    drafter_dir: Path
    target_cfg: Mapping[str, Any]
    text_cfg: Mapping[str, Any]
    drafter_cfg: Mapping[str, Any]
    tensors: Mapping[str, Tensor]
    target_weights: tuple[int, int]
    num_layers: int | None
    target_hidden: int | None
    declared_ids: Any
    ids_key: str
    drafter_raw: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    speculators_reading: SpeculatorsReading | None = None

    @property
    def speculators(self) -> bool:
        """The head is in the ``speculators`` format (``drafter_cfg`` is then
        ``drafter_view`` of ``drafter_raw``)."""
        return self.speculators_reading is not None

    @functools.cached_property
    def target_arch(self) -> Any:
        """The target's architecture as reports name it and the registry is
        asked for it: the first of its ``architectures`` (``first_arch``)."""
        return first_arch(self.target_cfg)

    @functools.cached_property
    def drafter_arch(self) -> str | None:
        """The drafter's architecture: the first of a list whose first entry
        is a string, else ``None`` (rule ``drafter-config``)."""
        archs = self.drafter_cfg.get("architectures")
        return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None

    @property
    def drafter_label(self) -> str:
        """The drafter's architecture as a report names it (``"?"`` when none)."""
        return "?" if self.drafter_arch is None else self.drafter_arch

    @functools.cached_property
    def default_ids(self) -> list[int]:
        """The target's default aux layer ids, ``(2, N//2, N-3)``
        (``default_layer_ids``; N taken as 0 when the target has none)."""
        return default_layer_ids(self.num_layers or 0)

    @functools.cached_property
    def checked_ids(self) -> list[int] | None:
        """The aux layer ids the rules check and the wheel is asked about: the
        declared ones, else the target's default ``(2, N//2, N-3)``.

        ``None`` where the rules stop before the ids: the target config has
        no N or hidden size, the drafter config no architectures, or the ids
        are not a non-empty list of integers.
        """
        if self.num_layers is None or self.target_hidden is None or self.drafter_arch is None:
            return None
        ids = self.default_ids if self.declared_ids is None else self.declared_ids
        return list(ids) if _is_int_list(ids) and ids else None

    @functools.cached_property
    def eagle31_flags(self) -> tuple[str, ...]:
        """The EAGLE 3.1 flags (``EAGLE31_FLAGS``) the drafter sets (``_flag``)."""
        return tuple(f for f in EAGLE31_FLAGS if _flag(self.drafter_cfg, f))

    @property
    def target_file(self) -> str:
        """The target's ``config.json``, as findings name it."""
        return str(self.target_dir / "config.json")

    @property
    def drafter_file(self) -> str:
        """The drafter's ``config.json``, as findings name it."""
        return str(self.drafter_dir / "config.json")

    @property
    def text_prefix(self) -> str:
        """``"text_config."`` when the target nests its text config, else ``""``."""
        return "text_config." if self.text_cfg is not self.target_cfg else ""


def _int(cfg: Mapping[str, Any], key: str) -> int | None:
    """``cfg[key]`` when it is an integer (not a bool), else ``None``."""
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def load_pair(target_dir: Path, drafter_dir: Path) -> Pair:
    """Read both ``config.json`` files and both checkpoints' tensor headers.

    Raises ``InputError`` (one line naming the file) for a missing directory
    or file, bad JSON, or a truncated safetensors header.
    """
    for role, d in (("target", target_dir), ("drafter", drafter_dir)):
        if not d.is_dir():
            raise InputError(f"{d}: {role} directory does not exist")
    tcfg = read_json(target_dir / "config.json")
    raw = read_json(drafter_dir / "config.json")
    reading = read_speculators(raw)
    dcfg = drafter_view(raw, reading)
    tensors = {normalise(n): t for n, t in read_checkpoint_tensors(drafter_dir).items()}
    target_tensors = read_checkpoint_tensors(target_dir)
    tc = text_config(tcfg)
    ids, ids_key = declared_layer_ids(dcfg)
    return Pair(
        target_dir,
        drafter_dir,
        tcfg,
        tc,
        dcfg,
        tensors,
        (len(target_tensors), len({t.file for t in target_tensors.values()})),
        _int(tc, "num_hidden_layers"),
        _int(tc, "hidden_size"),
        ids,
        ids_key,
        raw,
        reading,
    )


def first_arch(cfg: Mapping[str, Any]) -> Any:
    """The first of ``architectures`` as a report names it (``"?"`` when none)."""
    return (cfg.get("architectures") or ["?"])[0]


def looks_like_head(cfg: Mapping[str, Any]) -> bool:
    """An EAGLE head's config: an ``Eagle`` architecture, or the keys only
    drafters carry (``eagle_config``, ``draft_vocab_size``, the layer ids)."""
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    keys = ("eagle_config", "draft_vocab_size", LAYER_IDS_KEY)
    return "eagle" in arch.lower() or any(k in cfg for k in keys)


def looks_like_target(cfg: Mapping[str, Any]) -> bool:
    """A Kimi-K2.5 / DeepSeek target's config: an architecture the wheel's
    manifest claims (``installed_claims``), or a multimodal ``text_config``."""
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else ""
    return arch in installed_claims().table or isinstance(cfg.get("text_config"), dict)


def swapped_arguments(pair: Pair) -> Finding | None:
    """One ``error`` (rule ``swapped-arguments``) when ``--model`` names an
    EAGLE head: the two directories were given the wrong way round, or the
    target is not a Kimi-K2.5 / DeepSeek model at all. ``None`` otherwise."""
    if not looks_like_head(pair.target_cfg) or looks_like_target(pair.target_cfg):
        return None
    t_arch, d_arch = pair.target_arch, pair.drafter_label
    if looks_like_target(pair.drafter_cfg):
        msg = (
            f"the arguments are swapped: --model {pair.target_dir} is an EAGLE-3 head "
            f"({t_arch}) and --drafter {pair.drafter_dir} is the target ({d_arch}); run again "
            f"with --model {pair.drafter_dir} --drafter {pair.target_dir}"
        )
    else:
        msg = (
            f"--model {pair.target_dir} is an EAGLE-3 head ({t_arch}), not a Kimi-K2.5 / "
            f"DeepSeek target: --model takes the target checkpoint, --drafter the head"
        )
    return Finding(
        ERROR,
        "swapped-arguments",
        "input",
        msg,
        str(pair.target_dir / "config.json"),
        "architectures",
    )


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")


def hub_cache_dir() -> Path:
    """Where Hugging Face keeps downloaded repositories, as ``huggingface_hub``
    finds it: ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub``."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def resolve_model_arg(arg: str, role: str) -> tuple[Path, str]:
    """The directory for a ``--model`` / ``--drafter`` argument, and a note
    on how it was found ("" for a local directory).

    A local path is used as it is. A Hugging Face Hub id (``org/name``) that
    is not a local path resolves offline, as ``vllm serve`` does with
    ``HF_HUB_OFFLINE=1``: the cache's ``models--org--name/refs/main`` names
    the revision, and ``snapshots/<revision>`` is the directory. Raises
    ``InputError`` saying where the cache keeps snapshots when it has none.
    """
    path = Path(arg).expanduser()
    if path.exists() or not HUB_ID.fullmatch(arg):
        return path, ""
    cache = hub_cache_dir()
    repo = cache / ("models--" + arg.replace("/", "--"))
    ref = repo / "refs" / "main"
    rev = ref.read_text().strip() if ref.is_file() else ""
    snap = repo / "snapshots" / rev
    if rev and snap.is_dir():
        return snap, f"{role} {arg}: the Hugging Face cache's snapshot {rev} (refs/main), {snap}"
    raise InputError(
        f"{arg}: no such {role} directory, and as a Hugging Face Hub id it has no snapshot in "
        f"the local cache ({repo}/snapshots/<revision>, found through refs/main; the cache "
        "is HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). The preflight "
        f"is offline: download it first (huggingface-cli download {arg}) or pass a local "
        "directory"
    )


# --------------------------------------------------------------------------
# Preflight: the file rules, one function per family
# --------------------------------------------------------------------------


def target_rules(pair: Pair) -> list[Finding]:
    """``target``: architecture, text ``model_type``, N and hidden size of the
    target's text config; ``target-config`` error when N or the hidden size
    is missing."""
    n, th, prefix = pair.num_layers, pair.target_hidden, pair.text_prefix
    if n is None or th is None:
        missing = [k for k, v in (("num_hidden_layers", n), ("hidden_size", th)) if v is None]
        return [
            Finding(
                ERROR,
                "target-config",
                "target",
                f"the target config has no integer {' or '.join(prefix + k for k in missing)}",
                pair.target_file,
                prefix + missing[0],
            )
        ]
    return [
        Finding(
            INFO,
            "target",
            "target",
            f"{pair.target_arch}, text model_type {pair.text_cfg.get('model_type')}, "
            f"N = {n} layers, hidden {th}",
            pair.target_file,
            "architectures",
        )
    ]


MTP_TRAP = (
    "model_type {} is rewritten to deepseek_mtp (architectures DeepSeekMTPModel) by vLLM's "
    "SpeculativeConfig.hf_config_override (vllm/config/speculative.py): the EAGLE-3 head would "
    "load as an MTP module; type an MLA head deepseek_v2 or kimi_k2"
)


def mtp_trap_rule(pair: Pair, override: MtpOverride | Unanswered | None) -> list[Finding]:
    """``mtp-trap``: a drafter ``model_type`` in ``MTP_REWRITTEN_TYPES`` loads as
    an MTP module. An error from the files alone; with the wheel's own
    ``hf_config_override`` answer (``ask_mtp_override``), confirmed, or an
    ``info`` when this wheel does not rewrite it."""
    d_type = pair.drafter_cfg.get("model_type")
    if d_type not in MTP_REWRITTEN_TYPES:
        return []
    severity, message = ERROR, MTP_TRAP.format(d_type)
    if isinstance(override, MtpOverride) and override.rewritten:
        message += (
            f"; confirmed: this wheel rewrites it to {override.model_type} {override.architectures}"
        )
    elif isinstance(override, MtpOverride):
        severity = INFO
        message = f"model_type {d_type} is NOT rewritten to MTP by this wheel's hf_config_override"
    return [Finding(severity, "mtp-trap", "drafter", message, pair.drafter_file, "model_type")]


def mla_rule(pair: Pair, d_arch: str) -> list[Finding]:
    """``mla``: an MLA head recognised by ``kv_lora_rank`` (info), or an MLA
    ``model_type`` / DeepSeek architecture without it (error)."""
    dc = pair.drafter_cfg
    d_type = dc.get("model_type")
    if "kv_lora_rank" in dc:
        severity = INFO
        message = f"MLA head (kv_lora_rank {dc.get('kv_lora_rank')}, model_type {d_type})"
    elif d_type in MLA_TYPES or "deepseek" in d_arch.lower():
        severity = ERROR
        message = (
            f"{d_arch} / model_type {d_type} is an MLA head but the config has no kv_lora_rank "
            "(nor the other MLA shapes): vLLM cannot build its attention"
        )
    else:
        return []
    return [Finding(severity, "mla", "drafter", message, pair.drafter_file, "kv_lora_rank")]


def _speculators_finding(pair: Pair, severity: str, rule: str, message: str, key: str) -> Finding:
    return Finding(severity, rule, "drafter", message, pair.drafter_file, key)


def _speculators_format_errors(pair: Pair) -> list[Finding]:
    """``speculators-format`` errors: what this series' vLLM cannot serve
    from a ``speculators`` head (``speculators_rules``)."""
    raw, reading = pair.drafter_raw, pair.speculators_reading
    s_type = raw.get(SPECULATORS_TYPE_KEY)
    out: list[Finding] = []

    def error(message: str, key: str) -> None:
        """One ``speculators-format`` error on ``key`` of the head's config."""
        out.append(_speculators_finding(pair, ERROR, "speculators-format", message, key))

    if s_type != "eagle3":
        error(
            f"{SPECULATORS_TYPE_KEY} {s_type!r}: this series' vLLM (0.17.1) converts only "
            "eagle3 speculators heads (vllm/transformers_utils/configs/speculators/algos.py)",
            SPECULATORS_TYPE_KEY,
        )
    if reading is None or reading.layer is None:
        error(
            "a speculators head without a transformer_layer_config object: the drafter's "
            "layer sizes (hidden_size, vocab_size, heads) are not given",
            "transformer_layer_config",
        )
        return out
    if reading.arch is None:
        error(
            f"transformer_layer_config.model_type {reading.layer_type!r}: this series' vLLM "
            "builds an EAGLE-3 drafter from a speculators head only for "
            f"{sorted(SPECULATORS_LAYER_TYPES)} layers; 0.17.1 itself builds any layer as "
            "Eagle3LlamaForCausalLM (a qwen3 layer "
            "loses its q/k norms), upstream serves qwen3 layers from 0.24.0 "
            "(Eagle3Qwen3ForCausalLM)",
            "transformer_layer_config.model_type",
        )
    if raw.get("norm_before_fc") and raw.get("fc_norm"):
        error(
            "norm_before_fc and fc_norm are both set: the speculators library refuses the pair "
            "(one norm over the concatenated states, or one per state), and vLLM would apply "
            "both",
            "fc_norm",
        )
    return out


def _speculators_verifier_warning(pair: Pair) -> list[Finding]:
    """``speculators-verifier``: the head was trained for a verifier of
    another architecture than the target's."""
    spec = pair.drafter_raw.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    verifier = verifier if isinstance(verifier, dict) else {}
    v_archs = verifier.get("architectures")
    t_arch = pair.target_arch
    if not isinstance(v_archs, list) or not v_archs or t_arch in v_archs:
        return []
    message = (
        f"trained for verifier {verifier.get('name_or_path')} {v_archs}, but the target is "
        f"{t_arch}: its aux states and vocabulary may not be the ones it learned from"
    )
    key = "speculators_config.verifier"
    return [_speculators_finding(pair, WARNING, "speculators-verifier", message, key)]


def speculators_rules(pair: Pair) -> list[Finding]:
    """``speculators``: how a head in the ``speculators`` format is read (info),
    and ``speculators-format`` errors for what this series' vLLM cannot
    serve from it: a ``speculators_model_type`` other than ``eagle3`` (0.17.1
    converts only that one), no ``transformer_layer_config`` object, a layer
    type without an EAGLE-3 drafter (``SPECULATORS_LAYER_TYPES``), or both
    ``norm_before_fc`` and ``fc_norm`` (the library refuses the pair);
    ``speculators-verifier`` (warning) when the verifier it was trained for
    is another architecture than the target's. Nothing for a plain head."""
    if not pair.speculators:
        return []
    out = _speculators_format_errors(pair) + _speculators_verifier_warning(pair)
    if out:
        return out
    raw, reading = pair.drafter_raw, pair.speculators_reading
    l_type = reading.layer_type if reading is not None else None
    fields = ", ".join(f"{f} {raw[f]}" for f in SPECULATORS_MATH_FLAGS if f in raw)
    message = (
        f"speculators format ({SPECULATORS_TYPE_KEY} {raw.get(SPECULATORS_TYPE_KEY)}, "
        f"speculators {raw.get('speculators_version', '?')}): read as "
        f"transformer_layer_config (model_type {l_type}) -> {pair.drafter_label}, "
        f"with {fields or 'no norm flags'}"
    )
    return [_speculators_finding(pair, INFO, "speculators", message, SPECULATORS_TYPE_KEY)]


def drafter_rules(pair: Pair, override: MtpOverride | Unanswered | None = None) -> list[Finding]:
    """``drafter``: the architecture (``drafter-config`` error when missing),
    then ``speculators`` (a head in that format), ``mtp-trap``, ``mla``, and
    either ``no-weights`` (no safetensors) or the EAGLE 3.1 flags against
    the weights (``eagle31_findings``)."""
    d_arch = pair.drafter_arch
    if d_arch is None:
        message = "the drafter config has no architectures list"
        return [
            Finding(ERROR, "drafter-config", "drafter", message, pair.drafter_file, "architectures")
        ]
    info = f"{d_arch}, model_type {pair.drafter_cfg.get('model_type')}"
    out = [Finding(INFO, "drafter", "drafter", info, pair.drafter_file, "architectures")]
    out += speculators_rules(pair) + mtp_trap_rule(pair, override) + mla_rule(pair, d_arch)
    if pair.tensors:
        return out + eagle31_findings(pair)
    message = (
        "no *.safetensors (and no model.safetensors.index.json) in the drafter directory: "
        "nothing to load, tensor checks skipped"
    )
    return [*out, Finding(ERROR, "no-weights", "drafter", message, str(pair.drafter_dir), "")]


def _layer_ids_finding(pair: Pair, severity: str, rule: str, message: str, key: str) -> Finding:
    return Finding(severity, rule, "layer-ids", message, pair.drafter_file, key)


def layer_ids_source_rules(pair: Pair) -> list[Finding]:
    """Where the ids come from: ``layer-ids-conflict`` (top level and
    ``eagle_config`` differ), ``layer-ids-absent`` (the target's default),
    then ``layer-ids-type`` or ``layer-ids-empty`` (errors), else
    ``layer-ids-source`` (info). Needs N (``Pair.checked_ids``)."""
    dc, ids, src = pair.drafter_cfg, pair.declared_ids, pair.ids_key
    raw_nested = dc.get("eagle_config")
    nested: dict[str, Any] = raw_nested if isinstance(raw_nested, dict) else {}
    out: list[Finding] = []
    if src == LAYER_IDS_KEY and nested.get(LAYER_IDS_KEY) is not None:
        if nested[LAYER_IDS_KEY] != ids:
            message = (
                f"eagle_config.{LAYER_IDS_KEY} = {nested[LAYER_IDS_KEY]} differs from the "
                f"top-level {ids}; the top level wins"
            )
            key = f"eagle_config.{LAYER_IDS_KEY}"
            out.append(_layer_ids_finding(pair, WARNING, "layer-ids-conflict", message, key))
    if ids is None:
        ids = pair.default_ids
        message = (
            f"no {LAYER_IDS_KEY} at the top level or under eagle_config: vLLM uses the target's "
            f"default (2, N//2, N-3) = {ids} (vllm PR #50170); was the head trained on those?"
        )
        out.append(_layer_ids_finding(pair, WARNING, "layer-ids-absent", message, LAYER_IDS_KEY))
        src_text = "none declared: the target's default"
    else:
        src_text = f"from {'the top-level ' if src == LAYER_IDS_KEY else ''}{src}"
    if not _is_int_list(ids):
        message = f"{ids!r} is not a list of integers"
        return [
            *out,
            _layer_ids_finding(pair, ERROR, "layer-ids-type", message, src or LAYER_IDS_KEY),
        ]
    if not ids:
        message = (
            "an explicit empty list: the head would read no aux hidden states (not the same as "
            "absent; vLLM 0.17.1 silently falls back to the default)"
        )
        return [*out, _layer_ids_finding(pair, ERROR, "layer-ids-empty", message, src)]
    message = f"ids {ids} ({src_text})"
    return [*out, _layer_ids_finding(pair, INFO, "layer-ids-source", message, src or LAYER_IDS_KEY)]


def layer_ids_value_rules(pair: Pair, ids: list[int]) -> list[Finding]:
    """The values of the checked ids against N: ``layer-id-range`` (each in
    ``0..N``), ``layer-id-duplicate``, and the ``layer-ids-convention`` note
    (ids that include N, or equal the default plus one: the "output of
    layer i" convention, sglang PR #25454, vllm #43671)."""
    n, key = pair.num_layers or 0, pair.ids_key or LAYER_IDS_KEY
    out: list[Finding] = []
    bad = [i for i in ids if not 0 <= i <= n]
    if bad:
        message = (
            f"id(s) {bad} outside 0..{n} (N = {n}: id i is the residual stream entering layer i, "
            f"id N the stream after the last layer)"
        )
        out.append(_layer_ids_finding(pair, ERROR, "layer-id-range", message, key))
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        message = f"id(s) {dups} repeated in {ids}"
        out.append(_layer_ids_finding(pair, ERROR, "layer-id-duplicate", message, key))
    if not bad and (n in ids or ids == [i + 1 for i in pair.default_ids]):
        why = f"include N = {n}" if n in ids else "equal the default (2, N//2, N-3) plus one"
        message = (
            f"ids {ids} {why}: if the trainer counted id i as the OUTPUT of layer i, every id "
            f"is one too high for vLLM (id i = the stream entering layer i; sglang PR #25454, "
            f"vllm #43671)"
        )
        out.append(_layer_ids_finding(pair, NOTE, "layer-ids-convention", message, key))
    return out


def _target_hidden_key(pair: Pair) -> str:
    """The drafter's key for the target's hidden size."""
    return "target_hidden_size" if "target_hidden_size" in pair.drafter_cfg else "hidden_size"


def target_hidden_size_rule(pair: Pair) -> list[Finding]:
    """``target-hidden-size``: the drafter's ``target_hidden_size`` (else
    ``hidden_size``) against the target's ``hidden_size``."""
    t_key, th = _target_hidden_key(pair), pair.target_hidden
    d_target_hidden = _int(pair.drafter_cfg, t_key)
    if d_target_hidden != th:
        severity = ERROR
        message = f"{t_key} = {d_target_hidden} but the target's hidden_size is {th}"
    else:
        severity, message = INFO, f"{t_key} {th} = the target's hidden_size"
    return [Finding(severity, "target-hidden-size", "sizes", message, pair.drafter_file, t_key)]


def _tensor_finding(pair: Pair, severity: str, rule: str, message: str, t: Tensor) -> Finding:
    """A ``sizes`` finding about tensor ``t``, naming its shard file."""
    return Finding(severity, rule, "sizes", message, str(pair.drafter_dir / t.file), t.name)


def fc_rules(pair: Pair, ids: list[int]) -> list[Finding]:
    """``fc-width``: ``fc.weight`` present, 2-D, ``[hidden_size, k *
    target_hidden]``; then ``layer-id-count`` (k against the ids) and
    ``fc-states`` (k other than the ``UPSTREAM_FC_STATES`` vLLM builds)."""
    t_key = _target_hidden_key(pair)
    d_target_hidden, d_hidden = _int(pair.drafter_cfg, t_key), _int(pair.drafter_cfg, "hidden_size")
    fc = pair.tensors.get("fc.weight")
    if fc is None:
        message = "no fc.weight: this is not an EAGLE-3 head"
        return [Finding(ERROR, "fc-width", "sizes", message, str(pair.drafter_dir), "fc.weight")]
    if (
        len(fc.shape) != 2
        or fc.shape[0] != d_hidden
        or not d_target_hidden
        or fc.shape[1] % d_target_hidden
    ):
        message = (
            f"fc.weight is {fc.shape}, expected [hidden_size = {d_hidden}, "
            f"k * {t_key} = k * {d_target_hidden}]"
        )
        return [_tensor_finding(pair, ERROR, "fc-width", message, fc)]
    k = fc.shape[1] // d_target_hidden
    message = f"fc.weight {fc.shape} = [hidden_size, {k} * {d_target_hidden}]: {k} aux states"
    out = [_tensor_finding(pair, INFO, "fc-width", message, fc)]
    if k != len(ids):
        message = (
            f"{len(ids)} ids {ids} but fc.weight {fc.shape} takes k = {k} aux states "
            f"({fc.shape[1]} = {k} * {d_target_hidden})"
        )
        key = pair.ids_key or LAYER_IDS_KEY
        out.append(_layer_ids_finding(pair, ERROR, "layer-id-count", message, key))
    if k != UPSTREAM_FC_STATES:
        message = (
            f"fc.weight takes {k} aux states; vLLM's Eagle3LlamaForCausalLM builds fc for "
            f"{UPSTREAM_FC_STATES} (llama_eagle3.py), so loading may fail"
        )
        out.append(_tensor_finding(pair, WARNING, "fc-states", message, fc))
    return out


def draft_vocab_rules(pair: Pair) -> list[Finding]:
    """``draft-vocab``: ``draft_vocab_size`` (else ``vocab_size``) against
    ``lm_head.weight`` rows and ``d2t`` length, ``t2d`` length against
    ``vocab_size``, and ``d2t`` needed for a smaller draft vocabulary; one
    ``info`` when all agree."""
    dc, tensors = pair.drafter_cfg, pair.tensors
    vocab = _int(dc, "vocab_size")
    dv = _int(dc, "draft_vocab_size") or vocab
    dv_key = "draft_vocab_size" if "draft_vocab_size" in dc else "vocab_size"
    lm, d2t, t2d = tensors.get("lm_head.weight"), tensors.get("d2t"), tensors.get("t2d")
    out: list[Finding] = []
    if lm is None:
        message = "no lm_head.weight in the head"
        out.append(
            Finding(ERROR, "draft-vocab", "sizes", message, str(pair.drafter_dir), "lm_head.weight")
        )
    elif lm.shape[:1] != [dv]:
        message = f"lm_head.weight is {lm.shape} but {dv_key} = {dv}"
        out.append(_tensor_finding(pair, ERROR, "draft-vocab", message, lm))
    if d2t is not None and d2t.shape != [dv]:
        message = f"d2t is {d2t.shape} but {dv_key} = {dv}"
        out.append(_tensor_finding(pair, ERROR, "draft-vocab", message, d2t))
    if t2d is not None and t2d.shape != [vocab]:
        message = f"t2d is {t2d.shape} but vocab_size = {vocab}"
        out.append(_tensor_finding(pair, ERROR, "draft-vocab", message, t2d))
    if d2t is None and dv != vocab:
        message = (
            f"draft_vocab_size {dv} < vocab_size {vocab} but no d2t maps draft ids to target ids"
        )
        out.append(Finding(ERROR, "draft-vocab", "sizes", message, pair.drafter_file, dv_key))
    if out:
        return out
    message = (
        f"{dv_key} {dv}: lm_head.weight rows"
        + (", d2t" if d2t is not None else "")
        + (", t2d" if t2d is not None else "")
        + " agree"
    )
    return [Finding(INFO, "draft-vocab", "sizes", message, pair.drafter_file, dv_key)]


def embeddings_rule(pair: Pair) -> list[Finding]:
    """``embeddings``: the head's own ``embed_tokens.weight`` of shape
    ``[vocab_size, hidden_size]``, or none, shared with a target of the
    same ``vocab_size``."""
    dc = pair.drafter_cfg
    vocab, d_hidden = _int(dc, "vocab_size"), _int(dc, "hidden_size")
    t_vocab = _int(pair.text_cfg, "vocab_size")
    emb = pair.tensors.get("embed_tokens.weight")
    if emb is not None and emb.shape != [vocab, d_hidden]:
        message = (
            f"embed_tokens.weight is {emb.shape}, expected "
            f"[vocab_size = {vocab}, hidden_size = {d_hidden}]"
        )
        return [_tensor_finding(pair, ERROR, "embeddings", message, emb)]
    if emb is not None:
        message = f"own embed_tokens.weight {emb.shape}"
        return [_tensor_finding(pair, INFO, "embeddings", message, emb)]
    if vocab != t_vocab:
        message = (
            f"no embed_tokens.weight, so vLLM shares the target's embeddings, but vocab_size "
            f"{vocab} != the target's {t_vocab}"
        )
        return [Finding(ERROR, "embeddings", "sizes", message, pair.drafter_file, "vocab_size")]
    message = "no embed_tokens.weight: shared with the target"
    where = str(pair.drafter_dir)
    return [Finding(INFO, "embeddings", "sizes", message, where, "embed_tokens.weight")]


def check_pair(pair: Pair, override: MtpOverride | Unanswered | None = None) -> list[Finding]:
    """Apply every file rule to ``pair``; the findings in report order.

    The families, each a function of ``pair`` alone: ``target_rules``,
    ``drafter_rules`` (``mtp-trap`` takes the wheel's ``override`` answer
    when vLLM was asked), ``layer_ids_source_rules`` and
    ``layer_ids_value_rules``, then the sizes (``target_hidden_size_rule``,
    ``fc_rules``, ``draft_vocab_rules``, ``embeddings_rule``). A family
    whose input is missing ends the list: no N or hidden size in the
    target, no architectures in the drafter, ids that are not a non-empty
    list of integers; without safetensors only the hidden size is compared.
    """
    out = target_rules(pair)
    if pair.num_layers is None or pair.target_hidden is None:
        return out
    out += drafter_rules(pair, override)
    if pair.drafter_arch is None:
        return out
    out += layer_ids_source_rules(pair)
    ids = pair.checked_ids
    if ids is None:
        return out
    out += layer_ids_value_rules(pair, ids) + target_hidden_size_rule(pair)
    if not pair.tensors:
        return out
    return out + fc_rules(pair, ids) + draft_vocab_rules(pair) + embeddings_rule(pair)


def aux_state_count(pair: Pair) -> tuple[int, int]:
    """``(k, target_hidden)``: how many aux states ``fc`` takes (its width over
    the drafter's ``target_hidden_size``, else the declared ids, else 3) and
    the width of one."""
    dc = pair.drafter_cfg
    th = _int(dc, "target_hidden_size") or _int(dc, "hidden_size") or 0
    fc = pair.tensors.get("fc.weight")
    if fc is not None and len(fc.shape) == 2 and th and fc.shape[1] % th == 0:
        return fc.shape[1] // th, th
    ids = pair.declared_ids
    return (len(ids) if isinstance(ids, list) and ids else UPSTREAM_FC_STATES), th


def _fc_norm_problem(pair: Pair, k: int, th: int) -> str:
    """Why the ``fc_norm`` weights do not fit ``k`` states of width ``th`` ("" when they do)."""
    found = {int(m.group(1)): t for n, t in pair.tensors.items() if (m := FC_NORM.fullmatch(n))}
    want = f"fc_norm.0.weight ... fc_norm.{k - 1}.weight, [{th}] each (one RMSNorm per aux state)"
    single = pair.tensors.get("fc_norm.weight")
    if single is not None and not found:
        return (
            f"the checkpoint has a single fc_norm.weight {single.shape}, but vLLM builds fc_norm "
            f"as one RMSNorm per aux state (nn.ModuleList; vllm PR #42764, in this series) and "
            f"loads {want}: the single weight has no parameter to load into. A head trained "
            f"with one norm over the concatenated states is norm_before_fc, whose weight is "
            f"input_norm.weight [{k * th}]"
        )
    missing = [i for i in range(k) if i not in found]
    extra = sorted(i for i in found if i >= k)
    wrong = [f"fc_norm.{i}.weight {t.shape}" for i, t in sorted(found.items()) if t.shape != [th]]
    if not (missing or extra or wrong):
        return ""
    parts = [f"no fc_norm.{i}.weight" for i in missing] + [
        f"fc_norm.{i}.weight for a state fc does not take" for i in extra
    ]
    return f"fc_norm needs {want} for fc's {k} aux states; " + ", ".join(parts + wrong)


def _eagle31_problems(pair: Pair, k: int, th: int) -> dict[str, str]:
    """Why each EAGLE 3.1 flag's weights do not fit ``k`` aux states of width
    ``th`` ("" when they do)."""
    norm = pair.tensors.get("input_norm.weight")
    before_fc = (
        f"norm_before_fc needs input_norm.weight [{k * th}] (one RMSNorm over fc's "
        f"{k} x {th} input); the checkpoint has "
        + (f"{norm.shape}" if norm is not None else "none")
    )
    return {
        "fc_norm": _fc_norm_problem(pair, k, th),
        "norm_before_fc": "" if norm is not None and norm.shape == [k * th] else before_fc,
        "norm_output": "" if "norm.weight" in pair.tensors else "the checkpoint has no norm.weight",
    }


def eagle31_findings(pair: Pair) -> list[Finding]:
    """``eagle31`` / ``eagle31-weights``: each EAGLE 3.1 flag (``EAGLE31_FLAGS``)
    against the weights it needs, and weights present without their flag.

    ``fc_norm`` needs ``fc_norm.{i}.weight`` of ``[target_hidden]`` for each
    of fc's k aux states (a single ``fc_norm.weight`` is recognised and
    explained: vLLM has no parameter for it); ``norm_before_fc`` needs
    ``input_norm.weight`` ``[k * target_hidden]``; ``norm_output`` needs
    ``norm.weight``. A weight without its flag is a warning: vLLM does not
    apply it (``fc_norm.*``) or skips it (``input_norm.weight``).
    """
    k, th = aux_state_count(pair)
    problems = _eagle31_problems(pair, k, th)
    present = {
        "fc_norm": f"fc_norm.0.weight ... fc_norm.{k - 1}.weight, [{th}] each",
        "norm_before_fc": f"input_norm.weight [{k * th}]",
        "norm_output": "norm.weight",
    }
    out: list[Finding] = []
    for flag in pair.eagle31_flags:
        if problems[flag]:
            severity, rule = ERROR, "eagle31-weights"
            message = f"{flag} is set (EAGLE 3.1): {problems[flag]}"
        else:
            severity, rule = INFO, "eagle31"
            message = f"EAGLE 3.1: {flag} set, {present[flag]} present"
        out.append(Finding(severity, rule, "drafter", message, pair.drafter_file, flag))
    return out + _eagle31_weights_without_flags(pair)


def _eagle31_weights_without_flags(pair: Pair) -> list[Finding]:
    """``eagle31-weights`` warnings: ``fc_norm`` or ``input_norm`` weights
    whose flag is not set, which vLLM does not apply or skips."""
    tensors, flags = pair.tensors, pair.eagle31_flags
    has_fc_norm = "fc_norm.weight" in tensors or any(FC_NORM.fullmatch(n) for n in tensors)
    out: list[Finding] = []
    for flag, there, what, fate in (
        (
            "fc_norm",
            has_fc_norm,
            "fc_norm weights",
            "vLLM does not build the norms, so they are not applied",
        ),
        (
            "norm_before_fc",
            "input_norm.weight" in tensors,
            "input_norm.weight",
            "vLLM's loader skips input_norm",
        ),
    ):
        if there and flag not in flags:
            message = f"the checkpoint has {what} but {flag} is not set: {fate}"
            out.append(
                Finding(WARNING, "eagle31-weights", "drafter", message, pair.drafter_file, flag)
            )
    return out


# --------------------------------------------------------------------------
# Preflight: questions to the installed vLLM, one function each
# --------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """vLLM logs to stdout; keep stdout for the report (and ``--json``).
    vLLM is imported with ``VLLM_LOGGING_LEVEL=ERROR`` unless the caller set
    a level; the caller's environment is as it was afterwards (a process
    that runs the preflight in-process and then starts vLLM keeps its own
    logging)."""
    unset = "VLLM_LOGGING_LEVEL" not in os.environ
    if unset:
        os.environ["VLLM_LOGGING_LEVEL"] = "ERROR"
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if unset:
            os.environ.pop("VLLM_LOGGING_LEVEL", None)


def _first_line(exc: BaseException, limit: int = 240) -> str:
    """One line for an exception, at most ``limit`` characters; for pydantic's
    ``ValidationError`` (vLLM's configs) the first error's message, not the
    generic headline."""
    line = ""
    try:
        msg = exc.errors()[0]["msg"]  # type: ignore[attr-defined]
        if isinstance(msg, str):
            line = " ".join(msg.split())
    except Exception:  # noqa: BLE001
        pass
    if not line:
        text = str(exc).strip().splitlines()
        line = text[0] if text else ""
    line = f"{type(exc).__name__}: {line}".strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass(frozen=True)
class Unanswered:
    """A question vLLM could not be asked: the API it needs is missing (a
    private function renamed, say) or raised. ``why``: the exception's first
    line. Reported as a ``note``, never as the wheel's verdict."""

    why: str


@dataclass(frozen=True)
class Installed:
    """The installed vLLM: its version, whether it carries the manifest, and
    the note ``claims_from`` gives when that manifest records no claimed
    architectures (the preflight then knows them from its own copy)."""

    version: str
    patch_queue: bool
    claims_note: str = ""


@dataclass(frozen=True)
class Registry:
    """vLLM's ``ModelRegistry`` and its ``supports_eagle3`` check."""

    models: Any
    supports_eagle3: Any


@dataclass(frozen=True)
class TargetClass:
    """The registry's class for the target architecture (``None``: it has
    none) and whether ``supports_eagle3`` holds for it."""

    cls: Any
    eagle3: bool


@dataclass(frozen=True)
class MtpOverride:
    """What ``SpeculativeConfig.hf_config_override`` makes of the drafter's config."""

    rewritten: bool
    model_type: Any
    architectures: Any


@dataclass(frozen=True)
class SpecVerdict:
    """``SpeculativeConfig(method="eagle3")`` on the pair: the config, or
    (``config`` ``None``) the first line of its refusal."""

    config: Any
    refusal: str = ""


@dataclass(frozen=True)
class DrafterClass:
    """The class the registry resolves the drafter to (``cls``, through
    ``arch``), or why it cannot (``refusal``)."""

    cls: Any = None
    arch: str = ""
    refusal: str = ""


@dataclass(frozen=True)
class Registered:
    """Without a ``SpeculativeConfig``: whether the registry lists the
    EAGLE-3 name of the drafter's architecture."""

    arch: str
    known: bool


@dataclass(frozen=True)
class RunnerIds:
    """The aux layer ids the model runner will use and where they come from."""

    ids: list[int]
    how: str


@dataclass(frozen=True)
class DrafterLength:
    """The ``SpeculativeConfig``'s lengths: ``drafter``, the drafter's max
    model length (``draft_model_config.max_model_len``: the head's own,
    capped at the target's), and ``target``, the target's max model length
    (its config's, as ``vllm serve`` derives it without ``--max-model-len``)."""

    drafter: int
    target: int


def ask_installed() -> Installed | Unanswered:
    """Import ``vllm``: its version and whether it is a patch-queue build."""
    try:
        import vllm  # noqa: F401

        version = md.version("vllm")
    except Exception as exc:  # noqa: BLE001 - any import failure means "not usable"
        return Unanswered(_first_line(exc))
    try:
        manifest = md.distribution("vllm").read_text(MANIFEST)
    except Exception:  # noqa: BLE001
        manifest = None
    return Installed(version, bool(manifest), installed_claims().note if manifest else "")


def ask_registry() -> Registry | Unanswered:
    """Import vLLM's model registry and ``supports_eagle3``."""
    try:
        from vllm.model_executor.models.interfaces import supports_eagle3
        from vllm.model_executor.models.registry import ModelRegistry
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))
    return Registry(ModelRegistry, supports_eagle3)


def ask_target_class(registry: Registry, arch: Any) -> TargetClass | Unanswered:
    """The registry's class for the target's architecture
    (``ModelRegistry._try_load_model_cls``, private) and ``supports_eagle3``
    on it (vllm/model_executor/models/interfaces.py)."""
    try:
        cls = registry.models._try_load_model_cls(arch)
        return TargetClass(cls, cls is not None and bool(registry.supports_eagle3(cls)))
    except Exception as exc:  # noqa: BLE001 - e.g. the private function renamed
        return Unanswered(_first_line(exc))


def ask_mtp_override(pair: Pair) -> MtpOverride | Unanswered:
    """The wheel's own ``SpeculativeConfig.hf_config_override`` on the
    drafter's config: does it rewrite the ``model_type`` (to MTP)?"""
    d_type = pair.drafter_cfg.get("model_type")
    if not isinstance(d_type, str):
        # Nothing to rewrite; vLLM's override tests substrings of it.
        return MtpOverride(False, d_type, pair.drafter_cfg.get("architectures"))
    try:
        from transformers import PretrainedConfig
        from vllm.config import SpeculativeConfig

        probe = PretrainedConfig(**{k: v for k, v in pair.drafter_cfg.items() if k != "model_type"})
        probe.model_type = d_type
        probe = SpeculativeConfig.hf_config_override(probe)
        return MtpOverride(
            getattr(probe, "model_type", None) != d_type,
            getattr(probe, "model_type", None),
            getattr(probe, "architectures", None),
        )
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def ask_speculative_config(pair: Pair) -> SpecVerdict:
    """``SpeculativeConfig(method="eagle3")`` built on a ``ModelConfig`` of
    the target with the drafter (vllm/config/speculative.py): the allowlist,
    the drafter's config class, the architecture rename. Its error is the
    refusal."""
    try:
        from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

        mc = ModelConfig(model=str(pair.target_dir), skip_tokenizer_init=True)
        return SpecVerdict(
            SpeculativeConfig(
                target_model_config=mc,
                target_parallel_config=ParallelConfig(),
                method="eagle3",
                model=str(pair.drafter_dir),
                num_speculative_tokens=1,
            )
        )
    except Exception as exc:  # noqa: BLE001
        return SpecVerdict(None, _first_line(exc))


def ask_drafter_class(registry: Registry, spec: Any) -> DrafterClass:
    """The class ``ModelRegistry.resolve_model_cls`` gives the drafter's
    architectures in the ``SpeculativeConfig``, or its refusal."""
    try:
        draft = spec.draft_model_config
        cls, arch = registry.models.resolve_model_cls(draft.architectures, draft)
        return DrafterClass(cls, arch)
    except Exception as exc:  # noqa: BLE001
        return DrafterClass(refusal=_first_line(exc))


def eagle3_name(arch: str) -> str:
    """The EAGLE-3 registry name vLLM gives a drafter architecture (``Eagle3`` prefix)."""
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def ask_registered(registry: Registry, arch: str) -> Registered | Unanswered:
    """Whether ``ModelRegistry.get_supported_archs`` lists ``eagle3_name(arch)``."""
    name = eagle3_name(arch)
    try:
        return Registered(name, name in registry.models.get_supported_archs())
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def ask_module_source(cls: Any) -> str | Unanswered:
    """The source of the module that defines ``cls`` (``inspect.getsource``)."""
    import inspect

    try:
        return inspect.getsource(sys.modules[cls.__module__])
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def ask_runner_ids(pair: Pair, spec: Any) -> RunnerIds | Unanswered:
    """The ids the model runner reads from the ``SpeculativeConfig``
    (``GPUModelRunner._get_eagle3_aux_layers_from_config``, private,
    vllm/v1/worker/gpu_model_runner.py), else the target's default."""
    try:
        from types import SimpleNamespace

        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        used = GPUModelRunner._get_eagle3_aux_layers_from_config(
            SimpleNamespace(speculative_config=spec)
        )
        if not used:
            return RunnerIds(list(pair.default_ids), "the target's default")
        return RunnerIds(list(used), "from the drafter config")
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def ask_drafter_length(spec: Any) -> DrafterLength | Unanswered:
    """The drafter's and the target's max model lengths, as the
    ``SpeculativeConfig`` resolved them (vllm/config/speculative.py,
    ``_maybe_override_draft_max_model_len``); the model runner drafts only
    while a batch fits in the drafter's (``effective_drafter_max_model_len``)."""
    try:
        drafter = int(spec.draft_model_config.max_model_len)
        return DrafterLength(drafter, int(spec.target_model_config.max_model_len))
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def ask_drafter_flags(spec: Any) -> dict[str, Any] | Unanswered:
    """The norm flags (``SPECULATORS_MATH_FLAGS``) as they stand in the
    drafter config the wheel built (``draft_model_config.hf_config``: for a
    ``speculators`` head, what its converter copied); ``None`` where absent."""
    try:
        hf = spec.draft_model_config.hf_config
        return {flag: getattr(hf, flag, None) for flag in SPECULATORS_MATH_FLAGS}
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


def _text_model_arch(pair: Pair) -> Any:
    """The target's text model architecture: ``text_config``'s
    ``architectures``, else by its ``model_type`` (``Claims.text_archs``),
    else the target's own."""
    by_type = installed_claims().text_archs.get(str(pair.text_cfg.get("model_type")))
    archs = pair.text_cfg.get("architectures") or ([by_type] if by_type else None)
    return (archs or pair.target_cfg.get("architectures") or ["?"])[0]


def ask_ids_refusal(pair: Pair, registry: Registry, ids: list[int]) -> str | Unanswered:
    """The installed target text model's verdict on ``ids``: "" when its
    ``set_aux_hidden_state_layers`` takes them, else the ``ValueError`` it
    raises (the series checks ``0..N`` and duplicates at load).

    Asked of the wheel's own class for the text model (``_text_model_arch``),
    on a stand-in instance that carries only ``config.num_hidden_layers``
    and ``model``."""
    from types import SimpleNamespace

    try:
        arch = _text_model_arch(pair)
        cls = registry.models._try_load_model_cls(arch)
        setter = getattr(cls, "set_aux_hidden_state_layers", None)
        if setter is None:
            raise LookupError(f"{arch} has no set_aux_hidden_state_layers in this wheel")
        stub = type(cls.__name__, (SimpleNamespace,), {})(
            config=SimpleNamespace(num_hidden_layers=pair.num_layers), model=SimpleNamespace()
        )
        try:
            setter(stub, tuple(ids))
        except ValueError as exc:
            return _first_line(exc)
        return ""
    except Exception as exc:  # noqa: BLE001
        return Unanswered(_first_line(exc))


@dataclass(frozen=True)
class WheelAnswers:
    """Every answer of the installed vLLM about a pair (``ask_vllm``).
    ``None``: not asked, because an earlier answer made the question moot
    (no vLLM, no registry, no ``SpeculativeConfig``, no EAGLE 3.1 flag, no
    ids to check)."""

    installed: Installed | Unanswered
    registry: Registry | Unanswered | None = None
    target: TargetClass | Unanswered | None = None
    override: MtpOverride | Unanswered | None = None
    spec: SpecVerdict | None = None
    drafter: DrafterClass | Registered | Unanswered | None = None
    source: str | Unanswered | None = None
    runner_ids: RunnerIds | Unanswered | None = None
    refusal: str | Unanswered | None = None
    length: DrafterLength | Unanswered | None = None
    flags: dict[str, Any] | Unanswered | None = None


def ask_vllm(pair: Pair) -> WheelAnswers:
    """Ask the installed vLLM about ``pair``, in this order, each question
    its own function: ``ask_installed``, ``ask_registry``,
    ``ask_target_class``, ``ask_mtp_override``, ``ask_speculative_config``,
    then ``ask_drafter_class`` (or ``ask_registered`` when it refused) and
    ``ask_module_source`` for the EAGLE 3.1 flags, then ``ask_runner_ids``
    and ``ask_ids_refusal`` for the ids the rules checked, and
    ``ask_drafter_length``. Imports ``vllm``
    with ``VLLM_LOGGING_LEVEL=ERROR`` unless set; vLLM's stdout goes to
    stderr. Never raises."""
    with _quiet():
        installed = ask_installed()
        if isinstance(installed, Unanswered):
            return WheelAnswers(installed)
        registry = ask_registry()
        if isinstance(registry, Unanswered):
            return WheelAnswers(installed, registry)
        target = ask_target_class(registry, pair.target_arch)
        override = ask_mtp_override(pair)
        spec = ask_speculative_config(pair)
        answers = WheelAnswers(installed, registry, target, override, spec)
        return _ask_with_spec(pair, answers, registry, spec)


def _ask_with_spec(
    pair: Pair, answers: WheelAnswers, registry: Registry, spec: SpecVerdict
) -> WheelAnswers:
    """The questions that follow the ``SpeculativeConfig`` verdict."""
    if spec.config is None:
        registered = ask_registered(registry, pair.drafter_label)
        return dataclasses.replace(answers, drafter=registered)
    drafter = ask_drafter_class(registry, spec.config)
    source = None
    if isinstance(drafter, DrafterClass) and drafter.cls is not None and pair.eagle31_flags:
        source = ask_module_source(drafter.cls)
    runner_ids = ask_runner_ids(pair, spec.config) if pair.checked_ids is not None else None
    refusal = None
    if isinstance(runner_ids, RunnerIds):
        refusal = ask_ids_refusal(pair, registry, runner_ids.ids)
    return dataclasses.replace(
        answers,
        drafter=drafter,
        source=source,
        runner_ids=runner_ids,
        refusal=refusal,
        length=ask_drafter_length(spec.config),
        flags=ask_drafter_flags(spec.config) if pair.speculators else None,
    )


# --------------------------------------------------------------------------
# Preflight: the wheel's answers as findings, one function per question
# --------------------------------------------------------------------------


def _vllm_finding(severity: str, rule: str, message: str, file: str = "", key: str = "") -> Finding:
    return Finding(severity, rule, "vllm", message, file, key)


def installed_findings(installed: Installed | Unanswered) -> list[Finding]:
    """``vllm``: the version and whether it is a patch-queue build; an error
    when vLLM does not import (the file rules ran, the wheel's verdicts are
    unknown)."""
    if isinstance(installed, Unanswered):
        message = (
            f"vLLM does not import in this Python ({sys.executable}: {installed.why}): "
            "only the file rules ran, and the wheel's verdicts (registry, "
            "SpeculativeConfig, layer ids) are unknown. Run the preflight with the "
            "serving host's Python, or pass --no-vllm to check the files alone"
        )
        return [_vllm_finding(ERROR, "vllm", message)]
    build = (
        "patch-queue build"
        if installed.patch_queue
        else "no vpq_manifest.json: not a patch-queue build"
    )
    found = [_vllm_finding(INFO, "vllm", f"vllm {installed.version} ({build})")]
    if installed.claims_note:
        found.append(_vllm_finding(NOTE, "claims-fallback", installed.claims_note))
    return found


def target_class_findings(pair: Pair, target: TargetClass | Unanswered | None) -> list[Finding]:
    """``target-eagle3``: the wheel's class for the target and ``supports_eagle3``."""
    arch = pair.target_arch
    if target is None:
        return []
    if isinstance(target, Unanswered):
        severity = NOTE
        message = f"could not ask vLLM's registry for {arch}'s class: {target.why}"
    elif target.cls is None:
        severity, message = ERROR, f"this wheel's registry has no model class for {arch}"
    elif not target.eagle3:
        severity = ERROR
        message = (
            f"{arch} ({target.cls.__module__}) does not implement "
            "SupportsEagle3 in this wheel: EAGLE-3 is refused for this target"
        )
    else:
        severity = INFO
        name = f"{target.cls.__module__}.{target.cls.__name__}"
        message = f"{arch} -> {name}: supports_eagle3 holds"
    return [_vllm_finding(severity, "target-eagle3", message, pair.target_file, "architectures")]


def override_findings(pair: Pair, override: MtpOverride | Unanswered | None) -> list[Finding]:
    """A ``mtp-trap`` note when the wheel's ``hf_config_override`` could not
    be run (its answer otherwise goes to ``mtp_trap_rule``)."""
    if not isinstance(override, Unanswered):
        return []
    message = f"could not run the wheel's hf_config_override: {override.why}"
    return [_vllm_finding(NOTE, "mtp-trap", message, pair.drafter_file, "model_type")]


def spec_findings(pair: Pair, spec: SpecVerdict | None) -> list[Finding]:
    """``speculative-config``: the wheel accepts the pair, or its refusal."""
    if spec is None:
        return []
    if spec.config is None:
        severity = ERROR
        message = f"this wheel refuses the pair in SpeculativeConfig(method=eagle3): {spec.refusal}"
    else:
        severity, message = INFO, "SpeculativeConfig(method=eagle3) accepts the pair"
    return [
        _vllm_finding(severity, "speculative-config", message, pair.drafter_file, "architectures")
    ]


def drafter_class_findings(
    pair: Pair, drafter: DrafterClass | Registered | Unanswered | None
) -> list[Finding]:
    """``drafter-class``: the class the wheel resolves the drafter to, its
    refusal, or (when ``SpeculativeConfig`` refused) whether the registry
    lists the drafter's EAGLE-3 name at all."""
    d_arch = pair.drafter_label
    if drafter is None:
        return []
    if isinstance(drafter, Unanswered):
        severity = NOTE
        message = f"could not ask vLLM's registry which architectures it lists: {drafter.why}"
    elif isinstance(drafter, Registered):
        severity = INFO if drafter.known else ERROR
        found = (
            "registered in this wheel" if drafter.known else "not in this wheel's model registry"
        )
        message = f"{d_arch} -> {drafter.arch}: {found}"
    elif drafter.refusal:
        severity = ERROR
        message = f"this wheel cannot resolve the drafter's class: {drafter.refusal}"
    else:
        severity = INFO
        name = f"{drafter.cls.__module__}.{drafter.cls.__name__}"
        message = f"{d_arch} -> {drafter.arch} -> {name}"
    return [_vllm_finding(severity, "drafter-class", message, pair.drafter_file, "architectures")]


def eagle31_wheel_findings(
    pair: Pair,
    drafter: DrafterClass | Registered | Unanswered | None,
    source: str | Unanswered | None,
) -> list[Finding]:
    """``eagle31-wheel``: an EAGLE 3.1 flag that the module defining the
    drafter's class never mentions is silently ignored by this wheel."""
    if source is None or not isinstance(drafter, DrafterClass):
        return []
    module = drafter.cls.__module__
    if isinstance(source, Unanswered):
        return [
            _vllm_finding(NOTE, "eagle31-wheel", f"could not read {module}'s source: {source.why}")
        ]
    flags = pair.eagle31_flags
    ignored = [f for f in flags if f not in source]
    if ignored:
        message = (
            f"{', '.join(ignored)} set (EAGLE 3.1) but this wheel's "
            f"{module} never reads it: the head would run as plain EAGLE-3"
        )
        return [_vllm_finding(ERROR, "eagle31-wheel", message, pair.drafter_file, ignored[0])]
    message = f"{module} reads {', '.join(flags)}"
    return [_vllm_finding(INFO, "eagle31-wheel", message, pair.drafter_file, flags[0])]


#: What a drafter built without each norm flag does instead.
DROPPED_FLAG = {
    "norm_before_residual": "the first layer's residual is the raw hidden state, not the normed",
    "norm_before_fc": "input_norm.weight is skipped at load and fc takes the raw aux states",
    "fc_norm": "no fc_norm parameters are built: fc_norm.*.weight fails to load (KeyError)",
    "norm_output": "the next draft step gets the pre-norm state",
}


def _in_drafter(value: Any) -> str:
    """Where a flag stands in the drafter config the wheel built."""
    return "not in the drafter config" if value is None else f"{value} in the drafter config"


def speculators_wheel_findings(
    pair: Pair, flags: dict[str, Any] | Unanswered | None
) -> list[Finding]:
    """``speculators-wheel``: each norm flag a ``speculators`` head sets,
    against the drafter config the wheel built from it. A flag the wheel's
    converter did not carry over (0.17.1's copies only
    ``norm_before_residual``) is an error: the head loads and runs without
    the norm it was trained with, or fails at load."""
    if flags is None:
        return []
    if isinstance(flags, Unanswered):
        message = f"could not read the drafter config this wheel built: {flags.why}"
        return [_vllm_finding(NOTE, "speculators-wheel", message, pair.drafter_file)]
    raw = pair.drafter_raw
    dropped = [f for f in SPECULATORS_MATH_FLAGS if f in raw and bool(flags.get(f)) != bool(raw[f])]
    if dropped:
        message = (
            "this wheel's speculators converter does not carry "
            + ", ".join(f"{f} ({raw[f]} in the head, {_in_drafter(flags.get(f))})" for f in dropped)
            + " into the drafter: "
            + "; ".join(f"{f}: {DROPPED_FLAG[f]}" for f in dropped)
            + ". The head would be served wrong; use a wheel whose converter reads them "
            "(this series' speculators-algos patches; upstream 0.25.0)"
        )
        return [_vllm_finding(ERROR, "speculators-wheel", message, pair.drafter_file, dropped[0])]
    kept = ", ".join(f"{f} {raw[f]}" for f in SPECULATORS_MATH_FLAGS if f in raw)
    message = f"this wheel's drafter config carries the head's {kept or 'defaults'}"
    return [
        _vllm_finding(INFO, "speculators-wheel", message, pair.drafter_file, SPECULATORS_TYPE_KEY)
    ]


def layer_ids_wheel_findings(
    pair: Pair, runner: RunnerIds | Unanswered | None, refusal: str | Unanswered | None
) -> list[Finding]:
    """``layer-ids-wheel``: the ids the wheel's runner will use; an error when
    they are not the ids the rules checked, or when the wheel's target
    model refuses them at load (then the refusal, not the ids)."""
    key = pair.ids_key or LAYER_IDS_KEY

    def finding(severity: str, message: str) -> Finding:
        """A ``layer-ids-wheel`` finding on the drafter's ids key."""
        return _vllm_finding(severity, "layer-ids-wheel", message, pair.drafter_file, key)

    if runner is None:
        return []
    if isinstance(runner, Unanswered):
        return [finding(NOTE, f"could not ask the model runner which ids it uses: {runner.why}")]
    used, how = runner.ids, runner.how
    out: list[Finding] = []
    if isinstance(refusal, Unanswered):
        message = f"could not ask the target model whether it takes ids {used}: {refusal.why}"
        out.append(finding(NOTE, message))
    elif refusal:
        message = (
            f"this wheel's runner reads ids {used} ({how}) and "
            f"its target model refuses them at load: {refusal}"
        )
        return [finding(ERROR, message)]
    declared = pair.checked_ids
    if used != declared:
        message = (
            f"this wheel will use ids {used} ({how}), not the "
            f"{declared} the drafter declares in {pair.ids_key or 'no key'}"
        )
        return [*out, finding(ERROR, message)]
    return [*out, finding(INFO, f"this wheel will use ids {used} ({how})")]


def drafter_length_findings(pair: Pair, length: DrafterLength | Unanswered | None) -> list[Finding]:
    """``drafter-max-len``: where drafting stops. 0.17.1's model runner
    drafts for a batch only while its longest sequence plus
    ``num_speculative_tokens`` fits in the drafter's max model length; a
    head whose length is below the target's turns speculation off, silently,
    for every batch holding a longer request: a warning."""
    key = "max_position_embeddings"
    if length is None:
        return []
    if isinstance(length, Unanswered):
        message = f"could not ask the SpeculativeConfig for the drafter's max length: {length.why}"
        return [_vllm_finding(NOTE, "drafter-max-len", message, pair.drafter_file, key)]
    d, t = length.drafter, length.target
    if d >= t:
        message = f"drafter max length {d}: drafting runs up to the target's max model length {t}"
        return [_vllm_finding(INFO, "drafter-max-len", message, pair.drafter_file, key)]
    own = pair.drafter_cfg.get(key)
    why = f"{key} {own}" if own is not None else f"no {key} in its config"
    message = (
        f"drafting stops at {d} tokens: the drafter's max length {d} ({why}) is "
        f"below the target's max model length {t}. A batch gets no drafts once its longest "
        f"sequence plus num_speculative_tokens passes {d}; serve with --max-model-len {d} "
        f"or less, or use a head with {key} of at least {t}, to keep speculation on"
    )
    return [_vllm_finding(WARNING, "drafter-max-len", message, pair.drafter_file, key)]


def wheel_findings(pair: Pair, answers: WheelAnswers) -> list[Finding]:
    """The wheel's answers as findings (section ``vllm``), in report order;
    a question vLLM could not be asked is a ``note`` (``Unanswered``)."""
    out = installed_findings(answers.installed)
    if isinstance(answers.installed, Unanswered):
        return out
    if isinstance(answers.registry, Unanswered):
        message = f"vLLM's model registry does not import: {answers.registry.why}"
        return [*out, _vllm_finding(WARNING, "vllm", message)]
    return (
        out
        + target_class_findings(pair, answers.target)
        + override_findings(pair, answers.override)
        + spec_findings(pair, answers.spec)
        + drafter_class_findings(pair, answers.drafter)
        + eagle31_wheel_findings(pair, answers.drafter, answers.source)
        + speculators_wheel_findings(pair, answers.flags)
        + layer_ids_wheel_findings(pair, answers.runner_ids, answers.refusal)
        + drafter_length_findings(pair, answers.length)
    )


# --------------------------------------------------------------------------
# Preflight: report
# --------------------------------------------------------------------------


def target_weights_finding(pair: Pair) -> Finding:
    """``target-weights``: how many tensors and files the target's safetensors
    hold (each tensor's data range was checked when they were read)."""
    count, shards = pair.target_weights
    return Finding(
        INFO,
        "target-weights",
        "target",
        f"{count} tensors in {shards} safetensors file(s), each tensor's data inside its file"
        if count
        else "no *.safetensors in the target directory: its weights are not checked",
        str(pair.target_dir),
    )


def read_pair(target_dir: Path, drafter_dir: Path) -> tuple[list[Finding], Pair | None]:
    """Resolve both arguments (``resolve_model_arg``) and read the pair.

    Returns a ``hub-id`` finding for each Hub id resolved from the cache,
    and the pair; on bad input (``InputError``) the findings end with one
    ``input`` error naming the file, and the pair is ``None``.
    """
    found: list[Finding] = []
    try:
        dirs = []
        for arg, role in ((target_dir, "target"), (drafter_dir, "drafter")):
            path, how = resolve_model_arg(str(arg), role)
            dirs.append(path)
            if how:
                found.append(Finding(INFO, "hub-id", "input", how, str(path)))
        return found, load_pair(dirs[0], dirs[1])
    except InputError as exc:
        return [*found, Finding(ERROR, "input", "input", str(exc))], None


@dataclass(frozen=True)
class Report:
    """A preflight's outcome (``preflight_report``): the findings in report
    order, and ``vllm_asked``: the installed vLLM imported and was asked
    about the pair (``False`` with ``--no-vllm``, when vLLM does not import,
    or when bad input stopped the preflight first). The verdict reads it;
    no finding's text is parsed for it."""

    findings: list[Finding]
    vllm_asked: bool


def preflight_report(target_dir: Path, drafter_dir: Path, use_vllm: bool = True) -> Report:
    """All findings for a pair: the file rules, then the installed vLLM's answers.

    ``target_dir`` and ``drafter_dir`` are local directories or Hugging Face
    Hub ids (``resolve_model_arg``). Never raises for bad input: a missing
    directory, bad JSON, a truncated or missing safetensors file, or swapped
    arguments become one ``error`` finding (section ``input``) naming the
    file, and nothing else is checked. The pair is read once (``Pair``);
    vLLM is asked once (``ask_vllm``); the findings combine both.
    """
    found, pair = read_pair(target_dir, drafter_dir)
    if pair is None:
        return Report(found, vllm_asked=False)
    swapped = swapped_arguments(pair)
    if swapped is not None:
        return Report([*found, swapped], vllm_asked=False)
    answers = ask_vllm(pair) if use_vllm else None
    found += check_pair(pair, answers.override if answers else None)
    found.append(target_weights_finding(pair))
    if answers is None:
        message = "installed vLLM not asked (--no-vllm): file rules only"
        return Report([*found, Finding(INFO, "vllm", "vllm", message)], vllm_asked=False)
    asked = not isinstance(answers.installed, Unanswered)
    return Report(found + wheel_findings(pair, answers), vllm_asked=asked)


def preflight(target_dir: Path, drafter_dir: Path, use_vllm: bool = True) -> list[Finding]:
    """The findings of ``preflight_report``, alone."""
    return preflight_report(target_dir, drafter_dir, use_vllm).findings


def exit_code(findings: Sequence[Finding], strict: bool = False) -> int:
    """0 when no error (warnings allowed), 1 on an error; with ``strict`` warnings count."""
    failing = {ERROR, WARNING} if strict else {ERROR}
    return 1 if any(f.severity in failing for f in findings) else 0


def render(report: Report, target_dir: Path, drafter_dir: Path, strict: bool) -> str:
    """The human report: one line per finding, then a summary line."""
    findings = report.findings
    lines = [f"preflight: target {target_dir}", f"           drafter {drafter_dir}"]

    def short(path: str) -> str:
        """``path`` relative to the two directories named above."""
        for label, d in (("drafter", str(drafter_dir)), ("target", str(target_dir))):
            if path == d or path.startswith(d + os.sep):
                return label + path[len(d) :]
        return path

    for f in findings:
        where = f"{short(f.file)}{': ' + f.key if f.key else ''}"
        lines.append(f"  {f.severity:<7} {f.rule:<20} {f.message}")
        if where:
            lines.append(f"  {'':<7} {'':<20} [{where}]")
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    code = exit_code(findings, strict)
    lines.append(
        f"preflight: {counts[ERROR]} error(s), {counts[WARNING]} warning(s), "
        f"{counts[NOTE]} note(s){' (--strict)' if strict else ''}: {verdict(report, code)}"
    )
    return "\n".join(lines)


def verdict(report: Report, code: int) -> str:
    """``FAILED`` for a nonzero ``code``; else ``OK``, or, when the installed
    vLLM was not asked (``Report.vllm_asked``; ``--no-vllm``), ``OK (file
    rules only: vLLM not asked)``."""
    if code:
        return "FAILED"
    return "OK" if report.vllm_asked else "OK (file rules only: vLLM not asked)"


def to_json(report: Report, target_dir: Path, drafter_dir: Path, strict: bool) -> str:
    """The same findings as one JSON object, for fleet automation."""
    findings = report.findings
    return json.dumps(
        {
            "target": str(target_dir),
            "drafter": str(drafter_dir),
            "strict": strict,
            "exit_code": exit_code(findings, strict),
            "verdict": verdict(report, exit_code(findings, strict)),
            "counts": {s: sum(f.severity == s for f in findings) for s in SEVERITIES},
            "findings": [asdict(f) for f in findings],
        },
        indent=2,
    )


def run_preflight(
    target: str, drafter: str, *, as_json: bool = False, strict: bool = False, use_vllm: bool = True
) -> int:
    """Print the report (or JSON) to stdout; return the exit code."""
    td, dd = Path(target), Path(drafter)
    report = preflight_report(td, dd, use_vllm)
    print(to_json(report, td, dd, strict) if as_json else render(report, td, dd, strict))
    return exit_code(report.findings, strict)


def add_preflight_arguments(ap: argparse.ArgumentParser) -> None:
    """The preflight's flags, shared with ``python -m vpq preflight``."""
    ap.add_argument("--model", metavar="TARGET_DIR", help="target checkpoint directory")
    ap.add_argument("--drafter", metavar="HEAD_DIR", help="EAGLE-3 head directory")
    ap.add_argument("--json", action="store_true", help="print the findings as JSON")
    ap.add_argument("--strict", action="store_true", help="warnings count as errors")
    ap.add_argument(
        "--no-vllm", action="store_true", help="do not import the installed vLLM; file rules only"
    )


#: The preflight's usage, as every entry prints it above a usage error.
PREFLIGHT_USAGE = "preflight --model TARGET_DIR --drafter HEAD_DIR [--json] [--strict] [--no-vllm]"


def preflight_usage_error(ns: argparse.Namespace) -> str:
    """Why the parsed flags make no preflight ("" when they make one): the
    one usage check of every entry (``preflight_entry``)."""
    if ns.model and ns.drafter:
        return ""
    return "preflight needs --model TARGET_DIR and --drafter HEAD_DIR"


def preflight_entry(ns: argparse.Namespace) -> int:
    """The preflight for parsed flags (``add_preflight_arguments``), the one
    entry of ``verify_install.py --model --drafter``, ``python -m vpq
    preflight`` and the tool's CLI, so all print the same and exit the same.

    A usage error is the usage line and one ``preflight: error:`` line on
    stderr, exit 2. An unexpected exception is one line on stderr, exit 1,
    never a traceback. Otherwise ``run_preflight``'s report and exit code.
    """
    problem = preflight_usage_error(ns)
    if problem:
        print(f"usage: {PREFLIGHT_USAGE}\npreflight: error: {problem}", file=sys.stderr)
        return 2
    try:
        return run_preflight(
            ns.model, ns.drafter, as_json=ns.json, strict=ns.strict, use_vllm=not ns.no_vllm
        )
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        print(
            f"preflight: FAILED: unexpected {_first_line(exc)} (a bug in this script; "
            "please report it with the two config.json files)",
            file=sys.stderr,
        )
        return 1


def preflight_main(argv: list[str], prog: str = "vpq preflight") -> int:
    """The preflight alone (``python -m vpq preflight`` in the repository,
    through ``preflight_entry``); unknown flags are argparse's usage error,
    exit 2. Needs only the standard library, so any Python runs it, and the
    Python that runs it decides which vLLM is asked."""
    ap = argparse.ArgumentParser(
        prog=prog, description="Preflight a target + EAGLE-3 drafter pair offline."
    )
    add_preflight_arguments(ap)
    return preflight_entry(ap.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """``verify_install.py``: the install check, or with any preflight flag
    the preflight (``preflight_entry``). Returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="verify_install.py",
        description="Check the installed patched vLLM, or (with --model and --drafter) "
        "preflight a target + EAGLE-3 drafter pair offline.",
    )
    add_preflight_arguments(ap)
    ap.add_argument("--advisories", action="store_true", help="list every advisory's status")
    ap.add_argument("--vex", metavar="PATH", help=f"the {VEX_FILE} to read (default: beside this)")
    ns = ap.parse_args(argv)  # unknown flags: usage error, exit 2
    if ns.model or ns.drafter or ns.json or ns.strict or ns.no_vllm:
        return preflight_entry(ns)
    try:
        check(find_vex(ns.vex), ns.advisories)
    except Failed as exc:
        print(f"verify_install: FAILED: {exc}", file=sys.stderr)
        return 1
    print("verify_install: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
