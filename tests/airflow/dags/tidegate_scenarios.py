"""DAGs of the Airflow tests' scenarios (the project is TIDEGATE_PROJECT): refusals that fail
without retry, a busy model waited for on the triggerer or retried by Airflow, a deferred backfill
stopped on request."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from tidegate.airflow import TidegateOperator

PROJECT = os.environ["TIDEGATE_PROJECT"]
START = datetime(2025, 1, 1)
# a retryable failure would be retried at once, twice: a third try shows it was
RETRIED = {"retries": 2, "retry_delay": timedelta(seconds=0)}

with DAG(dag_id="tidegate_refusals", schedule=None, start_date=START, catchup=False):
    TidegateOperator(
        task_id="refused",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-01..2025-01-02",
        project=PROJECT,
        **RETRIED,
    )
    TidegateOperator(
        task_id="refused_deferred",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-01..2025-01-02",
        project=PROJECT,
        deferrable=True,
        **RETRIED,
    )
    TidegateOperator(
        task_id="usage",
        command="backfill",
        model="no_such_model",
        partitions="2025-01-01..2025-01-02",
        project=PROJECT,
        **RETRIED,
    )

with DAG(dag_id="tidegate_busy_deferred", schedule=None, start_date=START, catchup=False):
    TidegateOperator(
        task_id="backfill",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-01..2025-01-02",
        project=PROJECT,
        deferrable=True,
        poll_interval=0.5,
        busy_delay=0.5,
        busy_attempts=600,
    )

with DAG(dag_id="tidegate_busy_retried", schedule=None, start_date=START, catchup=False):
    TidegateOperator(
        task_id="backfill",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-03..2025-01-04",
        project=PROJECT,
        retries=5,
        retry_delay=timedelta(seconds=1),
    )

with DAG(dag_id="tidegate_stopped", schedule=None, start_date=START, catchup=False):
    TidegateOperator(
        task_id="backfill",
        command="backfill",
        model="daily_revenue",
        partitions="2025-01-01..2025-03-31",
        project=PROJECT,
        options=["--batch-size", "1"],
        deferrable=True,
        poll_interval=0.5,
    )
