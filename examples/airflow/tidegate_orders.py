"""The orders example under Airflow 3: backfill daily_revenue, the second half deferred (the
backfill runs detached, the triggerer follows it: no worker slot held), then a DAG scheduled on
the partitions published, and one run each night for the day the model's schedule makes due.

Copy this file into your DAGs folder and point TIDEGATE_PROJECT at the project (the folder
holding tidegate.toml): `tidegate init orders --example orders`, `tidegate build`, `tidegate
deploy daily_revenue`. TIDEGATE_EXECUTABLE names the tidegate to start, when it is not the one
beside Airflow's interpreter nor on PATH."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, PartitionedAssetTimetable, task

from tidegate.airflow import TidegateOperator, model_asset, partition_timetable

PROJECT = os.environ.get("TIDEGATE_PROJECT", "orders")
DAILY_REVENUE = model_asset("daily_revenue", PROJECT)

# a manual release: the first days in the task, the rest deferred
with DAG(dag_id="tidegate_orders", schedule=None, start_date=datetime(2025, 1, 1), catchup=False):
    first_days = TidegateOperator(
        task_id="backfill_first_days",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-01..2025-01-03",
        project=PROJECT,
        retries=2,
    )
    rest = TidegateOperator(
        task_id="backfill_rest_deferred",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-04..2025-01-10",
        project=PROJECT,
        options=["--batch-size", "2"],
        deferrable=True,
        poll_interval=2.0,
        retries=2,
    )
    first_days >> rest

# each night, the day the model's schedule (`0 2 * * *`) makes due: the run's partition key is
# that day (2025-01-01 for the fire of 2025-01-02 02:00), which the operator runs
with DAG(
    dag_id="tidegate_orders_nightly",
    schedule=partition_timetable("day", "0 2 * * *"),
    start_date=datetime(2025, 1, 1),
    catchup=False,
):
    TidegateOperator(task_id="run_due_day", command="run", model="daily_revenue", project=PROJECT)

# downstream: one run per partition of daily_revenue published, its partition key the day
with DAG(
    dag_id="orders_downstream",
    schedule=PartitionedAssetTimetable(assets=DAILY_REVENUE),
    start_date=datetime(2025, 1, 1),
    catchup=False,
):

    @task
    def read_day(**context: object) -> str:
        day = str(context["partition_key"])
        print(f"daily_revenue {day} was published")
        return day

    read_day()
