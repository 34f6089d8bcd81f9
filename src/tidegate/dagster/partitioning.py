"""How a model's grain becomes a Dagster partitions definition, as plain data (no Dagster
import): the kind of definition, its start and the strftime format of tidegate's own partition
labels, so that a Dagster partition key *is* the tidegate partition label, passed through as is.

| grain                 | Dagster                                   | keys                |
|-----------------------|-------------------------------------------|---------------------|
| hour (with a start)   | HourlyPartitionsDefinition, fmt %Y-%m-%dT%H | 2025-01-01T05     |
| day (with a start)    | DailyPartitionsDefinition, fmt %Y-%m-%d   | 2025-01-01          |
| month (with a start)  | MonthlyPartitionsDefinition, fmt %Y-%m    | 2025-01             |
| key (a declared list) | StaticPartitionsDefinition(keys)          | the declared keys   |
| table                 | unpartitioned                             | (tidegate's `all`)  |
| cursor, range         | unpartitioned                             | (tidegate's run)    |

A time grain without a `start` is unpartitioned too: Dagster's time partitions need a first
partition, and tidegate's scheduler decides what is due.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tidegate.domain.model import ModelSpec
from tidegate.domain.partitions import Grain, label_format


class Kind(str, Enum):
    HOURLY = "hourly"
    DAILY = "daily"
    MONTHLY = "monthly"
    STATIC = "static"
    NONE = "none"  # unpartitioned


_TIME = {Grain.HOUR: Kind.HOURLY, Grain.DAY: Kind.DAILY, Grain.MONTH: Kind.MONTHLY}


@dataclass(frozen=True)
class Partitioning:
    """A model's partitions as Dagster sees them: a time window from `start` (a partition label,
    formatted with `fmt`), a static list of `keys`, or none."""

    kind: Kind
    start: str | None = None
    fmt: str | None = None
    keys: tuple[str, ...] = ()

    @property
    def partitioned(self) -> bool:
        return self.kind is not Kind.NONE


def partitioning(spec: ModelSpec) -> Partitioning:
    """The Dagster partitioning of a model."""
    if spec.grain in _TIME and spec.start is not None:
        return Partitioning(_TIME[spec.grain], start=spec.start, fmt=label_format(spec.grain))
    if spec.grain is Grain.KEY:
        return Partitioning(Kind.STATIC, keys=spec.keys)
    return Partitioning(Kind.NONE)
