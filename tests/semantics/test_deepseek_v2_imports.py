"""``deepseek_v2`` binds ``SupportsEagle3``, upstream's EAGLE-3 interface
(patch ``deepseek_v2-import-SupportsEagle3.patch``).

The series' DeepSeek-V2 classes name ``SupportsEagle3`` among their bases,
so without the import the module raises ``NameError`` when it loads, and
with it every DeepSeek-V3 and Kimi-K2.5 target. The module is imported
inside the test, not at collection (tests/semantics/conftest.py imports it
lazily too), so that error is this test's failure alone. On unpatched
0.17.1 the module loads but does not bind the name: the assertion fails.
"""

from __future__ import annotations

from tests.semantics import unpatched


@unpatched.fails_unpatched_with(
    raises="NameError",
    match="SupportsEagle3",
    reason="the error the patch fixes: the series' deepseek_v2 names SupportsEagle3 "
    "without importing it",
    dependency=False,
)
def test_deepseek_v2_binds_upstreams_eagle3_interface() -> None:
    import importlib

    from vllm.model_executor.models import interfaces

    module = importlib.import_module("vllm.model_executor.models.deepseek_v2")
    bound = getattr(module, "SupportsEagle3", None)
    assert bound is interfaces.SupportsEagle3, (
        f"deepseek_v2.SupportsEagle3 is {bound!r}, not vllm's SupportsEagle3 interface"
    )
