"""Validating OpenLineage events: against the 2-0-2 spec's requirements and those of each
standard facet (tests/notify/data/openlineage-run-event.schema.json, written out from the spec
so that the tests run offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from tidegate.notify.events import PARTITIONS_FACET

SCHEMA = json.loads(
    (Path(__file__).parent / "data" / "openlineage-run-event.schema.json").read_text()
)
# each standard facet tidegate sends, by its key, and the definition its _schemaURL names
FACETS = {
    "errorMessage": "ErrorMessageRunFacet",
    "nominalTime": "NominalTimeRunFacet",
    "parent": "ParentRunFacet",
    "jobType": "JobTypeJobFacet",
    "schema": "SchemaDatasetFacet",
    "symlinks": "SymlinksDatasetFacet",
    "storage": "StorageDatasetFacet",
    "catalog": "CatalogDatasetFacet",
    "dataQualityAssertions": "DataQualityAssertionsDatasetFacet",
    "outputStatistics": "OutputStatisticsOutputDatasetFacet",
    "subset": "OutputSubsetOutputDatasetFacet",
}


def validate(event: dict[str, Any]) -> None:
    """The event against RunEvent, then every facet against the definition it names."""
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    jsonschema.validate(event, SCHEMA, format_checker=checker)
    for key, facet in facets_of(event):
        if key == PARTITIONS_FACET:
            continue
        definition = FACETS[key]
        assert facet["_schemaURL"].startswith("https://openlineage.io/spec/facets/")
        assert facet["_schemaURL"].endswith(f"#/$defs/{definition}"), (key, facet["_schemaURL"])
        jsonschema.validate(
            facet, {**SCHEMA, "$ref": f"#/$defs/{definition}"}, format_checker=checker
        )


def facets_of(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = list(event["run"].get("facets", {}).items())
    found += event["job"].get("facets", {}).items()
    for dataset in event.get("inputs", []) + event.get("outputs", []):
        for group in ("facets", "inputFacets", "outputFacets"):
            found += dataset.get(group, {}).items()
    return found


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def with_lineage_file(project: Path) -> Path:
    config = project / "tidegate.toml"
    config.write_text(
        config.read_text()
        + '\n[[notify]]\nname = "lineage_log"\nkind = "file"\npath = "lineage.jsonl"\n'
        "lineage = true\n"
    )
    return project / "lineage.jsonl"
