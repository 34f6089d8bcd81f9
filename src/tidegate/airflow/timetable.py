"""A model's grain and schedule as Airflow's partitioned scheduling: one DAG run per fire of the
model's cron schedule, for the partition that fire makes due (the one before it), its partition
key the partition's label in tidegate's format (2025-01-01, 2025-01, 2025-01-01T05)."""

from __future__ import annotations

from airflow.sdk import CronPartitionTimetable

from tidegate.airflow.keys import key_format


def partition_timetable(
    grain: str, schedule: str, *, timezone: str = "UTC", run_offset: int = -1
) -> CronPartitionTimetable:
    """Runs at each fire of `schedule` (the model's cron), for the partition of `grain` the
    previous fire falls in (`run_offset=-1`: the fire of 02:00 on 2025-01-02 runs 2025-01-01 of a
    day model scheduled `0 2 * * *`). The run's `partition_key` is the partition's label, which a
    TidegateOperator without `partitions` runs."""
    return CronPartitionTimetable(
        schedule, timezone=timezone, run_offset=run_offset, key_format=key_format(grain)
    )
