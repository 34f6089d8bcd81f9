"""Spark through Spark Connect: a part of the engine contract runs with `remote`, in a pytest
process of its own whose session is a Spark Connect client (PySpark starts a local Connect
server for `remote = "local[2]"`; a process holds one kind of session only)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.kit import REPO

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CONTRACT_PART = (
    "test_stage_binds_the_partition_bounds",
    "test_merge_upserts_by_key_within_its_partition",
    "test_a_lost_race_for_a_partition_publishes_nothing",
)


def test_a_part_of_the_contract_through_spark_connect() -> None:
    found = subprocess.run(
        [
            sys.executable, "-m", "pytest", "tests/engines/test_spark.py", "-q", "-n", "0",
            "-p", "no:cacheprovider", "-k", " or ".join(CONTRACT_PART),
        ],
        env={**os.environ, "TIDEGATE_TEST_SPARK_REMOTE": "local[2]"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert found.returncode == 0, found.stdout[-4000:]
    [summary] = [line for line in found.stdout.splitlines() if re.search(r"\d+ passed", line)]
    assert summary.startswith("4 passed"), summary
