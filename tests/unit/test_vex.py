"""vex.cdx.json, the VEX document ``publish`` writes from the ledger: valid
CycloneDX 1.6 (the library's strict schema validator, run again here on the
written text), one component with the wheel's exact version, and each
ledger status mapped to the analysis state scanners read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from vpq.wheels import advisories, vex

from tests.support.paths import REPO_ROOT

VERSION = "0.17.1+vpq.3dcd992"
NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _adv(gid: str, status: advisories.Status, **keys: Any) -> advisories.Advisory:
    return advisories.Advisory(
        id=gid,
        severity="high",
        summary=f"summary of {gid}",
        impact="engine-crash",
        affected="< 0.20.0",
        aliases=("CVE-2026-00001", "PYSEC-2026-1"),
        source=(f"https://osv.dev/vulnerability/{gid}",),
        status=status,
        **keys,
    )


ENTRIES = [
    _adv("GHSA-aaaa-aaaa-aaaa", "carried", patch="mod/a.patch", fixed_in="0.20.0"),
    _adv("GHSA-bbbb-bbbb-bbbb", "fixed-upstream", fixed_in="0.17.0"),
    _adv(
        "GHSA-cccc-cccc-cccc",
        "not-affected",
        reason="the feature is absent in 0.17.1",
        justification="code_not_present",
        check="tests/x.py::test_y",
    ),
    _adv("GHSA-dddd-dddd-dddd", "open", mitigation="serve behind a proxy that drops it"),
]


def _doc(entries: list[advisories.Advisory] = ENTRIES) -> dict[str, Any]:
    text = vex.document(entries, "vllm", VERSION, now=NOW)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    return json.loads(text)


def test_one_component_with_the_wheels_exact_version() -> None:
    doc = _doc()
    comp = doc["metadata"]["component"]
    assert comp["purl"] == comp["bom-ref"] == "pkg:pypi/vllm@0.17.1%2Bvpq.3dcd992"
    assert comp["version"] == VERSION and comp["type"] == "library"
    assert "components" not in doc
    assert {v["affects"][0]["ref"] for v in doc["vulnerabilities"]} == {comp["bom-ref"]}


def test_each_status_maps_to_its_analysis_state() -> None:
    got = {v["id"]: v["analysis"] for v in _doc()["vulnerabilities"]}
    assert got["GHSA-aaaa-aaaa-aaaa"]["state"] == "resolved"
    assert got["GHSA-aaaa-aaaa-aaaa"]["response"] == ["update"]
    assert "mod/a.patch" in got["GHSA-aaaa-aaaa-aaaa"]["detail"]
    assert got["GHSA-bbbb-bbbb-bbbb"]["state"] == "resolved"
    assert got["GHSA-cccc-cccc-cccc"]["state"] == "not_affected"
    assert got["GHSA-cccc-cccc-cccc"]["justification"] == "code_not_present"
    assert got["GHSA-dddd-dddd-dddd"]["state"] == "exploitable"
    assert got["GHSA-dddd-dddd-dddd"]["response"] == ["workaround_available"]
    assert "proxy" in got["GHSA-dddd-dddd-dddd"]["detail"]


def test_aliases_are_references_a_scanner_matches_on() -> None:
    (v, *_) = _doc()["vulnerabilities"]
    assert {r["id"] for r in v["references"]} == {"CVE-2026-00001", "PYSEC-2026-1"}
    assert v["source"]["name"] == "GitHub"
    assert v["ratings"] == [{"severity": "high"}]


def test_the_same_ledger_and_version_give_the_same_document() -> None:
    assert vex.document(ENTRIES, "vllm", VERSION, now=NOW) == vex.document(
        ENTRIES, "vllm", VERSION, now=NOW
    )


def test_a_document_the_schema_refuses_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The validator's verdict is what decides: a document it refuses raises."""
    bad = _adv("GHSA-eeee-eeee-eeee", "open", mitigation="x")
    monkeypatch.setattr(vex.JsonV1Dot6, "output_as_string", lambda self, indent: '{"bomFormat": 1}')
    with pytest.raises(vex.VexError, match="schema refuses"):
        vex.document([bad], "vllm", VERSION, now=NOW)


def test_the_real_ledger_gives_a_valid_document() -> None:
    entries = advisories.load(REPO_ROOT)
    doc = _doc(entries)
    assert len(doc["vulnerabilities"]) == len(entries)
