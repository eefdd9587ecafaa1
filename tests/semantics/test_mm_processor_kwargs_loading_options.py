"""A request's ``mm_processor_kwargs`` cannot choose where the processor,
and the remote code it runs, is loaded from (GHSA-h3rc-6mm3-gc2m).

``config/multimodal-refuse-loading-options-in-a-request-s-mm_processor_kw.patch``
(our smallest equivalent of 0.31.0's ``--trust-request-mm-kwargs``): 0.17.1
merges a request's ``mm_processor_kwargs`` into the keyword arguments
``cached_processor_from_config`` passes to ``AutoProcessor.from_pretrained``,
so ``code_revision`` from a request picked the revision of the checkpoint's
remote code the server imports. The merge is the shipped
``MultiModalConfig.merge_mm_processor_kwargs``; the loading call is the
shipped ``_merge_mm_kwargs`` with the real factory's signature.
"""

from __future__ import annotations

import pytest
from vllm.config.multimodal import MultiModalConfig


@pytest.mark.parametrize("key", ["code_revision", "revision", "trust_remote_code", "token"])
def test_a_request_cannot_set_where_the_processor_is_loaded_from(key: str) -> None:
    config = MultiModalConfig(mm_processor_kwargs={"num_crops": 2})
    merged = config.merge_mm_processor_kwargs({"max_pixels": 1024})
    assert {"num_crops": 2, "max_pixels": 1024}.items() <= merged.items()  # merged as before
    with pytest.raises(Exception) as refused:
        config.merge_mm_processor_kwargs({"max_pixels": 1024, key: "attacker"})
    assert f"mm_processor_kwargs may not set {key}" in str(refused.value), refused.value
