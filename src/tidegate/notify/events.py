"""Builders of the documents tidegate sends: OpenLineage run events and consumer notices.

Pure functions of plain values. The OpenLineage client package pulls in its HTTP transports when
imported (about a third of a second), so import this module where events are built, not at the
top of every command.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, cast

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    OutputDatasetFacet,
    RunFacet,
    base_subset_dataset,
    catalog_dataset,
    data_quality_assertions_dataset,
    error_message_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    parent_run,
    schema_dataset,
    storage_dataset,
    symlinks_dataset,
)
from openlineage.client.serde import Serde

from tidegate import __version__

# A URI naming the software and its version; OpenLineage asks for one, not a reachable address.
PRODUCER = f"urn:tidegate:{__version__}"
PARTITIONS_FACET = "tidegate_partitions"
PARTITIONS_FACET_SCHEMA = "urn:tidegate:schema:openlineage-partitions-facet:v1"
NOTICE_SCHEMA = "tidegate.notice/v1"
# the name tidegate's Iceberg catalog has for its readers
ICEBERG_CATALOG = "tidegate"
# uuid5 namespace of OpenLineage run ids: the same tidegate run and model always give the same id,
# so a re-sent event (after a crash between send and mark) is recognisably the same run.
RUN_NAMESPACE = uuid.UUID("5d0b8f1e-4a53-5c55-9a8f-7469646567a7")

LineageState = Literal["START", "COMPLETE", "FAIL", "ABORT"]
NoticeKind = Literal["taint", "reread", "published", "changed"]


@attr.define
class PartitionsFacet(DatasetFacet):
    """Which partitions of a dataset the run wrote (outputs) or read (inputs), and with which
    version of the model."""

    partitions: list[str]
    version: str | None = attr.field(default=None)

    _additional_skip_redact: ClassVar[list[str]] = ["partitions", "version"]

    @staticmethod
    def _get_schema() -> str:
        return PARTITIONS_FACET_SCHEMA


@dataclass(frozen=True)
class Assertion:
    """A check of the rows a run published: passed in every partition, or not."""

    name: str
    kind: str
    success: bool
    severity: str
    column: str | None = None
    detail: str | None = None  # the first failure's message


@dataclass(frozen=True)
class DatasetRef:
    """A dataset in an event: a model or source table, and the partitions concerned. An
    output may carry what was written: the partition column (for the subset facet), the rows,
    the columns (name, type) and the checks' outcomes."""

    namespace: str
    name: str
    partitions: tuple[str, ...] = ()
    version: str | None = None
    partition_column: str | None = None
    rows: int | None = None
    columns: tuple[tuple[str, str], ...] = ()
    assertions: tuple[Assertion, ...] = ()
    # (namespace, name) of the same table in its catalog; the storage layer ("iceberg")
    symlink: tuple[str, str] | None = None
    storage: str | None = None


@dataclass(frozen=True)
class ParentRef:
    """The run that started this one (an orchestrator's task), and the root of its tree."""

    namespace: str
    name: str
    run_id: str
    root: ParentRef | None = None


