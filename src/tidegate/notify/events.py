"""Builders of the documents tidegate sends: OpenLineage run events and consumer notices.

Pure functions of plain values. The OpenLineage client package pulls in its HTTP transports when
imported (about a third of a second), so import this module where events are built, not at the
top of every command.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import DatasetFacet, RunFacet, error_message_run
from openlineage.client.serde import Serde

from tidegate import __version__

# A URI naming the software and its version; OpenLineage asks for one, not a reachable address.
PRODUCER = f"urn:tidegate:{__version__}"
PARTITIONS_FACET = "tidegate_partitions"
PARTITIONS_FACET_SCHEMA = "urn:tidegate:schema:openlineage-partitions-facet:v1"
NOTICE_SCHEMA = "tidegate.notice/v1"
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
class DatasetRef:
    """A dataset in an event: a model or source table, and the partitions concerned."""

    namespace: str
    name: str
    partitions: tuple[str, ...] = ()
    version: str | None = None


def run_uuid(run_id: str, model: str) -> str:
    """The OpenLineage runId of one model within a tidegate run. A tidegate run may cover
    several models, and OpenLineage wants one runId per job run, so the model is part of it."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{run_id}/{model}"))


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
    producer: str = PRODUCER,
) -> dict[str, Any]:
    """An OpenLineage 2-0-2 RunEvent for `model` (the job, in `namespace`) as a JSON-ready dict.

    `error` is sent as the errorMessage run facet, for FAIL and ABORT.
    """
    run_facets: dict[str, RunFacet] = {}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error, programmingLanguage="SQL", producer=producer
        )
    event = RunEvent(
        eventType=RunState(state),
        eventTime=_utc(at),
        run=Run(runId=run_uuid(run_id, model), facets=run_facets),
        job=Job(namespace=namespace, name=model),
        inputs=[
            InputDataset(namespace=d.namespace, name=d.name, facets=_facets(d, producer))
            for d in inputs
        ],
        outputs=[
            OutputDataset(namespace=d.namespace, name=d.name, facets=_facets(d, producer))
            for d in outputs
        ],
        producer=producer,
    )
    return Serde.to_dict(event)


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
    if not dataset.partitions:
        return {}
    facet = PartitionsFacet(
        partitions=list(dataset.partitions), version=dataset.version, producer=producer
    )
    return {PARTITIONS_FACET: facet}


def _utc(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("event times must be timezone-aware")
    return at.astimezone(timezone.utc).isoformat(timespec="microseconds")
