"""A ``data:video/jpeg`` URL decodes at most ``num_frames`` frames
(GHSA-pq5c-rjhq-qp7p).

``multimodal/media/video-enforce-num_frames-on-jpeg-data-URLs.patch`` (vllm
PR #38636, in 0.19.0): 0.17.1's ``VideoMediaIO.load_base64`` split a
``video/jpeg`` data URL on every comma and decoded every part as a JPEG
frame, whatever ``num_frames`` (default 32) said, so one request could
make the server decode thousands of frames. The tests send 100 tiny frames
to the real ``VideoMediaIO``, and through ``MediaConnector.fetch_video_async``,
what the OpenAI chat parser awaits for a ``video_url`` part: at most
``num_frames`` come back, the first ones in order; ``-1`` lifts the limit and
``0`` is refused.

From 0.19.0 on ``load_base64`` also returns metadata for this path, and
later releases wrap the result in ``MediaWithBytes``, which unpacks as the
``(frames, metadata)`` tuple; the tests read only the frames.
"""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image
from vllm.multimodal.media.connector import MediaConnector
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.media.video import VideoMediaIO

SENT = 100
#: Frame i is a uniform 8x8 JPEG whose red channel is RED_STEP * i.
RED_STEP = 2


def _jpeg_frames(n: int) -> list[str]:
    frames = []
    for i in range(n):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), color=(RED_STEP * i, 0, 0)).save(buf, format="JPEG")
        frames.append(base64.b64encode(buf.getvalue()).decode("ascii"))
    return frames


def _frames(loaded: Any) -> np.ndarray:
    """The frames of a ``(frames, metadata)`` result (or its MediaWithBytes)."""
    frames, _metadata = loaded
    return np.asarray(frames)


def _assert_first_frames(frames: np.ndarray, count: int) -> None:
    assert frames.shape[0] == count, f"decoded {frames.shape[0]} of {SENT} frames, not {count}"
    red = frames[..., 0].reshape(count, -1).mean(axis=1)
    assert np.allclose(red, RED_STEP * np.arange(count), atol=3), red


def test_a_jpeg_data_url_decodes_at_most_num_frames() -> None:
    data = ",".join(_jpeg_frames(SENT))
    default = VideoMediaIO(ImageMediaIO())
    assert default.num_frames == 32
    _assert_first_frames(_frames(default.load_base64("video/jpeg", data)), 32)
    four = VideoMediaIO(ImageMediaIO(), num_frames=4)
    _assert_first_frames(_frames(four.load_base64("video/jpeg", data)), 4)


@pytest.mark.parametrize(
    ("media_io_kwargs", "count"),
    [(None, 32), ({"video": {"num_frames": 4}}, 4)],
    ids=["default", "media-io-kwargs"],
)
def test_the_chat_parser_s_video_url_fetch_keeps_to_num_frames(
    media_io_kwargs: dict[str, dict[str, Any]] | None, count: int
) -> None:
    url = "data:video/jpeg;base64," + ",".join(_jpeg_frames(SENT))
    connector = MediaConnector(media_io_kwargs=media_io_kwargs)
    loaded = asyncio.run(asyncio.wait_for(connector.fetch_video_async(url), timeout=60))
    _assert_first_frames(_frames(loaded), count)


def test_num_frames_zero_is_refused_and_minus_one_lifts_the_limit() -> None:
    data = ",".join(_jpeg_frames(SENT))
    with pytest.raises(ValueError, match="num_frames must be greater than 0 or -1"):
        VideoMediaIO(ImageMediaIO(), num_frames=0).load_base64("video/jpeg", data)
    unlimited = VideoMediaIO(ImageMediaIO(), num_frames=-1)
    _assert_first_frames(_frames(unlimited.load_base64("video/jpeg", data)), SENT)
