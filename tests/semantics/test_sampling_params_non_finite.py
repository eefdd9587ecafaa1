"""NaN and infinite ``temperature`` / ``repetition_penalty`` are refused
(GHSA-7h4p-rffg-7823).

``sampling_params-refuse-non-finite-temperature-and-repetition_pen.patch``
(vllm PR #45116, in 0.24.0): 0.17.1 checks ``temperature < 0.0`` and
``repetition_penalty <= 0.0``, comparisons NaN never satisfies, so
``temperature=NaN`` (JSON's ``NaN`` / ``Infinity``, which the server's JSON
parser accepts) reached the sampler, where a GPU sampling kernel may fault
and take the engine down. Now both are refused before the request is queued.
"""

from __future__ import annotations

import math

import pytest
from vllm.sampling_params import SamplingParams

NON_FINITE = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
def test_a_non_finite_temperature_is_refused(value: float) -> None:
    assert SamplingParams(temperature=1.5).temperature == 1.5  # finite: served as before
    with pytest.raises(Exception, match="temperature must be a finite number"):
        SamplingParams(temperature=value)


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
def test_a_non_finite_repetition_penalty_is_refused(value: float) -> None:
    assert SamplingParams(temperature=1.0, repetition_penalty=3.0).repetition_penalty == 3.0
    with pytest.raises(Exception, match="repetition_penalty must be a finite number"):
        SamplingParams(temperature=1.0, repetition_penalty=value)