def run_uuid(run_id: str, model: str) -> str:
    """The OpenLineage runId of one model within a tidegate run. A tidegate run may cover
    several models, and OpenLineage wants one runId per job run, so the model is part of it."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{run_id}/{model}"))


def parent_from(environ: Mapping[str, str]) -> ParentRef | None:
    """The parent run an orchestrator names in the environment, as OpenLineage's integrations
    pass it on (`OPENLINEAGE_PARENT_ID`, and `OPENLINEAGE_ROOT_PARENT_ID`, each
    `NAMESPACE/JOB/RUN_UUID`); None when unset or malformed."""
    parent = _run_path(environ.get("OPENLINEAGE_PARENT_ID", ""))
    if parent is None:
        return None
    root = _run_path(environ.get("OPENLINEAGE_ROOT_PARENT_ID", ""))
    return ParentRef(*parent, root=None if root is None else ParentRef(*root))


def _run_path(value: str) -> tuple[str, str, str] | None:
    namespace, _, rest = value.strip().partition("/")
    name, _, run_id = rest.rpartition("/")
    if not namespace or not name:
        return None
    try:
        return namespace, name, str(uuid.UUID(run_id))
    except ValueError:
        return None


def run_event(
    state: LineageState,
    *,
    namespace: str,
    model: str,
    run_id: str,
    at: datetime,
    inputs: Sequence[DatasetRef] = (),
    outputs: Sequence[DatasetRef] = (),
    error: str | None = None,
    nominal: tuple[datetime, datetime] | None = None,
    parent: ParentRef | None = None,
    producer: str = PRODUCER,
) -> dict[str, Any]:
    """An OpenLineage 2-0-2 RunEvent for `model` (the job, in `namespace`) as a JSON-ready dict.

    `error` is sent as the errorMessage run facet, for FAIL and ABORT; `nominal` (the windows
    the run covered, UTC) as nominalTime; `parent` as the parent run facet.
    """
    run_facets: dict[str, RunFacet] = {}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error, programmingLanguage="SQL", producer=producer
        )
    if nominal is not None:
        run_facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=_utc(nominal[0]), nominalEndTime=_utc(nominal[1]), producer=producer
        )
    if parent is not None:
        run_facets["parent"] = _parent_facet(parent, producer)
    job_facets: dict[str, JobFacet] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="TIDEGATE", jobType="MODEL", producer=producer
        )
    }
    event = RunEvent(
        eventType=RunState(state),
        eventTime=_utc(at),
        run=Run(runId=run_uuid(run_id, model), facets=run_facets),
        job=Job(namespace=namespace, name=model, facets=job_facets),
        inputs=[
            InputDataset(namespace=d.namespace, name=d.name, facets=_facets(d, producer))
            for d in inputs
        ],
        outputs=[
            OutputDataset(
                namespace=d.namespace,
                name=d.name,
                facets=_facets(d, producer),
                outputFacets=_output_facets(d, producer),
            )
            for d in outputs
        ],
        producer=producer,
    )
    return Serde.to_dict(event)


def _parent_facet(parent: ParentRef, producer: str) -> parent_run.ParentRunFacet:
    root = parent.root or parent
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id),
        job=parent_run.Job(namespace=parent.namespace, name=parent.name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root.run_id),
            job=parent_run.RootJob(namespace=root.namespace, name=root.name),
        ),
        producer=producer,
    )


def notice(
    kind: NoticeKind,
    *,
    model: str,
    partitions: Sequence[str],
    reason: str | None,
    run_id: str | None,
    at: datetime,
) -> dict[str, Any]:
    """What a registered consumer of `model` is told: these partitions are tainted, should be
    re-read, or were published."""
    return {
        "schema": NOTICE_SCHEMA,
        "kind": kind,
        "model": model,
        "partitions": list(partitions),
        "reason": reason,
        "run_id": run_id,
        "at": _utc(at),
    }


def _facets(dataset: DatasetRef, producer: str) -> dict[str, DatasetFacet]:
    facets: dict[str, DatasetFacet] = {}
    if dataset.partitions:
        facets[PARTITIONS_FACET] = PartitionsFacet(
            partitions=list(dataset.partitions), version=dataset.version, producer=producer
        )
    if dataset.columns:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=name, type=kind)
                for name, kind in dataset.columns
            ],
            producer=producer,
        )
    if dataset.assertions:
        # checks of the rows written, run before they were published: OpenLineage defines its
        # assertions facet for inputs only, so the output's dataset facets carry it
        facets["dataQualityAssertions"] = cast(
            DatasetFacet, _assertions(dataset.assertions, producer)
        )
    if dataset.symlink is not None:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(
                    namespace=dataset.symlink[0], name=dataset.symlink[1], type="TABLE"
                )
            ],
            producer=producer,
        )
    if dataset.storage is not None:
        facets["storage"] = storage_dataset.StorageDatasetFacet(
            storageLayer=dataset.storage, fileFormat="parquet", producer=producer
        )
        facets["catalog"] = catalog_dataset.CatalogDatasetFacet(
            framework=dataset.storage,
            type="sql",
            name=ICEBERG_CATALOG,
            metadataUri=dataset.symlink[0] if dataset.symlink else None,
            source="tidegate",
            producer=producer,
        )
    return facets


def _output_facets(dataset: DatasetRef, producer: str) -> dict[str, OutputDatasetFacet]:
    facets: dict[str, OutputDatasetFacet] = {}
    if dataset.partitions and dataset.partition_column is not None:
        partitions = [
            base_subset_dataset.Partition(
                dimensions={dataset.partition_column: label}, identifier=label
            )
            for label in dataset.partitions
        ]
        facets["subset"] = base_subset_dataset.OutputSubsetOutputDatasetFacet(
            outputCondition=base_subset_dataset.PartitionSubsetCondition(partitions=partitions),
            producer=producer,
        )
    if dataset.rows is not None:
        facets["outputStatistics"] = (
            output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=dataset.rows, producer=producer
            )
        )
    return facets


def _assertions(
    assertions: Sequence[Assertion], producer: str
) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=[
            data_quality_assertions_dataset.Assertion(
                assertion=a.kind,
                success=a.success,
                column=a.column,
                severity=a.severity,
                name=a.name,
                actual=a.detail,
            )
            for a in assertions
        ],
        producer=producer,
    )


def _utc(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("event times must be timezone-aware")
    return at.astimezone(timezone.utc).isoformat(timespec="microseconds")
