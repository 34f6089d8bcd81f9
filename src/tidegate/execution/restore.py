"""Staging what an earlier attempt published, from the files its publish wrote (a warehouse
that keeps them: Iceberg's snapshots), instead of computing the model again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from tidegate.domain.errors import EngineError
from tidegate.domain.model import Version
from tidegate.domain.run import Attempt
from tidegate.engines.base import Engine, Restorer
from tidegate.execution.executor import publish_target
from tidegate.execution.unit import ReadFrom, Unit


@dataclass(frozen=True)
class RestoreStager:
    """Stages each partition's rows as its `origins` attempt published them, and proves them
    the same: their checksum must equal the one that attempt recorded."""

    origins: Mapping[int, Attempt]

    def stage(
        self,
        engine: Engine,
        version: Version,
        unit: Unit,
        staging: str,
        inputs: Mapping[str, ReadFrom],
    ) -> None:
        if not engine.capabilities.restores:
            raise EngineError("this warehouse keeps no earlier publish to restore")
        if len(unit.partitions) != 1:
            raise ValueError("a restore stages one partition at a time")
        origin = self.origins[unit.partitions[0].start]
        spec = version.spec
        cast(Restorer, engine).stage_restored(
            staging, publish_target(spec, rebuild=True), origin.attempt_id, unit.bounds(spec)
        )
        found = engine.checksum(staging, [c.name for c in spec.columns])
        if str(found) != origin.checksum:
            engine.drop_staging(staging)
            raise EngineError(
                f"the files attempt {origin.attempt_id} wrote hold {found}, not the "
                f"{origin.checksum} it published; nothing was restored"
            )

    def interrupt(self) -> None:
        """Nothing runs outside the warehouse."""
