#!/usr/bin/env python3
"""Check a patched vLLM install, and a target + EAGLE-3 drafter pair, on a serving host.

Standard library only: copy this one file to the host. Two modes::

    python verify_install.py
    python verify_install.py --model TARGET_DIR --drafter HEAD_DIR [--json] [--strict] [--no-vllm]

Without ``--model``/``--drafter`` it prints the installed vLLM version and the
patch manifest (upstream pin, each patch), then checks that the version's
local label matches the manifest and that ``supports_eagle3`` holds for every
architecture the manifest claims. Exits 0 when all holds, else 1 with a
one-line reason on stderr.

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

The rules (``check_pair``) need no vLLM; the repository's
``PYTHONPATH=scripts python -m vpq preflight`` runs ``preflight_main`` from
this file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as md
import json
import os
import re
import struct
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "vpq_manifest.json"
MODULES = {
    "KimiK25ForConditionalGeneration": "vllm.model_executor.models.kimi_k25",
    "DeepseekV3ForCausalLM": "vllm.model_executor.models.deepseek_v2",
    "DeepseekV2ForCausalLM": "vllm.model_executor.models.deepseek_v2",
}


class Failed(Exception):
    pass


def check() -> None:
    try:
        dist = md.distribution("vllm")
    except md.PackageNotFoundError:
        raise Failed("vllm is not installed in this Python") from None
    text = dist.read_text(MANIFEST)
    if text is None:
        raise Failed(f"vllm {dist.version} has no {MANIFEST}: this is not a patch-queue build")
    man = json.loads(text)
    up = man["upstream"]
    print(f"vllm {dist.version}")
    print(f"  upstream: vllm {up['version']} ({up['tag']}, commit {up['commit']})")
    print(f"  upstream wheel: {up['wheel']['filename']} sha256 {up['wheel']['sha256']}")
    for p in man["patches"]:
        print(f"  patch: {p['name']}  sha256 {p['sha256'][:16]}  [{p.get('upstream_status')}]")
    if dist.version != man["version"]:
        raise Failed(f"installed version {dist.version} != manifest version {man['version']}")
    if dist.version.partition("+")[2] != man["local_label"]:
        raise Failed(f"local label of {dist.version} != manifest label {man['local_label']}")
    import vllm

    if vllm.__version__ != dist.version:
        raise Failed(f"vllm.__version__ {vllm.__version__} != installed {dist.version}")
    from vllm.model_executor.models.interfaces import supports_eagle3

    for arch in man.get("eagle3_architectures", []):
        module = MODULES.get(arch)
        if module is None:
            raise Failed(f"manifest claims {arch}, which this check does not know")
        cls = getattr(importlib.import_module(module), arch)
        if not supports_eagle3(cls):
            raise Failed(f"{arch} does not support EAGLE-3 in this install")
        print(f"  supports_eagle3({arch}) = True")


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
#: The text model's class by ``model_type``, for a ``text_config`` that names
#: no architectures.
TEXT_ARCHS = {"deepseek_v3": "DeepseekV3ForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM"}


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


@dataclass
class Pair:
    """What the rules know about a target + drafter pair (filled by ``load_pair``)."""

    target_dir: Path
    drafter_dir: Path
    target_cfg: dict[str, Any]
    text_cfg: dict[str, Any]
    drafter_cfg: dict[str, Any]
    tensors: dict[str, Tensor] = field(default_factory=dict)  # normalised name -> tensor
    layer_ids: list[int] | None = None  # the ids the drafter declares (None: absent)
    layer_ids_key: str = ""  # where they come from
    num_layers: int = 0
    target_hidden: int = 0
    target_weights: tuple[int, int] = (0, 0)  # the target's tensors and shard files


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


def default_layer_ids(num_layers: int) -> list[int]:
    """The target's default aux layers, ``(2, N // 2, N - 3)``
    (``get_eagle3_aux_hidden_state_layers`` in vLLM's Llama and DeepSeek models)."""
    return [2, num_layers // 2, num_layers - 3]


def load_pair(target_dir: Path, drafter_dir: Path) -> Pair:
    """Read both ``config.json`` files and the drafter's tensor headers.

    Raises ``InputError`` (one line naming the file) for a missing directory
    or file, bad JSON, or a truncated safetensors header.
    """
    for role, d in (("target", target_dir), ("drafter", drafter_dir)):
        if not d.is_dir():
            raise InputError(f"{d}: {role} directory does not exist")
    tcfg = read_json(target_dir / "config.json")
    dcfg = read_json(drafter_dir / "config.json")
    pair = Pair(target_dir, drafter_dir, tcfg, text_config(tcfg), dcfg)
    pair.tensors = {normalise(n): t for n, t in read_checkpoint_tensors(drafter_dir).items()}
    target_tensors = read_checkpoint_tensors(target_dir)
    pair.target_weights = (len(target_tensors), len({t.file for t in target_tensors.values()}))
    return pair


def looks_like_head(cfg: dict[str, Any]) -> bool:
    """An EAGLE head's config: an ``Eagle`` architecture, or the keys only
    drafters carry (``eagle_config``, ``draft_vocab_size``, the layer ids)."""
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    keys = ("eagle_config", "draft_vocab_size", LAYER_IDS_KEY)
    return "eagle" in arch.lower() or any(k in cfg for k in keys)


def looks_like_target(cfg: dict[str, Any]) -> bool:
    """A Kimi-K2.5 / DeepSeek target's config: an architecture the wheel's
    manifest can claim (``MODULES``), or a multimodal ``text_config``."""
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else ""
    return arch in MODULES or isinstance(cfg.get("text_config"), dict)


def swapped_arguments(pair: Pair) -> Finding | None:
    """One ``error`` (rule ``swapped-arguments``) when ``--model`` names an
    EAGLE head: the two directories were given the wrong way round, or the
    target is not a Kimi-K2.5 / DeepSeek model at all. ``None`` otherwise."""
    if not looks_like_head(pair.target_cfg) or looks_like_target(pair.target_cfg):
        return None
    t_arch = (pair.target_cfg.get("architectures") or ["?"])[0]
    d_arch = (pair.drafter_cfg.get("architectures") or ["?"])[0]
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


def _int(cfg: dict[str, Any], key: str) -> int | None:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def check_pair(pair: Pair) -> list[Finding]:
    """Apply every file-only rule to ``pair``; returns the findings in report order.

    Rules (rule id: where it comes from):

    - ``target``: architecture, text ``model_type``, ``num_hidden_layers`` N,
      ``hidden_size`` of the target's text config (``text_config`` for
      Kimi-K2.5). ``target-config`` error when N or the hidden size is missing.
    - ``drafter``: architecture (``drafter-config`` error when missing);
      ``mtp-trap``: ``model_type`` in ``MTP_REWRITTEN_TYPES`` is rewritten to
      ``deepseek_mtp`` by ``SpeculativeConfig.hf_config_override``
      (vllm/config/speculative.py); ``mla``: an MLA head recognised by
      ``kv_lora_rank`` (info), or an MLA ``model_type`` / DeepSeek
      architecture without it (error); ``eagle31`` / ``eagle31-weights``:
      each EAGLE 3.1 flag against its weights (``eagle31_findings``).
    - ``layer-ids``: ``layer-ids-source`` (top level, ``eagle_config``, or
      ``layer-ids-absent``: the target's default ``(2, N//2, N-3)`` is used,
      the silent default of vllm PR #50170); ``layer-ids-conflict`` (both
      places, different ids); ``layer-ids-type`` / ``layer-ids-empty``;
      ``layer-id-range`` (each id in ``0..N``; vllm #46788);
      ``layer-id-duplicate``; ``layer-id-count`` (``fc.weight`` is
      ``[hidden, k * target_hidden]``: k ids); ``layer-ids-convention`` note
      (ids that include N, or equal the default shifted by one: the
      "output of layer i" convention, sglang PR #25454, vllm #43671).
    - ``sizes``: ``target-hidden-size`` (``target_hidden_size``, else
      ``hidden_size``, against the target's); ``fc-width`` (``fc.weight``
      present, 2-D, ``[hidden_size, k * target_hidden]``); ``fc-states``
      warning when k is not the 3 that vLLM's ``Eagle3LlamaForCausalLM``
      builds; ``draft-vocab`` (``draft_vocab_size`` against ``lm_head.weight``
      rows, ``d2t`` length, ``t2d`` length = ``vocab_size``, and ``d2t`` needed
      when the draft vocabulary is smaller); ``embeddings``
      (``embed_tokens.weight`` ``[vocab_size, hidden_size]``, or shared from
      the target, which needs the same ``vocab_size``).
    - ``weights``: ``no-weights`` error when the head has no safetensors.
    """
    out: list[Finding] = []
    tfile = str(pair.target_dir / "config.json")
    dfile = str(pair.drafter_dir / "config.json")
    tc, dc = pair.text_cfg, pair.drafter_cfg
    tkey = "text_config." if tc is not pair.target_cfg else ""

    def add(sev: str, rule: str, section: str, msg: str, file: str = dfile, key: str = "") -> None:
        out.append(Finding(sev, rule, section, msg, file, key))

    # target
    t_arch = (pair.target_cfg.get("architectures") or ["?"])[0]
    n = _int(tc, "num_hidden_layers")
    th = _int(tc, "hidden_size")
    t_vocab = _int(tc, "vocab_size")
    if n is None or th is None:
        missing = [k for k, v in (("num_hidden_layers", n), ("hidden_size", th)) if v is None]
        add(
            ERROR,
            "target-config",
            "target",
            f"the target config has no integer {' or '.join(tkey + k for k in missing)}",
            tfile,
            tkey + missing[0],
        )
        return out
    pair.num_layers, pair.target_hidden = n, th
    add(
        INFO,
        "target",
        "target",
        f"{t_arch}, text model_type {tc.get('model_type')}, N = {n} layers, hidden {th}",
        tfile,
        "architectures",
    )

    # drafter
    archs = dc.get("architectures")
    if not (isinstance(archs, list) and archs and isinstance(archs[0], str)):
        add(
            ERROR,
            "drafter-config",
            "drafter",
            "the drafter config has no architectures list",
            key="architectures",
        )
        return out
    d_arch, d_type = archs[0], dc.get("model_type")
    add(INFO, "drafter", "drafter", f"{d_arch}, model_type {d_type}", key="architectures")
    if d_type in MTP_REWRITTEN_TYPES:
        add(
            ERROR,
            "mtp-trap",
            "drafter",
            f"model_type {d_type} is rewritten to deepseek_mtp (architectures DeepSeekMTPModel) "
            "by vLLM's SpeculativeConfig.hf_config_override (vllm/config/speculative.py): the "
            "EAGLE-3 head would load as an MTP module; type an MLA head deepseek_v2 or kimi_k2",
            key="model_type",
        )
    if "kv_lora_rank" in dc:
        add(
            INFO,
            "mla",
            "drafter",
            f"MLA head (kv_lora_rank {dc.get('kv_lora_rank')}, model_type {d_type})",
            key="kv_lora_rank",
        )
    elif d_type in MLA_TYPES or "deepseek" in d_arch.lower():
        add(
            ERROR,
            "mla",
            "drafter",
            f"{d_arch} / model_type {d_type} is an MLA head but the config has no kv_lora_rank "
            "(nor the other MLA shapes): vLLM cannot build its attention",
            key="kv_lora_rank",
        )
    if not pair.tensors:
        add(
            ERROR,
            "no-weights",
            "drafter",
            "no *.safetensors (and no model.safetensors.index.json) in the drafter directory: "
            "nothing to load, tensor checks skipped",
            str(pair.drafter_dir),
            "",
        )
    else:
        out += eagle31_findings(pair)

    # layer ids
    ids, src = declared_layer_ids(dc)
    nested = dc.get("eagle_config") if isinstance(dc.get("eagle_config"), dict) else {}
    if (
        src == LAYER_IDS_KEY
        and nested.get(LAYER_IDS_KEY) is not None
        and nested[LAYER_IDS_KEY] != ids
    ):
        add(
            WARNING,
            "layer-ids-conflict",
            "layer-ids",
            f"eagle_config.{LAYER_IDS_KEY} = {nested[LAYER_IDS_KEY]} differs from the top-level "
            f"{ids}; the top level wins",
            key=f"eagle_config.{LAYER_IDS_KEY}",
        )
    if ids is None:
        ids = default_layer_ids(n)
        add(
            WARNING,
            "layer-ids-absent",
            "layer-ids",
            f"no {LAYER_IDS_KEY} at the top level or under eagle_config: vLLM uses the target's "
            f"default (2, N//2, N-3) = {ids} (vllm PR #50170); was the head trained on those?",
            key=LAYER_IDS_KEY,
        )
        src_text = "none declared: the target's default"
    else:
        src_text = f"from {'the top-level ' if src == LAYER_IDS_KEY else ''}{src}"
    if not (
        isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        add(
            ERROR,
            "layer-ids-type",
            "layer-ids",
            f"{ids!r} is not a list of integers",
            key=src or LAYER_IDS_KEY,
        )
        return out
    if not ids:
        add(
            ERROR,
            "layer-ids-empty",
            "layer-ids",
            "an explicit empty list: the head would read no aux hidden states (not the same as "
            "absent; vLLM 0.17.1 silently falls back to the default)",
            key=src,
        )
        return out
    pair.layer_ids, pair.layer_ids_key = list(ids), src
    add(INFO, "layer-ids-source", "layer-ids", f"ids {ids} ({src_text})", key=src or LAYER_IDS_KEY)
    key = src or LAYER_IDS_KEY
    bad = [i for i in ids if not 0 <= i <= n]
    if bad:
        add(
            ERROR,
            "layer-id-range",
            "layer-ids",
            f"id(s) {bad} outside 0..{n} (N = {n}: id i is the residual stream entering layer i, "
            f"id N the stream after the last layer)",
            key=key,
        )
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        add(ERROR, "layer-id-duplicate", "layer-ids", f"id(s) {dups} repeated in {ids}", key=key)
    if not bad and (n in ids or ids == [i + 1 for i in default_layer_ids(n)]):
        why = f"include N = {n}" if n in ids else "equal the default (2, N//2, N-3) plus one"
        add(
            NOTE,
            "layer-ids-convention",
            "layer-ids",
            f"ids {ids} {why}: if the trainer counted id i as the OUTPUT of layer i, every id "
            f"is one too high for vLLM (id i = the stream entering layer i; sglang PR #25454, "
            f"vllm #43671)",
            key=key,
        )

    # sizes
    t_key = "target_hidden_size" if "target_hidden_size" in dc else "hidden_size"
    d_target_hidden = _int(dc, t_key)
    d_hidden = _int(dc, "hidden_size")
    if d_target_hidden != th:
        add(
            ERROR,
            "target-hidden-size",
            "sizes",
            f"{t_key} = {d_target_hidden} but the target's hidden_size is {th}",
            key=t_key,
        )
    else:
        add(
            INFO,
            "target-hidden-size",
            "sizes",
            f"{t_key} {th} = the target's hidden_size",
            key=t_key,
        )
    if not pair.tensors:
        return out
    fc = pair.tensors.get("fc.weight")
    k = None
    if fc is None:
        add(
            ERROR,
            "fc-width",
            "sizes",
            "no fc.weight: this is not an EAGLE-3 head",
            str(pair.drafter_dir),
            "fc.weight",
        )
    elif (
        len(fc.shape) != 2
        or fc.shape[0] != d_hidden
        or not d_target_hidden
        or fc.shape[1] % d_target_hidden
    ):
        add(
            ERROR,
            "fc-width",
            "sizes",
            f"fc.weight is {fc.shape}, expected [hidden_size = {d_hidden}, "
            f"k * {t_key} = k * {d_target_hidden}]",
            str(pair.drafter_dir / fc.file),
            fc.name,
        )
    else:
        k = fc.shape[1] // d_target_hidden
        add(
            INFO,
            "fc-width",
            "sizes",
            f"fc.weight {fc.shape} = [hidden_size, {k} * {d_target_hidden}]: {k} aux states",
            str(pair.drafter_dir / fc.file),
            fc.name,
        )
        if k != len(ids):
            add(
                ERROR,
                "layer-id-count",
                "layer-ids",
                f"{len(ids)} ids {ids} but fc.weight {fc.shape} takes k = {k} aux states "
                f"({fc.shape[1]} = {k} * {d_target_hidden})",
                key=key,
            )
        if k != UPSTREAM_FC_STATES:
            add(
                WARNING,
                "fc-states",
                "sizes",
                f"fc.weight takes {k} aux states; vLLM's Eagle3LlamaForCausalLM builds fc for "
                f"{UPSTREAM_FC_STATES} (llama_eagle3.py), so loading may fail",
                str(pair.drafter_dir / fc.file),
                fc.name,
            )
    vocab = _int(dc, "vocab_size")
    dv = _int(dc, "draft_vocab_size") or vocab
    dv_key = "draft_vocab_size" if "draft_vocab_size" in dc else "vocab_size"

    def tensor_where(t: Tensor) -> str:
        return str(pair.drafter_dir / t.file)

    lm = pair.tensors.get("lm_head.weight")
    if lm is None:
        add(
            ERROR,
            "draft-vocab",
            "sizes",
            "no lm_head.weight in the head",
            str(pair.drafter_dir),
            "lm_head.weight",
        )
    elif lm.shape[:1] != [dv]:
        add(
            ERROR,
            "draft-vocab",
            "sizes",
            f"lm_head.weight is {lm.shape} but {dv_key} = {dv}",
            tensor_where(lm),
            lm.name,
        )
    d2t, t2d = pair.tensors.get("d2t"), pair.tensors.get("t2d")
    if d2t is not None and d2t.shape != [dv]:
        add(
            ERROR,
            "draft-vocab",
            "sizes",
            f"d2t is {d2t.shape} but {dv_key} = {dv}",
            tensor_where(d2t),
            d2t.name,
        )
    if t2d is not None and t2d.shape != [vocab]:
        add(
            ERROR,
            "draft-vocab",
            "sizes",
            f"t2d is {t2d.shape} but vocab_size = {vocab}",
            tensor_where(t2d),
            t2d.name,
        )
    if d2t is None and dv != vocab:
        add(
            ERROR,
            "draft-vocab",
            "sizes",
            f"draft_vocab_size {dv} < vocab_size {vocab} but no d2t maps draft ids to target ids",
            key=dv_key,
        )
    if not any(f.rule == "draft-vocab" for f in out):
        add(
            INFO,
            "draft-vocab",
            "sizes",
            f"{dv_key} {dv}: lm_head.weight rows"
            + (", d2t" if d2t is not None else "")
            + (", t2d" if t2d is not None else "")
            + " agree",
            key=dv_key,
        )
    emb = pair.tensors.get("embed_tokens.weight")
    if emb is not None:
        if emb.shape != [vocab, d_hidden]:
            add(
                ERROR,
                "embeddings",
                "sizes",
                f"embed_tokens.weight is {emb.shape}, expected "
                f"[vocab_size = {vocab}, hidden_size = {d_hidden}]",
                tensor_where(emb),
                emb.name,
            )
        else:
            add(
                INFO,
                "embeddings",
                "sizes",
                f"own embed_tokens.weight {emb.shape}",
                tensor_where(emb),
                emb.name,
            )
    elif vocab != t_vocab:
        add(
            ERROR,
            "embeddings",
            "sizes",
            f"no embed_tokens.weight, so vLLM shares the target's embeddings, but vocab_size "
            f"{vocab} != the target's {t_vocab}",
            key="vocab_size",
        )
    else:
        add(
            INFO,
            "embeddings",
            "sizes",
            "no embed_tokens.weight: shared with the target",
            str(pair.drafter_dir),
            "embed_tokens.weight",
        )
    return out


def _flag(cfg: dict[str, Any], flag: str) -> bool:
    """An EAGLE 3.1 flag as the series' drafters read it: ``norm_before_fc``
    under ``eagle_config`` first, then at the top level; the others at the
    top level."""
    nested = cfg.get("eagle_config")
    if flag == "norm_before_fc" and isinstance(nested, dict) and flag in nested:
        return bool(nested[flag])
    return bool(cfg.get(flag))


def aux_state_count(pair: Pair) -> tuple[int, int]:
    """``(k, target_hidden)``: how many aux states ``fc`` takes (its width over
    the drafter's ``target_hidden_size``, else the declared ids, else 3) and
    the width of one."""
    dc = pair.drafter_cfg
    th = _int(dc, "target_hidden_size") or _int(dc, "hidden_size") or 0
    fc = pair.tensors.get("fc.weight")
    if fc is not None and len(fc.shape) == 2 and th and fc.shape[1] % th == 0:
        return fc.shape[1] // th, th
    ids, _ = declared_layer_ids(dc)
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
    dfile = str(pair.drafter_dir / "config.json")
    k, th = aux_state_count(pair)
    out: list[Finding] = []

    def add(sev: str, rule: str, msg: str, key: str) -> None:
        out.append(Finding(sev, rule, "drafter", msg, dfile, key))

    dc, tensors = pair.drafter_cfg, pair.tensors
    has_fc_norm = "fc_norm.weight" in tensors or any(FC_NORM.fullmatch(n) for n in tensors)
    problems = {
        "fc_norm": _fc_norm_problem(pair, k, th),
        "norm_before_fc": ""
        if tensors.get("input_norm.weight", Tensor("", "", [], "")).shape == [k * th]
        else f"norm_before_fc needs input_norm.weight [{k * th}] (one RMSNorm over fc's "
        f"{k} x {th} input); the checkpoint has "
        + (f"{tensors['input_norm.weight'].shape}" if "input_norm.weight" in tensors else "none"),
        "norm_output": "" if "norm.weight" in tensors else "the checkpoint has no norm.weight",
    }
    present = {
        "fc_norm": f"fc_norm.0.weight ... fc_norm.{k - 1}.weight, [{th}] each",
        "norm_before_fc": f"input_norm.weight [{k * th}]",
        "norm_output": "norm.weight",
    }
    for flag in EAGLE31_FLAGS:
        if not _flag(dc, flag):
            continue
        if problems[flag]:
            add(ERROR, "eagle31-weights", f"{flag} is set (EAGLE 3.1): {problems[flag]}", flag)
        else:
            add(INFO, "eagle31", f"EAGLE 3.1: {flag} set, {present[flag]} present", flag)
    for flag, there, fate in (
        ("fc_norm", has_fc_norm, "vLLM does not build the norms, so they are not applied"),
        ("norm_before_fc", "input_norm.weight" in tensors, "vLLM's loader skips input_norm"),
    ):
        if there and not _flag(dc, flag):
            what = "fc_norm weights" if flag == "fc_norm" else "input_norm.weight"
            add(
                WARNING,
                "eagle31-weights",
                f"the checkpoint has {what} but {flag} is not set: {fate}",
                flag,
            )
    return out


# --------------------------------------------------------------------------
# Preflight: the installed vLLM
# --------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """vLLM logs to stdout; keep stdout for the report (and ``--json``)."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


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


def ask_vllm(pair: Pair, findings: list[Finding]) -> list[Finding]:
    """What the installed vLLM does with the pair; findings in section ``vllm``.

    Imports ``vllm`` (with ``VLLM_LOGGING_LEVEL=ERROR`` unless set) and asks:

    - ``vllm``: version and whether it carries a patch-queue manifest; an
      ``error`` when vLLM does not import (the rules above still ran, the
      wheel's verdicts are unknown).
    - ``target-eagle3``: the registry's class for the target architecture and
      ``supports_eagle3`` on it (vllm/model_executor/models/interfaces.py).
    - ``speculative-config``: ``SpeculativeConfig(method="eagle3")`` built on
      a ``ModelConfig`` of the target with the drafter (vllm/config/
      speculative.py): the allowlist, the drafter's config class, the
      architecture rename. Its error is the refusal.
    - ``drafter-class``: the class the registry resolves the drafter to
      (``ModelRegistry.resolve_model_cls``), or why it does not.
    - ``mtp-trap``: confirmed or lifted by calling the wheel's own
      ``SpeculativeConfig.hf_config_override`` on the drafter's config.
    - ``eagle31-wheel``: an EAGLE 3.1 flag (``fc_norm``, ``norm_output``) that
      the module of the resolved drafter class never mentions is ignored by
      this wheel: an error.
    - ``layer-ids-wheel``: the ids the wheel will use, from the model
      runner's ``_get_eagle3_aux_layers_from_config``
      (vllm/v1/worker/gpu_model_runner.py), falling back to the target's
      default; an error when they differ from the drafter's declared ids,
      or when the target's text model refuses them
      (``set_aux_hidden_state_layers`` raises ``ValueError`` for ids outside
      ``0..N``): then the refusal is reported, not the ids.
    """
    out: list[Finding] = []

    def add(sev: str, rule: str, msg: str, file: str = "", key: str = "") -> None:
        out.append(Finding(sev, rule, "vllm", msg, file, key))

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    with _quiet():
        try:
            import vllm  # noqa: F401

            version = md.version("vllm")
        except Exception as exc:  # noqa: BLE001 - any import failure means "not usable"
            add(
                ERROR,
                "vllm",
                f"vLLM does not import in this Python ({sys.executable}: {_first_line(exc)}): "
                "only the file rules ran, and the wheel's verdicts (registry, "
                "SpeculativeConfig, layer ids) are unknown. Run the preflight with the "
                "serving host's Python, or pass --no-vllm to check the files alone",
            )
            return out
        try:
            manifest = md.distribution("vllm").read_text(MANIFEST)
        except Exception:  # noqa: BLE001
            manifest = None
        build = "patch-queue build" if manifest else "no vpq_manifest.json: not a patch-queue build"
        add(INFO, "vllm", f"vllm {version} ({build})")
        _ask_vllm_pair(pair, findings, add)
    return out


def _ask_vllm_pair(pair: Pair, findings: list[Finding], add: Any) -> None:
    tfile = str(pair.target_dir / "config.json")
    dfile = str(pair.drafter_dir / "config.json")
    try:
        from vllm.model_executor.models.interfaces import supports_eagle3
        from vllm.model_executor.models.registry import ModelRegistry
    except Exception as exc:  # noqa: BLE001
        add(WARNING, "vllm", f"vLLM's model registry does not import: {_first_line(exc)}")
        return
    t_arch = (pair.target_cfg.get("architectures") or ["?"])[0]
    try:
        t_cls = ModelRegistry._try_load_model_cls(t_arch)
    except Exception:  # noqa: BLE001
        t_cls = None
    if t_cls is None:
        add(
            ERROR,
            "target-eagle3",
            f"this wheel's registry has no model class for {t_arch}",
            tfile,
            "architectures",
        )
    elif not supports_eagle3(t_cls):
        add(
            ERROR,
            "target-eagle3",
            f"{t_arch} ({t_cls.__module__}) does not implement "
            "SupportsEagle3 in this wheel: EAGLE-3 is refused for this target",
            tfile,
            "architectures",
        )
    else:
        add(
            INFO,
            "target-eagle3",
            f"{t_arch} -> {t_cls.__module__}.{t_cls.__name__}: supports_eagle3 holds",
            tfile,
            "architectures",
        )

    # the deepseek_v3 -> MTP trap, as this wheel's override does it
    try:
        from transformers import PretrainedConfig
        from vllm.config import SpeculativeConfig

        probe = PretrainedConfig(**{k: v for k, v in pair.drafter_cfg.items() if k != "model_type"})
        probe.model_type = pair.drafter_cfg.get("model_type")
        probe = SpeculativeConfig.hf_config_override(probe)
        rewritten = getattr(probe, "model_type", None) != pair.drafter_cfg.get("model_type")
        for f in findings:
            if f.rule == "mtp-trap":
                if rewritten:
                    f.message += (
                        f"; confirmed: this wheel rewrites it to {probe.model_type} "
                        f"{getattr(probe, 'architectures', None)}"
                    )
                else:
                    f.severity = INFO
                    f.message = (
                        f"model_type {pair.drafter_cfg.get('model_type')} is NOT "
                        "rewritten to MTP by this wheel's hf_config_override"
                    )
    except Exception as exc:  # noqa: BLE001
        add(
            NOTE,
            "mtp-trap",
            f"could not run the wheel's hf_config_override: {_first_line(exc)}",
            dfile,
            "model_type",
        )

    sc = None
    try:
        from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

        mc = ModelConfig(model=str(pair.target_dir), skip_tokenizer_init=True)
        sc = SpeculativeConfig(
            target_model_config=mc,
            target_parallel_config=ParallelConfig(),
            method="eagle3",
            model=str(pair.drafter_dir),
            num_speculative_tokens=1,
        )
        add(
            INFO,
            "speculative-config",
            "SpeculativeConfig(method=eagle3) accepts the pair",
            dfile,
            "architectures",
        )
    except Exception as exc:  # noqa: BLE001
        add(
            ERROR,
            "speculative-config",
            f"this wheel refuses the pair in SpeculativeConfig(method=eagle3): {_first_line(exc)}",
            dfile,
            "architectures",
        )

    d_arch = (pair.drafter_cfg.get("architectures") or ["?"])[0]
    if sc is not None:
        try:
            cls, arch = ModelRegistry.resolve_model_cls(
                sc.draft_model_config.architectures, sc.draft_model_config
            )
            add(
                INFO,
                "drafter-class",
                f"{d_arch} -> {arch} -> {cls.__module__}.{cls.__name__}",
                dfile,
                "architectures",
            )
            _ask_eagle31(pair, cls, add)
        except Exception as exc:  # noqa: BLE001
            add(
                ERROR,
                "drafter-class",
                f"this wheel cannot resolve the drafter's class: {_first_line(exc)}",
                dfile,
                "architectures",
            )
    else:
        eagle3_arch = (
            d_arch
            if d_arch.startswith("Eagle3") or d_arch.endswith("Eagle3")
            else f"Eagle3{d_arch}"
        )
        known = eagle3_arch in ModelRegistry.get_supported_archs()
        add(
            ERROR if not known else INFO,
            "drafter-class",
            f"{d_arch} -> {eagle3_arch}: "
            + ("registered in this wheel" if known else "not in this wheel's model registry"),
            dfile,
            "architectures",
        )

    if sc is not None and pair.layer_ids is not None:
        _ask_layer_ids(pair, sc, ModelRegistry, add)


def _wheel_refusal(pair: Pair, registry: Any, ids: list[int]) -> str:
    """The installed target text model's verdict on ``ids``: "" when its
    ``set_aux_hidden_state_layers`` takes them, else the ``ValueError`` it
    raises (the series checks ``0..N`` and duplicates at load).

    Asked of the wheel's own class for the text model (``text_config``'s
    architecture for Kimi-K2.5), on a stand-in instance that carries only
    ``config.num_hidden_layers`` and ``model``."""
    from types import SimpleNamespace

    by_type = TEXT_ARCHS.get(str(pair.text_cfg.get("model_type")))
    archs = pair.text_cfg.get("architectures") or ([by_type] if by_type else None)
    archs = archs or pair.target_cfg.get("architectures") or ["?"]
    cls = registry._try_load_model_cls(archs[0])
    setter = getattr(cls, "set_aux_hidden_state_layers", None)
    if setter is None:
        raise LookupError(f"{archs[0]} has no set_aux_hidden_state_layers in this wheel")
    stub = type(cls.__name__, (SimpleNamespace,), {})(
        config=SimpleNamespace(num_hidden_layers=pair.num_layers), model=SimpleNamespace()
    )
    try:
        setter(stub, tuple(ids))
    except ValueError as exc:
        return _first_line(exc)
    return ""


def _ask_layer_ids(pair: Pair, sc: Any, registry: Any, add: Any) -> None:
    """``layer-ids-wheel``: the ids the wheel's model runner reads
    (``_get_eagle3_aux_layers_from_config``, else the target's default), and
    whether the wheel's target model takes them (``_wheel_refusal``)."""
    dfile = str(pair.drafter_dir / "config.json")
    key = pair.layer_ids_key or LAYER_IDS_KEY
    try:
        from types import SimpleNamespace

        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        used = GPUModelRunner._get_eagle3_aux_layers_from_config(
            SimpleNamespace(speculative_config=sc)
        )
        how = "from the drafter config"
        if not used:
            used, how = tuple(default_layer_ids(pair.num_layers)), "the target's default"
        used_list = list(used)
    except Exception as exc:  # noqa: BLE001
        add(
            NOTE,
            "layer-ids-wheel",
            f"could not ask the model runner which ids it uses: {_first_line(exc)}",
            dfile,
            key,
        )
        return
    try:
        refusal = _wheel_refusal(pair, registry, used_list)
    except Exception as exc:  # noqa: BLE001
        refusal = None
        add(
            NOTE,
            "layer-ids-wheel",
            f"could not ask the target model whether it takes ids {used_list}: {_first_line(exc)}",
            dfile,
            key,
        )
    if refusal:
        add(
            ERROR,
            "layer-ids-wheel",
            f"this wheel's runner reads ids {used_list} ({how}) and "
            f"its target model refuses them at load: {refusal}",
            dfile,
            key,
        )
    elif used_list != pair.layer_ids:
        add(
            ERROR,
            "layer-ids-wheel",
            f"this wheel will use ids {used_list} ({how}), not the "
            f"{pair.layer_ids} the drafter declares in {pair.layer_ids_key or 'no key'}",
            dfile,
            key,
        )
    else:
        add(INFO, "layer-ids-wheel", f"this wheel will use ids {used_list} ({how})", dfile, key)


def _ask_eagle31(pair: Pair, cls: type, add: Any) -> None:
    """``eagle31-wheel``: an EAGLE 3.1 flag the drafter's class never reads is
    silently ignored. Asked of the wheel's own source: the module that
    defines the resolved class must mention the flag."""
    import inspect

    flags = [f for f in EAGLE31_FLAGS if _flag(pair.drafter_cfg, f)]
    if not flags:
        return
    try:
        source = inspect.getsource(sys.modules[cls.__module__])
    except Exception as exc:  # noqa: BLE001
        add(NOTE, "eagle31-wheel", f"could not read {cls.__module__}'s source: {_first_line(exc)}")
        return
    dfile = str(pair.drafter_dir / "config.json")
    ignored = [f for f in flags if f not in source]
    if ignored:
        add(
            ERROR,
            "eagle31-wheel",
            f"{', '.join(ignored)} set (EAGLE 3.1) but this wheel's "
            f"{cls.__module__} never reads it: the head would run as plain EAGLE-3",
            dfile,
            ignored[0],
        )
    else:
        add(INFO, "eagle31-wheel", f"{cls.__module__} reads {', '.join(flags)}", dfile, flags[0])


# --------------------------------------------------------------------------
# Preflight: report
# --------------------------------------------------------------------------


def preflight(target_dir: Path, drafter_dir: Path, use_vllm: bool = True) -> list[Finding]:
    """All findings for a pair: the file rules, then the installed vLLM's answers.

    ``target_dir`` and ``drafter_dir`` are local directories or Hugging Face
    Hub ids (``resolve_model_arg``). Never raises for bad input: a missing
    directory, bad JSON, a truncated or missing safetensors file, or swapped
    arguments become one ``error`` finding (section ``input``) naming the
    file, and nothing else is checked.
    """
    found: list[Finding] = []
    try:
        dirs = []
        for arg, role in ((target_dir, "target"), (drafter_dir, "drafter")):
            path, how = resolve_model_arg(str(arg), role)
            dirs.append(path)
            if how:
                found.append(Finding(INFO, "hub-id", "input", how, str(path)))
        pair = load_pair(dirs[0], dirs[1])
    except InputError as exc:
        return [*found, Finding(ERROR, "input", "input", str(exc))]
    swapped = swapped_arguments(pair)
    if swapped is not None:
        return [*found, swapped]
    found += check_pair(pair)
    count, shards = pair.target_weights
    found.append(
        Finding(
            INFO,
            "target-weights",
            "target",
            f"{count} tensors in {shards} safetensors file(s), each tensor's data inside its file"
            if count
            else "no *.safetensors in the target directory: its weights are not checked",
            str(pair.target_dir),
        )
    )
    if use_vllm:
        found += ask_vllm(pair, found)
    else:
        found.append(
            Finding(INFO, "vllm", "vllm", "installed vLLM not asked (--no-vllm): file rules only")
        )
    return found


def exit_code(findings: Sequence[Finding], strict: bool = False) -> int:
    """0 when no error (warnings allowed), 1 on an error; with ``strict`` warnings count."""
    failing = {ERROR, WARNING} if strict else {ERROR}
    return 1 if any(f.severity in failing for f in findings) else 0


def render(findings: Sequence[Finding], target_dir: Path, drafter_dir: Path, strict: bool) -> str:
    """The human report: one line per finding, then a summary line."""
    lines = [f"preflight: target {target_dir}", f"           drafter {drafter_dir}"]

    def short(path: str) -> str:  # paths relative to the two directories named above
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
        f"{counts[NOTE]} note(s){' (--strict)' if strict else ''}: {verdict(findings, code)}"
    )
    return "\n".join(lines)


def verdict(findings: Sequence[Finding], code: int) -> str:
    """``FAILED``; ``OK``; or, when the installed vLLM was not asked
    (``--no-vllm``), ``OK (file rules only: vLLM not asked)``."""
    if code:
        return "FAILED"
    asked = any(f.rule == "vllm" and f.message.startswith("vllm ") for f in findings)
    return "OK" if asked else "OK (file rules only: vLLM not asked)"


def to_json(findings: Sequence[Finding], target_dir: Path, drafter_dir: Path, strict: bool) -> str:
    """The same findings as one JSON object, for fleet automation."""
    return json.dumps(
        {
            "target": str(target_dir),
            "drafter": str(drafter_dir),
            "strict": strict,
            "exit_code": exit_code(findings, strict),
            "verdict": verdict(findings, exit_code(findings, strict)),
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
    findings = preflight(td, dd, use_vllm)
    print(to_json(findings, td, dd, strict) if as_json else render(findings, td, dd, strict))
    return exit_code(findings, strict)


def add_preflight_arguments(ap: argparse.ArgumentParser) -> None:
    """The preflight's flags, shared with ``python -m vpq preflight``."""
    ap.add_argument("--model", metavar="TARGET_DIR", help="target checkpoint directory")
    ap.add_argument("--drafter", metavar="HEAD_DIR", help="EAGLE-3 head directory")
    ap.add_argument("--json", action="store_true", help="print the findings as JSON")
    ap.add_argument("--strict", action="store_true", help="warnings count as errors")
    ap.add_argument(
        "--no-vllm", action="store_true", help="do not import the installed vLLM; file rules only"
    )


def _guarded_preflight(ns: argparse.Namespace) -> int:
    """``run_preflight`` for parsed flags; an unexpected exception becomes one
    line on stderr and exit 1, never a traceback."""
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
    """The preflight alone (``python -m vpq preflight`` in the repository):
    ``--model`` and ``--drafter`` are required; usage errors exit 2. Needs
    only the standard library, so any Python runs it, and the Python that
    runs it decides which vLLM is asked."""
    ap = argparse.ArgumentParser(
        prog=prog, description="Preflight a target + EAGLE-3 drafter pair offline."
    )
    add_preflight_arguments(ap)
    ns = ap.parse_args(argv)
    if not (ns.model and ns.drafter):
        ap.error("preflight needs --model TARGET_DIR and --drafter HEAD_DIR")
    return _guarded_preflight(ns)


def main(argv: list[str] | None = None) -> int:
    """``verify_install.py``: the install check, or with ``--model`` and
    ``--drafter`` the preflight. Returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="verify_install.py",
        description="Check the installed patched vLLM, or (with --model and --drafter) "
        "preflight a target + EAGLE-3 drafter pair offline.",
    )
    add_preflight_arguments(ap)
    ns = ap.parse_args(argv)  # unknown flags: usage error, exit 2
    if ns.model or ns.drafter:
        if not (ns.model and ns.drafter):
            ap.error("--model and --drafter go together")
        return _guarded_preflight(ns)
    if ns.json or ns.strict or ns.no_vllm:
        ap.error("--json, --strict and --no-vllm need --model and --drafter")
    try:
        check()
    except Failed as exc:
        print(f"verify_install: FAILED: {exc}", file=sys.stderr)
        return 1
    print("verify_install: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
