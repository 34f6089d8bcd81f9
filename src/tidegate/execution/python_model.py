"""Running a Python model's function for a unit and staging what it returns."""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tidegate.domain.errors import ModelError
from tidegate.domain.model import ModelSpec, Version
from tidegate.domain.partitions import to_utc
from tidegate.engines.base import Engine
from tidegate.execution.arrow_rows import as_arrow, conform, contract_schema
from tidegate.execution.unit import ReadFrom, Unit
from tidegate.project.python_model import load_function


@dataclass(frozen=True)
class WindowContext:
    """The `tidegate.Context` a model's function gets: its window and its declared inputs."""

    model: str
    start: datetime | None
    end: datetime | None
    key: str | None
    engine: Engine
    inputs: Mapping[str, ReadFrom]
    bounds: Mapping[str, Any]

    def read(self, name: str, whole: bool = False) -> Any:
        origin = self.inputs.get(name)
        if origin is None:
            declared = ", ".join(sorted(self.inputs)) or "none"
            raise ModelError(
                f"{self.model} reads {name!r}, which it does not declare in upstream or "
                f"sources (declared: {declared})"
            )
        # a key-list partition has no time window: it reads the whole table
        windowed = not whole and self.key is None
        return self.engine.read_arrow(
            origin.table, origin.time_column if windowed else None, self.bounds
        )


def context_for(
    spec: ModelSpec, unit: Unit, engine: Engine, inputs: Mapping[str, ReadFrom]
) -> WindowContext:
    keyed = bool(spec.keys)
    return WindowContext(
        model=spec.name,
        start=None if keyed else to_utc(unit.window.start),
        end=None if keyed else to_utc(unit.window.end),
        key=unit.partitions[0].label(spec.keys) if keyed else None,
        engine=engine,
        inputs=inputs,
        bounds=unit.bounds(spec),
    )


def stage_python(
    root: Path,
    engine: Engine,
    version: Version,
    unit: Unit,
    staging: str,
    inputs: Mapping[str, ReadFrom],
) -> None:
    """Call the version's function for the unit and stage its rows; ModelError when it raises,
    returns something else than rows, or rows that do not fit the declared columns."""
    spec = version.spec
    if spec.program is None:
        raise TypeError(f"{spec.name} is an SQL model")
    function = load_function(root, spec.path, spec.program)
    schema = contract_schema(spec.columns)
    try:
        result = function(context_for(spec, unit, engine, inputs))
    except ModelError:
        raise
    except Exception as error:  # the model's own code: its error is the attempt's reason
        raise ModelError(f"{_where(root, error)}{type(error).__name__}: {error}") from None
    engine.stage_arrow(staging, conform(as_arrow(result), schema))


def _where(root: Path, error: BaseException) -> str:
    """`path:line: ` of the innermost frame of the project's code that raised, if any."""
    folder = str(root.resolve())
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(folder)]
    if not frames:
        return ""
    frame = frames[-1]
    return f"{Path(frame.filename).relative_to(folder).as_posix()}:{frame.lineno}: "
