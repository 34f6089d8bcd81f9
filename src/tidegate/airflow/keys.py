"""How a time grain's partition labels are written, as strftime formats: what Airflow's
partitioned timetables need to name the partitions tidegate writes."""

from __future__ import annotations

# the labels of docs/reference (tidegate.domain.partitions): 2025-01-01T05, 2025-01-01, 2025-01
KEY_FORMATS = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}


def key_format(grain: str) -> str:
    """The strftime format of `grain`'s partition labels; time grains only."""
    found = KEY_FORMATS.get(grain)
    if found is None:
        raise ValueError(
            f"only the time grains ({', '.join(KEY_FORMATS)}) map to a partitioned timetable, "
            f"not {grain!r}"
        )
    return found
