"""The VEX document ``vpq publish`` writes beside the wheels: the ledger
(``advisories.toml``) as CycloneDX 1.6 vulnerabilities, so a scanner that
flags ``vllm 0.17.1`` can tell what this wheel did about each advisory.

Written with cyclonedx-python-lib (OWASP's library) and checked with its
strict JSON-schema validator before it is written; never by hand. The
document names one component, the built wheel's exact version (with its
local version label, as ``pip`` and the scanners read it from the installed
METADATA), so it says nothing about an unpatched 0.17.1 on the same host.

Each entry's status maps to an analysis state:

=================  ================  ======================================
ledger status      CycloneDX state   also
=================  ================  ======================================
``carried``        ``resolved``      response ``update``; detail: the patch
``fixed-upstream`` ``resolved``      detail: the release that has the fix
``not-affected``   ``not_affected``  the ledger's ``justification``, reason
``open``           ``exploitable``   response ``workaround_available``;
                                     detail: the mitigation
=================  ================  ======================================
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from cyclonedx.model import XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.bom_ref import BomRef
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.impact_analysis import (
    ImpactAnalysisJustification,
    ImpactAnalysisResponse,
    ImpactAnalysisState,
)
from cyclonedx.model.vulnerability import (
    BomTarget,
    Vulnerability,
    VulnerabilityAnalysis,
    VulnerabilityRating,
    VulnerabilityReference,
    VulnerabilitySeverity,
    VulnerabilitySource,
)
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from vpq.core.errors import VpqError
from vpq.wheels import advisories

#: The file ``publish`` writes next to the wheels (CycloneDX's JSON suffix).
VEX_FILE = "vex.cdx.json"
#: The namespace the serial number is derived in (fixed: same ledger and
#: version, same serial).
_NAMESPACE = uuid.UUID("6f1f1f2e-3c2a-4e55-9d55-2b7f0c1e5a10")
_STATE: dict[advisories.Status, ImpactAnalysisState] = {
    "carried": ImpactAnalysisState.RESOLVED,
    "fixed-upstream": ImpactAnalysisState.RESOLVED,
    "not-affected": ImpactAnalysisState.NOT_AFFECTED,
    "open": ImpactAnalysisState.EXPLOITABLE,
}
_SEVERITY: dict[advisories.Severity, VulnerabilitySeverity] = {
    "critical": VulnerabilitySeverity.CRITICAL,
    "high": VulnerabilitySeverity.HIGH,
    "moderate": VulnerabilitySeverity.MEDIUM,
    "low": VulnerabilitySeverity.LOW,
    "unrated": VulnerabilitySeverity.UNKNOWN,
}


class VexError(VpqError):
    """The VEX document did not pass the CycloneDX schema."""


def _source(vid: str) -> VulnerabilitySource:
    """Where an id is published: GitHub's database for GHSA, OSV for PYSEC, NVD for CVE."""
    if vid.startswith("GHSA-"):
        return VulnerabilitySource(name="GitHub", url=XsUri(f"https://github.com/advisories/{vid}"))
    if vid.startswith("CVE-"):
        return VulnerabilitySource(name="NVD", url=XsUri(f"https://nvd.nist.gov/vuln/detail/{vid}"))
    return VulnerabilitySource(name="OSV", url=XsUri(f"https://osv.dev/vulnerability/{vid}"))


def _analysis(a: advisories.Advisory) -> VulnerabilityAnalysis:
    """The entry's status as CycloneDX's analysis."""
    if a.status == "carried":
        return VulnerabilityAnalysis(
            state=_STATE[a.status],
            responses=[ImpactAnalysisResponse.UPDATE],
            detail=f"fixed by the series' patch {a.patch}",
        )
    if a.status == "fixed-upstream":
        return VulnerabilityAnalysis(
            state=_STATE[a.status], detail=f"the pinned release has {a.fixed_in}'s fix"
        )
    if a.status == "not-affected":
        return VulnerabilityAnalysis(
            state=_STATE[a.status],
            justification=ImpactAnalysisJustification(a.justification),
            detail=a.reason,
        )
    return VulnerabilityAnalysis(
        state=_STATE[a.status],
        responses=[ImpactAnalysisResponse.WORKAROUND_AVAILABLE],
        detail=a.mitigation,
    )


def _vulnerability(a: advisories.Advisory, ref: BomRef) -> Vulnerability:
    """One ledger entry as a CycloneDX vulnerability affecting ``ref``."""
    return Vulnerability(
        bom_ref=a.id,  # fixed, not the library's random one: same ledger, same bytes
        id=a.id,
        source=_source(a.id),
        references=[VulnerabilityReference(id=i, source=_source(i)) for i in a.aliases],
        ratings=[VulnerabilityRating(severity=_SEVERITY[a.severity])],
        description=a.summary,
        advisories=[],
        analysis=_analysis(a),
        affects=[BomTarget(ref=ref.value or "")],
    )


def component(project: str, version: str) -> Component:
    """The wheel as a CycloneDX library component, its bom-ref its purl."""
    purl = PackageURL(type="pypi", name=project, version=version)
    return Component(
        name=project,
        version=version,
        type=ComponentType.LIBRARY,
        purl=purl,
        bom_ref=BomRef(purl.to_string()),
    )


def document(
    entries: Sequence[advisories.Advisory], project: str, version: str, now: datetime | None = None
) -> str:
    """The VEX document for ``project`` ``version`` (the wheel's own) as
    CycloneDX 1.6 JSON, validated against the schema.

    Raises:
        VexError: the schema refuses it (every error, in one message).
    """
    comp = component(project, version)
    bom = Bom(
        serial_number=uuid.uuid5(_NAMESPACE, f"{project}=={version}:{[a.id for a in entries]}"),
    )
    bom.metadata.timestamp = now or datetime.now(UTC)
    bom.metadata.component = comp  # the VEX's subject; listing it in components too would clash
    bom.register_dependency(comp, [])  # its dependencies are not this document's subject
    for a in entries:
        bom.vulnerabilities.add(_vulnerability(a, comp.bom_ref))
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise VexError(f"{VEX_FILE}: CycloneDX 1.6 schema refuses the document: {error}")
    return text + "\n"
