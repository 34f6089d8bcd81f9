"""How a time grain's partition labels are written, as strftime formats: what Airflow's
partitioned timetables need to name the partitions tidegate writes."""

from __future__ import annotations

from tidegate.domain.partitions import Grain, label_format


def key_format(grain: str) -> str:
    """The strftime format of `grain`'s partition labels; time grains only."""
    found = next((g for g in Grain if g.value == grain and g.is_time), None)
    if found is None:
        times = ", ".join(g.value for g in Grain if g.is_time)
        raise ValueError(
            f"only the time grains ({times}) map to a partitioned timetable, not {grain!r}"
        )
    return label_format(found)
