"""How semantic tests fail on unpatched vLLM 0.17.1 when not on their own
assertion: ``fails_unpatched_with`` markers shared by several files.

tests/integration/test_semantics.py requires every semantic test to fail on
0.17.1 on an assertion or on the exception its marker declares (read by
``vpq.envs.probe_report``); a ``dependency`` failure (the test stops before its
check because another part of the series is missing) is counted apart.
Each marker's reason is the one line the issue asks for.
"""

from __future__ import annotations

import pytest

fails_unpatched_with = pytest.mark.fails_unpatched_with

#: The aux-state interface itself is what deepseek_v2-collect-eagle3-aux-
#: hidden-states.patch adds; the tests call it.
AUX_INTERFACE = fails_unpatched_with(
    raises="AttributeError",
    match=r"(set_aux_hidden_state_layers|get_eagle3_aux_hidden_state_layers)",
    reason="0.17.1's DeepSeek/Kimi-K2.5 models have no EAGLE-3 aux-state methods to call",
)

#: config/speculative-allow-eagle3-for-deepseek-and-kimi.patch.
EAGLE3_GATE = fails_unpatched_with(
    raises="ValidationError",
    match="eagle3 is only supported for",
    reason="0.17.1's SpeculativeConfig refuses EAGLE-3 on a DeepSeek/Kimi target "
    "before the tested code runs (the gate patch)",
    dependency=True,
)

#: model_executor/models/deepseek_eagle3-add-mla-eagle3-drafter.patch.
MLA_DRAFTER_MODULE = fails_unpatched_with(
    raises="ImportError",
    match="deepseek_eagle3",
    reason="0.17.1 has no deepseek_eagle3 module: the MLA drafter is the series' own",
)
MLA_DRAFTER_ARCH = fails_unpatched_with(
    raises="ValidationError",
    match=r"Eagle3DeepseekV2ForCausalLM'?\]? are not supported",
    reason="0.17.1's registry has no Eagle3DeepseekV2ForCausalLM: the MLA drafter is the "
    "series' own",
    dependency=True,
)

#: config/speculative-eagle3-pipeline-parallel-only-where-aux-states-travel.patch.
PIPELINE_PARALLEL_REFUSED = fails_unpatched_with(
    raises="NotImplementedError",
    match="Pipeline parallelism is not supported for this model",
    reason="0.17.1 refuses every EAGLE-3 head under pipeline parallel at config time, "
    "before the tested rule (the pipeline-parallel config patch)",
    dependency=True,
)
