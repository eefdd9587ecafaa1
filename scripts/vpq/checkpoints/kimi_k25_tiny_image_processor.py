"""A minimal image processor for the tiny Kimi-K2.5 fixture, loaded as remote code.

The real Kimi-K2.5 checkpoint ships its image processor as remote code
(``preprocessor_config.json`` -> ``auto_map.AutoImageProcessor``), and
vLLM 0.17.1's ``KimiK25ProcessingInfo`` always loads it with
``cached_get_image_processor(model, trust_remote_code=True)``. There is no
built-in class to point at, so ``vpq.checkpoints.fixture`` copies this file, byte for
byte, into the fixture directory and names it in ``auto_map``;
transformers imports it from there, offline.

It provides exactly what vLLM 0.17.1's ``vllm/model_executor/models/
kimi_k25.py`` uses, and nothing else (no video decoding, no padding, no
transparent-background handling):

- ``num_frames_per_chunk``: ``media_proc_cfg["temporal_merge_kernel_size"]``
  (frames per video chunk; read by the dummy-input builder for profiling);
- ``media_tokens_calculator(chunk) -> int``: placeholder tokens for one
  vision chunk, ``(grid_h // m) * (grid_w // m)`` with ``m`` the merge
  kernel; a video chunk is pooled over time, so it costs one frame's tokens;
- ``preprocess(chunks) -> BatchFeature`` with ``pixel_values`` float32
  ``[num_patches, 3, patch, patch]`` (all chunks' patches, each chunk's
  frames in order, each frame row-major) and ``grid_thws`` int64
  ``[num_chunks, 3]`` = (frames, patch rows, patch columns), the layout
  ``MoonViT3dPretrainedModel`` and its ``tpool_patch_merger`` expect;
- ``split_video_chunks``: not supported (raises), the fixture is image-only.

A chunk is ``{"type": "image", "image": PIL.Image}`` or
``{"type": "video_chunk", "video_chunk": [PIL.Image, ...]}``. An image is
resized (bicubic) to whole multiples of ``patch_size * merge_kernel_size``
pixels, at most ``in_patch_limit`` patches in all and
``patch_limit_on_one_side`` patches per side, then normalized with
``image_mean`` / ``image_std`` (pixel values scaled to 0..1 first).

Imports only what a vLLM serving environment has: numpy, PIL, torch,
transformers. Not imported by the ``vpq`` tool itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


# transformers has no type information where mypy runs: its classes are Any.
class KimiK25TinyImageProcessor(BaseImageProcessor):  # type: ignore[misc]
    """Image processor with the interface vLLM's Kimi-K2.5 support calls."""

    model_input_names = ["pixel_values", "grid_thws"]

    def __init__(self, media_proc_cfg: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not media_proc_cfg:
            raise ValueError(
                "media_proc_cfg is required; "
                "vpq.checkpoints.fixture writes it to preprocessor_config.json"
            )
        self.media_proc_cfg = dict(media_proc_cfg)
        self.num_frames_per_chunk = int(self.media_proc_cfg["temporal_merge_kernel_size"])

    def _frames(self, chunk: dict[str, Any]) -> list[Image.Image]:
        kind = chunk.get("type", "image")
        if kind == "image":
            frames = [chunk["image"]]
        elif kind == "video_chunk":
            frames = list(chunk["video_chunk"])
        else:
            raise ValueError(f"unsupported vision chunk type {kind!r}")
        if not frames:
            raise ValueError("a vision chunk needs at least one frame")
        return [f if isinstance(f, Image.Image) else Image.fromarray(np.asarray(f)) for f in frames]

    def grid_hw(self, width: int, height: int) -> tuple[int, int]:
        """Patch rows and columns for a ``width`` x ``height`` pixel frame.

        Both are positive multiples of the merge kernel; their product is at
        most ``in_patch_limit`` (when that allows one merge block).
        """
        cfg = self.media_proc_cfg
        ps, m = int(cfg["patch_size"]), int(cfg["merge_kernel_size"])
        limit, side = int(cfg["in_patch_limit"]), int(cfg["patch_limit_on_one_side"])
        scale = min(
            1.0,
            math.sqrt(limit * ps * ps / max(1, width * height)),
            side * ps / max(1, width),
            side * ps / max(1, height),
        )
        rows = max(m, int(height * scale / ps) // m * m)
        cols = max(m, int(width * scale / ps) // m * m)
        return rows, cols

    def media_tokens_calculator(self, chunk: dict[str, Any]) -> int:
        """Placeholder tokens the vision tower emits for ``chunk``."""
        m = int(self.media_proc_cfg["merge_kernel_size"])
        frame = self._frames(chunk)[0]
        rows, cols = self.grid_hw(*frame.size)
        return (rows // m) * (cols // m)

    def _patchify(self, frames: list[Image.Image]) -> tuple[np.ndarray, tuple[int, int, int]]:
        cfg = self.media_proc_cfg
        ps = int(cfg["patch_size"])
        rows, cols = self.grid_hw(*frames[0].size)
        mean = np.asarray(cfg["image_mean"], dtype=np.float32)
        std = np.asarray(cfg["image_std"], dtype=np.float32)
        arrays = []
        for frame in frames:
            img = frame.convert("RGB").resize((cols * ps, rows * ps), Image.Resampling.BICUBIC)
            arrays.append((np.asarray(img, dtype=np.float32) / 255.0 - mean) / std)
        x = np.stack(arrays)  # [t, H, W, 3]
        t = x.shape[0]
        x = x.reshape(t, rows, ps, cols, ps, 3).transpose(0, 1, 3, 5, 2, 4)
        return x.reshape(t * rows * cols, 3, ps, ps), (t, rows, cols)

    def preprocess(self, chunks: Any, return_tensors: Any = None, **kwargs: Any) -> BatchFeature:
        """``pixel_values`` ``[num_patches, 3, ps, ps]`` and ``grid_thws`` ``[n, 3]``."""
        if not isinstance(chunks, list | tuple):
            chunks = [chunks]
        if not chunks:
            return BatchFeature(data={})
        patches, grids = [], []
        for chunk in chunks:
            p, thw = self._patchify(self._frames(chunk))
            patches.append(torch.from_numpy(p))
            grids.append(thw)
        return BatchFeature(
            data={
                "pixel_values": torch.cat(patches),
                "grid_thws": torch.tensor(grids, dtype=torch.int64),
            }
        )

    def split_video_chunks(self, video: Any) -> list[dict[str, Any]]:
        """Videos are not supported by the tiny fixture: no chunks."""
        raise NotImplementedError("the tiny Kimi-K2.5 fixture processor is image-only")

    def to_dict(self) -> dict[str, Any]:
        """The processor's settings, as ``save_pretrained`` writes them."""
        out: dict[str, Any] = super().to_dict()
        out["media_proc_cfg"] = dict(self.media_proc_cfg)
        out.pop("num_frames_per_chunk", None)
        return out
